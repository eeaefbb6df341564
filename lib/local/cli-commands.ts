/**
 * The CLI's local-mode commands: `trainyard local` (foreground; Ctrl-C stops it cleanly), `trainyard local interrupt
 * <job>` (a spot interruption as the tier's platform makes it: an EC2 notice through the job's fake IMDS, or Fargate
 * Spot's SIGTERM), `trainyard local report <daily|weekly>` (a scheduled showback
 * report now), `trainyard local stop` (signals the running local mode) and
 * `trainyard demo` (the whole lifecycle on this machine: estimate, budget gate, run, a spot interruption, checkpoint,
 * resume, settled cost, report). Registered on the program by bin/trainyard.ts; docs/cli.md "Local mode".
 */

import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { isTerminal } from '../../lambdas/domain/job';
import { REPORT_KINDS } from '../../lambdas/domain/showback';
import { jobKeysFor, s3Uri } from '../../lambdas/domain/workspace-layout';
import { ApiClient, type FetchLike, processAlive, resolveTarget, runningLocalState } from '../cli/client';
import { type CliDeps, type CommandRegistrar, runCli } from '../cli/commands';
import { CliError, EXIT_CODES, exitCodeForJobState } from '../cli/exit-codes';
import {
  at,
  checkpointsOf,
  formatBudgets,
  formatMoney,
  formatRate,
  formatShowback,
  jobOf,
  jobView,
  statusLine,
} from '../cli/format';
import { parseIntegerIn, parseJobId } from '../cli/options';
import { ConfigError, DEFAULT_CONFIG_PATH, loadConfig, type TrainyardConfig } from '../config';
import { seededRandom } from '../seeded-random';
import type { LocalMode, LocalModeOptions } from './local-mode';
import { LOCAL_NAMES } from './names';
import { LOCAL_DIR, LocalStateError, readLocalState } from './token';

/** What the local commands need from outside; every field has a default for the real terminal and process. */
export interface LocalCommandDeps {
  /** @default the program's configured output (the CLI's stdout) */
  readonly stdout?: (text: string) => void;
  /** @default the program's configured error output */
  readonly stderr?: (text: string) => void;
  /** @default process.env */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** @default process.cwd() */
  readonly cwd?: string;
  /** @default whether process.stdout is a terminal */
  readonly isTTY?: boolean;
  /** @default global fetch */
  readonly fetch?: FetchLike;
  /** Resolves (with what stopped it) when the foreground `trainyard local` should stop. @default SIGINT or SIGTERM */
  readonly untilStopped?: (mode: LocalMode) => Promise<string>;
  /** Overrides for local mode (tests: seeded interruptions, no waits). @default none */
  readonly localModeOptions?: Partial<LocalModeOptions>;
  /** Waits between polls (demo, `local stop`). @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
  /** @default process.kill(pid, 0) */
  readonly isAlive?: (pid: number) => boolean;
  /** Signals a process (`local stop`). @default process.kill */
  readonly kill?: (pid: number, signal: NodeJS.Signals) => void;
  /** Interpreter the harness and the demo's torch check use. @default '/usr/bin/python3' */
  readonly python?: string;
}

/** The exact command that installs what the demo's nanoGPT job needs on Debian/Ubuntu. */
export const TORCH_INSTALL_COMMAND = 'sudo apt-get install python3-torch libopenblas0-pthread python3-numpy';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The demo's job: which example, command, tier, and the step after which it is interrupted. */
export interface DemoJob {
  readonly example: string;
  readonly command: readonly string[];
  readonly tier: string;
  /** Interrupt once the job is this far through (and has a complete checkpoint to resume from). */
  readonly interruptAtFraction: number;
}

/**
 * nanoGPT on the CPU preset, enlarged a little so it runs about a minute on two cores (≈ 50 ms per iteration), with
 * a checkpoint every 100 iterations; interrupted a fifth of the way in.
 */
export const NANOGPT_DEMO: DemoJob = {
  example: 'examples/nanogpt-shakespeare',
  command: [
    'python',
    'train.py',
    'config/cpu_smoke.py',
    '--n_layer=4',
    '--n_head=4',
    '--n_embd=64',
    '--block_size=64',
    '--batch_size=16',
    '--max_iters=1500',
    '--lr_decay_iters=1500',
    '--warmup_iters=50',
    '--eval_interval=300',
    '--checkpoint_interval=100',
  ],
  tier: 'cpu-large',
  interruptAtFraction: 0.25,
};

/** The torch-free fallback: hello-cpu slowed to about a minute, a checkpoint every 250 iterations. */
export const HELLO_CPU_DEMO: DemoJob = {
  example: 'examples/hello-cpu',
  command: [
    'python',
    'train.py',
    '--max_iters=3000',
    '--step_delay=0.02',
    '--log_interval=50',
    '--eval_interval=500',
    '--checkpoint_interval=250',
  ],
  tier: 'cpu-large',
  interruptAtFraction: 0.25,
};

