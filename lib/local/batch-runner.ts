/**
 * Local compute that behaves like AWS Batch for the lifecycle, on EC2 for the GPU tiers and on Fargate for the CPU
 * tiers: each submitted job (one Trainyard attempt) runs the real harness (`python -m trainyard_harness -- <command>`)
 * as a subprocess, with a per-attempt fake IMDS for an EC2 attempt's spot notices and s3rver for code, checkpoints
 * and metrics. It answers as Step Functions' `batch:submitJob.sync` does
 * (the job with PascalCase keys on SUCCEEDED; `States.TaskFailed` with the FAILED job as the Cause otherwise), emits
 * "Batch Job State Change" details (camelCase, as the EventBridge event's `detail`), delivers "EC2 Spot Instance
 * Interruption Warning" events, and implements TerminateJob (the BatchControl port).
 *
 * How an attempt's end is reported (see {@link describeAttemptEnd}; every case is classified by
 * lambdas/domain/outcome.ts from these fields alone):
 * - TerminateJob(reason) → job statusReason = the reason (TerminateJob's reason "is returned by future DescribeJobs
 *   operations"), attempt statusReason `Essential container in task exited`, the harness's exit code (75 after its
 *   checkpoint). Outcome rule 2: the reason decides.
 * - Timeout.AttemptDurationSeconds reached → SIGTERM as Batch does, job statusReason `Job attempt duration exceeded
 *   timeout`, the harness's exit code. Outcome rule 5: timed-out.
 * - Spot notice, harness exits 75 (it checkpointed inside the warning) → `Essential container in task exited` with
 *   exit code 75, as on AWS: the container ends while its host is still up (the warning comes two minutes before EC2
 *   acts), so Batch reports the container's exit, not the host's end (test/fixtures/batch/harness-exit-75…). Outcome
 *   rule 8 tells the reclaim from a move by the notice the interruption handler recorded, or the one the harness read
 *   from IMDS (its progress.json), as in production.
 * - Spot notice, harness still running `noticeKillSeconds` later → the process tree is killed (the instance is gone):
 *   `Host EC2 (instance i-…) terminated.` and no exit code, exactly like reclaimed-spot.event.json. Rule 4: reclaimed.
 * - Spot notice, harness exits 0 before the reclaim → SUCCEEDED (the work finished in time); any other exit code →
 *   `Essential container in task exited` with that code (the job failed on its own before the host went away).
 * - A CPU tier's attempt runs as on Fargate: no container instance, no IMDS (the harness finds none and stops
 *   polling), and every stop (TerminateJob, timeout, a spot interruption) SIGKILLs {@link FARGATE_STOP_TIMEOUT_SECONDS}
 *   after its SIGTERM. A Fargate Spot interruption sends no EC2 warning: the task gets SIGTERM at once, and the job
 *   ends with statusReason `Your Spot Task was interrupted.` and the harness's exit code (75 after its checkpoint, 137
 *   when killed), which outcome rule 4 classifies `reclaimed`; exit 0 (the work finished in time) → SUCCEEDED.
 * - Otherwise `Essential container in task exited` with the exit code (SUCCEEDED only for 0); a harness that could not
 *   be started (no interpreter, a NUL byte in its command, a folder that cannot be made) → `Task failed to start` with
 *   container reason `CannotStartContainerError: …`, no exit code, and, as on AWS, no RUNNING and no start time.
 * An attempt's working folder goes when it ends, as a container's disk does; its checkpoints are in S3. So does every
 * process it started (known by its `AWS_BATCH_JOB_ID`), as a container's teardown kills them, before its end is reported.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { constants as osConstants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';
import { type BatchJob, parseBatchJob } from '../../lambdas/domain/batch-job';
import { FARGATE_SPOT_INTERRUPTED_REASON } from '../../lambdas/domain/batch-reasons';
import { ATTEMPT_TIMEOUT_REASON } from '../../lambdas/domain/outcome';
import { containerOverridesOf } from '../../lambdas/domain/submit-job';
import type { BatchControl, BatchJobRef, InstanceFacts } from '../../lambdas/shared/ports';
import { maxRuntimeSeconds, type TierConfig } from '../config';
import { CONTAINER_STOP_TIMEOUT_SECONDS } from '../fleet/stop-timeout';
import { type EngineCredentials, OPEN_ENGINE_CREDENTIALS } from './engines';
import { awsTimestamp, FakeImds } from './fake-imds';
import { BatchTaskFailed, type LocalBatch, type SubmitJobInput } from './local-batch';

/** Region every local ARN names. */
export const LOCAL_REGION = 'us-east-1';
/** Account every local ARN names (no real account is involved). */
export const LOCAL_ACCOUNT = '000000000000';
/** ECS cluster name in local container-instance and task ARNs. */
export const LOCAL_CLUSTER = 'trainyard-local';
/** Availability zone reported for every local instance. */
export const LOCAL_AVAILABILITY_ZONE = 'local-1a';
/** Batch's statusReason for a container that ran and exited. */
export const CONTAINER_EXITED_REASON = 'Essential container in task exited';
/** Batch's statusReason when the container could not be started. */
export const TASK_FAILED_TO_START_REASON = 'Task failed to start';
/** Container reason of attempts killed because the local runner was stopped. */
export const LOCAL_SHUTDOWN_REASON = 'Trainyard local runner stopped: the container was killed';

/** `Host EC2 (instance i-…) terminated.`: what Batch reports once a spot host is reclaimed. */
/**
 * Fargate's stop timeout: the container is SIGKILLed this long after its SIGTERM, and Batch lets no job definition
 * on Fargate change it (docs/architecture.md, "Checkpoint on interruption").
 */
export const FARGATE_STOP_TIMEOUT_SECONDS = 30;

/**
 * Where a Fargate attempt's harness looks for IMDS: a loopback port nothing serves (discard, 9), so its polls go
 * unanswered and it concludes it is not on EC2, as on Fargate, where 169.254.169.254 does not answer.
 */
export const NO_IMDS_ENDPOINT = 'http://127.0.0.1:9';

export function hostTerminatedReason(instanceId: string): string {
  return `Host EC2 (instance ${instanceId}) terminated.`;
}

/** Raised for a request Batch's API itself would refuse (unknown queue, bad job name, runner stopped). */
export class BatchClientException extends Error {
  override name = 'Batch.ClientException';
}

/** Raised by interrupt() when no running attempt matches the id. */
export class NoRunningAttempt extends Error {
  override name = 'NoRunningAttempt';
}

