/**
 * Helpers for the local-mode end-to-end tests: a priced test configuration, the CLI driven in-process (the real
 * program, the real local server over loopback), condition polling, and an independent cost calculation.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { type CliDeps, runCli } from '../../lib/cli/commands';
import { EXIT_CODES, type ExitCode } from '../../lib/cli/exit-codes';
import { DEFAULT_TIERS } from '../../lib/config';
import { type LocalBatchRunner, processState } from '../../lib/local/batch-runner';
import { type LocalCommandDeps, localCommands } from '../../lib/local/cli-commands';

/** Repository root (tests run from it). */
export const ROOT = process.cwd();
/** The torch-free example job. */
export const HELLO_CPU = join(ROOT, 'examples/hello-cpu');

/** Spot and on-demand prices of the test tier, USD per hour: 60 s (the minimum) costs exactly 3 and 6 cents. */
export const SPOT_USD_PER_HOUR = 1.8;
export const ON_DEMAND_USD_PER_HOUR = 3.6;

/**
 * A configuration whose costs show up at the cent: `cpu-test` (5 min max) for the jobs, `gpu-test` at its prices
 * (an EC2 tier: its spot attempts get IMDS notices, where cpu-test's get Fargate Spot's SIGTERM), `cpu-huge` whose hour of
 * runtime no small budget covers, team `e2e` with a $1 budget and no principals (local mode acts for it) and team
 * `other` with its own principal.
 */
export const E2E_CONFIG = {
  tiers: [
    {
      id: 'cpu-test',
      kind: 'cpu',
      vcpus: 1,
      memoryMiB: 2048,
      maxRuntime: '5m',
      onDemandUsdPerHour: ON_DEMAND_USD_PER_HOUR,
      spotUsdPerHour: SPOT_USD_PER_HOUR,
      peakTflops: 0.05,
    },
    {
      ...DEFAULT_TIERS.find((tier) => tier.id === 'gpu-small'),
      id: 'gpu-test',
      maxRuntime: '5m',
      onDemandUsdPerHour: ON_DEMAND_USD_PER_HOUR,
      spotUsdPerHour: SPOT_USD_PER_HOUR,
    },
    {
      id: 'cpu-huge',
      kind: 'cpu',
      vcpus: 4,
      memoryMiB: 8192,
      maxRuntime: '2h',
      onDemandUsdPerHour: 36,
      spotUsdPerHour: 18,
      peakTflops: 0.05,
    },
  ],
  teams: [
    { id: 'e2e', monthlyBudgetUsd: 1 },
    { id: 'other', principals: ['arn:aws:iam::000000000000:user/someone-else'], monthlyBudgetUsd: 10 },
  ],
};

/** A fresh temporary folder. */
export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `trainyard-${prefix}-`));
}

