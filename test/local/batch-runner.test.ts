import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseBatchFailureCause, parseBatchJob } from '../../lambdas/domain/batch-job';
import { queueName } from '../../lambdas/domain/batch-names';
import { TERMINATE_REASONS } from '../../lambdas/domain/batch-reasons';
import { classifyAttemptOutcome } from '../../lambdas/domain/outcome';
import { packTarGz } from '../../lambdas/shared/tarball';
import { DEFAULT_TIERS, parseConfig, type TierConfig } from '../../lib/config';
import { CONTAINER_STOP_TIMEOUT_SECONDS } from '../../lib/fleet/stop-timeout';
import {
  BatchClientException,
  type BatchJobDetail,
  describeAttemptEnd,
  LOCAL_SHUTDOWN_REASON,
  LocalBatchRunner,
  type LocalBatchRunnerOptions,
  NoRunningAttempt,
  NotSpotCapacity,
  nextInterruptionDelayMs,
  pascalCaseJob,
  processState,
  type SpotInterruptionWarningEvent,
  type SpotNoticeServed,
} from '../../lib/local/batch-runner';
import { type RunningEngine, startS3rver } from '../../lib/local/engines';
import { BatchTaskFailed, type SubmitJobInput } from '../../lib/local/local-batch';
import { seededRandom } from '../../lib/seeded-random';

const BUCKET = 'workspace';
const PREFIX = 'trainyard';
const TEAM = 'vision';
const config = parseConfig({});
const gpuSmall = config.tiers.find((t) => t.id === 'gpu-small') as TierConfig;
const SPOT_QUEUE = queueName(PREFIX, 'gpu-small', 'spot');
const ON_DEMAND_QUEUE = queueName(PREFIX, 'gpu-small', 'on-demand');
const cpuSmall = config.tiers.find((t) => t.id === 'cpu-small') as TierConfig;
/** A CPU tier's spot queue: on AWS, Fargate Spot. */
const FARGATE_SPOT_QUEUE = queueName(PREFIX, 'cpu-small', 'spot');
const HELLO = readFileSync(join(process.cwd(), 'examples/hello-cpu/train.py'));

let dir: string;
let s3rver: RunningEngine;
let s3: S3Client;
let runners: LocalBatchRunner[] = [];
let jobCounter = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trainyard-batch-runner-'));
  s3rver = await startS3rver({ directory: join(dir, 's3'), buckets: [BUCKET] });
  s3 = new S3Client({
    endpoint: s3rver.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
});

afterAll(async () => {
  s3.destroy();
  await s3rver.stop();
  rmSync(dir, { recursive: true, force: true });
});

afterEach(async () => {
  await Promise.all(runners.map((r) => r.stop()));
  runners = [];
});

interface Recorder {
  readonly runner: LocalBatchRunner;
  readonly states: BatchJobDetail[];
  readonly notices: SpotInterruptionWarningEvent[];
  readonly callbackErrors: string[];
  /** Resolves when a log line matches. */
  line(pattern: RegExp): Promise<RegExpMatchArray>;
  /** Resolves when a state-change with this status arrives. */
  state(status: string): Promise<BatchJobDetail>;
  /** Resolves on the first spot notice. */
  notice(): Promise<SpotInterruptionWarningEvent>;
}

function makeRunner(overrides: Partial<LocalBatchRunnerOptions> = {}): Recorder {
  const states: BatchJobDetail[] = [];
  const notices: SpotInterruptionWarningEvent[] = [];
  const callbackErrors: string[] = [];
  const lineWaiters: Array<{ pattern: RegExp; done: (m: RegExpMatchArray) => void }> = [];
  const stateWaiters: Array<{ status: string; done: (d: BatchJobDetail) => void }> = [];
  const noticeWaiters: Array<(e: SpotInterruptionWarningEvent) => void> = [];
  const runner = new LocalBatchRunner({
    workDir: join(dir, `.trainyard-${++jobCounter}`),
    s3Endpoint: s3rver.endpoint,
    tiersByQueue: (name) =>
      name === SPOT_QUEUE
        ? { tier: gpuSmall, capacity: 'spot' }
        : name === ON_DEMAND_QUEUE
          ? { tier: gpuSmall, capacity: 'on-demand' }
          : name === FARGATE_SPOT_QUEUE
            ? { tier: cpuSmall, capacity: 'spot' }
            : undefined,
    minAttemptDurationSeconds: 1,
    imdsPollSeconds: 0.2,
    onStateChange: async (detail) => {
      states.push(detail);
      for (const w of stateWaiters.filter((x) => x.status === detail.status)) w.done(detail);
    },
    onSpotNotice: async (event) => {
      notices.push(event);
      for (const w of noticeWaiters.splice(0)) w(event);
    },
    onLogLine: (_stream, text) => {
      for (const w of lineWaiters) {
        const match = w.pattern.exec(text);
        if (match) w.done(match);
      }
    },
    onCallbackError: (error, what) => callbackErrors.push(`${what}: ${String(error)}`),
    ...overrides,
  });
  runners.push(runner);
  return {
    runner,
    states,
    notices,
    callbackErrors,
    line: (pattern) => new Promise((done) => lineWaiters.push({ pattern, done })),
    state: (status) => new Promise((done) => stateWaiters.push({ status, done })),
    notice: () => new Promise((done) => noticeWaiters.push(done)),
  };
}

/** The SubmitJob request PrepareAttempt would make: tags, TRAINYARD_* settings, optional code bundle. */
async function submission(options: {
  command: string[];
  queue?: string;
  bundle?: boolean;
  timeoutSeconds?: number;
  env?: Record<string, string>;
}): Promise<SubmitJobInput & { jobId: string; prefix: string }> {
  const jobId = `j${Date.now().toString(36)}${++jobCounter}`;
  const prefix = `teams/${TEAM}/jobs/${jobId}/`;
  const env: Record<string, string> = {
    TRAINYARD_JOB_ID: jobId,
    TRAINYARD_ATTEMPT: '1',
    TRAINYARD_CHECKPOINT_URI: `s3://${BUCKET}/${prefix}checkpoints`,
    TRAINYARD_METRICS_URI: `s3://${BUCKET}/${prefix}metrics`,
    TRAINYARD_STOP_GRACE_SECONDS: '20',
    TRAINYARD_SETTLE_SECONDS: '0.2',
    ...options.env,
  };
  if (options.bundle) {
    await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: `${prefix}code.tar.gz`,
        Body: packTarGz([{ path: 'train.py', content: HELLO }]),
      }),
    );
    env.TRAINYARD_CODE_URI = `s3://${BUCKET}/${prefix}code.tar.gz`;
  }
  return {
    jobId,
    prefix,
    JobName: `${jobId}-1`,
    JobQueue: options.queue ?? SPOT_QUEUE,
    JobDefinition: `${PREFIX}-${TEAM}-gpu-small`,
    ContainerOverrides: {
      Command: options.command,
      Environment: Object.entries(env).map(([Name, Value]) => ({ Name, Value })),
    },
    ...(options.timeoutSeconds === undefined ? {} : { Timeout: { AttemptDurationSeconds: options.timeoutSeconds } }),
    Tags: { 'trainyard:job-id': jobId, 'trainyard:team': TEAM, 'trainyard:attempt': '1' },
  };
}