/** Raised by interrupt() for an attempt on on-demand capacity (only spot instances get interruption notices). */
export class NotSpotCapacity extends Error {
  override name = 'NotSpotCapacity';
}

/** A queue's tier and capacity, as the platform stack creates them (batch-names.ts queueName). */
export interface QueueTarget {
  readonly tier: TierConfig;
  readonly capacity: 'spot' | 'on-demand';
}

/** The "EC2 Spot Instance Interruption Warning" EventBridge event, in AWS's documented shape. */
export interface SpotInterruptionWarningEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': 'EC2 Spot Instance Interruption Warning';
  readonly source: 'aws.ec2';
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: string[];
  readonly detail: { readonly 'instance-id': string; readonly 'instance-action': 'terminate' };
}

/** An attempt an earlier runner on the same folder left running, stopped by {@link LocalBatchRunner.reapOrphans}. */
export interface ReapedAttempt {
  readonly batchJobId: string;
  /** The processes killed: the harness, the user command and whatever they started (ascending). */
  readonly pids: readonly number[];
}

/** A Batch job detail with camelCase keys (DescribeJobs, the "Batch Job State Change" event's detail). */
export type BatchJobDetail = Record<string, unknown>;

/** Options of {@link LocalBatchRunner}. */
export interface LocalBatchRunnerOptions {
  /** Local mode's state directory (`.trainyard`): logs under `logs/`, attempt work dirs under `attempts/`. */
  readonly workDir: string;
  /** The s3rver endpoint the harness uses for code, checkpoints and metrics. */
  readonly s3Endpoint: string;
  /** What s3rver was started with; the attempts sign with it. @default OPEN_ENGINE_CREDENTIALS */
  readonly s3Credentials?: EngineCredentials;
  /** The tier and capacity behind a queue name; undefined for a queue that does not exist. */
  readonly tiersByQueue: (queueName: string) => QueueTarget | undefined;
  /** Receives every state change's detail (RUNNABLE, STARTING, RUNNING, SUCCEEDED/FAILED). @default - none */
  readonly onStateChange?: (detail: BatchJobDetail) => Promise<void>;
  /** Receives each spot interruption warning event. @default - none */
  readonly onSpotNotice?: (event: SpotInterruptionWarningEvent) => Promise<void>;
  /** Random notices per running spot attempt per hour (a Poisson process). @default 0 - none */
  readonly spotInterruptionsPerHour?: number;
  /** Seconds from a notice to the reclaim that kills the attempt (AWS: 2 minutes). @default 120 */
  readonly noticeKillSeconds?: number;
  /** Seconds from SIGTERM (TerminateJob, timeout) to SIGKILL: the GPU hosts' ECS_CONTAINER_STOP_TIMEOUT. @default 110 */
  readonly stopTimeoutSeconds?: number;
  /** The same on Fargate (the CPU tiers): every stop, a spot interruption's too. @default FARGATE_STOP_TIMEOUT_SECONDS */
  readonly fargateStopTimeoutSeconds?: number;
  /** Smallest Timeout.AttemptDurationSeconds accepted; Batch's API refuses less than 60. Tests lower it. @default 60 */
  readonly minAttemptDurationSeconds?: number;
  /** TRAINYARD_IMDS_POLL_SECONDS when the job does not set it; shorter than EC2's 5 s so local runs react fast. @default 1 */
  readonly imdsPollSeconds?: number;
  /** Interpreter for the harness; also what `python`/`python3` in the user command resolve to. @default '/usr/bin/python3' */
  readonly python?: string;
  /** Directory holding the `trainyard_harness` package. @default 'images/harness' */
  readonly harnessPath?: string;
  /** Clock for timestamps (epoch ms). @default - Date.now */
  readonly now?: () => number;
  /** Uniform [0, 1) source for random interruptions (lib/seeded-random.ts makes them reproducible). @default - Math.random */
  readonly random?: () => number;
  /** Every container log line as it is written. @default - none */
  readonly onLogLine?: (logStreamName: string, line: string) => void;
  /** Opens an attempt's log file for appending (tests give one that fails). @default - an appending file stream */
  readonly openLogFile?: (path: string) => Writable;
  /** A callback (state change, notice) failed; the job goes on, as on AWS where event delivery is decoupled. @default - writes to stderr */
  readonly onCallbackError?: (error: unknown, what: string) => void;
}

/** One running attempt, for `trainyard local interrupt` and status displays. */
export interface RunningAttempt {
  readonly batchJobId: string;
  readonly jobName: string;
  readonly trainyardJobId?: string;
  readonly team?: string;
  readonly attempt?: string;
  readonly queue: string;
  readonly capacity: 'spot' | 'on-demand';
  /** EC2 (the GPU tiers) or FARGATE (the CPU tiers), as Batch's platformCapabilities says. */
  readonly platform: 'EC2' | 'FARGATE';
  /** The EC2 instance; none on Fargate. */
  readonly instanceId?: string;
  readonly logStreamName: string;
  readonly startedAt?: number;
  /** When the spot capacity goes: the EC2 notice's reclaim time, or when Fargate SIGKILLs the interrupted task. */
  readonly noticeTime?: string;
  /** The harness's process id (`kill -USR1` makes it write every thread's stack to the attempt's log). */
  readonly harnessPid?: number;
}

/** What interrupt() did: an EC2 spot notice, or a Fargate Spot interruption (SIGTERM now, no warning event). */
export type SpotNoticeServed =
  | {
      readonly platform: 'EC2';
      readonly batchJobId: string;
      readonly instanceId: string;
      /** When the instance is reclaimed, as the notice says. */
      readonly noticeTime: string;
      readonly event: SpotInterruptionWarningEvent;
    }
  | {
      readonly platform: 'FARGATE';
      readonly batchJobId: string;
      /** When Fargate SIGKILLs the task if it has not stopped (FARGATE_STOP_TIMEOUT_SECONDS after the SIGTERM). */
      readonly noticeTime: string;
      /**
       * The task was already stopping (TerminateJob, its timeout): it had its SIGTERM then, and ends with that stop's
       * reason; the interruption changes nothing.
       */
      readonly alreadyStopping: boolean;
    };

