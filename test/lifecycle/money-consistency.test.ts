// One job's money, end to end through the synthesized state machine: whatever its path, every figure of its cost
// agrees (money-figures.ts), and nothing stays reserved once it ends.
import { afterEach, expect, it } from 'vitest';
import { ADMIN, type AttemptScript, type BenchOptions, type LifecycleBench, startLifecycleBench } from './bench';
import { expectConsistent } from './money-figures';

let bench: LifecycleBench | undefined;
afterEach(async () => {
  await bench?.stop();
  bench = undefined;
});

async function start(options: BenchOptions = {}) {
  bench = await startLifecycleBench(options);
  const b = bench;
  expect((await b.call('PUT', '/budgets/project:nlp/p1', ADMIN, { limitUsd: 50 })).status).toBe(200);
  expect((await b.call('PUT', '/budgets/user:nlp/nlp-researchers', ADMIN, { limitUsd: 50 })).status).toBe(200);
  return b;
}
async function submit(b: LifecycleBench, script: AttemptScript[], body: Record<string, unknown> = {}) {
  const r = await b.submit({ project: 'p1', ...body });
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  const jobId = (r.body.job as { jobId: string }).jobId;
  b.batch.scripts.set(jobId, script);
  return jobId;
}
async function held(b: LifecycleBench, jobId: string, attempt = 1) {
  await b.until('the attempt to run', async () => {
    const a = await b.plane.jobs.getAttempt(jobId, attempt);
    return a?.batchJobId !== undefined && b.batch.isHeld(a.batchJobId);
  });
}

it('reclaim then resume: two minimums, every figure agrees', async () => {
  const b = await start();
  const jobId = await submit(b, [
    { result: 'reclaim', seconds: 37, step: 100 },
    { result: 'succeed', seconds: 1234 },
  ]);
  await b.finish(jobId);
  await expectConsistent(b, jobId);
});

it('cancel while RUNNING', async () => {
  const b = await start();
  const jobId = await submit(b, [{ result: 'hold' }]);
  await held(b, jobId);
  b.clock.advance(601.3);
  expect((await b.call('DELETE', `/jobs/${jobId}`)).status).toBe(202);
  await b.finish(jobId);
  const f = await expectConsistent(b, jobId);
  expect(f.job.state).toBe('CANCELLED');
});

it('cancel while RUNNABLE costs nothing', async () => {
  const b = await start();
  const jobId = await submit(b, [{ result: 'queued' }]);
  await b.until('queued', async () => (await b.plane.jobs.getAttempt(jobId, 1))?.batchJobId !== undefined);
  b.clock.advance(300);
  expect((await b.call('DELETE', `/jobs/${jobId}`)).status).toBe(202);
  await b.finish(jobId);
  const f = await expectConsistent(b, jobId);
  expect(f.cents).toBe(0);
});

it('paused for budget then resumed', async () => {
  bench = await startLifecycleBench({
    config: {
      teams: [{ id: 'nlp', principals: ['arn:aws:iam::123456789012:role/nlp-researchers'], monthlyBudgetUsd: 0.3 }],
    },
  });
  const b = bench;
  expect((await b.call('PUT', '/budgets/project:nlp/p1', ADMIN, { limitUsd: 50 })).status).toBe(200);
  const jobId = await submit(b, [
    { result: 'hold', step: 500 },
    { result: 'succeed', seconds: 777 },
  ]);
  await held(b, jobId);
  b.clock.advance(1.9 * 3600);
  await b.runBudgetWatch();
  await b.until('the pause', async () => {
    const job = await b.plane.jobs.requireJob(jobId);
    return job.state === 'PAUSED_BUDGET' && job.pauseToken !== undefined;
  });
  expect((await b.call('PUT', '/budgets/team:nlp', ADMIN, { limitUsd: 20 })).status).toBe(200);
  await b.runBudgetWatch();
  await b.finish(jobId);
  const f = await expectConsistent(b, jobId);
  expect(f.job.state).toBe('SUCCEEDED');
});

it('lost attempt (orphan Batch job)', async () => {
  const b = await start();
  const jobId = await submit(b, [
    { result: 'lost', step: 10 },
    { result: 'succeed', seconds: 500 },
  ]);
  await b.finish(jobId);
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  await expectConsistent(b, jobId);
});

it('lost-late attempt', async () => {
  const b = await start();
  const jobId = await submit(b, [
    { result: 'lost-late', step: 10 },
    { result: 'succeed', seconds: 500 },
  ]);
  await b.finish(jobId);
  for (let i = 0; i < 50; i++) await new Promise((r) => setImmediate(r));
  await expectConsistent(b, jobId);
});

it('Batch RUNNING/SUCCEEDED events never arrive', async () => {
  bench = undefined;
  const b = await start({ dropBatchEvents: ['RUNNING', 'SUCCEEDED', 'FAILED'] });
  const jobId = await submit(b, [
    { result: 'reclaim', seconds: 20 },
    { result: 'succeed', seconds: 333 },
  ]);
  await b.finish(jobId);
  await expectConsistent(b, jobId);
});

it('two reclaims then on-demand fallback', async () => {
  const b = await start();
  const jobId = await submit(b, [
    { result: 'reclaim', seconds: 100, step: 10 },
    { result: 'reclaim', seconds: 45, step: 20 },
    { result: 'succeed', seconds: 1000 },
  ]);
  await b.finish(jobId);
  const f = await expectConsistent(b, jobId);
  expect(f.attempts.map((a) => a.capacity)).toEqual(['spot', 'spot', 'on-demand']);
});

it('app error fails, billed', async () => {
  const b = await start();
  const jobId = await submit(b, [{ result: 'app-error', seconds: 12 }]);
  await b.finish(jobId);
  await expectConsistent(b, jobId);
});

// The bench's fleet quotes $0.20/h for every spot start; gpu-small's configured price is $0.19/h. An attempt is charged
// the spot price it started at (cost-model §2), whichever of Batch's events reached the platform.
async function priceOf(drop: string[]) {
  bench = await startLifecycleBench({ dropBatchEvents: drop });
  const b = bench;
  const r = await b.submit({});
  expect(r.status).toBe(202);
  const jobId = (r.body.job as { jobId: string }).jobId;
  b.batch.scripts.set(jobId, [{ result: 'succeed', seconds: 3600 }]);
  await b.finish(jobId);
  const [attempt] = await b.plane.jobs.listAttempts(jobId);
  const job = await b.plane.jobs.requireJob(jobId);
  await b.stop();
  bench = undefined;
  return { usdPerHour: attempt?.usdPerHour, costUsd: attempt?.costUsd, job: job.costSoFarUsd };
}

it('prices an attempt the same whether or not Batch’s RUNNING event reached batch-events', async () => {
  const seen = await priceOf([]);
  expect(seen.usdPerHour).toBe(0.2);
  // Only the RUNNING event is lost: the attempt's end (and its container instance) reaches the platform.
  const missed = await priceOf(['RUNNING']);
  expect(missed).toEqual(seen);
});

it('prices an attempt at its start price when Batch reported nothing until it ended (AttemptOutcome records it)', async () => {
  const missed = await priceOf(['RUNNING', 'SUCCEEDED']);
  expect(missed.usdPerHour).toBe(0.2);
});
