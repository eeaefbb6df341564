// The budget watch against dynalite (jobs, budgets) and s3rver (progress.json), with AWS's documented
// "Scheduled Event". Figures are worked out by hand: price × billed seconds ÷ 3600, rounded to the cent.
//
// The tick is 2026-11-20T14:30:00Z; running attempts started at 14:01:05, so they have run 1735 s:
//   spot at the tier's 0.19 $/h:       0.19 × 1735 ÷ 3600 = 0.09157 → $0.09
//   on-demand at 0.526 $/h:            0.526 × 1735 ÷ 3600 = 0.25350 → $0.25
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BudgetWatchIncomplete, createBudgetWatchHandler } from '../../lambdas/budget-watch/budget-watch';
import { parseBatchJob } from '../../lambdas/domain/batch-job';
import { TERMINATE_REASONS } from '../../lambdas/domain/batch-reasons';
import type { EventEntry } from '../../lambdas/domain/events';
import type { JobRecord } from '../../lambdas/domain/job';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import type { TierSpotRecord } from '../../lambdas/domain/tier-spot';
import type { DocumentClient } from '../../lambdas/shared/dynamo';
import { InvalidEvent } from '../../lambdas/shared/event-schemas';
import { JobStore, jobItem } from '../../lambdas/shared/job-store';
import type { BatchControl } from '../../lambdas/shared/ports';
import { extractMetrics } from '../support/emf';
import {
  attemptRecord,
  CONFIG,
  type EventBench,
  fixture,
  fixtureWith,
  jobRecord,
  publishedOf,
  startEventBench,
  T,
} from './event-bench';

const PERIOD = '2026-11';
const TICK_ISO = '2026-11-20T14:30:00.000Z';
const ESTIMATE = { costUsd: 1, runtimeSeconds: 3600, confidence: 'medium' as const, basis: 'test estimate' };

let bench: EventBench;
let team = 0;
let currentTeam = 'vision';

beforeAll(async () => {
  bench = await startEventBench({ withS3: true, now: new Date(TICK_ISO) });
});

afterAll(async () => {
  await bench.stop();
});

// Every test gets its own team (and so its own jobs and budget); the watch is configured with that team only, so
// tests share one engine without seeing each other's data.
function configForCurrentTeam() {
  return { ...CONFIG, teams: [{ id: currentTeam, principals: [], monthlyBudgetUsd: 400, fairShareWeight: 1 }] };
}

beforeEach(() => {
  team += 1;
  currentTeam = `team-${team}`;
  bench.resetRecorded();
});

/** Stores a tier's spot record as it is, whatever was there. */
async function storeTierSpot(record: TierSpotRecord): Promise<void> {
  await bench.jobs.updateTierSpot(record.tier, () => record);
}

/** An events port whose PutEvents is throttled for batches holding any of `detailTypes`, the others going out. */
function throttledEvents(detailTypes: readonly string[]) {
  return {
    async publish(entries: readonly EventEntry[]) {
      if (entries.some((e) => detailTypes.includes(e.DetailType))) {
        throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
      }
      await bench.ports.events.publish(entries);
    },
  };
}

/** The scheduled event `minutes` after the tick. */
function tickAt(minutes: number) {
  return {
    ...(fixture('scheduled-event') as Record<string, unknown>),
    time: new Date(Date.parse(TICK_ISO) + minutes * 60_000).toISOString().replace('.000', ''),
  };
}

function id(base: string): string {
  return `${base}-${team}`;
}

// The spot placement-score probe: there is no local EC2 engine, so a fake FleetFacts answers in the port's shape
// (true / false / undefined = could not tell) and records the instance types of each call.
let spotAnswer: boolean | undefined;
const probed: string[][] = [];
/** gpu-small's instance types as the probe asks for them: distinct and sorted. */
const GPU_SMALL_TYPES = ['g4dn.xlarge', 'g5.xlarge', 'g6.xlarge'];

beforeEach(async () => {
  spotAnswer = undefined;
  probed.length = 0;
  bench.batchJobs = [];
  // The tiers' spot records are shared by every team: each test starts without them.
  for (const tier of CONFIG.tiers)
    await bench.dynamo.doc.request('DeleteItem', {
      TableName: bench.dynamo.tables.jobs,
      Key: { pk: { S: `TIERSPOT#${tier.id}` }, sk: { S: 'META' } },
    });
});

function watch(
  options = {},
  config = configForCurrentTeam(),
  events = bench.ports.events,
  batch: BatchControl = bench.ports.batch,
  lifecycle = bench.ports.lifecycle,
  jobs: JobStore = bench.jobs,
) {
  return createBudgetWatchHandler(
    {
      config,
      jobs,
      ledger: bench.ledger,
      workspace: bench.workspace,
      batch,
      events,
      lifecycle,
      metrics: bench.ports.metrics,
      clock: bench.clock,
      fleet: {
        ...bench.ports.fleet,
        async spotCapacityAvailable(instanceTypes) {
          probed.push([...instanceTypes]);
          return spotAnswer;
        },
      },
    },
    options,
  );
}

async function runningJob(
  jobId: string,
  options: {
    capacity?: 'spot' | 'on-demand';
    user?: string;
    createdAt?: string;
    job?: Partial<JobRecord>;
    reserveUsd?: number;
  } = {},
) {
  await bench.jobs.createJob(
    jobRecord({
      jobId,
      team: currentTeam,
      user: options.user ?? 'alice',
      createdAt: options.createdAt ?? new Date(T.created).toISOString(),
      estimate: ESTIMATE,
      bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'c'.repeat(64) },
      ...options.job,
    }),
  );
  const capacity = options.capacity ?? 'spot';
  await bench.jobs.putAttempt(
    attemptRecord({
      jobId,
      capacity,
      queue: `trainyard-gpu-small-${capacity}`,
      status: 'RUNNING',
      batchJobId: `batch-${jobId}`,
      startedAt: T.started,
      usdPerHour: capacity === 'spot' ? 0.19 : 0.526,
    }),
  );
  if (options.reserveUsd !== undefined) {
    await bench.ledger.reserve(jobId, [`team:${currentTeam}`], options.reserveUsd, PERIOD);
  }
}

async function writeProgress(jobId: string, step: number, total: number) {
  await bench.workspace.put(
    `teams/${currentTeam}/jobs/${jobId}/metrics/progress.json`,
    JSON.stringify({
      job_id: jobId,
      attempt: 1,
      state: 'running',
      step,
      total_steps: total,
      loss: 1.83,
      resumed_from_step: null,
      exit_code: null,
      updated_at: '2026-11-20T14:29:40.123Z',
    }),
  );
}

