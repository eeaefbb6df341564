/**
 * Lifecycle test bench: the state machine synthesized from the JobStateMachine construct, executed by
 * aws-local-stepfunctions with its Tasks bound to the real step handlers; real dynalite and s3rver; jobs submitted
 * through the real API handler; the batch-events, interruption and budget-watch handlers fed the events AWS would
 * send. Only AWS Batch is scripted (no local engine exists for it): each attempt's result is built from Batch's
 * documented job shape (Step Functions' PascalCase), and its state changes are delivered as "Batch Job State Change"
 * events. A fake clock makes hours of training instantaneous.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApiHandler } from '../../lambdas/api/app';
import { createBatchEventsHandler } from '../../lambdas/batch-events/batch-events';
import { createBudgetWatchHandler } from '../../lambdas/budget-watch/budget-watch';
import { type BatchJob, parseBatchJob } from '../../lambdas/domain/batch-job';
import { formatScope, periodOf } from '../../lambdas/domain/budgets';
import type { EventEntry } from '../../lambdas/domain/events';
import type { SubmitJobInput } from '../../lambdas/domain/submit-job';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { createExecutionEndedHandler, type ExecutionEndedResult } from '../../lambdas/execution-ended/execution-ended';
import { createInterruptionHandler } from '../../lambdas/interruption/interruption';
import type { ControlPlane } from '../../lambdas/shared/control-plane';
import { DynamoDbError } from '../../lambdas/shared/dynamo';
import { emfMetricPublisher } from '../../lambdas/shared/metrics';
import type { BatchControl, BatchJobRef, FleetFacts } from '../../lambdas/shared/ports';
import { parseConfig, type TrainyardConfig } from '../../lib/config';
import { ensureLocalTables, lifecycleSteps, localControlPlane } from '../../lib/local/control-plane';
import { synthesizeJobStateMachineDefinition } from '../../lib/local/definition';
import { type RunningEngine, startDynalite, startS3rver } from '../../lib/local/engines';
import { BatchTaskFailed, type LocalBatch } from '../../lib/local/local-batch';
import { executionStatusChangeEvent } from '../../lib/local/local-mode';
import { LOCAL_NAMES } from '../../lib/local/names';
import { LocalStateMachine, type LocalStepHandlers } from '../../lib/local/state-machine-runner';
import { apiEvent, projectBundle } from '../lambdas/api/support';

/** The principal that submits in these tests, and the team it maps to. */
export const RESEARCHER = 'arn:aws:iam::123456789012:role/nlp-researchers';
export const ADMIN = 'arn:aws:iam::123456789012:role/platform-admin';
export const TEAM = 'nlp';

/** How one scripted attempt ends. */
export interface AttemptScript {
  /**
   * succeed; reclaim (host terminated); capacity (queue cancels it RUNNABLE); app-error (exit 1); hold (until
   * TerminateJob); queued (RUNNABLE until TerminateJob: no capacity comes, and the queue has no wait limit); unsubmitted (SubmitJob never returns and Batch never hears of the job); lost (SubmitJob answers
   * with a 5xx after Batch created the job, which runs until TerminateJob); lost-late (as lost, but ListJobs does not
   * list the job yet and its state-change events reach batch-events only after the attempt was recorded as ended);
   * unrecorded-notice (the harness read a spot notice from IMDS that the platform never recorded, checkpointed and
   * exited 75 before the host went: `Essential container in task exited`, its progress.json saying `spot_notice`);
   * fargate-reclaim (a CPU tier's Fargate Spot task interrupted: no container instance and no EC2 warning, the
   * harness checkpointed on the SIGTERM and exited 75, Batch's reason `Your Spot Task was interrupted.`).
   */
  readonly result:
    | 'succeed'
    | 'reclaim'
    | 'capacity'
    | 'app-error'
    | 'hold'
    | 'queued'
    | 'unsubmitted'
    | 'lost'
    | 'lost-late'
    | 'unrecorded-notice'
    | 'fargate-reclaim';
  /** Seconds the attempt runs (default 1800). */
  readonly seconds?: number;
  /** Training step reached: the harness writes progress.json and a complete checkpoint at this step. */
  readonly step?: number;
  /** For reclaim: the spot notice arrives first (the interruption handler terminates the job). */
  readonly notice?: boolean;
  /** Members of the job detail Batch leaves out (the API reference marks `jobArn` and `createdAt` optional). */
  readonly omit?: readonly ('JobArn' | 'CreatedAt')[];
}

