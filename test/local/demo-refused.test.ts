// `trainyard demo` refused before local mode starts (a bad --config or --team) leaves no folder of its own behind.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../lib/cli/commands';
import { EXIT_CODES } from '../../lib/cli/exit-codes';
import { localCommands } from '../../lib/local/cli-commands';

const dir = mkdtempSync(join(tmpdir(), 'trainyard-demo-refused-'));
const temporary = join(dir, 'tmp');
const originalTmp = process.env.TMPDIR;
afterAll(() => {
  if (originalTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = originalTmp;
  rmSync(dir, { recursive: true, force: true });
});

/** A Python that passes the harness check (and the torch check), so the demo goes on to make its folder. */
const python = join(dir, 'python');
writeFileSync(python, '#!/bin/sh\nexit 0\n');
chmodSync(python, 0o755);

async function demo(args: string[], team?: string): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const deps = { env: { TRAINYARD_PYTHON: python, PATH: process.env.PATH }, cwd: dir };
  const io = {
    stdout: () => undefined,
    stderr: (text: string) => {
      stderr += text;
    },
    isTTY: false,
    confirm: async () => false,
  };
  const code = await runCli(['demo', ...args], { io, ...deps }, [
    localCommands({ ...deps, ...(team && { localModeOptions: { team } }) }),
  ]);
  return { code, stderr };
}

describe('demo refused before local mode starts', () => {
  it('leaves no temporary folder for a configuration that does not parse, nor for a team it does not define', async () => {
    rmSync(temporary, { recursive: true, force: true });
    writeFileSync(join(dir, 'bad.json'), '{"teams": []}');
    mkdirSync(temporary);
    process.env.TMPDIR = temporary;

    const badConfig = await demo(['--config', join(dir, 'bad.json')]);
    const badTeam = await demo([], 'no-such-team');

    expect(badConfig.code).toBe(EXIT_CODES.usage);
    expect(badTeam.code).not.toBe(EXIT_CODES.ok);
    expect(badTeam.stderr).toContain('no-such-team');
    expect(readdirSync(temporary)).toEqual([]);
  });
});
