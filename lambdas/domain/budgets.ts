/**
 * Budget math for the cost gate: scopes, periods, money, thresholds and how one job's entry in a scope's budget
 * changes when it is reserved, accrued, settled or released.
 *
 * Pure module (no AWS SDK, no process.env): the DynamoDB ledger (lambdas/shared/ledger.ts) applies the changes
 * computed here as single-item conditional updates, and the API, local mode and tests call the same functions.
 *
 * Money is held as integer micro-dollars (1 USD = 1,000,000 µUSD) everywhere below the edges: sums and differences
 * of integers are exact, so a budget never drifts by float rounding, and sub-cent accruals (price × seconds) are
 * still kept exactly. USD numbers are converted with `usdToMicros` on the way in and `microsToUsd` on the way out.
 *
 * Scope kinds and their budgets:
 * - `team:<team>` — always budgeted: the ledger creates the team's item on first use with the team's
 *   monthlyBudgetUsd from config (`ensureBudget`, create-if-absent).
 * - `user:<team>/<user>` and `project:<team>/<project>` — budgeted only when an admin set a limit for that period
 *   (`setLimit`); without an item they are unlimited and are not reserved against (the team budget still applies).
 */

/** The three kinds of budget scope. */
export type ScopeKind = 'team' | 'user' | 'project';

/** A parsed scope: `team:nlp`, `user:nlp/alice`, `project:nlp/gpt-small`. */
export interface Scope {
  readonly kind: ScopeKind;
  readonly team: string;
  /** The user or project id; absent for team scopes. */
  readonly id?: string;
  /** The canonical text form, used in keys and messages. */
  readonly text: string;
}

/** Which budget threshold a figure refers to. */
export type ThresholdName = 'warn' | 'block';

/** Thresholds as fractions of a scope's limit: warn (alert once) and block (refuse / pause). */
export interface Thresholds {
  readonly warn: number;
  readonly block: number;
}

/** DESIGN.md defaults: warn at 70 %, block at 100 % of the limit. */
export const DEFAULT_THRESHOLDS: Thresholds = { warn: 0.7, block: 1 };

/** Micro-dollars per dollar: the ledger's integer unit. */
export const MICROS_PER_USD = 1_000_000;

/** Largest amount (USD) any single figure may hold; well inside Number.MAX_SAFE_INTEGER micro-dollars. */
export const MAX_USD = 1_000_000_000;

/** Longest id (team, user, project) inside a scope. */
export const MAX_SCOPE_ID_LENGTH = 64;

/** Longest scope string accepted: `project:` + two ids and a slash. */
export const MAX_SCOPE_LENGTH = 'project:'.length + 2 * MAX_SCOPE_ID_LENGTH + 1;

/** Longest job id the ledger accepts. */
export const MAX_JOB_ID_LENGTH = 128;

/** A scope string that is malformed or tries to reach outside its key prefix; the message says what and why. */
export class InvalidScope extends Error {
  override name = 'InvalidScope';
}

/** A job id, period, amount or threshold the ledger cannot accept; the message names the value and the rule. */
export class InvalidBudgetInput extends Error {
  override name = 'InvalidBudgetInput';
}

/** Figures of the scope that refused a reservation, in USD. */
export interface BudgetExceededDetails {
  readonly scope: string;
  readonly period: string;
  readonly limitUsd: number;
  readonly spentUsd: number;
  readonly reservedUsd: number;
  readonly requestedUsd: number;
  readonly availableUsd: number;
  readonly blockThreshold: number;
}

/** A reservation would take a scope past its block threshold; nothing was left reserved in any scope. */
export class BudgetExceeded extends Error {
  override name = 'BudgetExceeded';
  /** The refusing scope's figures. */
  readonly details: BudgetExceededDetails;

  constructor(details: BudgetExceededDetails) {
    const micros = (usd: number) => Math.round(usd * MICROS_PER_USD);
    const blockNote =
      details.blockThreshold === 1
        ? ''
        : ` (jobs are refused at ${formatPercent(details.blockThreshold)} of the limit)`;
    super(
      `${details.scope} would exceed its budget: limit ${formatUsd(micros(details.limitUsd))}, spent ${formatUsd(
        micros(details.spentUsd),
      )}, reserved ${formatUsd(micros(details.reservedUsd))}, requested ${formatUsd(
        micros(details.requestedUsd),
      )}, available ${formatUsd(micros(details.availableUsd))}${blockNote}`,
    );
    this.details = details;
  }
}