/** The demo gives up (and says so) after this long; it normally takes two to four minutes. */
const DEMO_DEADLINE_MS = 9.5 * 60 * 1000;

interface Resolved {
  readonly out: (text: string) => void;
  readonly err: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  readonly isTTY: boolean;
  readonly fetch: FetchLike;
  readonly sleep: (ms: number) => Promise<void>;
  readonly isAlive: (pid: number) => boolean;
  readonly kill: (pid: number, signal: NodeJS.Signals) => void;
  readonly python: string;
}

function resolveDeps(deps: LocalCommandDeps, program: Command): Resolved {
  const output = program.configureOutput();
  const write = (stream: NodeJS.WriteStream) => (text: string) => void stream.write(text);
  return {
    out: deps.stdout ?? ((text) => (output.writeOut ?? write(process.stdout))(text)),
    err: deps.stderr ?? ((text) => (output.writeErr ?? write(process.stderr))(text)),
    env: deps.env ?? process.env,
    cwd: deps.cwd ?? process.cwd(),
    isTTY: deps.isTTY ?? process.stdout.isTTY === true,
    fetch: deps.fetch ?? fetch,
    sleep: deps.sleep ?? ((ms) => new Promise<void>((done) => setTimeout(done, ms))),
    isAlive: deps.isAlive ?? processAlive,
    kill: deps.kill ?? ((pid, signal) => process.kill(pid, signal)),
    python: deps.python ?? (deps.env ?? process.env).TRAINYARD_PYTHON ?? DEFAULT_HARNESS_PYTHON,
  };
}

/** Signals that stop local mode: Ctrl-C, `trainyard local stop` (SIGTERM) and a closed terminal or SSH session. */
const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Whether the process has a terminal: one of its standard streams is one. */
export function hasTerminal(): boolean {
  return [process.stdin, process.stdout, process.stderr].some((stream) => stream.isTTY === true);
}

/**
 * Listens for a stop signal: `signal` resolves on the first, with its name. Later ones, while local mode stops, are
 * answered with a line on stderr rather than Node's default of dying at once, which would leave the attempts' harness
 * and training processes running (they run in sessions of their own). `dispose` stops listening.
 *
 * A hangup stops local mode only when it has a terminal to lose (`hangupStops`, by default {@link hasTerminal}).
 * Without one it was started detached, by `nohup` or a service manager, and meant to outlive the session: Node
 * resets the SIGHUP that nohup ignores to its default, dying, so a hangup is answered with a line and ignored.
 */
export function onStopSignal(hangupStops = hasTerminal()): { signal: Promise<string>; dispose: () => void } {
  let stopping = false;
  let done: (signal: string) => void = () => undefined;
  const signal = new Promise<string>((resolve) => {
    done = resolve;
  });
  const on = (name: NodeJS.Signals) => {
    if (name === 'SIGHUP' && !hangupStops) {
      process.stderr.write(
        'SIGHUP: ignored, local mode has no terminal (started with nohup or as a service); `trainyard local stop` stops it\n',
      );
      return;
    }
    if (stopping) {
      process.stderr.write(`${name}: local mode is already stopping (killing attempts, closing the engines)…\n`);
      return;
    }
    stopping = true;
    done(name);
  };
  for (const name of STOP_SIGNALS) process.on(name, on);
  return {
    signal,
    dispose: () => {
      for (const name of STOP_SIGNALS) process.off(name, on);
    },
  };
}

function localDir(r: Resolved, option: string | undefined): string {
  return resolve(r.cwd, option ?? r.env.TRAINYARD_LOCAL_DIR ?? LOCAL_DIR);
}

function configFor(r: Resolved, option: string | undefined): TrainyardConfig {
  const explicit = option ?? r.env.TRAINYARD_CONFIG;
  try {
    return loadConfig(resolve(r.cwd, explicit ?? DEFAULT_CONFIG_PATH), explicit !== undefined);
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.message, EXIT_CODES.usage, 'ConfigError');
    throw error;
  }
}

function parseRate(text: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > 3600) {
    throw new CliError(
      `--spot-interruptions-per-hour must be a number from 0 to 3600, got "${text}"`,
      EXIT_CODES.usage,
      'InvalidOption',
    );
  }
  return value;
}

/**
 * Claims `dir` for this process, or fails when a live local mode already serves it: two would share one LevelDB and
 * one local.json. The claim is `local.lock`, created exclusively before any engine starts, so of two starts at once
 * one is refused with this message rather than crashing inside the database's lock; one left by a process that is
 * gone (or whose pid now names another program) is taken over. Returns the release, for after the stop.
 */