async function failureOf(promise: Promise<unknown>): Promise<BatchTaskFailed> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof BatchTaskFailed) return error;
    throw error;
  }
  throw new Error('expected the job to fail, but it succeeded');
}

const sleepForever = ['python', '-c', 'import time; time.sleep(120)'];
/** A command that ignores SIGTERM and prints its pid, so only a SIGKILL ends it. */
const stubborn = [
  'python',
  '-c',
  'import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print("pid", os.getpid(), flush=True); time.sleep(120)',
];

describe('LocalBatchRunner.runJob', () => {
  it('resolves with the SUCCEEDED job in PascalCase, with the container, attempt and log stream Batch reports', async () => {
    const { runner, states } = makeRunner();
    const input = await submission({ command: ['python', '-c', 'print("step=1 loss=0.25")'] });

    const job = await runner.runJob(input);

    expect(job.Status).toBe('SUCCEEDED');
    expect(job.JobName).toBe(input.JobName);
    expect(job.JobId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(job.JobArn).toBe(`arn:aws:batch:us-east-1:000000000000:job/${String(job.JobId)}`);
    expect(job.JobQueue).toBe(`arn:aws:batch:us-east-1:000000000000:job-queue/${SPOT_QUEUE}`);
    expect(job.Tags).toEqual(input.Tags);
    const parsed = parseBatchJob(job);
    const attempt = parsed.attempts[0];
    expect(parsed.attempts).toHaveLength(1);
    expect(attempt?.container?.exitCode).toBe(0);
    expect(attempt?.statusReason).toBe('Essential container in task exited');
    expect(attempt?.container?.containerInstanceArn).toMatch(
      /^arn:aws:ecs:us-east-1:000000000000:container-instance\/trainyard-local\/[0-9a-f]{32}$/,
    );
    expect(attempt?.container?.logStreamName).toMatch(/^vision\/default\/[0-9a-f]{32}$/);
    expect(parsed.startedAt).toBeGreaterThanOrEqual(parsed.createdAt ?? Number.POSITIVE_INFINITY);
    expect(parsed.stoppedAt).toBeGreaterThanOrEqual(parsed.startedAt ?? Number.POSITIVE_INFINITY);
    expect(classifyAttemptOutcome(parsed).kind).toBe('succeeded');
    expect(states.map((s) => s.status)).toEqual(['RUNNABLE', 'STARTING', 'RUNNING', 'SUCCEEDED']);
  });

  it('writes the container output to .trainyard/logs/<stream>.log', async () => {
    const workDir = join(dir, 'logs-check');
    const { runner } = makeRunner({ workDir });
    const input = await submission({ command: ['python', '-c', 'print("hello from the container")'] });

    const job = parseBatchJob(await runner.runJob(input));

    const stream = job.container?.logStreamName ?? '';
    const log = readFileSync(join(workDir, 'logs', `${stream}.log`), 'utf8');
    expect(log.split('\n')).toContain('hello from the container');
    expect(log).toContain('"event": "harness_exit"');
  });

  it('sends state changes with the documented fields: RUNNING has startedAt and the container; the end has attempts', async () => {
    const { runner, states } = makeRunner();
    const input = await submission({ command: ['python', '-c', 'raise SystemExit(0)'] });

    await runner.runJob(input);

    const [runnable, starting, running, done] = states.map((s) => parseBatchJob(s, `${String(s.status)} detail`));
    expect(runnable?.status).toBe('RUNNABLE');
    expect(runnable?.startedAt).toBeUndefined();
    expect(starting?.status).toBe('STARTING');
    expect(running?.status).toBe('RUNNING');
    expect(running?.startedAt).toEqual(expect.any(Number));
    expect(running?.container?.containerInstanceArn).toMatch(/container-instance\/trainyard-local\//);
    expect(running?.container?.logStreamName).toMatch(/^vision\/default\//);
    expect(running?.attempts).toEqual([]);
    expect(done?.status).toBe('SUCCEEDED');
    expect(done?.stoppedAt).toEqual(expect.any(Number));
    expect(done?.statusReason).toBe('Essential container in task exited');
    expect(done?.container?.exitCode).toBe(0);
    expect(done?.attempts[0]?.startedAt).toBe(running?.startedAt);
    expect(done?.tags).toEqual(input.Tags);
    // camelCase, as the EventBridge detail: no PascalCase twin keys.
    expect(Object.keys(states[3] ?? {})).toContain('jobId');
    expect(Object.keys(states[3] ?? {})).not.toContain('JobId');
  });

  it('rejects a non-zero exit with BatchTaskFailed whose Cause parses and classifies as app-error', async () => {
    const { runner } = makeRunner();
    const input = await submission({ command: ['python', '-c', 'import sys; sys.exit(3)'] });

    const failure = await failureOf(runner.runJob(input));

    expect(failure.name).toBe('States.TaskFailed');
    const job = parseBatchFailureCause(failure.cause);
    expect(job.status).toBe('FAILED');
    expect(job.statusReason).toBe('Essential container in task exited');
    expect(job.attempts[0]?.container?.exitCode).toBe(3);
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'app-error', exitCode: 3 });
  });

  it('reports a harness that cannot start as "Task failed to start" with no exit code (infra-error)', async () => {
    const { runner, states } = makeRunner({ python: join(dir, 'no-such-python') });
    const input = await submission({ command: ['python', '-c', 'pass'] });

    const job = parseBatchFailureCause((await failureOf(runner.runJob(input))).cause);

    expect(job.statusReason).toBe('Task failed to start');
    expect(job.attempts[0]?.container?.reason).toMatch(/^CannotStartContainerError: .*no-such-python/);
    expect(job.attempts[0]?.container?.exitCode).toBeUndefined();
    expect(classifyAttemptOutcome(job).kind).toBe('infra-error');
    // As on AWS, a task that never started was never RUNNING and has no start time.
    expect(states.map((s) => s.status)).toEqual(['RUNNABLE', 'STARTING', 'FAILED']);
    expect(job.startedAt).toBeUndefined();
    expect(job.attempts[0]?.startedAt).toBeUndefined();
  });

  it.each([
    { name: 'a command holding a NUL byte', command: ['python', '-c', 'print("a\0b")'], blockLogs: false },
    { name: 'a log folder that cannot be made', command: ['python', '-c', 'pass'], blockLogs: true },
  ])('fails, as a task that cannot start, an attempt whose start throws: $name', async ({ command, blockLogs }) => {
    const workDir = join(dir, `start-throws-${blockLogs}`);
    if (blockLogs) {
      mkdirSync(join(workDir, 'logs'), { recursive: true });
      writeFileSync(join(workDir, 'logs', 'vision'), 'a file where the team’s log folder goes');
    }
    const { runner, states } = makeRunner({ workDir });
    const input = await submission({ command });

    const job = parseBatchFailureCause((await failureOf(runner.runJob(input))).cause);

    expect(job.statusReason).toBe('Task failed to start');
    expect(job.attempts[0]?.container?.reason).toMatch(/^CannotStartContainerError: /);
    expect(states.map((s) => s.status)).toEqual(['RUNNABLE', 'STARTING', 'FAILED']);
    // Ended for good: DescribeJobs says FAILED, not RUNNABLE for ever.
    const ref = { batchJobId: job.jobId, queue: input.JobQueue, jobName: input.JobName };
    expect((await runner.lookupJob(ref))?.status).toBe('FAILED');
  });

  it('runs a job on when its log file cannot be written, reporting the failure and still passing each line on', async () => {
    const failing = new Writable({ write: (_chunk, _encoding, done) => done(new Error('ENOSPC: no space left')) });
    const lines: string[] = [];
    const { runner, callbackErrors } = makeRunner({
      openLogFile: () => failing,
      onLogLine: (_stream, line) => lines.push(line),
    });
    const input = await submission({ command: ['python', '-c', 'print("still here")'] });

    const job = parseBatchJob(await runner.runJob(input));

    expect(job.status).toBe('SUCCEEDED');
    expect(callbackErrors.some((e) => e.includes('ENOSPC: no space left'))).toBe(true);
    expect(lines).toContain('still here');
  });

  it('deletes an attempt’s working folder once it has ended (its checkpoints are in S3)', async () => {
    const workDir = join(dir, 'attempt-folders');
    const { runner } = makeRunner({ workDir });
    const input = await submission({ command: ['python', '-c', 'open("scratch.bin", "wb").write(b"x" * 1024)'] });

    const job = parseBatchJob(await runner.runJob(input));

    expect(existsSync(join(workDir, 'attempts', job.jobId))).toBe(false);
    expect(existsSync(join(workDir, 'logs'))).toBe(true);
  });

  it('refuses an unknown queue and a malformed job name as Batch.ClientException, starting nothing', async () => {
    const { runner, states } = makeRunner();
    const input = await submission({ command: sleepForever });

    await expect(runner.runJob({ ...input, JobQueue: 'trainyard-nope-spot' })).rejects.toThrow(
      new BatchClientException('JobQueue trainyard-nope-spot does not exist (no tier maps to it)'),
    );
    await expect(runner.runJob({ ...input, JobName: 'has spaces' })).rejects.toThrow(/JobName must be 1-128/);
    expect(states).toEqual([]);
  });

  it('accepts a queue ARN as well as a queue name', async () => {
    const { runner } = makeRunner();
    const input = await submission({ command: ['python', '-c', 'pass'] });

    const job = await runner.runJob({
      ...input,
      JobQueue: `arn:aws:batch:us-east-1:123456789012:job-queue/${ON_DEMAND_QUEUE}`,
    });

    expect(job.JobQueue).toBe(`arn:aws:batch:us-east-1:000000000000:job-queue/${ON_DEMAND_QUEUE}`);
  });
});

/** The EC2 notice interrupt() served (the GPU tiers' spot queues run on EC2). */
function ec2Notice(served: SpotNoticeServed): Extract<SpotNoticeServed, { platform: 'EC2' }> {
  if (served.platform !== 'EC2') throw new Error(`expected an EC2 spot notice, got ${JSON.stringify(served)}`);
  return served;
}

describe('spot interruptions', () => {
  it('serves the notice on IMDS: the harness checkpoints, exits 75 and the job is reclaimed with the instance id', async () => {
    const rec = makeRunner();
    const input = await submission({
      command: ['python', 'train.py', '--max_iters=100000', '--log_interval=1', '--step_delay=0.005'],
      bundle: true,
    });
    const run = rec.runner.runJob(input);
    await rec.line(/^iter 20:/);
    const [running] = rec.runner.runningAttempts();
    // The pid is the live harness's: signal 0 probes it without disturbing it.
    expect(() => process.kill(running?.harnessPid ?? -1, 0)).not.toThrow();

    const served = ec2Notice(await rec.runner.interrupt(input.jobId));
    const failure = await failureOf(run);

    expect(running).toMatchObject({ trainyardJobId: input.jobId, capacity: 'spot', team: TEAM, attempt: '1' });
    expect(served.instanceId).toBe(running?.instanceId);
    const job = parseBatchFailureCause(failure.cause);
    // As on AWS: the container exits inside the warning, its host still up; the notice the interruption handler
    // records (local mode runs it on every notice served) makes the exit a reclaim, not a move.
    expect(job.statusReason).toBe('Essential container in task exited');
    expect(job.attempts[0]?.container?.exitCode).toBe(75);
    expect(classifyAttemptOutcome(job, { noticeRecorded: true })).toMatchObject({ kind: 'reclaimed', resumable: true });
    expect(classifyAttemptOutcome(job).kind).toBe('moved');
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${input.prefix}checkpoints/` }));
    const keys = (listed.Contents ?? []).map((o) => o.Key);
    expect(keys).toContain(`${input.prefix}checkpoints/ckpt-000001/MANIFEST.json`);
    expect(keys).toContain(`${input.prefix}checkpoints/ckpt-000001/ckpt.json`);
  });

  it('delivers the EC2 Spot Instance Interruption Warning event in its documented shape, once per attempt', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever });
    const run = rec.runner.runJob(input);
    const running = await rec.state('RUNNING');
    const before = Date.now();

    const first = ec2Notice(await rec.runner.interrupt(String(running.jobId)));
    const second = ec2Notice(await rec.runner.interrupt(input.jobId));
    await failureOf(run);

    expect(rec.notices).toHaveLength(1);
    const event = rec.notices[0];
    expect(event).toMatchObject({
      version: '0',
      source: 'aws.ec2',
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      region: 'us-east-1',
      resources: [`arn:aws:ec2:us-east-1:000000000000:instance/${first.instanceId}`],
      detail: { 'instance-id': first.instanceId, 'instance-action': 'terminate' },
    });
    expect(event?.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(event?.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/);
    // The notice announces the reclaim 120 s (noticeKillSeconds) ahead, to the second.
    const noticeMs = Date.parse(first.noticeTime);
    expect(noticeMs).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 120_000);
    expect(noticeMs).toBeLessThanOrEqual(Date.now() + 120_000);
    expect(second.noticeTime).toBe(first.noticeTime);
    expect(first.instanceId).toMatch(/^i-[0-9a-f]{17}$/);
  });

  it('kills the whole process tree when the attempt outlives the notice, reporting the reclaim with no exit code', async () => {
    const rec = makeRunner({ noticeKillSeconds: 1 });
    const input = await submission({ command: stubborn, env: { TRAINYARD_STOP_GRACE_SECONDS: '60' } });
    const run = rec.runner.runJob(input);
    const pid = Number((await rec.line(/^pid (\d+)$/))[1]);

    const served = ec2Notice(await rec.runner.interrupt(input.jobId));
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(job.statusReason).toBe(`Host EC2 (instance ${served.instanceId}) terminated.`);
    expect(job.attempts[0]?.statusReason).toBe(`Host EC2 (instance ${served.instanceId}) terminated.`);
    expect(job.attempts[0]?.container?.exitCode).toBeUndefined();
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'reclaimed', instanceId: served.instanceId });
    expect(isAlive(pid)).toBe(false);
  });

  it('interrupts a CPU tier’s attempt as Fargate Spot does: SIGTERM, no IMDS notice, Fargate’s reason', async () => {
    const rec = makeRunner();
    const input = await submission({
      command: ['python', 'train.py', '--max_iters=100000', '--log_interval=1', '--step_delay=0.005'],
      bundle: true,
      queue: FARGATE_SPOT_QUEUE,
    });
    // Fargate has no IMDS: the harness's polls go unanswered and it stops polling.
    const noImds = rec.line(/imds_unavailable/);
    const training = rec.line(/^iter 20:/);
    const run = rec.runner.runJob(input);
    await Promise.all([noImds, training]);
    const [running] = rec.runner.runningAttempts();
    const before = Date.now();

    const served = await rec.runner.interrupt(input.jobId);
    const again = await rec.runner.interrupt(input.jobId);
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(running).toMatchObject({ platform: 'FARGATE', capacity: 'spot' });
    expect(running?.instanceId).toBeUndefined();
    expect(served).toMatchObject({ platform: 'FARGATE', batchJobId: running?.batchJobId, alreadyStopping: false });
    expect(again).toEqual(served);
    // SIGKILL is due Fargate's 30 s after the SIGTERM, to the second.
    expect(Date.parse(served.noticeTime)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 30_000);
    expect(Date.parse(served.noticeTime)).toBeLessThanOrEqual(Date.now() + 30_000);
    // No EC2 warning, no container instance: what Batch reports of a Fargate Spot task AWS took back.
    expect(rec.notices).toEqual([]);
    expect(job.statusReason).toBe('Your Spot Task was interrupted.');
    expect(job.attempts[0]?.statusReason).toBe('Your Spot Task was interrupted.');
    expect(job.attempts[0]?.container?.exitCode).toBe(75);
    expect(job.attempts[0]?.container?.containerInstanceArn).toBeUndefined();
    expect(rec.states.map((d) => (d.platformCapabilities as string[])[0])).toContain('FARGATE');
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'reclaimed', resumable: true });
    // The harness checkpointed on the signal.
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${input.prefix}checkpoints/` }));
    expect((listed.Contents ?? []).map((o) => o.Key)).toContain(`${input.prefix}checkpoints/ckpt-000001/MANIFEST.json`);
  });

  it('leaves a Fargate task that is already stopping to its stop: no second SIGTERM, its reason kept', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever, queue: FARGATE_SPOT_QUEUE });
    const run = rec.runner.runJob(input);
    const running = await rec.state('RUNNING');
    const before = Date.now();

    await rec.runner.terminateJob(String(running.jobId), TERMINATE_REASONS.cancel);
    const served = await rec.runner.interrupt(input.jobId);
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(served).toMatchObject({ platform: 'FARGATE', alreadyStopping: true });
    // The SIGKILL due is the TerminateJob's, Fargate's 30 s after its SIGTERM.
    expect(Date.parse(served.noticeTime)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 30_000);
    expect(Date.parse(served.noticeTime)).toBeLessThanOrEqual(Date.now() + 30_000);
    expect(job.statusReason).toBe(TERMINATE_REASONS.cancel);
  });

  it('kills a Fargate task that outlives its SIGTERM after the stop timeout, reporting Fargate’s reason', async () => {
    const rec = makeRunner({ fargateStopTimeoutSeconds: 1 });
    const input = await submission({
      command: stubborn,
      env: { TRAINYARD_STOP_GRACE_SECONDS: '60' },
      queue: FARGATE_SPOT_QUEUE,
    });
    const run = rec.runner.runJob(input);
    const pid = Number((await rec.line(/^pid (\d+)$/))[1]);

    await rec.runner.interrupt(input.jobId);
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(job.statusReason).toBe('Your Spot Task was interrupted.');
    expect(job.attempts[0]?.container?.exitCode).toBe(137);
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'reclaimed' });
    expect(isAlive(pid)).toBe(false);
  });

  it('refuses to interrupt an on-demand attempt, and an id with no running attempt, naming why', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever, queue: ON_DEMAND_QUEUE });
    const run = rec.runner.runJob(input);
    await rec.state('RUNNING');

    await expect(rec.runner.interrupt(input.jobId)).rejects.toThrow(NotSpotCapacity);
    await expect(rec.runner.interrupt(input.jobId)).rejects.toThrow(
      new RegExp(`job ${input.jobId} attempt 1 .* runs on on-demand capacity \\(queue ${ON_DEMAND_QUEUE}\\)`),
    );
    await expect(rec.runner.interrupt('j-unknown')).rejects.toThrow(NoRunningAttempt);
    await expect(rec.runner.interrupt('j-unknown')).rejects.toThrow(
      /no running attempt has .* j-unknown; running: job /,
    );
    await rec.runner.terminateJob(String(rec.states.at(-1)?.jobId), TERMINATE_REASONS.cancel);
    await failureOf(run);
    expect(rec.notices).toEqual([]);
  });

  it('interrupts running spot attempts at random when spotInterruptionsPerHour is set', async () => {
    // 7200/h is a mean gap of 0.5 s; the attempt sleeps 120 s, so the random notice ends it.
    const rec = makeRunner({ spotInterruptionsPerHour: 7200, random: seededRandom(42) });
    const input = await submission({ command: sleepForever });
    const run = rec.runner.runJob(input);

    const event = await rec.notice();
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(event.detail['instance-id']).toMatch(/^i-[0-9a-f]{17}$/);
    expect(job.attempts.at(-1)?.container?.exitCode).toBe(75);
    expect(classifyAttemptOutcome(job, { noticeRecorded: true }).kind).toBe('reclaimed');
  });

  it('never interrupts on-demand attempts at random', async () => {
    const rec = makeRunner({ spotInterruptionsPerHour: 3_600_000 });
    const input = await submission({
      command: ['python', '-c', 'import time; time.sleep(0.5)'],
      queue: ON_DEMAND_QUEUE,
    });

    const job = await rec.runner.runJob(input);

    expect(job.Status).toBe('SUCCEEDED');
    expect(rec.notices).toEqual([]);
  });
});