/** A clock the bench advances. */
export class FakeClock {
  constructor(public ms: number) {}
  now = (): Date => new Date(this.ms);
  advance(seconds: number): void {
    this.ms += Math.round(seconds * 1000);
  }
}

/** Batch, scripted per job and attempt, answering with AWS's shapes and delivering its state-change events. */
export class ScriptedBatch implements LocalBatch, BatchControl {
  readonly scripts = new Map<string, AttemptScript[]>();
  readonly submissions: SubmitJobInput[] = [];
  readonly terminations: Array<{ batchJobId: string; reason: string }> = [];
  private readonly held = new Map<string, (reason: string) => void>();
  /** Each Batch job as last reported (PascalCase, as Step Functions returns it), for DescribeJobs. */
  private readonly reported = new Map<string, Record<string, unknown>>();
  /** Batch jobs ListJobs does not list yet (DescribeJobs by id finds them). */
  private readonly unlisted = new Set<string>();
  /** How many of the next lookups Batch throttles. */
  failLookups = 0;
  bench!: LifecycleBench;

  /** DescribeJobs by id, or ListJobs by name and queue: the job as last reported. */
  async lookupJob(ref: BatchJobRef): Promise<BatchJob | undefined> {
    if (this.failLookups > 0) {
      this.failLookups -= 1;
      throw Object.assign(new Error('Too Many Requests'), { name: 'TooManyRequestsException' });
    }
    const jobs = [...this.reported.values()].filter((j) => !this.unlisted.has(String(j.JobId)));
    const job =
      ref.batchJobId !== undefined
        ? this.reported.get(ref.batchJobId)
        : jobs.filter((j) => j.JobName === ref.jobName && String(j.JobQueue).endsWith(`/${ref.queue}`)).at(-1);
    return job ? parseBatchJob(job, 'DescribeJobs') : undefined;
  }

