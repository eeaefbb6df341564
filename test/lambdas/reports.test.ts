// The scheduled showback reports against dynalite (jobs, attempts, announcement records) and s3rver (the report
// objects). Figures by hand: an ended attempt counts its recorded cost spread over its run; a running one accrues
// price × seconds up to the end of the period (the report runs after it).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseEventDetail } from '../../lambdas/domain/events';
import type { AttemptRecord, JobRecord } from '../../lambdas/domain/job';
import type { AllTeamsShowback, TeamShowback } from '../../lambdas/domain/showback';
import { createReportsHandler, InvalidReportsInput, ReportsIncomplete } from '../../lambdas/reports/reports';
import { jobKeys } from '../../lambdas/shared/table-design';
import { attemptRecord, CONFIG, type EventBench, jobRecord, startEventBench } from './event-bench';

const HOUR = 3_600_000;

let bench: EventBench;
let run = 0;
let teams: [string, string];

beforeAll(async () => {
  bench = await startEventBench({ withS3: true, now: new Date('2026-12-31T00:00:00Z') });
});

afterAll(async () => {
  await bench.stop();
});

// Each test has two teams of its own, and reports on a week of its own, so tests share one engine without meeting
// each other's jobs or announcement records.
beforeEach(() => {
  run += 1;
  teams = [`ta-${run}`, `tb-${run}`];
  bench.resetRecorded();
});

function reports() {
  const config = {
    ...CONFIG,
    teams: teams.map((id) => ({ id, principals: [], monthlyBudgetUsd: 400, fairShareWeight: 1 })),
  };
  return createReportsHandler({ config, jobs: bench.jobs, workspace: bench.workspace, events: bench.ports.events });
}