/** Writes a config object to `<dir>/trainyard.config.json` and returns its path. */
export function writeConfig(dir: string, config: unknown = E2E_CONFIG): string {
  const path = join(dir, 'trainyard.config.json');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

/** One CLI run's result. */
export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `trainyard <argv>` in-process against the local mode whose folder is `localDir`, local commands included. */
export async function trainyard(
  argv: readonly string[],
  localDir: string,
  local: LocalCommandDeps = {},
): Promise<CliRun> {
  let stdout = '';
  let stderr = '';
  const env = { TRAINYARD_LOCAL_DIR: localDir, PATH: process.env.PATH };
  const deps: CliDeps = {
    io: {
      stdout: (text) => {
        stdout += text;
      },
      stderr: (text) => {
        stderr += text;
      },
      isTTY: false,
      confirm: async () => false,
    },
    env,
    cwd: ROOT,
  };
  const code = await runCli(argv, deps, [localCommands({ env, cwd: ROOT, ...local })]);
  return { code, stdout, stderr };
}

/** How long a test's `watch` follows a job: under vitest's 180 s limit, so a stuck job fails with its story. */
export const WATCH_TIMEOUT_SECONDS = 150;

/**
 * `trainyard watch <job>`, bounded by WATCH_TIMEOUT_SECONDS, expected to exit `expected`. Otherwise the test fails
 * with the job's status, its events, its log and, given local mode's runner, the stacks of its harness's threads
 * (SIGUSR1 makes the harness write them to its log).
 */
export async function watchToEnd(
  jobId: string,
  localDir: string,
  expected: ExitCode = EXIT_CODES.ok,
  runner?: LocalBatchRunner,
): Promise<CliRun> {
  const run = await trainyard(
    ['watch', jobId, '--interval', '1', '--timeout', String(WATCH_TIMEOUT_SECONDS)],
    localDir,
  );
  if (run.code === expected) return run;
  const status = await trainyard(['status', jobId, '--json'], localDir);
  // The running attempt's harness writes its threads' stacks to that attempt's log on SIGUSR1 (its faulthandler).
  const stuck = runner?.runningAttempts().find((a) => a.trainyardJobId === jobId && a.harnessPid !== undefined);
  const kernelSide = stuck?.harnessPid === undefined ? '' : whereProcessWaits(stuck.harnessPid);
  if (stuck?.harnessPid !== undefined) {
    try {
      process.kill(stuck.harnessPid, 'SIGUSR1');
      await new Promise((done) => setTimeout(done, 2000));
    } catch {
      // The attempt ended between the listing and the signal: its log already says how.
    }
  }
  const which = stuck?.attempt === undefined ? [] : ['--attempt', stuck.attempt];
  const logs = await trainyard(['logs', jobId, ...which, '--limit', '200'], localDir);
  const eventsFile = join(localDir, 'events.jsonl');
  const events = existsSync(eventsFile)
    ? readFileSync(eventsFile, 'utf8')
        .split('\n')
        .filter((line) => line.includes(jobId))
    : [];
  return expect.fail(
    `watch ${jobId} exited ${run.code}, expected ${expected}: ${run.stderr}\nstatus: ${status.stdout}\nevents:\n${events.join('\n')}\nlogs:\n${logs.stdout}${logs.stderr}${kernelSide}`,
  );
}

/**
 * Where a process and its threads wait, as Linux's /proc shows it (each thread's wait channel and system call, and
 * the process's open descriptors): what a stack dump cannot show of a process stuck in C code. Empty elsewhere.
 */
function whereProcessWaits(pid: number): string {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return '?';
    }
  };
  try {
    const threads = readdirSync(`/proc/${pid}/task`).map(
      (tid) =>
        `  thread ${tid} (${read(`/proc/${pid}/task/${tid}/comm`)}): wchan ${read(`/proc/${pid}/task/${tid}/wchan`)}, syscall ${read(`/proc/${pid}/task/${tid}/syscall`)}`,
    );
    const fds = readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try {
        return `  fd ${fd} → ${readlinkSync(`/proc/${pid}/fd/${fd}`)}`;
      } catch {
        return `  fd ${fd}`;
      }
    });
    return `\nharness process ${pid} (state ${processState(pid) ?? '?'}):\n${[...threads, ...fds].join('\n')}`;
  } catch {
    return '';
  }
}

/** Parses a `--json` run's stdout, failing with the run's output when it is not JSON. */
export function json(run: CliRun): Record<string, unknown> {
  try {
    return JSON.parse(run.stdout) as Record<string, unknown>;
  } catch {
    throw new Error(`expected JSON on stdout (exit ${run.code}); stdout: ${run.stdout}\nstderr: ${run.stderr}`);
  }
}

/** Polls `check` every `everyMs` until it returns a value (not undefined); fails after `timeoutMs` naming `what`. */
export async function until<T>(
  what: string,
  check: () => Promise<T | undefined>,
  { timeoutMs = 90_000, everyMs = 200 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((done) => setTimeout(done, everyMs));
  }
}

/**
 * What an attempt costs, worked out here from first principles (not with the platform's metering code): EC2 bills
 * whole seconds with a 60 s minimum; micro-dollars = $/h × 10^6 × seconds / 3600, rounded half up; then to the cent.
 */
export function expectedAttemptCostUsd(startedAtMs: number, stoppedAtMs: number, usdPerHour: number): number {
  const seconds = Math.max(60, Math.ceil((stoppedAtMs - startedAtMs) / 1000));
  const micros = Math.floor((Math.round(usdPerHour * 1e6) * seconds + 1800) / 3600);
  return Math.floor((micros + 5000) / 10_000) / 100;
}

/** Cents, as an integer, so sums compare exactly. */
export function cents(usd: number): number {
  return Math.round(usd * 100);
}