function claimLocalDir(r: Resolved, dir: string): () => void {
  const lock = join(dir, LOCAL_LOCK_FILE);
  // Owner-only, as local-mode.ts and token.ts make it; first here, so theirs is not too late: everything local mode
  // keeps (tables, objects with code and checkpoints, logs) is under it. A folder an earlier version left open to
  // other users of the machine is closed too.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  const refuse = (pid: number, where: string) => {
    throw new CliError(
      `local mode is already running for ${dir} (pid ${pid}${where}); stop it with \`trainyard local stop\` or use another --dir`,
      EXIT_CODES.usage,
      'LocalAlreadyRunning',
    );
  };
  let state: ReturnType<typeof readLocalState>;
  try {
    state = readLocalState(dir);
  } catch (error) {
    if (!(error instanceof LocalStateError)) throw error; // unreadable: the new server rewrites it
  }
  if (state && state.pid !== process.pid && r.isAlive(state.pid)) refuse(state.pid, `, ${state.apiUrl}`);
  for (let tries = 0; tries < 3; tries++) {
    if (createLock(lock)) {
      return () => {
        // Only our own claim: a later local mode may have taken over a lock this process was too slow to release.
        if (lockHolder(lock) === process.pid) rmSync(lock, { force: true });
      };
    }
    const holder = lockHolder(lock);
    if (holder === undefined) continue; // released meanwhile
    if (holder !== 0 && holder !== process.pid && r.isAlive(holder)) refuse(holder, ', starting');
    removeStaleLock(lock, holder); // left by a local mode that is gone: taken over
  }
  throw new CliError(
    `could not claim ${lock}: another local mode is starting there`,
    EXIT_CODES.usage,
    'LocalAlreadyRunning',
  );
}

/**
 * Creates `lock` holding this process's pid, whole or not at all: the pid goes to a file of its own, linked into
 * place, which fails if the lock exists. A reader never finds the lock empty. False when another holds it.
 */
function createLock(lock: string): boolean {
  const mine = `${lock}.${process.pid}.${randomUUID()}`;
  writeFileSync(mine, `${process.pid}\n`, { flag: 'wx' });
  try {
    linkSync(mine, lock);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  } finally {
    rmSync(mine, { force: true });
  }
}