/** settle/accrue for a job the ledger never saw reserve. */
export class UnknownBudgetJob extends Error {
  override name = 'UnknownBudgetJob';
}

/** A team scope has no budget item for the period (the caller must `ensureBudget` first). */
export class BudgetNotFound extends Error {
  override name = 'BudgetNotFound';
}

/** A job id was reused for a different reservation, or reserved after it was released or settled. */
export class BudgetJobConflict extends Error {
  override name = 'BudgetJobConflict';
}

/** Optimistic retries on one budget item ran out (heavy contention on the same job entry). */
export class ConcurrentUpdate extends Error {
  override name = 'ConcurrentUpdate';
}

const SCOPE_SHAPES = 'scopes are team:<team>, user:<team>/<user> or project:<team>/<project>';
const ID_PATTERN = /^[a-z0-9][a-z0-9._-]*$/;
const ID_RULE = `1-${MAX_SCOPE_ID_LENGTH} characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit`;

/**
 * Parses and validates a scope string. With `team`, the scope must belong to that team (a caller can never name
 * another team's budget). Throws InvalidScope naming the problem.
 */
export function parseScope(text: unknown, team?: string): Scope {
  if (typeof text !== 'string') throw new InvalidScope(`scope must be a string, got ${describe(text)}`);
  if (text.length === 0) throw new InvalidScope(`scope is empty; ${SCOPE_SHAPES}`);
  if (text.length > MAX_SCOPE_LENGTH) {
    throw new InvalidScope(`scope is ${text.length} characters long; at most ${MAX_SCOPE_LENGTH} are allowed`);
  }
  const shown = JSON.stringify(text);
  if (/\s/.test(text)) throw new InvalidScope(`scope ${shown} contains whitespace; ${SCOPE_SHAPES}`);
  if (text.includes('#')) {
    throw new InvalidScope(`scope ${shown} contains '#', which separates DynamoDB key parts and is never allowed`);
  }
  if (text.includes('..')) {
    throw new InvalidScope(`scope ${shown} contains '..'; path segments like '/..' are never allowed in a scope`);
  }
  const match = /^(team|user|project):(.*)$/.exec(text);
  if (!match) throw new InvalidScope(`scope ${shown} has no known kind; ${SCOPE_SHAPES}`);
  const kind = match[1] as ScopeKind;
  const parts = (match[2] ?? '').split('/');
  const expected = kind === 'team' ? 1 : 2;
  if (parts.length !== expected) {
    const shape = kind === 'team' ? 'team:<team>' : `${kind}:<team>/<${kind}>`;
    throw new InvalidScope(
      `scope ${shown} has ${parts.length} '/'-separated part(s); a ${kind} scope is ${shape} with exactly ${expected}`,
    );
  }
  const [teamId = '', id] = parts;
  checkId(teamId, 'team id', shown);
  if (id !== undefined) checkId(id, `${kind} id`, shown);
  if (team !== undefined && teamId !== team) {
    throw new InvalidScope(
      `scope ${shown} belongs to team "${teamId}"; only scopes of team "${team}" may be named here`,
    );
  }
  return id === undefined ? { kind, team: teamId, text } : { kind, team: teamId, id, text };
}

function checkId(id: string, what: string, shown: string): void {
  if (id.length === 0) throw new InvalidScope(`${what} in scope ${shown} is empty; it must be ${ID_RULE}`);
  if (id.length > MAX_SCOPE_ID_LENGTH || !ID_PATTERN.test(id)) {
    throw new InvalidScope(`${what} "${id}" in scope ${shown} is invalid; it must be ${ID_RULE}`);
  }
}

/** The canonical scope string for a kind and ids (validated). */
export function formatScope(kind: ScopeKind, team: string, id?: string): string {
  const text = kind === 'team' ? `team:${team}` : `${kind}:${team}/${id ?? ''}`;
  return parseScope(text).text;
}