  async runJob(input: SubmitJobInput): Promise<Record<string, unknown>> {
    const b = this.bench;
    const report = async (job: Record<string, unknown>) => {
      this.reported.set(String(job.JobId), job);
      await b.deliverBatchEvent(job);
    };
    this.submissions.push(input);
    const jobId = input.Tags?.['trainyard:job-id'] ?? '';
    const attempt = Number(input.Tags?.['trainyard:attempt'] ?? '1');
    const script = this.scripts.get(jobId)?.[attempt - 1] ?? { result: 'succeed' };
    if (script.result === 'unsubmitted') return new Promise<never>(() => undefined);
    const batchJobId = randomUUID();
    const createdAt = b.clock.ms;
    const base = {
      JobArn: `arn:aws:batch:us-east-1:123456789012:job/${batchJobId}`,
      JobName: input.JobName,
      JobId: batchJobId,
      JobQueue: `arn:aws:batch:us-east-1:123456789012:job-queue/${input.JobQueue}`,
      JobDefinition: `arn:aws:batch:us-east-1:123456789012:job-definition/${input.JobDefinition}:1`,
      CreatedAt: createdAt,
      Tags: input.Tags ?? {},
    };
    for (const member of script.omit ?? []) delete (base as Partial<typeof base>)[member];
    if (script.result === 'lost' || script.result === 'lost-late') {
      await this.runLost(base, script, report);
      throw Object.assign(new Error('Service Unavailable (Service: Batch, Status Code: 503)'), {
        name: 'Batch.ServerException',
      });
    }
    await report({ ...base, Status: 'RUNNABLE', Attempts: [] });

    if (script.result === 'queued') {
      // TerminateJob cancels a job that never started: FAILED with the reason, no container attempt.
      const reason = await new Promise<string>((resolve) => this.held.set(batchJobId, resolve));
      const cancelled = { ...base, Status: 'FAILED', StatusReason: reason, StoppedAt: b.clock.ms, Attempts: [] };
      await report(cancelled);
      throw new BatchTaskFailed(JSON.stringify(cancelled));
    }
    if (script.result === 'capacity') {
      b.clock.advance(b.config.spotPolicy.capacityWaitMinutes * 60);
      const failed = {
        ...base,
        Status: 'FAILED',
        StatusReason: 'Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY',
        StoppedAt: b.clock.ms,
        Attempts: [],
      };
      await report(failed);
      throw new BatchTaskFailed(JSON.stringify(failed));
    }

    b.clock.advance(90);
    const startedAt = b.clock.ms;
    const instance = `i-0${attempt}${jobId.slice(-6).replace(/[^0-9a-f]/g, 'a')}abcdef01`.slice(0, 19);
    const containerInstanceArn = `arn:aws:ecs:us-east-1:123456789012:container-instance/trainyard/${instance}`;
    const logStreamName = `${TEAM}/default/${batchJobId.slice(0, 8)}`;
    // A Fargate task runs on no container instance of ours.
    const container = {
      ...(script.result === 'fargate-reclaim' ? {} : { ContainerInstanceArn: containerInstanceArn }),
      TaskArn: `arn:aws:ecs:task/${batchJobId}`,
      LogStreamName: logStreamName,
    };
    await report({ ...base, Status: 'RUNNING', StartedAt: startedAt, Attempts: [], Container: container });
    if (script.step !== undefined) await b.writeCheckpoint(jobId, attempt, script.step);

    let statusReason = 'Essential container in task exited';
    let exitCode: number | undefined = 0;
    let status = 'SUCCEEDED';
    if (script.result === 'hold') {
      statusReason = await new Promise<string>((resolve) => this.held.set(batchJobId, resolve));
      exitCode = 75;
      status = 'FAILED';
    } else if (script.result === 'reclaim') {
      if (script.notice) await b.deliverSpotNotice(instance);
      b.clock.advance(script.seconds ?? 1800);
      statusReason = `Host EC2 (instance ${instance}) terminated.`;
      exitCode = 75;
      status = 'FAILED';
    } else if (script.result === 'fargate-reclaim') {
      b.clock.advance(script.seconds ?? 1800);
      statusReason = 'Your Spot Task was interrupted.';
      exitCode = 75;
      status = 'FAILED';
    } else if (script.result === 'unrecorded-notice') {
      b.clock.advance(script.seconds ?? 1800);
      await b.writeCheckpoint(jobId, attempt, script.step ?? 0, { state: 'checkpointed', spot_notice: true });
      exitCode = 75;
      status = 'FAILED';
    } else if (script.result === 'app-error') {
      b.clock.advance(script.seconds ?? 1800);
      exitCode = 1;
      status = 'FAILED';
    } else {
      b.clock.advance(script.seconds ?? 1800);
    }
    const stoppedAt = b.clock.ms;
    const ended = {
      ...base,
      Status: status,
      StatusReason: status === 'SUCCEEDED' ? 'Essential container in task exited' : statusReason,
      StartedAt: startedAt,
      StoppedAt: stoppedAt,
      Container: { ...container, ExitCode: exitCode },
      Attempts: [
        {
          Container: { ...container, ExitCode: exitCode },
          StartedAt: startedAt,
          StoppedAt: stoppedAt,
          StatusReason: status === 'SUCCEEDED' ? 'Essential container in task exited' : statusReason,
        },
      ],
    };
    await report(ended);
    if (status === 'SUCCEEDED') return ended;
    throw new BatchTaskFailed(JSON.stringify(ended));
  }