describe('terminateJob and timeouts', () => {
  it('stops the attempt with SIGTERM and reports the reason with the harness exit code (classified by reason)', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever });
    const run = rec.runner.runJob(input);
    const running = await rec.state('RUNNING');
    // Like `docker stop` right after `docker run`, a SIGTERM before the harness has installed its handler just kills it.
    await rec.line(/"event": "user_command_started"/);

    await rec.runner.terminateJob(String(running.jobId), TERMINATE_REASONS.budgetPause);
    await rec.runner.terminateJob(String(running.jobId), TERMINATE_REASONS.cancel);
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(job.statusReason).toBe(TERMINATE_REASONS.budgetPause);
    expect(job.attempts[0]?.statusReason).toBe('Essential container in task exited');
    expect(job.attempts[0]?.container?.exitCode).toBe(75);
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'budget-stopped', exitCode: 75, resumable: true });
  });

  it('answers DescribeJobs by id and by queue and name: RUNNING, then the end it reported; nothing for unknown jobs', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever });
    const run = rec.runner.runJob(input);
    const running = await rec.state('RUNNING');
    await rec.line(/"event": "user_command_started"/);
    const batchJobId = String(running.jobId);
    const byName = { queue: input.JobQueue, jobName: input.JobName };

    expect(await rec.runner.lookupJob({ batchJobId, ...byName })).toMatchObject({
      jobId: batchJobId,
      status: 'RUNNING',
      startedAt: running.startedAt,
    });
    expect((await rec.runner.lookupJob(byName))?.jobId).toBe(batchJobId);
    await rec.runner.terminateJob(batchJobId, TERMINATE_REASONS.jobEnded);
    const ended = parseBatchFailureCause((await failureOf(run)).cause);
    // The same end Step Functions got (its Cause spells environment entries PascalCase; DescribeJobs camelCase).
    const { container: _, ...rest } = ended;
    expect(await rec.runner.lookupJob({ batchJobId, ...byName })).toMatchObject(rest);
    expect(ended).toMatchObject({ status: 'FAILED', statusReason: TERMINATE_REASONS.jobEnded });
    expect(await rec.runner.lookupJob({ batchJobId: 'no-such-job', ...byName })).toBeUndefined();
    expect(await rec.runner.lookupJob({ queue: input.JobQueue, jobName: 'other-a1' })).toBeUndefined();
  });

  it('treats unknown and finished jobs as no-ops', async () => {
    const rec = makeRunner();
    const input = await submission({ command: ['python', '-c', 'pass'] });
    const job = await rec.runner.runJob(input);

    await expect(rec.runner.terminateJob(String(job.JobId), TERMINATE_REASONS.cancel)).resolves.toBeUndefined();
    await expect(rec.runner.terminateJob('no-such-job', TERMINATE_REASONS.cancel)).resolves.toBeUndefined();
    expect(rec.states.map((s) => s.status)).toEqual(['RUNNABLE', 'STARTING', 'RUNNING', 'SUCCEEDED']);
  });

  it('fails a job terminated before it started with the reason and no attempts', async () => {
    let runner: LocalBatchRunner | undefined;
    const rec = makeRunner({
      onStateChange: async (detail) => {
        if (detail.status === 'RUNNABLE') await runner?.terminateJob(String(detail.jobId), TERMINATE_REASONS.cancel);
      },
    });
    runner = rec.runner;
    const input = await submission({ command: sleepForever });

    const job = parseBatchFailureCause((await failureOf(rec.runner.runJob(input))).cause);

    expect(job.statusReason).toBe(TERMINATE_REASONS.cancel);
    expect(job.attempts).toEqual([]);
    expect(classifyAttemptOutcome(job).kind).toBe('cancelled');
  });

  it('ends an attempt that outlives Timeout.AttemptDurationSeconds as "Job attempt duration exceeded timeout"', async () => {
    const rec = makeRunner();
    // 3 s leaves the harness time to install its SIGTERM handler even on a loaded machine (else SIGTERM kills it: 143).
    const input = await submission({ command: sleepForever, timeoutSeconds: 3 });

    const job = parseBatchFailureCause((await failureOf(rec.runner.runJob(input))).cause);

    expect(job.statusReason).toBe('Job attempt duration exceeded timeout');
    expect(job.timeout?.attemptDurationSeconds).toBe(3);
    expect((job.stoppedAt ?? 0) - (job.startedAt ?? 0)).toBeGreaterThanOrEqual(3000);
    expect(job.attempts[0]?.container?.exitCode).toBe(75);
    expect(classifyAttemptOutcome(job).kind).toBe('timed-out');
  });

  it("defaults the attempt timeout to the tier's max runtime, as the job definition does", async () => {
    const rec = makeRunner();
    const input = await submission({ command: ['python', '-c', 'pass'] });

    const job = parseBatchJob(await rec.runner.runJob(input));

    expect(job.timeout?.attemptDurationSeconds).toBe(2 * 3600); // gpu-small: maxRuntime 2h
  });

  it('refuses an attempt timeout below the minimum, as Batch refuses less than 60 s', async () => {
    const rec = makeRunner({ minAttemptDurationSeconds: 60 });
    const input = await submission({ command: sleepForever, timeoutSeconds: 59 });

    await expect(rec.runner.runJob(input)).rejects.toThrow(
      'Timeout.AttemptDurationSeconds must be an integer of at least 60, got 59',
    );
  });
});

