import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleLambda, sdkImportsByKind } from '../../bench/control-plane';
import { parseConfig } from '../../lib/config';

describe('a Lambda bundle built the house way', () => {
  it('carries the resolved configuration in its code, not in an environment variable', async () => {
    const config = parseConfig({ teams: [{ id: 'bundle-check', monthlyBudgetUsd: 123 }] });
    const outfile = join(mkdtempSync(join(tmpdir(), 'bundle-')), 'index.mjs');

    await bundleLambda('lambdas/finalize/handler.ts', outfile, config);
    const code = readFileSync(outfile, 'utf8');

    // Booleans, not toContain: a failure must not print a half-megabyte bundle.
    expect(code.includes('bundle-check'), 'team id from the config is in the bundle').toBe(true);
    expect(code.includes('process.env.TRAINYARD_CONFIG'), 'the define replaced every read').toBe(false);
  });

  // These handlers never read or write the workspace bucket (their factories take no `workspace`), so loading the
  // S3 client at their cold start would be pure waste; DynamoDB they all use on every call, so it stays static and
  // shows that the static imports are being read at all.
  it.each(['interruption', 'batch-events', 'cost-gate', 'pause'])(
    'the %s handler does not load @aws-sdk/client-s3 at cold start',
    async (handler) => {
      const outfile = join(mkdtempSync(join(tmpdir(), 'bundle-')), 'index.mjs');

      const metafile = await bundleLambda(`lambdas/${handler}/handler.ts`, outfile, parseConfig({}));
      const output = Object.values(metafile.outputs)[0];
      const { atInit } = sdkImportsByKind(output?.imports ?? []);

      expect(atInit).toContain('@aws-sdk/client-dynamodb');
      expect(atInit).not.toContain('@aws-sdk/client-s3');
      expect(atInit).not.toContain('@aws-sdk/s3-request-presigner');
    },
  );

  // Node's ESM loader lexes every CommonJS module an `import` reaches; the SDK packages are CommonJS, so a handler
  // that imports them instead of requiring them starts ~50 ms slower (see lambdas/shared/dynamo.ts).
  it('loads the SDK packages it needs at cold start with require, never with a static import', async () => {
    const outfile = join(mkdtempSync(join(tmpdir(), 'bundle-')), 'index.mjs');

    const metafile = await bundleLambda('lambdas/interruption/handler.ts', outfile, parseConfig({}));
    const sdk = (Object.values(metafile.outputs)[0]?.imports ?? []).filter(
      (i) => i.external && i.path.startsWith('@aws-sdk/') && i.kind !== 'dynamic-import',
    );

    expect(sdk.map((i) => `${i.path} ${i.kind}`).sort()).toEqual([
      '@aws-sdk/client-dynamodb require-call',
      '@aws-sdk/lib-dynamodb require-call',
    ]);
  });
});
