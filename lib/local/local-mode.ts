/**
 * Local mode in one process: dynalite and s3rver (persistent, under the local folder), the same tables and bucket
 * layout as the stacks, the API handler behind the loopback server, the job state machine synthesized from the
 * JobStateMachine construct run by aws-local-stepfunctions with its Tasks bound to the Lambdas' own handlers, the
 * local Batch runner (the real harness as a subprocess), and the event handlers fed the way EventBridge feeds them on
 * AWS: Batch state changes → batch-events, spot warnings → interruption, a schedule → budget-watch, and the report
 * schedules `config.reports` asks for → reports (at the same UTC times as on AWS, while local mode runs; also on
 * demand with `trainyard local report`).
 *
 * The local principal: the API maps callers to teams by IAM principal, so local mode acts as one. When the chosen
 * team (default: the first in the config) lists no principals, `arn:aws:iam::000000000000:user/trainyard-local` is
 * added to that team and to the admins — in memory only, the config file is not changed — so the CLI can submit and
 * set budgets locally. When the team lists principals, local mode acts as its first one.
 *
 * Restarts: jobs, budgets and checkpoints live in the persistent engines and survive. The executions themselves live
 * in this process, so an execution cut off by a stop cannot be continued: on start, every job still in a live state
 * is finalized (through the Finalize handler, so its ledger entry settles to the recorded attempt costs and its
 * summary is written) with {@link INTERRUPTED_BY_RESTART_REASON}, as its records say it ended, as execution-ended
 * finalizes a job whose execution ended on AWS: CANCELLED when a cancel was asked for, SUCCEEDED when its newest
 * attempt succeeded, else FAILED. Its checkpoints stay in the workspace. Before
 * that, attempts a crashed local mode left running (a stop kills them; a crash cannot) are killed
 * ({@link LocalBatchRunner.reapOrphans}), so they neither hold the machine nor report after their end is recorded.
 */
import './polyfills';
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LogLevel } from '@aws-lambda-powertools/logger/types';
import { createApiHandler } from '../../lambdas/api/app';
import { createBatchEventsHandler } from '../../lambdas/batch-events/batch-events';
import { createBudgetWatchHandler } from '../../lambdas/budget-watch/budget-watch';
import { queueName } from '../../lambdas/domain/batch-names';
import { type JobRecord, LIVE_STATES } from '../../lambdas/domain/job';
import { nextReportRun, REPORT_KINDS, type ReportKind } from '../../lambdas/domain/showback';
import type { ContainerOverrides } from '../../lambdas/domain/submit-job';
import { createExecutionEndedHandler } from '../../lambdas/execution-ended/execution-ended';
import { createInterruptionHandler } from '../../lambdas/interruption/interruption';
import { createFinalizeHandler } from '../../lambdas/lifecycle/finalize';
import { createReportsHandler, type ReportsResult } from '../../lambdas/reports/reports';
import type { ControlPlane } from '../../lambdas/shared/control-plane';
import {
  BATCH_STATE_CHANGE_DETAIL_TYPE,
  EXECUTION_STATUS_CHANGE_DETAIL_TYPE,
  SCHEDULED_EVENT_DETAIL_TYPE,
} from '../../lambdas/shared/event-schemas';
import { logger } from '../../lambdas/shared/logger';
import { fileMetricPublisher } from '../../lambdas/shared/metrics';
import type { EventPublisher } from '../../lambdas/shared/ports';
import { DEFAULT_CONFIG_PATH, loadConfig, type TeamConfig, type TrainyardConfig } from '../config';
import {
  type BatchJobDetail,
  LOCAL_ACCOUNT,
  LOCAL_REGION,
  LocalBatchRunner,
  NoRunningAttempt,
  NotSpotCapacity,
  type QueueTarget,
  type ReapedAttempt,
  type SpotInterruptionWarningEvent,
} from './batch-runner';
import { ensureLocalTables, type LocalEngineCredentials, lifecycleSteps, localControlPlane } from './control-plane';
import { type StateMachineDefinition, synthesizeJobStateMachineDefinition } from './definition';
import { type RunningEngine, randomEngineCredentials, startDynalite, startS3rver } from './engines';
import { awsTimestamp } from './fake-imds';
import type { SubmitJobInput } from './local-batch';
import { formatEventLine, localEventPublisher, localFleetFacts, localLogReader } from './local-ports';
import { LOCAL_NAMES } from './names';
import { type LocalControlHandler, startLocalApiServer } from './server';
import {
  type EndedExecution,
  LocalStateMachine,
  type LocalStepHandlers,
  type StepHandler,
} from './state-machine-runner';
import { ensureLocalToken, LOCAL_DIR } from './token';