/** Facts about how an attempt ended, from which {@link describeAttemptEnd} derives Batch's fields. */
export interface AttemptEndFacts {
  readonly instanceId: string;
  /** The harness's exit code (128+N when killed by signal N); undefined when the process tree was killed by a reclaim. */
  readonly exitCode?: number;
  readonly spawnError?: string;
  /**
   * First stop request: TerminateJob (with its reason), the attempt timeout, the runner's own shutdown, or a Fargate
   * Spot interruption.
   */
  readonly stop?:
    | { kind: 'terminate'; reason: string }
    | { kind: 'timeout' }
    | { kind: 'shutdown' }
    | { kind: 'fargate-spot' };
  readonly noticeServed: boolean;
  /** The notice's deadline passed with the harness still running, so the tree was killed. */
  readonly hostReclaimed: boolean;
}

/** Batch's fields for an ended attempt. */
export interface AttemptEndReport {
  readonly status: 'SUCCEEDED' | 'FAILED';
  readonly statusReason: string;
  readonly attemptStatusReason: string;
  readonly exitCode?: number;
  readonly containerReason?: string;
}

/** Maps how an attempt ended to Batch's status, reasons and exit code (rules in this module's header). */
export function describeAttemptEnd(facts: AttemptEndFacts): AttemptEndReport {
  const host = hostTerminatedReason(facts.instanceId);
  const exit = facts.hostReclaimed ? undefined : facts.exitCode;
  const exited = (status: 'SUCCEEDED' | 'FAILED', statusReason: string): AttemptEndReport => ({
    status,
    statusReason,
    attemptStatusReason: facts.hostReclaimed ? host : CONTAINER_EXITED_REASON,
    ...(exit === undefined ? {} : { exitCode: exit }),
  });
  if (facts.spawnError !== undefined) {
    return {
      status: 'FAILED',
      statusReason: TASK_FAILED_TO_START_REASON,
      attemptStatusReason: TASK_FAILED_TO_START_REASON,
      containerReason: `CannotStartContainerError: ${facts.spawnError}`,
    };
  }
  if (facts.stop?.kind === 'fargate-spot') {
    if (facts.exitCode === 0) return exited('SUCCEEDED', CONTAINER_EXITED_REASON);
    return {
      status: 'FAILED',
      statusReason: FARGATE_SPOT_INTERRUPTED_REASON,
      attemptStatusReason: FARGATE_SPOT_INTERRUPTED_REASON,
      ...(facts.exitCode === undefined ? {} : { exitCode: facts.exitCode }),
    };
  }
  if (facts.stop?.kind === 'terminate') return exited('FAILED', facts.stop.reason);
  if (facts.stop?.kind === 'timeout') return exited('FAILED', ATTEMPT_TIMEOUT_REASON);
  if (facts.hostReclaimed) return { status: 'FAILED', statusReason: host, attemptStatusReason: host };
  if (facts.stop?.kind === 'shutdown') {
    return {
      status: 'FAILED',
      statusReason: CONTAINER_EXITED_REASON,
      attemptStatusReason: CONTAINER_EXITED_REASON,
      containerReason: LOCAL_SHUTDOWN_REASON,
    };
  }
  return exited(facts.exitCode === 0 ? 'SUCCEEDED' : 'FAILED', CONTAINER_EXITED_REASON);
}

/** Milliseconds to the next event of a Poisson process at `ratePerHour`, from a uniform draw `u` in [0, 1). */
export function nextInterruptionDelayMs(ratePerHour: number, u: number): number {
  if (!(ratePerHour > 0)) return Number.POSITIVE_INFINITY;
  return (-Math.log(1 - u) / ratePerHour) * 3_600_000;
}

/** Rewrites a camelCase job detail's structural keys to Step Functions' PascalCase; tags and parameters keep theirs. */
export function pascalCaseJob(detail: BatchJobDetail): Record<string, unknown> {
  const pascal = (key: string) => key.charAt(0).toUpperCase() + key.slice(1);
  const keys = (value: unknown, nested: Record<string, (v: unknown) => unknown> = {}): unknown => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [pascal(k), nested[k] ? nested[k](v) : v] as const),
    );
  };
  const list = (each: (v: unknown) => unknown) => (v: unknown) => (Array.isArray(v) ? v.map(each) : v);
  const container = (v: unknown) => keys(v, { environment: list((e) => keys(e)) });
  return keys(detail, {
    attempts: list((a) => keys(a, { container })),
    container,
    timeout: (v) => keys(v),
    retryStrategy: (v) => keys(v),
    tags: (v) => v,
    parameters: (v) => v,
  }) as Record<string, unknown>;
}

const JOB_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/;

interface Attempt {
  readonly batchJobId: string;
  readonly input: SubmitJobInput;
  readonly target: QueueTarget;
  readonly queueName: string;
  readonly jobArn: string;
  readonly jobQueueArn: string;
  readonly jobDefinitionArn: string;
  /** A CPU tier's attempt: it runs as on Fargate (no instance, no IMDS, Fargate's stop timeout and spot stop). */
  readonly fargate: boolean;
  /** The EC2 instance and container instance; a Fargate attempt's are never shown. */
  readonly instanceId: string;
  readonly containerInstanceArn: string;
  readonly taskArn: string;
  readonly logStreamName: string;
  readonly attemptDurationSeconds: number;
  readonly createdAt: number;
  startedAt?: number;
  child?: ChildProcess;
  imds?: FakeImds;
  stop?: AttemptEndFacts['stop'];
  notice?: { time: string; event: SpotInterruptionWarningEvent };
  /** A Fargate Spot interruption: when the task is SIGKILLed if it has not stopped, and whether it was stopping already. */
  fargateSpotStop?: { time: string; alreadyStopping: boolean };
  /** When the SIGKILL of the stop under way is due (epoch ms). */
  killDueMs?: number;
  hostReclaimed: boolean;
  ended: boolean;
  exitCode?: number;
  spawnError?: string;
  /** The job as Batch reported it at its end (DescribeJobs answers with it from then on). */
  finished?: BatchJobDetail;
  logsFlushed?: Promise<void>;
  /** Processes SIGKILLed by a reclaim, timeout or shutdown; the end is reported once they are gone. */
  killed: number[];
  readonly timers: Set<NodeJS.Timeout>;
  readonly exited: { readonly promise: Promise<void>; readonly resolve: () => void };
}

/** Runs Batch jobs locally through the real harness; see the module header for how endings are reported. */
export class LocalBatchRunner implements LocalBatch, BatchControl {
  /** This runner knows the jobs it ran since it started and none before: a job it does not report, it forgot. */
  readonly reportsJobsForSeconds = 0;
  private readonly workDir: string;
  private readonly python: string;
  private readonly harnessPath: string;
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly noticeKillSeconds: number;
  private readonly stopTimeoutSeconds: number;
  private readonly fargateStopTimeoutSeconds: number;
  private readonly attempts = new Map<string, Attempt>();
  private readonly instances = new Map<string, InstanceFacts>();
  private stopped = false;
  private binReady = false;