describe('runner bookkeeping and shutdown', () => {
  it('answers instance facts for its container instances: type from the tier, AZ local-1a, lifecycle from the queue', async () => {
    const rec = makeRunner();
    const spot = parseBatchJob(await rec.runner.runJob(await submission({ command: ['python', '-c', 'pass'] })));
    const onDemand = parseBatchJob(
      await rec.runner.runJob(await submission({ command: ['python', '-c', 'pass'], queue: ON_DEMAND_QUEUE })),
    );

    expect(rec.runner.instanceFor(spot.container?.containerInstanceArn ?? '')).toEqual({
      instanceId: expect.stringMatching(/^i-[0-9a-f]{17}$/),
      instanceType: 'g4dn.xlarge',
      availabilityZone: 'local-1a',
      lifecycle: 'spot',
    });
    expect(rec.runner.instanceFor(onDemand.container?.containerInstanceArn ?? '')?.lifecycle).toBe('on-demand');
    expect(rec.runner.instanceFor('arn:aws:ecs:us-east-1:0:container-instance/x/y')).toBeUndefined();
  });

  it('stop() kills running attempts (infra-error, resumable), empties the running list and refuses new jobs', async () => {
    const rec = makeRunner();
    const input = await submission({ command: sleepForever });
    const run = rec.runner.runJob(input);
    await rec.state('RUNNING');
    expect(rec.runner.runningAttempts()).toHaveLength(1);

    await rec.runner.stop();
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'infra-error', resumable: true });
    expect(rec.runner.runningAttempts()).toEqual([]);
    await expect(rec.runner.runJob(await submission({ command: sleepForever }))).rejects.toThrow(BatchClientException);
  });

  it("reapOrphans kills what a crashed runner on the same folder left running, and nothing of its own or another folder's", async () => {
    // A runner that "crashed": it is never stopped before the restarted runner reaps, so its attempt runs on.
    const folder = join(dir, `.trainyard-crashed-${++jobCounter}`);
    const training = [
      'python',
      '-c',
      'import os, time; print("training pid", os.getpid(), flush=True); time.sleep(120)',
    ];
    const start = async (rec: Recorder) => {
      const trainerPid = rec.line(/^training pid (\d+)$/);
      const input = await submission({ command: training });
      const run = rec.runner.runJob(input).catch((error: unknown) => error);
      const trainer = Number((await trainerPid)[1]);
      const [attempt] = rec.runner.runningAttempts().filter((a) => a.trainyardJobId === input.jobId);
      return { run, trainer, harness: attempt?.harnessPid ?? -1, batchJobId: attempt?.batchJobId };
    };
    const alive = (pid: number) => !['Z', undefined].includes(processState(pid));
    const crashed = await start(makeRunner({ workDir: folder }));
    const elsewhere = await start(makeRunner());
    const restarted = makeRunner({ workDir: folder });
    const own = await start(restarted);

    const reaped = await restarted.runner.reapOrphans();

    expect(reaped).toEqual([
      { batchJobId: crashed.batchJobId, pids: expect.arrayContaining([crashed.harness, crashed.trainer]) },
    ]);
    expect([crashed.harness, crashed.trainer].filter(alive)).toEqual([]);
    // The user command runs in a session of its own: killing the harness's process group alone would have missed it.
    expect(crashed.trainer).not.toBe(crashed.harness);
    expect([own.harness, own.trainer, elsewhere.harness, elsewhere.trainer].every(alive)).toBe(true);
    // Its working folder goes with it; the restarted runner's own attempt keeps its own.
    expect(existsSync(join(folder, 'attempts', crashed.batchJobId ?? ''))).toBe(false);
    expect(existsSync(join(folder, 'attempts', own.batchJobId ?? ''))).toBe(true);
    // Nothing is left for a second call.
    expect(await restarted.runner.reapOrphans()).toEqual([]);
    await crashed.run;
  });

  it('fails a job whose runner stops before it starts, with no attempts and no harness started', async () => {
    let runner: LocalBatchRunner | undefined;
    const rec = makeRunner({
      onStateChange: async (detail) => {
        if (detail.status === 'STARTING') await runner?.stop();
      },
    });
    runner = rec.runner;

    const job = parseBatchFailureCause(
      (await failureOf(rec.runner.runJob(await submission({ command: sleepForever })))).cause,
    );

    expect(job.attempts).toEqual([]);
    expect(job.statusReason).toBe(LOCAL_SHUTDOWN_REASON);
    expect(classifyAttemptOutcome(job)).toMatchObject({ kind: 'infra-error', resumable: true });
  });

  it('refuses TerminateJob without a reason, as Batch does', async () => {
    const rec = makeRunner();

    await expect(rec.runner.terminateJob('any', ' ')).rejects.toThrow(
      'TerminateJob needs a reason (Batch requires one); got an empty reason for any',
    );
  });

  it("runs `python` in the user command with the runner's interpreter, as in the training image", async () => {
    const expected = execFileSync('/usr/bin/python3', ['-c', 'import sys; print(sys.base_prefix)'], {
      encoding: 'utf8',
    }).trim();
    const rec = makeRunner();
    const printed = rec.line(/^prefix=(.*)$/);

    await rec.runner.runJob(
      await submission({ command: ['python', '-c', 'import sys; print("prefix=" + sys.base_prefix)'] }),
    );

    expect((await printed)[1]).toBe(expected);
  });

  it('keeps running the job when a state-change callback fails, and reports the failure', async () => {
    const rec = makeRunner({
      onStateChange: async () => {
        throw new Error('handler down');
      },
    });

    const job = await rec.runner.runJob(await submission({ command: ['python', '-c', 'pass'] }));

    expect(job.Status).toBe('SUCCEEDED');
    expect(rec.callbackErrors).toEqual([
      'onStateChange RUNNABLE: Error: handler down',
      'onStateChange STARTING: Error: handler down',
      'onStateChange RUNNING: Error: handler down',
      'onStateChange SUCCEEDED: Error: handler down',
    ]);
  });
});

