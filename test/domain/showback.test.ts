// Showback figures worked out by hand: an ended attempt spreads its recorded cost evenly over its run, a running one
// accrues price × seconds (60 s minimum) up to the report's asOf, and a spot hour's on-demand equivalent is the
// tier's on-demand price (gpu-small: 0.526 USD/h).
import { describe, expect, it } from 'vitest';
import type { AttemptRecord, JobRecord } from '../../lambdas/domain/job';
import {
  attemptShare,
  buildAllTeamsShowback,
  buildTeamShowback,
  completedPeriod,
  customPeriod,
  InvalidReportPeriod,
  type JobWithAttempts,
  MAX_REPORT_DAYS,
  mayHaveRunIn,
  nextReportRun,
  showbackCsv,
} from '../../lambdas/domain/showback';
import { parseConfig } from '../../lib/config';
import { attemptRecord, jobRecord } from '../support/records';

const config = parseConfig({}, 'test');
const HOUR = 3_600_000;
/** 2026-11-21T00:00:00Z, a Saturday. */
const D = Date.UTC(2026, 10, 21);
const DAY = customPeriod('2026-11-21', '2026-11-21');

const job = (jobId: string, fields: Partial<JobRecord> = {}): JobRecord =>
  jobRecord({ jobId, team: 'nlp', state: 'SUCCEEDED', createdAt: new Date(D - 2 * HOUR).toISOString(), ...fields });

const attempt = (jobId: string, n: number, fields: Partial<AttemptRecord>): AttemptRecord =>
  attemptRecord({ jobId, attempt: n, queue: 'q', status: 'SUCCEEDED', ...fields });

const ended = (jobId: string, n: number, capacity: 'spot' | 'on-demand', from: number, to: number, costUsd: number) =>
  attempt(jobId, n, { capacity, startedAt: from, stoppedAt: to, costUsd, usdPerHour: 0.2 });

describe('report periods', () => {
  it('daily is the UTC day before the run; weekly the Monday–Sunday week before the one the run is in', () => {
    const sundayNight = new Date('2026-11-22T23:59:00Z');
    expect(completedPeriod('daily', sundayNight)).toMatchObject({ start: '2026-11-21', end: '2026-11-21' });
    expect(completedPeriod('weekly', sundayNight)).toMatchObject({ start: '2026-11-09', end: '2026-11-15' });
    const mondayMorning = new Date('2026-11-23T01:30:00Z');
    const weekly = completedPeriod('weekly', mondayMorning);
    expect(weekly).toMatchObject({ kind: 'weekly', start: '2026-11-16', end: '2026-11-22' });
    expect(weekly.fromMs).toBe(Date.UTC(2026, 10, 16));
    expect(weekly.toMs).toBe(Date.UTC(2026, 10, 23));
    // New year's day 2027 is a Friday: its daily report covers the last day of 2026.
    expect(completedPeriod('daily', new Date('2027-01-01T01:00:00Z'))).toMatchObject({ start: '2026-12-31' });
  });

  it.each([
    ['daily', '2026-11-21T00:59:59Z', '2026-11-21T01:00:00.000Z'],
    ['daily', '2026-11-21T01:00:00Z', '2026-11-22T01:00:00.000Z'],
    ['daily', '2026-12-31T23:00:00Z', '2027-01-01T01:00:00.000Z'],
    ['weekly', '2026-11-21T12:00:00Z', '2026-11-23T01:30:00.000Z'], // Saturday → Monday
    ['weekly', '2026-11-23T01:29:00Z', '2026-11-23T01:30:00.000Z'],
    ['weekly', '2026-11-23T01:30:00Z', '2026-11-30T01:30:00.000Z'],
  ] as const)('the %s report after %s runs at %s', (kind, after, next) => {
    expect(nextReportRun(kind, new Date(after)).toISOString()).toBe(next);
    // Run then, it reports the period that has just ended.
    const period = completedPeriod(kind, new Date(next));
    expect(period.toMs).toBeLessThanOrEqual(Date.parse(next));
    expect(Date.parse(next) - period.toMs).toBeLessThan(2 * HOUR);
  });

  it('a chosen period runs from its first to its last day inclusive', () => {
    const p = customPeriod('2026-02-27', '2026-03-01');
    expect(p).toMatchObject({ kind: 'custom', start: '2026-02-27', end: '2026-03-01' });
    expect((p.toMs - p.fromMs) / (24 * HOUR)).toBe(3);
  });

  it.each([
    ['2026-02-30', '2026-03-01', /from must be a date as YYYY-MM-DD \(UTC\), got "2026-02-30"/],
    ['2026-11-01', '21/11/2026', /to must be a date as YYYY-MM-DD/],
    ['2026-11-21', '2026-11-20', /to \(2026-11-20\) is before from \(2026-11-21\)/],
    ['2026-01-01', '2026-04-04', new RegExp(`is 94 days; a showback covers at most ${MAX_REPORT_DAYS} days`)],
  ])('refuses from %s to %s', (from, to, message) => {
    expect(() => customPeriod(from, to)).toThrow(InvalidReportPeriod);
    expect(() => customPeriod(from, to)).toThrow(message);
  });
});