describe('budget watch: metering and progress', () => {
  it('patches progress from progress.json and accrues the running cost into the ledger', async () => {
    const jobId = id('meter');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, { reserveUsd: 1 });
    await writeProgress(jobId, 250, 1000);

    const result = await watch()(fixture('scheduled-event'));

    expect(result).toMatchObject({ metered: [jobId], progressUpdated: [jobId], budgetStopped: [], moved: [] });
    expect((await bench.jobs.requireJob(jobId)).progress).toEqual({
      step: 250,
      totalSteps: 1000,
      fraction: 0.25,
      loss: 1.83,
      updatedAt: '2026-11-20T14:29:40.123Z',
    });
    // $0.09 of the $1 reservation moved to spent.
    expect(await bench.ledger.usage(`team:${currentTeam}`, PERIOD)).toMatchObject({
      spentUsd: 0.09,
      reservedUsd: 0.91,
    });
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('adds recorded costs of ended attempts to the running attempt’s cost', async () => {
    const jobId = id('ended');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, { reserveUsd: 1 });
    await bench.jobs.putAttempt(
      attemptRecord({ jobId, attempt: 2, status: 'RUNNING', batchJobId: 'b2', startedAt: T.started, usdPerHour: 0.19 }),
    );
    await bench.jobs.updateAttempt(jobId, 1, { stoppedAt: T.started + 60_000, costUsd: 0.42 }, 'stoppedAt');

    await watch()(fixture('scheduled-event'));

    // 0.42 recorded + 0.09 running.
    expect(await bench.ledger.usage(`team:${currentTeam}`, PERIOD)).toMatchObject({ spentUsd: 0.51 });
  });

  it('replaying the same tick twice writes nothing and calls nothing', async () => {
    const jobId = id('replay');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.12);
    await runningJob(jobId, { reserveUsd: 0.01 });
    await writeProgress(jobId, 250, 1000);
    await watch()(fixture('scheduled-event'));
    const afterFirst = await bench.snapshot();
    const published = [...bench.recorded.published];

    await watch()(fixture('scheduled-event'));
    await watch()(fixture('scheduled-event'));

    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(bench.recorded.published).toEqual(published);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('sends on a later tick the alert a failed publish left behind, once, as of when it was crossed', async () => {
    const jobId = id('left-behind');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.12);
    await runningJob(jobId, { reserveUsd: 0.01 });
    const throttled = throttledEvents(['Budget Threshold Crossed']);
    const crossed = () => publishedOf(bench.recorded, 'Budget Threshold Crossed');

    // The accrual crosses warn ($0.09 of $0.12) and records it; PutEvents fails, so the run fails and nothing is out.
    await expect(watch({}, configForCurrentTeam(), throttled)(fixture('scheduled-event'))).rejects.toThrow(
      BudgetWatchIncomplete,
    );
    // The same tick again, and one a minute later, still take it as on its way (the writer may yet publish it).
    await watch()(fixture('scheduled-event'));
    await watch()(tickAt(0.5));
    expect(crossed()).toEqual([]);

    // Two minutes on ($0.10 spent, short of block at $0.12) it is published as of its crossing, then never again.
    await watch()(tickAt(2));
    await watch()(tickAt(4));
    expect(crossed()).toEqual([
      expect.objectContaining({
        eventId: `budget/team:${currentTeam}/${PERIOD}/threshold/70`,
        occurredAt: TICK_ISO,
        thresholdPercent: 70,
        spentUsd: 0.09,
      }),
    ]);
    expect((await bench.ledger.unpublishedAlerts(currentTeam, PERIOD)).crossings).toEqual([]);
  });

  it('emits Budget Threshold Crossed once when accrual reaches the warn threshold', async () => {
    const jobId = id('warn');
    // Limit $0.12, warn at 70 % = $0.084: $0.09 spent crosses it; block ($0.12) is not reached.
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.12);
    await runningJob(jobId, { reserveUsd: 0.01 });

    await watch()(fixture('scheduled-event'));
    await watch()(fixture('scheduled-event'));

    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([
      {
        version: '1',
        eventId: `budget/team:${currentTeam}/${PERIOD}/threshold/70`,
        occurredAt: TICK_ISO,
        team: currentTeam,
        scope: `team:${currentTeam}`,
        period: PERIOD,
        thresholdPercent: 70,
        limitUsd: 0.12,
        spentUsd: 0.09,
        reservedUsd: 0,
        summary: `Budget team:${currentTeam} for ${PERIOD} crossed 70 %: $0.09 spent and $0.00 reserved of $0.12.`,
      },
    ]);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('skips a running job the ledger has no reservation for, and meters the others', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(id('unreserved'));
    await runningJob(id('reserved'), { reserveUsd: 1, createdAt: '2026-11-20T14:00:01.000Z' });

    const result = await watch()(fixture('scheduled-event'));

    expect(result.metered).toEqual([id('reserved')]);
  });

  it('meters every other job when one record cannot be read, and fails the run naming it', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(id('good'), { reserveUsd: 1 });
    // A running job whose record an older or newer release (or a hand edit) left with a cost that is not a number.
    const bad = jobRecord({ jobId: id('bad'), team: currentTeam, createdAt: '2026-11-20T14:00:03.000Z' });
    await bench.dynamo.doc.put({
      TableName: bench.dynamo.tables.jobs,
      Item: { ...jobItem(bad), costSoFarUsd: 'oops' },
    });

    const run = watch()(fixture('scheduled-event'));

    await expect(run).rejects.toThrow(BudgetWatchIncomplete);
    await expect(run).rejects.toThrow(
      new RegExp(`JOB#${id('bad')}: InvalidJobRecord: invalid job record: costSoFarUsd`),
    );
    // The good job was metered all the same: its running cost is in the ledger.
    const usage = await bench.ledger.usage(`team:${currentTeam}`, PERIOD);
    expect(usage?.spentUsd).toBeGreaterThan(0);
  });

  it('handles at most maxJobsPerRun running jobs per run, in turns, and names the rest', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(id('newer'), { reserveUsd: 1, createdAt: '2026-11-20T14:00:05.000Z' });
    await runningJob(id('older'), { reserveUsd: 1, createdAt: '2026-11-20T14:00:01.000Z' });
    const capped = watch({ maxJobsPerRun: 1 });

    const first = await capped(tickAt(0));
    const second = await capped(tickAt(5));

    // One job each run, the other named; over two runs, each job once.
    expect(first.metered).toHaveLength(1);
    expect(first.deferred).toEqual([id('newer'), id('older')].filter((j) => !first.metered.includes(j)));
    expect(second.metered).toEqual(first.deferred);
    expect(second.deferred).toEqual(first.metered);
    // A replayed tick handles the jobs it handled the first time.
    expect((await capped(tickAt(0))).metered).toEqual(first.metered);
  });

  it('stops a job over its budget even when more jobs run than one run handles', async () => {
    // Alice's older job is never over budget; Bob's newer one is past his $0.05 (both have run 29 minutes at $0.19/h).
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await bench.ledger.setLimit(`user:${currentTeam}/bob`, PERIOD, 0.05);
    await runningJob(id('alice-old'), { createdAt: '2026-11-20T14:00:01.000Z' });
    await bench.ledger.reserve(id('alice-old'), [`team:${currentTeam}`, `user:${currentTeam}/alice`], 0.01, PERIOD);
    await runningJob(id('bob-new'), { user: 'bob', createdAt: '2026-11-20T14:00:05.000Z' });
    await bench.ledger.reserve(id('bob-new'), [`team:${currentTeam}`, `user:${currentTeam}/bob`], 0.01, PERIOD);
    const capped = watch({ maxJobsPerRun: 1 });

    const stopped = [...(await capped(tickAt(0))).budgetStopped, ...(await capped(tickAt(5))).budgetStopped];

    expect(stopped).toEqual([id('bob-new')]);
  });

  it('stops in the same run the jobs of a blocked scope that the cap leaves unmetered', async () => {
    // Bob is over his $0.05 with any of his jobs; one run meters only one of the three.
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await bench.ledger.setLimit(`user:${currentTeam}/bob`, PERIOD, 0.05);
    const jobs = [id('bob-1'), id('bob-2'), id('bob-3')];
    for (const [i, jobId] of jobs.entries()) {
      await runningJob(jobId, { user: 'bob', createdAt: `2026-11-20T14:00:0${i}.000Z` });
      await bench.ledger.reserve(jobId, [`team:${currentTeam}`, `user:${currentTeam}/bob`], 0.01, PERIOD);
    }

    const result = await watch({ maxJobsPerRun: 1 })(tickAt(0));

    expect(result.metered).toHaveLength(1);
    expect(result.deferred).toHaveLength(2);
    expect([...result.budgetStopped].sort()).toEqual([...jobs].sort());
    expect(bench.recorded.terminated.map((t) => t.reason)).toEqual(Array(3).fill(TERMINATE_REASONS.budgetPause));
  });

  it('fails the run naming a job it could not handle, after handling the others', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(id('lost-tier'), { job: { tier: 'gpu-gone' } });
    await runningJob(id('fine'), { reserveUsd: 1, createdAt: '2026-11-20T14:00:01.000Z' });

    const run = watch()(fixture('scheduled-event'));

    await expect(run).rejects.toThrow(BudgetWatchIncomplete);
    await expect(run).rejects.toThrow(
      `${id('lost-tier')}: UnknownJobTier: job ${id('lost-tier')} runs on tier "gpu-gone"`,
    );
    expect(await bench.ledger.usage(`team:${currentTeam}`, PERIOD)).toMatchObject({ spentUsd: 0.09 });
  });

  it('refuses an event that is not a schedule tick, writing nothing', async () => {
    await runningJob(id('bad-event'));
    const before = await bench.snapshot();

    const run = watch()(
      fixtureWith('scheduled-event', (e) => {
        e.source = 'aws.batch';
      }),
    );

    await expect(run).rejects.toThrow(InvalidEvent);
    await expect(run).rejects.toThrow('invalid "Scheduled Event" event: source: must be "aws.events"');
    expect(await bench.snapshot()).toEqual(before);
  });
});

