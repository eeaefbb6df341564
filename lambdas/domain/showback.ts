/**
 * Showback: what each team, user, project and tier spent on GPU instances over a period of UTC days, from the
 * attempt records (the same figures the ledger settles), with spot and on-demand apart and what spot saved against
 * on-demand prices.
 *
 * Pure module (no AWS SDK, no process.env): the scheduled reports function (lambdas/reports/) and the API's
 * `GET /reports/showback` gather the jobs and attempts and call {@link buildTeamShowback}; tests call it directly.
 *
 * How an attempt's cost is spread over time. Each attempt has a cumulative cost C(t), in integer micro-dollars, and
 * the cost it puts in a period [from, to) is C(to) − C(from):
 * - ended (a recorded `costUsd`, or a stop and a price): the cost accrues linearly from start to stop, so a period
 *   gets the share of the attempt's run inside it (an attempt of under a minute, billed EC2's 60 s, spreads its
 *   minute's price over the seconds it ran);
 * - running (started, no stop): the ledger's running accrual, price × nodes × seconds since start with the 60 s
 *   minimum, up to the report's `asOf` time and no further;
 * - never started: nothing.
 * An orphaned Batch job recorded on an attempt is one more ended run, with its own capacity, times and cost.
 * Because every period takes a difference of the same C, adjacent periods computed from the same records add up to the
 * attempt's cost exactly: a week is the sum of its seven days to the micro-dollar, and a job's periods add up to what
 * the ledger settled. Reports made at different times (the scheduled daily and weekly ones) see the records as they
 * stood then, so they agree only up to what was recorded in between.
 *
 * Money is integer micro-dollars inside and USD (exact to the micro-dollar) in the report, so rows add up to totals.
 */
import type { TierConfig, TrainyardConfig } from '../../lib/config';
import { attemptPrice, billedRunsOf } from './attempt-cost';
import { MICROS_PER_USD, microsToUsd } from './budgets';
import { compareCodeUnits } from './code-unit-order';
import { type AttemptRecord, isTerminal, type JobRecord } from './job';
import { labelsText } from './labels';
import { attemptCostMicroUsd } from './metering';

/** The scheduled reports: yesterday (daily) and last Monday–Sunday (weekly), UTC. */
export const REPORT_KINDS = ['daily', 'weekly'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];

/**
 * When each scheduled report runs, UTC: an hour or so after its period ends, so that the Batch state changes of
 * attempts that stopped near midnight are recorded. The stack's EventBridge schedules and local mode's timers are both
 * built from this.
 */
export const REPORT_SCHEDULE: Readonly<Record<ReportKind, { hour: number; minute: number; monday?: true }>> = {
  daily: { hour: 1, minute: 0 },
  weekly: { hour: 1, minute: 30, monday: true },
};

/** The first scheduled run of a report strictly after `after`. */
export function nextReportRun(kind: ReportKind, after: Date): Date {
  const { hour, minute, monday } = REPORT_SCHEDULE[kind];
  const afterMs = after.getTime();
  const day = Math.floor(afterMs / DAY_MS) * DAY_MS;
  for (let offset = 0; offset <= 8; offset++) {
    const at = day + offset * DAY_MS + (hour * 60 + minute) * 60_000;
    if (at > afterMs && (!monday || new Date(at).getUTCDay() === 1)) return new Date(at);
  }
  throw new InvalidReportPeriod(`no ${kind} run found after ${after.toISOString()}`);
}

/** Longest period a showback may cover, in days (a quarter and a bit). */
export const MAX_REPORT_DAYS = 93;

/** The version of the report documents below; bumped on any change a reader would notice. */
export const SHOWBACK_SCHEMA_VERSION = 1;

const DAY_MS = 86_400_000;
const DAY_PATTERN = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A period or date that cannot be reported on; the message says what was wrong and what is allowed. */
export class InvalidReportPeriod extends Error {
  override name = 'InvalidReportPeriod';
}

/** Whole UTC days, first and last inclusive, and the same as a half-open span of epoch milliseconds. */
export interface ReportPeriod {
  /** `daily` and `weekly` for the scheduled reports, `custom` for a period a caller chose. */
  readonly kind: ReportKind | 'custom';
  /** First day (YYYY-MM-DD, UTC), inclusive. */
  readonly start: string;
  /** Last day (YYYY-MM-DD, UTC), inclusive. */
  readonly end: string;
  /** 00:00 UTC of the first day, epoch ms. */
  readonly fromMs: number;
  /** 00:00 UTC of the day after the last, epoch ms (exclusive). */
  readonly toMs: number;
}

