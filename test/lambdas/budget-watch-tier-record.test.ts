// budget-watch when a tier's spot record cannot be stored this tick (DynamoDB throttles the put, or TierSpotConflict
// after three lost races with attempt-outcome's reclaim folds): the run fails naming the tier, and its jobs' periodic
// checks read the stored record (one tick old, still fresh), as when the probe cannot tell; without it they would plan
// with the fleet model and without spot's state, and a move decided so is recorded once and not undone.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BudgetWatchIncomplete, createBudgetWatchHandler } from '../../lambdas/budget-watch/budget-watch';
import type { TierSpotRecord } from '../../lambdas/domain/tier-spot';
import type { DocumentClient } from '../../lambdas/shared/dynamo';
import { JobStore } from '../../lambdas/shared/job-store';
import { attemptRecord, CONFIG, type EventBench, fixture, jobRecord, startEventBench, T } from './event-bench';

const TICK_ISO = '2026-11-20T14:30:00.000Z';
const TICK_MS = Date.parse(TICK_ISO);
const ESTIMATE = { costUsd: 1, runtimeSeconds: 3600, confidence: 'medium' as const, basis: 'test estimate' };

let bench: EventBench;
let n = 0;
let team = 'tier-record-0';

beforeAll(async () => {
  bench = await startEventBench({ withS3: true, now: new Date(TICK_ISO) });
});
afterAll(async () => {
  await bench.stop();
});
beforeEach(async () => {
  n += 1;
  team = `tier-record-${n}`;
  bench.resetRecorded();
  bench.batchJobs = [];
  for (const tier of CONFIG.tiers)
    await bench.dynamo.doc.request('DeleteItem', {
      TableName: bench.dynamo.tables.jobs,
      Key: { pk: { S: `TIERSPOT#${tier.id}` }, sk: { S: 'META' } },
    });
});

/** A store over the same table whose writes of tier spot records are throttled (DynamoDB, past the SDK's retries). */
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

function watch(jobs: JobStore) {
  return createBudgetWatchHandler(
    {
      config: { ...CONFIG, teams: [{ id: team, principals: [], monthlyBudgetUsd: 400, fairShareWeight: 1 }] },
      jobs,
      ledger: bench.ledger,
      workspace: bench.workspace,
      batch: bench.ports.batch,
      events: bench.ports.events,
      lifecycle: bench.ports.lifecycle,
      metrics: bench.ports.metrics,
      clock: bench.clock,
      fleet: { ...bench.ports.fleet, spotCapacityAvailable: async () => false },
    },
    {},
  );
}

/** A 48 h job with a 54 h deadline waiting in gpu-small's spot queue since 14:01:05 (its own wait: 1 735 s). */
async function queuedJob(jobId: string) {
  await bench.jobs.createJob(
    jobRecord({
      jobId,
      team,
      state: 'WAITING',
      createdAt: new Date(T.created).toISOString(),
      estimate: { ...ESTIMATE, runtimeSeconds: 48 * 3600 },
      requirements: { deadlineSeconds: 54 * 3600 },
      bundle: { key: `teams/${team}/jobs/${jobId}/code.tar.gz`, bytes: 1, sha256: 'c'.repeat(64) },
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

/** gpu-small's record, confirmed a tick ago: spot out for 15 h (its start seen), model fitted an hour ago. */
const outage15h: TierSpotRecord = {
  tier: 'gpu-small',
  available: false,
  sinceMs: TICK_MS - 15 * 3_600_000,
  sinceChange: true,
  seenMs: TICK_MS - 300_000,
  modelFittedMs: TICK_MS - 3_600_000,
};

describe('budget-watch when the tier record cannot be written this tick', () => {
  it('with the write going through, the 15 h outage moves the queued job to on-demand', async () => {
    const jobId = `control-${n}`;
    await queuedJob(jobId);
    await bench.jobs.updateTierSpot('gpu-small', () => outage15h);

    const result = await watch(bench.jobs)(fixture('scheduled-event'));

    expect(result.moved).toEqual([{ jobId, to: 'on-demand' }]);
  });

  it('decides from the stored (one tick old, fresh) record when the write fails, not from no record', async () => {
    const jobId = `throttled-${n}`;
    await queuedJob(jobId);
    await bench.jobs.updateTierSpot('gpu-small', () => outage15h);

    // The run fails naming the tier, as it should; what matters is what it decided before failing.
    const run = watch(throttledTierSpotStore())(fixture('scheduled-event'));
    await expect(run).rejects.toThrow(BudgetWatchIncomplete);

    // Without the record the job would know only its own 1 735 s wait, and keep waiting in a 15 h outage.
    expect(await bench.jobs.listDecisions(jobId)).toEqual([
      expect.objectContaining({ decision: 'move-attempt 1 to on-demand' }),
    ]);
  });
});