/** Who and what a job belongs to, as far as budgets care. */
export interface JobScopeInput {
  readonly team: string;
  readonly user?: string;
  readonly project?: string;
}

/**
 * The budget scopes of a job, team first (the cost gate reserves in this order): `team:<team>`, plus
 * `user:<team>/<user>` and `project:<team>/<project>` when the user name and project are valid scope ids (a principal
 * ARN is not one, so it has no user scope).
 */
export function jobScopes(job: JobScopeInput): string[] {
  const scopes = [formatScope('team', job.team)];
  for (const [kind, id] of [
    ['user', job.user],
    ['project', job.project],
  ] as const) {
    if (id === undefined) continue;
    try {
      scopes.push(formatScope(kind, job.team, id));
    } catch (error) {
      if (!(error instanceof InvalidScope)) throw error;
    }
  }
  return scopes;
}

/** The budget period (calendar month, UTC) that a moment falls in: `YYYY-MM`. */
export function periodOf(date: Date): string {
  const time = date.getTime();
  if (Number.isNaN(time)) throw new InvalidBudgetInput('cannot compute a budget period from an invalid date');
  const year = date.getUTCFullYear();
  if (year < 1000 || year > 9999) {
    throw new InvalidBudgetInput(`budget periods cover years 1000-9999, got ${date.toISOString()}`);
  }
  return `${year}-${String(date.getUTCMonth() + 1).padStart(2, '0')}`;
}

/** The month before a period: `2026-01` → `2025-12`. */
export function periodBefore(period: string): string {
  const [year = 0, month = 0] = parsePeriod(period).split('-').map(Number);
  return month === 1 ? `${String(year - 1).padStart(4, '0')}-12` : `${year}-${String(month - 1).padStart(2, '0')}`;
}

/** A budget period's shape: a calendar month, `YYYY-MM`, of the years 1000-9999 that {@link periodOf} covers. */
export const PERIOD_PATTERN = /^[1-9]\d{3}-(0[1-9]|1[0-2])$/;
/** PERIOD_PATTERN in words, for messages. */
export const PERIOD_RULE = 'a calendar month like 2026-01 (YYYY-MM, year 1000 or later)';

/** Validates a `YYYY-MM` period string and returns it. */
export function parsePeriod(text: unknown): string {
  if (typeof text !== 'string' || !PERIOD_PATTERN.test(text)) {
    throw new InvalidBudgetInput(`period must be ${PERIOD_RULE}, got ${describe(text)}`);
  }
  return text;
}

/** Validates a job id used as a map key in budget items: 1-128 characters of A-Z a-z 0-9 _ . : -. */
export function parseJobId(jobId: unknown): string {
  if (typeof jobId !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(jobId)) {
    throw new InvalidBudgetInput(
      `job id must be 1-${MAX_JOB_ID_LENGTH} characters of A-Z, a-z, 0-9, '_', '.', ':' and '-', got ${describe(jobId)}`,
    );
  }
  return jobId;
}

/** Converts a USD amount to integer micro-dollars; rejects NaN, infinities, negatives and absurd sizes. */
export function usdToMicros(usd: unknown, what = 'amount'): number {
  if (typeof usd !== 'number' || !Number.isFinite(usd) || usd < 0 || usd > MAX_USD) {
    throw new InvalidBudgetInput(`${what} must be a number of USD from 0 to ${MAX_USD}, got ${describe(usd)}`);
  }
  return Math.round(usd * MICROS_PER_USD);
}

/**
 * Whether an amount of USD is whole cents, as a budget limit must be (a finer one would be stored rounded: $0 for
 * 1e-9). Decimal amounts that binary floating point cannot hold exactly (0.1 + 0.2) count as the cents they mean.
 */
export function isWholeCents(usd: number): boolean {
  const cents = usd * 100;
  const whole = Math.round(cents);
  // usd × 100 is off by up to a few units in the last place of the product: 1e-6 cents near $0, 2e-5 near $1B.
  const tolerance = Math.max(1e-6, Math.abs(cents) * 4 * Number.EPSILON);
  return Math.abs(cents - whole) < tolerance && (whole !== 0 || usd === 0);
}

