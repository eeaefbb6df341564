// The interruption handler against dynalite, with AWS's documented "EC2 Spot Instance Interruption Warning".
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TERMINATE_REASONS } from '../../lambdas/domain/batch-reasons';
import { createInterruptionHandler } from '../../lambdas/interruption/interruption';
import { InvalidEvent } from '../../lambdas/shared/event-schemas';
import { extractMetrics } from '../support/emf';
import {
  attemptRecord,
  BATCH_JOB_ID,
  CONFIG,
  type EventBench,
  fixture,
  fixtureWith,
  INSTANCE_ID,
  JOB_ID,
  jobRecord,
  startEventBench,
  T,
} from './event-bench';

// The fixture's `time`, 2026-11-20T14:20:00Z, as epoch ms.
const NOTICE_MS = Date.UTC(2026, 10, 20, 14, 20, 0);

let bench: EventBench;
let handle: ReturnType<typeof createInterruptionHandler>;

beforeEach(async () => {
  bench = await startEventBench();
  handle = createInterruptionHandler({
    config: CONFIG,
    jobs: bench.jobs,
    batch: bench.ports.batch,
    metrics: bench.ports.metrics,
  });
});

afterEach(async () => {
  await bench.stop();
});

async function seedRunningSpotAttempt(overrides: Parameters<typeof attemptRecord>[0] = {}) {
  await bench.jobs.createJob(jobRecord({ project: 'shakespeare' }));
  await bench.jobs.putAttempt(
    attemptRecord({
      status: 'RUNNING',
      batchJobId: BATCH_JOB_ID,
      instanceId: INSTANCE_ID,
      startedAt: T.started,
      usdPerHour: 0.19,
      ...overrides,
    }),
  );
}

/** The result of a delivery that found attempts running on the instance. */
function handled(...attempts: object[]) {
  return { action: 'handled', attempts };
}

// Job ids are time-ordered: EARLIER was submitted before JOB_ID, LATER after it.
const EARLIER = '01JDA7Q6ZK0000000000000000';
const LATER = '01JDA7Q6ZKZZZZZZZZZZZZZZZZ';