  constructor(private readonly options: LocalBatchRunnerOptions) {
    this.workDir = resolve(options.workDir);
    this.python = options.python ?? '/usr/bin/python3';
    this.harnessPath = resolve(options.harnessPath ?? 'images/harness');
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.noticeKillSeconds = options.noticeKillSeconds ?? 120;
    this.stopTimeoutSeconds = options.stopTimeoutSeconds ?? CONTAINER_STOP_TIMEOUT_SECONDS;
    this.fargateStopTimeoutSeconds = options.fargateStopTimeoutSeconds ?? FARGATE_STOP_TIMEOUT_SECONDS;
  }

  /** Runs one job to its end, like `batch:submitJob.sync`: resolves with the SUCCEEDED job, rejects with BatchTaskFailed. */
  async runJob(input: SubmitJobInput): Promise<Record<string, unknown>> {
    const attempt = this.submit(input);
    await this.emit(this.detail(attempt, 'RUNNABLE'));
    if (attempt.stop === undefined) {
      await this.emit(this.detail(attempt, 'STARTING'));
    }
    if (attempt.stop === undefined) {
      await this.start(attempt);
    }
    let finished: BatchJobDetail;
    if (attempt.child) {
      await attempt.exited.promise;
      await attempt.logsFlushed;
      await whenGone(attempt.killed);
      finished = this.finishedDetail(attempt);
    } else if (attempt.spawnError !== undefined) {
      finished = this.finishedDetail(attempt); // its container never started: "Task failed to start"
    } else {
      // Stopped while RUNNABLE/STARTING: Batch fails it with the reason and no attempts (terminated-cancel-runnable).
      attempt.ended = true;
      const reason = attempt.stop?.kind === 'terminate' ? attempt.stop.reason : LOCAL_SHUTDOWN_REASON;
      finished = { ...this.detail(attempt, 'FAILED'), statusReason: reason, stoppedAt: this.now() };
    }
    attempt.finished = finished;
    await this.cleanUp(attempt);
    // Its container's disk goes with it, as on AWS: the checkpoints it kept are in S3, its logs under logs/.
    rmSync(join(this.workDir, 'attempts', attempt.batchJobId), { recursive: true, force: true });
    await this.emit(finished);
    if (finished.status === 'SUCCEEDED') return pascalCaseJob(finished);
    throw new BatchTaskFailed(JSON.stringify(pascalCaseJob(finished)));
  }

  /** TerminateJob: SIGTERM the harness (it checkpoints and exits 75), report `reason`; no-op for unknown or ended jobs. */
  async terminateJob(batchJobId: string, reason: string): Promise<void> {
    if (reason.trim() === '') {
      throw new BatchClientException(
        `TerminateJob needs a reason (Batch requires one); got an empty reason for ${batchJobId}`,
      );
    }
    const attempt = this.attempts.get(batchJobId);
    if (!attempt || attempt.ended || attempt.stop !== undefined) return;
    attempt.stop = { kind: 'terminate', reason };
    this.sendStop(attempt);
  }

  /**
   * DescribeJobs by id, or ListJobs by name in a queue (the newest such job) then DescribeJobs: the job as Batch
   * reports it now (RUNNABLE until its harness starts, RUNNING, then its end); undefined for a job never submitted.
   */
  async lookupJob(ref: BatchJobRef): Promise<BatchJob | undefined> {
    const queueName = lastSegment(ref.queue, 'job-queue/');
    const attempt =
      ref.batchJobId !== undefined
        ? this.attempts.get(ref.batchJobId)
        : [...this.attempts.values()]
            .filter((a) => a.input.JobName === ref.jobName && a.queueName === queueName)
            .sort((a, b) => b.createdAt - a.createdAt)[0];
    if (!attempt) return undefined;
    const detail =
      attempt.finished ??
      (attempt.child !== undefined
        ? { ...this.detail(attempt, 'RUNNING'), startedAt: attempt.startedAt }
        : this.detail(attempt, 'RUNNABLE'));
    return parseBatchJob(detail, `DescribeJobs ${attempt.batchJobId}`);
  }

  /**
   * Interrupts a running spot attempt (by Batch job id or the `trainyard:job-id` tag) as its platform does. On EC2:
   * the attempt's IMDS answers instance-action, onSpotNotice gets the EventBridge event, and the process tree is
   * killed if it is still running `noticeKillSeconds` later. On Fargate (a CPU tier): no warning event and no IMDS;
   * the task gets SIGTERM at once and SIGKILL `fargateStopTimeoutSeconds` later, and Batch reports `Your Spot Task
   * was interrupted.` A second call for the same attempt returns the first interruption (AWS sends one per instance
   * or task).
   */
  async interrupt(batchJobIdOrTrainyardJobId: string): Promise<SpotNoticeServed> {
    const attempt = this.findRunning(batchJobIdOrTrainyardJobId);
    if (attempt.target.capacity !== 'spot') {
      throw new NotSpotCapacity(
        `${describe(attempt)} runs on on-demand capacity (queue ${attempt.queueName}); only spot attempts receive interruption notices`,
      );
    }
    if (attempt.fargate) return this.interruptFargate(attempt);
    if (attempt.notice) return this.served(attempt, attempt.notice.time, attempt.notice.event);
    const event = this.spotEvent(attempt);
    const noticeTime = awsTimestamp(this.now() + this.noticeKillSeconds * 1000);
    attempt.notice = { time: noticeTime, event };
    attempt.imds?.serveNotice('terminate', noticeTime);
    this.later(attempt, this.noticeKillSeconds, () => {
      attempt.hostReclaimed = true;
      this.kill(attempt);
    });
    await this.deliver('onSpotNotice', () => this.options.onSpotNotice?.(event));
    return this.served(attempt, noticeTime, event);
  }

  /**
   * A Fargate Spot interruption: SIGTERM now and SIGKILL after Fargate's stop timeout, reported with Fargate's reason.
   * A stop already under way (TerminateJob, the timeout) keeps its reason: the task is going anyway.
   */
  private interruptFargate(attempt: Attempt): SpotNoticeServed {
    if (attempt.fargateSpotStop === undefined) {
      const alreadyStopping = attempt.stop !== undefined;
      if (!alreadyStopping) {
        attempt.stop = { kind: 'fargate-spot' };
        this.sendStop(attempt);
      }
      attempt.fargateSpotStop = {
        time: awsTimestamp(attempt.killDueMs ?? this.now() + this.fargateStopTimeoutSeconds * 1000),
        alreadyStopping,
      };
    }
    const { time, alreadyStopping } = attempt.fargateSpotStop;
    return { platform: 'FARGATE', batchJobId: attempt.batchJobId, noticeTime: time, alreadyStopping };
  }