/** The principal local mode acts as when the chosen team lists none. */
export const LOCAL_PRINCIPAL_ARN = `arn:aws:iam::${LOCAL_ACCOUNT}:user/trainyard-local`;

/** Finalize's reason for a job whose execution was in flight when local mode stopped. */
export const INTERRUPTED_BY_RESTART_REASON =
  'local mode stopped while this job was live; its execution cannot be continued after a restart (its checkpoints are kept: `trainyard checkpoints <job> --download <dir>` fetches them; a job submitted again starts afresh)';

/** The local control route that serves a spot notice to a job's running attempt. */
export const INTERRUPT_ROUTE = 'POST /_local/jobs/{id}/interrupt';

/** The local control route that runs a scheduled report now (`daily` or `weekly`: the last complete period). */
export const REPORT_ROUTE = 'POST /_local/reports/{kind}';

/** The EventBridge schedule rule's name in local "Scheduled Event" resources. */
const BUDGET_WATCH_RULE = `arn:aws:events:${LOCAL_REGION}:${LOCAL_ACCOUNT}:rule/trainyard-local-budget-watch`;
/** The local job state machine's ARN, as execution status changes name it. */
export const LOCAL_STATE_MACHINE_ARN = `arn:aws:states:${LOCAL_REGION}:${LOCAL_ACCOUNT}:stateMachine:trainyard-local-jobs`;

/** images/harness of this checkout: the runner must find it whatever the working directory. */
const HARNESS_PATH = fileURLToPath(new URL('../../images/harness', import.meta.url));

/**
 * Raised by every lifecycle step once local mode is stopping. It is neither retryable nor catchable (the flags
 * aws-local-stepfunctions reads), so the execution ends at once — like a host going away — rather than retrying
 * infrastructure errors against a stopped runner and burning the job's retry budget. The killed attempt's end is
 * recorded first (batch-events), and the job, still live, is finalized at the next start.
 */
export class LocalModeStopped extends Error {
  override name = 'LocalModeStopped';
  readonly isRetryable = false;
  readonly isCatchable = false;
}

/** The step handlers, each refusing with {@link LocalModeStopped} once `halted()` is true. */
export function haltingWhen(steps: LocalStepHandlers, halted: () => boolean): LocalStepHandlers {
  const guard =
    (name: string, step: StepHandler): StepHandler =>
    async (input) => {
      if (halted()) throw new LocalModeStopped(`local mode is stopping: step ${name} was not run`);
      return step(input);
    };
  return {
    analyze: guard('Analyze', steps.analyze),
    costGate: guard('CostGate', steps.costGate),
    prepareAttempt: guard('PrepareAttempt', steps.prepareAttempt),
    attemptOutcome: guard('AttemptOutcome', steps.attemptOutcome),
    pause: guard('PausedForBudget', steps.pause),
    backoff: guard('Backoff', steps.backoff),
    finalize: guard('Finalize', steps.finalize),
  };
}

/** Raised when local mode cannot start with the options given; the message says what to change. */
export class LocalModeError extends Error {
  override name = 'LocalModeError';
}

