import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleLambda } from '../../bench/control-plane';
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
});