  /** Attempts that have started and not ended. */
  runningAttempts(): RunningAttempt[] {
    return [...this.attempts.values()]
      .filter((a) => !a.ended && a.child !== undefined)
      .map((a) => ({
        batchJobId: a.batchJobId,
        jobName: a.input.JobName,
        ...optional('trainyardJobId', a.input.Tags?.['trainyard:job-id']),
        ...optional('team', a.input.Tags?.['trainyard:team']),
        ...optional('attempt', a.input.Tags?.['trainyard:attempt']),
        queue: a.queueName,
        capacity: a.target.capacity,
        platform: a.fargate ? ('FARGATE' as const) : ('EC2' as const),
        ...(a.fargate ? {} : { instanceId: a.instanceId }),
        logStreamName: a.logStreamName,
        ...optional('startedAt', a.startedAt),
        ...optional('noticeTime', a.notice?.time ?? a.fargateSpotStop?.time),
        ...optional('harnessPid', a.child?.pid),
      }));
  }

  /** The local instance behind a container instance ARN this runner handed out (FleetFacts.instanceFor). */
  instanceFor(containerInstanceArn: string): InstanceFacts | undefined {
    return this.instances.get(containerInstanceArn);
  }

  /**
   * Kills what an earlier runner on this folder left running: a local mode that crashed (killed, out of memory, the
   * machine suspended mid-write) never stopped its harnesses, which run in their own process groups and train on
   * with the old s3rver gone, holding the CPU or GPU a new attempt needs. Such a process is known by the environment
   * this runner gives every attempt and that the user command inherits: `TRAINYARD_WORK_DIR` is
   * `<workDir>/attempts/<AWS_BATCH_JOB_ID>/code` of this folder, and the Batch job is not one of this runner's. Each is
   * SIGKILLed with everything under it, as losing the host would; what its attempt cost is recorded from its last sign
   * of running when Finalize finds that Batch no longer knows the job. Call it before anything reads those attempts.
   * Then the working folders of attempts that are not this runner's are deleted, as their containers' disks would be
   * (their checkpoints are in S3). Reads Linux's /proc; elsewhere it finds no process, and still deletes the folders.
   * Returns the attempts stopped and their processes, by Batch job id.
   */
  async reapOrphans(): Promise<ReapedAttempt[]> {
    const attemptsDir = join(this.workDir, 'attempts');
    const reaped = killAttemptProcesses(
      (batchJobId, environment) =>
        !this.attempts.has(batchJobId) &&
        environment.get('TRAINYARD_WORK_DIR') === join(attemptsDir, batchJobId, 'code'),
    );
    await whenGone(reaped.flatMap((r) => r.pids));
    const folders = existsSync(attemptsDir) ? readdirSync(attemptsDir) : [];
    for (const batchJobId of folders.filter((name) => !this.attempts.has(name)))
      rmSync(join(attemptsDir, batchJobId), { recursive: true, force: true });
    return reaped;
  }