  /**
   * A job Batch runs although its task failed. lost: RUNNABLE and RUNNING (with its checkpoint) are reported before
   * the task fails; then, in the background, it is held until TerminateJob and ends FAILED with the reason 120 s later
   * (the harness's final checkpoint). lost-late: unlisted, and its RUNNABLE reaches batch-events only after the
   * attempt's end is recorded; TerminateJob then cancels it before it starts. Returns once the task may fail.
   */
  private async runLost(
    base: Record<string, unknown>,
    script: AttemptScript,
    report: (job: Record<string, unknown>) => Promise<void>,
  ): Promise<void> {
    const b = this.bench;
    const late = script.result === 'lost-late';
    const batchJobId = String(base.JobId);
    const tags = base.Tags as Record<string, string>;
    const jobId = tags['trainyard:job-id'] ?? '';
    const attempt = Number(tags['trainyard:attempt']);
    const terminated = new Promise<string>((resolve) => this.held.set(batchJobId, resolve));
    const runnable = { ...base, Status: 'RUNNABLE', Attempts: [] };
    let started: Record<string, unknown> = {};
    if (late) {
      this.unlisted.add(batchJobId);
      this.reported.set(batchJobId, runnable);
    } else {
      await report(runnable);
      b.clock.advance(90);
      started = { StartedAt: b.clock.ms, Container: { LogStreamName: `${TEAM}/default/${batchJobId.slice(0, 8)}` } };
      await report({ ...base, ...started, Status: 'RUNNING', Attempts: [] });
      if (script.step !== undefined) await b.writeCheckpoint(jobId, attempt, script.step);
    }
    void (async () => {
      if (late) {
        await b.until('the lost attempt to be recorded as ended', async () => {
          return (await b.plane.jobs.getAttempt(jobId, attempt))?.stoppedAt !== undefined;
        });
        await report(runnable);
      }
      const reason = await terminated;
      b.clock.advance(late ? 1 : 120);
      const stoppedAt = b.clock.ms;
      // The harness checkpoints on SIGTERM and exits 75; a job cancelled before it started has no container attempt.
      const container = late ? undefined : { ...(started.Container as object), ExitCode: 75 };
      await report({
        ...base,
        ...started,
        ...(container ? { Container: container } : {}),
        Status: 'FAILED',
        StatusReason: reason,
        StoppedAt: stoppedAt,
        Attempts: container
          ? [{ Container: container, StartedAt: started.StartedAt, StoppedAt: stoppedAt, StatusReason: reason }]
          : [],
      });
    })();
  }

  async terminateJob(batchJobId: string, reason: string): Promise<void> {
    this.terminations.push({ batchJobId, reason });
    const release = this.held.get(batchJobId);
    if (release) {
      this.held.delete(batchJobId);
      release(reason);
    }
  }

  /**
   * Batch forgets a job, as AWS does about 7 days after it ended and local mode's Batch on a restart: DescribeJobs and
   * ListJobs no longer find it, and a TerminateJob for it changes nothing.
   */
  forget(batchJobId: string): void {
    this.reported.delete(batchJobId);
    this.held.delete(batchJobId);
  }

  /** Whether an attempt is held running (waiting for TerminateJob). */
  isHeld(batchJobId: string): boolean {
    return this.held.has(batchJobId);
  }
}

