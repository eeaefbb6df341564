// The batch-events handler against dynalite, with AWS's documented "Batch Job State Change" payloads.
// Costs are worked out by hand here: price × billed seconds ÷ 3600, rounded to the cent.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBatchEventsHandler } from '../../lambdas/batch-events/batch-events';
import { costOfAttempt } from '../../lambdas/domain/attempt-cost';
import { parseBatchJob } from '../../lambdas/domain/batch-job';
import { TERMINATE_REASONS } from '../../lambdas/domain/batch-reasons';
import { type AttemptRecord, InvalidJobRecord } from '../../lambdas/domain/job';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { AttemptGotBatchJob, recordAttemptEnd } from '../../lambdas/lifecycle/common';
import { createFinalizeHandler } from '../../lambdas/lifecycle/finalize';
import { InvalidEvent } from '../../lambdas/shared/event-schemas';
import { JobNotFound, type JobStore } from '../../lambdas/shared/job-store';
import { MAX_JSON_DOCUMENT_BYTES } from '../../lambdas/shared/workspace';
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
  publishedOf,
  startEventBench,
  T,
} from './event-bench';

// Fixture run: 14:01:05.000 → 14:41:07.250 is 2402.25 s; EC2 bills started seconds, so 2403 s.
const SPOT_INSTANCE = {
  instanceId: INSTANCE_ID,
  instanceType: 'g4dn.xlarge',
  availabilityZone: 'us-east-1a',
  lifecycle: 'spot' as const,
};

let bench: EventBench;
let handle: ReturnType<typeof createBatchEventsHandler>;

beforeEach(async () => {
  bench = await startEventBench();
  handle = createBatchEventsHandler(planeOf(bench.jobs));
});

/** The handler's plane: the bench's stores and recorders, with `jobs` replaceable. */
function planeOf(jobs: JobStore) {
  const { events, fleet, batch } = bench.ports;
  return {
    config: CONFIG,
    jobs,
    ledger: bench.ledger,
    workspace: bench.workspace,
    clock: bench.clock,
    events,
    fleet,
    batch,
    metrics: bench.ports.metrics,
  };
}

afterEach(async () => {
  await bench.stop();
});

/** The jobs port, with `race` run right after the handler's first read of an attempt (before it acts on it). */
function jobsRacingFirstRead(race: (read: AttemptRecord) => Promise<void>): JobStore {
  let raced = false;
  const jobs = Object.create(bench.jobs) as JobStore;
  jobs.getAttempt = async (jobId, n) => {
    const read = await bench.jobs.getAttempt(jobId, n);
    if (!raced && read) {
      raced = true;
      await race(read);
    }
    return read;
  };
  return jobs;
}

/** Restarts the bench with a workspace (s3rver), for the tests of a job that ended, whose files are rewritten. */
async function withWorkspace() {
  await bench.stop();
  bench = await startEventBench({ withS3: true });
  handle = createBatchEventsHandler(planeOf(bench.jobs));
}

/** The job's summary.json (parsed) and report.html as the workspace holds them. */
async function filesOf() {
  const keys = jobKeysFor('vision', JOB_ID);
  const [summary, report] = await Promise.all([bench.workspace.get(keys.summary), bench.workspace.get(keys.report)]);
  return { summary: summary && JSON.parse(summary.toString('utf8')), report: report?.toString('utf8') };
}

async function seed(job = {}, attempt = {}) {
  await bench.jobs.createJob(jobRecord({ state: 'WAITING', ...job }));
  await bench.jobs.putAttempt(attemptRecord(attempt));
}

describe('batch-events: not ours, unknown or malformed', () => {
  it('ignores a Batch job without Trainyard tags or name (AWS’s own example job), touching nothing', async () => {
    await seed();
    const before = await bench.snapshot();

    const result = await handle(fixture('batch-foreign-runnable'));

    expect(result).toEqual({ action: 'ignored', why: 'not-trainyard' });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded).toMatchObject({ published: [], instanceLookups: [], priceLookups: [] });
  });

  it('ignores a node job of a multi-node attempt, whose parent job is the attempt, touching nothing', async () => {
    await seed();
    const before = await bench.snapshot();

    const result = await handle(
      fixtureWith('batch-running', (e) => {
        e.detail.jobId = `${BATCH_JOB_ID}#1`;
      }),
    );

    expect(result).toEqual({ action: 'ignored', why: 'node-of-parallel-job' });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published).toEqual([]);
  });

  it('ignores a tagged Batch job whose attempt the jobs table does not hold', async () => {
    await seed({}, { attempt: 2 });
    const before = await bench.snapshot();

    const result = await handle(fixture('batch-running'));

    expect(result).toEqual({ action: 'ignored', why: 'unknown-attempt' });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published).toEqual([]);
  });

  it('ignores a Batch job tagged with a team that is not its job’s team', async () => {
    await seed({ team: 'nlp', bundle: { key: 'teams/nlp/x.tar.gz', bytes: 1, sha256: 'b'.repeat(64) } });
    const before = await bench.snapshot();

    const result = await handle(fixture('batch-running'));

    expect(result).toEqual({ action: 'ignored', why: 'team-mismatch' });
    expect(await bench.snapshot()).toEqual(before);
  });

  it('recognises an untagged attempt by its name <jobId>-a<attempt>', async () => {
    await seed();
    const event = fixtureWith('batch-runnable', (e) => {
      delete e.detail.tags;
    });

    expect(await handle(event)).toEqual({ action: 'queued', jobId: JOB_ID, attempt: 1 });
  });

  it.each([
    {
      what: 'a detail without jobId',
      change: (e: { detail: Record<string, unknown> }) => {
        delete e.detail.jobId;
      },
      message: 'invalid "Batch Job State Change" event: detail is not a valid Batch job detail: jobId:',
    },
    {
      what: 'an unknown Batch status',
      change: (e: { detail: Record<string, unknown> }) => {
        e.detail.status = 'DONE';
      },
      message: 'invalid "Batch Job State Change" event: detail is not a valid Batch job detail: status:',
    },
    {
      what: 'a startedAt that is not epoch milliseconds',
      change: (e: { detail: Record<string, unknown> }) => {
        e.detail.startedAt = '2026-11-20T14:01:05Z';
      },
      message: 'invalid "Batch Job State Change" event: detail is not a valid Batch job detail: startedAt:',
    },
    {
      what: 'another source',
      change: (e: Record<string, unknown>) => {
        e.source = 'aws.ecs';
      },
      message: 'invalid "Batch Job State Change" event: source: must be "aws.batch"',
    },
    {
      what: 'a detail that is a string',
      change: (e: Record<string, unknown>) => {
        e.detail = 'RUNNING';
      },
      message: 'invalid "Batch Job State Change" event: detail: must be the Batch job detail (an object)',
    },
  ])('refuses $what with a precise InvalidEvent and writes nothing', async ({ change, message }) => {
    await seed();
    const before = await bench.snapshot();
    const event = fixtureWith('batch-running', change as (e: Record<string, unknown>) => void);

    const outcome = handle(event);

    await expect(outcome).rejects.toThrow(InvalidEvent);
    await expect(outcome).rejects.toThrow(message);
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published).toEqual([]);
  });
});

