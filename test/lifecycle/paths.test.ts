import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { TERMINATE_REASONS } from '../../lambdas/domain/batch-reasons';
import type { AttemptRecord } from '../../lambdas/domain/job';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import type { TierSpotRecord } from '../../lambdas/domain/tier-spot';
import { budgetPeriodOf } from '../../lambdas/domain/watch';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { createExecutionEndedHandler } from '../../lambdas/execution-ended/execution-ended';
import { packTarGz, sha256Hex } from '../../lambdas/shared/tarball';
import { FINALIZE_RETRY, STEP_RETRY } from '../../lib/lifecycle/job-state-machine';
import { lifecycleSteps } from '../../lib/local/control-plane';
import { executionStatusChangeEvent } from '../../lib/local/local-mode';
import { extractMetrics } from '../support/emf';
import { projectFiles } from '../support/projects';
import { jobRecord } from '../support/records';
import {
  ADMIN,
  type AttemptScript,
  type BenchOptions,
  type LifecycleBench,
  RESEARCHER,
  startLifecycleBench,
  teamScope,
} from './bench';

let bench: LifecycleBench | undefined;
afterEach(async () => {
  await bench?.stop();
  bench = undefined;
});

async function start(options: BenchOptions = {}): Promise<LifecycleBench> {
  bench = await startLifecycleBench(options);
  return bench;
}

async function submit(b: LifecycleBench, script: AttemptScript[], body: Record<string, unknown> = {}): Promise<string> {
  const response = await b.submit(body);
  expect(response.status, JSON.stringify(response.body)).toBe(202);
  const jobId = (response.body.job as { jobId: string }).jobId;
  b.batch.scripts.set(jobId, script);
  return jobId;
}

/** Runs a job to its end and returns what the records say. */
async function run(b: LifecycleBench, script: AttemptScript[], body: Record<string, unknown> = {}) {
  const jobId = await submit(b, script, body);
  await b.finish(jobId);
  return outcome(b, jobId);
}

async function outcome(b: LifecycleBench, jobId: string) {
  const execution = b.machine.execution(jobId);
  expect(execution?.error).toBeUndefined();
  return {
    jobId,
    job: await b.plane.jobs.requireJob(jobId),
    attempts: await b.plane.jobs.listAttempts(jobId),
    decisions: await b.plane.jobs.listDecisions(jobId),
    queues: b.batch.submissions.filter((s) => s.Tags?.['trainyard:job-id'] === jobId).map((s) => s.JobQueue),
    events: b.published.filter((e) => JSON.parse(e.Detail).jobId === jobId).map((e) => e.DetailType),
  };
}

/** The `outcome` of each `Job Failed` published for a job. */
function failedOutcomes(b: LifecycleBench, jobId: string): unknown[] {
  return b.published
    .filter((e) => e.DetailType === 'Job Failed')
    .map((e) => JSON.parse(e.Detail) as Record<string, unknown>)
    .filter((d) => d.jobId === jobId)
    .map((d) => d.outcome);
}

/**
 * Micro-dollars of an attempt's metered cost, recomputed here from its recorded times, price and nodes (per second,
 * 60 s minimum), in integers: seconds × micro-dollars an hour × nodes ÷ 3600, rounded half up.
 */
function expectedMicros(attempt: AttemptRecord): number {
  if (attempt.startedAt === undefined || attempt.stoppedAt === undefined) return 0;
  const seconds = Math.max(60, Math.ceil((attempt.stoppedAt - attempt.startedAt) / 1000));
  const microsPerHour = Math.round((attempt.usdPerHour ?? 0) * 1_000_000);
  return Math.floor((2 * seconds * microsPerHour * attempt.nodes + 3600) / 7200);
}

/** What the harness's `shlex.split` makes of TRAINYARD_RESUME_ARGS. */
function pythonSplit(text: string): string[] {
  const script = 'import json, shlex, sys; print(json.dumps(shlex.split(sys.argv[1])))';
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', script, text], { encoding: 'utf8' }));
}

/**
 * The ledger is settled: nothing reserved for the job, spent equals the sum of its attempt costs (each to the
 * micro-dollar), rounded to the cent once. Returns those cents.
 */
async function expectSettled(b: LifecycleBench, jobId: string): Promise<number> {
  const attempts = await b.plane.jobs.listAttempts(jobId);
  const micros = attempts.reduce((sum, a) => sum + expectedMicros(a), 0);
  const cents = Math.floor((micros + 5_000) / 10_000);
  for (const a of attempts) {
    expect(Math.round((a.costUsd ?? 0) * 1_000_000), `attempt ${a.attempt} cost`).toBe(expectedMicros(a));
  }
  const { scope, period } = teamScope();
  const usage = await b.plane.ledger.usage(scope, period);
  expect(usage?.reservedUsd).toBe(0);
  expect(Math.round((usage?.spentUsd ?? 0) * 100)).toBe(cents);
  const job = await b.plane.jobs.requireJob(jobId);
  expect(Math.round(job.costSoFarUsd * 100)).toBe(cents);
  return cents;
}

/** A job on the $1 team budget that six hours on spot exhaust, paused by budget-watch. */
async function pausedJob(options: BenchOptions): Promise<{ b: LifecycleBench; jobId: string }> {
  const b = await start({
    ...options,
    config: {
      teams: [{ id: 'nlp', principals: ['arn:aws:iam::123456789012:role/nlp-researchers'], monthlyBudgetUsd: 0.3 }],
    },
  });
  const jobId = await submit(b, [{ result: 'hold', step: 500 }, { result: 'succeed' }]);
  await b.until('the attempt to run', async () => {
    const attempt = await b.plane.jobs.getAttempt(jobId, 1);
    return attempt?.batchJobId !== undefined && b.batch.isHeld(attempt.batchJobId);
  });
  // 1.9 h at the $0.20/h spot price (the tier runs an attempt 2 h at most): $0.38, past the $0.30 budget.
  b.clock.advance(1.9 * 3600);
  await b.runBudgetWatch();
  await b.until('the pause', async () => {
    const job = await b.plane.jobs.requireJob(jobId);
    return job.state === 'PAUSED_BUDGET' && job.pauseToken !== undefined;
  });
  return { b, jobId };
}

/** Raises the team budget to $20, lets budget-watch resume the paused job and runs it to success after its pause. */
async function raiseAndFinish(b: LifecycleBench, jobId: string) {
  const raised = await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 });
  expect(raised.status, JSON.stringify(raised.body)).toBe(200);
  await b.runBudgetWatch();
  await b.finish(jobId);
  const r = await outcome(b, jobId);
  expect(r.job.state).toBe('SUCCEEDED');
  expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['budget-stopped', 'succeeded']);
  return r;
}