function dayText(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

/** Epoch ms of 00:00 UTC of a YYYY-MM-DD day, checked to be a real date. */
export function parseDay(text: unknown, what = 'day'): number {
  const match = typeof text === 'string' ? DAY_PATTERN.exec(text) : null;
  const ms = match ? Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3])) : Number.NaN;
  if (!match || Number.isNaN(ms) || dayText(ms) !== text) {
    throw new InvalidReportPeriod(`${what} must be a date as YYYY-MM-DD (UTC), got ${JSON.stringify(text)}`);
  }
  return ms;
}

function period(kind: ReportPeriod['kind'], fromMs: number, toMs: number): ReportPeriod {
  return { kind, start: dayText(fromMs), end: dayText(toMs - DAY_MS), fromMs, toMs };
}

/**
 * The last complete period of a scheduled report as of `at`: the UTC day before `at`'s day (daily), or the
 * Monday–Sunday week before the one `at` falls in (weekly). A run late by hours still reports the same period.
 */
export function completedPeriod(kind: ReportKind, at: Date): ReportPeriod {
  const atMs = at.getTime();
  if (Number.isNaN(atMs)) throw new InvalidReportPeriod('the report time is not a valid date');
  const today = Math.floor(atMs / DAY_MS) * DAY_MS;
  if (kind === 'daily') return period(kind, today - DAY_MS, today);
  const daysSinceMonday = (new Date(today).getUTCDay() + 6) % 7;
  const thisMonday = today - daysSinceMonday * DAY_MS;
  return period(kind, thisMonday - 7 * DAY_MS, thisMonday);
}

/** A period a caller chose: `start` to `end`, both YYYY-MM-DD (UTC) and inclusive, at most {@link MAX_REPORT_DAYS}. */
export function customPeriod(start: unknown, end: unknown): ReportPeriod {
  const fromMs = parseDay(start, 'from');
  const lastMs = parseDay(end, 'to');
  if (lastMs < fromMs) {
    throw new InvalidReportPeriod(`to (${String(end)}) is before from (${String(start)}); a period needs from ≤ to`);
  }
  const days = (lastMs - fromMs) / DAY_MS + 1;
  if (days > MAX_REPORT_DAYS) {
    throw new InvalidReportPeriod(
      `from ${String(start)} to ${String(end)} is ${days} days; a showback covers at most ${MAX_REPORT_DAYS} days`,
    );
  }
  return period('custom', fromMs, lastMs + DAY_MS);
}

/** What one attempt put into a period. */
export interface AttemptShare {
  /** Cost in the period, micro-dollars. */
  readonly costMicros: number;
  /** Instance-seconds in the period (seconds × nodes). */
  readonly instanceSeconds: number;
}

/**
 * The attempt's run as a span with its total cost, or undefined when it never started (or has no time at all). At
 * `atUsdPerHour`, what the same run is billed at that price (its recorded cost aside): its on-demand equivalent.
 */
function runOf(
  attempt: AttemptRecord,
  tier: TierConfig | undefined,
  asOfMs: number,
  atUsdPerHour?: number,
): { start: number; stop: number; cumulative: (t: number) => number } | undefined {
  const price = atUsdPerHour ?? (tier ? attemptPrice(attempt, tier) : attempt.usdPerHour);
  const recordedUsd = atUsdPerHour === undefined ? attempt.costUsd : undefined;
  if (attempt.costUsd !== undefined || attempt.stoppedAt !== undefined) {
    const start = attempt.startedAt ?? attempt.stoppedAt;
    if (start === undefined) return undefined;
    const stop = Math.max(attempt.stoppedAt ?? start, start);
    const total =
      recordedUsd !== undefined
        ? Math.round(recordedUsd * MICROS_PER_USD)
        : price === undefined || attempt.startedAt === undefined
          ? 0
          : attemptCostMicroUsd({ startedAtMs: start, stoppedAtMs: stop, usdPerHour: price, nodes: attempt.nodes });
    const cumulative = (t: number) =>
      t <= start ? 0 : t >= stop ? total : Math.round((total * (t - start)) / (stop - start));
    return { start, stop, cumulative };
  }
  if (attempt.startedAt === undefined || price === undefined) return undefined;
  const start = attempt.startedAt;
  const stop = Math.max(asOfMs, start);
  const cumulative = (t: number) =>
    t <= start
      ? 0
      : attemptCostMicroUsd({
          startedAtMs: start,
          stoppedAtMs: Math.min(t, stop),
          usdPerHour: price,
          nodes: attempt.nodes,
        });
  return { start, stop, cumulative };
}

