// GET /reports/showback against real engines: job and attempt records in dynalite, figures worked out by hand from
// the attempts (an ended attempt's recorded cost spread over its run; a running one at its price up to now).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AttemptRecord, JobRecord } from '../../../lambdas/domain/job';
import { attemptRecord, jobRecord } from '../../support/records';
import { type ApiBench, errorOf, PRINCIPALS, startApiBench } from './support';

const HOUR = 3_600_000;
const NOW = Date.parse('2026-03-20T12:00:00Z');

let bench: ApiBench;

/** GET /reports/showback as a principal, with an optional query. */
function showbackAs(as: string, query?: Record<string, string>) {
  return bench.call({ method: 'GET', path: '/reports/showback', as, ...(query && { query }) });
}

async function store(
  job: Partial<JobRecord> & { jobId: string; team: string },
  attempts: Array<Partial<AttemptRecord>>,
) {
  await bench.jobs.createJob(
    jobRecord({ state: 'SUCCEEDED', createdAt: new Date(NOW - 10 * 24 * HOUR).toISOString(), ...job }),
  );
  for (const [i, a] of attempts.entries()) {
    await bench.jobs.putAttempt(attemptRecord({ jobId: job.jobId, attempt: i + 1, status: 'SUCCEEDED', ...a }));
  }
}

beforeAll(async () => {
  bench = await startApiBench();
  bench.now = new Date(NOW);
  // nlp: a February job that ran across midnight into March 1st, a March spot job, and one running on-demand.
  await store({ jobId: 'nlp-feb', team: 'nlp', createdAt: '2026-02-28T20:00:00.000Z' }, [
    { startedAt: Date.parse('2026-02-28T23:00:00Z'), stoppedAt: Date.parse('2026-03-01T01:00:00Z'), costUsd: 0.4 },
  ]);
  await store({ jobId: 'nlp-spot', team: 'nlp', user: 'bob', project: 'gpt', labels: { sweep: 's1', lr: '0.1' } }, [
    { startedAt: NOW - 5 * 24 * HOUR, stoppedAt: NOW - 5 * 24 * HOUR + 2 * HOUR, costUsd: 0.38 },
  ]);
  await store({ jobId: 'nlp-running', team: 'nlp', state: 'RUNNING', labels: { sweep: 's1', lr: '0.2' } }, [
    { capacity: 'on-demand', status: 'RUNNING', startedAt: NOW - 2 * HOUR, usdPerHour: 0.526 },
  ]);
  await store({ jobId: 'vision-job', team: 'vision' }, [
    { startedAt: NOW - 3 * 24 * HOUR, stoppedAt: NOW - 3 * 24 * HOUR + HOUR, costUsd: 0.19 },
  ]);
});

afterAll(async () => {
  await bench?.stop();
});