describe('budget watch: exhausted budgets', () => {
  it('stops every running job of a blocked scope once, and emits Budget Exhausted naming them', async () => {
    // Limit $0.30; each job reserved $0.01 (available $0.28). The older spot job accrues $0.09 (available $0.20,
    // not blocked); the on-demand job then accrues $0.25 — $0.24 beyond its reservation — and available is −$0.04.
    // Committed: $0.34 ≥ 70 % ($0.21) and ≥ 100 % ($0.30).
    const older = id('older');
    const tipping = id('tipping');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.3);
    await runningJob(older, { reserveUsd: 0.01, createdAt: '2026-11-20T14:00:00.000Z' });
    await runningJob(tipping, {
      reserveUsd: 0.01,
      capacity: 'on-demand',
      user: 'bob',
      createdAt: '2026-11-20T14:00:05.000Z',
    });

    const result = await watch()(fixture('scheduled-event'));

    expect(result.budgetStopped).toEqual([older, tipping]);
    expect(bench.recorded.terminated).toEqual([
      { batchJobId: `batch-${older}`, reason: TERMINATE_REASONS.budgetPause },
      { batchJobId: `batch-${tipping}`, reason: TERMINATE_REASONS.budgetPause },
    ]);
    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed').map((e) => e.thresholdPercent)).toEqual([70, 100]);
    expect(publishedOf(bench.recorded, 'Budget Exhausted')).toEqual([
      {
        version: '1',
        eventId: `budget/team:${currentTeam}/${PERIOD}/exhausted/0.3`,
        occurredAt: TICK_ISO,
        team: currentTeam,
        scope: `team:${currentTeam}`,
        period: PERIOD,
        limitUsd: 0.3,
        spentUsd: 0.34,
        reservedUsd: 0,
        pausedJobIds: [older, tipping],
        summary: `Budget team:${currentTeam} for ${PERIOD} is exhausted: $0.34 spent and $0.00 reserved of $0.30; new jobs are refused and 2 running job(s) pause (${older}, ${tipping}).`,
      },
    ]);
    expect(await bench.jobs.listDecisions(older)).toEqual([
      expect.objectContaining({ seq: 1, moment: 'periodic-check', decision: 'stop-attempt 1 budget-pause' }),
    ]);

    const afterFirst = await bench.snapshot();
    await watch()(fixture('scheduled-event'));
    await watch()(fixture('scheduled-event'));

    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(bench.recorded.terminated).toHaveLength(2);
    expect(publishedOf(bench.recorded, 'Budget Exhausted')).toHaveLength(1);
  });

  it('announces each blocked scope a job is charged to (its team’s and its project’s), and stops the job once', async () => {
    // Team limit $0.20 and project limit $0.15, $0.01 reserved in each; the on-demand job accrues $0.25: past both.
    const job = id('both');
    const project = `project:${currentTeam}/llm`;
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.2);
    await bench.ledger.ensureBudget(project, PERIOD, 0.15);
    await runningJob(job, { capacity: 'on-demand', job: { project: 'llm' } });
    await bench.ledger.reserve(job, [`team:${currentTeam}`, project], 0.01, PERIOD);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.budgetStopped).toEqual([job]);
    expect(bench.recorded.terminated).toEqual([{ batchJobId: `batch-${job}`, reason: TERMINATE_REASONS.budgetPause }]);
    const exhausted = publishedOf(bench.recorded, 'Budget Exhausted');
    expect(exhausted.map((e) => [e.scope, e.pausedJobIds])).toEqual([
      [`team:${currentTeam}`, [job]],
      [project, [job]],
    ]);
    expect(await bench.jobs.listDecisions(job)).toEqual([
      expect.objectContaining({ decision: 'stop-attempt 1 budget-pause' }),
    ]);
  });

  it('stops a job whose accrual blocked its budget even when the crossing alert cannot be published', async () => {
    // Limit $0.20, $0.01 reserved; the on-demand job accrues $0.25: past warn (70 %) and block (100 %) at once.
    const job = id('unannounced');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.2);
    await runningJob(job, { reserveUsd: 0.01, capacity: 'on-demand' });
    const throttled = throttledEvents(['Budget Threshold Crossed']);

    const failed = watch({}, configForCurrentTeam(), throttled)(fixture('scheduled-event'));

    await expect(failed).rejects.toThrow(`${job}: ThrottlingException: Rate exceeded`);
    expect(bench.recorded.terminated).toEqual([{ batchJobId: `batch-${job}`, reason: TERMINATE_REASONS.budgetPause }]);
    expect(await bench.jobs.listDecisions(job)).toEqual([
      expect.objectContaining({ decision: 'stop-attempt 1 budget-pause' }),
    ]);
    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([]);
    // The crossings stay recorded for a later run to announce.
    expect(
      (await bench.ledger.unpublishedAlerts(currentTeam, PERIOD)).crossings.map((c) => c.crossing.threshold).sort(),
    ).toEqual(['block', 'warn']);
  });

  it('announces an exhaustion whose publish failed on a later tick, once, naming the jobs it stopped', async () => {
    // The budget of the first test in this block: both jobs tip it, and both are stopped before PutEvents fails.
    const older = id('older');
    const tipping = id('tipping');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.3);
    await runningJob(older, { reserveUsd: 0.01, createdAt: '2026-11-20T14:00:00.000Z' });
    await runningJob(tipping, { reserveUsd: 0.01, capacity: 'on-demand', createdAt: '2026-11-20T14:00:05.000Z' });
    const exhaustedThrottled = throttledEvents(['Budget Exhausted']);
    const exhausted = () => publishedOf(bench.recorded, 'Budget Exhausted');

    const failed = watch({}, configForCurrentTeam(), exhaustedThrottled)(fixture('scheduled-event'));
    await expect(failed).rejects.toThrow(BudgetWatchIncomplete);
    await expect(failed).rejects.toThrow(`team:${currentTeam} ${PERIOD}: ThrottlingException: Rate exceeded`);
    expect(bench.recorded.terminated.map((t) => t.batchJobId)).toEqual([`batch-${older}`, `batch-${tipping}`]);
    expect(exhausted()).toEqual([]);

    // The same tick again stops nothing twice and, within the minute's grace, announces nothing.
    await watch()(fixture('scheduled-event'));
    expect(exhausted()).toEqual([]);

    // Two minutes on it goes out as of when it was recorded, naming both jobs; then never again.
    await watch()(tickAt(2));
    await watch()(tickAt(4));
    expect(exhausted()).toEqual([
      expect.objectContaining({
        eventId: `budget/team:${currentTeam}/${PERIOD}/exhausted/0.3`,
        occurredAt: TICK_ISO,
        limitUsd: 0.3,
        spentUsd: 0.34,
        pausedJobIds: [older, tipping],
      }),
    ]);
    expect(bench.recorded.terminated).toHaveLength(2);
    expect((await bench.ledger.unpublishedAlerts(currentTeam, PERIOD)).exhaustions).toEqual([]);
  });

  it('names a job whose stop failed, and stops it on the next tick without announcing again', async () => {
    const older = id('older');
    const tipping = id('tipping');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.3);
    await runningJob(older, { reserveUsd: 0.01, createdAt: '2026-11-20T14:00:00.000Z' });
    await runningJob(tipping, { reserveUsd: 0.01, capacity: 'on-demand', createdAt: '2026-11-20T14:00:05.000Z' });
    const olderUnreachable = {
      async terminateJob(batchJobId: string, reason: string) {
        if (batchJobId === `batch-${older}`) {
          throw Object.assign(new Error('Service unavailable'), { name: 'ServerException' });
        }
        await bench.ports.batch.terminateJob(batchJobId, reason);
      },
    };

    const failed = watch({}, configForCurrentTeam(), bench.ports.events, olderUnreachable)(fixture('scheduled-event'));
    await expect(failed).rejects.toThrow(`${older}: ServerException: Service unavailable`);
    expect(bench.recorded.terminated.map((t) => t.batchJobId)).toEqual([`batch-${tipping}`]);
    expect(publishedOf(bench.recorded, 'Budget Exhausted').map((e) => e.pausedJobIds)).toEqual([[older, tipping]]);
    expect(await bench.jobs.listDecisions(older)).toEqual([]);

    const result = await watch()(tickAt(5));

    expect(result.budgetStopped).toEqual([older]);
    expect(bench.recorded.terminated.map((t) => t.batchJobId)).toEqual([`batch-${tipping}`, `batch-${older}`]);
    expect(publishedOf(bench.recorded, 'Budget Exhausted')).toHaveLength(1);
  });

  it('stops only the jobs charged to the blocked month of a scope', async () => {
    // October's team budget of $0.05 is blocked by the job submitted on 31 October ($0.09 on spot); November's
    // ($400) is not, so the job submitted in November runs on.
    const october = id('october');
    const november = id('november');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, '2026-10', 0.05);
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(october, { createdAt: '2026-10-31T23:50:00.000Z' });
    await bench.ledger.reserve(october, [`team:${currentTeam}`], 0.01, '2026-10');
    await runningJob(november, { reserveUsd: 0.01, createdAt: '2026-11-20T14:00:00.000Z' });

    const result = await watch()(fixture('scheduled-event'));

    expect(result.budgetStopped).toEqual([october]);
    expect(publishedOf(bench.recorded, 'Budget Exhausted')).toEqual([
      expect.objectContaining({ scope: `team:${currentTeam}`, period: '2026-10', pausedJobIds: [october] }),
    ]);
  });

  it('takes the next free decision number after the lifecycle’s own decisions', async () => {
    const jobId = id('numbered');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.05);
    await runningJob(jobId, { reserveUsd: 0.01 });
    for (const seq of [1, 2]) {
      await bench.jobs.putDecision(jobId, {
        seq,
        at: '2026-11-20T14:00:00.000Z',
        moment: 'submit',
        decision: `step ${seq}`,
        reason: 'lifecycle',
      });
    }

    await watch()(fixture('scheduled-event'));

    expect((await bench.jobs.listDecisions(jobId)).map((d) => [d.seq, d.decision])).toEqual([
      [1, 'step 1'],
      [2, 'step 2'],
      [3, 'stop-attempt 1 budget-pause'],
    ]);
  });
});

