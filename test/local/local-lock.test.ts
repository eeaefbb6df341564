// `trainyard local` claims its folder (local.lock) before any engine starts: a second start there is refused with the
// message, not a crash inside the database's lock, and a claim left by a process that is gone is taken over.
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../lib/cli/commands';
import { EXIT_CODES } from '../../lib/cli/exit-codes';
import { localCommands } from '../../lib/local/cli-commands';

const dir = mkdtempSync(join(tmpdir(), 'trainyard-local-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A Python that passes the harness check, so `local` goes on to claim its folder. */
const python = join(dir, 'python');
writeFileSync(python, '#!/bin/sh\nexit 0\n');
chmodSync(python, 0o755);

async function local(folder: string): Promise<{ code: number; stderr: string }> {
  let stderr = '';
  const env = { TRAINYARD_PYTHON: python, TRAINYARD_LOCAL_DIR: folder, PATH: process.env.PATH };
  const io = {
    stdout: () => undefined,
    stderr: (text: string) => {
      stderr += text;
    },
    isTTY: false,
    confirm: async () => false,
  };
  const code = await runCli(['local'], { io, env, cwd: dir }, [localCommands({ env, cwd: dir })]);
  return { code, stderr };
}

describe('local.lock', () => {
  it('refuses a second local mode while the one holding the folder lives, before starting anything', async () => {
    const folder = join(dir, 'held');
    // A live process named like local mode holds the folder (bash's exec -a sets its command line).
    const holder = spawn('bash', ['-c', 'exec -a node-bin-trainyard.ts-local sleep 30'], { stdio: 'ignore' });
    try {
      await new Promise((done) => setTimeout(done, 100));
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, 'local.lock'), `${holder.pid}\n`);

      const second = await local(folder);

      expect(second.code).toBe(EXIT_CODES.usage);
      expect(second.stderr).toContain(
        `local mode is already running for ${folder} (pid ${holder.pid}, starting); stop it with \`trainyard local stop\` or use another --dir`,
      );
    } finally {
      holder.kill('SIGKILL');
    }
  });
});