describe('batch-events: RUNNABLE and RUNNING', () => {
  it('records the Batch job id of a waiting attempt once, so a cancel can terminate it', async () => {
    await seed();

    await handle(fixture('batch-runnable'));

    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ batchJobId: BATCH_JOB_ID, status: 'RUNNABLE' });
    expect(bench.recorded.published).toEqual([]);
  });

  it.each([
    ['batch-runnable', 'queued'],
    ['batch-running', 'started'],
  ])(
    'terminates, on %s, the attempt of a job whose cancel came before its Batch job id was recorded',
    async (name, action) => {
      await seed({ cancelRequested: true });

      const result = await handle(fixture(name));

      expect(result).toMatchObject({ action, jobId: JOB_ID, attempt: 1 });
      expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ batchJobId: BATCH_JOB_ID });
      expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: 'Trainyard: cancelled by user' }]);
    },
  );

  it('terminates nothing for a job not cancelled, nor when Batch reports a cancelled job’s attempt ended', async () => {
    await seed();
    await handle(fixture('batch-runnable'));
    await handle(fixture('batch-running'));
    await bench.jobs.patchJob(JOB_ID, { cancelRequested: true });
    await handle(fixture('batch-succeeded'));

    expect(bench.recorded.terminated).toEqual([]);
  });

  it('records start, instance and the spot price at the start, moves the job to RUNNING and emits Job Started', async () => {
    await seed();
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.1897;

    const result = await handle(fixture('batch-running'));

    expect(result).toEqual({ action: 'started', jobId: JOB_ID, attempt: 1 });
    expect(bench.recorded.instanceLookups).toEqual([
      'arn:aws:ecs:us-east-1:123456789012:container-instance/trainyard-gpu-small-spot/0a1b2c3d4e5f60718',
    ]);
    expect(bench.recorded.priceLookups).toEqual([{ instanceType: 'g4dn.xlarge', az: 'us-east-1a', atMs: T.started }]);
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({
      batchJobId: BATCH_JOB_ID,
      startedAt: T.started,
      status: 'RUNNING',
      instanceId: INSTANCE_ID,
      usdPerHour: 0.1897,
      logStreamName: 'trainyard-gpu-small/default/4c7599aec0ffee11aa22bb33cc44',
    });
    expect((await bench.jobs.findAttemptsByInstance(INSTANCE_ID)).map((a) => a.attempt)).toEqual([1]);
    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('RUNNING');
    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([
      {
        version: '1',
        eventId: `${JOB_ID}/started/1`,
        jobId: JOB_ID,
        team: 'vision',
        user: 'alice',
        occurredAt: '2026-11-20T14:01:05.000Z',
        attempt: 1,
        capacity: 'spot',
        queue: 'trainyard-gpu-small-spot',
        batchJobId: BATCH_JOB_ID,
        usdPerHour: 0.1897,
        summary: `Job ${JOB_ID} started attempt 1 on spot (trainyard-gpu-small-spot).`,
      },
    ]);
  });

  it.each([
    {
      what: 'spot with no price history: the tier’s spot price',
      instance: SPOT_INSTANCE,
      quote: undefined,
      price: 0.19,
    },
    {
      what: 'an on-demand instance: the tier’s on-demand price, no history lookup',
      instance: { ...SPOT_INSTANCE, lifecycle: 'on-demand' as const },
      quote: 0.1897,
      price: 0.526,
    },
  ])('prices $what', async ({ instance, quote, price }) => {
    await seed();
    bench.instance = instance;
    bench.spotPrice = quote;

    await handle(fixture('batch-running'));

    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.usdPerHour).toBe(price);
    expect(bench.recorded.priceLookups).toHaveLength(instance.lifecycle === 'spot' ? 1 : 0);
  });

  it.each([
    { what: 'the spot price history', fails: 'price', price: 0.19, instanceId: INSTANCE_ID },
    { what: 'the container instance', fails: 'instance', price: 0.19, instanceId: undefined },
  ])('records the start, metered from then on, when the lookup of $what fails past the SDK’s retries', async (c) => {
    await seed();
    const throttled = Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
    bench.instance = c.fails === 'instance' ? throttled : SPOT_INSTANCE;
    bench.spotPrice = c.fails === 'price' ? throttled : 0.1897;

    const result = await handle(fixture('batch-running'));

    expect(result).toEqual({ action: 'started', jobId: JOB_ID, attempt: 1 });
    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt).toMatchObject({ startedAt: T.started, status: 'RUNNING', usdPerHour: c.price });
    expect(attempt?.instanceId).toBe(c.instanceId);
    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('RUNNING');
    expect(publishedOf(bench.recorded, 'Job Started')).toHaveLength(1);
  });

  it('prices an attempt with no container instance (Fargate) at the tier’s price for its capacity', async () => {
    await seed({}, { capacity: 'on-demand', queue: 'trainyard-gpu-small-on-demand' });
    const event = fixtureWith('batch-running', (e) => {
      delete (e.detail.container as Record<string, unknown>).containerInstanceArn;
    });

    await handle(event);

    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt?.usdPerHour).toBe(0.526);
    expect(attempt?.instanceId).toBeUndefined();
    expect(bench.recorded.instanceLookups).toEqual([]);
  });

  it('replays of RUNNING change nothing and emit Job Started once', async () => {
    await seed();
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.1897;
    await handle(fixture('batch-running'));
    const afterFirst = await bench.snapshot();
    bench.spotPrice = 0.25; // a replay must not re-price the attempt

    await handle(fixture('batch-running'));
    await handle(fixture('batch-running'));

    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(publishedOf(bench.recorded, 'Job Started')).toHaveLength(1);
  });

  it('completes, on the retry, a delivery that recorded the start and failed to publish: announced once, job RUNNING', async () => {
    await seed();
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.1897;
    bench.failPublishes = 1;

    await expect(handle(fixture('batch-running'))).rejects.toThrow('Rate exceeded');
    const recorded = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(recorded).toMatchObject({ startedAt: T.started, usdPerHour: 0.1897 });
    expect(recorded?.startAnnounced).toBeUndefined();
    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('WAITING');

    expect(await handle(fixture('batch-running'))).toEqual({ action: 'started', jobId: JOB_ID, attempt: 1 });
    await handle(fixture('batch-running'));

    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([
      expect.objectContaining({ eventId: `${JOB_ID}/started/1`, batchJobId: BATCH_JOB_ID, usdPerHour: 0.1897 }),
    ]);
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.startAnnounced).toBe(true);
    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('RUNNING');
  });

  it('leaves a job that was cancelled meanwhile CANCELLED', async () => {
    await seed({ state: 'CANCELLED' });
    bench.instance = SPOT_INSTANCE;

    await handle(fixture('batch-running'));

    expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('CANCELLED');
    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.startedAt).toBe(T.started);
  });
});