/** Converts micro-dollars back to USD for callers and JSON. */
export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}

/** `$62.10`; sub-cent amounts keep their digits (`$0.004217`), negatives read `-$3.20`. */
export function formatUsd(micros: number): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const dollars = Math.floor(abs / MICROS_PER_USD);
  const fraction = String(abs % MICROS_PER_USD).padStart(6, '0');
  const trimmed = fraction.replace(/0+$/, '').padEnd(2, '0');
  return `${sign}$${dollars}.${trimmed}`;
}

function formatPercent(fraction: number): string {
  return `${Math.round(fraction * 10000) / 100}%`;
}

/** Validates thresholds: 0 < warn < block ≤ 2 (the config schema's ranges). */
export function validateThresholds(thresholds: Thresholds): Thresholds {
  const { warn, block } = thresholds;
  if (!Number.isFinite(warn) || warn <= 0 || warn >= 1) {
    throw new InvalidBudgetInput(`warn threshold must be a fraction between 0 and 1 (exclusive), got ${warn}`);
  }
  if (!Number.isFinite(block) || block <= 0 || block > 2) {
    throw new InvalidBudgetInput(`block threshold must be a fraction above 0 and at most 2, got ${block}`);
  }
  if (warn >= block) throw new InvalidBudgetInput(`warn threshold (${warn}) must be below block threshold (${block})`);
  return thresholds;
}

/** The amount (µUSD) at which a threshold fraction of a limit is reached, rounded to the micro-dollar. */
export function thresholdMicros(limitMicros: number, fraction: number): number {
  return Math.round(limitMicros * fraction);
}

/** The money figures of one scope and period, in µUSD. available = blockLimit − spent − reserved, always. */
export interface BudgetFigures {
  readonly limitMicros: number;
  readonly blockLimitMicros: number;
  readonly spentMicros: number;
  readonly reservedMicros: number;
  readonly availableMicros: number;
}

/** Figures of a fresh budget: nothing spent or reserved, the whole block limit available. */
export function newBudgetFigures(limitMicros: number, blockThreshold: number): BudgetFigures {
  const blockLimitMicros = thresholdMicros(limitMicros, blockThreshold);
  return { limitMicros, blockLimitMicros, spentMicros: 0, reservedMicros: 0, availableMicros: blockLimitMicros };
}

/** What a limit change does to `available`: the difference between the new and old block limits. */
export function limitChange(
  old: Pick<BudgetFigures, 'limitMicros' | 'blockLimitMicros'>,
  newLimitMicros: number,
  blockThreshold: number,
): { limitMicros: number; blockLimitMicros: number; availableDelta: number } | null {
  const blockLimitMicros = thresholdMicros(newLimitMicros, blockThreshold);
  if (newLimitMicros === old.limitMicros && blockLimitMicros === old.blockLimitMicros) return null;
  return { limitMicros: newLimitMicros, blockLimitMicros, availableDelta: blockLimitMicros - old.blockLimitMicros };
}

/** One job's state inside one scope's budget item. */
export interface JobEntry {
  /** Reservation still held (µUSD): the estimate minus what accruals already moved to spent. */
  readonly reserved: number;
  /** What this job has been charged to the scope's spent so far (µUSD): the latest accrual, or the actual cost. */
  readonly accrued: number;
  /** open: holding a reservation; released: reservation returned; settled: final actual cost applied. */
  readonly state: 'open' | 'released' | 'settled';
  /** Bumped on every change, for optimistic conditions on this entry. */
  readonly version: number;
  /**
   * The run of the reserve saga that holds this reservation (absent: 0). A saga that fails undoes only its own run's
   * reservations and a later run claims the ones it keeps, so a slow undo never takes back what a retry reserved.
   */
  readonly run?: number;
}

/** A change to one job entry and the matching deltas to the scope's totals (µUSD). */
export interface EntryChange {
  readonly entry: JobEntry;
  readonly spentDelta: number;
  readonly reservedDelta: number;
  readonly availableDelta: number;
}