/**
 * What an attempt cost, and how many instance-seconds it ran, within [fromMs, toMs), as of `asOfMs` (a running
 * attempt accrues up to then). `tier` prices an attempt with no recorded price; without it such an attempt costs
 * what its record says, or nothing. With `atUsdPerHour`, the cost is what the same run is billed at that price.
 */
export function attemptShare(
  attempt: AttemptRecord,
  tier: TierConfig | undefined,
  fromMs: number,
  toMs: number,
  asOfMs: number,
  atUsdPerHour?: number,
): AttemptShare {
  const run = runOf(attempt, tier, asOfMs, atUsdPerHour);
  if (!run || toMs <= fromMs) return { costMicros: 0, instanceSeconds: 0 };
  const overlapMs = Math.max(0, Math.min(toMs, run.stop) - Math.max(fromMs, run.start));
  return {
    costMicros: run.cumulative(toMs) - run.cumulative(fromMs),
    instanceSeconds: (overlapMs / 1000) * attempt.nodes,
  };
}

/** Figures of one row (a job, user, project, tier or team) or of the whole report. */
export interface ShowbackFigures {
  /** Spent on instances in the period, USD. */
  readonly costUsd: number;
  readonly spotUsd: number;
  readonly onDemandUsd: number;
  /** Instance-hours in the period (hours × nodes). */
  readonly instanceHours: number;
  /** What the same instance-hours would have cost at the tiers' on-demand prices, USD. */
  readonly onDemandEquivalentUsd: number;
  /** onDemandEquivalentUsd − costUsd: what running on spot saved. */
  readonly savedBySpotUsd: number;
  /** Jobs that ran in the period. */
  readonly jobs: number;
}

/** One job's row. */
export interface ShowbackJob extends ShowbackFigures {
  readonly jobId: string;
  readonly user: string;
  readonly project: string | null;
  readonly tier: string;
  /** The job's state when the report was made. */
  readonly state: JobRecord['state'];
  readonly createdAt: string;
  /** The job's labels, when it has any. */
  readonly labels?: JobRecord['labels'];
}

/** One team's showback. */
export interface TeamShowback {
  readonly schemaVersion: typeof SHOWBACK_SCHEMA_VERSION;
  readonly report: ReportPeriod['kind'];
  readonly team: string;
  readonly periodStart: string;
  readonly periodEnd: string;
  /** The time the figures are as of (running attempts accrue up to it, or to the period's end if sooner). */
  readonly asOf: string;
  readonly currency: 'USD';
  readonly totals: ShowbackFigures;
  readonly byUser: ReadonlyArray<ShowbackFigures & { readonly user: string }>;
  /** Jobs submitted without a project are under `project: null`. */
  readonly byProject: ReadonlyArray<ShowbackFigures & { readonly project: string | null }>;
  readonly byTier: ReadonlyArray<ShowbackFigures & { readonly tier: string }>;
  /** Every job that ran in the period, dearest first. */
  readonly jobs: readonly ShowbackJob[];
}

/** The all-teams rollup: each team's totals. */
export interface AllTeamsShowback {
  readonly schemaVersion: typeof SHOWBACK_SCHEMA_VERSION;
  readonly report: ReportPeriod['kind'];
  readonly periodStart: string;
  readonly periodEnd: string;
  readonly asOf: string;
  readonly currency: 'USD';
  readonly totals: ShowbackFigures;
  readonly byTeam: ReadonlyArray<ShowbackFigures & { readonly team: string }>;
}

/** One job with its attempts, as the store returns them. */
export interface JobWithAttempts {
  readonly job: JobRecord;
  readonly attempts: readonly AttemptRecord[];
}

/** Exact sums: micro-dollars and instance-seconds. */
interface Sums {
  cost: number;
  spot: number;
  onDemand: number;
  onDemandEquivalent: number;
  instanceSeconds: number;
  jobs: number;
}

const zero = (): Sums => ({ cost: 0, spot: 0, onDemand: 0, onDemandEquivalent: 0, instanceSeconds: 0, jobs: 0 });

function add(into: Sums, part: Sums): void {
  into.cost += part.cost;
  into.spot += part.spot;
  into.onDemand += part.onDemand;
  into.onDemandEquivalent += part.onDemandEquivalent;
  into.instanceSeconds += part.instanceSeconds;
  into.jobs += part.jobs;
}