/** How to start local mode. */
export interface LocalModeOptions {
  /** Local folder: engines' data, token, state, logs, events. @default '.trainyard' */
  readonly dir?: string;
  /** Configuration file. @default - trainyard.config.json when it exists, else all defaults */
  readonly configPath?: string;
  /** An already-parsed configuration (tests); wins over configPath. */
  readonly config?: TrainyardConfig;
  /** API server port. @default 0 - a free port */
  readonly port?: number;
  /** Random spot notices per running spot attempt per hour. @default 0 - only on demand (`trainyard local interrupt`) */
  readonly spotInterruptionsPerHour?: number;
  /** Uniform [0, 1) source for random interruptions (seededRandom makes them reproducible). @default Math.random */
  readonly random?: () => number;
  /** Seconds between budget-watch ticks (EventBridge's schedule on AWS: 5 minutes). @default 300 */
  readonly budgetWatchSeconds?: number;
  /**
   * End the lifecycle's Backoff (the wait before a retry, the plan's delaySeconds) after this many ms instead; tests
   * use 0. @default - the plan's own delay
   */
  readonly backoffWaitMs?: number;
  /** Replace Task retry intervals with this many ms (tests: 0). @default - the definition's intervals */
  readonly retryIntervalMs?: number;
  /** Seconds from a spot notice to the reclaim. @default 120 (AWS's two minutes) */
  readonly noticeKillSeconds?: number;
  /** IMDS poll interval the harness uses. @default 1 */
  readonly imdsPollSeconds?: number;
  /** Receives one readable line per platform event and per local-mode message. @default - nothing printed */
  readonly console?: (line: string) => void;
  /** The team local mode acts for. @default - the first team in the config */
  readonly team?: string;
  /**
   * TRAINYARD_SYNC_INTERVAL_SECONDS for every attempt: the harness uploads progress at least this often (on AWS its
   * default, 300 s, bounds metric uploads to 60 s; locally a live progress bar is the point). @default 10
   */
  readonly syncIntervalSeconds?: number;
  /** Interpreter for the harness. @default '/usr/bin/python3' */
  readonly python?: string;
  /** Folder holding `trainyard_harness`. @default - images/harness of this checkout, wherever local mode runs from */
  readonly harnessPath?: string;
  /** Powertools log level of the handlers (their JSON logs go to stdout). @default 'WARN' */
  readonly logLevel?: LogLevel;
}

/** A running local mode. */
export interface LocalMode {
  readonly apiUrl: string;
  readonly token: string;
  readonly dir: string;
  /** dynalite's loopback endpoint (the jobs and budgets tables). */
  readonly dynamoEndpoint: string;
  /** s3rver's loopback endpoint (the workspace bucket). */
  readonly s3Endpoint: string;
  /** The key each engine answers, made afresh at each start (engines.ts); nothing else is answered. */
  readonly engineCredentials: LocalEngineCredentials;
  /** The configuration in effect (with the local principal added when needed). */
  readonly config: TrainyardConfig;
  readonly team: string;
  readonly principalArn: string;
  readonly plane: ControlPlane;
  readonly machine: LocalStateMachine;
  /** The definition the machine runs: the synthesized one with Step Functions' Task timeout default made explicit. */
  readonly definition: StateMachineDefinition;
  readonly runner: LocalBatchRunner;
  /** Jobs finalized at start because their execution had been cut off by an earlier stop. */
  readonly recovered: readonly string[];
  /** Attempts an earlier local mode on this folder left running (it crashed), killed at start. */
  readonly reaped: readonly ReapedAttempt[];
  /** Runs one budget-watch tick now (what the schedule does every budgetWatchSeconds). */
  budgetWatchTick(): Promise<void>;
  /** Runs a scheduled report as its schedule would at `at` (default now): the last complete period's showback. */
  runReports(kind: ReportKind, at?: Date): Promise<ReportsResult>;
  /** Stops timers, the runner (kills harnesses), the server and the engines; removes local.json. Idempotent. */
  stop(): Promise<void>;
}

