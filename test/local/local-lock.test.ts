// `trainyard local` claims its folder (local.lock) before any engine starts: a second start there is refused with the
// message, not a crash inside the database's lock, and a claim left by a process that is gone is taken over.
import { spawn } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
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

/**
 * `trainyard local` on `folder`, with `isAlive` in place of the process check where given. Were the folder (wrongly)
 * claimed there, an unknown team stops local mode before any engine starts.
 */
async function local(folder: string, isAlive?: (pid: number) => boolean): Promise<{ code: number; stderr: string }> {
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
  const deps = { env, cwd: dir, ...(isAlive && { isAlive }) };
  const code = await runCli(['local'], { io, ...deps }, [
    localCommands(isAlive ? { ...deps, localModeOptions: { team: 'no-such-team' } } : deps),
  ]);
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

  it('makes the folder owner-only when it claims it, and closes one an earlier start left open', async () => {
    // Tables, objects (code bundles, checkpoints) and logs all live under it; other users of the machine share /tmp.
    const fresh = join(dir, 'fresh');
    await local(fresh, () => false);
    expect(statSync(fresh).mode & 0o777).toBe(0o700);

    const open = join(dir, 'open');
    mkdirSync(open, { mode: 0o755 });
    chmodSync(open, 0o755);
    await local(open, () => false);
    expect(statSync(open).mode & 0o777).toBe(0o700);
  });

  it('does not take over a stale lock another start took over first, and leaves that start its claim', async () => {
    const folder = join(dir, 'raced');
    mkdirSync(folder, { recursive: true });
    const lock = join(folder, 'local.lock');
    const crashed = 2_000_000_001; // killed with SIGKILL: gone
    const other = 2_000_000_002; // another `trainyard local` started at the same moment: alive
    writeFileSync(lock, `${crashed}\n`);
    // While this start checks the crashed holder, the other one takes the folder over.
    const isAlive = (pid: number): boolean => {
      if (pid === crashed) {
        rmSync(lock, { force: true });
        writeFileSync(lock, `${other}\n`, { flag: 'wx' });
        return false;
      }
      return pid === other;
    };
    const { code, stderr } = await local(folder, isAlive);

    expect(code).toBe(EXIT_CODES.usage);
    expect(stderr).toContain(`local mode is already running for ${folder} (pid ${other}, starting)`);
    expect(existsSync(lock) ? readFileSync(lock, 'utf8').trim() : '(no lock)').toBe(String(other));
    // Nothing is left beside it: the moved-aside lock and this start's own pid file are gone.
    expect(readdirSync(folder)).toEqual(['local.lock']);
  });
});