describe('failures the state machine retries', () => {
  it('runs a job whose Batch output has no jobArn or createdAt (optional in the API reference) to SUCCEEDED', async () => {
    // A ResultSelector path the output lacks fails the execution with States.Runtime, which no Catch takes.
    const b = await start();
    const { job, attempts } = await run(b, [{ result: 'succeed', omit: ['JobArn', 'CreatedAt'] }]);
    expect(job.state).toBe('SUCCEEDED');
    expect(attempts.map((a) => a.status)).toEqual(['SUCCEEDED']);
  });

  it('pauses a job whose pause step failed once, under the retry’s token, and resumes it', async () => {
    const { b, jobId } = await pausedJob({ failAfter: { PausedForBudget: [1] } });
    await b.until('the retried pause', async () => b.taskCalls.filter((t) => t === 'PausedForBudget').length === 2);

    expect((await b.plane.jobs.requireJob(jobId)).state).toBe('PAUSED_BUDGET');
    await raiseAndFinish(b, jobId);
    await expectSettled(b, jobId);
  });

  it('ends and settles a job whose Finalize failed more times than the other steps retry', async () => {
    const b = await start({ failAfter: { Finalize: [1, 2, 3, 4, 5] } });
    const r = await run(b, [{ result: 'succeed', seconds: 1800 }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(b.taskCalls.filter((t) => t === 'Finalize')).toHaveLength(6);
    const succeeded = b.published.filter((e) => e.DetailType === 'Job Succeeded').map((e) => JSON.parse(e.Detail));
    expect(new Set(succeeded.map((e) => e.eventId))).toEqual(new Set([`${r.jobId}/succeeded`]));
    await expectSettled(b, r.jobId);
  });

  it('announces the start from AttemptOutcome when Batch’s RUNNING and SUCCEEDED never reached batch-events', async () => {
    const b = await start({ dropBatchEvents: ['RUNNING', 'SUCCEEDED'] });
    const r = await run(b, [{ result: 'succeed', seconds: 1800 }]);

    expect(r.job.state).toBe('SUCCEEDED');
    const [attempt] = r.attempts;
    const started = b.published.filter((e) => e.DetailType === 'Job Started').map((e) => JSON.parse(e.Detail));
    expect(started).toEqual([
      expect.objectContaining({
        eventId: `${r.jobId}/started/1`,
        occurredAt: new Date(attempt?.startedAt ?? 0).toISOString(),
        batchJobId: attempt?.batchJobId,
        usdPerHour: attempt?.usdPerHour,
      }),
    ]);
    await expectSettled(b, r.jobId);
  });

  it('rides out a throttle that outlasts the retries other failures get: the reclaimed job resumes, not FAILED', async () => {
    const throttled = (STEP_RETRY.maxAttempts ?? 0) + 3;
    const b = await start({ throttleBefore: { AttemptOutcome: Array.from({ length: throttled }, (_, i) => i + 1) } });
    const r = await run(b, [{ result: 'reclaim', step: 800, notice: true, seconds: 1200 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed', 'succeeded']);
    expect(b.taskCalls.filter((t) => t === 'AttemptOutcome')).toHaveLength(throttled + 2);
    await expectSettled(b, r.jobId);
  });

  it('rides out DynamoDB out of reach past its client’s retries: the reclaimed job resumes, not FAILED', async () => {
    const unreachable = (STEP_RETRY.maxAttempts ?? 0) + 3;
    const b = await start({
      dynamoUnreachableBefore: { AttemptOutcome: Array.from({ length: unreachable }, (_, i) => i + 1) },
    });
    const r = await run(b, [{ result: 'reclaim', step: 800, notice: true, seconds: 1200 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed', 'succeeded']);
    expect(b.taskCalls.filter((t) => t === 'AttemptOutcome')).toHaveLength(unreachable + 2);
    await expectSettled(b, r.jobId);
  });

  it('ends as SUCCEEDED a job whose training succeeded and whose AttemptOutcome then kept failing', async () => {
    const tries = (STEP_RETRY.maxAttempts ?? 0) + 1;
    const b = await start({ failBefore: { AttemptOutcome: Array.from({ length: tries }, (_, i) => i + 1) } });
    const r = await run(b, [{ result: 'succeed', seconds: 1200 }]);

    expect(b.taskCalls.filter((t) => t === 'AttemptOutcome')).toHaveLength(tries);
    expect(b.machine.execution(r.jobId)?.status).toBe('SUCCEEDED');
    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.job.reason).toMatch(/^the attempt succeeded; .*failed before its work/);
    expect(b.published.filter((e) => e.DetailType === 'Job Succeeded')).toHaveLength(1);
    expect(await expectSettled(b, r.jobId)).toBeGreaterThan(0);
  });

  it('announces the resume that a throttled PutEvents interrupted, when PrepareAttempt is retried', async () => {
    const b = await start({ throttleOnce: ['Job Resumed'] });
    const r = await run(b, [{ result: 'reclaim', step: 800, notice: true, seconds: 1200 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    const resumed = b.published.filter((e) => e.DetailType === 'Job Resumed').map((e) => JSON.parse(e.Detail));
    expect(resumed).toEqual([
      expect.objectContaining({
        eventId: `${r.jobId}/resumed/2`,
        attempt: 2,
        checkpointUri: expect.stringMatching(/checkpoints\/ckpt-000001\/$/),
      }),
    ]);
    expect(b.taskCalls.filter((t) => t === 'PrepareAttempt')).toHaveLength(3);
  });
});

describe('executions that end without Finalize (the execution-ended rule)', () => {
  /** Submits a job whose first attempt runs until TerminateJob, and waits until it runs. */
  async function heldJob(b: LifecycleBench): Promise<{ jobId: string; batchJobId: string }> {
    const jobId = await submit(b, [{ result: 'hold', step: 300 }]);
    let batchJobId = '';
    await b.until('the attempt to run', async () => {
      const attempt = await b.plane.jobs.getAttempt(jobId, 1);
      batchJobId = attempt?.batchJobId ?? '';
      return attempt?.startedAt !== undefined && b.batch.isHeld(batchJobId);
    });
    return { jobId, batchJobId };
  }

  const ended = (name: string, status: 'FAILED' | 'ABORTED', at: number) =>
    executionStatusChangeEvent({ name, status, startDate: at, stopDate: at }, at);

  it('stops the running attempt of a stopped execution, bills it, fails the job and settles the ledger', async () => {
    const b = await start();
    const { jobId, batchJobId } = await heldJob(b);
    b.clock.advance(1800);

    expect(await b.machine.stopExecution(jobId, { error: 'Operator', cause: 'stopped from the console' })).toBe(true);
    await b.finish(jobId);

    expect(b.machine.execution(jobId)?.status).toBe('ABORTED');
    expect(b.executionsEnded).toEqual([
      { action: 'finalized', jobId, state: 'FAILED', costUsd: expect.any(Number), terminated: [batchJobId] },
    ]);
    expect(b.batch.terminations).toEqual([{ batchJobId, reason: TERMINATE_REASONS.jobEnded }]);
    const job = await b.plane.jobs.requireJob(jobId);
    expect(job.reason).toBe(
      'its lifecycle execution was stopped before the job was finalized: Operator — stopped from the console',
    );
    const [attempt] = await b.plane.jobs.listAttempts(jobId);
    expect(attempt?.outcome?.kind).toBe('infra-error');
    expect(attempt?.stoppedAt).toBeGreaterThan(attempt?.startedAt ?? Number.POSITIVE_INFINITY);
    const cents = await expectSettled(b, jobId);
    expect(cents).toBeGreaterThan(0);
    const failed = b.published.filter((e) => e.DetailType === 'Job Failed').map((e) => JSON.parse(e.Detail));
    expect(failed).toEqual([expect.objectContaining({ jobId, outcome: 'infra-error', attempts: 1 })]);

    // A redelivered event finds the job ended: no second TerminateJob, the same state and figures.
    const again = await b.executionEnded(ended(jobId, 'ABORTED', b.clock.ms));
    expect(again).toEqual({ action: 'finalized', jobId, state: 'FAILED', costUsd: job.costSoFarUsd, terminated: [] });
    expect(b.batch.terminations).toHaveLength(1);
    expect(await expectSettled(b, jobId)).toBe(cents);
    expect((await b.plane.jobs.requireJob(jobId)).reason).toBe(job.reason);
  });

  it('ends CANCELLED a job cancelled while the ended execution waited for its attempt to stop', async () => {
    const b = await start();
    const { jobId, batchJobId } = await heldJob(b);
    b.clock.advance(1800);
    // The user's DELETE (202) lands while execution-ended waits for the attempt it has just sent TerminateJob.
    const terminate = b.batch.terminateJob.bind(b.batch);
    b.batch.terminateJob = async (id, reason) => {
      await b.plane.jobs.patchJob(jobId, { cancelRequested: true });
      await terminate(id, reason);
    };

    expect(await b.machine.stopExecution(jobId, { error: 'Operator', cause: 'stopped from the console' })).toBe(true);
    await b.finish(jobId);

    expect(b.executionsEnded).toEqual([
      { action: 'finalized', jobId, state: 'CANCELLED', costUsd: expect.any(Number), terminated: [batchJobId] },
    ]);
    expect((await b.plane.jobs.requireJob(jobId)).state).toBe('CANCELLED');
    await expectSettled(b, jobId);
  });

  it('finalizes as SUCCEEDED a job whose training succeeded but whose Finalize kept failing', async () => {
    const tries = (FINALIZE_RETRY.maxAttempts ?? 0) + 1;
    const b = await start({ failBefore: { Finalize: Array.from({ length: tries }, (_, i) => i + 1) } });
    const jobId = await submit(b, [{ result: 'succeed', seconds: 1200 }]);
    await b.finish(jobId);

    expect(b.machine.execution(jobId)?.status).toBe('FAILED');
    expect(b.taskCalls.filter((t) => t === 'Finalize')).toHaveLength(tries);
    expect(b.executionsEnded).toEqual([
      { action: 'finalized', jobId, state: 'SUCCEEDED', costUsd: expect.any(Number), terminated: [] },
    ]);
    const job = await b.plane.jobs.requireJob(jobId);
    expect(job.state).toBe('SUCCEEDED');
    expect(job.reason).toMatch(/^the attempt succeeded; its lifecycle execution failed before the job was finalized: /);
    expect(b.published.filter((e) => e.DetailType === 'Job Succeeded')).toHaveLength(1);
    expect(await expectSettled(b, jobId)).toBeGreaterThan(0);
  });

  it('bills an attempt whose Batch job Batch no longer reports up to the last sign of it running, not $0', async () => {
    const b = await start();
    const { jobId, batchJobId } = await heldJob(b);
    const startedAt = (await b.plane.jobs.getAttempt(jobId, 1))?.startedAt;
    b.clock.advance(2 * 3600);
    await b.writeCheckpoint(jobId, 1, 900); // the harness's last progress report, 2 h after the start
    const lastReport = b.clock.ms;
    // Its end never reached Trainyard, and 8 days later Batch has forgotten the job.
    b.clock.advance(8 * 24 * 3600);
    b.batch.forget(batchJobId);

    await b.machine.stopExecution(jobId);
    await b.finish(jobId);

    expect(b.batch.terminations).toEqual([]);
    const [attempt] = await b.plane.jobs.listAttempts(jobId);
    expect(attempt).toMatchObject({
      batchJobId,
      startedAt,
      stoppedAt: lastReport,
      usdPerHour: 0.2,
      status: 'FAILED',
      endUnseen: true,
    });
    expect(attempt?.outcome).toEqual({
      kind: 'infra-error',
      resumable: true,
      reason: `Batch no longer reports its job ${batchJobId} (it keeps an ended job for about 7 days), so when and how the attempt ended is unknown; billed from its start to the last sign of it running, the harness's last progress report at ${new Date(lastReport).toISOString()}`,
    });
    // 2 h at the $0.20/h spot price its instance started at = $0.40, charged to the team, nothing left reserved.
    expect(attempt?.costUsd).toBe(0.4);
    expect(await expectSettled(b, jobId)).toBe(40);
  });

  it('records an attempt that never reached Batch as ended at no cost, and releases the reservation', async () => {
    const b = await start();
    const jobId = await submit(b, [{ result: 'unsubmitted' }]);
    // Each poll reads the table, so the wait spans real time (a synchronous check would spin through it at once).
    await b.until('the attempt to be handed to Batch', async () => {
      const attempt = await b.plane.jobs.getAttempt(jobId, 1);
      return attempt !== undefined && b.batch.submissions.length === 1;
    });
    const { scope, period } = teamScope();
    expect((await b.plane.ledger.usage(scope, period))?.reservedUsd).toBeGreaterThan(0);

    await b.machine.stopExecution(jobId);
    await b.finish(jobId);

    expect(b.executionsEnded).toEqual([{ action: 'finalized', jobId, state: 'FAILED', costUsd: 0, terminated: [] }]);
    const [attempt] = await b.plane.jobs.listAttempts(jobId);
    expect(attempt).toMatchObject({ costUsd: 0, status: 'FAILED' });
    expect(attempt?.outcome).toMatchObject({
      kind: 'infra-error',
      reason: expect.stringContaining('before it reached Batch'),
    });
    expect((await b.plane.jobs.requireJob(jobId)).reason).toBe(
      'its lifecycle execution was stopped before the job was finalized',
    );
    expect(await expectSettled(b, jobId)).toBe(0);
  });

  it('leaves the job live and the reservation held while the attempt has not stopped, for Lambda to retry', async () => {
    const b = await start();
    const { jobId, batchJobId } = await heldJob(b);
    const terminated: string[] = [];
    const running = await b.batch.lookupJob({ batchJobId, queue: 'unused', jobName: 'unused' });
    const stuck = createExecutionEndedHandler(
      {
        ...b.plane,
        batch: {
          terminateJob: async (id) => void terminated.push(id),
          lookupJob: async () => running,
        },
      },
      { waitMs: 30_000, pollMs: 10_000, sleep: async () => undefined },
    );

    await expect(stuck(ended(jobId, 'ABORTED', b.clock.ms))).rejects.toThrow(
      new RegExp(
        `^job ${jobId}: attempts whose end is not recorded after 30 s: ${batchJobId} \\(attempt 1, RUNNING\\);`,
      ),
    );
    expect(terminated).toEqual([batchJobId]);
    const job = await b.plane.jobs.requireJob(jobId);
    expect(job.state).toBe('RUNNING');
    const { scope, period } = teamScope();
    expect((await b.plane.ledger.usage(scope, period))?.reservedUsd).toBeGreaterThan(0);

    await b.machine.stopExecution(jobId);
    await b.finish(jobId);
    await expectSettled(b, jobId);
  });

  it('does not take a running attempt DescribeJobs misses for forgotten: it is looked up again, billed as Batch reports it', async () => {
    const b = await start();
    const { jobId, batchJobId } = await heldJob(b);
    b.clock.advance(3600);
    await b.writeCheckpoint(jobId, 1, 600); // a progress report a moment ago: Batch cannot have forgotten the job
    const lagging = createExecutionEndedHandler(
      { ...b.plane, batch: { terminateJob: b.batch.terminateJob.bind(b.batch), lookupJob: async () => undefined } },
      { waitMs: 30_000, pollMs: 10_000, sleep: async () => undefined },
    );

    await expect(lagging(ended(jobId, 'ABORTED', b.clock.ms))).rejects.toThrow(
      `job ${jobId}: attempts whose end is not recorded after 30 s: attempt 1 (Batch job ${batchJobId} not reported yet; looked up again);`,
    );
    const attempt = await b.plane.jobs.getAttempt(jobId, 1);
    expect([attempt?.stoppedAt, attempt?.outcome, b.batch.terminations]).toEqual([undefined, undefined, []]);
    expect((await b.plane.jobs.requireJob(jobId)).state).toBe('RUNNING');

    // The event's retry finds the job in Batch: it is stopped and billed as Batch reports its end.
    await b.machine.stopExecution(jobId);
    await b.finish(jobId);
    expect(b.batch.terminations.map((t) => t.batchJobId)).toEqual([batchJobId]);
    const [recorded] = await b.plane.jobs.listAttempts(jobId);
    expect(recorded?.outcome?.reason).not.toMatch(/no longer reports/);
    expect(recorded?.costUsd).toBe(0.2); // 1 h at the $0.20/h spot price its instance started at
    expect(await expectSettled(b, jobId)).toBe(20);
  });

  it('ignores executions that succeeded, are not named by a job id, or name no job', async () => {
    const b = await start();
    const at = b.clock.ms;
    const succeeded = ended('01JDA7Q6ZK3V8N2M4P5R6S7T8W', 'FAILED', at);
    succeeded.detail.status = 'SUCCEEDED' as never;
    expect(await b.executionEnded(succeeded)).toEqual({ action: 'ignored', why: 'not-ended' });
    expect(await b.executionEnded(ended('not a job id!', 'FAILED', at))).toEqual({
      action: 'ignored',
      why: 'not-a-job',
    });
    expect(await b.executionEnded(ended('01JDA7Q6ZK3V8N2M4P5R6S7T8W', 'ABORTED', at))).toEqual({
      action: 'ignored',
      why: 'unknown-job',
    });
    await expect(b.executionEnded({ ...succeeded, source: 'aws.batch' })).rejects.toThrow(
      'invalid "Step Functions Execution Status Change" event: source: must be "aws.states"',
    );
  });
});

describe('an attempt whose task failed while Batch ran it (SubmitJob answered 5xx after creating the job)', () => {
  it.each([
    ['', 0],
    [', though its first 4 lookups fail (more than the other errors are retried)', 4],
  ])(
    'stops it, waits for Batch to end it, bills it and resumes in a new attempt: never two at once%s',
    async (_, failLookups) => {
      const b = await start();
      b.batch.failLookups = failLookups;
      const r = await run(b, [{ result: 'lost', step: 300 }, { result: 'succeed' }]);

      expect(r.job.state, r.job.reason).toBe('SUCCEEDED');
      const [lost, next] = r.attempts;
      expect(lost).toMatchObject({ status: 'FAILED', outcome: { kind: 'infra-error', resumable: true } });
      expect(lost?.outcome?.reason).toContain('its submission seemed to fail');
      // Its real run, from Batch's times: stopped 120 s (the harness's final checkpoint) after TerminateJob.
      expect((lost?.stoppedAt ?? 0) - (lost?.startedAt ?? 0)).toBe(120_000);
      expect(lost?.costUsd).toBeGreaterThan(0);
      const stops = b.batch.terminations.filter((t) => t.batchJobId === lost?.batchJobId);
      expect(stops.length).toBeGreaterThanOrEqual(1);
      expect(new Set(stops.map((t) => t.reason))).toEqual(new Set([TERMINATE_REASONS.orphaned]));
      // AttemptOutcome ran again until Batch reported the job ended, and only then was the next attempt submitted.
      expect(b.taskCalls.filter((n) => n === 'AttemptOutcome').length).toBeGreaterThanOrEqual(3);
      expect(next?.submittedAt).toBeGreaterThanOrEqual(lost?.stoppedAt ?? Number.POSITIVE_INFINITY);
      // From the checkpoint the lost attempt saved.
      expect(b.batch.submissions[1]?.ContainerOverrides?.Environment).toContainEqual({
        Name: 'TRAINYARD_RESUME_ARGS',
        Value: '--init_from=resume',
      });
      expect(await expectSettled(b, r.jobId)).toBeGreaterThan(Math.round((lost?.costUsd ?? 0) * 100));
    },
  );

  it('keeps the reservation when AttemptOutcome keeps failing: Finalize stops the attempt, waits, then settles its whole cost', async () => {
    const tries = (STEP_RETRY.maxAttempts ?? 0) + 1;
    const b = await start({ failBefore: { AttemptOutcome: Array.from({ length: tries }, (_, i) => i + 1) } });
    const r = await run(b, [{ result: 'lost', step: 300 }]);

    expect(b.taskCalls.filter((n) => n === 'AttemptOutcome')).toHaveLength(tries);
    expect(r.job.state).toBe('FAILED');
    const [lost] = r.attempts;
    // Batch ended it 120 s after Finalize's TerminateJob (the harness's final checkpoint), and Finalize recorded it.
    expect(b.batch.terminations).toEqual([{ batchJobId: lost?.batchJobId, reason: TERMINATE_REASONS.jobEnded }]);
    expect((lost?.stoppedAt ?? 0) - (lost?.startedAt ?? 0)).toBe(120_000);
    expect(lost?.costUsd).toBeGreaterThan(0);
    // The first Finalize found it still running and ran again; only then was anything settled.
    expect(b.taskCalls.filter((n) => n === 'Finalize').length).toBeGreaterThanOrEqual(2);
    const cents = await expectSettled(b, r.jobId);
    expect(cents).toBe(Math.round((lost?.costUsd ?? 0) * 100));
    // The settlement is the first one's figure whatever a replay passes: it counted the attempt's whole run, where
    // settling before the attempt ended released the reservation and left its cost to a late charge.
    expect((await b.plane.ledger.settle(r.jobId, 0)).actualUsd).toBe(cents / 100);
  });

  it.each([
    ['Batch does not list it yet', 0],
    ['Batch cannot be asked (every lookup throttled)', 1000],
  ])('records it as not run when %s, and batch-events stops it when its events come', async (_, failLookups) => {
    const b = await start();
    b.batch.failLookups = failLookups;
    const jobId = await submit(b, [{ result: 'lost-late' }, { result: 'hold' }]);
    await b.until('the orphan to be stopped and the next attempt to run', async () => {
      const next = await b.plane.jobs.getAttempt(jobId, 2);
      return b.batch.terminations.length === 1 && next?.batchJobId !== undefined && b.batch.isHeld(next.batchJobId);
    });

    b.batch.failLookups = 0;
    const [lost, next] = await b.plane.jobs.listAttempts(jobId);
    expect(lost).toMatchObject({ status: 'FAILED', costUsd: 0, outcome: { kind: 'infra-error' } });
    expect(lost?.outcome?.reason).toContain('the attempt did not run: Batch.ServerException');
    expect(lost?.batchJobId).toBeUndefined();
    const [orphan] = b.batch.terminations;
    expect(orphan).toEqual({ batchJobId: expect.any(String), reason: TERMINATE_REASONS.orphaned });
    expect(orphan?.batchJobId).not.toBe(next?.batchJobId);
    await b.until('Batch to end the orphan', async () => {
      await b.plane.jobs.getAttempt(jobId, 1);
      return (await b.batch.lookupJob({ batchJobId: orphan?.batchJobId, queue: '', jobName: '' }))?.status === 'FAILED';
    });
    // Its end records nothing: attempt 1 is as AttemptOutcome left it.
    expect(await b.plane.jobs.getAttempt(jobId, 1)).toEqual(lost);

    expect((await b.call('DELETE', `/jobs/${jobId}`)).status).toBe(202);
    await b.finish(jobId);
    expect((await b.plane.jobs.requireJob(jobId)).state).toBe('CANCELLED');
    await expectSettled(b, jobId);
  });
});

describe('job lifecycle on the synthesized state machine', () => {
  it('runs a job to success on spot, settles the ledger, and takes at most 30 state transitions', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'succeed', seconds: 1800 }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.queues).toEqual(['trainyard-gpu-small-spot']);
    // 1800 s at the $0.20/h spot price the instance started at = $0.10.
    expect(r.attempts.map((a) => a.costUsd)).toEqual([0.1]);
    expect(await expectSettled(b, r.jobId)).toBe(10);
    expect(r.events).toEqual(['Job Submitted', 'Job Started', 'Job Succeeded']);
    const transitions = b.machine.execution(r.jobId)?.events.filter((e) => e.type === 'StateEntered') ?? [];
    expect(transitions.map((e) => e.state?.name)).toEqual([
      'Analyze',
      'AfterAnalyze',
      'CostGate',
      'AfterCostGate',
      'PrepareAttempt',
      'AfterPrepare',
      'RunAttempt',
      'AttemptOutcome',
      'NextStep',
      'Finalize',
      'Done',
    ]);
    expect(transitions.length).toBeLessThanOrEqual(30);
  });

  it('refuses a job whose reservation exceeds the team budget, with the budget’s numbers, and runs nothing', async () => {
    const b = await start({ config: { teams: [{ id: 'nlp', principals: [RESEARCHER], monthlyBudgetUsd: 0.05 }] } });
    // Ten hours on gpu-small reserves about $5.26 on-demand, far beyond $0.05.
    const r = await run(b, [], { requirements: { runtimeSeconds: 36_000 } });

    expect(r.job.state).toBe('REJECTED');
    expect(r.job.reason).toMatch(
      /^refused by the cost gate: team:nlp would exceed its budget: limit \$0\.05, spent \$0\.00, reserved \$0\.00, requested \$\d+\.\d\d, available \$0\.05$/,
    );
    expect(r.attempts).toEqual([]);
    expect(r.queues).toEqual([]);
    // Never announced as submitted: it did not pass the cost gate.
    expect(r.events).toEqual(['Job Failed']);
    const { scope, period } = teamScope();
    expect(await b.plane.ledger.usage(scope, period)).toMatchObject({ spentUsd: 0, reservedUsd: 0 });
  });

  it('resumes on spot from the newest checkpoint after a reclaim, then succeeds', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'reclaim', step: 800, notice: true, seconds: 1200 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.queues).toEqual(['trainyard-gpu-small-spot', 'trainyard-gpu-small-spot']);
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed', 'succeeded']);
    const second = b.batch.submissions[1]?.ContainerOverrides?.Environment ?? [];
    expect(second).toContainEqual({ Name: 'TRAINYARD_RESUME_ARGS', Value: '--init_from=resume' });
    const first = b.batch.submissions[0]?.ContainerOverrides?.Environment ?? [];
    expect(first).toContainEqual({ Name: 'TRAINYARD_RESUME_ARGS', Value: '' });
    const resumed = b.published.find((e) => e.DetailType === 'Job Resumed');
    expect(JSON.parse(resumed?.Detail ?? '{}')).toMatchObject({
      attempt: 2,
      checkpointUri: expect.stringMatching(/checkpoints\/ckpt-000001\/$/),
    });
    expect(r.events).toContain('Job Interrupted');
    expect(b.batch.terminations.map((t) => t.reason)).toEqual(['Trainyard: spot interruption notice']);
    await expectSettled(b, r.jobId);
  });

  it('counts as a reclaim a stop after a spot notice only the harness saw (it came before the instance was known)', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'unrecorded-notice', step: 800, seconds: 1200 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed', 'succeeded']);
    expect(r.attempts[0]?.outcome?.reason).toContain('read from the instance metadata');
    expect(r.attempts[0]?.noticeAt).toBeUndefined();
    expect(r.job.counters.reclaims).toBe(1);
    const interrupted = b.published.filter((e) => e.DetailType === 'Job Interrupted').map((e) => JSON.parse(e.Detail));
    expect(interrupted).toEqual([expect.objectContaining({ attempt: 1, cause: 'reclaimed' })]);
    await expectSettled(b, r.jobId);
  });

  it('tells the harness the total steps the request gave, which its progress counts up to', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'succeed' }], { requirements: { totalSteps: 3000 } });

    expect(r.job.state).toBe('SUCCEEDED');
    const environment = b.batch.submissions[0]?.ContainerOverrides?.Environment ?? [];
    expect(environment).toContainEqual({ Name: 'TRAINYARD_TOTAL_STEPS', Value: '3000' });
    await expectSettled(b, r.jobId);
  });

  it('hands the harness resume arguments with quotes and spaces word for word', async () => {
    const b = await start();
    const resumeArgs = ['--init_from=resume', "--note=it's resumed", '--glob=*.pt'];
    const r = await run(b, [{ result: 'reclaim', step: 800, seconds: 1200 }, { result: 'succeed' }], { resumeArgs });

    expect(r.job.state).toBe('SUCCEEDED');
    const env = b.batch.submissions[1]?.ContainerOverrides?.Environment ?? [];
    const passed = env.find((e) => e.Name === 'TRAINYARD_RESUME_ARGS')?.Value ?? '';
    expect(pythonSplit(passed)).toEqual(resumeArgs);
  });

  it('hands the harness the job’s checkpoint done file on every attempt, and none to a job without one', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'reclaim', step: 800, seconds: 1200 }, { result: 'succeed' }], {
      checkpointDoneFile: 'step/SAVED',
    });
    await run(b, [{ result: 'succeed', seconds: 60 }]);

    expect(r.job.state).toBe('SUCCEEDED');
    const doneFiles = b.batch.submissions.map(
      (s) => s.ContainerOverrides?.Environment?.find((e) => e.Name === 'TRAINYARD_CHECKPOINT_DONE_FILE')?.Value,
    );
    expect(doneFiles).toEqual(['step/SAVED', 'step/SAVED', undefined]);
  });

  it('hands the harness the sha256 of the bundle as submitted on every attempt, to run that bundle only', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'reclaim', step: 800, seconds: 1200 }, { result: 'succeed' }]);

    const stored = await b.plane.workspace.get(r.job.bundle.key);
    const digest = createHash('sha256')
      .update(stored ?? Buffer.alloc(0))
      .digest('hex');
    expect(r.job.bundle.sha256).toBe(digest);
    const handed = b.batch.submissions.map(
      (s) => s.ContainerOverrides?.Environment?.find((e) => e.Name === 'TRAINYARD_CODE_SHA256')?.Value,
    );
    expect(handed).toEqual([digest, digest]);
  });

  it.each([
    ['gpu-small', 'EC2, 110 s before SIGKILL', '60'],
    ['cpu-small', 'Fargate, 30 s before SIGKILL', '15'],
  ])('gives the training process on %s (%s) a stop grace of %s s', async (tier, _where, grace) => {
    const b = await start();
    await run(b, [{ result: 'succeed', seconds: 60 }], { requirements: { tier } });

    expect(b.batch.submissions[0]?.ContainerOverrides?.Environment).toContainEqual({
      Name: 'TRAINYARD_STOP_GRACE_SECONDS',
      Value: grace,
    });
  });

  it('runs a multi-node job with the same command and environment on every node, and charges every node', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'succeed', seconds: 1800 }], { requirements: { tier: 'gpu-multinode' } });

    expect(r.job.state).toBe('SUCCEEDED');
    const [submitted] = b.batch.submissions;
    expect(submitted?.JobDefinition).toBe('trainyard-nlp-gpu-multinode');
    expect(submitted?.ContainerOverrides).toBeUndefined();
    expect(submitted?.NodeOverrides?.NodePropertyOverrides).toEqual([
      {
        TargetNodes: '0:',
        ContainerOverrides: {
          Command: ['python', 'train.py', 'config/train_small.py', '--n_layer=6', '--max_iters=2000'],
          Environment: expect.arrayContaining([{ Name: 'TRAINYARD_JOB_ID', Value: r.jobId }]),
        },
      },
    ]);
    expect(r.attempts.map((a) => [a.capacity, a.nodes])).toEqual([['on-demand', 2]]);
    expect(await expectSettled(b, r.jobId)).toBeGreaterThan(0);
  });

  it('bounds the job, not each attempt, by the tier’s maximum runtime: each attempt gets what the earlier ones left', async () => {
    const b = await start();
    const r = await run(b, [
      { result: 'reclaim', step: 300, seconds: 4000 },
      { result: 'reclaim', step: 600, seconds: 3200 },
    ]);

    const [first, second] = r.attempts;
    expect(((first?.stoppedAt ?? 0) - (first?.startedAt ?? 0)) / 1000).toBe(4000);
    expect(b.batch.submissions.map((s) => s.Timeout?.AttemptDurationSeconds)).toEqual([7200, 3200]);
    expect(second?.outcome?.kind).toBe('reclaimed');
    expect(r.attempts).toHaveLength(2);
    expect(r.job.state).toBe('FAILED');
    expect(r.job.reason).toBe("the job ran its tier's maximum runtime (7200 s on gpu-small) over 2 attempt(s)");
    await expectSettled(b, r.jobId);
  });

  it('falls back to on-demand after two reclaims', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'reclaim', step: 300 }, { result: 'reclaim', step: 600 }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.queues).toEqual(['trainyard-gpu-small-spot', 'trainyard-gpu-small-spot', 'trainyard-gpu-small-on-demand']);
    expect(r.events).toContain('Job FellBackToOnDemand');
    expect(r.job.counters).toMatchObject({ attempts: 3, reclaims: 2 });
    expect(r.decisions.at(-2)?.decision).toBe('run-attempt on-demand (resume)');
    await expectSettled(b, r.jobId);
  });

  it('moves to on-demand when the spot queue cancels the attempt for lack of capacity', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'capacity' }, { result: 'succeed' }]);

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.queues).toEqual(['trainyard-gpu-small-spot', 'trainyard-gpu-small-on-demand']);
    expect(r.attempts.map((a) => [a.outcome?.kind, a.costUsd])).toEqual([
      ['capacity-starved', 0],
      ['succeeded', expect.any(Number)],
    ]);
    await expectSettled(b, r.jobId);
  });

  it('fails a job whose command exits non-zero when it asked for no retries, with the reason', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'app-error', seconds: 300 }]);

    expect(r.job.state).toBe('FAILED');
    expect(r.job.reason).toContain('exit code 1');
    expect(r.attempts).toHaveLength(1);
    const failed = b.published.find((e) => e.DetailType === 'Job Failed');
    expect(JSON.parse(failed?.Detail ?? '{}')).toMatchObject({ outcome: 'app-error', exitCode: 1 });
    await expectSettled(b, r.jobId);
  });

  it('retries an application error after a backoff when the job asked for retries, then succeeds', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'app-error', seconds: 300 }, { result: 'succeed' }], {
      retries: { maxAppRetries: 2, backoffSeconds: 30 },
    });

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.decisions.find((d) => d.seq === 101)?.decision).toBe('run-attempt spot after 30 s (resume)');
    const states = b.machine
      .execution(r.jobId)
      ?.events.filter((e) => e.type === 'StateEntered')
      .map((e) => e.state?.name);
    expect(states).toContain('Backoff');
    expect(r.job.counters).toMatchObject({ appErrors: 1, reclaims: 0 });
    // The failed attempt is announced as an interruption the job goes on from, as of when it stopped, then the retry.
    const interrupted = b.published.filter((e) => e.DetailType === 'Job Interrupted').map((e) => JSON.parse(e.Detail));
    expect(interrupted).toEqual([
      expect.objectContaining({
        eventId: `${r.jobId}/interrupted/1`,
        cause: 'app-error',
        occurredAt: new Date(r.attempts[0]?.stoppedAt ?? 0).toISOString(),
      }),
    ]);
    expect(r.events.indexOf('Job Interrupted')).toBeLessThan(r.events.indexOf('Job Resumed'));
    await expectSettled(b, r.jobId);
  });

  it('waits out the backoff as the Backoff Task timing out after the delay, then starts the retry', async () => {
    // Nothing sends the Backoff's token: only its timeout (TimeoutSecondsPath, the plan's delay) moves the job on.
    const b = await start({ realBackoff: true });
    const r = await run(b, [{ result: 'app-error', seconds: 300 }, { result: 'succeed' }], {
      retries: { maxAppRetries: 2, backoffSeconds: 1 },
    });

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['app-error', 'succeeded']);
    const events = b.machine.execution(r.jobId)?.events ?? [];
    const at = (type: string) => events.find((e) => e.type === type && e.state?.name === 'Backoff')?.timestamp;
    const [entered, left] = [at('StateEntered'), at('StateExited')];
    expect(entered).toBeDefined();
    expect((left ?? 0) - (entered ?? 0)).toBeGreaterThanOrEqual(1000);
    expect(b.taskCalls.filter((t) => t === 'Backoff')).toHaveLength(1);
    // The spent token is gone from the job.
    expect(r.job.pauseToken).toBeUndefined();
    await expectSettled(b, r.jobId);
  });

  /** A job whose first attempt failed, waiting out a one-hour backoff before its retry. */
  async function waitingOutAnHoursBackoff(): Promise<{ b: LifecycleBench; jobId: string }> {
    const b = await start({ realBackoff: true });
    const jobId = await submit(b, [{ result: 'app-error', seconds: 300 }, { result: 'succeed' }], {
      retries: { maxAppRetries: 2, backoffSeconds: 3600 },
    });
    await b.until('the job to wait out its backoff', async () => {
      return (await b.plane.jobs.requireJob(jobId)).pauseToken !== undefined;
    });
    return { b, jobId };
  }

  it('ends CANCELLED at once a job cancelled while it waits out a retry’s backoff, not when the wait is over', async () => {
    const { b, jobId } = await waitingOutAnHoursBackoff();

    const response = await b.call('DELETE', `/jobs/${jobId}`);
    expect(response.status).toBe(202);
    expect(response.body).toMatchObject({ terminatedBatchJob: false, releasedPause: true });
    // An hour's wait would outlast the test: the cancel ended it.
    await b.finish(jobId);

    const r = await outcome(b, jobId);
    expect(r.job.state).toBe('CANCELLED');
    expect(r.attempts.map((a) => a.attempt)).toEqual([1]);
    expect(b.batch.submissions).toHaveLength(1);
    expect(r.job.pauseToken).toBeUndefined();
    await expectSettled(b, jobId);
  });

  it('leaves a job waiting out an hour’s backoff where it is when local mode stops, its wait ended at once', async () => {
    const { b, jobId } = await waitingOutAnHoursBackoff();
    const before = await b.plane.jobs.requireJob(jobId);

    b.machine.abandon();
    // Ends at once, not in an hour: its token wait ended unsent, which ends the Task and clears the engine's timer.
    const execution = await b.machine.waitFor(jobId);

    expect(execution.status).toBe('ABORTED');
    // No end reported: the job stays as it was, for the next start of local mode to finalize.
    expect(b.executionsEnded).toEqual([]);
    expect(await b.plane.jobs.requireJob(jobId)).toEqual(before);
  });

  it('cancels a running job: TerminateJob with the cancel reason, CANCELLED, ledger settled', async () => {
    const b = await start();
    const jobId = await submit(b, [{ result: 'hold' }]);
    await b.until('the attempt to run', async () => {
      const attempt = await b.plane.jobs.getAttempt(jobId, 1);
      return attempt?.batchJobId !== undefined && b.batch.isHeld(attempt.batchJobId);
    });
    b.clock.advance(600);

    const response = await b.call('DELETE', `/jobs/${jobId}`);
    expect(response.status).toBe(202);
    await b.finish(jobId);
    const r = await outcome(b, jobId);

    expect(r.job.state).toBe('CANCELLED');
    expect(b.batch.terminations.map((t) => t.reason)).toEqual(['Trainyard: cancelled by user']);
    expect(r.events).toContain('Job Cancelled');
    await expectSettled(b, jobId);
  });

  it('cancels a job whose execution never started (StartExecution failed and the submission was not retried)', async () => {
    const b = await start();
    const startExecution = b.machine.startExecution.bind(b.machine);
    let failures = 1;
    b.machine.startExecution = async (name, input) => {
      if (failures-- > 0) throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
      return startExecution(name, input);
    };
    expect((await b.submit({})).status).toBe(500);
    const { jobs } = (await b.call('GET', '/jobs')).body as { jobs: { jobId: string; state: string }[] };
    expect(jobs.map((j) => j.state)).toEqual(['SUBMITTED']);
    const jobId = jobs[0]?.jobId as string;
    expect(b.machine.execution(jobId)).toBeUndefined();

    expect((await b.call('DELETE', `/jobs/${jobId}`)).status).toBe(202);
    await b.finish(jobId);
    const r = await outcome(b, jobId);

    expect([r.job.state, r.job.reason]).toEqual(['CANCELLED', 'cancelled before it ran']);
    expect(r.attempts).toEqual([]);
    expect(r.events).toEqual(['Job Cancelled']);
    // Nothing was reserved: the team's budget for the month was never even needed.
    const { scope, period } = teamScope();
    expect(await b.plane.ledger.usage(scope, period)).toBeUndefined();
  });

  it('ends a deadline job whose on-demand attempt is still queued when the deadline passes', async () => {
    const b = await start();
    // No on-demand capacity comes (a quota, a shortage), and the on-demand queue never gives up on its own.
    const jobId = await submit(b, [{ result: 'queued' }], {
      requirements: { runtimeSeconds: 3000, deadlineSeconds: 3300 },
    });
    await b.until('the attempt to be queued', async () => {
      const attempt = await b.plane.jobs.getAttempt(jobId, 1);
      return attempt?.batchJobId !== undefined && b.batch.isHeld(attempt.batchJobId);
    });
    expect(b.batch.submissions.map((s) => s.JobQueue)).toEqual(['trainyard-gpu-small-on-demand']);
    for (let minute = 5; minute < 55; minute += 5) {
      b.clock.advance(300);
      await b.runBudgetWatch();
    }
    expect(b.batch.terminations).toEqual([]);

    b.clock.advance(300); // 55 minutes: the deadline has passed
    await b.runBudgetWatch();
    await b.runBudgetWatch(); // a second tick (or a replayed one) does not stop it again
    expect(b.batch.terminations.map((t) => t.reason)).toEqual(['Trainyard: deadline reached']);
    await b.finish(jobId);
    const r = await outcome(b, jobId);

    expect(r.job.state).toBe('FAILED');
    expect(r.attempts.map((a) => [a.capacity, a.outcome?.kind])).toEqual([['on-demand', 'timed-out']]);
    expect(r.decisions.map((d) => d.decision)).toContain('stop-attempt 1 deadline');
    await expectSettled(b, jobId);
  });

  /**
   * A bench on a $1 team budget that an admin lowers below what the job holds just before PrepareAttempt's call
   * `prepareCall`; submits the scripted job and waits for its pause.
   */
  async function pausedBeforePrepare(
    prepareCall: number,
    scripts: AttemptScript[],
    options: Record<string, unknown> = {},
  ): Promise<{ bench: LifecycleBench; jobId: string }> {
    let b: LifecycleBench | undefined;
    b = await start({
      config: { teams: [{ id: 'nlp', principals: [RESEARCHER], monthlyBudgetUsd: 1 }] },
      beforeTask: {
        PrepareAttempt: async (call) => {
          if (call !== prepareCall || !b) return;
          expect((await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 0.01 })).status).toBe(200);
        },
      },
    });
    const bench = b;
    const jobId = await submit(bench, scripts, options);
    await bench.until('the pause', async () => {
      const job = await bench.plane.jobs.requireJob(jobId);
      return job.state === 'PAUSED_BUDGET' && job.pauseToken !== undefined;
    });
    expect((await outcome(bench, jobId)).events).toContain('Job PausedForBudget');
    return { bench, jobId };
  }

  /** Raises the team budget to $20, lets budget-watch resume the job, and runs it to success; its attempts' kinds. */
  async function raiseAndSucceed(bench: LifecycleBench, jobId: string): Promise<Array<string | undefined>> {
    expect((await bench.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 })).status).toBe(200);
    await bench.runBudgetWatch();
    await bench.finish(jobId);
    const r = await outcome(bench, jobId);
    expect(r.job.state).toBe('SUCCEEDED');
    await expectSettled(bench, jobId);
    return r.attempts.map((a) => a.outcome?.kind);
  }

  it('pauses, instead of starting the retry, a job whose budget was blocked during its backoff; runs it once raised', async () => {
    // The budget is lowered while the job waits out its backoff, before the retry's PrepareAttempt.
    const { bench, jobId } = await pausedBeforePrepare(
      2,
      [{ result: 'app-error', seconds: 300 }, { result: 'succeed' }],
      {
        retries: { maxAppRetries: 2, backoffSeconds: 30 },
      },
    );

    expect(bench.batch.submissions).toHaveLength(1);
    expect((await bench.plane.jobs.listAttempts(jobId)).map((a) => a.attempt)).toEqual([1]);
    expect(await raiseAndSucceed(bench, jobId)).toEqual(['app-error', 'succeeded']);
  });

  it('ends CANCELLED, retrying nothing, a job cancelled as its failed attempt was being recorded', async () => {
    let b: LifecycleBench | undefined;
    let jobId = '';
    b = await start({
      // The cancel arrives after the attempt ended (its TerminateJob finds nothing running), as AttemptOutcome runs.
      beforeTask: {
        AttemptOutcome: async (call) => {
          if (call !== 1 || !b) return;
          expect((await b.call('DELETE', `/jobs/${jobId}`, RESEARCHER)).status).toBe(202);
        },
      },
    });
    const bench = b;
    jobId = await submit(bench, [{ result: 'app-error', seconds: 300 }, { result: 'succeed' }], {
      retries: { maxAppRetries: 2, backoffSeconds: 1800 },
    });
    await bench.finish(jobId);

    const r = await outcome(bench, jobId);
    expect(r.job.state).toBe('CANCELLED');
    expect(bench.batch.submissions).toHaveLength(1);
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['app-error']);
    // Decided at once: no backoff to sit out (up to an hour on AWS) and no PrepareAttempt after it.
    const decisions = (await bench.plane.jobs.listDecisions(jobId)).map((d) => d.decision);
    expect(decisions.at(-1)).toBe('finalize CANCELLED');
    expect(bench.taskCalls.filter((t) => t === 'PrepareAttempt')).toHaveLength(1);
    await expectSettled(bench, jobId);
  });

  it('pauses, instead of failing, a job whose budget was blocked before its first attempt; runs it once raised', async () => {
    // The budget is lowered between the job's cost gate and its first attempt.
    const { bench, jobId } = await pausedBeforePrepare(1, [{ result: 'succeed' }]);

    expect(bench.batch.submissions).toHaveLength(0);
    expect(await raiseAndSucceed(bench, jobId)).toEqual(['succeeded']);
  });

  it('fails a deadline job paused for budget once its deadline passes, though its budget stays blocked', async () => {
    const { bench, jobId } = await pausedBeforePrepare(1, [{ result: 'succeed' }], {
      requirements: { deadlineSeconds: 3 * 3600 },
    });
    bench.clock.advance(2 * 3600);
    await bench.runBudgetWatch();
    expect((await bench.plane.jobs.requireJob(jobId)).state).toBe('PAUSED_BUDGET');

    bench.clock.advance(3600);
    await bench.runBudgetWatch();
    await bench.finish(jobId);

    const r = await outcome(bench, jobId);
    expect(r.job.state).toBe('FAILED');
    expect(r.job.reason).toContain('the deadline passed before the next attempt could start');
    expect(bench.batch.submissions).toHaveLength(0);
    // It ran out of time: no attempt's outcome says so (it had none), and it is not the platform's fault ('internal').
    expect(failedOutcomes(bench, jobId)).toEqual(['timed-out']);
    await expectSettled(bench, jobId);
  });

  it('counts a computed max_iters (5000 / 3 in a config file) as a whole number of steps, and the job stays readable', async () => {
    const b = await start();
    const files = { ...projectFiles('nanogpt-like'), 'config/odd.py': 'max_iters = 5000 / 3\n' };
    const bundle = packTarGz(Object.entries(files).map(([path, text]) => ({ path, content: Buffer.from(text) })));
    const jobId = await submit(b, [{ result: 'succeed', seconds: 600 }], {
      bundle: bundle.toString('base64'),
      command: ['python', 'train.py', 'config/train_small.py', 'config/odd.py'],
    });
    await b.finish(jobId);

    const r = await outcome(b, jobId);
    expect(r.job.state).toBe('SUCCEEDED');
    // nanoGPT loops while iter_num <= max_iters: 1666.67 runs to step 1666, counted as 1667 steps to go.
    expect(r.job.progress?.totalSteps).toBe(1667);
    expect((await b.call('GET', '/jobs')).status).toBe(200);
    expect((await b.call('GET', `/jobs/${jobId}`)).status).toBe(200);
  });

  it.each([
    [
      'larger than submitted',
      (submitted: Buffer) => Buffer.concat([submitted, Buffer.from('more')]),
      /holds \d+ bytes, not the \d+ submitted/,
    ],
    [
      'of the same size, other bytes',
      (submitted: Buffer) => Buffer.from(submitted).fill(0x61),
      /holds sha256 [0-9a-f]{64}, not the [0-9a-f]{64} submitted/,
    ],
  ])(
    'rejects a job whose stored bundle was replaced after the submission (%s), reading no more than was submitted',
    async (_, replace, held) => {
      const b = await start();
      const submitted = packTarGz([{ path: 'train.py', content: Buffer.from('print("submitted")\n') }]);
      const jobId = 'j0replaced1';
      const key = jobKeysFor('nlp', jobId).bundle;
      await b.plane.workspace.put(key, replace(submitted));
      const job = jobRecord({
        jobId,
        team: 'nlp',
        state: 'SUBMITTED',
        bundle: { key, bytes: submitted.length, sha256: sha256Hex(submitted) },
      });
      expect(await b.plane.jobs.createJob(job)).toBe(true);

      const out = await lifecycleSteps(b.plane).analyze({ jobId });

      expect(out).toMatchObject({ next: 'finalize', finalState: 'REJECTED' });
      const stored = await b.plane.jobs.requireJob(jobId);
      expect(stored.state).toBe('REJECTED');
      expect(stored.reason).toMatch(
        new RegExp(`^code bundle ${key} was replaced after the job was submitted \\(it holds`),
      );
      expect(stored.reason).toMatch(held);
    },
  );

  it('fails, as timed out, a deadline job whose spot attempt is reclaimed after its deadline passed', async () => {
    const b = await start();
    const jobId = await submit(b, [{ result: 'reclaim', seconds: 6 * 3600 + 60, step: 100 }], {
      requirements: { runtimeSeconds: 1800, deadlineSeconds: 6 * 3600 },
    });
    await b.finish(jobId);

    const r = await outcome(b, jobId);
    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed']);
    expect(r.job.state).toBe('FAILED');
    expect(r.job.reason).toContain('The deadline (21600 s after submission) has passed');
    expect(failedOutcomes(b, jobId)).toEqual(['timed-out']);
    // The job does not go on from the reclaim: no Job Interrupted, only its final event.
    expect(r.events).not.toContain('Job Interrupted');
  });

  it('counts one pause when budget-watch resumes a pause step’s failed first try before its retry runs', async () => {
    /** The token of the first try, which died with it: budget-watch's resume finds it gone and clears it. */
    let firstToken: string | undefined;
    let b: LifecycleBench | undefined;
    b = await start({
      config: { teams: [{ id: 'nlp', principals: [RESEARCHER], monthlyBudgetUsd: 0.3 }] },
      // The pause step's first try records the pause and then fails (the Lambda timed out after its work).
      failAfter: { PausedForBudget: [1] },
      beforeTask: {
        // Before its retry: the admin raises the budget and budget-watch's next tick runs.
        PausedForBudget: async (call) => {
          if (call !== 2 || !b) return;
          expect((await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 })).status).toBe(200);
          firstToken = (await b.plane.jobs.listJobsInStates(['nlp'], ['PAUSED_BUDGET']))[0]?.pauseToken;
          expect(firstToken).toBeDefined();
          b.clock.advance(300);
          await b.runBudgetWatch();
        },
      },
    });
    const bb = b;
    const jobId = await submit(b, [{ result: 'hold', step: 500 }, { result: 'succeed' }]);
    await b.until('the attempt to run', async () => {
      const attempt = await bb.plane.jobs.getAttempt(jobId, 1);
      return attempt?.batchJobId !== undefined && bb.batch.isHeld(attempt.batchJobId);
    });
    // 1.9 h on spot exhausts the $0.30 budget: budget-watch stops the attempt and the job pauses.
    b.clock.advance(1.9 * 3600);
    await b.runBudgetWatch();
    await b.until('the retried pause to record its own token', async () => {
      const job = await bb.plane.jobs.requireJob(jobId);
      return (
        firstToken !== undefined &&
        job.state === 'PAUSED_BUDGET' &&
        job.pauseToken !== undefined &&
        job.pauseToken !== firstToken
      );
    });

    // The retried step is the same pause: one number, one announcement.
    expect(await b.plane.jobs.requireJob(jobId)).toMatchObject({ pauses: 1 });
    const pauseIds = b.published
      .filter((e) => e.DetailType === 'Job PausedForBudget')
      .map((e) => JSON.parse(e.Detail).eventId as string);
    expect([...new Set(pauseIds)]).toEqual([`${jobId}/paused-for-budget/1`]);
    // The next tick resumes it through the token the execution now waits on, and the job finishes.
    b.clock.advance(300);
    await b.runBudgetWatch();
    await b.finish(jobId);
    const r = await outcome(b, jobId);
    expect(r.job).toMatchObject({ state: 'SUCCEEDED', pauses: 1, resumedPauses: 1 });
  });

  it('pauses, instead of starting another attempt, a job reclaimed while its budget is blocked', async () => {
    const b = await start({
      config: { teams: [{ id: 'nlp', principals: [RESEARCHER], monthlyBudgetUsd: 1 }] },
    });
    const jobId = await submit(b, [
      { result: 'reclaim', step: 300, seconds: 600 },
      { result: 'hold', step: 500 },
      { result: 'succeed' },
    ]);
    await b.until('the second attempt to run', async () => {
      const attempt = await b.plane.jobs.getAttempt(jobId, 2);
      return attempt?.batchJobId !== undefined && b.batch.isHeld(attempt.batchJobId);
    });
    // An admin lowers the budget below what the job holds: blocked, before budget-watch's next tick stops the job.
    expect((await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 0.01 })).status).toBe(200);
    b.clock.advance(600);
    await b.deliverSpotNotice((await b.plane.jobs.getAttempt(jobId, 2))?.instanceId as string);
    await b.until('the pause', async () => {
      const job = await b.plane.jobs.requireJob(jobId);
      return job.state === 'PAUSED_BUDGET' && job.pauseToken !== undefined;
    });

    expect(b.batch.submissions).toHaveLength(2);
    const decisions = (await b.plane.jobs.listDecisions(jobId)).map((d) => d.decision);
    expect(decisions.at(-1)).toBe('pause-budget');
    // Paused, it holds nothing: the reservation it had not spent went back (what it ran stays spent).
    const period = budgetPeriodOf(await b.plane.jobs.requireJob(jobId));
    expect((await b.plane.ledger.usage('team:nlp', period))?.reservedUsd).toBe(0);
    // The second reclaim moves the job to on-demand: announced with the pause, not lost with the attempt it held back.
    expect((await outcome(b, jobId)).events).toContain('Job FellBackToOnDemand');
    const raised = await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 });
    expect(raised.status).toBe(200);
    await b.runBudgetWatch();
    await b.finish(jobId);
    const r = await outcome(b, jobId);
    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => [a.capacity, a.outcome?.kind])).toEqual([
      ['spot', 'reclaimed'],
      ['spot', 'reclaimed'],
      ['on-demand', 'succeeded'],
    ]);
    await expectSettled(b, jobId);
  });

  it('announces a second pause of one attempt as a new event: resumed, then held back again by a blocked budget', async () => {
    let bench: LifecycleBench | undefined;
    const { b, jobId } = await pausedJob({
      beforeTask: {
        // The resume's PrepareAttempt finds the budget lowered again, and pauses the job a second time.
        PrepareAttempt: async (call) => {
          if (call !== 2 || !bench) return;
          expect((await bench.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 0.01 })).status).toBe(200);
        },
      },
    });
    bench = b;
    expect((await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 })).status).toBe(200);
    // Resumed by its owner (the API leaves the spent token on the job for PrepareAttempt to clear).
    expect((await b.call('POST', `/jobs/${jobId}/resume`, RESEARCHER)).status).toBe(202);
    await b.until('the second pause', async () => {
      const job = await b.plane.jobs.requireJob(jobId);
      return job.state === 'PAUSED_BUDGET' && job.pauses === 2 && job.pauseToken !== undefined;
    });

    await raiseAndFinish(b, jobId);
    const paused = b.published.filter((e) => e.DetailType === 'Job PausedForBudget').map((e) => JSON.parse(e.Detail));
    expect(paused.map((e) => [e.eventId, e.attempt])).toEqual([
      [`${jobId}/paused-for-budget/1`, 1],
      [`${jobId}/paused-for-budget/2`, 1],
    ]);
    await expectSettled(b, jobId);
  });

  it('pauses a running job when its budget is exhausted, and resumes it once the budget is raised', async () => {
    const { b, jobId } = await pausedJob({});

    expect(b.batch.terminations.map((t) => t.reason)).toEqual(['Trainyard: budget exhausted, paused']);
    expect(b.published.map((e) => e.DetailType)).toEqual(
      expect.arrayContaining(['Budget Exhausted', 'Job PausedForBudget']),
    );

    await raiseAndFinish(b, jobId);
    expect(b.batch.submissions[1]?.ContainerOverrides?.Environment).toContainEqual({
      Name: 'TRAINYARD_RESUME_ARGS',
      Value: '--init_from=resume',
    });
    await expectSettled(b, jobId);
  });

  it('starts on on-demand when the deadline is too tight for spot', async () => {
    const b = await start();
    const r = await run(b, [{ result: 'succeed', seconds: 3000 }], {
      requirements: { runtimeSeconds: 3000, deadlineSeconds: 3300 },
    });

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.queues).toEqual(['trainyard-gpu-small-on-demand']);
    expect(r.decisions[0]?.decision).toBe('run-attempt on-demand');
    await expectSettled(b, r.jobId);
  });
});