/** Monday 00:00 UTC of the test's week: 2026-01-05 plus a week per test. */
function weekStart(): number {
  return Date.UTC(2026, 0, 5) + (run - 1) * 7 * 24 * HOUR;
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

async function store(job: Partial<JobRecord> & { jobId: string }, attempts: Array<Partial<AttemptRecord>>) {
  await bench.jobs.createJob(jobRecord({ state: 'SUCCEEDED', ...job }));
  for (const [i, a] of attempts.entries()) {
    await bench.jobs.putAttempt(attemptRecord({ jobId: job.jobId, attempt: i + 1, status: 'SUCCEEDED', ...a }));
  }
}

async function json<T>(uri: string): Promise<T> {
  return (await bench.workspace.getJson(uri.replace(`s3://${bench.workspace.bucket}/`, ''))) as T;
}

/** Jobs of the week: team A ran a spot job and an on-demand job still running at the week's end; team B ran
 * nothing that week (one job ended the week before, one was created after). */
async function seedWeek(monday: number) {
  const [a, b] = teams;
  await store(
    { jobId: `${a}-spot`, team: a, user: 'alice', project: 'gpt', createdAt: new Date(monday).toISOString() },
    [
      {
        capacity: 'spot',
        startedAt: monday + 10 * HOUR,
        stoppedAt: monday + 12 * HOUR,
        costUsd: 0.38,
        usdPerHour: 0.19,
      },
    ],
  );
  await store(
    {
      jobId: `${a}-od`,
      team: a,
      user: 'bob',
      state: 'RUNNING',
      createdAt: new Date(monday + 6 * 24 * HOUR).toISOString(),
    },
    [{ capacity: 'on-demand', status: 'RUNNING', startedAt: monday + 7 * 24 * HOUR - HOUR, usdPerHour: 0.526 }],
  );
  await store({ jobId: `${b}-before`, team: b, createdAt: new Date(monday - 3 * 24 * HOUR).toISOString() }, [
    { capacity: 'spot', startedAt: monday - 2 * 24 * HOUR, stoppedAt: monday - 24 * HOUR, costUsd: 4.56 },
  ]);
  await store({ jobId: `${b}-after`, team: b, createdAt: new Date(monday + 7 * 24 * HOUR + HOUR).toISOString() }, [
    {
      capacity: 'spot',
      startedAt: monday + 7 * 24 * HOUR + 2 * HOUR,
      stoppedAt: monday + 7 * 24 * HOUR + 3 * HOUR,
      costUsd: 0.19,
    },
  ]);
}

/** The weekly schedule's input, the Monday after the test's week at 01:30 UTC. */
function weeklyInput(monday: number) {
  return { report: 'weekly', time: new Date(monday + 7 * 24 * HOUR + 1.5 * HOUR).toISOString() };
}

describe('reports', () => {
  it('writes each team’s showback (JSON and CSV) and the all-teams rollup, and announces each once', async () => {
    const monday = weekStart();
    await seedWeek(monday);
    const result = await reports()(weeklyInput(monday));
    const [a, b] = teams;
    const start = day(monday);
    expect(result).toMatchObject({ report: 'weekly', periodStart: start, periodEnd: day(monday + 6 * 24 * HOUR) });
    const bucket = bench.workspace.bucket;
    expect(result.written).toEqual([
      {
        team: a,
        uri: `s3://${bucket}/reports/weekly/${start}/teams/${a}.json`,
        totalUsd: 0.906,
        jobs: 2,
        announced: true,
      },
      { team: b, uri: `s3://${bucket}/reports/weekly/${start}/teams/${b}.json`, totalUsd: 0, jobs: 0, announced: true },
      { uri: `s3://${bucket}/reports/weekly/${start}/all-teams.json`, totalUsd: 0.906, jobs: 2, announced: true },
    ]);

    const teamA = await json<TeamShowback>(result.written[0]?.uri ?? '');
    // 0.38 for the spot job; the on-demand one ran the week's last hour at 0.526.
    expect(teamA.totals).toMatchObject({ costUsd: 0.906, spotUsd: 0.38, onDemandUsd: 0.526, instanceHours: 3 });
    expect(teamA.jobs.map((j) => [j.jobId, j.costUsd, j.state])).toEqual([
      [`${a}-od`, 0.526, 'RUNNING'],
      [`${a}-spot`, 0.38, 'SUCCEEDED'],
    ]);
    expect(teamA.asOf).toBe(new Date(monday + 7 * 24 * HOUR).toISOString());
    const csv = (await bench.workspace.get(`reports/weekly/${start}/teams/${a}.csv`))?.toString() ?? '';
    expect(csv.split('\r\n').filter(Boolean)).toHaveLength(3);
    const all = await json<AllTeamsShowback>(result.written[2]?.uri ?? '');
    expect(all.byTeam.map((t) => [t.team, t.costUsd, t.jobs])).toEqual([
      [a, 0.906, 2],
      [b, 0, 0],
    ]);

    const details = bench.recorded.published.map((e) => parseEventDetail('Cost Report Ready', JSON.parse(e.Detail)));
    expect(bench.recorded.published.every((e) => e.DetailType === 'Cost Report Ready')).toBe(true);
    expect(details.map((d) => [d.team, d.totalUsd, d.jobs, d.uri])).toEqual(
      result.written.map((w) => [w.team, w.totalUsd, w.jobs, w.uri]),
    );
    expect(details[0]).toMatchObject({
      report: 'weekly',
      periodStart: start,
      eventId: `report/weekly/${start}/${day(monday + 6 * 24 * HOUR)}/${a}`,
    });
    expect(details[0]?.summary).toContain(`team ${a}`);
  });

  it('rewrites the same reports on a replay and announces nothing twice', async () => {
    const monday = weekStart();
    await seedWeek(monday);
    const handler = reports();
    const first = await handler(weeklyInput(monday));
    bench.resetRecorded();
    const again = await handler(weeklyInput(monday));
    expect(again.written.map((w) => [w.uri, w.totalUsd, w.announced])).toEqual(
      first.written.map((w) => [w.uri, w.totalUsd, false]),
    );
    expect(bench.recorded.published).toEqual([]);
  });

  it('reports the day before on the daily schedule', async () => {
    const monday = weekStart();
    await seedWeek(monday);
    // Tuesday 00:15: Monday's report holds the spot job only.
    const result = await reports()({ report: 'daily', time: new Date(monday + 24 * HOUR + 15 * 60_000).toISOString() });
    expect(result).toMatchObject({ report: 'daily', periodStart: day(monday), periodEnd: day(monday) });
    expect(result.written.map((w) => [w.team, w.totalUsd, w.jobs])).toEqual([
      [teams[0], 0.38, 1],
      [teams[1], 0, 0],
      [undefined, 0.38, 1],
    ]);
  });

  it('finishes the other teams when one fails, then fails naming it, without the all-teams rollup', async () => {
    const monday = weekStart();
    await seedWeek(monday);
    const [a, b] = teams;
    // An attempt record that is not one (no capacity, no status): team B's report cannot be read.
    await bench.jobs.createJob(jobRecord({ jobId: `${b}-broken`, team: b, createdAt: new Date(monday).toISOString() }));
    await bench.dynamo.doc.put({
      TableName: bench.dynamo.tables.jobs,
      Item: { ...jobKeys.attempt(`${b}-broken`, 1), jobId: `${b}-broken`, attempt: 1 },
    });
    const failed = reports()(weeklyInput(monday));
    await expect(failed).rejects.toThrow(ReportsIncomplete);
    await expect(failed).rejects.toThrow(
      new RegExp(`1 of 2 team\\(s\\) failed \\(${b}: InvalidJobRecord: invalid attempt record`),
    );
    const start = day(monday);
    expect(await bench.workspace.get(`reports/weekly/${start}/teams/${a}.json`)).toBeDefined();
    expect(await bench.workspace.get(`reports/weekly/${start}/all-teams.json`)).toBeUndefined();
    expect(bench.recorded.published.map((e) => JSON.parse(e.Detail).team)).toEqual([a]);
  });

  it.each([
    [{ report: 'monthly', time: '2026-11-23T01:30:00Z' }, /report/],
    [{ report: 'weekly' }, /time/],
    [{ report: 'weekly', time: 'yesterday' }, /time/],
    [{ report: 'weekly', time: '2026-11-23T01:30:00Z', team: 'x' }, /team/],
  ])('refuses %j and writes nothing', async (input, field) => {
    const result = reports()(input);
    await expect(result).rejects.toThrow(InvalidReportsInput);
    await expect(result).rejects.toThrow(field);
    await expect(result).rejects.toThrow(/expected \{ "report": "daily" \| "weekly", "time": ISO 8601 \}/);
    expect(bench.recorded.published).toEqual([]);
  });
});