describe('batch-events: SUCCEEDED and FAILED', () => {
  it('records stop and cost at the price recorded at the start, and the job’s cost so far over all attempts', async () => {
    await seed({ costSoFarUsd: 0.42 }, { attempt: 2 });
    await bench.jobs.putAttempt(
      attemptRecord({ attempt: 1, status: 'FAILED', startedAt: T.created, stoppedAt: T.created + 1, costUsd: 0.42 }),
    );
    const succeeded = fixtureWith('batch-succeeded', (e) => {
      (e.detail.tags as Record<string, string>)['trainyard:attempt'] = '2';
    });
    const running = fixtureWith('batch-running', (e) => {
      (e.detail.tags as Record<string, string>)['trainyard:attempt'] = '2';
    });
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.1897;
    await handle(running);

    const result = await handle(succeeded);

    expect(result).toEqual({ action: 'stopped', jobId: JOB_ID, attempt: 2 });
    // 0.1897 $/h × 2403 s ÷ 3600 = $0.12662475 → $0.126625 (to the micro-dollar); the job: 0.42 + 0.126625 → $0.55.
    expect(await bench.jobs.getAttempt(JOB_ID, 2)).toMatchObject({
      startedAt: T.started,
      stoppedAt: T.stopped,
      status: 'SUCCEEDED',
      usdPerHour: 0.1897,
      costUsd: 0.126625,
    });
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.55);
  });

  it('prices a stop at the spot price its start was recorded with meanwhile, not at the configured one', async () => {
    await seed();
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.25;
    // RUNNING is handled between the SUCCEEDED handler's read of the attempt (no price yet) and its write.
    const jobs = jobsRacingFirstRead(async () => {
      await handle(fixture('batch-running'));
    });

    const result = await createBatchEventsHandler(planeOf(jobs))(fixture('batch-succeeded'));

    expect(result).toEqual({ action: 'stopped', jobId: JOB_ID, attempt: 1 });
    // 0.25 $/h × 2403 s ÷ 3600 = $0.166875, the job's $0.17 (the configured $0.19/h would make it $0.13).
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({
      status: 'SUCCEEDED',
      stoppedAt: T.stopped,
      usdPerHour: 0.25,
      costUsd: 0.166875,
    });
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.17);
  });

  it('costs a reclaimed attempt whose RUNNING event never arrived at the tier’s price for its capacity', async () => {
    await seed({}, { capacity: 'on-demand', queue: 'trainyard-gpu-small-on-demand' });

    await handle(fixture('batch-failed-reclaimed'));

    // 0.526 $/h × 2403 s ÷ 3600 = $0.351105, the job's $0.35.
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({
      startedAt: T.started,
      stoppedAt: T.stopped,
      status: 'FAILED',
      usdPerHour: 0.526,
      costUsd: 0.351105,
    });
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.35);
  });

  it('costs an attempt cancelled before it started at $0', async () => {
    await seed();
    const cancelled = fixtureWith('batch-runnable', (e) => {
      e.detail.status = 'FAILED';
      e.detail.statusReason = 'Trainyard: cancelled by user';
      e.detail.stoppedAt = T.created + 30_000;
    });

    await handle(cancelled);

    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt).toMatchObject({ stoppedAt: T.created + 30_000, costUsd: 0, status: 'FAILED' });
    expect(attempt?.startedAt).toBeUndefined();
  });

  it('replays of SUCCEEDED (and a late RUNNING) change nothing', async () => {
    await seed();
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = 0.1897;
    await handle(fixture('batch-running'));
    await handle(fixture('batch-succeeded'));
    const afterFirst = await bench.snapshot();
    const published = bench.recorded.published.length;

    await handle(fixture('batch-succeeded'));
    await handle(fixture('batch-succeeded'));
    await handle(fixture('batch-running'));

    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(bench.recorded.published).toHaveLength(published);
    // The late RUNNING is this attempt's own Batch job: stale, not an orphan to stop.
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('announces the start when SUCCEEDED is handled before RUNNING, and the late RUNNING adds nothing', async () => {
    await seed();

    await handle(fixture('batch-succeeded'));
    const afterStop = await bench.snapshot();
    await handle(fixture('batch-running'));

    // Without RUNNING's price lookup, the attempt is priced at gpu-small's configured spot price.
    const tier = CONFIG.tiers.find((t) => t.id === 'gpu-small');
    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([
      expect.objectContaining({
        eventId: `${JOB_ID}/started/1`,
        occurredAt: '2026-11-20T14:01:05.000Z',
        batchJobId: BATCH_JOB_ID,
        usdPerHour: tier?.spotUsdPerHour,
      }),
    ]);
    expect(await bench.snapshot()).toEqual(afterStop);
  });

  it('announces, on AttemptOutcome’s retry, the start its first run recorded with the stop and failed to publish', async () => {
    await seed();
    const job = await bench.jobs.requireJob(JOB_ID);
    const looked = await bench.jobs.getAttempt(JOB_ID, 1);
    if (!looked) throw new Error('seeded attempt missing');
    const ended = parseBatchJob(fixture('batch-succeeded').detail);
    const plane = planeOf(bench.jobs);
    bench.failPublishes = 1;

    await expect(recordAttemptEnd(plane, job, looked, ended, new Date(T.stopped))).rejects.toThrow('Rate exceeded');
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ startedAt: T.started, stoppedAt: T.stopped });
    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([]);

    await recordAttemptEnd(plane, job, looked, ended, new Date(T.stopped));
    await handle(fixture('batch-succeeded'));

    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([
      expect.objectContaining({ eventId: `${JOB_ID}/started/1`, occurredAt: '2026-11-20T14:01:05.000Z' }),
    ]);
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({
      startAnnounced: true,
      outcome: { kind: 'succeeded' },
    });
  });

  it('changes no attempt field when AttemptOutcome recorded the stop first with the shared cost function', async () => {
    const running = { batchJobId: BATCH_JOB_ID, startedAt: T.started, usdPerHour: 0.1897, startAnnounced: true };
    await seed({}, { status: 'RUNNING', ...running });
    const stored = await bench.jobs.getAttempt(JOB_ID, 1);
    if (!stored) throw new Error('seeded attempt missing');
    const batchJob = parseBatchJob(fixture('batch-succeeded').detail);
    const tier = CONFIG.tiers.find((t) => t.id === 'gpu-small');
    if (!tier) throw new Error('gpu-small missing from config');
    const cost = costOfAttempt(stored, batchJob, tier);
    await bench.jobs.updateAttempt(
      JOB_ID,
      1,
      { stoppedAt: cost.stoppedAt, costUsd: cost.costUsd, status: 'SUCCEEDED' },
      'stoppedAt',
    );
    const attemptBefore = await bench.jobs.getAttempt(JOB_ID, 1);

    await handle(fixture('batch-succeeded'));

    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toEqual(attemptBefore);
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.13);
  });
});