/** The entry a fresh reservation creates, held by reserve saga run `run`. */
export function reservationEntry(amountMicros: number, run = 0): JobEntry {
  return { reserved: amountMicros, accrued: 0, state: 'open', version: 1, ...(run > 0 ? { run } : {}) };
}

/**
 * The entry a running job is charged from in a scope whose budget was set after the job reserved (the scope was
 * unlimited then, so the job holds nothing there): nothing reserved, nothing charged yet. The job's next accrual or
 * settlement there counts all it has cost, as the scope's other jobs' charges do; jobs that ended before the budget
 * was set are not charged to it.
 */
export function adoptedEntry(): JobEntry {
  return { reserved: 0, accrued: 0, state: 'open', version: 0 };
}

/**
 * Running cost so far (µUSD) for a job: moves the increase from the job's reservation to spent; an increase
 * beyond the reservation reduces available. Monotonic: the same or a lower figure changes nothing (null), and a
 * settled entry is final.
 */
export function accrualChange(entry: JobEntry, spentSoFarMicros: number): EntryChange | null {
  if (entry.state === 'settled' || spentSoFarMicros <= entry.accrued) return null;
  const increase = spentSoFarMicros - entry.accrued;
  const fromReservation = Math.min(increase, entry.reserved);
  const beyondReservation = increase - fromReservation;
  return {
    entry: {
      ...entry,
      reserved: entry.reserved - fromReservation,
      accrued: spentSoFarMicros,
      version: entry.version + 1,
    },
    spentDelta: increase,
    reservedDelta: noNegativeZero(-fromReservation),
    availableDelta: noNegativeZero(-beyondReservation),
  };
}

/**
 * Final actual cost (µUSD) for a job: the remaining reservation is returned and spent holds exactly the actual cost
 * (spent += actual − accrued, which may be negative when accruals ran ahead). Null when already settled.
 */
export function settlementChange(entry: JobEntry, actualMicros: number): EntryChange | null {
  if (entry.state === 'settled') return null;
  const spentDelta = actualMicros - entry.accrued;
  const reservedDelta = noNegativeZero(-entry.reserved);
  return {
    entry: { ...entry, reserved: 0, accrued: actualMicros, state: 'settled', version: entry.version + 1 },
    spentDelta,
    reservedDelta,
    availableDelta: noNegativeZero(-spentDelta - reservedDelta),
  };
}

/**
 * A job's whole recorded cost, `totalMicros`, charged where no meter counts it: an orphaned Batch job or an attempt's
 * end that Batch reported late, recorded while the job waits for its next attempt or is paused for budget (a paused
 * job gave its reservation back, and budget-watch meters running jobs only), or after its entry closed (settled or
 * released, after Finalize). An open entry is charged as an accrual is, out of what it still holds and then out of
 * available; a closed one's spend rises by the increase. Monotonic and idempotent: the same or a lower total changes
 * nothing (null).
 */
export function recordedChargeChange(entry: JobEntry, totalMicros: number): EntryChange | null {
  if (entry.state === 'open') return accrualChange(entry, totalMicros);
  if (totalMicros <= entry.accrued) return null;
  const increase = totalMicros - entry.accrued;
  return {
    entry: { ...entry, accrued: totalMicros, version: entry.version + 1 },
    spentDelta: increase,
    reservedDelta: 0,
    availableDelta: -increase,
  };
}

/**
 * A paused job about to resume: its reservation raised to `targetMicros`, what it is forecast to cost from here, so
 * that money is held from other jobs as its cost gate held the estimate. The increase comes out of available. Null
 * unless open, or when the entry already holds as much: a reservation is never lowered here.
 */
export function topUpChange(entry: JobEntry, targetMicros: number): EntryChange | null {
  if (entry.state !== 'open' || entry.reserved >= targetMicros) return null;
  const increase = targetMicros - entry.reserved;
  return {
    entry: { ...entry, reserved: targetMicros, version: entry.version + 1 },
    spentDelta: 0,
    reservedDelta: increase,
    availableDelta: -increase,
  };
}

/**
 * Takes back a top-up that another scope refused: the reservation drops by `increaseMicros`, or to zero when accruals
 * have used some of it since. Null unless open, or when nothing is left to take back.
 */
