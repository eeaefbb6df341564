#!/usr/bin/env -S npx tsx
/**
 * The `trainyard` CLI entry: wires the real terminal, environment and network into lib/cli and exits with the code
 * the command decided (docs/cli.md). Commands live in lib/cli/commands.ts.
 */
import { createInterface } from 'node:readline/promises';
import { type CommandRegistrar, runCli } from '../lib/cli/commands';
import { registerLocalCommands } from '../lib/local/cli-commands';

/** Commands owned by other modules: local mode's `local` (with `interrupt`, `stop`) and `demo`. */
const registrars: CommandRegistrar[] = [registerLocalCommands];

async function confirm(question: string): Promise<boolean> {
  const prompt = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await prompt.question(question)).trim());
  } finally {
    prompt.close();
  }
}

// A terminal that went away (SIGHUP: an SSH session closed) or a reader that stopped (`| head`) fails each later write
// with EIO or EPIPE, which the stream reports as an 'error' event; unhandled, that ends the process at once, and local
// mode would die inside its stop, before it killed its attempts. Output no one can read any more is dropped, and the
// command carries on.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});

const code = await runCli(
  process.argv.slice(2),
  {
    io: {
      stdout: (text) => process.stdout.write(text),
      stderr: (text) => process.stderr.write(text),
      isTTY: process.stdout.isTTY === true && process.stdin.isTTY === true,
      confirm,
    },
    env: process.env,
    cwd: process.cwd(),
  },
  registrars,
);
process.exitCode = code;
// Every command has finished its work here. Should anything still hold the event loop (a library's timer, a socket
// left open), the process exits all the same, once its output has had two seconds to drain: a stopped local mode
// must give the terminal back. The timer is unref'd, so a process with nothing left exits at once, as before.
setTimeout(() => process.exit(code), 2000).unref();