describe('attemptShare', () => {
  it('spreads an ended attempt’s recorded cost over its run, and cut points add up to the cost exactly', () => {
    const a = ended('j', 1, 'spot', D, D + HOUR, 3.6);
    expect(attemptShare(a, undefined, D + HOUR / 4, D + (3 * HOUR) / 4, D + 5 * HOUR)).toEqual({
      costMicros: 1_800_000,
      instanceSeconds: 1800,
    });
    const cuts = [D - HOUR, D + 7_001, D + 1_234_567, D + 2_000_003, D + 3_333_333, D + 2 * HOUR];
    let sum = 0;
    for (const [i, cut] of cuts.slice(1).entries())
      sum += attemptShare(a, undefined, cuts[i] ?? cut, cut, D).costMicros;
    expect(sum).toBe(3_600_000);
  });

  it('accrues a running attempt like the ledger, 60 s minimum included, up to asOf only', () => {
    // 0.36 USD/h = 100 µUSD a second; started 30 s before the cut.
    const running = attempt('j', 1, { status: 'RUNNING', startedAt: D - 30_000, usdPerHour: 0.36 });
    const asOf = D + 60_000;
    const before = attemptShare(running, undefined, D - HOUR, D, asOf);
    const after = attemptShare(running, undefined, D, D + HOUR, asOf);
    expect(before).toEqual({ costMicros: 6000, instanceSeconds: 30 }); // 30 s run, 60 s billed
    expect(after).toEqual({ costMicros: 3000, instanceSeconds: 60 }); // 90 s in all by asOf
  });

  it('prices an attempt stopped before its cost was recorded from the tier, and one that never started as nothing', () => {
    const tier = config.tiers.find((t) => t.id === 'gpu-small');
    const stopped = attempt('j', 1, { capacity: 'on-demand', startedAt: D, stoppedAt: D + HOUR, nodes: 2 });
    expect(attemptShare(stopped, tier, D, D + HOUR, D)).toEqual({ costMicros: 1_052_000, instanceSeconds: 7200 });
    const queued = attempt('j', 2, { status: 'RUNNABLE' });
    expect(attemptShare(queued, tier, D - HOUR, D + HOUR, D)).toEqual({ costMicros: 0, instanceSeconds: 0 });
  });
});