describe('processes an attempt leaves behind', () => {
  it('kills the user command when the harness itself is killed, before reporting the end', async () => {
    const rec = makeRunner();
    const training = [
      'python',
      '-c',
      'import os, time; print("training pid", os.getpid(), flush=True); time.sleep(120)',
    ];
    const run = rec.runner.runJob(await submission({ command: training }));
    const trainer = Number((await rec.line(/^training pid (\d+)$/))[1]);
    const harness = rec.runner.runningAttempts()[0]?.harnessPid ?? -1;

    process.kill(harness, 'SIGKILL'); // as the OOM killer would: the harness kills nothing on its way out
    const job = parseBatchFailureCause((await failureOf(run)).cause);

    expect(job.attempts[0]?.container?.exitCode).toBe(137);
    // The user command ran in a session of its own and was reparented out of the harness's tree when it died.
    expect(trainer).not.toBe(harness);
    expect(await exits(trainer)).toBe(true);
  });

  it('stop() kills what an attempt started outside its harness’s process tree', async () => {
    const harnessPath = standInHarness(
      'daemonizing-harness',
      [
        'import subprocess, time',
        "# In a session of its own, reparented once sh exits: out of this tree and process group, still the attempt's.",
        'daemonize = ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $!"]',
        'pid = subprocess.run(daemonize, capture_output=True, text=True, start_new_session=True).stdout',
        'print("daemon pid", pid.strip(), flush=True)',
        'time.sleep(300)',
      ].join('\n'),
    );
    const rec = makeRunner({ harnessPath });
    const run = rec.runner.runJob(await submission({ command: sleepForever })).catch((error: unknown) => error);
    const daemon = Number((await rec.line(/^daemon pid (\d+)$/))[1]);

    await rec.runner.stop();

    expect(await exits(daemon)).toBe(true);
    await run;
  });

  it('ends the log and reports the end when a process outside the attempt holds the harness’s output open', async () => {
    const workDir = join(dir, `pipe-holder-${++jobCounter}`);
    const harnessPath = standInHarness(
      'pipe-holding-harness',
      [
        'import os, subprocess',
        "# A cleared environment keeps it from being known as the attempt's: only the log fallback can end the log.",
        'holder = subprocess.Popen(["/usr/bin/sleep", "60"], env={}, start_new_session=True)',
        'print("holder pid", holder.pid, flush=True)',
        'print("last line", flush=True)',
        'os._exit(0)',
      ].join('\n'),
    );
    const rec = makeRunner({ workDir, harnessPath });
    const holderPid = rec.line(/^holder pid (\d+)$/);

    const job = parseBatchJob(await rec.runner.runJob(await submission({ command: sleepForever })));

    const holder = Number((await holderPid)[1]);
    try {
      expect(job.status).toBe('SUCCEEDED');
      expect(isAlive(holder)).toBe(true); // still holding the pipe: the fallback, not a kill, ended the log
      const log = readFileSync(join(workDir, 'logs', `${job.container?.logStreamName ?? ''}.log`), 'utf8');
      expect(log).toBe(`holder pid ${holder}\nlast line\n`);
    } finally {
      process.kill(holder, 'SIGKILL');
    }
  });
});