describe('batch-events: a Batch job its attempt does not own is stopped, and billed if it ran', () => {
  const OTHER_BATCH_JOB = 'aaaaaaaa-0000-4000-8000-000000000000';
  // What AttemptOutcome or execution-ended writes for an attempt Batch had no job for when they looked.
  const NOT_RUN = { status: 'FAILED', stoppedAt: T.created + 60_000, costUsd: 0 } as const;
  const orphaned = { action: 'orphaned', jobId: JOB_ID, attempt: 1 };

  it.each(['batch-runnable', 'batch-running'])(
    'terminates, on %s, a second Batch job claiming an attempt that has one, and writes nothing',
    async (name) => {
      await seed({}, { batchJobId: OTHER_BATCH_JOB, status: 'RUNNING' });
      const before = await bench.snapshot();

      expect(await handle(fixture(name))).toEqual(orphaned);

      expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.orphaned }]);
      expect(await bench.snapshot()).toEqual(before);
      expect(bench.recorded.published).toEqual([]);
    },
  );

  it.each(['batch-runnable', 'batch-running'])(
    'terminates, on %s, the Batch job of an attempt recorded as not run, and writes nothing',
    async (name) => {
      await seed({}, NOT_RUN);
      const before = await bench.snapshot();

      expect(await handle(fixture(name))).toEqual(orphaned);

      expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.orphaned }]);
      expect(await bench.snapshot()).toEqual(before);
      expect(bench.recorded.published).toEqual([]);
    },
  );

  it.each(['batch-runnable', 'batch-running'])(
    'terminates, on %s, the attempt’s own Batch job once its end was recorded without Batch’s word, and writes nothing',
    async (name) => {
      // Its end recorded without Batch's word (estimated, as forgotten): the job must not run on unwatched.
      await seed(
        {},
        {
          batchJobId: BATCH_JOB_ID,
          status: 'FAILED',
          startedAt: T.started,
          stoppedAt: T.started + 60_000,
          endUnseen: true,
        },
      );
      const before = await bench.snapshot();

      expect(await handle(fixture(name))).toEqual(orphaned);

      expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.orphaned }]);
      expect(await bench.snapshot()).toEqual(before);
      expect(bench.recorded.published).toEqual([]);
    },
  );

  it('says the job ended when the orphan’s job is already terminal', async () => {
    await seed({ state: 'FAILED' }, NOT_RUN);

    await handle(fixture('batch-running'));

    expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.jobEnded }]);
  });

  // The fixtures' orphan: 2403 billed seconds at the spot price history's $0.25 an hour, $0.166875 (a job's total is
  // rounded to the cent: $0.17 on its own).
  const ORPHAN_RUN = {
    capacity: 'spot',
    startedAt: T.started,
    stoppedAt: T.stopped,
    usdPerHour: 0.25,
    costUsd: 0.166875,
  };
  const PERIOD = new Date(T.created).toISOString().slice(0, 7);

  function onSpotAt(usdPerHour: number) {
    bench.instance = SPOT_INSTANCE;
    bench.spotPrice = usdPerHour;
  }

  it('bills an orphan that ran, once: its cost on its attempt and in the job’s, without terminating it', async () => {
    await seed({}, NOT_RUN);
    onSpotAt(0.25);
    const attemptBefore = await bench.jobs.getAttempt(JOB_ID, 1);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toEqual({
      ...attemptBefore,
      orphans: { [BATCH_JOB_ID]: ORPHAN_RUN },
    });
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.17);
    expect(bench.recorded.priceLookups).toEqual([{ instanceType: 'g4dn.xlarge', az: 'us-east-1a', atMs: T.started }]);
    const billed = await bench.snapshot();
    // Redelivered, or another end state of the same Batch job: recorded once.
    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);
    expect(await handle(fixture('batch-failed-reclaimed'))).toEqual(orphaned);
    expect(await bench.snapshot()).toEqual(billed);
    expect(bench.recorded.terminated).toEqual([]);
    expect(bench.recorded.published).toEqual([]);
  });

  it('records nothing for an orphan that ended before it started', async () => {
    await seed({}, NOT_RUN);
    const before = await bench.snapshot();
    const neverStarted = fixtureWith('batch-failed-reclaimed', (event) => {
      delete event.detail.startedAt;
      for (const a of event.detail.attempts as Array<Record<string, unknown>>) delete a.startedAt;
    });

    expect(await handle(neverStarted)).toEqual(orphaned);

    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('charges a job still holding its reservation at once, out of what it holds', async () => {
    await seed({}, NOT_RUN);
    await bench.ledger.ensureBudget('team:vision', PERIOD, 10);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 0.5, PERIOD);
    onSpotAt(0.25);

    await handle(fixture('batch-succeeded'));

    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.17);
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.17, reservedUsd: 0.33 });
    // A redelivery charges nothing twice, nor does the settlement: it adds only what was not charged yet.
    await handle(fixture('batch-succeeded'));
    await bench.ledger.settle(JOB_ID, 0.17);
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.17, reservedUsd: 0 });
  });

  it('charges a job paused for budget, which gave its reservation back, out of available', async () => {
    await seed({ state: 'PAUSED_BUDGET' }, NOT_RUN);
    await bench.ledger.ensureBudget('team:vision', PERIOD, 1);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 0.5, PERIOD);
    await bench.ledger.returnHeld(JOB_ID);
    onSpotAt(0.25);

    await handle(fixture('batch-succeeded'));

    // Nothing meters a paused job: without this charge the $0.17 would stay available to other jobs until it resumed.
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({
      spentUsd: 0.17,
      reservedUsd: 0,
      availableUsd: 0.83,
    });
  });

  it('charges an orphan that ends after its job was settled to the budget, with the alert it crosses', async () => {
    await withWorkspace();
    // Attempt 1 cost $0.30 on its own Batch job and the job was settled so; a second Batch job for it ends now.
    await seed(
      { state: 'FAILED', costSoFarUsd: 0.3 },
      { batchJobId: OTHER_BATCH_JOB, status: 'FAILED', startedAt: T.created, stoppedAt: T.started, costUsd: 0.3 },
    );
    await bench.ledger.ensureBudget('team:vision', PERIOD, 0.6);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 0.2, PERIOD);
    await bench.ledger.settle(JOB_ID, 0.3);
    onSpotAt(0.25);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    // $0.30 + $0.17 = $0.47 of $0.60 is 78 %: past the 70 % warning, which $0.30 (50 %) was not.
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.47);
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.47, reservedUsd: 0 });
    const alert = expect.objectContaining({ scope: 'team:vision', thresholdPercent: 70, spentUsd: 0.47 });
    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([alert]);
    // The job's Job Failed went out at $0.30: the amendment says what was added and what the job costs now.
    const amended = expect.objectContaining({
      eventId: `${JOB_ID}/cost-amended/${BATCH_JOB_ID}`,
      occurredAt: '2026-11-20T14:41:07.250Z',
      jobId: JOB_ID,
      team: 'vision',
      state: 'FAILED',
      cause: 'orphan',
      attempt: 1,
      batchJobId: BATCH_JOB_ID,
      capacity: 'spot',
      addedUsd: 0.166875,
      costUsd: 0.47,
    });
    expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended]);
    const charged = await bench.snapshot();
    await handle(fixture('batch-succeeded'));
    expect(await bench.snapshot()).toEqual(charged);
    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([alert]);
    // A redelivery announces it again, with the same id and figures, for consumers to drop.
    expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended, amended]);
  });

  /** A job Finalize ended FAILED at $0.30, its files written, whose attempt 1 has another Batch job still to end. */
  async function finalizedWithOrphanToCome() {
    await withWorkspace();
    const failed = { kind: 'app-error', reason: 'exit 1', resumable: false } as const;
    await seed(
      { state: 'RUNNING' },
      {
        batchJobId: OTHER_BATCH_JOB,
        status: 'FAILED',
        startedAt: T.created,
        stoppedAt: T.started,
        costUsd: 0.3,
        outcome: failed,
      },
    );
    const finalize = createFinalizeHandler({ ...planeOf(bench.jobs), events: bench.ports.events });
    return finalize({ jobId: JOB_ID, finalState: 'FAILED', reason: 'exit 1' });
  }

  it('rewrites the ended job’s summary and report with the orphan’s cost, keeping when the job finished', async () => {
    // Finalize ends the job at $0.30 and writes its files; then a second Batch job of attempt 1 ends.
    const finalized = await finalizedWithOrphanToCome();
    expect(finalized.costUsd).toBe(0.3);
    const before = await filesOf();
    expect(before.summary).toMatchObject({ costUsd: 0.3, finishedAt: bench.clock().toISOString() });
    expect(before.report).toContain('<dt>Total cost</dt><dd>$0.30</dd>');
    expect(before.report).not.toContain('orphaned Batch job');
    expect(before.report).toContain('<footer>Written by Trainyard when the job finished (2026-11-20 14:02:05 UTC).');
    onSpotAt(0.25);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    // $0.30 + the orphan's $0.17: the files say what the job and its budget were charged.
    const after = await filesOf();
    expect(after.summary).toMatchObject({
      job: { state: 'FAILED', costSoFarUsd: 0.47 },
      costUsd: 0.47,
      finishedAt: before.summary.finishedAt,
    });
    expect(after.summary.attempts[0].orphans).toEqual({ [BATCH_JOB_ID]: ORPHAN_RUN });
    expect(after.report).toContain('<dt>Total cost</dt><dd>$0.47</dd>');
    expect(after.report).toContain(`<strong>orphaned Batch job</strong> ${BATCH_JOB_ID}`);
    expect(after.report).toContain(
      '<footer>Written by Trainyard when the job finished (2026-11-20 14:02:05 UTC), and again with the cost of an orphaned Batch job that stopped at 2026-11-20 14:41:07 UTC.',
    );
    // A redelivery writes the same files again.
    await handle(fixture('batch-succeeded'));
    expect(await filesOf()).toEqual(after);
  });

  it('reads a summary.json a job replaced with more than a document holds no further, and rewrites it from the records', async () => {
    await finalizedWithOrphanToCome();
    // The team's jobs can write its folder: one puts a "summary" of more than MAX_JSON_DOCUMENT_BYTES there.
    const keys = jobKeysFor('vision', JOB_ID);
    await bench.workspace.put(
      keys.summary,
      `{"finishedAt":"2030-01-01T00:00:00.000Z","pad":"${' '.repeat(MAX_JSON_DOCUMENT_BYTES)}"}`,
    );
    const read = vi.spyOn(bench.workspace, 'get');
    onSpotAt(0.25);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    expect(read.mock.calls.map(([key]) => key)).not.toContain(keys.summary);
    const after = await filesOf();
    const job = await bench.jobs.requireJob(JOB_ID);
    // Too large to be the summary Finalize wrote: its finishedAt is not trusted, the job's last update stands in.
    expect(after.summary).toMatchObject({ costUsd: 0.47, finishedAt: job.updatedAt });
  });

  it('writes no files for an ended job whose Finalize has not written them: its read after writing sees the orphan', async () => {
    await withWorkspace();
    await seed(
      { state: 'FAILED', costSoFarUsd: 0.3 },
      { batchJobId: OTHER_BATCH_JOB, status: 'FAILED', startedAt: T.created, stoppedAt: T.started, costUsd: 0.3 },
    );
    onSpotAt(0.25);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.47);
    expect(await filesOf()).toEqual({ summary: undefined, report: undefined });
  });

  it('announces no amendment for a job still running: its final event will carry the orphan’s cost', async () => {
    await seed(
      { state: 'RUNNING' },
      { batchJobId: OTHER_BATCH_JOB, status: 'RUNNING', startedAt: T.created, usdPerHour: 0.19, startAnnounced: true },
    );
    onSpotAt(0.25);

    expect(await handle(fixture('batch-succeeded'))).toEqual(orphaned);

    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.orphans).toEqual({ [BATCH_JOB_ID]: ORPHAN_RUN });
    expect(bench.recorded.published).toEqual([]);
  });

  /** The jobs port, with "not run" written right after the handler's first read of the attempt. */
  function notRunAfterFirstRead(): JobStore {
    return jobsRacingFirstRead(async (read) => {
      const job = await bench.jobs.requireJob(read.jobId);
      await recordAttemptEnd(
        planeOf(bench.jobs),
        job,
        read,
        { missing: 'SubmitJob failed' },
        new Date(T.created + 60_000),
      );
    });
  }

  it.each(['batch-runnable', 'batch-running'])(
    'terminates, on %s, a Batch job whose attempt was recorded as not run after the handler read it',
    async (name) => {
      await seed();
      const raced = createBatchEventsHandler(planeOf(notRunAfterFirstRead()));

      expect(await raced(fixture(name))).toEqual(orphaned);

      expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.orphaned }]);
      const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
      expect(attempt).toMatchObject({ status: 'FAILED', stoppedAt: T.created + 60_000, costUsd: 0 });
      expect(attempt?.batchJobId).toBeUndefined();
      expect(attempt?.startedAt).toBeUndefined();
      expect((await bench.jobs.requireJob(JOB_ID)).state).toBe('WAITING');
      // Its start was never recorded, so it is never announced.
      expect(publishedOf(bench.recorded, 'Job Started')).toEqual([]);
    },
  );

  it('bills, on SUCCEEDED, a Batch job whose attempt was recorded as not run after the handler read it', async () => {
    await seed();
    onSpotAt(0.25);
    const raced = createBatchEventsHandler(planeOf(notRunAfterFirstRead()));

    expect(await raced(fixture('batch-succeeded'))).toEqual(orphaned);

    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt).toMatchObject({ status: 'FAILED', stoppedAt: T.created + 60_000, costUsd: 0 });
    expect(attempt?.startedAt).toBeUndefined();
    expect(attempt?.orphans).toEqual({ [BATCH_JOB_ID]: ORPHAN_RUN });
    expect((await bench.jobs.requireJob(JOB_ID)).costSoFarUsd).toBe(0.17);
    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it.each([
    { what: 'queued', events: ['batch-runnable'], status: 'RUNNABLE' },
    { what: 'ended', events: ['batch-runnable', 'batch-running', 'batch-succeeded'], status: 'SUCCEEDED' },
  ])('refuses to record "not run" once batch-events recorded a Batch job for the attempt ($what)', async (c) => {
    await seed();
    const looked = await bench.jobs.getAttempt(JOB_ID, 1);
    for (const name of c.events) await handle(fixture(name));
    const before = await bench.jobs.getAttempt(JOB_ID, 1);
    const plane = planeOf(bench.jobs);
    const job = await bench.jobs.requireJob(JOB_ID);

    await expect(
      recordAttemptEnd(plane, job, looked as NonNullable<typeof looked>, { missing: 'not found' }, new Date(T.created)),
    ).rejects.toThrow(AttemptGotBatchJob);

    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt).toEqual(before);
    expect(attempt).toMatchObject({ batchJobId: BATCH_JOB_ID, status: c.status });
    expect(attempt?.outcome).toBeUndefined();
    expect(bench.recorded.terminated).toEqual([]);
  });
});

