/**
 * The `trainyard` commands (commander): submit, sweep, estimate, status, watch, logs, cancel, resume, jobs, budgets, report,
 * checkpoints, tiers. Every dependency on the outside world (output, terminal, environment, network, clock) comes in
 * through CliDeps, so tests drive the real program against a loopback server. Exit codes: lib/cli/exit-codes.ts.
 */
import { randomUUID } from 'node:crypto';
import { accessSync, createWriteStream, constants as fsConstants, mkdirSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { Command, CommanderError, Option } from 'commander';
import { DEFAULT_LOG_LINES, MAX_JOBS_PAGE, scopeIdProblem } from '../../lambdas/api/schemas';
import { compareCodeUnits } from '../../lambdas/domain/code-unit-order';
import {
  CHECKPOINT_DONE_FILE_RULE,
  GPU_MEMORY_GIB,
  isCheckpointDoneFile,
  isTerminal,
  LIVE_STATES,
  MAX_TOTAL_STEPS,
} from '../../lambdas/domain/job';
import { MAX_LABELS } from '../../lambdas/domain/labels';
import { checkpointToRestore } from '../../lambdas/domain/workspace-layout';
import { mapConcurrently } from '../../lambdas/shared/concurrency';
import packageJson from '../../package.json' with { type: 'json' };
import { ConfigError, loadConfig } from '../config';
import { ApiClient, type FetchLike, resolveTarget } from './client';
import { CliError, EXIT_CODES, exitCodeForJobState } from './exit-codes';
import {
  at,
  checkpointsOf,
  estimateCostForConfirmation,
  formatBudgetSet,
  formatBudgets,
  formatBytes,
  formatCheckpoints,
  formatEstimate,
  formatJobStatus,
  formatJobsTable,
  formatMe,
  formatMoney,
  formatShowback,
  formatSweepPlan,
  formatTiers,
  jobOf,
  jobView,
  type LogLine,
  list,
  logLinesOf,
  num,
  statusLine,
  str,
} from './format';
import {
  parseBudgetLimit,
  parseBudgetScope,
  parseDayOption,
  parseEnvPairs,
  parseIdempotencyKey,
  parseIntegerIn,
  parseJobId,
  parseLabelFilter,
  parseLabelOptions,
  parseMonth,
  parseNumberIn,
  parseSeconds,
  parseStateFilter,
  parseTeamId,
  parseTierId,
  parseUsd,
} from './options';
import { type PackedProject, packDirectory } from './pack';
import type { CredentialProvider } from './sigv4';
import {
  DEFAULT_MAX_SWEEP_JOBS,
  expandSweep,
  MAX_SWEEP_JOBS,
  MAX_SWEEP_KEY_LENGTH,
  parseSweepParam,
  sweepJobKey,
} from './sweep';

/** Where the CLI writes and how it asks. */
export interface CliIo {
  /** Writes to standard output as is (callers add newlines). */
  stdout(text: string): void;
  stderr(text: string): void;
  /** Whether standard output is a terminal (redrawn progress, prompts). */
  readonly isTTY: boolean;
  /** Asks a yes/no question on the terminal; resolves true for yes. */
  confirm(question: string): Promise<boolean>;
}

/** A line redrawn in place while long work goes on. */
export interface ProgressLine {
  /** Redraws the line with `text`, unless it was drawn under `everyMs` ago (`force`: draw anyway). */
  show(text: string, force?: boolean): void;
  /** Clears the line, if drawn. */
  done(): void;
}

/**
 * A progress line on a terminal; nothing where standard output is not one (a log, a pipe) or is a --json document
 * (`enabled` false). Drawn at most every `everyMs`, so a download's thousands of chunks do not flood the terminal.
 */
export function progressLine(
  io: CliIo,
  enabled: boolean,
  everyMs = 200,
  now: () => number = () => performance.now(),
): ProgressLine {
  let drawnAt = Number.NEGATIVE_INFINITY;
  let drawn = false;
  return {
    show(text, force = false) {
      if (!enabled) return;
      const at = now();
      if (!force && at - drawnAt < everyMs) return;
      drawnAt = at;
      drawn = true;
      io.stdout(`\r\x1b[2K${text}`);
    },
    done() {
      if (drawn) io.stdout('\r\x1b[2K');
      drawn = false;
    },
  };
}

/** Bundle limits the CLI applies before sending (config `limits`). */
export interface BundleLimits {
  readonly maxBundleBytes: number;
  readonly maxInlineBytes: number;
}

/** Everything the CLI needs from outside. */
export interface CliDeps {
  readonly io: CliIo;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** @default global fetch */
  readonly fetch?: FetchLike;
  /** @default the default AWS credential provider chain */
  readonly credentials?: CredentialProvider;
  /** Waits between polls of `watch` and `logs --follow`. @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Clock for `watch --timeout`, epoch ms. @default Date.now */
  readonly now?: () => number;
  /** @default `cli-<uuid>` */
  readonly newIdempotencyKey?: () => string;
  /** @default from trainyard.config.json (TRAINYARD_CONFIG) limits */
  readonly limits?: BundleLimits;
  /** @default process.kill(pid, 0) */
  readonly isAlive?: (pid: number) => boolean;
}

/** A function that adds commands to the program (the lead's `registerLocalCommands` has this shape). */
export type CommandRegistrar = (program: Command) => void;

interface CommonOptions {
  api?: string;
  region?: string;
  json?: boolean;
}

interface RequirementOptions {
  tier?: string;
  gpuMemory?: string;
  runtime?: string;
  deadline?: string;
  totalSteps?: string;
}

/** Options every submission takes (`submit`, and each job of `sweep`). */
interface JobOptions extends CommonOptions, RequirementOptions {
  retries?: string;
  backoff?: string;
  env: string[];
  label: string[];
  project?: string;
  checkpointDoneFile?: string;
  yes?: boolean;
  maxCost: string;
  idempotencyKey?: string;
}

interface SubmitOptions extends JobOptions {
  wait?: boolean;
  interval: string;
  timeout?: string;
}

interface SweepOptions extends JobOptions {
  param: string[];
  maxJobs: string;
  wait?: boolean;
  interval: string;
  timeout?: string;
}

/** What a submission sends besides its bundle and command, and its confirmation threshold, checked. */
interface JobSettings {
  readonly requirements?: Record<string, string | number>;
  readonly retries?: { maxAppRetries: number; backoffSeconds?: number };
  readonly env: Record<string, string>;
  readonly labels: Record<string, string>;
  readonly project?: string;
  readonly checkpointDoneFile?: string;
  readonly maxCost: number;
}

/** Options of `watch`, and of `submit` with `--wait`. */
interface WatchOptions {
  json?: boolean;
  interval: string;
  timeout?: string;
}

const DEFAULT_POLL_SECONDS = '5';
/**
 * Most pages `trainyard jobs --label/--state` reads to fill one page of matches. Each filtered page reads at most
 * 1,000 of the team's jobs, so a listing looks through at most 10,000 before it prints what it found and the cursor
 * to go on from.
 */
const FILTERED_LISTING_PAGES = 10;

/** What `GET /jobs` is filtered by: label selectors (`key=value,key`) and states (`RUNNING,WAITING`). */
interface JobsFilter {
  readonly label?: string;
  readonly state?: string;
}

/** A filter as the options that give it: `--label sweep=s1 --state running`. */
function filterText(filter: JobsFilter): string {
  return [
    filter.label === undefined ? undefined : `--label ${filter.label}`,
    filter.state === undefined ? undefined : `--state ${filter.state.toLowerCase()}`,
  ]
    .filter((part) => part !== undefined)
    .join(' ');
}

/** Estimates above this many dollars ask for confirmation unless `--yes`. */
export const DEFAULT_CONFIRM_USD = 1;

function limitsFrom(deps: CliDeps): BundleLimits {
  if (deps.limits) return deps.limits;
  const explicit = deps.env.TRAINYARD_CONFIG;
  try {
    const config = loadConfig(explicit ?? join(deps.cwd, 'trainyard.config.json'), explicit !== undefined);
    return {
      maxBundleBytes: config.limits.maxBundleMiB * 1024 * 1024,
      maxInlineBytes: config.limits.maxInlineBundleKiB * 1024,
    };
  } catch (error) {
    if (error instanceof ConfigError) throw new CliError(error.message, EXIT_CODES.usage, 'ConfigError');
    throw error;
  }
}

function requirementsFrom(options: RequirementOptions): Record<string, string | number> | undefined {
  const requirements: Record<string, string | number> = {};
  if (options.tier !== undefined) requirements.tier = parseTierId(options.tier);
  if (options.gpuMemory !== undefined)
    requirements.gpuMemoryGiB = parseNumberIn(
      '--gpu-memory',
      options.gpuMemory,
      GPU_MEMORY_GIB.min,
      GPU_MEMORY_GIB.max,
      'GiB',
    );
  if (options.runtime !== undefined) requirements.runtimeSeconds = parseSeconds('--runtime', options.runtime);
  if (options.deadline !== undefined) requirements.deadlineSeconds = parseSeconds('--deadline', options.deadline);
  if (options.totalSteps !== undefined)
    requirements.totalSteps = parseIntegerIn('--total-steps', options.totalSteps, 1, MAX_TOTAL_STEPS);
  return Object.keys(requirements).length ? requirements : undefined;
}

function requireCommand(command: readonly string[]): string[] {
  if (command.length === 0 || command.every((part) => part.trim() === '')) {
    throw new CliError(
      'missing the command to run: add it after `--`, e.g. -- python train.py',
      EXIT_CODES.usage,
      'MissingCommand',
    );
  }
  return [...command];
}

function addCommon(command: Command): Command {
  return command
    .option('--api <url>', 'API URL of a deployed stack (default: TRAINYARD_API_URL, else local mode)')
    .option('--region <region>', 'AWS region for SigV4 (default: from the API host, else AWS_REGION)')
    .option('--json', "print the API's JSON instead of the human view");
}

function addRequirements(command: Command): Command {
  return command
    .option('--tier <id>', 'run on this tier (overrides the recommendation)')
    .option('--gpu-memory <GiB>', 'GPU memory the job needs, GiB (overrides the analysis)')
    .option('--runtime <duration>', 'expected runtime, e.g. 45m or 2h (overrides the analysis)')
    .option('--deadline <duration>', 'finish within this long of submission, e.g. 6h')
    .option('--total-steps <n>', "the job's training steps in all, when the code has no literal max_iters (progress)");
}

/** Adds the options of a submission; `confirmed` names the figure `--max-cost` is compared with. */
function addJobOptions(command: Command, confirmed: string): Command {
  return command
    .option('--retries <n>', 'retry the job this many times when your code fails (0-10)')
    .option('--backoff <duration>', 'wait between app-error retries, e.g. 60 or 2m (needs --retries)')
    .option(
      '--env <NAME=VALUE>',
      'environment variable for your command (repeatable)',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .option('--project <name>', 'project the cost is booked to (a budget scope)')
    .option(
      '--checkpoint-done-file <path>',
      'a file your script writes in its checkpoint directory after every finished save; uploads wait for it',
    )
    .option(
      '--label <key=value>',
      'label the job, to find it again with `trainyard jobs --label` (repeatable)',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .option('-y, --yes', `submit without asking, whatever ${confirmed}`)
    .option('--max-cost <usd>', `ask before submitting when ${confirmed} is above this`, String(DEFAULT_CONFIRM_USD));
}

/** Checks a submission's options (before anything is sent). */
function jobSettingsFrom(options: JobOptions): JobSettings {
  const requirements = requirementsFrom(options);
  const maxCost = parseUsd('--max-cost', options.maxCost);
  const env = parseEnvPairs(options.env);
  const labels = parseLabelOptions(options.label);
  if (options.backoff !== undefined && options.retries === undefined) {
    throw new CliError(
      '--backoff needs --retries (the wait applies between app-error retries)',
      EXIT_CODES.usage,
      'InvalidOption',
    );
  }
  const retries =
    options.retries === undefined
      ? undefined
      : {
          maxAppRetries: parseIntegerIn('--retries', options.retries, 0, 10),
          ...(options.backoff === undefined
            ? {}
            : { backoffSeconds: parseSeconds('--backoff', options.backoff, 1, 3600) }),
        };
  const projectProblem = options.project === undefined ? undefined : scopeIdProblem(options.project);
  if (projectProblem !== undefined) {
    throw new CliError(`--project ${projectProblem}, got "${options.project}"`, EXIT_CODES.usage, 'InvalidOption');
  }
  if (options.checkpointDoneFile !== undefined && !isCheckpointDoneFile(options.checkpointDoneFile)) {
    throw new CliError(
      `--checkpoint-done-file ${CHECKPOINT_DONE_FILE_RULE}, got "${options.checkpointDoneFile}"`,
      EXIT_CODES.usage,
      'InvalidOption',
    );
  }
  return {
    ...(requirements ? { requirements } : {}),
    ...(retries ? { retries } : {}),
    env,
    labels,
    ...(options.project ? { project: options.project } : {}),
    ...(options.checkpointDoneFile !== undefined ? { checkpointDoneFile: options.checkpointDoneFile } : {}),
    maxCost,
  };
}

/** Estimates a sweep asks for at once (each is one POST /estimate; the API analyses the code for each). */
const SWEEP_ESTIMATES_IN_FLIGHT = 4;
/**
 * Most bytes of text files (as JSON) an estimate sends as they are; a project with more sends its bundle instead. A
 * deployed API takes 6 MB per request (Lambda's limit; API Gateway's is 10 MB), and text files are sent uncompressed.
 */
const MAX_ESTIMATE_TEXT_BYTES = 4 * 1024 * 1024;

/** The label every job of a sweep carries, valued with the sweep's key. */
const SWEEP_LABEL = 'sweep';

/** A sweep's job labels: the user's, and `sweep=<the sweep's key>`, which is the sweep's own to set. */
function sweepLabels(labels: Record<string, string>, sweepKey: string): Record<string, string> {
  if (Object.hasOwn(labels, SWEEP_LABEL)) {
    throw new CliError(
      `--label ${SWEEP_LABEL} is set by trainyard sweep to the sweep's key (${sweepKey}); choose another key for yours`,
      EXIT_CODES.usage,
      'InvalidLabel',
    );
  }
  if (Object.keys(labels).length >= MAX_LABELS) {
    throw new CliError(
      `--label: a sweep's jobs carry ${SWEEP_LABEL}=<key> as well, so a sweep takes at most ${MAX_LABELS - 1} labels, got ${Object.keys(labels).length}`,
      EXIT_CODES.usage,
      'InvalidLabel',
    );
  }
  return { ...labels, [SWEEP_LABEL]: sweepKey };
}

/** The body of POST /jobs. */
function jobBody(
  bundle: { bundle: string } | { uploadId: string },
  command: readonly string[],
  settings: JobSettings,
): Record<string, unknown> {
  return {
    ...bundle,
    command,
    ...(settings.requirements ? { requirements: settings.requirements } : {}),
    ...(settings.retries ? { retries: settings.retries } : {}),
    ...(Object.keys(settings.env).length ? { env: settings.env } : {}),
    ...(settings.project ? { project: settings.project } : {}),
    ...(settings.checkpointDoneFile !== undefined ? { checkpointDoneFile: settings.checkpointDoneFile } : {}),
    ...(Object.keys(settings.labels).length ? { labels: settings.labels } : {}),
  };
}

function postJob(client: ApiClient, body: Record<string, unknown>, idempotencyKey: string) {
  return client.send({ method: 'POST', path: '/jobs', body, headers: { 'idempotency-key': idempotencyKey } });
}

/**
 * A failed POST /jobs whose request may have reached the platform (unreachable, or an unexpected answer) comes back
 * with `advice` (how to re-run safely); any other error as it was.
 */
function mayHaveCreated(error: unknown, advice: string, details: Record<string, unknown>): unknown {
  if (!mayHaveReached(error)) return error;
  return new CliError(`${error.message}; ${advice}`, error.exitCode, error.code, {
    ...(error.details ?? {}),
    ...details,
  });
}

/** Whether a failed request may still have reached the platform: unreachable, or an unexpected answer. */
function mayHaveReached(error: unknown): error is CliError {
  return (
    error instanceof CliError && (error.exitCode === EXIT_CODES.unreachable || error.exitCode === EXIT_CODES.unexpected)
  );
}

/** Builds the program; `registrars` add commands owned elsewhere (local mode's `local` and `demo`). */
export function createProgram(
  deps: CliDeps,
  setExitCode: (code: number) => void,
  registrars: readonly CommandRegistrar[] = [],
): Command {
  const { io } = deps;
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((done) => setTimeout(done, ms)));
  const now = deps.now ?? Date.now;
  const fetchImpl: FetchLike = deps.fetch ?? fetch;
  const clientFor = (options: CommonOptions) =>
    new ApiClient(
      resolveTarget({
        api: options.api,
        region: options.region,
        env: deps.env,
        cwd: deps.cwd,
        credentials: deps.credentials,
        isAlive: deps.isAlive,
      }),
      fetchImpl,
      { sleep, now },
    );
  const printJson = (value: unknown) => io.stdout(`${JSON.stringify(value, null, 2)}\n`);
  const println = (text: string) => io.stdout(`${text}\n`);

  const program = new Command('trainyard')
    .description('Submit and follow GPU training jobs on Trainyard (a deployed stack, or local mode).')
    .version(`trainyard ${packageJson.version}`, '-V, --version', "print the CLI's version")
    .exitOverride()
    // A command's options belong to it, not to its parent: `budgets set … --month` is set's month, not the listing's.
    .enablePositionalOptions()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr })
    .showHelpAfterError('(run with --help for usage)');

  /**
   * POST /estimate: with the project's text files when they are small (no upload before the user has seen the cost),
   * else with the bundle as POST /jobs takes it, which a submit then reuses. `budgetProject` (a submit's --project)
   * has its budget checked too.
   */
  const estimateFor = async (
    client: ApiClient,
    packed: PackedProject,
    command: readonly string[],
    options: RequirementOptions & CommonOptions,
    limits: BundleLimits,
    budgetProject?: string,
  ) => {
    const requirements = requirementsFrom(options);
    const project =
      packed.textFilesBytes <= MAX_ESTIMATE_TEXT_BYTES
        ? { files: packed.textFiles }
        : await bundleFields(client, packed, limits, options.json);
    const response = await client.send({
      method: 'POST',
      path: '/estimate',
      body: {
        ...project,
        command,
        ...(requirements ? { requirements } : {}),
        ...(budgetProject ? { project: budgetProject } : {}),
      },
    });
    return response.body;
  };

  /**
   * Asks on a terminal whether to submit at a cost over the threshold; stops (exit 2) unless the answer is yes.
   * `what` names the figure: "estimate", or "total of the sweep's estimates".
   */
  const confirmOrStop = async (cost: number, maxCost: number, what: string) => {
    if (!io.isTTY) {
      throw new CliError(
        `not submitted: the ${what} (${formatMoney(cost)}) is over the ${formatMoney(maxCost)} confirmation threshold and there is no terminal to ask; pass --yes or raise --max-cost`,
        EXIT_CODES.usage,
        'ConfirmationRequired',
        { estimateUsd: cost, maxCostUsd: maxCost },
      );
    }
    const yes = await io.confirm(`The ${what} is ${formatMoney(cost)} (over ${formatMoney(maxCost)}). Submit? [y/N] `);
    if (!yes) throw new CliError('not submitted: you declined the confirmation', EXIT_CODES.usage, 'NotConfirmed');
  };

  /**
   * The bundle as POST /jobs takes it: inline when small enough, else uploaded and named by its id; once per packed
   * project, so an estimate that sent it and the submit after it share one upload.
   */
  const bundles = new WeakMap<PackedProject, Promise<{ bundle: string } | { uploadId: string }>>();
  const bundleFields = (
    client: ApiClient,
    packed: PackedProject,
    limits: BundleLimits,
    json: boolean | undefined,
  ): Promise<{ bundle: string } | { uploadId: string }> => {
    let fields = bundles.get(packed);
    if (fields === undefined) {
      if (packed.bytes <= limits.maxInlineBytes)
        fields = Promise.resolve({ bundle: packed.archive.toString('base64') });
      else {
        // One PUT of the whole archive (a presigned URL takes no chunked body): the line says what is under way.
        const progress = progressLine(io, io.isTTY && !json);
        progress.show(`Uploading the bundle (${formatBytes(packed.bytes)})…`, true);
        fields = uploadBundle(client, fetchImpl, packed)
          .then((uploadId) => ({ uploadId }))
          .finally(() => progress.done());
      }
      bundles.set(packed, fields);
    }
    return fields;
  };

  /** Checks `--interval` and `--timeout` (before anything is sent: callers parse first); returns milliseconds. */
  type WatchTiming = { intervalMs: number; timeoutMs?: number };
  const watchTimingFrom = (options: WatchOptions): WatchTiming => ({
    intervalMs: parseSeconds('--interval', options.interval, 1, 3600) * 1000,
    ...(options.timeout === undefined ? {} : { timeoutMs: parseSeconds('--timeout', options.timeout) * 1000 }),
  });

  /** Sleeps until the next poll, or throws `timedOut()` when `--timeout` (ending at `giveUpAt`) has run out. */
  const untilNextPoll = async (intervalMs: number, giveUpAt: number | undefined, timedOut: () => CliError) => {
    const left = giveUpAt === undefined ? intervalMs : giveUpAt - now();
    if (left <= 0) throw timedOut();
    await sleep(Math.min(intervalMs, left));
  };

  /** `--wait`'s timing for a submission: `--timeout` only bounds a watch that `--wait` asked for. */
  const waitTimingFrom = (options: WatchOptions & { wait?: boolean }): WatchTiming => {
    if (options.timeout !== undefined && !options.wait) {
      throw new CliError(
        '--timeout needs --wait (it bounds the watch after submitting)',
        EXIT_CODES.usage,
        'InvalidOption',
      );
    }
    return watchTimingFrom(options);
  };

  /**
   * Follows a sweep's jobs until every one has ended: a line each time a job changes state, then how many ended how.
   * The exit code is the first job's (by index) that did not succeed, or 0; `--timeout` as for `watch`.
   */
  const watchSweep = async (
    client: ApiClient,
    jobs: ReadonlyArray<{ index: number; params: Readonly<Record<string, string>>; jobId: string }>,
    sweepKey: string,
    options: WatchOptions,
    timing: WatchTiming,
  ) => {
    const giveUpAt = timing.timeoutMs === undefined ? undefined : now() + timing.timeoutMs;
    const last = new Map<string, string>();
    const ended = new Map<string, string>();
    for (;;) {
      for (const job of jobs) {
        if (ended.has(job.jobId)) continue;
        const { body } = await client.send({ method: 'GET', path: `/jobs/${encodeURIComponent(job.jobId)}` });
        const view = jobView(body);
        const state = view.state ?? 'UNKNOWN';
        if (last.get(job.jobId) !== state) {
          last.set(job.jobId, state);
          const why = view.reason && state !== 'SUCCEEDED' && isTerminal(state) ? view.reason : undefined;
          if (options.json) {
            io.stdout(
              `${JSON.stringify({ index: job.index, jobId: job.jobId, state, ...(why ? { reason: why } : {}) })}\n`,
            );
          } else {
            const params = Object.entries(job.params).map(([k, v]) => `${k}=${v}`);
            println(`job ${job.index} ${job.jobId} (${params.join(' ')}): ${state}${why ? ` — ${why}` : ''}`);
          }
        }
        if (isTerminal(state)) ended.set(job.jobId, state);
      }
      if (ended.size === jobs.length) break;
      await untilNextPoll(timing.intervalMs, giveUpAt, () => {
        const open = jobs.filter((j) => !ended.has(j.jobId)).map((j) => j.jobId);
        return new CliError(
          `${open.length} of the sweep's ${jobs.length} jobs have not ended after --timeout ${options.timeout}; they keep running: follow them with \`trainyard jobs --label ${SWEEP_LABEL}=${sweepKey}\`, or stop them with \`trainyard cancel --label ${SWEEP_LABEL}=${sweepKey}\``,
          EXIT_CODES.watchTimedOut,
          'WatchTimedOut',
          { running: open },
        );
      });
    }
    const counts = new Map<string, number>();
    for (const state of ended.values()) counts.set(state, (counts.get(state) ?? 0) + 1);
    if (!options.json) {
      println(`Sweep ended: ${[...counts].map(([state, n]) => `${n} ${state}`).join(', ')}`);
    }
    const unsuccessful = jobs.find((j) => ended.get(j.jobId) !== 'SUCCEEDED');
    setExitCode(unsuccessful ? exitCodeForJobState(ended.get(unsuccessful.jobId) ?? '') : EXIT_CODES.ok);
  };

  const watchJob = async (client: ApiClient, jobId: string, options: WatchOptions, timing: WatchTiming) => {
    const { intervalMs, timeoutMs } = timing;
    const giveUpAt = timeoutMs === undefined ? undefined : now() + timeoutMs;
    let previous: string | undefined;
    for (;;) {
      const { body } = await client.send({ method: 'GET', path: `/jobs/${encodeURIComponent(jobId)}` });
      const view = jobView(body);
      const line = statusLine(view);
      const terminal = isTerminal(view.state);
      if (options.json) {
        const compact = JSON.stringify(body);
        if (compact !== previous) io.stdout(`${compact}\n`);
        previous = compact;
      } else if (io.isTTY) {
        io.stdout(`\r\x1b[2K${line}`);
        if (terminal) io.stdout('\n');
      } else {
        if (line !== previous) println(line);
        previous = line;
      }
      if (terminal) {
        if (!options.json && view.reason && view.state !== 'SUCCEEDED') io.stderr(`${view.state}: ${view.reason}\n`);
        setExitCode(exitCodeForJobState(view.state ?? ''));
        return;
      }
      await untilNextPoll(intervalMs, giveUpAt, () => {
        if (io.isTTY && !options.json) io.stdout('\n');
        const state = view.state ?? 'in an unknown state';
        return new CliError(
          `job ${jobId} is still ${state} after --timeout ${options.timeout}; it keeps running: watch it again, or stop it with \`trainyard cancel ${jobId}\``,
          EXIT_CODES.watchTimedOut,
          'WatchTimedOut',
          { jobId, state: view.state ?? null },
        );
      });
    }
  };

  addJobOptions(
    addRequirements(
      addCommon(
        program
          .command('submit')
          .description('pack a project, show the estimate, and submit it as a job')
          .argument('<dir>', 'project directory to pack (honours .gitignore and .trainyardignore)')
          .argument('<command...>', 'command to run, after `--` (e.g. -- python train.py config/x.py)'),
      ),
    ),
    'the estimate',
  )
    .option('--wait', 'after submitting, watch the job until it ends (exit code by final state)')
    .option('--interval <seconds>', 'seconds between polls with --wait', DEFAULT_POLL_SECONDS)
    .option('--timeout <duration>', 'with --wait: stop watching after this long (exit 8; the job keeps running)')
    .option('--idempotency-key <key>', 'reuse a key to make a retried submit return the same job (default: new)')
    .action(async (dir: string, commandArgs: string[], options: SubmitOptions) => {
      const command = requireCommand(commandArgs);
      const settings = jobSettingsFrom(options);
      const idempotencyKey = options.idempotencyKey
        ? parseIdempotencyKey(options.idempotencyKey)
        : (deps.newIdempotencyKey ?? (() => `cli-${randomUUID()}`))();
      const timing = waitTimingFrom(options);
      const limits = limitsFrom(deps);
      const packed = packDirectory(dir, { maxBundleBytes: limits.maxBundleBytes });
      const client = clientFor(options);

      const estimate = await estimateFor(client, packed, command, options, limits, settings.project);
      if (!options.json) {
        println(
          `Packed ${packed.files.length} files from ${packed.root} (${packed.bytes} bytes, sha256 ${packed.sha256.slice(0, 12)})`,
        );
        if (packed.skipped.length) println(`Skipped (links and special files): ${packed.skipped.join(', ')}`);
        println('');
        println(formatEstimate(estimate));
        println('');
      }
      const cost = estimateCostForConfirmation(estimate);
      if (cost !== undefined && cost > settings.maxCost && !options.yes) {
        await confirmOrStop(cost, settings.maxCost, 'estimate');
      }

      const bundle = await bundleFields(client, packed, limits, options.json);
      const response = await postJob(client, jobBody(bundle, command, settings), idempotencyKey).catch(
        (error: unknown) => {
          throw mayHaveCreated(
            error,
            `the job may have been created: re-run with --idempotency-key ${idempotencyKey} to get it rather than a second one`,
            { idempotencyKey },
          );
        },
      );
      const job = jobOf(response.body);
      const jobId = typeof job.jobId === 'string' ? job.jobId : undefined;
      if (options.json) printJson(response.body);
      else {
        println(
          `${at(response.body, 'replayed') === true ? 'Already submitted (same Idempotency-Key)' : 'Submitted'}: job ${jobId ?? '?'} (${String(job.state ?? 'SUBMITTED')}, tier ${String(job.tier ?? '?')})`,
        );
        if (!options.wait && jobId) println(`Follow it: trainyard watch ${jobId}`);
      }
      if (options.wait && jobId) await watchJob(client, jobId, options, timing);
    });

  addJobOptions(
    addRequirements(
      addCommon(
        program
          .command('sweep')
          .description('submit a project once per combination of parameter values (a hyper-parameter sweep)')
          .argument('<dir>', 'project directory to pack (once, for every job)')
          .argument('<command...>', 'command to run, after `--`, with {name} where a parameter goes'),
      ),
    ),
    'the total of the estimates',
  )
    .option(
      '--param <name=v1,v2,…>',
      'a parameter and its values, used in the command as {name} (repeatable: the jobs are every combination)',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .option(
      '--max-jobs <n>',
      `refuse a sweep of more jobs than this (1-${MAX_SWEEP_JOBS})`,
      String(DEFAULT_MAX_SWEEP_JOBS),
    )
    .option('--wait', 'after submitting, follow every job until all have ended (exit code by the first that failed)')
    .option('--interval <seconds>', 'seconds between polls with --wait', DEFAULT_POLL_SECONDS)
    .option('--timeout <duration>', 'with --wait: stop following after this long (exit 8; the jobs keep running)')
    .option(
      '--idempotency-key <key>',
      "reuse the sweep's key to make a re-run submit only the jobs still missing (default: new)",
    )
    .action(async (dir: string, commandArgs: string[], options: SweepOptions) => {
      const command = requireCommand(commandArgs);
      const maxJobs = parseIntegerIn('--max-jobs', options.maxJobs, 1, MAX_SWEEP_JOBS);
      const jobs = expandSweep(options.param.map(parseSweepParam), command, maxJobs);
      const settings = jobSettingsFrom(options);
      const timing = waitTimingFrom(options);
      const sweepKey = options.idempotencyKey
        ? parseIdempotencyKey(options.idempotencyKey)
        : (deps.newIdempotencyKey ?? (() => `cli-${randomUUID()}`))();
      if (sweepKey.length > MAX_SWEEP_KEY_LENGTH) {
        throw new CliError(
          `--idempotency-key may be at most ${MAX_SWEEP_KEY_LENGTH} characters for a sweep (each job's key adds -<n>), got ${sweepKey.length}`,
          EXIT_CODES.usage,
          'InvalidOption',
        );
      }
      const labels = sweepLabels(settings.labels, sweepKey);
      const limits = limitsFrom(deps);
      const packed = packDirectory(dir, { maxBundleBytes: limits.maxBundleBytes });
      const client = clientFor(options);

      // Each combination is estimated on its own (the analysis reads hyper-parameters from the command), a few at once.
      let estimated = 0;
      const progress = progressLine(io, io.isTTY && !options.json, 0);
      progress.show(`Estimating: ${estimated} of ${jobs.length} jobs done…`);
      const estimates = await mapConcurrently(jobs, SWEEP_ESTIMATES_IN_FLIGHT, async (job) => {
        const estimate = await estimateFor(client, packed, job.command, options, limits, settings.project);
        estimated += 1;
        progress.show(`Estimating: ${estimated} of ${jobs.length} jobs done…`);
        return estimate;
      });
      progress.done();
      const reservations = estimates.map((e) => estimateCostForConfirmation(e) ?? 0);
      const total = Math.round(reservations.reduce((sum, r) => sum + r, 0) * 100) / 100;
      const available = num(estimates[0], 'budget.availableUsd');
      // The tightest of the budgets the jobs are charged to (team, user, project), as the estimate names it.
      const scope = str(estimates[0], 'budget.scope') ?? 'the team budget';
      if (!options.json) {
        println(
          `Packed ${packed.files.length} files from ${packed.root} (${packed.bytes} bytes, sha256 ${packed.sha256.slice(0, 12)})`,
        );
        println('');
        println(formatSweepPlan(jobs, estimates));
        println('');
        println(
          `${jobs.length} jobs reserve ${formatMoney(total)} in all${available === undefined ? '' : `; ${scope} has ${formatMoney(available)} available`}.`,
        );
        if (available !== undefined && total > available) {
          println(
            'The cost gate will refuse the jobs the budget cannot hold when their turn comes (they end REJECTED); the others run.',
          );
        }
      }
      if (total > settings.maxCost && !options.yes) {
        await confirmOrStop(total, settings.maxCost, 'total of the estimates');
      }

      const bundle = await bundleFields(client, packed, limits, options.json);
      const submitted: Array<{ index: number; params: Record<string, string>; body: unknown }> = [];
      for (const job of jobs) {
        const response = await postJob(
          client,
          jobBody(bundle, job.command, { ...settings, labels }),
          sweepJobKey(sweepKey, job.index),
        ).catch((error: unknown) => {
          const done = submitted.map((s) => String(jobOf(s.body).jobId));
          const before =
            done.length === 0
              ? 'no job was submitted before it'
              : `${done.length === 1 ? 'job 1 was' : `jobs 1-${done.length} were`} submitted (${done.join(', ')})`;
          const advice = `${before}; re-run with --idempotency-key ${sweepKey} to submit the rest without submitting any twice`;
          const details = { idempotencyKey: sweepKey, submitted: done };
          if (mayHaveReached(error))
            throw mayHaveCreated(error, `job ${job.index} may have been created; ${advice}`, details);
          if (!(error instanceof CliError)) throw error;
          throw new CliError(`job ${job.index} of the sweep: ${error.message}; ${advice}`, error.exitCode, error.code, {
            ...(error.details ?? {}),
            ...details,
          });
        });
        submitted.push({ index: job.index, params: { ...job.params }, body: response.body });
        if (!options.json) {
          const created = jobOf(response.body);
          const params = Object.entries(job.params).map(([k, v]) => `${k}=${v}`);
          const verb = at(response.body, 'replayed') === true ? 'Already submitted' : 'Submitted';
          println(`${verb}: job ${String(created.jobId ?? '?')} (${params.join(' ')})`);
        }
      }
      if (options.json) {
        printJson({
          idempotencyKey: sweepKey,
          reservationUsd: total,
          jobs: submitted.map((s, i) => ({
            index: s.index,
            params: s.params,
            replayed: at(s.body, 'replayed') === true,
            job: jobOf(s.body),
            reservationUsd: reservations[i],
          })),
        });
      } else if (!options.wait) {
        println(
          `Follow them: trainyard jobs --label ${SWEEP_LABEL}=${sweepKey} (re-run with --idempotency-key ${sweepKey} to resubmit safely; stop them all with trainyard cancel --label ${SWEEP_LABEL}=${sweepKey})`,
        );
      }
      if (options.wait) {
        const followed = submitted.map((s) => ({
          index: s.index,
          params: s.params,
          jobId: String(jobOf(s.body).jobId),
        }));
        await watchSweep(client, followed, sweepKey, options, timing);
      }
    });

  addRequirements(
    addCommon(
      program
        .command('estimate')
        .description('pack a project and show the analysis and cost estimate, without submitting')
        .argument('<dir>', 'project directory')
        .argument('<command...>', 'command to run, after `--`'),
    ),
  ).action(async (dir: string, commandArgs: string[], options: CommonOptions & RequirementOptions) => {
    const command = requireCommand(commandArgs);
    requirementsFrom(options);
    const limits = limitsFrom(deps);
    const packed = packDirectory(dir, { maxBundleBytes: limits.maxBundleBytes });
    const estimate = await estimateFor(clientFor(options), packed, command, options, limits);
    if (options.json) printJson(estimate);
    else println(formatEstimate(estimate));
  });

  addCommon(
    program
      .command('status')
      .description('show a job: state, attempts, progress, ETA, cost')
      .argument('<job>', 'job id'),
  ).action(async (job: string, options: CommonOptions) => {
    const { body } = await clientFor(options).send({
      method: 'GET',
      path: `/jobs/${encodeURIComponent(parseJobId(job))}`,
    });
    if (options.json) printJson(body);
    else println(formatJobStatus(body));
  });

  addCommon(
    program
      .command('watch')
      .description('follow a job until it ends; exit code by its final state')
      .argument('<job>', 'job id'),
  )
    .option('--interval <seconds>', 'seconds between polls', DEFAULT_POLL_SECONDS)
    .option('--timeout <duration>', 'stop watching after this long (exit 8; the job keeps running)')
    .action(async (job: string, options: CommonOptions & WatchOptions) => {
      const jobId = parseJobId(job);
      const timing = watchTimingFrom(options);
      await watchJob(clientFor(options), jobId, options, timing);
    });

  addCommon(program.command('logs').description("print a job's recent log lines").argument('<job>', 'job id'))
    .option('--attempt <n>', 'attempt number (default: the latest)')
    .option('--limit <n>', 'most lines per fetch (1-1000)')
    .option('-f, --follow', 'keep printing new lines until the job ends')
    .option('--interval <seconds>', 'seconds between polls with --follow', DEFAULT_POLL_SECONDS)
    .action(
      async (
        job: string,
        options: CommonOptions & { attempt?: string; limit?: string; follow?: boolean; interval: string },
      ) => {
        const jobId = parseJobId(job);
        const attempt =
          options.attempt === undefined ? undefined : parseIntegerIn('--attempt', options.attempt, 1, 10000);
        const limit = options.limit === undefined ? undefined : parseIntegerIn('--limit', options.limit, 1, 1000);
        const intervalMs = parseSeconds('--interval', options.interval, 1, 3600) * 1000;
        const client = clientFor(options);
        const fetchLines = (after?: string) =>
          client.send({
            method: 'GET',
            path: `/jobs/${encodeURIComponent(jobId)}/logs`,
            query: { attempt, limit, after },
          });
        if (!options.follow) {
          const { body } = await fetchLines();
          if (options.json) printJson(body);
          else for (const line of logLinesOf(body)) println(line.message);
          return;
        }
        const print = (lines: readonly LogLine[]) => {
          for (const line of lines) options.json ? io.stdout(`${JSON.stringify(line)}\n`) : println(line.message);
        };
        const pageSize = limit ?? DEFAULT_LOG_LINES;
        // With the API's cursor every line comes once; an API without one (a stack deployed before it) is followed by
        // matching each answer's lines against those already printed.
        let cursor: string | undefined;
        let guessed: { attempt: unknown; printed: LogLine[] } | undefined;
        for (;;) {
          // Read the state first: lines fetched after seeing a terminal state include the job's last ones.
          const state = jobView(
            (await client.send({ method: 'GET', path: `/jobs/${encodeURIComponent(jobId)}` })).body,
          ).state;
          const ended = isTerminal(state);
          for (;;) {
            const { body } = await fetchLines(cursor);
            const lines = logLinesOf(body);
            const next = str(body, 'nextCursor');
            if (next === undefined) {
              guessed = followWithoutCursor(guessed, body, lines, pageSize, print, io.stderr);
              break;
            }
            print(lines);
            cursor = next;
            // A full page may have more behind it; once the job has ended, read on until nothing is left (the cursor
            // then also goes through any later attempt's lines).
            if (lines.length < pageSize && (!ended || lines.length === 0)) break;
          }
          if (ended) return;
          await sleep(intervalMs);
        }
      },
    );

  /**
   * The team's jobs that a filter keeps (label selectors, states; none keeps all), newest first, following the
   * pages from `from.cursor` until `want` jobs are found (all of them when `want` is not given) or `maxPages` pages
   * are read, with the cursor to go on from when jobs may remain. The API reads a bounded number of jobs per filtered
   * page, so a page can come back short, or empty, with a cursor: this is why a listing follows them. On a terminal
   * (and not under --json, whose stdout is the document) a line counts the jobs of a filtered search as they come,
   * naming the filter as the user gave it (`shown`, when the command adds to it).
   */
  const filteredJobs = async (
    client: ApiClient,
    filter: JobsFilter,
    json: boolean | undefined,
    from: { cursor?: string; want?: number; maxPages?: number; shown?: JobsFilter } = {},
  ): Promise<{ jobs: Record<string, unknown>[]; cursor?: string }> => {
    const shown = filterText(from.shown ?? filter);
    const progress = progressLine(io, io.isTTY && !json && shown !== '', 0);
    const want = from.want ?? Number.POSITIVE_INFINITY;
    const jobs: Record<string, unknown>[] = [];
    let cursor = from.cursor;
    let pages = 0;
    do {
      progress.show(`Finding the jobs with ${shown}… ${jobs.length} so far`);
      const limit = Math.min(MAX_JOBS_PAGE, want - jobs.length);
      const { body } = await client.send({ method: 'GET', path: '/jobs', query: { limit, ...filter, cursor } });
      jobs.push(...(list(body, 'jobs') as Record<string, unknown>[]));
      cursor = str(body, 'nextCursor');
      pages += 1;
    } while (cursor !== undefined && jobs.length < want && pages < (from.maxPages ?? Number.POSITIVE_INFINITY));
    progress.done();
    return { jobs, ...(cursor !== undefined && { cursor }) };
  };

  /**
   * Cancels every unfinished job with the labels: lists them, asks (unless --yes), then cancels each. Only the jobs in
   * a live state are listed (the API reads those through its byState index, not the team's finished history). A job
   * that ended meanwhile is reported as such; a cancel that fails does not stop the others, and the command then exits
   * by the first failure, naming every job it could not cancel (re-running retries just those: ended jobs are not
   * listed again).
   */
  const cancelLabelled = async (options: CommonOptions & { yes?: boolean }, label: string) => {
    const client = clientFor(options);
    // The API answers with jobs in the states asked for; one that ends after its page was read is still listed, and
    // its cancel then answers job_finished ("Already ended" below).
    const { jobs: open } = await filteredJobs(client, { label, state: LIVE_STATES.join(',') }, options.json, {
      shown: { label },
    });
    if (open.length > 0 && !options.json) println(formatJobsTable({ jobs: open }));
    if (open.length > 0 && !options.yes) {
      const what = `${open.length} unfinished job${open.length === 1 ? '' : 's'} with --label ${label}`;
      if (!io.isTTY) {
        throw new CliError(
          `not cancelled: ${what}, and there is no terminal to ask; pass --yes to cancel them`,
          EXIT_CODES.usage,
          'ConfirmationRequired',
          { jobs: open.map((job) => str(job, 'jobId')) },
        );
      }
      if (!(await io.confirm(`Cancel ${what}? [y/N] `))) {
        throw new CliError('not cancelled: you declined the confirmation', EXIT_CODES.usage, 'NotConfirmed');
      }
    }
    const cancelled: Array<{ jobId: string; state: string }> = [];
    const alreadyEnded: Array<{ jobId: string; state: string }> = [];
    const failed: Array<{ jobId: string; error: CliError }> = [];
    for (const job of open) {
      const jobId = String(job.jobId);
      try {
        const { body } = await client.send({ method: 'DELETE', path: `/jobs/${encodeURIComponent(jobId)}` });
        const state = String(jobOf(body).state ?? 'state unknown');
        cancelled.push({ jobId, state });
        if (!options.json) println(`Cancel requested: job ${jobId} (${state})`);
      } catch (error) {
        if (!(error instanceof CliError)) throw error;
        if (error.code === 'job_finished') {
          const state = String(error.details?.state ?? 'ended');
          alreadyEnded.push({ jobId, state });
          if (!options.json) println(`Already ended: job ${jobId} (${state})`);
        } else {
          failed.push({ jobId, error });
        }
      }
    }
    if (options.json) {
      printJson({
        label,
        matched: open.length,
        cancelled,
        alreadyEnded,
        failed: failed.map((f) => ({ jobId: f.jobId, code: f.error.code, message: f.error.message })),
      });
    } else if (open.length === 0) {
      println(`Nothing to cancel: no unfinished job has --label ${label}.`);
    }
    const first = failed[0];
    if (first !== undefined) {
      throw new CliError(
        `could not cancel ${failed.length} of ${open.length} jobs (${failed.map((f) => `${f.jobId}: ${f.error.message}`).join('; ')}); run the same command again to retry them`,
        first.error.exitCode,
        first.error.code,
        { failed: failed.map((f) => f.jobId), cancelled: cancelled.map((c) => c.jobId) },
      );
    }
  };

  addCommon(
    program
      .command('cancel')
      .description('cancel a job at any stage, or every unfinished job with a label (their spend is settled)')
      .argument('[job]', 'job id')
      .option(
        '--label <key=value|key>',
        'instead of one job, every unfinished job with this label; repeatable, all must hold',
        (v: string, acc: string[]) => [...acc, v],
        [],
      )
      .option('-y, --yes', 'cancel the labelled jobs without asking'),
  ).action(async (job: string | undefined, options: CommonOptions & { label: string[]; yes?: boolean }) => {
    const label = parseLabelFilter(options.label);
    if ((job === undefined) === (label === undefined)) {
      throw new CliError(
        job === undefined
          ? 'cancel needs a job id, or --label to cancel every unfinished job with that label'
          : 'cancel takes a job id or --label, not both',
        EXIT_CODES.usage,
        'InvalidOption',
      );
    }
    if (label !== undefined) return cancelLabelled(options, label);
    const jobId = parseJobId(job as string);
    const { body } = await clientFor(options).send({ method: 'DELETE', path: `/jobs/${encodeURIComponent(jobId)}` });
    if (options.json) printJson(body);
    else println(`Cancel requested: job ${jobId} (${String(jobOf(body).state ?? 'state unknown')})`);
  });

  addCommon(program.command('resume').description('resume a job paused for budget').argument('<job>', 'job id')).action(
    async (job: string, options: CommonOptions) => {
      const jobId = parseJobId(job);
      const { body } = await clientFor(options).send({
        method: 'POST',
        path: `/jobs/${encodeURIComponent(jobId)}/resume`,
      });
      if (options.json) printJson(body);
      else println(`Resumed: job ${jobId}`);
    },
  );

  addCommon(program.command('jobs').description("list your team's jobs, newest first"))
    .option('--limit <n>', 'jobs per page (1-100)', '20')
    .option('--cursor <cursor>', 'page to continue from (printed when more jobs remain)')
    .option(
      '--label <key=value|key>',
      'only jobs with this label (key=value) or any value of it (key); repeatable, all must hold',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .option(
      '--state <state>',
      'only jobs in this state (running, waiting, succeeded, …); repeatable or comma-separated, any may hold',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .action(async (options: CommonOptions & { limit: string; cursor?: string; label: string[]; state: string[] }) => {
      const limit = parseIntegerIn('--limit', options.limit, 1, MAX_JOBS_PAGE);
      const label = parseLabelFilter(options.label);
      const state = parseStateFilter(options.state);
      // Unfiltered, the first page is full and the only one read; filtered, short pages are followed.
      const found = await filteredJobs(clientFor(options), { label, state }, options.json, {
        cursor: options.cursor,
        want: limit,
        maxPages: FILTERED_LISTING_PAGES,
      });
      const body = { jobs: found.jobs, ...(found.cursor !== undefined && { nextCursor: found.cursor }) };
      if (options.json) printJson(body);
      else println(formatJobsTable(body));
    });

  const budgets = addCommon(
    program
      .command('budgets')
      .description("show a team's budgets for a month (default: yours, this month); `budgets set` changes one"),
  )
    .option('--team <team>', "another team's budgets (admins only)")
    .option('--month <YYYY-MM>', 'another month (UTC), past or ahead')
    .action(async (options: CommonOptions & { team?: string; month?: string }) => {
      const team = options.team === undefined ? undefined : parseTeamId('--team', options.team);
      const period = options.month === undefined ? undefined : parseMonth('--month', options.month);
      const { body } = await clientFor(options).send({ method: 'GET', path: '/budgets', query: { team, period } });
      if (options.json) printJson(body);
      else println(formatBudgets(body));
    });

  addCommon(
    budgets
      .command('set')
      .description("set a budget's monthly limit (admins only; creates the budget if absent)")
      .argument('<scope>', 'team:<team>, user:<team>/<user> or project:<team>/<project>')
      .argument('<usd>', 'the limit in US dollars, e.g. 1500 or 25.50'),
  )
    .option('--month <YYYY-MM>', 'the month to set (UTC; default: this month)')
    .action(async (scopeText: string, usdText: string, options: CommonOptions & { month?: string }) => {
      const common = { ...(budgets.opts() as CommonOptions), ...options };
      const scope = parseBudgetScope(scopeText);
      const limitUsd = parseBudgetLimit('<usd>', usdText);
      // `budgets --month M set …` names the month as surely as `budgets set … --month M`: never this month instead.
      const month = options.month ?? (budgets.opts() as { month?: string }).month;
      const period = month === undefined ? undefined : parseMonth('--month', month);
      const { body } = await clientFor(common).send({
        method: 'PUT',
        path: `/budgets/${encodeURIComponent(scope)}`,
        body: { limitUsd, ...(period !== undefined && { period }) },
      });
      if (common.json) printJson(body);
      else println(formatBudgetSet(body));
    });

  addCommon(
    program
      .command('report')
      .description('show what your team spent, per user, project, tier and job (default: this month so far, UTC)'),
  )
    .option('--from <day>', 'first day, YYYY-MM-DD (UTC)')
    .option('--to <day>', 'last day, YYYY-MM-DD (UTC; default today)')
    .option('--team <team>', "another team's report (admins only)")
    .option('--jobs <n>', 'dearest jobs to list (1-1000)', '10')
    .option(
      '--label <key=value|key>',
      'count only the jobs with this label, e.g. a sweep (repeatable, all must hold)',
      (v: string, acc: string[]) => [...acc, v],
      [],
    )
    .action(
      async (options: CommonOptions & { from?: string; to?: string; team?: string; jobs: string; label: string[] }) => {
        const maxJobs = parseIntegerIn('--jobs', options.jobs, 1, 1000);
        const label = parseLabelFilter(options.label);
        const from = options.from === undefined ? undefined : parseDayOption('--from', options.from);
        const to = options.to === undefined ? undefined : parseDayOption('--to', options.to);
        const team = options.team === undefined ? undefined : parseTeamId('--team', options.team);
        const { body } = await clientFor(options).send({
          method: 'GET',
          path: '/reports/showback',
          query: { from, to, team, label },
        });
        if (options.json) printJson(body);
        else println(formatShowback(body, maxJobs));
      },
    );

  addCommon(
    program
      .command('whoami')
      .description('who the platform takes you to be: team, admin, user name, budgets charged and tiers allowed'),
  ).action(async (options: CommonOptions) => {
    const client = clientFor(options);
    const { body } = await client.send({ method: 'GET', path: '/me' });
    if (options.json) printJson(body);
    else println(formatMe(body, { kind: client.target.kind, url: client.target.baseUrl.href }));
  });

  addCommon(program.command('tiers').description('list tiers and their prices')).action(
    async (options: CommonOptions) => {
      const { body } = await clientFor(options).send({ method: 'GET', path: '/tiers' });
      if (options.json) printJson(body);
      else println(formatTiers(body));
    },
  );

  addCommon(
    program
      .command('checkpoints')
      .description("list a job's complete checkpoints; --download fetches one")
      .argument('<job>', 'job id'),
  )
    .option('--download <dir>', 'download a checkpoint into this directory')
    .addOption(new Option('--checkpoint <name>', 'which checkpoint to download (default: the newest not set aside)'))
    .action(async (job: string, options: CommonOptions & { download?: string; checkpoint?: string }) => {
      const jobId = parseJobId(job);
      if (options.checkpoint !== undefined && options.download === undefined) {
        throw new CliError(
          `--checkpoint ${options.checkpoint}: names the checkpoint --download fetches; give --download <dir> too`,
          EXIT_CODES.usage,
          'InvalidOption',
        );
      }
      if (options.download !== undefined) checkDownloadFolder(resolve(deps.cwd, options.download), options.download);
      const client = clientFor(options);
      const { body } = await client.send({ method: 'GET', path: checkpointsPath(jobId) });
      if (options.json) printJson(body);
      else println(formatCheckpoints(body));
      if (options.download === undefined) return;
      const chosen = chooseCheckpoint(checkpointsOf(body), options.checkpoint);
      const name = String(at(chosen, 'name'));
      const fileCount = at(chosen, 'fileCount');
      const totalBytes = at(chosen, 'bytes');
      const of = (n: unknown) => (typeof n === 'number' ? ` of ${n}` : '');
      const progress = progressLine(io, io.isTTY && !options.json);
      const tally = { files: 0, bytes: 0 };
      const show = (force = false) =>
        progress.show(
          `Downloading ${name}: ${tally.files}${of(fileCount)} files, ${formatBytes(tally.bytes)}${typeof totalBytes === 'number' ? ` of ${formatBytes(totalBytes)}` : ''}…`,
          force,
        );
      show(true);
      let written = 0;
      try {
        for await (const files of checkpointFilePages(client, jobId, chosen)) {
          written += await downloadCheckpoint(fetchImpl, files, resolve(deps.cwd, options.download), {
            bytes: (n) => {
              tally.bytes += n;
              show();
            },
            file: () => {
              tally.files += 1;
              show(true);
            },
          });
        }
      } finally {
        progress.done();
      }
      if (!options.json)
        println(`Downloaded ${name}: ${written} ${written === 1 ? 'file' : 'files'} into ${options.download}`);
    });

  for (const register of registrars) register(program);
  return program;
}

/**
 * One poll of `logs --follow` against an API that returns no cursor (only the newest lines): prints the lines not yet
 * printed, found by matching the answer against the lines already printed. When nothing matches within the same
 * attempt, more lines than one answer holds arrived between two polls: says on stderr that some were skipped, and
 * where the whole log is. Returns what the next poll matches against.
 */
export function followWithoutCursor(
  previous: { attempt: unknown; printed: LogLine[] } | undefined,
  body: unknown,
  fetched: readonly LogLine[],
  pageSize: number,
  print: (lines: readonly LogLine[]) => void,
  warn: (text: string) => void,
): { attempt: unknown; printed: LogLine[] } {
  const attempt = at(body, 'attempt');
  const printed = previous !== undefined && previous.attempt === attempt ? previous.printed : [];
  const fresh = newLines(printed, fetched);
  if (printed.length > 0 && fresh.length === fetched.length && fetched.length > 0) {
    const stream = str(body, 'logStreamName');
    warn(
      `trainyard: … some log lines were skipped: more than ${pageSize} arrived between two polls and this API returns no log cursor to read on from (deploy the current stack, or follow with a larger --limit or a shorter --interval); the whole log is in CloudWatch Logs${stream ? `, stream ${stream}` : ''}\n`,
    );
  }
  print(fresh);
  return { attempt, printed: [...printed, ...fresh].slice(-10_000) };
}

/** Lines of `fetched` not yet printed: what follows the longest tail of `printed` that starts `fetched`. */
export function newLines(printed: readonly LogLine[], fetched: readonly LogLine[]): LogLine[] {
  const key = (l: LogLine) => `${l.timestamp ?? ''}|${l.message}`;
  const tail = printed.map(key);
  const head = fetched.map(key);
  for (let k = Math.min(tail.length, head.length); k > 0; k--) {
    let same = true;
    for (let i = 0; i < k && same; i++) same = tail[tail.length - k + i] === head[i];
    if (same) return fetched.slice(k);
  }
  return [...fetched];
}

async function uploadBundle(client: ApiClient, fetchImpl: FetchLike, packed: PackedProject): Promise<string> {
  const { body } = await client.send({ method: 'POST', path: '/uploads', body: {} });
  const uploadId = at(body, 'uploadId');
  const url = at(body, 'url');
  if (typeof uploadId !== 'string' || typeof url !== 'string') {
    throw new CliError('POST /uploads answered without uploadId and url', EXIT_CODES.unexpected, 'InvalidResponse');
  }
  let response: Response;
  try {
    response = await fetchImpl(url, {
      method: 'PUT',
      body: new Uint8Array(packed.archive),
      headers: { 'content-type': 'application/gzip' },
    });
  } catch (error) {
    throw new CliError(`cannot upload the bundle: ${(error as Error).message}`, EXIT_CODES.unreachable, 'Unreachable');
  }
  if (!response.ok) {
    throw new CliError(
      `uploading the bundle failed with HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`,
      response.status >= 500 ? EXIT_CODES.unexpected : EXIT_CODES.refused,
      'UploadFailed',
    );
  }
  return uploadId;
}

function chooseCheckpoint(checkpoints: readonly unknown[], name: string | undefined): unknown {
  if (checkpoints.length === 0) {
    throw new CliError('the job has no complete checkpoint to download', EXIT_CODES.notFound, 'NoCheckpoint');
  }
  if (name !== undefined) {
    const found = checkpoints.find((c) => at(c, 'name') === name);
    if (!found) {
      throw new CliError(
        `no complete checkpoint named "${name}"; have: ${checkpoints.map((c) => String(at(c, 'name'))).join(', ')}`,
        EXIT_CODES.notFound,
        'NoCheckpoint',
      );
    }
    return found;
  }
  // Checkpoint folders are named ckpt-<6+ digit index>, so the greatest name is the newest. The default is the one
  // the harness would restore: the newest not set aside (failed twice right after a restore), else the newest.
  const newestFirst = [...checkpoints].sort((a, b) => compareCodeUnits(String(at(b, 'name')), String(at(a, 'name'))));
  return checkpointToRestore(newestFirst.map((c) => ({ checkpoint: c, setAside: at(c, 'setAside') === true })))
    ?.checkpoint;
}

function checkpointsPath(jobId: string): string {
  return `/jobs/${encodeURIComponent(jobId)}/checkpoints`;
}

/**
 * A checkpoint's files with their download URLs, a page at a time: as the listing gave them, or, for one it listed
 * without (past the URLs an answer carries), from `GET /jobs/{id}/checkpoints?checkpoint=<name>`. Each page is asked
 * for once the one before is downloaded, so its URLs (valid 15 minutes) are fresh when used.
 */
async function* checkpointFilePages(client: ApiClient, jobId: string, checkpoint: unknown): AsyncGenerator<unknown[]> {
  const listed = at(checkpoint, 'files');
  if (Array.isArray(listed) && at(checkpoint, 'filesOmitted') !== true) {
    yield listed;
    return;
  }
  const name = str(checkpoint, 'name');
  if (name === undefined) {
    throw new CliError('a checkpoint in the API answer has no name', EXIT_CODES.unexpected, 'InvalidResponse');
  }
  let after: string | undefined;
  do {
    const { body } = await client.send({
      method: 'GET',
      path: checkpointsPath(jobId),
      query: { checkpoint: name, filesAfter: after },
    });
    yield list(checkpointsOf(body)[0], 'files');
    const next = str(body, 'nextFilesAfter');
    if (next !== undefined && next === after) {
      throw new CliError(
        `the API answered the same page of ${name}'s files twice`,
        EXIT_CODES.unexpected,
        'InvalidResponse',
      );
    }
    after = next;
  } while (after !== undefined);
}

/**
 * Refuses a `--download` folder that cannot be one before anything is asked of the API: a file of that name, or a
 * folder (or the nearest existing folder above it) this user cannot write in. Creates nothing.
 */
function checkDownloadFolder(folder: string, given: string): void {
  let existing = folder;
  for (;;) {
    let stats: ReturnType<typeof statSync> | undefined;
    try {
      stats = statSync(existing);
    } catch {
      stats = undefined;
    }
    if (stats !== undefined) {
      const problem = !stats.isDirectory()
        ? `${existing} is not a folder`
        : writable(existing)
          ? undefined
          : `${existing} is not writable`;
      if (problem !== undefined) {
        throw new CliError(
          `--download ${given}: ${problem}; give a folder to download into (it is created if missing)`,
          EXIT_CODES.usage,
          'InvalidOption',
        );
      }
      return;
    }
    const parent = dirname(existing);
    if (parent === existing) return;
    existing = parent;
  }
}

function writable(path: string): boolean {
  try {
    accessSync(path, fsConstants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Checkpoint files downloaded at once: a sharded checkpoint's many files come in a fraction of the time. */
const DOWNLOADS_IN_FLIGHT = 8;

/**
 * Writes a checkpoint's files under `directory`, keeping their layout. Every path is checked before any download
 * starts; each file is streamed to disk, so a file of many GiB never sits in memory.
 */
async function downloadCheckpoint(
  fetchImpl: FetchLike,
  files: readonly unknown[],
  directory: string,
  tally: { bytes(n: number): void; file(): void },
): Promise<number> {
  const downloads = files.map((file) => {
    const path = at(file, 'path');
    const url = at(file, 'url') ?? at(file, 'downloadUrl');
    if (typeof path !== 'string' || typeof url !== 'string') {
      throw new CliError(
        'a checkpoint file has no path or download url in the API answer',
        EXIT_CODES.unexpected,
        'InvalidResponse',
      );
    }
    if (isAbsolute(path) || path.split('/').includes('..')) {
      throw new CliError(
        `refusing checkpoint file path that leaves the download folder: ${path}`,
        EXIT_CODES.unexpected,
        'InvalidResponse',
      );
    }
    return { path, url };
  });
  await mapConcurrently(downloads, DOWNLOADS_IN_FLIGHT, async ({ path, url }) => {
    let response: Response;
    try {
      response = await fetchImpl(url);
    } catch (error) {
      throw new CliError(`cannot download ${path}: ${(error as Error).message}`, EXIT_CODES.unreachable, 'Unreachable');
    }
    if (!response.ok || !response.body) {
      throw new CliError(
        `downloading ${path} failed with HTTP ${response.status}`,
        EXIT_CODES.unexpected,
        'DownloadFailed',
      );
    }
    const target = join(directory, path);
    try {
      mkdirSync(dirname(target), { recursive: true });
      await pipeline(
        Readable.fromWeb(response.body as WebReadableStream<Uint8Array>),
        new Transform({
          transform(chunk: Buffer, _encoding, next) {
            tally.bytes(chunk.length);
            next(null, chunk);
          },
        }),
        createWriteStream(target),
      );
      tally.file();
    } catch (error) {
      // Writing it here failed (a file in the way, a full disk): the download failed, not the connection.
      if ((error as NodeJS.ErrnoException).syscall !== undefined) {
        throw new CliError(`cannot write ${target}: ${(error as Error).message}`, EXIT_CODES.unexpected, 'WriteFailed');
      }
      throw new CliError(`cannot download ${path}: ${(error as Error).message}`, EXIT_CODES.unreachable, 'Unreachable');
    }
  });
  return downloads.length;
}

/** An error as `--json` reports it: one line on stderr, `{ error: { code, message, details? }, exitCode }`. */
function printJsonError(deps: CliDeps, error: CliError): void {
  const body = { code: error.code, message: error.message, ...(error.details ? { details: error.details } : {}) };
  deps.io.stderr(`${JSON.stringify({ error: body, exitCode: error.exitCode })}\n`);
}

/** Stops commander printing usage errors (and the help after them) for `command` and every command below it. */
function silenceUsageErrors(command: Command): void {
  command.configureOutput({ writeErr: () => {}, outputError: () => {} }).showHelpAfterError(false);
  for (const sub of command.commands) silenceUsageErrors(sub);
}

/** Commander's usage error in the CLI's words: its message without the `error: ` it prints before it. */
function usageMessage(error: CommanderError): string {
  if (error.code === 'commander.help') return 'no command given: run `trainyard --help` for the commands';
  return error.message.replace(/^error: /, '');
}

/** Runs the CLI with `argv` (the arguments after the program name); resolves with the exit code. */
export async function runCli(
  argv: readonly string[],
  deps: CliDeps,
  registrars: readonly CommandRegistrar[] = [],
): Promise<number> {
  let exitCode: number = EXIT_CODES.ok;
  // Only the CLI's own options count: `--json` after `--` belongs to the user's command.
  const separator = argv.indexOf('--');
  const json = (separator === -1 ? argv : argv.slice(0, separator)).includes('--json');
  const program = createProgram(
    deps,
    (code) => {
      exitCode = code;
    },
    registrars,
  );
  // Under --json every error is one JSON line on stderr, commander's usage errors too: it prints none of its own.
  if (json) silenceUsageErrors(program);
  try {
    await program.parseAsync([...argv], { from: 'user' });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has already printed its message (or the help), unless under --json. Help asked for (`--help`,
      // `help`) and the version are successes; the help shown because no command was given (commander's exit code 1)
      // is bad usage.
      if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return EXIT_CODES.ok;
      if (error.code === 'commander.help' && error.exitCode === 0) return EXIT_CODES.ok;
      if (json) printJsonError(deps, new CliError(usageMessage(error), EXIT_CODES.usage, 'InvalidUsage'));
      return EXIT_CODES.usage;
    }
    if (error instanceof CliError) {
      if (json) printJsonError(deps, error);
      else deps.io.stderr(`trainyard: ${error.message}\n`);
      return error.exitCode;
    }
    if (json) {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      printJsonError(deps, new CliError(`unexpected error: ${message}`, EXIT_CODES.unexpected, 'Unexpected'));
      return EXIT_CODES.unexpected;
    }
    const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
    deps.io.stderr(`trainyard: unexpected error: ${message}\n`);
    return EXIT_CODES.unexpected;
  }
}