describe('describeAttemptEnd → classifyAttemptOutcome', () => {
  const instanceId = 'i-0abc1230abc123456';
  const host = `Host EC2 (instance ${instanceId}) terminated.`;
  const cases: Array<[string, Parameters<typeof describeAttemptEnd>[0], string, string, number | undefined, string]> = [
    [
      'exit 0',
      { instanceId, exitCode: 0, noticeServed: false, hostReclaimed: false },
      'SUCCEEDED',
      'Essential container in task exited',
      0,
      'succeeded',
    ],
    [
      'exit 1',
      { instanceId, exitCode: 1, noticeServed: false, hostReclaimed: false },
      'FAILED',
      'Essential container in task exited',
      1,
      'app-error',
    ],
    [
      'exit 75 with no notice',
      { instanceId, exitCode: 75, noticeServed: false, hostReclaimed: false },
      'FAILED',
      'Essential container in task exited',
      75,
      'moved',
    ],
    [
      // The container exits while its host is still up, as on AWS (fixtures/batch/harness-exit-75.sfn-failure.json);
      // the notice the interruption handler recorded makes it a reclaim (outcome rule 8).
      'notice, exit 75',
      { instanceId, exitCode: 75, noticeServed: true, hostReclaimed: false },
      'FAILED',
      'Essential container in task exited',
      75,
      'reclaimed',
    ],
    [
      'notice, exit 0 before the reclaim',
      { instanceId, exitCode: 0, noticeServed: true, hostReclaimed: false },
      'SUCCEEDED',
      'Essential container in task exited',
      0,
      'succeeded',
    ],
    [
      'notice, exit 2 before the reclaim',
      { instanceId, exitCode: 2, noticeServed: true, hostReclaimed: false },
      'FAILED',
      'Essential container in task exited',
      2,
      'app-error',
    ],
    [
      'notice, killed at the reclaim',
      { instanceId, exitCode: 137, noticeServed: true, hostReclaimed: true },
      'FAILED',
      host,
      undefined,
      'reclaimed',
    ],
    [
      'terminate (spot notice reason) after a notice',
      {
        instanceId,
        exitCode: 75,
        noticeServed: true,
        hostReclaimed: false,
        stop: { kind: 'terminate', reason: TERMINATE_REASONS.spotNotice },
      },
      'FAILED',
      TERMINATE_REASONS.spotNotice,
      75,
      'reclaimed',
    ],
    [
      'terminate (cancel), exit 75',
      {
        instanceId,
        exitCode: 75,
        noticeServed: false,
        hostReclaimed: false,
        stop: { kind: 'terminate', reason: TERMINATE_REASONS.cancel },
      },
      'FAILED',
      TERMINATE_REASONS.cancel,
      75,
      'cancelled',
    ],
    [
      'terminate (move to on-demand)',
      {
        instanceId,
        exitCode: 75,
        noticeServed: false,
        hostReclaimed: false,
        stop: { kind: 'terminate', reason: TERMINATE_REASONS.moveToOnDemand },
      },
      'FAILED',
      TERMINATE_REASONS.moveToOnDemand,
      75,
      'moved',
    ],
    [
      'terminate (deadline), SIGKILL after the stop timeout',
      {
        instanceId,
        exitCode: 137,
        noticeServed: false,
        hostReclaimed: false,
        stop: { kind: 'terminate', reason: TERMINATE_REASONS.deadline },
      },
      'FAILED',
      TERMINATE_REASONS.deadline,
      137,
      'timed-out',
    ],
    [
      'timeout, exit 75',
      { instanceId, exitCode: 75, noticeServed: false, hostReclaimed: false, stop: { kind: 'timeout' } },
      'FAILED',
      'Job attempt duration exceeded timeout',
      75,
      'timed-out',
    ],
    [
      'timeout even when the harness exits 0',
      { instanceId, exitCode: 0, noticeServed: false, hostReclaimed: false, stop: { kind: 'timeout' } },
      'FAILED',
      'Job attempt duration exceeded timeout',
      0,
      'timed-out',
    ],
    [
      'runner shutdown',
      { instanceId, exitCode: 137, noticeServed: false, hostReclaimed: false, stop: { kind: 'shutdown' } },
      'FAILED',
      'Essential container in task exited',
      undefined,
      'infra-error',
    ],
    [
      'Fargate Spot stop, checkpointed',
      { instanceId, exitCode: 75, noticeServed: false, hostReclaimed: false, stop: { kind: 'fargate-spot' } },
      'FAILED',
      'Your Spot Task was interrupted.',
      75,
      'reclaimed',
    ],
    [
      'Fargate Spot stop, killed',
      { instanceId, exitCode: 137, noticeServed: false, hostReclaimed: false, stop: { kind: 'fargate-spot' } },
      'FAILED',
      'Your Spot Task was interrupted.',
      137,
      'reclaimed',
    ],
    [
      'Fargate Spot stop, the work finished first',
      { instanceId, exitCode: 0, noticeServed: false, hostReclaimed: false, stop: { kind: 'fargate-spot' } },
      'SUCCEEDED',
      'Essential container in task exited',
      0,
      'succeeded',
    ],
    [
      'harness not started',
      { instanceId, spawnError: 'ENOENT', noticeServed: false, hostReclaimed: false },
      'FAILED',
      'Task failed to start',
      undefined,
      'infra-error',
    ],
  ];

  it.each(cases)('%s → %s "%s", exit %s, outcome %s', (_label, facts, status, reason, exitCode, kind) => {
    const report = describeAttemptEnd(facts);

    expect(report.status).toBe(status);
    expect(report.statusReason).toBe(reason);
    expect(report.exitCode).toBe(exitCode);
    const job = parseBatchJob({
      jobArn: 'arn:aws:batch:us-east-1:000000000000:job/x',
      jobName: 'j-1',
      jobId: 'x',
      jobQueue: SPOT_QUEUE,
      status: report.status,
      statusReason: report.statusReason,
      createdAt: 1,
      jobDefinition: 'd',
      attempts: [
        {
          statusReason: report.attemptStatusReason,
          container: {
            ...(report.exitCode === undefined ? {} : { exitCode: report.exitCode }),
            ...(report.containerReason === undefined ? {} : { reason: report.containerReason }),
          },
        },
      ],
    });
    // Local mode's interruption handler records every notice the runner serves (the instance is always known).
    expect(classifyAttemptOutcome(job, { noticeRecorded: facts.noticeServed }).kind).toBe(kind);
  });

  it('gives a stopped GPU attempt as long before SIGKILL as the deployed hosts do (ECS_CONTAINER_STOP_TIMEOUT)', () => {
    const runner = new LocalBatchRunner({
      workDir: mkdtempSync(join(tmpdir(), 'trainyard-stop-timeout-')),
      s3Endpoint: 'http://127.0.0.1:1',
      tiersByQueue: () => undefined,
    });
    // A final upload that fits in 120 s but not 110 s would pass here and be killed on AWS.
    expect((runner as unknown as { stopTimeoutSeconds: number }).stopTimeoutSeconds).toBe(
      CONTAINER_STOP_TIMEOUT_SECONDS,
    );
  });

  it('reports the harness that checkpointed and exited 75 after a notice as AWS Batch did in the recorded failure', () => {
    const report = describeAttemptEnd({ instanceId, exitCode: 75, noticeServed: true, hostReclaimed: false });
    const recorded = join(import.meta.dirname, '../fixtures/batch/harness-exit-75.sfn-failure.json');
    const aws = parseBatchFailureCause((JSON.parse(readFileSync(recorded, 'utf8')) as { Cause: string }).Cause);
    expect({ status: report.status, reason: report.statusReason, exitCode: report.exitCode }).toEqual({
      status: aws.status,
      reason: aws.statusReason,
      exitCode: aws.attempts.at(-1)?.container?.exitCode,
    });
    expect(report.attemptStatusReason).toBe(aws.attempts.at(-1)?.statusReason);
  });
});