describe('an attempt whose Batch job Batch no longer reports, with its end recorded by batch-events', () => {
  it.each([
    { what: 'read after batch-events recorded the end', readAfterEnd: true },
    { what: 'read before, so the write is refused', readAfterEnd: false },
  ])('keeps the recorded stop and cost, and says so ($what)', async ({ readAfterEnd }) => {
    await withWorkspace();
    await seed();
    for (const name of ['batch-runnable', 'batch-running']) await handle(fixture(name));
    const running = await bench.jobs.getAttempt(JOB_ID, 1);
    await handle(fixture('batch-succeeded'));
    const recorded = await bench.jobs.getAttempt(JOB_ID, 1);
    const looked = readAfterEnd ? recorded : running;
    const job = await bench.jobs.requireJob(JOB_ID);

    const outcome = await recordAttemptEnd(
      planeOf(bench.jobs),
      job,
      looked as NonNullable<typeof looked>,
      { missing: 'not found' },
      new Date(T.stopped + 8 * 86_400_000),
    );

    const reason = `Batch no longer reports its job ${BATCH_JOB_ID} (it keeps an ended job for about 7 days), so when and how the attempt ended is unknown; its stop and cost are as recorded`;
    expect(outcome).toEqual({ kind: 'infra-error', reason, resumable: true });
    const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
    expect(attempt).toEqual({ ...recorded, outcome });
    expect(attempt).toMatchObject({ status: 'SUCCEEDED', startedAt: T.started, stoppedAt: T.stopped });
  });
});

