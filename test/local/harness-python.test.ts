// Local mode refuses an interpreter the job harness cannot run under, before it starts anything: otherwise every job
// would fail at its first step with an import error reported as the job's own failure. The interpreters are small
// shell scripts that answer the check the way Python does.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../../lib/cli/commands';
import { CliError, EXIT_CODES } from '../../lib/cli/exit-codes';
import { HARNESS_INSTALL_COMMAND, localCommands, requireHarnessPython } from '../../lib/local/cli-commands';

const dir = mkdtempSync(join(tmpdir(), 'trainyard-harness-python-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An executable that writes `stderr` and exits `code`, whatever it is asked. */
function fakePython(name: string, stderr: string, code: number): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\nprintf '%s\\n' '${stderr}' >&2\nexit ${code}\n`);
  chmodSync(path, 0o755);
  return path;
}

function refusal(python: string): CliError {
  try {
    requireHarnessPython(python);
  } catch (error) {
    if (error instanceof CliError) return error;
    throw error;
  }
  throw new Error(`requireHarnessPython(${python}) accepted it`);
}

describe('requireHarnessPython', () => {
  it('accepts an interpreter that passes the check', () => {
    expect(() => requireHarnessPython(fakePython('good', '', 0))).not.toThrow();
  });

  it('refuses one without boto3, with the command that installs it (exit 2)', () => {
    const python = fakePython('no-boto3', "ModuleNotFoundError: No module named 'boto3'", 1);
    const error = refusal(python);
    expect(error.exitCode).toBe(EXIT_CODES.usage);
    expect(error.code).toBe('HarnessPythonMissing');
    expect(error.message).toBe(
      `local mode runs each job's harness under ${python}, but \`import boto3\` fails there (the harness reaches local S3 with it); install it with: ${HARNESS_INSTALL_COMMAND} (TRAINYARD_PYTHON names another interpreter)`,
    );
  });

  it('refuses a Python older than the harness needs, naming its version', () => {
    const python = fakePython('old', 'AssertionError: 3.9.18', 1);
    expect(refusal(python).message).toBe(
      `local mode runs each job's harness under ${python}, but it is Python 3.9.18; the harness needs 3.10 or later (TRAINYARD_PYTHON names another interpreter)`,
    );
  });

  it('refuses an interpreter that does not exist, saying it cannot be run', () => {
    const python = join(dir, 'no-such-python');
    expect(refusal(python).message).toMatch(
      new RegExp(`^local mode runs each job's harness under ${python}, but it cannot be run \\(.*ENOENT`),
    );
  });

  it('refuses any other failure with its last line', () => {
    const python = fakePython('broken', 'Fatal Python error: init_fs_encoding', 1);
    expect(refusal(python).message).toBe(
      `local mode runs each job's harness under ${python}, but checking it failed (exit 1): Fatal Python error: init_fs_encoding (TRAINYARD_PYTHON names another interpreter)`,
    );
  });
});

describe('TRAINYARD_PYTHON', () => {
  it('names the interpreter `trainyard local` checks and runs the harness under', async () => {
    const python = fakePython('chosen', "ModuleNotFoundError: No module named 'boto3'", 1);
    let stderr = '';
    const env = { TRAINYARD_PYTHON: python, TRAINYARD_LOCAL_DIR: join(dir, 'local'), PATH: process.env.PATH };
    const io = {
      stdout: () => undefined,
      stderr: (text: string) => {
        stderr += text;
      },
      isTTY: false,
    };
    const code = await runCli(['local'], { io: { ...io, confirm: async () => false }, env, cwd: dir }, [
      localCommands({ env, cwd: dir }),
    ]);

    expect(code).toBe(EXIT_CODES.usage);
    expect(stderr).toContain(`local mode runs each job's harness under ${python}, but \`import boto3\` fails there`);
  });
});
