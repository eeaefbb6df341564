import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleLambda, lambdaEntries, sdkImportsByKind } from '../../bench/control-plane';
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

  // Every handler needs DynamoDB on every call and speaks to it through lambdas/shared/dynamo.ts, which signs its own
  // requests; the SDK packages (100 ms and more each to load) come in with `import()` only on the paths that use them.
  it.each(lambdaEntries().map((e) => e.handler))(
    'the %s handler loads no AWS SDK package at cold start',
    async (handler) => {
      const outfile = join(mkdtempSync(join(tmpdir(), 'bundle-')), 'index.mjs');

      const metafile = await bundleLambda(`lambdas/${handler}/handler.ts`, outfile, parseConfig({}));
      const { atInit, onFirstUse } = sdkImportsByKind(Object.values(metafile.outputs)[0]?.imports ?? []);

      expect(atInit).toEqual([]);
      // The imports are being read at all: every handler can reach the S3 client through the shared wiring.
      expect(onFirstUse).toContain('@aws-sdk/client-s3');
      expect(onFirstUse).not.toContain('@aws-sdk/client-dynamodb');
    },
  );
});