  /**
   * Kills every running harness, everything its attempt started (found by its environment, as a harness that already
   * died left it reparented out of reach) and every IMDS server; later runJob calls are refused.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    const running = [...this.attempts.values()].filter((a) => !a.ended);
    for (const attempt of running) {
      attempt.stop ??= { kind: 'shutdown' };
      this.kill(attempt);
    }
    this.killLeftovers(running.filter((a) => a.child !== undefined));
    await Promise.all(running.map((a) => (a.child ? a.exited.promise : Promise.resolve())));
    await whenGone(running.flatMap((a) => a.killed));
    await Promise.all(running.map((a) => a.imds?.stop()));
  }

  private submit(input: SubmitJobInput): Attempt {
    if (this.stopped) throw new BatchClientException('the local Batch runner is stopped; it accepts no new jobs');
    if (!JOB_NAME_PATTERN.test(input.JobName ?? '')) {
      throw new BatchClientException(
        `JobName must be 1-128 letters, numbers, hyphens and underscores starting with a letter or number, got ${JSON.stringify(input.JobName)}`,
      );
    }
    const queueName = lastSegment(input.JobQueue, 'job-queue/');
    const target = this.options.tiersByQueue(queueName);
    if (!target) throw new BatchClientException(`JobQueue ${input.JobQueue} does not exist (no tier maps to it)`);
    const duration = input.Timeout?.AttemptDurationSeconds;
    const minimum = this.options.minAttemptDurationSeconds ?? 60;
    if (duration !== undefined && !(Number.isInteger(duration) && duration >= minimum)) {
      throw new BatchClientException(
        `Timeout.AttemptDurationSeconds must be an integer of at least ${minimum}, got ${duration}`,
      );
    }
    const batchJobId = randomUUID();
    const containerInstanceId = randomBytes(16).toString('hex');
    const taskId = randomBytes(16).toString('hex');
    const instanceId = `i-${randomBytes(9).toString('hex').slice(0, 17)}`;
    const team = input.Tags?.['trainyard:team'] ?? LOCAL_CLUSTER;
    const definition = lastSegment(input.JobDefinition, 'job-definition/');
    const attempt: Attempt = {
      batchJobId,
      input,
      target,
      queueName,
      jobArn: `arn:aws:batch:${LOCAL_REGION}:${LOCAL_ACCOUNT}:job/${batchJobId}`,
      jobQueueArn: `arn:aws:batch:${LOCAL_REGION}:${LOCAL_ACCOUNT}:job-queue/${queueName}`,
      jobDefinitionArn: `arn:aws:batch:${LOCAL_REGION}:${LOCAL_ACCOUNT}:job-definition/${definition.includes(':') ? definition : `${definition}:1`}`,
      fargate: target.tier.kind === 'cpu',
      instanceId,
      containerInstanceArn: `arn:aws:ecs:${LOCAL_REGION}:${LOCAL_ACCOUNT}:container-instance/${LOCAL_CLUSTER}/${containerInstanceId}`,
      taskArn: `arn:aws:ecs:${LOCAL_REGION}:${LOCAL_ACCOUNT}:task/${LOCAL_CLUSTER}/${taskId}`,
      logStreamName: `${team}/default/${taskId}`,
      // Without a Timeout the job definition's applies: the tier's max runtime, at least 60 s (job-definitions.ts).
      attemptDurationSeconds: duration ?? Math.max(60, maxRuntimeSeconds(target.tier)),
      createdAt: this.now(),
      hostReclaimed: false,
      ended: false,
      killed: [],
      timers: new Set(),
      exited: deferred(),
    };
    this.attempts.set(batchJobId, attempt);
    // Fargate tasks run on no container instance of the account's.
    if (!attempt.fargate)
      this.instances.set(attempt.containerInstanceArn, {
        instanceId,
        instanceType: target.tier.instanceTypes[0] ?? 'fargate',
        availabilityZone: LOCAL_AVAILABILITY_ZONE,
        lifecycle: target.capacity,
      });
    return attempt;
  }

  /**
   * Starts the attempt's harness. What keeps its container from starting (its folders cannot be made, the command or
   * environment holds a NUL byte, the interpreter is missing) fails the attempt as Batch fails a task that cannot
   * start: no RUNNING, no start time, "Task failed to start".
   */
  private async start(attempt: Attempt): Promise<void> {
    const root = join(this.workDir, 'attempts', attempt.batchJobId);
    const logFile = join(this.workDir, 'logs', `${attempt.logStreamName}.log`);
    let child: ChildProcess;
    try {
      mkdirSync(root, { recursive: true });
      mkdirSync(dirname(logFile), { recursive: true });
      let imdsEndpoint = NO_IMDS_ENDPOINT;
      if (!attempt.fargate) {
        const imds = new FakeImds({ instanceId: attempt.instanceId, now: this.now });
        attempt.imds = imds;
        imdsEndpoint = await imds.start();
      }
      // TerminateJob or stop() while the "instance" was starting: the container never starts.
      if (attempt.stop !== undefined) return;
      const command = containerOverridesOf(attempt.input).Command ?? [];
      const args = ['-m', 'trainyard_harness', ...(command.length > 0 ? ['--', ...command] : [])];
      child = spawn(this.python, args, {
        cwd: root,
        env: this.environment(attempt, root, imdsEndpoint),
        detached: true, // its own process group, as a container's processes are apart from the host's
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (error) {
      attempt.spawnError = `${this.python}: ${error instanceof Error ? error.message : String(error)}`;
      return;
    }
    const spawned = await new Promise<boolean>((settle) => {
      const failed = (error: Error) => {
        attempt.spawnError = `${this.python}: ${error.message}`;
        settle(false);
      };
      child.once('error', failed);
      child.once('spawn', () => {
        child.off('error', failed);
        settle(true);
      });
    });
    if (!spawned) return;
    child.on('error', (error) => this.reportError(error, `harness of ${attempt.batchJobId}`));
    attempt.startedAt = this.now();
    attempt.child = child;
    const endLogs = this.pipeLogs(attempt, child, logFile);
    child.once('close', (code, signal) => {
      attempt.exitCode = code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0);
      attempt.exited.resolve();
    });
    child.once('exit', () => {
      // A harness that dies (an exception out of main(), the OOM killer) kills nothing, and the user command, in a
      // session of its own, is reparented out of the harness's tree: as the container's teardown does on Batch, every
      // process of the attempt goes before its end is reported, so a retry never runs alongside it.
      this.killLeftovers([attempt]);
      // A process that shed the attempt's environment may still hold the pipes open, which would delay 'close' for ever.
      const timer = setTimeout(endLogs, 5000);
      timer.unref();
    });
    this.later(attempt, attempt.attemptDurationSeconds, () => {
      if (attempt.stop === undefined) {
        attempt.stop = { kind: 'timeout' };
        this.sendStop(attempt);
      }
    });
    const rate = this.options.spotInterruptionsPerHour ?? 0;
    if (attempt.target.capacity === 'spot' && rate > 0) {
      const delayMs = nextInterruptionDelayMs(rate, this.random());
      this.laterMs(attempt, delayMs, () => {
        this.interrupt(attempt.batchJobId).catch((error: unknown) => this.reportError(error, 'random interruption'));
      });
    }
    await this.emit({
      ...this.detail(attempt, 'RUNNING'),
      startedAt: attempt.startedAt,
    });
  }

  private environment(attempt: Attempt, root: string, imdsEndpoint: string): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    // The host's AWS and Trainyard settings must not leak into the "container".
    for (const [name, value] of Object.entries(process.env)) {
      if (!name.startsWith('AWS_') && !name.startsWith('TRAINYARD_')) env[name] = value;
    }
    for (const { Name, Value } of containerOverridesOf(attempt.input).Environment ?? []) env[Name] = Value;
    const bin = this.pythonBin();
    const s3 = this.options.s3Credentials ?? OPEN_ENGINE_CREDENTIALS;
    Object.assign(env, {
      PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
      PYTHONPATH: this.harnessPath,
      AWS_ACCESS_KEY_ID: s3.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
      AWS_REGION: LOCAL_REGION,
      AWS_DEFAULT_REGION: LOCAL_REGION,
      // boto3 must never look for credentials at the real 169.254.169.254.
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_BATCH_JOB_ID: attempt.batchJobId,
      AWS_BATCH_JQ_NAME: attempt.queueName,
      AWS_BATCH_JOB_ATTEMPT: '1',
      TRAINYARD_S3_ENDPOINT: this.options.s3Endpoint,
      TRAINYARD_IMDS_ENDPOINT: imdsEndpoint,
      TRAINYARD_IMDS_POLL_SECONDS: env.TRAINYARD_IMDS_POLL_SECONDS ?? String(this.options.imdsPollSeconds ?? 1),
      TRAINYARD_WORK_DIR: join(root, 'code'),
      TRAINYARD_CHECKPOINT_DIR: join(root, 'checkpoints'),
    });
    return env;
  }

  /**
   * `python`/`python3` in the user command mean the harness's interpreter, as in the training image (on a laptop the
   * first `python` on the PATH may be another interpreter without the job's packages). Links are made once per runner
   * and only replaced when they point elsewhere, so a starting attempt never finds them missing.
   */
  private pythonBin(): string {
    const bin = join(this.workDir, 'bin');
    if (this.binReady) return bin;
    mkdirSync(bin, { recursive: true });
    for (const name of ['python', 'python3']) {
      const link = join(bin, name);
      let current: string | undefined;
      try {
        current = readlinkSync(link);
      } catch {
        current = undefined;
      }
      if (current === this.python) continue;
      const staged = `${link}.${process.pid}.tmp`;
      rmSync(staged, { force: true });
      symlinkSync(this.python, staged);
      renameSync(staged, link); // atomic replace
    }
    this.binReady = true;
    return bin;
  }

  /** Copies the harness's output to its log file and onLogLine; returns what ends the log with the pipes still open. */
  private pipeLogs(attempt: Attempt, child: ChildProcess, logFile: string): () => void {
    const out = this.options.openLogFile?.(logFile) ?? createWriteStream(logFile, { flags: 'a' });
    // A log file that cannot be written (a full disk) loses the file, not local mode: the job runs on, its lines still
    // reach onLogLine, as a container outlives a failing log driver.
    let writable = true;
    out.on('error', (error: Error) => {
      writable = false;
      this.reportError(error, `log file ${logFile}`);
    });
    const streams = [child.stdout, child.stderr].filter((s) => s !== null);
    let open = streams.length;
    const readers = streams.map((stream) => createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }));
    for (const lines of readers) {
      lines.on('line', (line) => {
        if (writable) out.write(`${line}\n`);
        try {
          this.options.onLogLine?.(attempt.logStreamName, line);
        } catch (error) {
          this.reportError(error, 'onLogLine');
        }
      });
      lines.once('close', () => {
        open -= 1;
        if (open === 0) out.end();
      });
    }
    attempt.logsFlushed = new Promise((done) => out.once('close', () => done()));
    // readline closes on its input's 'end' alone, which a destroyed stream never emits: close the readers themselves.
    return () => {
      for (const lines of readers) lines.close();
      for (const stream of streams) stream.destroy();
    };
  }

  private finishedDetail(attempt: Attempt): BatchJobDetail {
    attempt.ended = true;
    const stoppedAt = this.now();
    const report = describeAttemptEnd({
      instanceId: attempt.instanceId,
      ...optional('exitCode', attempt.exitCode),
      ...optional('spawnError', attempt.spawnError),
      ...optional('stop', attempt.stop),
      noticeServed: attempt.notice !== undefined,
      hostReclaimed: attempt.hostReclaimed,
    });
    const container = {
      ...(attempt.fargate ? {} : { containerInstanceArn: attempt.containerInstanceArn }),
      taskArn: attempt.taskArn,
      logStreamName: attempt.logStreamName,
      networkInterfaces: [],
      ...optional('exitCode', report.exitCode),
      ...optional('reason', report.containerReason),
    };
    const base = this.detail(attempt, report.status);
    // A container that never started has no start time (Batch sets startedAt on the move to RUNNING).
    const started = optional('startedAt', attempt.startedAt);
    return {
      ...base,
      statusReason: report.statusReason,
      ...started,
      stoppedAt,
      attempts: [{ container, ...started, stoppedAt, statusReason: report.attemptStatusReason }],
      container: { ...(base.container as Record<string, unknown>), ...container },
    };
  }

  /** The job detail at `status`, as DescribeJobs shows it (camelCase). */
  private detail(attempt: Attempt, status: string): BatchJobDetail {
    const { input } = attempt;
    const started = attempt.child !== undefined;
    return {
      jobArn: attempt.jobArn,
      jobName: input.JobName,
      jobId: attempt.batchJobId,
      jobQueue: attempt.jobQueueArn,
      status,
      attempts: [],
      createdAt: attempt.createdAt,
      ...optional('shareIdentifier', input.ShareIdentifier),
      dependsOn: [],
      jobDefinition: attempt.jobDefinitionArn,
      parameters: {},
      container: {
        command: containerOverridesOf(input).Command ?? [],
        environment: (containerOverridesOf(input).Environment ?? []).map((e) => ({ name: e.Name, value: e.Value })),
        ...(started
          ? {
              ...(attempt.fargate ? {} : { containerInstanceArn: attempt.containerInstanceArn }),
              taskArn: attempt.taskArn,
              logStreamName: attempt.logStreamName,
            }
          : {}),
      },
      tags: { ...(input.Tags ?? {}) },
      propagateTags: input.PropagateTags ?? false,
      platformCapabilities: [attempt.fargate ? 'FARGATE' : 'EC2'],
      timeout: { attemptDurationSeconds: attempt.attemptDurationSeconds },
    };
  }

  private spotEvent(attempt: Attempt): SpotInterruptionWarningEvent {
    return {
      version: '0',
      id: randomUUID(),
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      source: 'aws.ec2',
      account: LOCAL_ACCOUNT,
      time: awsTimestamp(this.now()),
      region: LOCAL_REGION,
      resources: [`arn:aws:ec2:${LOCAL_REGION}:${LOCAL_ACCOUNT}:instance/${attempt.instanceId}`],
      detail: { 'instance-id': attempt.instanceId, 'instance-action': 'terminate' },
    };
  }

  private served(attempt: Attempt, noticeTime: string, event: SpotInterruptionWarningEvent): SpotNoticeServed {
    return { platform: 'EC2', batchJobId: attempt.batchJobId, instanceId: attempt.instanceId, noticeTime, event };
  }

  private findRunning(id: string): Attempt {
    // An attempt whose harness has exited is ending (its end is reported once its processes are gone): interrupting it
    // would report its own exit as a reclaim.
    const running = [...this.attempts.values()].filter((a) => !a.ended && isRunning(a.child));
    const byBatchId = running.find((a) => a.batchJobId === id);
    if (byBatchId) return byBatchId;
    const byJob = running.filter((a) => a.input.Tags?.['trainyard:job-id'] === id);
    const [only] = byJob;
    if (only && byJob.length === 1) return only;
    const known = running.map(describe).join(', ') || 'none';
    throw new NoRunningAttempt(
      byJob.length > 1
        ? `${byJob.length} attempts of Trainyard job ${id} are running; name one by its Batch job id (${known})`
        : `no running attempt has Batch job id or Trainyard job id ${id}; running: ${known}`,
    );
  }

  /** Stops a container as `docker stop` does: SIGTERM to its main process, SIGKILL after the stop timeout. */
  private sendStop(attempt: Attempt): void {
    if (!isRunning(attempt.child)) return;
    signal(attempt.child?.pid, 'SIGTERM');
    const timeout = attempt.fargate ? this.fargateStopTimeoutSeconds : this.stopTimeoutSeconds;
    attempt.killDueMs = this.now() + timeout * 1000;
    this.later(attempt, timeout, () => this.kill(attempt));
  }

  private kill(attempt: Attempt): void {
    attempt.killed.push(...killTree(attempt.child));
  }

  /** SIGKILLs every process whose environment names one of these attempts, with everything under it, in one scan. */
  private killLeftovers(attempts: readonly Attempt[]): void {
    if (attempts.length === 0) return;
    const byId = new Map(attempts.map((a) => [a.batchJobId, a]));
    for (const { batchJobId, pids } of killAttemptProcesses((id) => byId.has(id))) {
      byId.get(batchJobId)?.killed.push(...pids);
    }
  }

  private later(attempt: Attempt, seconds: number, action: () => void): void {
    this.laterMs(attempt, seconds * 1000, action);
  }

  private laterMs(attempt: Attempt, ms: number, action: () => void): void {
    if (!Number.isFinite(ms)) return;
    // setTimeout fires at once for delays above 2^31-1 ms; longer waits than ~24 days never matter locally.
    const timer = setTimeout(
      () => {
        attempt.timers.delete(timer);
        if (isRunning(attempt.child)) action();
      },
      Math.min(ms, 2 ** 31 - 1),
    );
    attempt.timers.add(timer);
  }

  private async cleanUp(attempt: Attempt): Promise<void> {
    for (const timer of attempt.timers) clearTimeout(timer);
    attempt.timers.clear();
    await attempt.imds?.stop();
  }

  private async emit(detail: BatchJobDetail): Promise<void> {
    await this.deliver(`onStateChange ${String(detail.status)}`, () => this.options.onStateChange?.(detail));
  }

  private async deliver(what: string, call: () => Promise<void> | undefined): Promise<void> {
    try {
      await call();
    } catch (error) {
      this.reportError(error, what);
    }
  }

  private reportError(error: unknown, what: string): void {
    if (this.options.onCallbackError) this.options.onCallbackError(error, what);
    else process.stderr.write(`local batch: ${what} failed: ${error instanceof Error ? error.stack : String(error)}\n`);
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve: () => void = () => undefined;
  const promise = new Promise<void>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}