function figures(sums: Sums): ShowbackFigures {
  return {
    costUsd: microsToUsd(sums.cost),
    spotUsd: microsToUsd(sums.spot),
    onDemandUsd: microsToUsd(sums.onDemand),
    instanceHours: Math.round((sums.instanceSeconds / 3600) * 1000) / 1000,
    onDemandEquivalentUsd: microsToUsd(sums.onDemandEquivalent),
    savedBySpotUsd: microsToUsd(sums.onDemandEquivalent - sums.cost),
    jobs: sums.jobs,
  };
}

/** What a job put into the period; jobs === 1 when it ran (or cost anything) in it. */
function jobSums(entry: JobWithAttempts, tier: TierConfig | undefined, period: ReportPeriod, asOfMs: number): Sums {
  const sums = zero();
  for (const attempt of entry.attempts.flatMap(billedRunsOf)) {
    const share = attemptShare(attempt, tier, period.fromMs, period.toMs, asOfMs);
    if (share.costMicros === 0 && share.instanceSeconds === 0) continue;
    sums.cost += share.costMicros;
    if (attempt.capacity === 'spot') sums.spot += share.costMicros;
    else sums.onDemand += share.costMicros;
    sums.instanceSeconds += share.instanceSeconds;
    // On-demand attempts are their own equivalent. Spot's is the same run billed at the tier's on-demand price, its
    // minimum bill included (a 10 s spot run is billed 60 s, and so would on-demand be); for a tier no longer
    // configured, or a cost recorded without a start, what the attempt paid, so no saving is claimed that cannot be
    // shown.
    const onDemandPerHour = tier?.onDemandUsdPerHour;
    sums.onDemandEquivalent +=
      attempt.capacity !== 'spot' || onDemandPerHour === undefined || attempt.startedAt === undefined
        ? share.costMicros
        : attemptShare(attempt, tier, period.fromMs, period.toMs, asOfMs, onDemandPerHour).costMicros;
  }
  sums.jobs = sums.cost > 0 || sums.instanceSeconds > 0 ? 1 : 0;
  return sums;
}

function grouped<K extends string, V extends string | null>(
  rows: ReadonlyArray<{ key: V; sums: Sums }>,
  name: K,
): Array<ShowbackFigures & Record<K, V>> {
  const groups = new Map<V, Sums>();
  for (const row of rows) {
    const sums = groups.get(row.key) ?? zero();
    add(sums, row.sums);
    groups.set(row.key, sums);
  }
  return [...groups.entries()]
    .sort(([a, x], [b, y]) => y.cost - x.cost || compareCodeUnits(String(a), String(b)))
    .map(([key, sums]) => ({ [name]: key, ...figures(sums) }) as ShowbackFigures & Record<K, V>);
}

/** The instant figures are taken at: `asOf`, but never past the period's end. */
function effectiveAsOf(period: ReportPeriod, asOf: Date): number {
  return Math.min(asOf.getTime(), period.toMs);
}

/**
 * A team's showback for a period. `jobs` may hold any of the team's jobs: those that neither ran nor cost anything
 * in the period are left out. `asOf` is when the figures are taken (running attempts accrue up to it).
 */
export function buildTeamShowback(
  config: Pick<TrainyardConfig, 'tiers'>,
  team: string,
  period: ReportPeriod,
  jobs: readonly JobWithAttempts[],
  asOf: Date,
): TeamShowback {
  const asOfMs = effectiveAsOf(period, asOf);
  const rows: Array<{ entry: JobWithAttempts; sums: Sums }> = [];
  for (const entry of jobs) {
    if (entry.job.team !== team) {
      throw new Error(`job ${entry.job.jobId} belongs to team ${entry.job.team}, not ${team}; it has no place here`);
    }
    const sums = jobSums(
      entry,
      config.tiers.find((t) => t.id === entry.job.tier),
      period,
      asOfMs,
    );
    if (sums.jobs > 0) rows.push({ entry, sums });
  }
  const totals = zero();
  for (const row of rows) add(totals, row.sums);
  rows.sort((a, b) => b.sums.cost - a.sums.cost || compareCodeUnits(a.entry.job.jobId, b.entry.job.jobId));
  return {
    schemaVersion: SHOWBACK_SCHEMA_VERSION,
    report: period.kind,
    team,
    periodStart: period.start,
    periodEnd: period.end,
    asOf: new Date(asOfMs).toISOString(),
    currency: 'USD',
    totals: figures(totals),
    byUser: grouped(
      rows.map((r) => ({ key: r.entry.job.user, sums: r.sums })),
      'user',
    ),
    byProject: grouped(
      rows.map((r) => ({ key: r.entry.job.project ?? null, sums: r.sums })),
      'project',
    ),
    byTier: grouped(
      rows.map((r) => ({ key: r.entry.job.tier, sums: r.sums })),
      'tier',
    ),
    jobs: rows.map(({ entry: { job }, sums }) => ({
      jobId: job.jobId,
      user: job.user,
      project: job.project ?? null,
      tier: job.tier,
      state: job.state,
      createdAt: job.createdAt,
      ...(job.labels !== undefined && { labels: job.labels }),
      ...figures(sums),
    })),
  };
}