describe('budget watch: periodic placement check', () => {
  it('moves a spot job whose slack can no longer absorb a reclaim to on-demand, once', async () => {
    // Deadline 5540 s after submission; at 1800 s it has done 10 % of 3600 s of work (360 s), so 3240 s remain:
    // slack = 5540 − 1800 − 3240 = 500 s, under the 1020 s a reclaim and a fallback need, over on-demand's 360 s start.
    const jobId = id('deadline');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, { reserveUsd: 1, job: { requirements: { deadlineSeconds: 5540 } } });
    await writeProgress(jobId, 100, 1000);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([{ jobId, to: 'on-demand' }]);
    expect(bench.recorded.terminated).toEqual([
      { batchJobId: `batch-${jobId}`, reason: TERMINATE_REASONS.moveToOnDemand },
    ]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({
        seq: 1,
        at: TICK_ISO,
        moment: 'periodic-check',
        decision: 'move-attempt 1 to on-demand',
      }),
    ]);

    await watch()(fixture('scheduled-event'));
    expect(bench.recorded.terminated).toHaveLength(1);
  });

  it('leaves a spot job that has done all its steps where it runs, 300 s before its deadline', async () => {
    // Its final save, upload or evaluation is running: stopping it would add a restart and miss the deadline.
    const jobId = id('done-near-deadline');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, { reserveUsd: 1, job: { requirements: { deadlineSeconds: 2100 } } });
    await writeProgress(jobId, 1000, 1000);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(result.deadlineStopped).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([]);
  });

  it('leaves a spot job without a deadline on spot', async () => {
    const jobId = id('no-deadline');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, { reserveUsd: 1 });
    await writeProgress(jobId, 10, 1000);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([]);
  });
});

// A WAITING job whose spot attempt was handed to Batch at 14:01:05 and has not started: at the 14:30:00 tick it
// has waited 1735 s. Nothing is done yet (work 3600 s unless said) and nothing accrues while it waits.
async function waitingJob(jobId: string, deadlineSeconds?: number, estimate = ESTIMATE) {
  await bench.jobs.createJob(
    jobRecord({
      jobId,
      team: currentTeam,
      state: 'WAITING',
      createdAt: new Date(T.created).toISOString(),
      estimate,
      bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'c'.repeat(64) },
      ...(deadlineSeconds === undefined ? {} : { requirements: { deadlineSeconds } }),
    }),
  );
  await bench.jobs.putAttempt(
    attemptRecord({
      jobId,
      capacity: 'spot',
      queue: 'trainyard-gpu-small-spot',
      status: 'RUNNABLE',
      batchJobId: `batch-${jobId}`,
      submittedAt: T.started,
      startedAt: undefined,
      usdPerHour: undefined,
    }),
  );
}

describe('budget watch: jobs waiting in the spot queue', () => {
  it('moves a queued deadline job whose slack can no longer wait to on-demand, once', async () => {
    // Deadline 3900 s: slack = 3900 − 1800 − 3600 = −1500 s.
    const jobId = id('queued-late');
    await waitingJob(jobId, 3900);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([{ jobId, to: 'on-demand' }]);
    expect(result.metered).toEqual([]);
    expect(bench.recorded.terminated).toEqual([
      { batchJobId: `batch-${jobId}`, reason: TERMINATE_REASONS.moveToOnDemand },
    ]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({ seq: 1, moment: 'periodic-check', decision: 'move-attempt 1 to on-demand' }),
    ]);

    const afterFirst = await bench.snapshot();
    await watch()(fixture('scheduled-event'));
    expect(bench.recorded.terminated).toHaveLength(1);
    expect(await bench.snapshot()).toEqual(afterFirst);
  });

  it('leaves a queued job with slack to spare, or without a deadline, in the queue', async () => {
    // Deadline 100 000 s: a slack of 94 600 s waits for spot.
    await waitingJob(id('queued-early'), 100_000);
    await waitingJob(id('queued-no-deadline'));

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
    expect(await bench.jobs.listDecisions(id('queued-early'))).toEqual([]);
  });
});