describe('placement reads the tier’s spot record', () => {
  /** gpu-small's record: spot out since 15 h before `atMs`, last confirmed by the watch at `atMs`. */
  async function outageSeen(b: LifecycleBench, atMs: number): Promise<void> {
    await b.plane.jobs.updateTierSpot('gpu-small', () => ({
      tier: 'gpu-small',
      available: false,
      sinceMs: atMs - 15 * 3_600_000,
      sinceChange: true,
      seenMs: atMs,
    }));
  }

  it('starts a job with 1 500 s of slack on on-demand when spot has been out for 15 h, on spot without the record', async () => {
    const b = await start();
    const body = { requirements: { runtimeSeconds: 3600, deadlineSeconds: 5100 } };
    const unseen = await run(b, [{ result: 'succeed', seconds: 3600 }], body);
    expect(unseen.queues).toEqual(['trainyard-gpu-small-spot']);

    await outageSeen(b, b.clock.ms);
    const seen = await run(b, [{ result: 'succeed', seconds: 3600 }], body);

    expect(seen.queues).toEqual(['trainyard-gpu-small-on-demand']);
    expect(seen.decisions[0]).toMatchObject({
      decision: 'run-attempt on-demand',
      reason: expect.stringContaining('spot unavailable for 54000 s'),
    });
  });

  it('plans a submission with the model the tier’s record has learnt, the fleet model without one', async () => {
    const b = await start();
    // Spot out for an hour on gpu-medium, the tier a 4 h job runs on; the job has 2 400 s of slack.
    const outage = (): TierSpotRecord => ({
      tier: 'gpu-medium',
      available: false,
      sinceMs: b.clock.ms - 3_600_000,
      sinceChange: true,
      seenMs: b.clock.ms,
      modelFittedMs: b.clock.ms - 3_600_000,
    });
    const body = { requirements: { runtimeSeconds: 4 * 3600, deadlineSeconds: 4 * 3600 + 2400 } };
    await b.plane.jobs.updateTierSpot('gpu-medium', outage);
    const fleet = await run(b, [{ result: 'succeed', seconds: 4 * 3600 }], body);
    // The fleet's outages mostly end soon, into stretches of spot that are often reclaimed within minutes: a spot
    // start that ends so would cost more slack than the job has, so it starts on on-demand.
    expect(fleet.queues).toEqual(['trainyard-gpu-medium-on-demand']);

    // This tier's outages last (1 % end per 10 minutes at every age: 16 h on average): spot will hardly be back
    // within the slack, so waiting in the spot queue costs nothing; the periodic check covers the rest.
    const unavailableHazards = new Array<number>(24).fill(0.01);
    await b.plane.jobs.updateTierSpot('gpu-medium', () => ({
      ...outage(),
      model: { binSeconds: 600, availableHazards: FLEET_SPOT_MODEL.availableHazards, unavailableHazards },
    }));
    const learnt = await run(b, [{ result: 'succeed', seconds: 4 * 3600 }], body);
    expect(learnt.queues).toEqual(['trainyard-gpu-medium-spot']);
    expect(learnt.decisions[0]?.reason).toContain('spot unavailable for 3600 s');
  });

  it('records a reclaim in the tier’s record as an outage the platform saw begin, with every step replayed', async () => {
    const b = await start({ replay: true });
    await b.plane.jobs.updateTierSpot('gpu-small', () => ({
      tier: 'gpu-small',
      available: true,
      sinceMs: b.clock.ms - 36_000_000,
      sinceChange: true,
      seenMs: b.clock.ms,
    }));

    const r = await run(b, [{ result: 'reclaim', step: 300 }, { result: 'succeed' }]);

    const reclaimedAt = r.attempts[0]?.stoppedAt ?? Number.NaN;
    expect(r.attempts[0]?.outcome?.kind).toBe('reclaimed');
    const stored = await b.plane.jobs.getTierSpot('gpu-small');
    expect(stored).toMatchObject({
      tier: 'gpu-small',
      available: false,
      sinceMs: reclaimedAt,
      sinceChange: true,
      seenMs: reclaimedAt,
    });
    // The watch last confirmed the stretch 10 h after it began; the reclaim came more than 660 s later, so the
    // stretch is counted once, replays and all, as lasting at least those 10 h (alive at the start of each of the 24
    // ten-minute bins, then 4 h = 24 ten-minute units of exposure in the 4–8 h bin and 2 h = 12 in the 8–16 h one),
    // not as ended there.
    expect(stored?.lifeTable?.available).toEqual({
      atRisk: [...new Array(24).fill(1), 24, 12, 0, 0, 0],
      ended: new Array(29).fill(0),
    });
    expect(stored?.lifeTable?.unavailable.ended).toEqual(new Array(29).fill(0));
  });

  it('weighs the outage the tier has seen, not only the attempt’s wait, when the queue cancels an attempt', async () => {
    const b = await start();
    // The queue cancels the attempt after the 1 200 s capacity wait; the watch confirmed the outage then.
    await outageSeen(b, b.clock.ms + 1_200_000);
    const r = await run(b, [{ result: 'capacity' }, { result: 'succeed' }], {
      requirements: { runtimeSeconds: 1800, deadlineSeconds: 36_000 },
    });

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.decisions.find((d) => d.moment === 'capacity-cancelled')?.reason).toContain(
      'The spot queue had no capacity for 54000 s',
    );
  });
});