/** Options of the bench. */
export interface BenchOptions {
  /** Config overrides (teams, budgets, spot policy). */
  readonly config?: Record<string, unknown>;
  /** Invoke every Task handler twice and deliver every AWS event twice (the replay test). */
  readonly replay?: boolean;
  /**
   * Task invocations that fail after their handler did its work (a Lambda that timed out just before returning), by
   * Task name and 1-based call number: `{ Finalize: [1, 2] }` fails the first two Finalize calls.
   */
  readonly failAfter?: Readonly<Record<string, readonly number[]>>;
  /**
   * Task invocations that fail before their handler runs, with an error no retry policy names (a bug, a crash of the
   * sandbox), as `failAfter`: STEP_RETRY's three retries are all they get.
   */
  readonly failBefore?: Readonly<Record<string, readonly number[]>>;
  /** Runs before each invocation of a Task, with its 1-based call number: the world changing while a job waits. */
  readonly beforeTask?: Readonly<Record<string, (call: number) => Promise<void>>>;
  /** Task invocations throttled before their handler runs (Lambda's TooManyRequestsException), as `failAfter`. */
  readonly throttleBefore?: Readonly<Record<string, readonly number[]>>;
  /**
   * Task invocations that find DynamoDB out of reach through all of their client's attempts, before their handler
   * does anything, as `failAfter`.
   */
  readonly dynamoUnreachableBefore?: Readonly<Record<string, readonly number[]>>;
  /** Detail types whose first PutEvents is throttled, as EventBridge does under load. */
  readonly throttleOnce?: readonly string[];
  /**
   * Let the Backoff Task wait out the plan's delay in real time (its timeout), instead of ending it at once as every
   * other test does.
   */
  readonly realBackoff?: boolean;
  /** Batch statuses whose state-change events never reach batch-events (the lifecycle still sees the attempt end). */
  readonly dropBatchEvents?: readonly string[];
}

/** A running bench. */
export interface LifecycleBench {
  readonly config: TrainyardConfig;
  readonly clock: FakeClock;
  readonly plane: ControlPlane;
  readonly batch: ScriptedBatch;
  readonly machine: LocalStateMachine;
  readonly published: EventEntry[];
  /** EMF lines the metric publisher wrote (read them with test/support/emf.ts). */
  readonly metricLines: string[];
  /** Every Task invocation, in order, with its state name. */
  readonly taskCalls: string[];
  /** What the execution-ended handler did for each execution that failed or was stopped (the EventBridge rule). */
  readonly executionsEnded: ExecutionEndedResult[];
  /** The execution-ended handler, as the rule invokes it (tests redeliver events with it). */
  readonly executionEnded: (event: unknown) => Promise<ExecutionEndedResult>;
  submit(body: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }>;
  call(
    method: string,
    path: string,
    as?: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  deliverBatchEvent(job: Record<string, unknown>): Promise<void>;
  deliverSpotNotice(instanceId: string): Promise<void>;
  runBudgetWatch(): Promise<void>;
  /** A complete checkpoint at `step` and the harness's progress.json for it (with `progress` fields added). */
  writeCheckpoint(jobId: string, attempt: number, step: number, progress?: Record<string, unknown>): Promise<void>;
  /** Waits until the job's execution ends. */
  finish(jobId: string): Promise<void>;
  /** Waits (polling the fake world) until a predicate holds. */
  until(what: string, predicate: () => Promise<boolean>): Promise<void>;
  stop(): Promise<void>;
}

const T0 = Date.UTC(2026, 10, 20, 9, 0, 0);

/** The default test configuration: one team with a researcher, an admin, generous budget. */
export function benchConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    teams: [{ id: TEAM, principals: [RESEARCHER], monthlyBudgetUsd: 100 }],
    admins: [ADMIN],
    ...overrides,
  };
}

