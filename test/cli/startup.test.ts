// What the CLI loads before a command runs: the commands that talk to an API must not pay for local mode's engines
// (dynalite, s3rver), its state machine runner or the CDK, which `trainyard local start` and `demo` load themselves.

import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** The packages among `heavy` that importing `modules` (in a fresh process, under tsx) loads. */
function packagesLoadedBy(modules: readonly string[], heavy: readonly string[]): string[] {
  const script = `
    for (const m of ${JSON.stringify(modules)}) await import(m);
    const { createRequire } = await import('node:module');
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    const heavy = ${JSON.stringify(heavy)};
    process.stdout.write(JSON.stringify(heavy.filter((p) => loaded.some((k) => k.includes('/node_modules/' + p + '/')))));
  `;
  const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[];
}

const LOCAL_MODE_PACKAGES = ['dynalite', 's3rver', 'aws-local-stepfunctions', 'aws-cdk-lib'];

describe('the CLI at start', () => {
  it('loads none of local mode’s engines, runner or the CDK', () => {
    expect(packagesLoadedBy(['./lib/cli/commands.ts', './lib/local/cli-commands.ts'], LOCAL_MODE_PACKAGES)).toEqual([]);
  });

  it('would see them if they were loaded (local mode itself loads them)', () => {
    expect(packagesLoadedBy(['./lib/local/local-mode.ts'], LOCAL_MODE_PACKAGES)).toEqual(
      expect.arrayContaining(['dynalite', 's3rver', 'aws-cdk-lib']),
    );
  });
});