// The start of a waiting job's attempt that Batch runs but whose RUNNING state change never reached batch-events (it
// went to the dead-letter queue): Batch answers DescribeJobs with the job as the state change would have carried it.
describe('budget watch: starts never heard of', () => {
  /** A waiting job whose attempt 1 was submitted at `submittedAt`, with no Batch job id recorded unless given. */
  async function unheardJob(
    jobId: string,
    options: { submittedAt?: number; batchJobId?: string; reserveUsd?: number },
  ) {
    await bench.jobs.createJob(
      jobRecord({
        jobId,
        team: currentTeam,
        state: 'WAITING',
        createdAt: new Date(T.created).toISOString(),
        estimate: ESTIMATE,
        bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'c'.repeat(64) },
      }),
    );
    await bench.jobs.putAttempt(
      attemptRecord({
        jobId,
        capacity: 'spot',
        queue: 'trainyard-gpu-small-spot',
        status: 'SUBMITTED',
        batchJobId: options.batchJobId,
        submittedAt: options.submittedAt ?? T.created,
        startedAt: undefined,
        usdPerHour: undefined,
      }),
    );
    await bench.ledger.reserve(jobId, [`team:${currentTeam}`], options.reserveUsd ?? 1, PERIOD);
  }

  /** Batch's record of the job's attempt 1 (the batch-running fixture's detail, renamed to it). */
  function batchJobOf(jobId: string, status: string, change: (detail: Record<string, unknown>) => void = () => {}) {
    const detail = fixtureWith('batch-running', (e) => {
      Object.assign(e.detail, {
        jobId: `batch-${jobId}`,
        jobName: `${jobId}-a1`,
        status,
        tags: { 'trainyard:job-id': jobId, 'trainyard:team': currentTeam, 'trainyard:attempt': '1' },
      });
      change(e.detail);
    }).detail;
    return parseBatchJob(detail);
  }

  it('records a start Batch reports with none recorded, meters the job from it in the same tick, once', async () => {
    // Submitted at 14:00:00, started at 14:01:05 by Batch's record: at 14:30 it has run 1735 s on spot at the tier's
    // 0.19 $/h (no instance to price it by) = $0.0916 → $0.09 of its $1 reservation spent.
    const jobId = id('unheard');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await unheardJob(jobId, {});
    bench.batchJobs = [batchJobOf(jobId, 'RUNNING')];

    const result = await watch()(fixture('scheduled-event'));

    expect(result).toMatchObject({ startsRecorded: [jobId], metered: [jobId], moved: [], budgetStopped: [] });
    // No Batch job id was recorded either (its RUNNABLE went the same way): ListJobs by name in its queue.
    expect(bench.recorded.batchLookups).toEqual([{ queue: 'trainyard-gpu-small-spot', jobName: `${jobId}-a1` }]);
    expect(await bench.jobs.getAttempt(jobId, 1)).toMatchObject({
      batchJobId: `batch-${jobId}`,
      status: 'RUNNING',
      startedAt: T.started,
      usdPerHour: 0.19,
      startAnnounced: true,
    });
    expect((await bench.jobs.requireJob(jobId)).state).toBe('RUNNING');
    expect(publishedOf(bench.recorded, 'Job Started')).toEqual([
      expect.objectContaining({ jobId, attempt: 1, capacity: 'spot', batchJobId: `batch-${jobId}` }),
    ]);
    expect(await bench.ledger.usage(`team:${currentTeam}`, PERIOD)).toMatchObject({
      spentUsd: 0.09,
      reservedUsd: 0.91,
    });

    // The same tick again: the job is running, so Batch is not asked again and nothing changes.
    const afterFirst = await bench.snapshot();
    await watch()(fixture('scheduled-event'));
    expect(await bench.snapshot()).toEqual(afterFirst);
    expect(bench.recorded.batchLookups).toHaveLength(1);
    expect(publishedOf(bench.recorded, 'Job Started')).toHaveLength(1);
  });

  it('stops a job whose unheard start has spent its budget, in the tick that finds it', async () => {
    // Limit $0.05 and $0.01 reserved: the $0.09 it has spent since 14:01:05 blocks the team.
    const jobId = id('unheard-over');
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.05);
    await unheardJob(jobId, { batchJobId: `batch-${jobId}`, reserveUsd: 0.01 });
    bench.batchJobs = [batchJobOf(jobId, 'RUNNING')];

    const result = await watch()(fixture('scheduled-event'));

    expect(result).toMatchObject({ startsRecorded: [jobId], budgetStopped: [jobId] });
    expect(bench.recorded.batchLookups).toEqual([
      { batchJobId: `batch-${jobId}`, queue: 'trainyard-gpu-small-spot', jobName: `${jobId}-a1` },
    ]);
    expect(bench.recorded.terminated).toEqual([
      { batchJobId: `batch-${jobId}`, reason: TERMINATE_REASONS.budgetPause },
    ]);
  });

  it('records nothing while Batch reports the attempt queued, ended or not at all', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    const queued = id('still-queued');
    const ended = id('ended-unheard');
    const unknown = id('not-in-batch');
    for (const jobId of [queued, ended, unknown]) await unheardJob(jobId, { batchJobId: `batch-${jobId}` });
    bench.batchJobs = [
      batchJobOf(queued, 'RUNNABLE', (d) => {
        delete d.startedAt;
      }),
      // An end is AttemptOutcome's (and batch-events') to record, with its stop and cost.
      batchJobOf(ended, 'SUCCEEDED', (d) => {
        d.stoppedAt = T.stopped;
      }),
    ];
    const before = await bench.snapshot();

    const result = await watch()(fixture('scheduled-event'));

    expect(result).toMatchObject({ startsRecorded: [], metered: [] });
    expect(bench.recorded.batchLookups.map((ref) => ref.batchJobId).sort()).toEqual(
      [queued, ended, unknown].map((jobId) => `batch-${jobId}`).sort(),
    );
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.published).toEqual([]);
  });

  it('does not ask Batch about an attempt submitted under 10 minutes ago: its start may still be on its way', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    const jobId = id('young');
    // Submitted at 14:20:00.001, 599.999 s before the tick.
    await unheardJob(jobId, { submittedAt: Date.parse(TICK_ISO) - 599_999 });
    bench.batchJobs = [batchJobOf(jobId, 'RUNNING')];

    const result = await watch()(fixture('scheduled-event'));

    expect(result.startsRecorded).toEqual([]);
    expect(bench.recorded.batchLookups).toEqual([]);
    expect((await bench.jobs.requireJob(jobId)).state).toBe('WAITING');
    // At 600 s it is asked.
    await watch()(tickAt(0.5));
    expect(bench.recorded.batchLookups).toHaveLength(1);
  });
});

describe('budget watch: the tiers’ spot records', () => {
  // gpu-small, gpu-medium and gpu-large allow spot and list three instance types each; the cpu tier has none and
  // gpu-multinode allows no spot, so neither is probed.
  const TICK_MS = Date.parse(TICK_ISO);
  const SPOT_TIERS = ['gpu-small', 'gpu-medium', 'gpu-large'];

  it('probes every tier that allows spot each run, jobs or not, and starts each record; a replay writes nothing', async () => {
    spotAnswer = true;

    const result = await watch()(fixture('scheduled-event'));

    expect(probed).toEqual([
      GPU_SMALL_TYPES,
      ['g4dn.2xlarge', 'g5.2xlarge', 'g6.2xlarge'],
      ['g5.2xlarge', 'g5.4xlarge', 'g6.2xlarge'],
    ]);
    expect(result.spotSeen).toEqual(SPOT_TIERS.map((tier) => ({ tier, available: true })));
    // Each record starts an empty life table over the fleet model's 29 bins (5 wide), and its model is fitted at once
    // (with nothing learnt: the fleet model, so none is stored).
    const empty = { atRisk: new Array(29).fill(0), ended: new Array(29).fill(0) };
    for (const tier of SPOT_TIERS)
      expect(await bench.jobs.getTierSpot(tier)).toEqual({
        tier,
        available: true,
        sinceMs: TICK_MS,
        sinceChange: false,
        seenMs: TICK_MS,
        lifeTable: { binSeconds: 600, wideBins: 5, available: empty, unavailable: empty },
        modelFittedMs: TICK_MS,
      });
    expect(await bench.jobs.getTierSpot('gpu-multinode')).toBeUndefined();

    const afterFirst = await bench.snapshot();
    await watch()(fixture('scheduled-event'));
    expect(await bench.snapshot()).toEqual(afterFirst);
  });

  it('asks once for tiers that share their instance types', async () => {
    spotAnswer = false;
    const gpuSmall = CONFIG.tiers.find((t) => t.id === 'gpu-small');
    if (!gpuSmall) throw new Error('gpu-small missing');
    const twin = { ...gpuSmall, id: 'gpu-small-twin', instanceTypes: ['g6.xlarge', 'g5.xlarge', 'g4dn.xlarge'] };
    const result = await watch({}, { ...configForCurrentTeam(), tiers: [gpuSmall, twin] })(fixture('scheduled-event'));

    expect(probed).toEqual([GPU_SMALL_TYPES]);
    expect(result.spotSeen).toEqual([
      { tier: 'gpu-small', available: false },
      { tier: 'gpu-small-twin', available: false },
    ]);
    expect((await bench.jobs.getTierSpot('gpu-small-twin'))?.available).toBe(false);
  });

  it.each([
    {
      what: 'the same answer one tick on extends the run',
      answer: true,
      expected: { available: true, sinceMs: TICK_MS - 900_000, sinceChange: true, seenMs: TICK_MS },
    },
    {
      what: 'another answer begins a run the watch saw begin',
      answer: false,
      expected: { available: false, sinceMs: TICK_MS, sinceChange: true, seenMs: TICK_MS },
    },
    {
      what: 'no answer leaves the record as it was',
      answer: undefined,
      expected: { available: true, sinceMs: TICK_MS - 900_000, sinceChange: true, seenMs: TICK_MS - 300_000 },
    },
  ])('moves a stored record forward: $what', async ({ answer, expected }) => {
    await storeTierSpot({
      tier: 'gpu-small',
      available: true,
      sinceMs: TICK_MS - 900_000,
      sinceChange: true,
      seenMs: TICK_MS - 300_000,
    });
    spotAnswer = answer;

    await watch()(fixture('scheduled-event'));

    expect(await bench.jobs.getTierSpot('gpu-small')).toMatchObject({ tier: 'gpu-small', ...expected });
  });

  it('keeps a record a later run already moved on as it is', async () => {
    const later = {
      tier: 'gpu-small',
      available: false,
      sinceMs: TICK_MS,
      sinceChange: true,
      seenMs: TICK_MS + 300_000,
    };
    await storeTierSpot(later);
    spotAnswer = true;

    await watch()(fixture('scheduled-event'));

    expect(await bench.jobs.getTierSpot('gpu-small')).toEqual(later);
  });

  it('reads a job an earlier version stored with its own spotSeenSince, which the tier record replaced', async () => {
    const job = jobRecord({ jobId: id('legacy'), team: currentTeam, createdAt: new Date(T.created).toISOString() });
    await bench.dynamo.doc.put({
      TableName: bench.dynamo.tables.jobs,
      Item: { ...jobItem(job), spotSeenSince: TICK_MS - 900_000 },
    });

    expect(await bench.jobs.requireJob(job.jobId)).toEqual(job);
  });

  it('fails the run naming the tier when the record cannot be read, after handling everything else', async () => {
    await bench.dynamo.doc.put({
      TableName: bench.dynamo.tables.jobs,
      Item: { pk: 'TIERSPOT#gpu-small', sk: 'META', tier: 'gpu-small', available: 'yes' },
    });
    spotAnswer = true;

    const run = watch()(fixture('scheduled-event'));

    await expect(run).rejects.toThrow(BudgetWatchIncomplete);
    await expect(run).rejects.toThrow(/tier gpu-small: InvalidTierSpotRecord: invalid tier spot record: available/);
    expect((await bench.jobs.getTierSpot('gpu-medium'))?.available).toBe(true);
  });
});