/** Starts the bench. */
export async function startLifecycleBench(options: BenchOptions = {}): Promise<LifecycleBench> {
  const config = parseConfig(benchConfig(options.config), 'bench config');
  const clock = new FakeClock(T0);
  const engines: RunningEngine[] = [];
  const dynamo = await startDynalite();
  engines.push(dynamo);
  const s3 = await startS3rver({
    directory: mkdtempSync(join(tmpdir(), 'lifecycle-s3-')),
    buckets: [LOCAL_NAMES.bucket],
  });
  engines.push(s3);
  await ensureLocalTables(dynamo.endpoint);

  const batch = new ScriptedBatch();
  const published: EventEntry[] = [];
  const metricLines: string[] = [];
  const taskCalls: string[] = [];
  const throttles = new Set(options.throttleOnce ?? []);
  const fleet: FleetFacts = {
    async instanceFor(arn) {
      const instanceId = arn.split('/').at(-1) ?? '';
      return { instanceId, instanceType: 'g4dn.xlarge', availabilityZone: 'us-east-1a', lifecycle: 'spot' };
    },
    async spotPriceAt() {
      return 0.2;
    },
  };
  let machine: LocalStateMachine | undefined;
  const plane = localControlPlane({
    config,
    dynamoEndpoint: dynamo.endpoint,
    s3Endpoint: s3.endpoint,
    batch,
    events: {
      async publish(entries) {
        const throttled = entries.find((e) => throttles.delete(e.DetailType));
        if (throttled) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
        published.push(...entries);
      },
    },
    metrics: emfMetricPublisher((lines) => void metricLines.push(...lines.split('\n').filter(Boolean))),
    lifecycle: () => {
      if (!machine) throw new Error('state machine not started');
      return machine;
    },
    logs: { readLines: async () => ({ lines: [], atEnd: true }) },
    fleet,
    clock: clock.now,
  });
  const twice =
    <T>(name: string, handler: (input: unknown) => Promise<T>) =>
    async (input: unknown) => {
      taskCalls.push(name);
      const started = taskCalls.filter((n) => n === name).length;
      await options.beforeTask?.[name]?.(started);
      if (options.failBefore?.[name]?.includes(started)) {
        throw new Error(`${name} call ${started} failed before its work`);
      }
      if (options.dynamoUnreachableBefore?.[name]?.includes(started)) {
        throw new DynamoDbError('DynamoDbNetworkError', `GetItem to dynamodb failed: connect ETIMEDOUT (${name})`, {
          retryable: true,
        });
      }
      if (options.throttleBefore?.[name]?.includes(started)) {
        throw Object.assign(new Error(`Rate exceeded (${name} call ${started})`), {
          name: 'Lambda.TooManyRequestsException',
        });
      }
      const first = await handler(input);
      const call = taskCalls.filter((n) => n === name).length;
      if (options.failAfter?.[name]?.includes(call)) {
        throw Object.assign(new Error(`${name} call ${call} timed out after its work`), { name: 'Sandbox.Timedout' });
      }
      if (!options.replay) return first;
      return handler(input);
    };
  const raw = lifecycleSteps(plane);
  const steps: LocalStepHandlers = {
    analyze: twice('Analyze', raw.analyze),
    costGate: twice('CostGate', raw.costGate),
    prepareAttempt: twice('PrepareAttempt', raw.prepareAttempt),
    attemptOutcome: twice('AttemptOutcome', raw.attemptOutcome),
    // The pause Task waits for its token; replaying it would only record the same pause again.
    pause: twice('PausedForBudget', raw.pause),
    backoff: twice('Backoff', raw.backoff),
    finalize: twice('Finalize', raw.finalize),
  };
  const executionsEnded: ExecutionEndedResult[] = [];
  // A stopped attempt is looked up again every 10 s of the bench's clock; the real time between is one turn of the
  // event loop, in which the scripted Batch reports the end TerminateJob caused.
  const executionEnded = createExecutionEndedHandler(plane, {
    sleep: async (ms) => {
      clock.advance(ms / 1000);
      await new Promise((resolve) => setImmediate(resolve));
    },
  });
  machine = new LocalStateMachine({
    definition: synthesizeJobStateMachineDefinition(),
    steps,
    batch,
    ...(options.realBackoff ? {} : { backoffWaitMs: 0 }),
    retryIntervalMs: 0,
    now: () => clock.ms,
    onExecutionEnded: async (ended) => {
      executionsEnded.push(await executionEnded(executionStatusChangeEvent(ended, clock.ms)));
    },
  });
  const api = createApiHandler(plane);
  const batchEvents = createBatchEventsHandler(plane);
  const interruption = createInterruptionHandler(plane);
  const budgetWatch = createBudgetWatchHandler(plane);
  const deliveries = options.replay ? 2 : 1;
  let eventSeq = 0;
  const envelope = (source: string, detailType: string, detail: unknown) => {
    eventSeq += 1;
    return {
      version: '0',
      id: `evt-${eventSeq}`,
      'detail-type': detailType,
      source,
      account: '123456789012',
      time: clock.now().toISOString(),
      region: 'us-east-1',
      resources: [],
      detail,
    };
  };

  const bench: LifecycleBench = {
    config,
    clock,
    plane,
    batch,
    machine,
    published,
    metricLines,
    taskCalls,
    executionsEnded,
    executionEnded,
    async call(method, path, as = RESEARCHER, body) {
      const response = await api(apiEvent({ method, path, as, body }));
      return { status: response.statusCode ?? 500, body: JSON.parse(response.body ?? '{}') };
    },
    async submit(body) {
      return bench.call('POST', '/jobs', RESEARCHER, {
        bundle: projectBundle('nanogpt-like').toString('base64'),
        command: ['python', 'train.py', 'config/train_small.py', '--n_layer=6', '--max_iters=2000'],
        ...body,
      });
    },
    async deliverBatchEvent(job) {
      if (options.dropBatchEvents?.includes(String(job.Status))) return;
      const detail = camel(job);
      const event = envelope('aws.batch', 'Batch Job State Change', detail);
      for (let i = 0; i < deliveries; i++) await batchEvents(event);
    },
    async deliverSpotNotice(instanceId) {
      const event = envelope('aws.ec2', 'EC2 Spot Instance Interruption Warning', {
        'instance-id': instanceId,
        'instance-action': 'terminate',
      });
      for (let i = 0; i < deliveries; i++) await interruption(event);
    },
    async runBudgetWatch() {
      const event = envelope('aws.events', 'Scheduled Event', {});
      for (let i = 0; i < deliveries; i++) await budgetWatch(event);
    },
    async writeCheckpoint(jobId, attempt, step, progress = {}) {
      const job = await plane.jobs.requireJob(jobId);
      const keys = jobKeysFor(job.team, jobId);
      const folder = `${keys.checkpoints}ckpt-${String(attempt).padStart(6, '0')}/`;
      const weights = Buffer.from(`weights at step ${step}`);
      await plane.workspace.put(`${folder}ckpt.pt`, weights);
      const manifest = {
        format: 1,
        job_id: jobId,
        attempt,
        step,
        created_at: clock.now().toISOString(),
        files: [{ path: 'ckpt.pt', size: weights.length }],
      };
      await plane.workspace.put(`${folder}MANIFEST.json`, JSON.stringify(manifest));
      await plane.workspace.put(
        keys.progress,
        JSON.stringify({
          job_id: jobId,
          attempt,
          step,
          total_steps: 2000,
          loss: 1.5,
          updated_at: clock.now().toISOString(),
          ...progress,
        }),
      );
    },
    async finish(jobId) {
      await machine.waitFor(jobId);
    },
    async until(what, predicate) {
      for (let i = 0; i < 2000; i++) {
        if (await predicate()) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
      throw new Error(`gave up waiting for ${what}`);
    },
    async stop() {
      for (const engine of engines.reverse()) await engine.stop();
    },
  };
  batch.bench = bench;
  return bench;
}

/** Step Functions' PascalCase job → the camelCase detail EventBridge delivers. */
function camel(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camel);
  if (!value || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([k, v]) => [
      k === 'Tags' ? 'tags' : k.charAt(0).toLowerCase() + k.slice(1),
      k === 'Tags' ? v : camel(v),
    ]),
  );
}

/** The team scope and period of the bench's jobs. */
export function teamScope(): { scope: string; period: string } {
  return { scope: formatScope('team', TEAM), period: periodOf(new Date(T0)) };
}