/** The configuration local mode runs with: the team it acts for, and the principal it acts as. */
export function localModeConfig(
  config: TrainyardConfig,
  teamId?: string,
): { config: TrainyardConfig; team: TeamConfig; principalArn: string } {
  const team = teamId === undefined ? config.teams[0] : config.teams.find((t) => t.id === teamId);
  if (!team) {
    throw new LocalModeError(
      `team "${teamId}" is not in the configuration; teams: ${config.teams.map((t) => t.id).join(', ')}`,
    );
  }
  const existing = team.principals[0];
  if (existing !== undefined) return { config, team, principalArn: existing };
  const withPrincipal: TeamConfig = { ...team, principals: [LOCAL_PRINCIPAL_ARN] };
  return {
    config: {
      ...config,
      teams: config.teams.map((t) => (t.id === team.id ? withPrincipal : t)),
      admins: config.admins.includes(LOCAL_PRINCIPAL_ARN) ? config.admins : [...config.admins, LOCAL_PRINCIPAL_ARN],
    },
    team: withPrincipal,
    principalArn: LOCAL_PRINCIPAL_ARN,
  };
}

/** Each Batch queue the platform stack creates, by name, with its tier and capacity. */
export function localQueues(config: TrainyardConfig, prefix: string): Map<string, QueueTarget> {
  const queues = new Map<string, QueueTarget>();
  for (const tier of config.tiers) {
    queues.set(queueName(prefix, tier.id, 'on-demand'), { tier, capacity: 'on-demand' });
    if (tier.spotAllowed) queues.set(queueName(prefix, tier.id, 'spot'), { tier, capacity: 'spot' });
  }
  return queues;
}

/** The "Batch Job State Change" EventBridge event carrying a job detail (what the batch-events rule delivers). */
export function batchStateChangeEvent(detail: BatchJobDetail, nowMs: number) {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': BATCH_STATE_CHANGE_DETAIL_TYPE,
    source: 'aws.batch',
    account: LOCAL_ACCOUNT,
    time: awsTimestamp(nowMs),
    region: LOCAL_REGION,
    resources: typeof detail.jobArn === 'string' ? [detail.jobArn] : [],
    detail,
  };
}

/**
 * An EventBridge "Step Functions Execution Status Change" for an execution that failed or was stopped (what the
 * execution-ended rule delivers on AWS); input and output are left out, as for a payload too large to include.
 */
export function executionStatusChangeEvent(ended: EndedExecution, nowMs: number) {
  const executionArn = `arn:aws:states:${LOCAL_REGION}:${LOCAL_ACCOUNT}:execution:trainyard-local-jobs:${ended.name}`;
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': EXECUTION_STATUS_CHANGE_DETAIL_TYPE,
    source: 'aws.states',
    account: LOCAL_ACCOUNT,
    time: awsTimestamp(nowMs),
    region: LOCAL_REGION,
    resources: [executionArn],
    detail: {
      executionArn,
      stateMachineArn: LOCAL_STATE_MACHINE_ARN,
      name: ended.name,
      status: ended.status,
      startDate: ended.startDate,
      stopDate: ended.stopDate,
      input: null,
      inputDetails: { included: false },
      output: null,
      outputDetails: null,
      ...(ended.error ? { error: ended.error } : {}),
      ...(ended.cause ? { cause: ended.cause } : {}),
    },
  };
}

/** An EventBridge "Scheduled Event" (what the budget-watch schedule delivers). */
export function scheduledEvent(nowMs: number) {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': SCHEDULED_EVENT_DETAIL_TYPE,
    source: 'aws.events',
    account: LOCAL_ACCOUNT,
    time: awsTimestamp(nowMs),
    region: LOCAL_REGION,
    resources: [BUDGET_WATCH_RULE],
    detail: {},
  };
}