/** The pid a lock holds; undefined when there is no lock. A lock that holds no pid is taken as a dead holder's. */
function lockHolder(lock: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(lock, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const pid = Number.parseInt(text, 10);
  return Number.isSafeInteger(pid) && pid > 0 ? pid : 0;
}

/**
 * Removes `lock` if it still holds `deadPid`, compare-and-swap: it is moved aside first, which of two starts that
 * both found it stale only one can do, and read there. A claim another start made meanwhile (it took over first) is
 * put back, so that two starts never both take the folder.
 */
function removeStaleLock(lock: string, deadPid: number): void {
  const aside = `${lock}.stale.${process.pid}.${randomUUID()}`;
  try {
    renameSync(lock, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // another start moved it first
    throw error;
  }
  try {
    if (lockHolder(aside) !== deadPid) linkSync(aside, lock);
  } catch (error) {
    // A third claim made in the instant between: it stands, and this start is refused by it next.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    rmSync(aside, { force: true });
  }
}

/** The file a local mode holds its folder by, from before its engines start until after they stop. */
const LOCAL_LOCK_FILE = 'local.lock';

/**
 * Starts local mode. Its engines, runner and control plane load here, on the commands that start it, not with the
 * CLI: the commands that talk to a running API start about a second sooner without them.
 */
async function start(options: LocalModeOptions): Promise<LocalMode> {
  const { LocalModeError, startLocalMode } = await import('./local-mode');
  try {
    return await startLocalMode(options);
  } catch (error) {
    if (error instanceof LocalModeError || error instanceof ConfigError) {
      throw new CliError(error.message, EXIT_CODES.usage, error.name);
    }
    throw new CliError(
      `local mode could not start: ${(error as Error).message}`,
      EXIT_CODES.unexpected,
      'LocalStartFailed',
    );
  }
}

function localClient(r: Resolved, dir: string): ApiClient {
  // Local control routes exist only on the loopback server: ignore TRAINYARD_API_URL.
  const env = { ...r.env, TRAINYARD_API_URL: undefined, TRAINYARD_LOCAL_DIR: dir };
  return new ApiClient(resolveTarget({ env, cwd: r.cwd, isAlive: r.isAlive }), r.fetch);
}

/** Builds the registrar of the local commands over `deps` (tests pass theirs; the CLI uses the defaults). */
export function localCommands(deps: LocalCommandDeps = {}): CommandRegistrar {
  return (program: Command) => {
    const local = program
      .command('local')
      .description('run the whole platform on this machine (foreground; Ctrl-C stops it)')
      .option('--dir <path>', 'local folder for data, token and logs (default: TRAINYARD_LOCAL_DIR, else ./.trainyard)')
      .option('--port <port>', 'API port on 127.0.0.1 (default: a free port)')
      .option('--config <path>', 'configuration file (default: TRAINYARD_CONFIG, else ./trainyard.config.json)')
      .option('--team <id>', 'team local mode acts for (default: the first in the config)')
      .option('--spot-interruptions-per-hour <n>', 'random spot notices per running spot attempt per hour', '0')
      .option('--seed <n>', 'seed for the random interruptions (reproducible runs)')
      .option('--budget-watch-seconds <n>', 'seconds between budget-watch ticks', '300')
      .action(
        async (options: {
          dir?: string;
          port?: string;
          config?: string;
          team?: string;
          spotInterruptionsPerHour: string;
          seed?: string;
          budgetWatchSeconds: string;
        }) => {
          const r = resolveDeps(deps, program);
          const dir = localDir(r, options.dir);
          const port = options.port === undefined ? undefined : parseIntegerIn('--port', options.port, 1, 65535);
          const rate = parseRate(options.spotInterruptionsPerHour);
          const seed = options.seed === undefined ? undefined : parseIntegerIn('--seed', options.seed, 0, 2 ** 31 - 1);
          const budgetWatchSeconds = parseIntegerIn('--budget-watch-seconds', options.budgetWatchSeconds, 1, 86400);
          const config = configFor(r, options.config);
          requireHarnessPython(r.python);
          const release = claimLocalDir(r, dir);
          try {
            const mode = await start({
              dir,
              config,
              ...(port !== undefined ? { port } : {}),
              ...(options.team !== undefined ? { team: options.team } : {}),
              spotInterruptionsPerHour: rate,
              ...(seed !== undefined ? { random: seededRandom(seed) } : {}),
              budgetWatchSeconds,
              python: r.python,
              console: (line) => r.out(`${line}\n`),
              ...deps.localModeOptions,
            });
            r.out(
              [
                `Trainyard local mode is running (pid ${process.pid}).`,
                `  API        ${mode.apiUrl}  (bearer token in ${join(dir, 'local-token')})`,
                `  data       ${dir}  (DynamoDB: dynamo/, S3: s3/, logs: logs/, events: events.jsonl, metrics: metrics.jsonl)`,
                `  acting as  ${mode.principalArn} → team ${mode.team}`,
                `  spot       ${rate > 0 ? `${rate} random interruption(s) per attempt-hour` : 'interruptions on demand: trainyard local interrupt <job>'}`,
                ...(mode.recovered.length
                  ? [
                      `  recovered  ${mode.recovered.length} job(s) cut off by the last stop, now ended (trainyard status shows how): ${mode.recovered.join(', ')}`,
                    ]
                  : []),
                'Use the CLI from another terminal (trainyard submit …). Ctrl-C or `trainyard local stop` stops local mode.',
                '',
              ].join('\n'),
            );
            const signals = deps.untilStopped ? undefined : onStopSignal();
            try {
              const why = await (deps.untilStopped
                ? deps.untilStopped(mode)
                : (signals as { signal: Promise<string> }).signal);
              r.out(`Stopping local mode (${why}): killing running attempts, closing the API and the engines…\n`);
              await mode.stop();
            } finally {
              signals?.dispose();
            }
          } finally {
            release();
          }
          r.out('Local mode stopped. Jobs, budgets and checkpoints are kept for the next start.\n');
        },
      );

    local
      .command('interrupt')
      .description(
        "interrupt a job's running spot attempt as its platform would: an EC2 notice through its fake IMDS (GPU tiers), SIGTERM as Fargate Spot sends it (CPU tiers)",
      )
      .argument('<job>', 'job id')
      .option('--dir <path>', 'local folder of the running local mode')
      .option('--json', 'print the answer as JSON')
      .action(async (job: string, options: { dir?: string; json?: boolean }) => {
        const r = resolveDeps(deps, program);
        const jobId = parseJobId(job);
        const dir = localDir(r, options.dir ?? (local.opts() as { dir?: string }).dir);
        const { body } = await localClient(r, dir).send({
          method: 'POST',
          path: `/_local/jobs/${encodeURIComponent(jobId)}/interrupt`,
        });
        if (options.json) {
          r.out(`${JSON.stringify(body, null, 2)}\n`);
          return;
        }
        r.out(`${interruptionText(jobId, body)}\n`);
      });

    local
      .command('report')
      .description(
        'write a scheduled showback report now, as its schedule would: daily = yesterday, weekly = last Monday–Sunday (UTC)',
      )
      .argument('<kind>', 'daily or weekly')
      .option('--dir <path>', 'local folder of the running local mode')
      .option('--json', 'print the answer as JSON')
      .action(async (kind: string, options: { dir?: string; json?: boolean }) => {
        const r = resolveDeps(deps, program);
        if (!(REPORT_KINDS as readonly string[]).includes(kind)) {
          throw new CliError(
            `report must be one of ${REPORT_KINDS.join(', ')}, got "${kind}"`,
            EXIT_CODES.usage,
            'Usage',
          );
        }
        const dir = localDir(r, options.dir ?? (local.opts() as { dir?: string }).dir);
        const { body } = await localClient(r, dir).send({ method: 'POST', path: `/_local/reports/${kind}` });
        if (options.json) {
          r.out(`${JSON.stringify(body, null, 2)}\n`);
          return;
        }
        const lines = [
          `Showback report (${kind}) for ${String(at(body, 'periodStart'))} to ${String(at(body, 'periodEnd'))}:`,
        ];
        const written = Array.isArray(at(body, 'written')) ? (at(body, 'written') as unknown[]) : [];
        for (const report of written) {
          const uri = String(at(report, 'uri'));
          const key = uri.replace(/^s3:\/\/[^/]+\//, '');
          const team = at(report, 'team');
          lines.push(
            `  ${typeof team === 'string' ? `team ${team}` : 'all teams'}: ${formatMoney(Number(at(report, 'totalUsd')))} over ${String(at(report, 'jobs'))} job(s)  ${s3rverObjectPath(join(dir, 's3'), LOCAL_NAMES.bucket, key)}`,
          );
        }
        r.out(`${lines.join('\n')}\n`);
      });

    local
      .command('stop')
      .description('stop the local mode running for this folder (SIGTERM to its process)')
      .option('--dir <path>', 'local folder of the running local mode')
      .action(async (options: { dir?: string }) => {
        const r = resolveDeps(deps, program);
        const dir = localDir(r, options.dir ?? (local.opts() as { dir?: string }).dir);
        const state = runningLocalState(dir, r.isAlive);
        r.kill(state.pid, 'SIGTERM');
        r.out(`Sent SIGTERM to local mode (pid ${state.pid}); waiting for it to stop…\n`);
        // The server removes local.json first, as it closes the API; the process exits once its attempts are killed
        // and its engines closed, so the folder is free only then (a process is not waited on for itself).
        for (let waited = 0; waited < 60_000; waited += 200) {
          const now = safeState(dir);
          if (now?.pid !== state.pid && (state.pid === process.pid || !r.isAlive(state.pid))) {
            r.out('Local mode stopped.\n');
            return;
          }
          await r.sleep(200);
        }
        throw new CliError(
          `local mode (pid ${state.pid}) has not stopped within 60 s of SIGTERM; it may still be killing attempts`,
          EXIT_CODES.unexpected,
          'LocalStopTimeout',
        );
      });

    program
      .command('demo')
      .description(
        'run a real training job through the whole lifecycle on this machine: estimate, budget, spot interruption, resume, cost',
      )
      .option('--dir <path>', 'local folder for the demo (default: a new temporary folder)')
      .option('--config <path>', 'configuration file (default: TRAINYARD_CONFIG, else ./trainyard.config.json)')
      .option('--team <id>', 'team the demo job is booked to (default: the first in the config)')
      .action(async (options: { dir?: string; config?: string; team?: string }) => {
        const r = resolveDeps(deps, program);
        const code = await runDemo(r, deps, options);
        if (code === EXIT_CODES.interrupted) {
          throw new CliError('the demo was stopped before its job ended', EXIT_CODES.interrupted, 'DemoInterrupted');
        }
        if (code !== EXIT_CODES.ok) {
          throw new CliError('the demo job did not succeed (see above)', EXIT_CODES.jobUnsuccessful, 'DemoFailed');
        }
      });
  };
}

/** `registerLocalCommands(program)`: the local commands over the real terminal and process. */
export const registerLocalCommands: CommandRegistrar = (program) => localCommands()(program);

function safeState(dir: string) {
  try {
    return readLocalState(dir);
  } catch {
    return undefined;
  }
}

/** The exact command that installs what the job harness needs under local mode (it reaches local S3 with boto3). */
export const HARNESS_INSTALL_COMMAND = 'sudo apt-get install python3-boto3';

/**
 * The interpreter local mode runs each job's harness under, unless TRAINYARD_PYTHON names another: Debian's, whose
 * python3-boto3 and python3-torch packages the README installs (a `python3` on PATH may be a pyenv shim without them).
 */
export const DEFAULT_HARNESS_PYTHON = '/usr/bin/python3';

/**
 * Refuses to start local mode with an interpreter the job harness cannot run under: every job would fail at its first
 * step with an import error, reported as the job's own failure. Checks that the interpreter runs, is Python 3.10 or
 * later (the harness's `requires-python`), and imports boto3.
 */
export function requireHarnessPython(python: string): void {
  const check = spawnSync(
    python,
    ['-c', 'import sys; assert sys.version_info >= (3, 10), sys.version.split()[0]; import boto3'],
    { encoding: 'utf8', timeout: 120_000 },
  );
  const refuse = (why: string) => {
    throw new CliError(
      `local mode runs each job's harness under ${python}, but ${why} (TRAINYARD_PYTHON names another interpreter)`,
      EXIT_CODES.usage,
      'HarnessPythonMissing',
    );
  };
  if (check.error) refuse(`it cannot be run (${check.error.message})`);
  if (check.status === 0) return;
  const stderr = check.stderr ?? '';
  if (/AssertionError/.test(stderr)) {
    refuse(
      `it is Python ${stderr
        .trim()
        .split('\n')
        .at(-1)
        ?.replace(/^AssertionError: ?/, '')}; the harness needs 3.10 or later`,
    );
  }
  if (/No module named '?boto3'?/.test(stderr)) {
    refuse(
      `\`import boto3\` fails there (the harness reaches local S3 with it); install it with: ${HARNESS_INSTALL_COMMAND}`,
    );
  }
  refuse(`checking it failed (exit ${check.status}): ${stderr.trim().split('\n').at(-1) ?? ''}`);
}

/** Whether `import torch` works under this interpreter. */
export function torchAvailable(python: string): boolean {
  return spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore', timeout: 120_000 }).status === 0;
}

/** Where s3rver keeps an object on disk (its filesystem store: `<dir>/<bucket>/<key>._S3rver_object`). */
export function s3rverObjectPath(s3Directory: string, bucket: string, key: string): string {
  return join(s3Directory, bucket, `${key}._S3rver_object`);
}

async function runDemo(
  r: Resolved,
  deps: LocalCommandDeps,
  options: { dir?: string; config?: string; team?: string },
): Promise<number> {
  const began = Date.now();
  const elapsed = () => `${Math.round((Date.now() - began) / 1000)}s`.padStart(5);
  const say = (text: string) => r.out(`${text}\n`);
  const step = (n: number, text: string) => say(`\n[${elapsed()}] ${n}. ${text}`);

  let job = NANOGPT_DEMO;
  step(1, `Checking the job harness's Python (${r.python}): boto3, and torch for nanoGPT`);
  requireHarnessPython(r.python);
  if (torchAvailable(r.python))
    say('   torch is installed: the demo trains nanoGPT (examples/nanogpt-shakespeare, CPU preset).');
  else {
    job = HELLO_CPU_DEMO;
    say(`   \`import torch\` failed under ${r.python}. To run the nanoGPT demo, install it with:`);
    say(`       ${TORCH_INSTALL_COMMAND}`);
    say('   Running the torch-free example (examples/hello-cpu) through the same lifecycle instead.');
  }

  const config = configFor(r, options.config);
  // A folder of its own, made once the configuration is known good, and removed if local mode refuses to start in it.
  const scratch = options.dir ? undefined : mkdtempSync(join(tmpdir(), 'trainyard-demo-'));
  const dir = scratch ?? resolve(r.cwd, options.dir as string);
  step(2, `Starting local mode in ${dir}`);
  const release = claimLocalDir(r, dir);
  try {
    const mode = await start({
      dir,
      config,
      ...(options.team !== undefined ? { team: options.team } : {}),
      python: r.python,
      // Frequent budget-watch ticks show accrual and refresh the job's recorded progress while the demo runs.
      budgetWatchSeconds: 10,
      console: (line) => say(`   event │ ${line}`),
      ...deps.localModeOptions,
    }).catch((error: unknown) => {
      release();
      if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true });
      throw error;
    });
    say(`   API ${mode.apiUrl}, acting as ${mode.principalArn} for team ${mode.team}`);
    // Ctrl-C (or a closed terminal) stops the demo and local mode with it: the attempts' processes run in sessions of
    // their own, which the terminal's signal does not reach, so only local mode's stop ends them.
    const signals = deps.untilStopped ? undefined : onStopSignal();
    try {
      const lifecycle = demoLifecycle(r, mode, job, say, step);
      if (!signals) return await lifecycle;
      const ended = await Promise.race([lifecycle, signals.signal]);
      if (typeof ended === 'number') return ended;
      lifecycle.catch(() => undefined); // it fails as local mode closes under it: the signal is the news
      say(`\n   ${ended}: the demo stops here.`);
      return EXIT_CODES.interrupted;
    } finally {
      step(9, 'Stopping local mode');
      await mode.stop();
      signals?.dispose();
      say(`   Stopped. The demo's data stays in ${dir} (delete it when done). Total time ${elapsed().trim()}.`);
    }
  } finally {
    release();
  }
}

async function demoLifecycle(
  r: Resolved,
  mode: LocalMode,
  job: DemoJob,
  say: (text: string) => void,
  step: (n: number, text: string) => void,
): Promise<number> {
  const example = join(REPO_ROOT, job.example);
  const cliDeps: CliDeps = {
    io: { stdout: r.out, stderr: r.err, isTTY: false, confirm: async () => false },
    env: { ...r.env, TRAINYARD_API_URL: undefined, TRAINYARD_LOCAL_DIR: mode.dir },
    cwd: r.cwd,
    fetch: r.fetch,
  };
  const api = localClient(r, mode.dir);
  // Polls ride out a transient failure (a 5xx while s3rver is busy) instead of ending the demo on it.
  const client = {
    send: async (request: Parameters<ApiClient['send']>[0]) => {
      for (let tries = 1; ; tries++) {
        try {
          return await api.send(request);
        } catch (error) {
          if (!(error instanceof CliError) || error.exitCode !== EXIT_CODES.unexpected || tries >= 3) throw error;
          say(`   (retrying ${request.method} ${request.path} after: ${error.message})`);
          await r.sleep(1000);
        }
      }
    },
  };
  const cli = async (argv: string[]) => {
    const code = await runCli(argv, cliDeps);
    if (code !== EXIT_CODES.ok) {
      throw new CliError(`\`trainyard ${argv.slice(0, 2).join(' ')}\` failed (exit ${code})`, EXIT_CODES.unexpected);
    }
  };

  step(3, `Team budget before the job (GET /budgets, team ${mode.team})`);
  say(indent(formatBudgets((await client.send({ method: 'GET', path: '/budgets' })).body)));

  step(4, `Estimate: trainyard estimate ${job.example} --tier ${job.tier} -- ${job.command.join(' ')}`);
  await cli(['estimate', example, '--tier', job.tier, '--', ...job.command]);

  step(5, 'Submit (the cost gate reserves the estimate against the team budget)');
  let submitted = '';
  const submitCode = await runCli(['submit', example, '--tier', job.tier, '--yes', '--json', '--', ...job.command], {
    ...cliDeps,
    io: {
      ...cliDeps.io,
      stdout: (text) => {
        submitted += text;
      },
    },
  });
  if (submitCode !== EXIT_CODES.ok) {
    throw new CliError(`\`trainyard submit\` failed (exit ${submitCode})`, EXIT_CODES.unexpected);
  }
  const jobId = String(jobOf(JSON.parse(submitted)).jobId);
  say(`   Submitted job ${jobId}. Following it (step, loss, ETA, cost so far → forecast):`);

  step(
    6,
    `Running; a spot interruption is injected once the job is ${job.interruptAtFraction * 100}% through and has a checkpoint`,
  );
  const deadline = Date.now() + DEMO_DEADLINE_MS;
  let interrupted = false;
  let lastLine = '';
  let lastState: string | undefined;
  let lastPrinted = 0;
  const seenDecisions = new Set<string>();
  let final: unknown;
  for (;;) {
    const { body } = await client.send({ method: 'GET', path: `/jobs/${encodeURIComponent(jobId)}` });
    const view = jobView(body);
    for (const decision of (at(body, 'decisions') as unknown[] | undefined) ?? []) {
      const key = `${String(at(decision, 'seq'))}`;
      if (seenDecisions.has(key)) continue;
      seenDecisions.add(key);
      say(`   decision │ ${String(at(decision, 'decision'))} — ${String(at(decision, 'reason'))}`);
    }
    const line = statusLine(view);
    if (line !== lastLine && (Date.now() - lastPrinted > 3000 || view.state !== lastState)) {
      say(`   ${line}`);
      lastLine = line;
      lastState = view.state;
      lastPrinted = Date.now();
    }
    if (isTerminal(view.state)) {
      // The final line, unless the change of state just printed it.
      if (line !== lastLine) say(`   ${line}`);
      final = body;
      break;
    }
    if (
      !interrupted &&
      view.state === 'RUNNING' &&
      (view.fraction ?? 0) >= job.interruptAtFraction &&
      (await completeCheckpoints(client, jobId)).length > 0
    ) {
      const checkpoints = await completeCheckpoints(client, jobId);
      step(7, `Interrupting: trainyard local interrupt ${jobId}`);
      say(`   Complete checkpoints so far: ${checkpoints.map((c) => String(at(c, 'name'))).join(', ')}`);
      let served: Awaited<ReturnType<typeof client.send>>;
      try {
        served = await client.send({ method: 'POST', path: `/_local/jobs/${encodeURIComponent(jobId)}/interrupt` });
      } catch (error) {
        // The attempt ended between the poll and the notice (a checkpoint's exit, the job's last step): try again.
        if (!(error instanceof CliError && error.code === 'NoRunningAttempt')) throw error;
        say('   Its attempt ended just then: the notice goes to the next one.');
        await r.sleep(1000);
        continue;
      }
      say(`   ${interruptionText(jobId, served.body)}`);
      say(
        '   Expect: the harness checkpoints and exits, the attempt is classified reclaimed, attempt 2 resumes on spot.',
      );
      interrupted = true;
    }
    if (Date.now() > deadline) {
      throw new CliError(
        `the demo job ${jobId} has not finished within ${DEMO_DEADLINE_MS / 60000} minutes (state ${view.state ?? '?'})`,
        EXIT_CODES.unexpected,
        'DemoTimeout',
      );
    }
    await r.sleep(1000);
  }

  step(8, 'Result');
  const view = jobView(final);
  say(`   Job ${jobId}: ${view.state ?? '?'}${view.reason ? ` — ${view.reason}` : ''}`);
  say('   Cost per attempt (per second at the price per hour shown, at least 60 s per start as EC2 bills it):');
  for (const attempt of (at(final, 'attempts') as unknown[] | undefined) ?? []) {
    const rate = at(attempt, 'usdPerHour');
    say(
      `     attempt ${String(at(attempt, 'attempt'))}  ${String(at(attempt, 'capacity')).padEnd(9)} ${String(at(attempt, 'outcome.kind') ?? at(attempt, 'status') ?? '?').padEnd(10)} ${formatSeconds(at(attempt, 'durationSeconds'))}  ${typeof rate === 'number' ? `${formatRate(rate)}/h` : '?'}  ${formatMoney(Number(at(attempt, 'costUsd') ?? 0))}`,
    );
  }
  say(`   Total, at the cent as the ledger settles it: ${formatMoney(view.costSoFarUsd ?? 0)}`);
  say('   Ledger after settlement (GET /budgets):');
  say(indent(formatBudgets((await client.send({ method: 'GET', path: '/budgets' })).body)));
  say('   Showback, this month so far (GET /reports/showback; `trainyard report` shows it by user, project and job):');
  const showback = (await client.send({ method: 'GET', path: '/reports/showback' })).body;
  say(indent(formatShowback(showback).split('\n').slice(0, 2).join('\n')));
  const team = String(at(final, 'job.team') ?? mode.team);
  const keys = jobKeysFor(team, jobId);
  for (const [label, key] of [
    ['Summary', keys.summary],
    ['Report ', keys.report],
  ] as const) {
    const file = s3rverObjectPath(join(mode.dir, 's3'), LOCAL_NAMES.bucket, key);
    say(`   ${label}: ${s3Uri(LOCAL_NAMES.bucket, key)}`);
    say(`            on disk: ${file}${existsSync(file) ? '' : ' (not written)'}`);
    if (key === keys.report && existsSync(file)) {
      // s3rver's file name does not end in .html, which a browser goes by: a copy that does.
      const page = join(mode.dir, `report-${jobId}.html`);
      copyFileSync(file, page);
      say(`            open in a browser: ${page}`);
    }
  }
  if (!interrupted)
    say('   Note: the job finished before it reached the interruption step, so no interruption was injected.');
  return exitCodeForJobState(view.state ?? '');
}

/**
 * What `POST /_local/jobs/{id}/interrupt` did, in a sentence: an EC2 spot notice (GPU tiers) or a Fargate Spot
 * interruption (CPU tiers: no notice on Fargate, the task gets SIGTERM and is killed 30 s later if it has not stopped).
 */
export function interruptionText(jobId: string, body: unknown): string {
  const until = String(at(body, 'noticeTime'));
  if (at(body, 'platform') === 'FARGATE' && at(body, 'alreadyStopping') === true) {
    return `Job ${jobId}'s Fargate task was already stopping (it had its SIGTERM): Fargate SIGKILLs it at ${until} unless it stops first, and its stop's own reason stands.`;
  }
  if (at(body, 'platform') === 'FARGATE') {
    return `Fargate Spot interrupted job ${jobId}'s task: SIGTERM now, and SIGKILL at ${until} unless it stops first (a CPU tier runs on Fargate Spot, which sends no IMDS notice; the harness checkpoints on the signal).`;
  }
  return `Spot interruption notice served to job ${jobId} through its fake IMDS (instance ${String(at(body, 'instanceId'))}); the instance is reclaimed at ${until} unless the attempt stops first.`;
}

async function completeCheckpoints(client: { send: ApiClient['send'] }, jobId: string): Promise<unknown[]> {
  const { body } = await client.send({ method: 'GET', path: `/jobs/${encodeURIComponent(jobId)}/checkpoints` });
  return checkpointsOf(body);
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `     ${line}`)
    .join('\n');
}

function formatSeconds(value: unknown): string {
  return typeof value === 'number' ? `${value.toFixed(1)}s`.padStart(7) : '      ?';
}