describe('budget watch: back to spot', () => {
  // Tick 14:30:00 is 1800 s after submission (14:00:00); the on-demand attempt has run since 14:01:05. Deadline
  // 7200 s, work 3600 s, progress 50 % (1800 s): slack = 7200 − 1800 − 1800 = 3600 s. With d = 360 s and a 300 s
  // check the safety net is 2·360 + 300 = 1020 s, and slack − d = 3240 s clears it. gpu-small has a spot price
  // ($0.19/h against $0.526/h) and three instance types, so the deployed config plans the job (spot-planner.ts).
  const TICK_MS = Date.parse(TICK_ISO);

  async function onDemandDeadlineJob(jobId: string, fields: Partial<JobRecord> = {}) {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(jobId, {
      capacity: 'on-demand',
      reserveUsd: 1,
      job: { requirements: { deadlineSeconds: 7200 }, ...fields },
    });
    await writeProgress(jobId, 500, 1000);
  }

  /** gpu-small's record: spot available since `sinceMs`, last confirmed a tick before this one (or as `fields` say). */
  async function spotSeenSince(sinceMs: number, fields: Partial<TierSpotRecord> = {}) {
    await storeTierSpot({
      tier: 'gpu-small',
      available: true,
      sinceMs,
      sinceChange: true,
      seenMs: TICK_MS - 300_000,
      ...fields,
    });
  }

  it('moves an on-demand deadline job back to spot when the plan expects spot to pay for the restart, once', async () => {
    const jobId = id('back');
    // Seen since 14:15:00. 1800 s of work left: on spot it costs 0.36 × (1800 + 360) s of on-demand money, 780 s.
    await onDemandDeadlineJob(jobId);
    await spotSeenSince(TICK_MS - 900_000);
    spotAnswer = true;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([{ jobId, to: 'spot' }]);
    expect(bench.recorded.terminated).toEqual([{ batchJobId: `batch-${jobId}`, reason: TERMINATE_REASONS.moveToSpot }]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({
        seq: 1,
        at: TICK_ISO,
        moment: 'periodic-check',
        decision: 'move-attempt 1 to spot',
        reason: expect.stringContaining('spot available for 900 s, the plan rates spot cheaper'),
      }),
    ]);

    const afterFirst = await bench.snapshot();
    await watch()(fixture('scheduled-event'));
    expect(bench.recorded.terminated).toHaveLength(1);
    expect(await bench.snapshot()).toEqual(afterFirst);
  });

  it('leaves a job it moved to spot in the queue while its attempt starts, not taking the start for an outage', async () => {
    const jobId = id('starting');
    // Moved to spot at the last tick: attempt 1 (on-demand) stopped, attempt 2 queued 200 s ago, under the 360 s a
    // start takes. Two hours of work, none reported done; deadline 10 800 s: slack = 10 800 − 1800 − 7200 = 1800 s.
    // Spot seen since 14:15:00. Told spot was out for 200 s, the plan would take on-demand (undoing the move).
    await bench.jobs.createJob(
      jobRecord({
        jobId,
        team: currentTeam,
        state: 'WAITING',
        createdAt: new Date(T.created).toISOString(),
        estimate: { ...ESTIMATE, runtimeSeconds: 7200 },
        requirements: { deadlineSeconds: 10_800 },
        progress: { step: 0, totalSteps: 1000, fraction: 0, updatedAt: new Date(TICK_MS - 300_000).toISOString() },
        bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'c'.repeat(64) },
      }),
    );
    const moved = { kind: 'moved', reason: 'Trainyard: moving back to spot', resumable: true, moveTo: 'spot' } as const;
    await bench.jobs.putAttempt(
      attemptRecord({
        jobId,
        capacity: 'on-demand',
        queue: 'trainyard-gpu-small-on-demand',
        status: 'FAILED',
        batchJobId: `batch-${jobId}-1`,
        startedAt: T.started,
        stoppedAt: TICK_MS - 300_000,
        usdPerHour: 0.526,
        costUsd: 0.2,
        outcome: moved,
      }),
    );
    await bench.jobs.putAttempt(
      attemptRecord({
        jobId,
        attempt: 2,
        capacity: 'spot',
        queue: 'trainyard-gpu-small-spot',
        status: 'RUNNABLE',
        batchJobId: `batch-${jobId}-2`,
        submittedAt: TICK_MS - 200_000,
      }),
    );
    await spotSeenSince(TICK_MS - 900_000);
    spotAnswer = true;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('counts spot’s age from before the job went on-demand: the record is the tier’s, not the job’s', async () => {
    const jobId = id('old-spot');
    // Spot has been there since 13:00, before the job was submitted: 5 400 s at the tick.
    await onDemandDeadlineJob(jobId);
    await spotSeenSince(TICK_MS - 5_400_000);
    spotAnswer = true;

    await watch()(fixture('scheduled-event'));

    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({ reason: expect.stringContaining('spot available for 5400 s') }),
    ]);
  });

  it('keeps a job on on-demand when its slack cannot pay for a restart', async () => {
    const jobId = id('short');
    // Deadline 4000 s: slack = 4000 − 1800 − 1800 = 400 s; a restart (360 s) would leave 40 s, under the 1020 s net.
    await onDemandDeadlineJob(jobId, { requirements: { deadlineSeconds: 4000 } });
    await spotSeenSince(TICK_MS - 600_000);
    spotAnswer = true;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
    expect(await bench.jobs.listDecisions(jobId)).toEqual([]);
  });

  it.each([
    { what: 'spot has been out for 6 h', answer: false, stored: { available: false, sinceMs: TICK_MS - 21_600_000 } },
    {
      // The fleet model expects most outages to end within minutes, but a running job is not stopped to wait for
      // capacity that is not there: it moves back once spot is seen.
      what: 'spot went out this tick',
      answer: false,
      stored: { available: true, sinceMs: TICK_MS - 900_000 },
    },
    { what: 'the first answer is unavailable (an outage of unknown age)', answer: false, stored: undefined },
    { what: 'there is no record and the probe cannot tell', answer: undefined, stored: undefined },
  ])('keeps a job on on-demand when $what', async ({ answer, stored }) => {
    const jobId = id('stays');
    await onDemandDeadlineJob(jobId);
    if (stored) await storeTierSpot({ tier: 'gpu-small', ...stored, sinceChange: true, seenMs: TICK_MS - 300_000 });
    spotAnswer = answer;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('plans with the tier’s learnt model: where spot lasts minutes and outages hours, the job stays on on-demand', async () => {
    const jobId = id('learnt-stretches');
    await onDemandDeadlineJob(jobId);
    // The same 15 minutes of spot on which the fleet model moves the job back (above), on a tier whose record has
    // learnt that half its spot stretches end within 10 minutes and its outages last (1 % per 10 minutes: 16 h on
    // average), fitted an hour ago: a restart onto spot there would buy minutes of it and then a long wait.
    await spotSeenSince(TICK_MS - 900_000, {
      modelFittedMs: TICK_MS - 3_600_000,
      model: {
        binSeconds: 600,
        availableHazards: new Array(24).fill(0.5),
        unavailableHazards: new Array(24).fill(0.01),
      },
    });
    spotAnswer = true;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([]);
    expect(bench.recorded.terminated).toEqual([]);
  });

  it('refits the tier’s model a week after the last fit, from the table and the open stretch, and stores it', async () => {
    const counted = { atRisk: [40, ...new Array(28).fill(0)], ended: [10, ...new Array(28).fill(0)] };
    const nothing = { atRisk: new Array(29).fill(0), ended: new Array(29).fill(0) };
    await storeTierSpot({
      tier: 'gpu-small',
      available: false,
      sinceMs: TICK_MS - 300_000,
      sinceChange: false,
      seenMs: TICK_MS - 300_000,
      lifeTable: { binSeconds: 600, wideBins: 5, available: counted, unavailable: nothing },
      modelFittedMs: TICK_MS - 7 * 86_400_000,
    });
    spotAnswer = false;

    await watch()(fixture('scheduled-event'));

    const stored = await bench.jobs.getTierSpot('gpu-small');
    expect(stored?.modelFittedMs).toBe(TICK_MS);
    // Bin 0 of available stretches: (10 ended + 20 × the fleet's hazard) ÷ (40 at risk + 20), to 4 decimals; the open
    // outage began unseen, so outages keep the fleet's hazards.
    const fleet0 = FLEET_SPOT_MODEL.availableHazards[0] as number;
    expect(stored?.model?.availableHazards[0]).toBe(Number(((10 + 20 * fleet0) / 60).toFixed(4)));
    expect(stored?.model?.availableHazards.slice(1)).toEqual(FLEET_SPOT_MODEL.availableHazards.slice(1));
    expect(stored?.model?.unavailableHazards).toEqual(FLEET_SPOT_MODEL.unavailableHazards);
    expect(stored?.lifeTable?.available).toEqual(counted);
  });

  it.each([
    { what: 'fresh (confirmed 300 s before the tick)', seenMs: TICK_MS - 300_000, moves: true },
    { what: 'stale (confirmed 661 s before: spot may have changed since)', seenMs: TICK_MS - 661_000, moves: false },
  ])('uses a record the probe could not confirm this tick only while it is $what', async ({ seenMs, moves }) => {
    const jobId = id('unconfirmed');
    await onDemandDeadlineJob(jobId);
    await spotSeenSince(TICK_MS - 900_000, { seenMs });
    spotAnswer = undefined;

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual(moves ? [{ jobId, to: 'spot' }] : []);
  });

  it('moves a queued 48 h deadline job to on-demand when the outage it queued into is 15 h old', async () => {
    // Deadline 54 h, work 48 h, queued since 14:01:05: at the tick the job's own wait is 1 735 s, slack 19 800 s.
    // Spot has been out since 23:30 the day before (15 h): the plan expects no spot soon enough to pay.
    spotAnswer = false;
    await waitingJob(id('own-wait'), 54 * 3600, { ...ESTIMATE, runtimeSeconds: 48 * 3600 });
    const unseen = await watch()(fixture('scheduled-event'));
    // The record began at this tick: the job knows only its own 1 735 s, and waits.
    expect(unseen.moved).toEqual([]);

    await bench.dynamo.doc.request('DeleteItem', {
      TableName: bench.dynamo.tables.jobs,
      Key: { pk: { S: 'TIERSPOT#gpu-small' }, sk: { S: 'META' } },
    });
    // Fitted an hour ago with nothing learnt: the fleet model stands at this tick.
    await storeTierSpot({
      tier: 'gpu-small',
      available: false,
      sinceMs: TICK_MS - 15 * 3_600_000,
      sinceChange: true,
      seenMs: TICK_MS - 300_000,
      modelFittedMs: TICK_MS - 3_600_000,
    });
    const seen = await watch()(fixture('scheduled-event'));

    expect(seen.moved).toEqual([{ jobId: id('own-wait'), to: 'on-demand' }]);
    expect(await bench.jobs.listDecisions(id('own-wait'))).toEqual([
      expect.objectContaining({
        decision: 'move-attempt 1 to on-demand',
        reason: expect.stringContaining('spot unavailable for 54000 s'),
      }),
    ]);
  });
});