function isRunning(child: ChildProcess | undefined): boolean {
  return child?.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

function describe(attempt: Attempt): string {
  const job = attempt.input.Tags?.['trainyard:job-id'];
  const number = attempt.input.Tags?.['trainyard:attempt'];
  return job
    ? `job ${job} attempt ${number ?? '?'} (Batch job ${attempt.batchJobId})`
    : `Batch job ${attempt.batchJobId}`;
}

function lastSegment(nameOrArn: string, marker: string): string {
  const at = nameOrArn.indexOf(marker);
  return at >= 0 ? nameOrArn.slice(at + marker.length) : nameOrArn;
}

function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

function signal(pid: number | undefined, name: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * Kills the harness and everything under it, as losing the host does. The harness starts the user command in its own
 * session, so killing the harness's process group alone would leave training running: the tree is read from /proc
 * first (before reparenting hides it), then every member is SIGKILLed.
 */
function killTree(child: ChildProcess | undefined): number[] {
  const pid = child?.pid;
  if (pid === undefined || !isRunning(child)) return [];
  const members = descendantsOf(pid);
  try {
    process.kill(-pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
  for (const member of members) signal(member, 'SIGKILL');
  return members;
}

/**
 * A process's state letter as /proc shows it (R running, S sleeping, D in uninterruptible wait, Z zombie, …), read
 * after the parenthesised command, which may hold spaces and parentheses; undefined when it is gone (or not Linux).
 */
export function processState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.charAt(stat.lastIndexOf(')') + 2);
  } catch {
    return undefined;
  }
}

/** Waits (at most 5 s) until each process has exited: gone from /proc or a zombie awaiting its reaper. */
async function whenGone(pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + 5000;
  const alive = (pid: number) => {
    const state = processState(pid);
    return state !== undefined && state !== 'Z';
  };
  while (pids.some(alive) && Date.now() < deadline) {
    await new Promise((done) => setTimeout(done, 10));
  }
}

/**
 * SIGKILLs every process (but this one) whose environment names an attempt (`AWS_BATCH_JOB_ID`, which the runner sets
 * and the user command inherits) that `belongs`, with everything under it; returns them by Batch job id. Reads Linux's
 * /proc; elsewhere it finds nothing.
 */
function killAttemptProcesses(
  belongs: (batchJobId: string, environment: ReadonlyMap<string, string>) => boolean,
): ReapedAttempt[] {
  const found = new Map<string, Set<number>>();
  const children = childrenByParent(); // one read of /proc for every attempt's tree
  for (const { pid, environment } of processEnvironments()) {
    const batchJobId = environment.get('AWS_BATCH_JOB_ID');
    if (batchJobId === undefined || pid === process.pid || !belongs(batchJobId, environment)) continue;
    const pids = found.get(batchJobId) ?? new Set<number>();
    for (const member of [pid, ...descendantsIn(children, pid)]) pids.add(member);
    found.set(batchJobId, pids);
  }
  const killed = [...found].map(([batchJobId, pids]) => ({ batchJobId, pids: [...pids].sort((a, b) => a - b) }));
  for (const { pids } of killed) for (const pid of pids) signal(pid, 'SIGKILL');
  return killed;
}

/** Every process whose environment this user may read (/proc/<pid>/environ), as name → value; none off Linux. */
function* processEnvironments(): Generator<{ pid: number; environment: Map<string, string> }> {
  for (const pid of processIds()) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/environ`, 'utf8');
    } catch {
      continue; // exited while we read, or another user's
    }
    const environment = new Map<string, string>();
    for (const pair of text.split('\0')) {
      const at = pair.indexOf('=');
      if (at > 0) environment.set(pair.slice(0, at), pair.slice(at + 1));
    }
    yield { pid, environment };
  }
}

/** The ids of the processes /proc lists now; none off Linux. */
function processIds(): number[] {
  try {
    return readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .map(Number);
  } catch {
    return [];
  }
}

function descendantsOf(root: number): number[] {
  return descendantsIn(childrenByParent(), root);
}

/** Every process's children, by parent pid, as /proc shows them now. */
function childrenByParent(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const pid of processIds()) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited while we read
    }
    // Fields after the parenthesised command: state, ppid, …; the command itself may contain spaces and parentheses.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const siblings = children.get(ppid) ?? [];
    siblings.push(pid);
    children.set(ppid, siblings);
  }
  return children;
}

/** The processes below `root` in a parent → children map, breadth first. */
function descendantsIn(children: ReadonlyMap<number, readonly number[]>, root: number): number[] {
  const found: number[] = [];
  const queue = [root];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of children.get(next) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}