/** Starts local mode; see the module comment for what runs and how restarts behave. */
export async function startLocalMode(options: LocalModeOptions = {}): Promise<LocalMode> {
  const dir = resolve(options.dir ?? LOCAL_DIR);
  const print = options.console ?? (() => undefined);
  const loaded =
    options.config ??
    (options.configPath !== undefined ? loadConfig(options.configPath, true) : loadConfig(DEFAULT_CONFIG_PATH));
  const { config, team, principalArn } = localModeConfig(loaded, options.team);
  logger.setLogLevel(options.logLevel ?? 'WARN');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const token = ensureLocalToken(dir);

  const started: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of started.reverse()) await stop().catch(() => undefined);
    started.length = 0;
  };
  try {
    // Loopback is open to every user of the machine: each engine answers only its key of this start. dynalite's stays
    // in this process; s3rver's also goes to the attempts and, in presigned URLs, to the CLI.
    const credentials: LocalEngineCredentials = { dynamo: randomEngineCredentials(), s3: randomEngineCredentials() };
    const dynamo: RunningEngine = await startDynalite({ path: join(dir, 'dynamo'), credentials: credentials.dynamo });
    started.push(() => dynamo.stop());
    const s3: RunningEngine = await startS3rver({
      directory: join(dir, 's3'),
      buckets: [LOCAL_NAMES.bucket],
      credentials: credentials.s3,
    });
    started.push(() => s3.stop());
    await ensureLocalTables(dynamo.endpoint, credentials.dynamo);

    const queues = localQueues(config, 'trainyard');
    // Handlers are created after the plane; the runner calls them through these late-bound references.
    let onBatchState: (event: unknown) => Promise<unknown> = async () => undefined;
    let onSpotNotice: (event: unknown) => Promise<unknown> = async () => undefined;
    const deliveries = new Set<Promise<unknown>>();
    const track = <T>(promise: Promise<T>): Promise<T> => {
      deliveries.add(promise);
      promise.finally(() => deliveries.delete(promise)).catch(() => undefined);
      return promise;
    };
    const runner = new LocalBatchRunner({
      workDir: dir,
      s3Endpoint: s3.endpoint,
      s3Credentials: credentials.s3,
      tiersByQueue: (name) => queues.get(name),
      onStateChange: async (detail) => {
        await track(onBatchState(batchStateChangeEvent(detail, Date.now())));
      },
      onSpotNotice: async (event: SpotInterruptionWarningEvent) => {
        await track(onSpotNotice(event));
      },
      spotInterruptionsPerHour: options.spotInterruptionsPerHour ?? 0,
      ...(options.random ? { random: options.random } : {}),
      ...(options.noticeKillSeconds !== undefined ? { noticeKillSeconds: options.noticeKillSeconds } : {}),
      imdsPollSeconds: options.imdsPollSeconds ?? 1,
      harnessPath: options.harnessPath ?? HARNESS_PATH,
      ...(options.python !== undefined ? { python: options.python } : {}),
      onCallbackError: (error, what) => print(`local mode: ${what} failed: ${describeError(error)}`),
    });
    let machine: LocalStateMachine | undefined;
    started.push(async () => {
      // Runs after the runner has stopped (stops run in reverse): executions whose attempt was just killed record it
      // (batch-events, AttemptOutcome, Finalize) while the engines are still up; whatever is still live after that
      // is finalized at the next start.
      const live = machine;
      const running = live ? live.running().map((name) => live.waitFor(name)) : [];
      await settleWithin([...running, ...deliveries], 10_000);
      // What still runs waits (a retry's backoff, a budget pause): left for the next start, as its engines close.
      live?.abandon();
    });
    started.push(() => runner.stop());

    const plane = localControlPlane({
      config,
      dynamoEndpoint: dynamo.endpoint,
      s3Endpoint: s3.endpoint,
      engineCredentials: credentials,
      batch: runner,
      events: consoleDedupedEvents(join(dir, 'events.jsonl'), print),
      metrics: fileMetricPublisher(join(dir, 'metrics.jsonl')),
      lifecycle: () => {
        if (!machine) throw new LocalModeError('the local state machine is not ready yet');
        return machine;
      },
      logs: localLogReader(join(dir, 'logs')),
      fleet: localFleetFacts((arn) => runner.instanceFor(arn)),
    });
    // Set when stop() begins: executions end where they stand (see LocalModeStopped) instead of going on without
    // compute, so a job cut off by a stop is left live for the next start to finalize.
    let halted = false;
    const definition = synthesizeJobStateMachineDefinition();
    const syncInterval = String(options.syncIntervalSeconds ?? 10);
    machine = new LocalStateMachine({
      definition,
      steps: haltingWhen(lifecycleSteps(plane), () => halted),
      // Exactly the runner, with local mode's sync interval added to what PrepareAttempt put in the environment.
      batch: {
        runJob: async (input) => {
          if (halted) throw new LocalModeStopped(`local mode is stopping: attempt ${input.JobName} was not started`);
          return runner.runJob(withEnvironment(input, 'TRAINYARD_SYNC_INTERVAL_SECONDS', syncInterval));
        },
      },
      ...(options.backoffWaitMs !== undefined ? { backoffWaitMs: options.backoffWaitMs } : {}),
      ...(options.retryIntervalMs !== undefined ? { retryIntervalMs: options.retryIntervalMs } : {}),
      onEvent: (execution, event) => {
        if (event.type === 'ExecutionFailed') {
          print(
            `Execution ${execution} failed: ${[event.Error, event.Cause, event.error].filter(Boolean).join(' — ')}`,
          );
        }
      },
      // As the execution-ended rule on AWS: a job whose execution failed is ended and finalized. Not while stopping:
      // a job cut off by a stop stays live for the next start to finalize (finalizeCutOffJobs).
      onExecutionEnded: async (ended) => {
        if (halted) return;
        const result = await track(onExecutionEnded(executionStatusChangeEvent(ended, Date.now())));
        if (result.action === 'finalized') {
          print(`Job ${result.jobId} finalized ${result.state} after its execution ${ended.status.toLowerCase()}`);
        }
      },
    });

    const batchEvents = createBatchEventsHandler(plane);
    const interruption = createInterruptionHandler(plane);
    const onExecutionEnded = createExecutionEndedHandler(plane);
    onBatchState = batchEvents;
    onSpotNotice = interruption;
    const budgetWatch = createBudgetWatchHandler(plane);
    const finalize = createFinalizeHandler(plane);

    // Attempts a crashed local mode left running stop first, so that what Finalize reads of them is final.
    const reaped = await runner.reapOrphans();
    for (const { batchJobId, pids } of reaped) {
      print(
        `Stopped Batch job ${batchJobId}, left running when local mode last stopped: killed ${pids.length} process(es) (${pids.join(', ')})`,
      );
    }
    const recovered = await finalizeCutOffJobs(plane, finalize, print);

    const interrupt: LocalControlHandler = async ({ pathParameters }) => {
      const jobId = pathParameters.id ?? '';
      const job = await plane.jobs.getJob(jobId);
      if (!job || job.team !== team.id) {
        return notFound('JobNotFound', `no job ${jobId} in team ${team.id}`);
      }
      try {
        const served = await runner.interrupt(jobId);
        const { platform, batchJobId, noticeTime } = served;
        if (served.platform === 'EC2') {
          print(`Spot notice served  job=${jobId} instance=${served.instanceId} reclaim-at=${noticeTime}`);
        } else {
          print(
            `Fargate Spot interruption  job=${jobId} ${served.alreadyStopping ? 'already stopping' : 'SIGTERM sent'}, SIGKILL at=${noticeTime}`,
          );
        }
        return {
          statusCode: 202,
          body: {
            jobId,
            batchJobId,
            platform,
            ...(served.platform === 'EC2' && { instanceId: served.instanceId }),
            ...(served.platform === 'FARGATE' && { alreadyStopping: served.alreadyStopping }),
            noticeTime,
          },
        };
      } catch (error) {
        if (error instanceof NoRunningAttempt) {
          return notFound('NoRunningAttempt', `job ${jobId} (${job.state}) has no running attempt to interrupt`);
        }
        if (error instanceof NotSpotCapacity) {
          return { statusCode: 409, body: { error: { code: 'NotSpotCapacity', message: error.message } } };
        }
        throw error;
      }
    };
    const reports = createReportsHandler(plane);
    /** Report runs in flight: a stop waits for them before closing the engines. */
    const reporting = new Set<Promise<unknown>>();
    const runReports = async (kind: ReportKind, at = new Date()) => {
      const run = reports({ report: kind, time: at.toISOString() });
      reporting.add(run);
      const result = await run.finally(() => reporting.delete(run));
      const total = result.written.at(-1);
      print(
        `Showback report (${kind}) ${result.periodStart}..${result.periodEnd}: $${(total?.totalUsd ?? 0).toFixed(2)} over ${total?.jobs ?? 0} job(s), ${result.written.length} report(s) under reports/${kind}/${result.periodStart}/`,
      );
      return result;
    };
    const report: LocalControlHandler = async ({ pathParameters }) => {
      const kind = pathParameters.kind ?? '';
      if (!(REPORT_KINDS as readonly string[]).includes(kind)) {
        return notFound('UnknownReport', `no report "${kind}"; reports: ${REPORT_KINDS.join(', ')}`);
      }
      return { statusCode: 200, body: await runReports(kind as ReportKind) };
    };
    const server = await startLocalApiServer({
      handler: createApiHandler(plane),
      token,
      principalArn,
      ...(options.port !== undefined ? { port: options.port } : {}),
      stateDir: dir,
      control: { [INTERRUPT_ROUTE]: interrupt, [REPORT_ROUTE]: report },
      onError: (error) => print(`local API handler failed: ${describeError(error)}`),
    });
    started.push(() => server.close());

    let ticking: Promise<void> | undefined;
    const budgetWatchTick = async () => {
      // Ticks never overlap (EventBridge may overlap Lambda runs; the handler tolerates it, but locally it is noise).
      if (ticking) return ticking;
      ticking = budgetWatch(scheduledEvent(Date.now()))
        .then(() => undefined)
        .catch((error: unknown) => print(`local mode: budget-watch failed: ${describeError(error)}`))
        .finally(() => {
          ticking = undefined;
        });
      return ticking;
    };
    const seconds = options.budgetWatchSeconds ?? 300;
    const timer = setInterval(() => void budgetWatchTick(), Math.max(1, seconds) * 1000);
    timer.unref();
    // Stopping runs in reverse: timer, server, executions settle, runner, s3rver, dynalite.
    started.push(async () => {
      clearInterval(timer);
      await ticking;
    });

    // The report schedules, at the times EventBridge would run them.
    const reportTimers = new Map<ReportKind, NodeJS.Timeout>();
    const scheduleReport = (kind: ReportKind) => {
      const at = nextReportRun(kind, new Date());
      const timeout = setTimeout(() => {
        void runReports(kind, at)
          .catch((error: unknown) => print(`local mode: ${kind} report failed: ${describeError(error)}`))
          .finally(() => scheduleReport(kind));
      }, at.getTime() - Date.now());
      timeout.unref();
      reportTimers.set(kind, timeout);
    };
    for (const kind of REPORT_KINDS) if (config.reports[kind]) scheduleReport(kind);
    started.push(async () => {
      for (const timeout of reportTimers.values()) clearTimeout(timeout);
      await Promise.allSettled([...reporting]);
    });

    let stopping: Promise<void> | undefined;
    return {
      apiUrl: server.url,
      token,
      dir,
      dynamoEndpoint: dynamo.endpoint,
      s3Endpoint: s3.endpoint,
      engineCredentials: credentials,
      config,
      team: team.id,
      principalArn,
      plane,
      machine,
      definition,
      runner,
      recovered,
      reaped,
      budgetWatchTick,
      runReports,
      stop: () => {
        halted = true;
        stopping ??= stopAll();
        return stopping;
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * The submission with one more environment variable where the job does not set it: in its ContainerOverrides, or, for a
 * multi-node job (which Batch refuses ContainerOverrides for), in each node group's overrides.
 */
export function withEnvironment(input: SubmitJobInput, name: string, value: string): SubmitJobInput {
  const sets = (overrides: ContainerOverrides | undefined) =>
    (overrides?.Environment ?? []).some((e) => e.Name === name);
  const added = (overrides: ContainerOverrides | undefined): ContainerOverrides => ({
    ...overrides,
    Environment: [...(overrides?.Environment ?? []), { Name: name, Value: value }],
  });
  const nodes = input.ContainerOverrides === undefined ? input.NodeOverrides : undefined;
  if (nodes !== undefined) {
    if (nodes.NodePropertyOverrides.every((node) => sets(node.ContainerOverrides))) return input;
    const NodePropertyOverrides = nodes.NodePropertyOverrides.map((node) =>
      sets(node.ContainerOverrides) ? node : { ...node, ContainerOverrides: added(node.ContainerOverrides) },
    );
    return { ...input, NodeOverrides: { ...nodes, NodePropertyOverrides } };
  }
  if (sets(input.ContainerOverrides)) return input;
  return { ...input, ContainerOverrides: added(input.ContainerOverrides) };
}

async function finalizeCutOffJobs(
  plane: ControlPlane,
  finalize: (input: unknown) => Promise<unknown>,
  print: (line: string) => void,
): Promise<string[]> {
  // Every team's, not only the configured ones: a restart with a configuration that dropped a team still ends its jobs
  // (Finalize needs nothing of the team's configuration). A record that does not parse is named, not a failed start.
  const live: JobRecord[] = await plane.jobs.listJobsInStates(
    plane.config.teams.map((t) => t.id),
    LIVE_STATES,
    ({ key, error }) =>
      print(`local mode: a job record cut off by the last stop cannot be read (${key}): ${error.message}`),
    true,
  );
  const recovered: string[] = [];
  for (const job of live) {
    // No final state: Finalize takes it from the records, as for an execution that ended on AWS (execution-ended).
    let ended: { state: string };
    try {
      ended = (await finalize({ jobId: job.jobId, reason: INTERRUPTED_BY_RESTART_REASON })) as { state: string };
    } catch (error) {
      // One job that cannot be ended (its tier gone from the configuration, say) does not keep local mode from starting.
      print(
        `local mode: job ${job.jobId} (${job.state} when local mode last stopped, team ${job.team}) could not be finalized: ${describeError(error)}`,
      );
      continue;
    }
    recovered.push(job.jobId);
    print(
      `Job ${job.jobId} (${job.state} when local mode last stopped) finalized as ${ended.state}: ${INTERRUPTED_BY_RESTART_REASON}`,
    );
  }
  return recovered;
}

/**
 * Events to events.jsonl (every delivery, as the bus would carry it) and one console line per event: a redelivery
 * (same deterministic eventId, e.g. a retried step) is written to the file but not printed twice.
 */
function consoleDedupedEvents(eventsFile: string, print: (line: string) => void): EventPublisher {
  const file = localEventPublisher({ eventsFile });
  const printed = new Set<string>();
  return {
    async publish(entries) {
      await file.publish(entries);
      for (const entry of entries) {
        const detail = JSON.parse(entry.Detail) as Record<string, unknown>;
        const id = typeof detail.eventId === 'string' ? detail.eventId : undefined;
        if (id !== undefined && printed.has(id)) continue;
        if (id !== undefined) printed.add(id);
        print(formatEventLine({ 'detail-type': entry.DetailType, detail }));
      }
    },
  };
}

function notFound(code: string, message: string) {
  return { statusCode: 404, body: { error: { code, message } } };
}

async function settleWithin(promises: readonly Promise<unknown>[], ms: number): Promise<void> {
  if (promises.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((done) => {
    timer = setTimeout(done, ms);
  });
  await Promise.race([Promise.allSettled(promises), deadline]);
  clearTimeout(timer);
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