describe('buildTeamShowback', () => {
  const jobs: JobWithAttempts[] = [
    {
      job: job('a', { project: 'gpt' }),
      attempts: [
        ended('a', 1, 'spot', D + HOUR, D + 3 * HOUR, 0.36),
        ended('a', 2, 'on-demand', D + 3 * HOUR, D + 4 * HOUR, 0.53),
      ],
    },
    // Half of its run falls in the day before.
    { job: job('b', { user: 'bob' }), attempts: [ended('b', 1, 'spot', D - HOUR, D + HOUR, 0.4)] },
    {
      job: job('c', { project: 'gpt', state: 'RUNNING' }),
      attempts: [attempt('c', 1, { status: 'RUNNING', startedAt: D + 23 * HOUR, usdPerHour: 0.2 })],
    },
    // Over before the day began, and never started.
    { job: job('d', { user: 'bob' }), attempts: [ended('d', 1, 'spot', D - 5 * HOUR, D - 3 * HOUR, 0.4)] },
    { job: job('e', { state: 'WAITING' }), attempts: [attempt('e', 1, { status: 'RUNNABLE' })] },
  ];
  // The running job is seen two hours into the next day: only its first hour belongs to this one.
  const report = buildTeamShowback(config, 'nlp', DAY, jobs, new Date(D + 25 * HOUR));

  it('totals what ran in the period, spot and on-demand apart, with spot’s saving at on-demand prices', () => {
    expect(report).toMatchObject({ team: 'nlp', periodStart: '2026-11-21', periodEnd: '2026-11-21', report: 'custom' });
    expect(report.asOf).toBe(new Date(D + 24 * HOUR).toISOString());
    expect(report.totals).toEqual({
      costUsd: 1.29, // 0.36 + 0.53 + 0.20 + 0.20
      spotUsd: 0.76,
      onDemandUsd: 0.53,
      instanceHours: 5,
      onDemandEquivalentUsd: 2.634, // 4 spot hours × 0.526 + the on-demand attempt's 0.53
      savedBySpotUsd: 1.344,
      jobs: 3,
    });
  });

  it('lists the jobs that ran, dearest first, and groups them by user, project and tier', () => {
    expect(report.jobs.map((j) => [j.jobId, j.costUsd, j.state])).toEqual([
      ['a', 0.89, 'SUCCEEDED'],
      ['b', 0.2, 'SUCCEEDED'],
      ['c', 0.2, 'RUNNING'],
    ]);
    expect(report.byUser.map((u) => [u.user, u.costUsd, u.jobs])).toEqual([
      ['alice', 1.09, 2],
      ['bob', 0.2, 1],
    ]);
    expect(report.byProject.map((p) => [p.project, p.costUsd, p.instanceHours])).toEqual([
      ['gpt', 1.09, 4],
      [null, 0.2, 1],
    ]);
    expect(report.byTier).toEqual([{ tier: 'gpu-small', ...report.totals }]);
  });

  it('bills a short spot run’s on-demand equivalent its minimum minute too, so spot never shows a loss', () => {
    // A 10 s spot run at 0.19 $/h is billed 60 s: $0.003167. On-demand would have been billed the same 60 s at the
    // tier's 0.526 $/h: $0.008767, a saving of $0.0056 (10 s at 0.526 $/h, $0.001461, would show a loss).
    const short = attempt('s', 1, {
      capacity: 'spot',
      startedAt: D + HOUR,
      stoppedAt: D + HOUR + 10_000,
      usdPerHour: 0.19,
      costUsd: 0.003167,
    });
    const day = buildTeamShowback(config, 'nlp', DAY, [{ job: job('s'), attempts: [short] }], new Date(D + 2 * HOUR));
    expect(day.totals).toMatchObject({
      costUsd: 0.003167,
      spotUsd: 0.003167,
      onDemandEquivalentUsd: 0.008767,
      savedBySpotUsd: 0.0056,
    });
    // Still running 10 s into it, the same minute accrues at both prices.
    const running = { ...short, status: 'RUNNING' as const, stoppedAt: undefined, costUsd: undefined };
    const now = buildTeamShowback(
      config,
      'nlp',
      DAY,
      [{ job: job('s'), attempts: [running] }],
      new Date(D + HOUR + 10_000),
    );
    expect(now.totals).toMatchObject({ costUsd: 0.003167, onDemandEquivalentUsd: 0.008767, savedBySpotUsd: 0.0056 });
  });

  it('counts an orphaned Batch job as one more run, on its own capacity and times', () => {
    // Attempt 1 recorded as not run ($0), and its orphan ran on on-demand from 23:00 the day before to 01:00: half of
    // its $1.00 in the day.
    const orphan = { capacity: 'on-demand' as const, startedAt: D - HOUR, stoppedAt: D + HOUR, usdPerHour: 0.5 };
    const notRun = attempt('o', 1, { status: 'FAILED', stoppedAt: D - HOUR, costUsd: 0 });
    const withOrphan = { ...notRun, orphans: { 'b-9': { ...orphan, costUsd: 1 } } };
    const day = buildTeamShowback(config, 'nlp', DAY, [{ job: job('o'), attempts: [withOrphan] }], new Date(D + HOUR));
    expect(day.totals).toEqual({
      costUsd: 0.5,
      spotUsd: 0,
      onDemandUsd: 0.5,
      instanceHours: 1,
      onDemandEquivalentUsd: 0.5,
      savedBySpotUsd: 0,
      jobs: 1,
    });
  });

  it('makes a week the exact sum of its seven days', () => {
    const week = customPeriod('2026-11-16', '2026-11-22');
    const asOf = new Date(D + 25 * HOUR);
    const weekly = buildTeamShowback(config, 'nlp', week, jobs, asOf);
    let micros = 0;
    for (let day = 16; day <= 22; day++) {
      const text = `2026-11-${day}`;
      micros += Math.round(buildTeamShowback(config, 'nlp', customPeriod(text, text), jobs, asOf).totals.costUsd * 1e6);
    }
    expect(Math.round(weekly.totals.costUsd * 1e6)).toBe(micros);
    // The week holds all of b (0.40) and c's two hours by asOf (0.40), and d (0.40).
    expect(weekly.totals.costUsd).toBe(2.09);
  });

  it('refuses another team’s job', () => {
    expect(() => buildTeamShowback(config, 'vision', DAY, jobs, new Date(D))).toThrow(
      /job a belongs to team nlp, not vision/,
    );
  });

  it('rolls teams up into the all-teams report, rows adding up to the totals', () => {
    const vision = buildTeamShowback(
      config,
      'vision',
      DAY,
      [{ job: job('v', { team: 'vision' }), attempts: [ended('v', 1, 'on-demand', D, D + 2 * HOUR, 1.05)] }],
      new Date(D + 25 * HOUR),
    );
    const all = buildAllTeamsShowback(DAY, [report, vision], new Date(D + 25 * HOUR));
    expect(all.byTeam.map((t) => [t.team, t.costUsd])).toEqual([
      ['nlp', 1.29],
      ['vision', 1.05],
    ]);
    expect(all.totals).toMatchObject({ costUsd: 2.34, instanceHours: 7, jobs: 4, savedBySpotUsd: 1.344 });
    expect(() => buildAllTeamsShowback(customPeriod('2026-11-20', '2026-11-20'), [report], new Date(D))).toThrow(
      /covers 2026-11-21..2026-11-21, not 2026-11-20..2026-11-20/,
    );
  });
});