describe('a CPU tier’s Fargate Spot reclaim', () => {
  it('resumes the job on spot and counts the reclaim for the tier, with no EC2 warning to count', async () => {
    const b = await start();
    // cpu-large runs an attempt 10 minutes at most.
    const r = await run(
      b,
      [
        { result: 'fargate-reclaim', step: 400, seconds: 120 },
        { result: 'succeed', seconds: 120 },
      ],
      { requirements: { tier: 'cpu-large' } },
    );

    expect(r.job.state).toBe('SUCCEEDED');
    expect(r.attempts.map((a) => [a.capacity, a.outcome?.kind])).toEqual([
      ['spot', 'reclaimed'],
      ['spot', 'succeeded'],
    ]);
    const metrics = extractMetrics(b.metricLines);
    expect(
      metrics.filter((m) => m.metric === 'SpotReclaims').map(({ dimensions, value }) => ({ dimensions, value })),
    ).toEqual([{ dimensions: { Tier: 'cpu-large' }, value: 1 }]);
    expect(metrics.filter((m) => m.metric === 'SpotInterruptions')).toEqual([]);
  });

  it('counts no spot reclaim for an on-demand host that was terminated', async () => {
    const b = await start();
    // gpu-multinode allows no spot: its attempts run on on-demand, whose host can be terminated too.
    const r = await run(
      b,
      [
        { result: 'reclaim', step: 400, seconds: 600 },
        { result: 'succeed', seconds: 600 },
      ],
      {
        requirements: { tier: 'gpu-multinode' },
      },
    );

    expect(r.attempts.map((a) => [a.capacity, a.outcome?.kind])).toEqual([
      ['on-demand', 'reclaimed'],
      ['on-demand', 'succeeded'],
    ]);
    expect(extractMetrics(b.metricLines).filter((m) => m.metric === 'SpotReclaims')).toEqual([]);
  });

  it('counts nothing when platform metrics are off', async () => {
    const b = await start({ config: { observability: { platformMetrics: false } } });
    const r = await run(
      b,
      [
        { result: 'fargate-reclaim', step: 400, seconds: 120 },
        { result: 'succeed', seconds: 120 },
      ],
      { requirements: { tier: 'cpu-large' } },
    );

    expect(r.attempts.map((a) => a.outcome?.kind)).toEqual(['reclaimed', 'succeeded']);
    expect(extractMetrics(b.metricLines)).toEqual([]);
  });
});

