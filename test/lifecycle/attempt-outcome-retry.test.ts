// AttemptOutcome run as Step Functions runs it again: a retry after a try that failed late, and a failure cause cut
// short. Against dynalite and s3rver (test/lambdas/event-bench.ts), with AWS's documented failure payloads
// (test/fixtures/batch/).
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parseBatchFailureCause } from '../../lambdas/domain/batch-job';
import { createAttemptOutcomeHandler } from '../../lambdas/lifecycle/attempt-outcome';
import {
  attemptRecord,
  CONFIG,
  type EventBench,
  JOB_ID,
  jobRecord,
  publishedOf,
  startEventBench,
  T,
} from '../lambdas/event-bench';

const PERIOD = new Date(T.created).toISOString().slice(0, 7);
const BATCH_JOB_ID = 'a0c5e7f9-1b3d-4f6a-8c0e-4f5a6b7c8d10';
let bench: EventBench;

beforeEach(async () => {
  bench = await startEventBench({ withS3: true });
});
afterEach(async () => {
  await bench.stop();
});

function handler() {
  return createAttemptOutcomeHandler({
    config: CONFIG,
    jobs: bench.jobs,
    workspace: bench.workspace,
    events: bench.ports.events,
    batch: bench.ports.batch,
    clock: bench.clock,
    ledger: bench.ledger,
    metrics: bench.ports.metrics,
    fleet: bench.ports.fleet,
  });
}

/** Attempt 1 of a running spot job, stopped by its spot notice (the documented States.TaskFailed of it). */
async function reclaimedAttempt() {
  await bench.jobs.createJob(jobRecord({ state: 'RUNNING' }));
  await bench.jobs.putAttempt(
    attemptRecord({
      status: 'RUNNING',
      submittedAt: T.created,
      batchJobId: BATCH_JOB_ID,
      startedAt: T.started,
      startAnnounced: true,
    }),
  );
  await bench.ledger.ensureBudget('team:vision', PERIOD, 100);
  await bench.ledger.reserve(JOB_ID, ['team:vision'], 5, PERIOD);
  const failure = JSON.parse(
    readFileSync(new URL('../fixtures/batch/terminated-spot-notice.sfn-failure.json', import.meta.url), 'utf8'),
  ) as { Error: string; Cause: string };
  return { failure, plan: { attempt: 1, capacity: 'spot', resume: false, delaySeconds: 0 } as const };
}

describe('AttemptOutcome retried', () => {
  it('acts on the decision its first try recorded, though a budget was blocked in between', async () => {
    const { failure, plan } = await reclaimedAttempt();
    const input = { jobId: JOB_ID, plan, batchError: failure };
    // Try 1 records the outcome and decision 101, then PutEvents is throttled (the state machine retries the step).
    bench.failPublishes = 1;
    await expect(handler()(input)).rejects.toMatchObject({ name: 'ThrottlingException' });
    const [recorded] = await bench.jobs.listDecisions(JOB_ID);
    expect(recorded).toMatchObject({ seq: 101, decision: 'run-attempt spot (resume)' });
    // Before the retry, the team's budget is blocked: deciding again would pause the job.
    await bench.ledger.accrue(JOB_ID, 150);

    const retried = await handler()(input);

    expect(retried).toEqual({
      jobId: JOB_ID,
      next: 'prepare',
      plan: { attempt: 2, capacity: 'spot', resume: true, delaySeconds: 0 },
    });
    expect((await bench.jobs.listDecisions(JOB_ID)).map((d) => d.decision)).toEqual(['run-attempt spot (resume)']);
    expect((await bench.jobs.requireJob(JOB_ID)).reason).toBe(recorded?.reason);
    expect(publishedOf(bench.recorded, 'Job Interrupted')).toHaveLength(1);
  });
});

describe('AttemptOutcome given a failure cause cut short', () => {
  it('looks the attempt up in Batch and classifies what Batch reports', async () => {
    const { failure, plan } = await reclaimedAttempt();
    // Step Functions keeps at most 32,768 characters of a cause; a job detail can be longer.
    bench.batchJobs = [parseBatchFailureCause(failure.Cause)];
    const cut = { Error: failure.Error, Cause: failure.Cause.slice(0, 1500) };

    const result = await handler()({ jobId: JOB_ID, plan, batchError: cut });

    expect(bench.recorded.batchLookups).toEqual([
      expect.objectContaining({ batchJobId: BATCH_JOB_ID, jobName: `${JOB_ID}-a1` }),
    ]);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.outcome?.kind).toBe('reclaimed');
    expect(result).toMatchObject({ next: 'prepare', plan: { attempt: 2, resume: true } });
  });
});