describe('batch-events: an attempt whose end comes after its job ended', () => {
  const PERIOD = new Date(T.created).toISOString().slice(0, 7);
  const OWN_BATCH_JOB_1 = 'bbbbbbbb-0000-4000-8000-000000000000';
  /** Attempt 1 reclaimed at $0.30 on its own Batch job. */
  const RECLAIMED = attemptRecord({
    attempt: 1,
    status: 'FAILED',
    batchJobId: OWN_BATCH_JOB_1,
    startedAt: T.created - 3_600_000,
    stoppedAt: T.created - 1_800_000,
    costUsd: 0.3,
    outcome: { kind: 'reclaimed', reason: 'Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated.', resumable: true },
  });
  /** The fixtures' Batch job, as attempt 2's. */
  const asAttempt2 = (name: string) =>
    fixtureWith(name, (e) => {
      (e.detail.tags as Record<string, string>)['trainyard:attempt'] = '2';
      e.detail.jobName = `${JOB_ID}-a2`;
    });

  it('stops, bills and announces an attempt still running when its job ended (finalized by an earlier release)', async () => {
    await withWorkspace();
    // Budget-watch accrued $0.42; the job ended at $0.30 and its files were written; attempt 2, at $0.19 an hour, ran
    // on. Finalize now waits for every attempt to end before it settles: a job it settled before this release did
    // not, and its attempt's end is charged here.
    await bench.jobs.createJob(jobRecord({ state: 'RUNNING', costSoFarUsd: 0.3 }));
    await bench.jobs.putAttempt(RECLAIMED);
    await bench.ledger.ensureBudget('team:vision', PERIOD, 400);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, PERIOD);
    await bench.ledger.accrue(JOB_ID, 0.42);
    const finalize = createFinalizeHandler(planeOf(bench.jobs));
    expect(await finalize({ jobId: JOB_ID, finalState: 'FAILED', reason: 'a step failed' })).toMatchObject({
      costUsd: 0.3,
    });
    const running = { attempt: 2, status: 'RUNNING', batchJobId: BATCH_JOB_ID, startedAt: T.started } as const;
    await bench.jobs.putAttempt(attemptRecord({ ...running, usdPerHour: 0.19, startAnnounced: true }));
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.3 });

    expect(await handle(asAttempt2('batch-succeeded'))).toEqual({ action: 'stopped', jobId: JOB_ID, attempt: 2 });

    // 2403 billed seconds at $0.19 an hour: $0.126825; the job, its budget and its files say $0.30 + that = $0.43.
    expect(await bench.jobs.getAttempt(JOB_ID, 2)).toMatchObject({ costUsd: 0.126825, endedAfterJob: true });
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'FAILED', costSoFarUsd: 0.43 });
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.43, reservedUsd: 0 });
    const amended = expect.objectContaining({
      eventId: `${JOB_ID}/cost-amended/${BATCH_JOB_ID}`,
      state: 'FAILED',
      cause: 'late-stop',
      attempt: 2,
      batchJobId: BATCH_JOB_ID,
      capacity: 'spot',
      addedUsd: 0.126825,
      costUsd: 0.43,
      summary: `Job ${JOB_ID} (team vision) cost $0.13 more after it ended FAILED: attempt 2's Batch job ${BATCH_JOB_ID} on spot was still running when the job ended, until Trainyard stopped it. The job's cost is now $0.43, charged to its budget.`,
    });
    expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended]);
    const files = await filesOf();
    expect(files.summary).toMatchObject({ costUsd: 0.43, job: { costSoFarUsd: 0.43 } });
    expect(files.report).toContain('<dt>Total cost</dt><dd>$0.43</dd>');
    expect(files.report).toContain('and again with the cost of attempt 2 that stopped at 2026-11-20 14:41:07 UTC.');
    // A redelivery changes nothing and announces it again, with the same id.
    const after = await bench.snapshot();
    await handle(asAttempt2('batch-succeeded'));
    expect(await bench.snapshot()).toEqual(after);
    expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended, amended]);
  });

  describe('an attempt billed while its end was unseen, whose end Batch reports later', () => {
    // Billed to its last sign of running, 600 s after its start, at $0.19 an hour: $0.031667, the job's $0.03. Batch's
    // record (the fixture) says it ran 2403 billed seconds: $0.126825, the job's $0.13.
    const UNSEEN = {
      batchJobId: BATCH_JOB_ID,
      status: 'FAILED',
      startedAt: T.started,
      stoppedAt: T.started + 600_000,
      usdPerHour: 0.19,
      costUsd: 0.031667,
      endUnseen: true,
      startAnnounced: true,
    } as const;

    it('bills what Batch’s record adds to a settled job, once, and announces it as an unseen end', async () => {
      await withWorkspace();
      await seed({ state: 'FAILED', costSoFarUsd: 0.03 }, UNSEEN);
      await bench.ledger.ensureBudget('team:vision', PERIOD, 400);
      await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, PERIOD);
      await bench.ledger.settle(JOB_ID, 0.03);

      expect(await handle(fixture('batch-succeeded'))).toEqual({ action: 'stopped', jobId: JOB_ID, attempt: 1 });

      const attempt = await bench.jobs.getAttempt(JOB_ID, 1);
      expect(attempt).toMatchObject({
        status: 'SUCCEEDED',
        stoppedAt: T.stopped,
        costUsd: 0.126825,
        unseenCostUsd: 0.031667,
        endedAfterJob: true,
      });
      expect(attempt?.endUnseen).toBeUndefined();
      expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'FAILED', costSoFarUsd: 0.13 });
      expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 0.13, reservedUsd: 0 });
      const amended = expect.objectContaining({
        eventId: `${JOB_ID}/cost-amended/${BATCH_JOB_ID}`,
        cause: 'unseen-end',
        attempt: 1,
        // $0.126825 − $0.031667, to the micro-dollar (the summary says it to the cent).
        addedUsd: 0.095158,
        costUsd: 0.13,
        summary: `Job ${JOB_ID} (team vision) cost $0.10 more after it ended FAILED: attempt 1's Batch job ${BATCH_JOB_ID} on spot, billed to its last sign of running when Batch did not report it, ran longer by Batch's own record. The job's cost is now $0.13, charged to its budget.`,
      });
      expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended]);
      // A redelivery changes nothing and announces the same amendment, with the same id.
      const after = await bench.snapshot();
      await handle(fixture('batch-succeeded'));
      expect(await bench.snapshot()).toEqual(after);
      expect(publishedOf(bench.recorded, 'Job Cost Amended')).toEqual([amended, amended]);
    });

    it('records the start Batch reports when it was recorded at the last sign of running (RUNNING never seen)', async () => {
      // Recorded as starting 300 s after Batch's start: the last sign of it running, since its RUNNING event was lost.
      await seed(
        { state: 'RUNNING', costSoFarUsd: 0.03, counters: { ...jobRecord().counters, attempts: 1 } },
        { ...UNSEEN, startedAt: T.started + 300_000, stoppedAt: T.started + 300_000 + 600_000 },
      );

      await handle(fixture('batch-succeeded'));

      expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({
        startedAt: T.started,
        stoppedAt: T.stopped,
        costUsd: 0.126825,
      });
    });

    it('puts the longer run on the job’s cost while the job goes on, announcing nothing', async () => {
      await seed({ state: 'RUNNING', costSoFarUsd: 0.03, counters: { ...jobRecord().counters, attempts: 1 } }, UNSEEN);

      await handle(fixture('batch-succeeded'));

      expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ costUsd: 0.126825, unseenCostUsd: 0.031667 });
      expect((await bench.jobs.getAttempt(JOB_ID, 1))?.endedAfterJob).toBeUndefined();
      expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'RUNNING', costSoFarUsd: 0.13 });
      expect(bench.recorded.published).toEqual([]);
    });

    it('keeps the billed end when Batch’s record costs no more (the least it ran was billed)', async () => {
      // Billed to a sign of running after Batch's recorded stop: $0.16, more than Batch's $0.13.
      await seed({ state: 'FAILED', costSoFarUsd: 0.16 }, { ...UNSEEN, stoppedAt: T.stopped + 600_000, costUsd: 0.16 });
      const before = await bench.snapshot();

      await handle(fixture('batch-succeeded'));

      expect(await bench.snapshot()).toEqual(before);
      expect(bench.recorded.published).toEqual([]);
    });

    it('records the longer run once when two deliveries race (the second finds it recorded)', async () => {
      await seed({ state: 'RUNNING', costSoFarUsd: 0.03, counters: { ...jobRecord().counters, attempts: 1 } }, UNSEEN);
      // The second delivery reads the attempt as billed, then the first records Batch's end before it writes.
      handle = createBatchEventsHandler(
        planeOf(
          jobsRacingFirstRead(
            async () => void (await createBatchEventsHandler(planeOf(bench.jobs))(fixture('batch-succeeded'))),
          ),
        ),
      );

      await handle(fixture('batch-succeeded'));

      expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ costUsd: 0.126825, unseenCostUsd: 0.031667 });
      expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ costSoFarUsd: 0.13 });
    });
  });

  it('terminates an ended job’s attempt when Batch reports it queued or running', async () => {
    await seed({ state: 'FAILED' }, {});

    await handle(fixture('batch-running'));

    expect(bench.recorded.terminated).toEqual([{ batchJobId: BATCH_JOB_ID, reason: TERMINATE_REASONS.jobEnded }]);
    expect(await bench.jobs.getAttempt(JOB_ID, 1)).toMatchObject({ batchJobId: BATCH_JOB_ID, status: 'RUNNING' });
  });

  it('amends nothing for a stop recorded before the job ended, when its SUCCEEDED comes after', async () => {
    await withWorkspace();
    // AttemptOutcome recorded the stop and Finalize settled the job with it; Batch's event arrives afterwards.
    const stop = { batchJobId: BATCH_JOB_ID, status: 'SUCCEEDED', startedAt: T.started, stoppedAt: T.stopped };
    await seed(
      { state: 'SUCCEEDED', costSoFarUsd: 0.13 },
      { ...stop, usdPerHour: 0.19, costUsd: 0.13, startAnnounced: true },
    );
    await bench.ledger.ensureBudget('team:vision', PERIOD, 400);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], 1, PERIOD);
    await bench.ledger.settle(JOB_ID, 0.13);
    const before = await bench.snapshot();

    expect(await handle(fixture('batch-succeeded'))).toEqual({ action: 'stopped', jobId: JOB_ID, attempt: 1 });

    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published).toEqual([]);
    expect(await filesOf()).toEqual({ summary: undefined, report: undefined });
  });
});