describe('GET /reports/showback', () => {
  it('reports the caller’s team over the month so far, with running attempts up to now', async () => {
    const { status, body } = await showbackAs(PRINCIPALS.nlp);
    expect(status).toBe(200);
    expect(body).toMatchObject({ team: 'nlp', report: 'custom', periodStart: '2026-03-01', periodEnd: '2026-03-20' });
    expect(body.asOf).toBe(new Date(NOW).toISOString());
    // Half of nlp-feb's run (0.20), nlp-spot's 0.38, and two on-demand hours at 0.526.
    expect(body.totals).toEqual({
      costUsd: 1.632,
      spotUsd: 0.58,
      onDemandUsd: 1.052,
      instanceHours: 5,
      onDemandEquivalentUsd: 2.63, // 3 spot hours × 0.526 + 1.052
      savedBySpotUsd: 0.998,
      jobs: 3,
    });
    const jobs = body.jobs as Array<{ jobId: string; costUsd: number }>;
    expect(jobs.map((j) => [j.jobId, j.costUsd])).toEqual([
      ['nlp-running', 1.052],
      ['nlp-spot', 0.38],
      ['nlp-feb', 0.2],
    ]);
  });

  it('reports a chosen period', async () => {
    const { body } = await showbackAs(PRINCIPALS.nlp, { from: '2026-02-01', to: '2026-02-28' });
    expect(body).toMatchObject({ periodStart: '2026-02-01', periodEnd: '2026-02-28' });
    expect(body.totals).toMatchObject({ costUsd: 0.2, jobs: 1 });
  });

  it('names the parameter that was given when the period is wrong', async () => {
    const badTo = await showbackAs(PRINCIPALS.nlp, { to: '2026-3-5' });
    expect([badTo.status, errorOf(badTo.body).message]).toEqual([
      400,
      'to must be a date as YYYY-MM-DD (UTC), got "2026-3-5"',
    ]);
    // Today is 2026-03-20 on the bench.
    const future = await showbackAs(PRINCIPALS.nlp, { from: '2026-04-10' });
    expect([future.status, errorOf(future.body).message]).toEqual([
      400,
      'from (2026-04-10) is after today (2026-03-20), which to defaults to; give to as well',
    ]);
  });

  it('reports, for `to` alone, the month it ends: from its first day', async () => {
    const { status, body } = await showbackAs(PRINCIPALS.nlp, { to: '2026-02-28' });
    expect(status).toBe(200);
    expect(body).toMatchObject({ periodStart: '2026-02-01', periodEnd: '2026-02-28' });
    expect(body.totals).toMatchObject({ costUsd: 0.2, jobs: 1 });
  });

  it('counts only the jobs with the labels when asked (what a sweep cost), and says which', async () => {
    const nlpShowback = (query?: Record<string, string>) => showbackAs(PRINCIPALS.nlp, query);
    const sweep = await nlpShowback({ label: 'sweep=s1' });
    expect(sweep.status).toBe(200);
    expect(sweep.body.label).toBe('sweep=s1');
    // nlp-spot's 0.38 and nlp-running's two on-demand hours (1.052); nlp-feb has no labels.
    expect(sweep.body.totals).toMatchObject({ costUsd: 1.432, spotUsd: 0.38, onDemandUsd: 1.052, jobs: 2 });
    expect((sweep.body.jobs as Array<{ jobId: string; labels?: unknown }>).map((j) => [j.jobId, j.labels])).toEqual([
      ['nlp-running', { sweep: 's1', lr: '0.2' }],
      ['nlp-spot', { sweep: 's1', lr: '0.1' }],
    ]);
    expect((sweep.body.byProject as Array<{ project: string | null }>).map((p) => p.project)).toEqual([null, 'gpt']);

    expect((await nlpShowback({ label: 'sweep,lr=0.1' })).body.totals).toMatchObject({ costUsd: 0.38, jobs: 1 });
    expect((await nlpShowback({ label: 'x' })).body.totals).toMatchObject({ costUsd: 0, jobs: 0 });
    // Without a label the report has no label field.
    expect('label' in (await nlpShowback()).body).toBe(false);
  });

  it('lets an admin name any team, and nobody else another team', async () => {
    const admin = await showbackAs(PRINCIPALS.admin, { team: 'vision' });
    expect(admin.status).toBe(200);
    expect(admin.body).toMatchObject({ team: 'vision', totals: expect.objectContaining({ costUsd: 0.19, jobs: 1 }) });

    const other = await showbackAs(PRINCIPALS.vision, { team: 'nlp' });
    expect(other.status).toBe(403);
    expect(errorOf(other.body).message).toMatch(/may see team vision's showback only, not nlp's/);
  });

  it.each([
    [PRINCIPALS.admin, {}, /is an admin outside any team: name the team with \?team=; teams: nlp, vision/],
    [PRINCIPALS.admin, { team: 'audio' }, /team "audio" is not configured; teams: nlp, vision/],
    [PRINCIPALS.nlp, { from: '2026-02-30' }, /from must be a date as YYYY-MM-DD \(UTC\), got "2026-02-30"/],
    [PRINCIPALS.nlp, { from: '2026-03-10', to: '2026-03-01' }, /to \(2026-03-01\) is before from \(2026-03-10\)/],
    [PRINCIPALS.nlp, { from: '2025-01-01' }, /a showback covers at most 93 days/],
    [PRINCIPALS.nlp, { month: '2026-03' }, /query: unknown field\(s\) "month"/],
    [PRINCIPALS.nlp, { label: 'Sweep=s1' }, /^query\.label: "Sweep=s1": label keys must be 1-63 characters/],
  ])('refuses %s with %j', async (as, query, message) => {
    const response = await showbackAs(as, query);
    expect(response.status).toBe(400);
    expect(errorOf(response.body).message).toMatch(message);
  });
});