describe('mayHaveRunIn', () => {
  it.each([
    { what: 'created after the period', fields: { createdAt: new Date(D + 24 * HOUR).toISOString() }, may: false },
    {
      what: 'running, created long before',
      fields: { state: 'RUNNING' as const, createdAt: '2026-01-01T00:00:00.000Z' },
      may: true,
    },
    { what: 'ended two days before', fields: { updatedAt: new Date(D - 48 * HOUR).toISOString() }, may: false },
    { what: 'ended just before (clock margin)', fields: { updatedAt: new Date(D - HOUR).toISOString() }, may: true },
    { what: 'ended within', fields: { updatedAt: new Date(D + HOUR).toISOString() }, may: true },
  ])('$what → $may', ({ fields, may }) => {
    expect(mayHaveRunIn(job('x', fields), DAY)).toBe(may);
  });
});

describe('showbackCsv', () => {
  it('writes a header and one row per job, quoting commas and quotes and defusing spreadsheet formulas', () => {
    const report = buildTeamShowback(
      config,
      'nlp',
      DAY,
      [
        {
          job: job('a', { user: '=HYPERLINK("x")', project: 'p,1' }),
          attempts: [ended('a', 1, 'spot', D, D + HOUR, 0.2)],
        },
      ],
      new Date(D + 24 * HOUR),
    );
    const [header, row, end] = showbackCsv(report).split('\r\n');
    expect(header).toBe(
      'periodStart,periodEnd,team,jobId,user,project,tier,state,createdAt,costUsd,spotUsd,onDemandUsd,instanceHours,onDemandEquivalentUsd,savedBySpotUsd,labels',
    );
    expect(row).toBe(
      `2026-11-21,2026-11-21,nlp,a,"'=HYPERLINK(""x"")","p,1",gpu-small,SUCCEEDED,${job('a').createdAt},0.2,0.2,0,1,0.526,0.326,`,
    );
    expect(end).toBe('');
  });

  it('ends each row with the job’s labels, key=value in key order (the form --label takes), quoted for the commas', () => {
    const report = buildTeamShowback(
      config,
      'nlp',
      DAY,
      [
        {
          job: job('a', { labels: { sweep: 'cli-1', lr: '3e-4' } }),
          attempts: [ended('a', 1, 'spot', D, D + HOUR, 0.2)],
        },
      ],
      new Date(D + 24 * HOUR),
    );
    const [header, row] = showbackCsv(report).split('\r\n');

    expect(header?.split(',').at(-1)).toBe('labels');
    expect(row?.endsWith(',0.326,"lr=3e-4,sweep=cli-1"')).toBe(true);
  });
});