export function topUpTakenBack(entry: JobEntry, increaseMicros: number): EntryChange | null {
  const back = Math.min(increaseMicros, entry.reserved);
  if (entry.state !== 'open' || back <= 0) return null;
  return {
    entry: { ...entry, reserved: entry.reserved - back, version: entry.version + 1 },
    spentDelta: 0,
    reservedDelta: -back,
    availableDelta: back,
  };
}

/** Returns an open entry's remaining reservation (what was already accrued stays spent). Null unless open. */
export function releaseChange(entry: JobEntry): EntryChange | null {
  if (entry.state !== 'open') return null;
  return {
    entry: { ...entry, reserved: 0, state: 'released', version: entry.version + 1 },
    spentDelta: 0,
    reservedDelta: noNegativeZero(-entry.reserved),
    availableDelta: entry.reserved,
  };
}

/**
 * A reservation taken again by a retried saga, run `run` (its record still `reserving` after it compensated a
 * failure): a released entry that was never charged reopens with the amount. Null for any other entry (already
 * reserved, charged or settled), which the saga leaves as it is or claims ({@link claimChange}).
 */
export function reopenChange(entry: JobEntry, amountMicros: number, run = 0): EntryChange | null {
  if (entry.state !== 'released' || entry.accrued !== 0) return null;
  return {
    entry: { ...entry, reserved: amountMicros, state: 'open', version: entry.version + 1, ...(run > 0 ? { run } : {}) },
    spentDelta: 0,
    reservedDelta: amountMicros,
    availableDelta: noNegativeZero(-amountMicros),
  };
}

/**
 * An open reservation that an earlier run of the reserve saga took, claimed by run `run`, which keeps it: the undo of
 * the earlier run then leaves it alone. Moves no money. Null unless open and held by an earlier run.
 */
export function claimChange(entry: JobEntry, run: number): EntryChange | null {
  if (entry.state !== 'open' || (entry.run ?? 0) >= run) return null;
  return { entry: { ...entry, version: entry.version + 1, run }, spentDelta: 0, reservedDelta: 0, availableDelta: 0 };
}

/** The undo of reserve saga run `run`: releases the entry if that run, or an earlier one, holds it. */
export function undoRunChange(entry: JobEntry, run: number): EntryChange | null {
  return (entry.run ?? 0) <= run ? releaseChange(entry) : null;
}

/** Committed money (spent + reserved) as a fraction of the limit; null when the limit is $0 (no ratio exists). */
export function fractionUsed(figures: BudgetFigures): number | null {
  if (figures.limitMicros === 0) return null;
  return (figures.spentMicros + figures.reservedMicros) / figures.limitMicros;
}

/**
 * The thresholds whose amount the committed money (spent + reserved) has reached, warn before block. A $0 limit
 * counts as reached only once something is committed, so an unused zero budget raises no alerts.
 */
export function thresholdsReached(figures: BudgetFigures, thresholds: Thresholds): ThresholdName[] {
  const committed = figures.spentMicros + figures.reservedMicros;
  const reached = (amount: number) => committed >= amount && committed > 0;
  const names: ThresholdName[] = [];
  if (reached(thresholdMicros(figures.limitMicros, thresholds.warn))) names.push('warn');
  if (reached(figures.blockLimitMicros)) names.push('block');
  return names;
}

/**
 * Whether a scope's running jobs must stop: actual spend reached the block limit, or commitments already exceed it
 * (available below zero: accruals ran past their reservations).
 */
export function isBlocked(figures: BudgetFigures): boolean {
  return figures.availableMicros < 0 || (figures.spentMicros > 0 && figures.spentMicros >= figures.blockLimitMicros);
}

/** Negating 0 gives -0, which reads oddly in stored items and in deep equality; adding 0 turns it into 0. */
function noNegativeZero(n: number): number {
  return n + 0;
}

function describe(value: unknown): string {
  if (typeof value === 'number') return String(value);
  if (value === undefined) return 'undefined';
  const text = JSON.stringify(value);
  return text === undefined ? typeof value : text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