describe('budget watch: auto-resume', () => {
  async function pausedJob(jobId: string, token: string) {
    await bench.jobs.createJob(
      jobRecord({
        jobId,
        team: currentTeam,
        state: 'PAUSED_BUDGET',
        pauseToken: token,
        bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'd'.repeat(64) },
      }),
    );
  }

  it('resumes a paused job once its scopes are no longer blocked, and clears its token', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await pausedJob(id('paused'), `token-${team}`);

    const result = await watch()(fixture('scheduled-event'));
    await watch()(fixture('scheduled-event'));

    expect(result.resumed).toEqual([id('paused')]);
    expect(bench.recorded.taskSuccesses).toEqual([{ token: `token-${team}`, output: { action: 'resume' } }]);
    expect((await bench.jobs.requireJob(id('paused'))).pauseToken).toBeUndefined();
  });

  it('keeps a token the pause step stored while it resumed with an older one', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await pausedJob(id('repaused'), `first-${team}`);
    // The pause step's first try stored the first token and failed; its retry stores a second one while the watch
    // resumes with the first, which Step Functions no longer knows.
    const lifecycle = {
      ...bench.ports.lifecycle,
      async sendTaskSuccess(token: string) {
        await bench.jobs.patchJob(id('repaused'), { pauseToken: `second-${team}` });
        throw Object.assign(new Error(`task ${token} timed out`), { name: 'TaskTimedOut' });
      },
    };

    await watch(
      {},
      configForCurrentTeam(),
      bench.ports.events,
      bench.ports.batch,
      lifecycle,
    )(fixture('scheduled-event'));

    // The execution waits on the second token: it stays, for the next run to resume with.
    expect((await bench.jobs.requireJob(id('repaused'))).pauseToken).toBe(`second-${team}`);
    await watch()(fixture('scheduled-event'));
    expect(bench.recorded.taskSuccesses).toEqual([{ token: `second-${team}`, output: { action: 'resume' } }]);
    expect((await bench.jobs.requireJob(id('repaused'))).pauseToken).toBeUndefined();
  });

  it('keeps a paused job paused while its team scope is blocked', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 0.05);
    await bench.ledger.reserve(id('spender'), [`team:${currentTeam}`], 0.01, PERIOD);
    await bench.ledger.accrue(id('spender'), 0.09); // $0.08 beyond its reservation: available −$0.04
    await pausedJob(id('paused'), `token-${team}`);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.resumed).toEqual([]);
    expect(bench.recorded.taskSuccesses).toEqual([]);
    expect((await bench.jobs.requireJob(id('paused'))).pauseToken).toBe(`token-${team}`);
  });

  it('keeps a paused job paused until its budget can hold what it is forecast to cost to finish, then holds it', async () => {
    const team = `team:${currentTeam}`;
    await bench.ledger.ensureBudget(team, PERIOD, 3);
    const jobId = id('overran');
    // A quarter done for its whole $1 estimate: $3 more to finish at its own rate; $2 of the $3 budget is available.
    await bench.jobs.createJob(
      jobRecord({
        jobId,
        team: currentTeam,
        state: 'PAUSED_BUDGET',
        pauseToken: `token-${jobId}`,
        estimate: { costUsd: 1, runtimeSeconds: 3600, confidence: 'medium', basis: 'seeded' },
        progress: { fraction: 0.25, updatedAt: '2026-11-20T12:00:00.000Z' },
        costSoFarUsd: 1,
        bundle: { key: `teams/${currentTeam}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'd'.repeat(64) },
      }),
    );
    await bench.ledger.reserve(jobId, [team], 1, PERIOD);
    await bench.ledger.accrue(jobId, 1);

    const waiting = await watch()(fixture('scheduled-event'));

    expect(waiting.resumed).toEqual([]);
    expect(bench.recorded.taskSuccesses).toEqual([]);
    expect(await bench.ledger.usage(team, PERIOD)).toMatchObject({ spentUsd: 1, reservedUsd: 0, availableUsd: 2 });

    await bench.ledger.setLimit(team, PERIOD, 10);
    const resumed = await watch()(fixture('scheduled-event'));

    expect(resumed.resumed).toEqual([jobId]);
    expect(bench.recorded.taskSuccesses).toEqual([{ token: `token-${jobId}`, output: { action: 'resume' } }]);
    expect(await bench.ledger.usage(team, PERIOD)).toMatchObject({ spentUsd: 1, reservedUsd: 3, availableUsd: 6 });
  });

  it('clears a token Step Functions no longer knows without failing', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await pausedJob(id('stale'), `stale-${team}`);
    bench.spentTokens.add(`stale-${team}`);

    await watch()(fixture('scheduled-event'));

    expect(bench.recorded.taskSuccesses).toEqual([]);
    expect((await bench.jobs.requireJob(id('stale'))).pauseToken).toBeUndefined();
  });
});

describe('budget watch: platform metrics', () => {
  const TICK_MS = Date.parse(TICK_ISO);
  // Worked by hand: a spot attempt at 0.19 $/h and an on-demand one at 0.526 $/h run 1735 s each (costs $0.09 and
  // $0.25 of reservations of $10 and $30), so the team has $40.00 committed of $400: 10 %.
  async function twoRunningOneWaiting() {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    await runningJob(id('spot'), { capacity: 'spot', reserveUsd: 10 });
    await runningJob(id('od'), { capacity: 'on-demand', reserveUsd: 30 });
    await bench.jobs.createJob(
      jobRecord({
        jobId: id('waiting'),
        team: currentTeam,
        state: 'WAITING',
        createdAt: new Date(T.created).toISOString(),
      }),
    );
  }

  it('publishes running jobs by capacity, waiting jobs, the spend rate, budget used and spot seen, at the tick', async () => {
    await twoRunningOneWaiting();
    spotAnswer = false;

    await watch()(fixture('scheduled-event'));

    const metrics = extractMetrics(bench.recorded.metricLines);
    expect(new Set(metrics.map((m) => m.timestampMs))).toEqual(new Set([TICK_MS]));
    expect(new Set(metrics.map((m) => m.namespace))).toEqual(new Set(['Trainyard']));
    expect(metrics.map(({ metric, dimensions, value, unit }) => ({ metric, dimensions, value, unit }))).toEqual([
      { metric: 'RunningJobs', dimensions: { Capacity: 'spot' }, value: 1, unit: 'Count' },
      { metric: 'RunningJobs', dimensions: { Capacity: 'on-demand' }, value: 1, unit: 'Count' },
      { metric: 'WaitingJobs', dimensions: {}, value: 1, unit: 'Count' },
      { metric: 'SpendRate', dimensions: { Team: currentTeam }, value: 0.716, unit: 'None' },
      { metric: 'BudgetUsed', dimensions: { Team: currentTeam }, value: 10, unit: 'Percent' },
      { metric: 'SpotAvailable', dimensions: { Tier: 'gpu-small' }, value: 0, unit: 'None' },
      { metric: 'SpotAvailable', dimensions: { Tier: 'gpu-medium' }, value: 0, unit: 'None' },
      { metric: 'SpotAvailable', dimensions: { Tier: 'gpu-large' }, value: 0, unit: 'None' },
    ]);
  });

  it('publishes zeros for an idle team, leaves out a probe that could not tell, and the same gauges on a replay', async () => {
    await bench.ledger.ensureBudget(`team:${currentTeam}`, PERIOD, 400);
    spotAnswer = undefined;

    await watch()(fixture('scheduled-event'));
    const first = [...bench.recorded.metricLines];
    await watch()(fixture('scheduled-event'));

    expect(extractMetrics(first).map(({ metric, value }) => [metric, value])).toEqual([
      ['RunningJobs', 0],
      ['RunningJobs', 0],
      ['WaitingJobs', 0],
      ['SpendRate', 0],
      ['BudgetUsed', 0],
    ]);
    // A redelivered tick repeats each gauge at the same timestamp, which Maximum reads as one value.
    expect(bench.recorded.metricLines).toEqual([...first, ...first]);
  });

  it('publishes nothing when platform metrics are off', async () => {
    await twoRunningOneWaiting();
    const config = configForCurrentTeam();

    await watch(
      {},
      { ...config, observability: { ...config.observability, platformMetrics: false } },
    )(fixture('scheduled-event'));

    expect(bench.recorded.metricLines).toEqual([]);
    expect(await bench.ledger.usage(`team:${currentTeam}`, PERIOD)).toMatchObject({ spentUsd: 0.34 });
  });
});

// When a tier's spot record cannot be stored this tick (DynamoDB throttles the put, or TierSpotConflict after three
// lost races with attempt-outcome's reclaim folds), the run fails naming the tier, and its jobs' periodic checks read
// the stored record (one tick old, still fresh), as when the probe cannot tell; without it they would plan with the
// fleet model and without spot's state, and a move decided so is recorded once and not undone.
describe('a tier record that cannot be stored this tick', () => {
  /** A store over the same table whose writes of tier spot records are throttled (past the client's retries). */
  function throttledTierSpotStore(): JobStore {
    const client: DocumentClient = {
      ...bench.dynamo.doc,
      async put(input) {
        const pk = (input as { Item?: { pk?: unknown } }).Item?.pk;
        if (typeof pk === 'string' && pk.startsWith('TIERSPOT#'))
          throw Object.assign(new Error('Throughput exceeds the current capacity of your table'), {
            name: 'ProvisionedThroughputExceededException',
          });
        return bench.dynamo.doc.put(input);
      },
    };
    return new JobStore(client, bench.dynamo.tables.jobs, bench.clock);
  }
  const tickMs = Date.parse(TICK_ISO);
  /** gpu-small's record, confirmed a tick ago: spot out for 15 h (its start seen), model fitted an hour ago. */
  const outage15h: TierSpotRecord = {
    tier: 'gpu-small',
    available: false,
    sinceMs: tickMs - 15 * 3_600_000,
    sinceChange: true,
    seenMs: tickMs - 300_000,
    modelFittedMs: tickMs - 3_600_000,
  };
  // A 48 h job with a 54 h deadline, waiting in gpu-small's spot queue for 1 735 s of its own.
  const queuedDeadlineJob = (jobId: string) => waitingJob(jobId, 54 * 3600, { ...ESTIMATE, runtimeSeconds: 48 * 3600 });

  it('with the write going through, the 15 h outage moves the queued job to on-demand', async () => {
    spotAnswer = false;
    const jobId = id('stored');
    await queuedDeadlineJob(jobId);
    await storeTierSpot(outage15h);

    const result = await watch()(fixture('scheduled-event'));

    expect(result.moved).toEqual([{ jobId, to: 'on-demand' }]);
  });

  it('decides from the stored (one tick old, fresh) record when the write fails, not from no record', async () => {
    spotAnswer = false;
    const jobId = id('throttled');
    await queuedDeadlineJob(jobId);
    await storeTierSpot(outage15h);

    const run = watch({}, configForCurrentTeam(), undefined, undefined, undefined, throttledTierSpotStore());
    // The run fails naming the tier; what matters is what it decided before failing.
    await expect(run(fixture('scheduled-event'))).rejects.toThrow(BudgetWatchIncomplete);

    // Without the record the job would know only its own 1 735 s wait, and keep waiting in a 15 h outage.
    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({ decision: 'move-attempt 1 to on-demand' }),
    ]);
  });
});