describe('replaying every Task invocation and every AWS event twice', () => {
  const scenario: AttemptScript[] = [
    { result: 'reclaim', step: 800, notice: true, seconds: 1200 },
    { result: 'succeed' },
  ];

  async function figures(options: BenchOptions) {
    const b = await start(options);
    const r = await run(b, scenario);
    const { scope, period } = teamScope();
    const usage = await b.plane.ledger.usage(scope, period);
    const result = {
      state: r.job.state,
      cost: r.job.costSoFarUsd,
      counters: r.job.counters,
      attempts: r.attempts.map((a) => ({
        attempt: a.attempt,
        capacity: a.capacity,
        cost: a.costUsd,
        outcome: a.outcome?.kind,
      })),
      ledger: { spent: usage?.spentUsd, reserved: usage?.reservedUsd },
      terminations: b.batch.terminations.length,
      submissions: b.batch.submissions.length,
      interruptionsCounted: extractMetrics(b.metricLines)
        .filter((m) => m.metric === 'SpotInterruptions')
        .reduce((sum, m) => sum + m.value, 0),
      reclaimsCounted: extractMetrics(b.metricLines)
        .filter((m) => m.metric === 'SpotReclaims')
        .reduce((sum, m) => sum + m.value, 0),
    };
    await b.stop();
    bench = undefined;
    return result;
  }

  it('changes no cost, no ledger entry and no attempt count', async () => {
    const once = await figures({});
    const twice = await figures({ replay: true });

    expect(twice).toEqual(once);
    expect(once.attempts).toHaveLength(2);
    expect(once.ledger.spent).toBe(once.cost);
    expect(once.interruptionsCounted).toBe(1);
    expect(once.reclaimsCounted).toBe(1);
  });
});