describe('JobStore.recordOrphanRun', () => {
  const RUN = {
    capacity: 'spot',
    startedAt: T.started,
    stoppedAt: T.stopped,
    usdPerHour: 0.25,
    costUsd: 0.17,
  } as const;

  it('records each Batch job once: the first figures stay, and a second Batch job is added beside them', async () => {
    await seed();

    expect(await bench.jobs.recordOrphanRun(JOB_ID, 1, 'b-1', RUN)).toBe(true);
    expect(await bench.jobs.recordOrphanRun(JOB_ID, 1, 'b-1', { ...RUN, costUsd: 9 })).toBe(false);
    expect(await bench.jobs.recordOrphanRun(JOB_ID, 1, 'b-2', { ...RUN, capacity: 'on-demand' })).toBe(true);

    expect((await bench.jobs.getAttempt(JOB_ID, 1))?.orphans).toEqual({
      'b-1': RUN,
      'b-2': { ...RUN, capacity: 'on-demand' },
    });
  });

  it('refuses an attempt that does not exist and a malformed run, writing nothing', async () => {
    await seed();
    const before = await bench.snapshot();

    await expect(bench.jobs.recordOrphanRun(JOB_ID, 2, 'b-1', RUN)).rejects.toThrow(
      new JobNotFound(`${JOB_ID} attempt 2`),
    );
    await expect(bench.jobs.recordOrphanRun(JOB_ID, 1, 'b-1', { ...RUN, costUsd: -1 })).rejects.toBeInstanceOf(
      InvalidJobRecord,
    );
    expect(await bench.snapshot()).toEqual(before);
  });
});