/** The all-teams rollup of team showbacks of one period (each team's totals, dearest first). */
export function buildAllTeamsShowback(
  period: ReportPeriod,
  teams: readonly TeamShowback[],
  asOf: Date,
): AllTeamsShowback {
  const byTeam = teams.map((t) => {
    if (t.periodStart !== period.start || t.periodEnd !== period.end) {
      throw new Error(
        `team ${t.team}'s showback covers ${t.periodStart}..${t.periodEnd}, not ${period.start}..${period.end}`,
      );
    }
    return { team: t.team, sums: sumsOf(t.totals) };
  });
  const totals = zero();
  for (const t of byTeam) add(totals, t.sums);
  return {
    schemaVersion: SHOWBACK_SCHEMA_VERSION,
    report: period.kind,
    periodStart: period.start,
    periodEnd: period.end,
    asOf: new Date(effectiveAsOf(period, asOf)).toISOString(),
    currency: 'USD',
    totals: figures(totals),
    byTeam: byTeam
      .sort((a, b) => b.sums.cost - a.sums.cost || compareCodeUnits(a.team, b.team))
      .map((t) => ({ team: t.team, ...figures(t.sums) })),
  };
}

/** A figures object read back into exact sums (USD values are exact micro-dollars, so this loses nothing). */
function sumsOf(f: ShowbackFigures): Sums {
  const micros = (usd: number) => Math.round(usd * MICROS_PER_USD);
  return {
    cost: micros(f.costUsd),
    spot: micros(f.spotUsd),
    onDemand: micros(f.onDemandUsd),
    onDemandEquivalent: micros(f.onDemandEquivalentUsd),
    instanceSeconds: f.instanceHours * 3600,
    jobs: f.jobs,
  };
}

/**
 * Whether a job may have run in the period, from its record alone: it was created before the period ended and, if
 * it has ended, it last changed after the period began (less a day for clock differences between Batch's times and
 * ours). The store reads attempts only for these.
 */
export function mayHaveRunIn(job: JobRecord, period: ReportPeriod): boolean {
  if (Date.parse(job.createdAt) >= period.toMs) return false;
  if (!isTerminal(job.state) || job.updatedAt === undefined) return true;
  return Date.parse(job.updatedAt) >= period.fromMs - DAY_MS;
}

const CSV_COLUMNS = [
  'periodStart',
  'periodEnd',
  'team',
  'jobId',
  'user',
  'project',
  'tier',
  'state',
  'createdAt',
  'costUsd',
  'spotUsd',
  'onDemandUsd',
  'instanceHours',
  'onDemandEquivalentUsd',
  'savedBySpotUsd',
  // Last, so readers that take the columns by position keep working; `key=value,…`, as `--label` takes it.
  'labels',
] as const;

function csvField(value: unknown): string {
  const text = value === null || value === undefined ? '' : String(value);
  // A leading = + - @ would be a formula in a spreadsheet: quote it with a leading apostrophe.
  const safe = /^[=+\-@\t\r]/.test(text) && typeof value === 'string' ? `'${text}` : text;
  return /[",\n\r]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The team showback's jobs as CSV (RFC 4180, a header row, one row per job), for spreadsheets. */
export function showbackCsv(report: TeamShowback): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const job of report.jobs) {
    const row: Record<(typeof CSV_COLUMNS)[number], unknown> = {
      periodStart: report.periodStart,
      periodEnd: report.periodEnd,
      team: report.team,
      ...job,
      labels: labelsText(job.labels),
    };
    lines.push(CSV_COLUMNS.map((c) => csvField(row[c])).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}