describe('nextInterruptionDelayMs', () => {
  it.each([
    // mean gap 1/rate hours; u = 1 - e^-1 gives exactly one mean gap.
    [1, 1 - Math.exp(-1), 3_600_000],
    [2, 1 - Math.exp(-1), 1_800_000],
    [60, 1 - Math.exp(-2), 120_000],
    [10, 0, 0],
  ])('rate %f/h, u=%f → %f ms', (rate, u, expected) => {
    expect(nextInterruptionDelayMs(rate, u)).toBeCloseTo(expected, 3);
  });

  it('never schedules at a zero or negative rate', () => {
    expect(nextInterruptionDelayMs(0, 0.5)).toBe(Number.POSITIVE_INFINITY);
    expect(nextInterruptionDelayMs(-1, 0.5)).toBe(Number.POSITIVE_INFINITY);
  });

  it('draws a sample mean close to 1/rate over many seeded draws', () => {
    const random = seededRandom(7);
    const draws = Array.from({ length: 20_000 }, () => nextInterruptionDelayMs(4, random()));
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    expect(mean / 900_000).toBeGreaterThan(0.97);
    expect(mean / 900_000).toBeLessThan(1.03);
  });
});

describe('seededRandom', () => {
  it('repeats the same sequence for the same seed, stays in [0, 1), and differs across seeds', () => {
    const a = seededRandom(1);
    const b = seededRandom(1);
    const c = seededRandom(2);
    const first = Array.from({ length: 100 }, () => a());
    expect(Array.from({ length: 100 }, () => b())).toEqual(first);
    expect(first.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(Array.from({ length: 100 }, () => c())).not.toEqual(first);
  });
});

describe('pascalCaseJob', () => {
  it('renames structural keys to PascalCase and leaves tag and parameter keys alone', () => {
    const detail = {
      jobId: 'x',
      attempts: [{ container: { exitCode: 1, logStreamName: 's' }, statusReason: 'r' }],
      container: { environment: [{ name: 'A', value: '1' }], exitCode: 1 },
      timeout: { attemptDurationSeconds: 60 },
      tags: { 'trainyard:job-id': 'j1', lowerCase: 'v' },
      parameters: { someParam: 'p' },
    };

    expect(pascalCaseJob(detail)).toEqual({
      JobId: 'x',
      Attempts: [{ Container: { ExitCode: 1, LogStreamName: 's' }, StatusReason: 'r' }],
      Container: { Environment: [{ Name: 'A', Value: '1' }], ExitCode: 1 },
      Timeout: { AttemptDurationSeconds: 60 },
      Tags: { 'trainyard:job-id': 'j1', lowerCase: 'v' },
      Parameters: { someParam: 'p' },
    });
  });
});

/** A `trainyard_harness` package whose `__main__` is `source`, standing in for the real harness; returns its folder. */
function standInHarness(name: string, source: string): string {
  const folder = join(dir, `${name}-${++jobCounter}`);
  mkdirSync(join(folder, 'trainyard_harness'), { recursive: true });
  writeFileSync(join(folder, 'trainyard_harness', '__main__.py'), `${source}\n`);
  return folder;
}

/**
 * Whether the process exits within 10 s: gone (signal 0 answers ESRCH), or a zombie, which has exited and only awaits
 * its reaper (the init of some containers reaps late or never).
 */
async function exits(pid: number): Promise<boolean> {
  const deadline = Date.now() + 10_000;
  const exited = () => {
    try {
      process.kill(pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ESRCH') return true;
      throw error;
    }
    return processState(pid) === 'Z';
  };
  while (!exited()) {
    if (Date.now() > deadline) return false;
    await new Promise((done) => setTimeout(done, 50));
  }
  return true;
}

function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

// DEFAULT_TIERS must include the tier these tests submit to.
if (!DEFAULT_TIERS.some((t) => t.id === 'gpu-small')) throw new Error('gpu-small is no longer a default tier');