describe('interruption handler', () => {
  it('terminates the attempt on the warned instance and records the notice, announcing nothing', async () => {
    await seedRunningSpotAttempt();

    const result = await handle(fixture('spot-interruption-warning'));

    expect(result).toEqual(handled({ action: 'stopped', jobId: JOB_ID, attempt: 1, terminated: true }));
    expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.spotNotice }]);
    // Job Interrupted is the attempt's end, which AttemptOutcome announces with Batch's reason and stop time.
    expect(bench.recorded.published).toEqual([]);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.noticeAt).toBe(NOTICE_MS);
    expect(extractMetrics(bench.recorded.metricLines)).toEqual([
      {
        namespace: 'Trainyard',
        metric: 'SpotInterruptions',
        unit: 'Count',
        dimensions: { Tier: 'gpu-small' },
        value: 1,
        timestampMs: NOTICE_MS,
      },
    ]);
  });

  it('counts no interruption when platform metrics are off', async () => {
    await seedRunningSpotAttempt();
    const quiet = createInterruptionHandler({
      config: { ...CONFIG, observability: { ...CONFIG.observability, platformMetrics: false } },
      jobs: bench.jobs,
      batch: bench.ports.batch,
      metrics: bench.ports.metrics,
    });

    expect(await quiet(fixture('spot-interruption-warning'))).toMatchObject(handled({ action: 'stopped' }));
    expect(bench.recorded.metricLines).toEqual([]);
  });

  it('changes nothing and calls nothing when the same warning is delivered again, twice', async () => {
    await seedRunningSpotAttempt();
    await handle(fixture('spot-interruption-warning'));
    const afterFirst = await bench.snapshot();

    const replays = [
      await handle(fixture('spot-interruption-warning')),
      await handle(fixture('spot-interruption-warning')),
    ];

    expect(replays).toEqual([
      handled({ action: 'replay', jobId: JOB_ID, attempt: 1 }),
      handled({ action: 'replay', jobId: JOB_ID, attempt: 1 }),
    ]);
    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(bench.recorded.terminated).toHaveLength(1);
    expect(bench.recorded.published).toEqual([]);
    expect(extractMetrics(bench.recorded.metricLines).map((m) => m.value)).toEqual([1]);
  });

  it('counts the interruption once when two deliveries of the warning run at once', async () => {
    await seedRunningSpotAttempt();

    const results = await Promise.all([
      handle(fixture('spot-interruption-warning')),
      handle(fixture('spot-interruption-warning')),
    ]);

    expect(results).toEqual([
      handled({ action: 'stopped', jobId: JOB_ID, attempt: 1, terminated: true }),
      handled({ action: 'stopped', jobId: JOB_ID, attempt: 1, terminated: true }),
    ]);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.noticeAt).toBe(NOTICE_MS);
    expect(extractMetrics(bench.recorded.metricLines).map((m) => m.value)).toEqual([1]);
  });

  it('ignores a warning for an instance no attempt ran on, writing nothing', async () => {
    await seedRunningSpotAttempt({ instanceId: 'i-00000000000000001' });
    const before = await bench.snapshot();

    const result = await handle(fixture('spot-interruption-warning'));

    expect(result).toEqual({ action: 'ignored', why: 'unknown-instance' });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated).toEqual([]);
    expect(bench.recorded.published).toEqual([]);
    expect(bench.recorded.metricLines).toEqual([]);
  });

  it('ignores a warning for an instance whose attempt already stopped', async () => {
    await seedRunningSpotAttempt({ stoppedAt: T.stopped, status: 'SUCCEEDED', costUsd: 0.13 });
    const before = await bench.snapshot();

    const result = await handle(fixture('spot-interruption-warning'));

    expect(result).toEqual({ action: 'ignored', why: 'attempt-ended' });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated).toEqual([]);
    expect(bench.recorded.published).toEqual([]);
  });

  it('stops the attempt running on a reused instance, not the newer job whose attempt ended there', async () => {
    // LATER's attempt ran on the warm instance first and ended; JOB_ID, submitted earlier, resumed onto it.
    await seedRunningSpotAttempt({ attempt: 2 });
    await bench.jobs.createJob(jobRecord({ jobId: LATER }));
    await bench.jobs.putAttempt(
      attemptRecord({
        jobId: LATER,
        status: 'SUCCEEDED',
        batchJobId: 'ended-batch-job',
        instanceId: INSTANCE_ID,
        startedAt: T.created,
        stoppedAt: T.started - 1000,
        costUsd: 0.01,
      }),
    );

    const result = await handle(fixture('spot-interruption-warning'));

    expect(result).toEqual(handled({ action: 'stopped', jobId: JOB_ID, attempt: 2, terminated: true }));
    expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.spotNotice }]);
    expect((await bench.jobs.getAttempt(JOB_ID, 2))?.noticeAt).toBe(NOTICE_MS);
    expect((await bench.jobs.getAttempt(LATER, 1))?.noticeAt).toBeUndefined();
  });

  it('stops every attempt Batch packed onto the warned instance, and after a failure part-way the rest', async () => {
    await seedRunningSpotAttempt();
    await bench.jobs.createJob(jobRecord({ jobId: EARLIER, user: 'bob' }));
    await bench.jobs.putAttempt(
      attemptRecord({
        jobId: EARLIER,
        status: 'RUNNING',
        batchJobId: 'packed-batch-job',
        instanceId: INSTANCE_ID,
        startedAt: T.started,
      }),
    );
    // The first TerminateJob goes through; the second is throttled, failing the delivery.
    const terminate = bench.ports.batch.terminateJob;
    let calls = 0;
    bench.ports.batch.terminateJob = async (batchJobId, reason) => {
      calls += 1;
      if (calls === 2) throw Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' });
      return terminate(batchJobId, reason);
    };

    await expect(handle(fixture('spot-interruption-warning'))).rejects.toThrow('Rate exceeded');
    const [first, second] = [EARLIER, JOB_ID];
    expect((await bench.jobs.getAttempt(first, 1))?.noticeAt).toBe(NOTICE_MS);
    expect((await bench.jobs.getAttempt(second, 1))?.noticeAt).toBeUndefined();

    const retried = await handle(fixture('spot-interruption-warning'));

    expect(retried).toEqual(
      handled(
        { action: 'replay', jobId: first, attempt: 1 },
        { action: 'stopped', jobId: second, attempt: 1, terminated: true },
      ),
    );
    expect(bench.recorded.terminated.map((t) => t.batchJobId)).toEqual(['packed-batch-job', BATCH_JOB_ID]);
    expect((await bench.jobs.getAttempt(second, 1))?.noticeAt).toBe(NOTICE_MS);
    expect(extractMetrics(bench.recorded.metricLines).map((m) => m.value)).toEqual([1, 1]);
  });

  it('records nothing when TerminateJob fails, so EventBridge retries the whole warning', async () => {
    await seedRunningSpotAttempt();
    bench.failTerminations = 1;

    await expect(handle(fixture('spot-interruption-warning'))).rejects.toThrow('Rate exceeded');
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.noticeAt).toBeUndefined();

    const retried = await handle(fixture('spot-interruption-warning'));
    expect(retried).toEqual(handled({ action: 'stopped', jobId: JOB_ID, attempt: 1, terminated: true }));
    expect(bench.recorded.terminated).toHaveLength(1);
    expect(extractMetrics(bench.recorded.metricLines)).toHaveLength(1);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.noticeAt).toBe(NOTICE_MS);
  });

  it('records the notice without a TerminateJob when Batch has not told us the job id yet', async () => {
    await bench.jobs.createJob(jobRecord());
    // An attempt found by instance always has a Batch job id in practice; the record schema allows one without.
    await bench.jobs.putAttempt(attemptRecord({ status: 'RUNNING', instanceId: INSTANCE_ID, startedAt: T.started }));

    const result = await handle(fixture('spot-interruption-warning'));

    expect(result).toEqual(handled({ action: 'stopped', jobId: JOB_ID, attempt: 1, terminated: false }));
    expect(bench.recorded.terminated).toEqual([]);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.noticeAt).toBe(NOTICE_MS);
  });

  it.each([
    {
      what: 'an instance id that is not one',
      event: fixtureWith('spot-interruption-warning', (e) => {
        e.detail['instance-id'] = 'my-instance';
      }),
      message:
        'invalid "EC2 Spot Instance Interruption Warning" event: detail.instance-id: must be an EC2 instance id like i-1234567890abcdef0',
    },
    {
      what: 'an unknown instance-action',
      event: fixtureWith('spot-interruption-warning', (e) => {
        e.detail['instance-action'] = 'reboot';
      }),
      message:
        'invalid "EC2 Spot Instance Interruption Warning" event: detail.instance-action: must be one of terminate, stop, hibernate',
    },
    {
      what: 'a missing detail',
      event: fixtureWith('spot-interruption-warning', (e) => {
        delete (e as Record<string, unknown>).detail;
      }),
      message: 'invalid "EC2 Spot Instance Interruption Warning" event: detail:',
    },
    {
      what: 'another detail-type',
      event: fixtureWith('spot-interruption-warning', (e) => {
        e['detail-type'] = 'EC2 Instance Rebalance Recommendation';
      }),
      message:
        'invalid "EC2 Spot Instance Interruption Warning" event: detail-type: must be "EC2 Spot Instance Interruption Warning"',
    },
    {
      what: 'another source',
      event: fixtureWith('spot-interruption-warning', (e) => {
        e.source = 'trainyard';
      }),
      message: 'invalid "EC2 Spot Instance Interruption Warning" event: source: must be "aws.ec2"',
    },
    {
      what: 'a time that is not ISO-8601',
      event: fixtureWith('spot-interruption-warning', (e) => {
        e.time = 'yyyy-mm-ddThh:mm:ssZ';
      }),
      message:
        'invalid "EC2 Spot Instance Interruption Warning" event: time: must be an ISO-8601 UTC time like 2026-11-20T14:02:11Z',
    },
    {
      what: 'a string instead of an event',
      event: 'i-0f2b6a4c9d8e7f123',
      message: 'expected an EventBridge "EC2 Spot Instance Interruption Warning" event (a JSON object), got string',
    },
  ])('refuses $what with a precise InvalidEvent and writes nothing', async ({ event, message }) => {
    await seedRunningSpotAttempt();
    const before = await bench.snapshot();

    const outcome = handle(event);

    await expect(outcome).rejects.toThrow(InvalidEvent);
    await expect(outcome).rejects.toThrow(message);
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated).toEqual([]);
    expect(bench.recorded.published).toEqual([]);
  });
});
