/**
 * The budgets ledger: DynamoDB adapter for the cost gate, budget-watch, finalize and GET/PUT /budgets.
 *
 * Every write is one single-item conditional UpdateItem/PutItem (no transactions: dynalite has none, and none are
 * needed). Items (see table-design.ts):
 * - scope item `SCOPE#<scope>` / `PERIOD#<YYYY-MM>`: limitMicros, blockLimitMicros (limit × block threshold),
 *   spentMicros, reservedMicros, availableMicros (= blockLimit − spent − reserved, kept as an attribute because
 *   conditions can't do arithmetic), `jobs` (job id → JobEntry) and `crossings` (threshold → marker) and `exhaustions`
 *   (limit in micros → the budget-pause announced at that limit: {@link Exhaustion}).
 *   Totals only ever move by deltas (`x = x + :d`) in the same update that changes a job's entry, so concurrent
 *   operations on different jobs never conflict and the invariant holds after every write.
 * - job record `LEDGERJOB#<jobId>` / `META`: the job's scopes, period and amount (so accrue/settle/release need
 *   only the job id), its saga state and the stored results that make replays return the first answer.
 *
 * Job record states: reserving → reserved | refused; reserving|reserved → releasing → released;
 * anything but settled → settling → settled. A reserve saga that finds the record moved on while it ran
 * (released, settled, refused by a concurrent duplicate) compensates what it reserved.
 * Overlapping invocations of one job's reserve (a Lambda retried while the first still runs) share the job's entries,
 * so the record counts the saga's runs (`run`): a saga that fails starts the next run before it undoes, and undoes
 * only entries of its own run or earlier ones; it undoes nothing once a twin finished. A run completes only if no
 * undo started meanwhile, and claims the entries it keeps, so a slow undo of an earlier run cannot take them back.
 *
 * A user or project scope given a budget after a job reserved (it was unlimited then) holds no entry for the job:
 * accrue, chargeRecorded (while the job still holds its reservation) and settle create one (`adoptedEntry`), so the
 * budget is charged all the job costs and can block it. Release writes nothing there, nor chargeRecorded once the job
 * ended: a job that ended before the budget was set is not charged to it.
 *
 * Money is integer micro-dollars inside (see domain/budgets.ts); USD numbers at this module's edges.
 * Known limit: job entries stay in the scope item for the period (they are the idempotency record), so one scope
 * holds roughly 3,000 jobs per month within DynamoDB's 400 KB item size.
 */
import * as z from 'zod/mini';
import '../domain/zod-issues'; // zod's English issue messages
import {
  accrualChange,
  adoptedEntry,
  BudgetExceeded,
  type BudgetExceededDetails,
  BudgetJobConflict,
  BudgetNotFound,
  ConcurrentUpdate,
  claimChange,
  type EntryChange,
  fractionUsed,
  InvalidScope,
  isBlocked,
  type JobEntry,
  limitChange,
  microsToUsd,
  newBudgetFigures,
  parseJobId,
  parsePeriod,
  parseScope,
  recordedChargeChange,
  releaseChange,
  reopenChange,
  reservationEntry,
  type Scope,
  settlementChange,
  type ThresholdName,
  type Thresholds,
  thresholdsReached,
  topUpChange,
  topUpTakenBack,
  UnknownBudgetJob,
  undoRunChange,
  usdToMicros,
  validateThresholds,
} from '../domain/budgets';
import type { CrossedThreshold } from '../domain/events';
import { type DocumentClient, isConditionalCheckFailure } from './dynamo';
import { BUDGETS_INDEXES, budgetKeys } from './table-design';

export {
  BudgetExceeded,
  BudgetJobConflict,
  BudgetNotFound,
  ConcurrentUpdate,
  InvalidScope,
  UnknownBudgetJob,
} from '../domain/budgets';

/** A threshold a scope reached for the first time this period, returned to the operation that reached it. */
export interface ThresholdCrossing extends CrossedThreshold {
  /** Committed (spent + reserved) ÷ limit when it was reached; null for a $0 limit. */
  readonly fraction: number | null;
}

/** A crossing as its marker keeps it, with when it was recorded (ISO-8601). */
export interface RecordedCrossing {
  readonly crossing: ThresholdCrossing;
  readonly at: string;
}

/**
 * A budget-pause of a scope's running jobs (its spend reached the block limit at `limitUsd`), recorded before the
 * jobs are stopped so that its `Budget Exhausted` announcement survives a watch that fails after stopping them.
 * One per scope, period and limit: raising the limit and exhausting the budget again records a new one.
 */
export interface Exhaustion {
  readonly scope: string;
  readonly team: string;
  readonly period: string;
  readonly limitUsd: number;
  readonly spentUsd: number;
  readonly reservedUsd: number;
  /** The running jobs being stopped for it, in the order they were recorded. */
  readonly pausedJobIds: readonly string[];
  /** When it was recorded (ISO-8601). */
  readonly at: string;
  /** Whether its event is out ({@link BudgetLedger.markExhaustionPublished}). */
  readonly published: boolean;
}

/** A successful reservation. */
export interface ReserveResult {
  readonly ok: true;
  readonly crossings: ThresholdCrossing[];
  /** User/project scopes with no budget item: unlimited, not reserved against. */
  readonly unlimitedScopes: string[];
}

/** What an accrual did. */
export interface AccrueResult {
  readonly crossings: ThresholdCrossing[];
  /** The job's scopes that reached their block threshold: the caller pauses those scopes' running jobs. */
  readonly blockedScopes: string[];
}

/** What a settlement did (a replay returns the first settlement's result). */
export interface SettleResult {
  readonly jobId: string;
  readonly actualUsd: number;
  readonly crossings: ThresholdCrossing[];
}

/** What charging a job's recorded cost did. */
export interface RecordedChargeResult {
  readonly jobId: string;
  /** The scopes whose spend rose (none when every entry already held the total). */
  readonly chargedScopes: string[];
  readonly crossings: ThresholdCrossing[];
}

/** What a release returned, per scope (a replay returns the first release's result). */
/** What a top-up before a resume added to the job's reservation in each scope. */
export interface TopUpResult {
  readonly jobId: string;
  /** Scopes whose reservation rose, and by how much (none when each already held the target). */
  readonly raised: ReadonlyArray<{ readonly scope: string; readonly addedUsd: number }>;
  readonly crossings: ThresholdCrossing[];
}

export interface ReleaseResult {
  readonly jobId: string;
  readonly returned: ReadonlyArray<{ readonly scope: string; readonly returnedUsd: number }>;
}

/** A scope's budget for a period, as GET /budgets shows it. */
export interface BudgetUsage {
  readonly scope: string;
  readonly period: string;
  readonly team: string;
  readonly limitUsd: number;
  /** limit × block threshold: what spent + reserved may reach. */
  readonly blockLimitUsd: number;
  readonly spentUsd: number;
  readonly reservedUsd: number;
  readonly availableUsd: number;
  /** (spent + reserved) ÷ limit × 100, two decimals; null for a $0 limit. */
  readonly percentUsed: number | null;
  readonly warnThreshold: number;
  readonly blockThreshold: number;
  readonly thresholdsCrossed: ThresholdName[];
  /** Running jobs in this scope must stop (spend reached the block limit or commitments exceed it). */
  readonly blocked: boolean;
}

/** How the ledger is wired. */
export interface BudgetLedgerOptions {
  readonly client: DocumentClient;
  readonly tableName: string;
  readonly thresholds: Thresholds;
  /** Clock for createdAt and crossing markers. @default - the system clock */
  readonly now?: () => Date;
  /** Optimistic attempts per job entry before ConcurrentUpdate. @default 12 */
  readonly maxAttempts?: number;
}

const micros = z.int();
const entrySchema = z.object({
  reserved: micros,
  accrued: micros,
  state: z.enum(['open', 'released', 'settled']),
  version: z.int(),
  run: z.optional(z.int()),
});
const figuresSchema = z.object({
  limitMicros: micros,
  blockLimitMicros: micros,
  spentMicros: micros,
  reservedMicros: micros,
  availableMicros: micros,
});
const scopeItemSchema = z.extend(figuresSchema, {
  scope: z.string(),
  team: z.string(),
  period: z.string(),
  blockThreshold: z.number(),
  crossings: z.optional(z.record(z.string(), z.unknown())),
  exhaustions: z.optional(z.record(z.string(), z.unknown())),
  jobs: z.optional(z.record(z.string(), entrySchema)),
});
type ScopeItem = z.infer<typeof scopeItemSchema>;

const crossingSchema = z.object({
  scope: z.string(),
  period: z.string(),
  threshold: z.enum(['warn', 'block']),
  fraction: z.nullable(z.number()),
  spentUsd: z.number(),
  reservedUsd: z.number(),
  limitUsd: z.number(),
});
/** A crossing's marker in its scope item: the crossing, when and by what it was recorded, whether it is out. */
const markerSchema = z.extend(crossingSchema, {
  at: z.string(),
  by: z.string(),
  published: z.optional(z.boolean()),
});
const exhaustionMarkerSchema = z.object({
  limitUsd: z.number(),
  spentUsd: z.number(),
  reservedUsd: z.number(),
  pausedJobIds: z.array(z.string()),
  at: z.string(),
  published: z.boolean(),
});
const jobStates = ['reserving', 'reserved', 'refused', 'releasing', 'released', 'settling', 'settled'] as const;
const jobRecordSchema = z.object({
  jobId: z.string(),
  state: z.enum(jobStates),
  scopes: z._default(z.array(z.string()), []),
  period: z.optional(z.string()),
  amountMicros: z.optional(micros),
  run: z.optional(z.int()),
  reserveResult: z.optional(z.object({ crossings: z.array(crossingSchema), unlimitedScopes: z.array(z.string()) })),
  refusal: z.optional(
    z.object({
      scope: z.string(),
      period: z.string(),
      limitUsd: z.number(),
      spentUsd: z.number(),
      reservedUsd: z.number(),
      requestedUsd: z.number(),
      availableUsd: z.number(),
      blockThreshold: z.number(),
    }),
  ),
  settleActualMicros: z.optional(micros),
  settleResult: z.optional(z.object({ jobId: z.string(), actualUsd: z.number(), crossings: z.array(crossingSchema) })),
  releaseResult: z.optional(
    z.object({
      jobId: z.string(),
      returned: z.array(z.object({ scope: z.string(), returnedUsd: z.number() })),
    }),
  ),
});
type JobRecord = z.infer<typeof jobRecordSchema>;

/** Attribute-name aliases used in every expression (several are DynamoDB reserved words). */
const NAMES = {
  '#pk': 'pk',
  '#scope': 'scope',
  '#team': 'team',
  '#period': 'period',
  '#state': 'state',
  '#jobs': 'jobs',
  '#crossings': 'crossings',
  '#exhaustions': 'exhaustions',
  '#published': 'published',
  '#by': 'by',
  '#limit': 'limitMicros',
  '#blockLimit': 'blockLimitMicros',
  '#blockThreshold': 'blockThreshold',
  '#spent': 'spentMicros',
  '#reserved': 'reservedMicros',
  '#available': 'availableMicros',
  '#run': 'run',
} as const;
type Name = keyof typeof NAMES;
/** The aliases an expression uses, since DynamoDB rejects unused ExpressionAttributeNames. */
function names(...used: Name[]): Record<string, string> {
  return Object.fromEntries(used.map((n) => [n, NAMES[n]]));
}
/** The job record is at reserve saga run `:run` (records written before runs were counted are at run 0). */
function runCondition(run: number): string {
  return run === 0 ? '(attribute_not_exists(#run) OR #run = :run)' : '#run = :run';
}
/** A scope item without its (possibly large) jobs map: what usage and crossing checks need. */
const SUMMARY_NAMES: Name[] = [
  '#scope',
  '#team',
  '#period',
  '#blockThreshold',
  '#crossings',
  '#exhaustions',
  '#limit',
  '#blockLimit',
  '#spent',
  '#reserved',
  '#available',
];
const SUMMARY_PROJECTION = SUMMARY_NAMES.join(', ');

/**
 * The entry a top-up raises in a scope's item: the job's own, or, in a budget set since the job reserved (the scope was
 * unlimited then, so it holds none), a new one. Undefined when the scope has no budget.
 */
function entryToRaise(item: ScopeItem | undefined, jobId: string): JobEntry | undefined {
  return item?.jobs?.[jobId] ?? (item ? adoptedEntry() : undefined);
}

/** The markers of one kind (crossings, exhaustions) in scope items that are not yet out, oldest first. */
function unpublishedMarkers<M extends { at: string; published?: boolean }>(
  items: readonly ScopeItem[],
  markersOf: (item: ScopeItem) => Record<string, unknown> | undefined,
  schema: z.ZodMiniType<M>,
): Array<{ item: ScopeItem; marker: M }> {
  const found: Array<{ item: ScopeItem; marker: M }> = [];
  for (const item of items) {
    for (const raw of Object.values(markersOf(item) ?? {})) {
      const marker = schema.safeParse(raw);
      if (marker.success && marker.data.published === false) found.push({ item, marker: marker.data });
    }
  }
  return found.sort((a, b) => (a.marker.at < b.marker.at ? -1 : a.marker.at > b.marker.at ? 1 : 0));
}

function toExhaustion(item: ScopeItem, marker: z.infer<typeof exhaustionMarkerSchema>): Exhaustion {
  return { scope: item.scope, team: item.team, period: item.period, ...marker };
}

/** Per-scope outcome of one saga step. */
type ScopeReservation =
  /** `item`: the scope's figures just after this reservation, for its crossings; none when it was in place already. */
  | { readonly kind: 'reserved'; readonly item?: ScopeItem }
  | { readonly kind: 'unlimited' }
  | { readonly kind: 'exceeded'; readonly details: BudgetExceededDetails };

/** Budgets per scope and month in DynamoDB: reserve, accrue, settle, release, limits and usage. */
export class BudgetLedger {
  private readonly client: DocumentClient;
  private readonly tableName: string;
  private readonly thresholds: Thresholds;
  private readonly now: () => Date;
  private readonly maxAttempts: number;

  constructor(options: BudgetLedgerOptions) {
    this.client = options.client;
    this.tableName = options.tableName;
    this.thresholds = validateThresholds(options.thresholds);
    this.now = options.now ?? (() => new Date());
    this.maxAttempts = options.maxAttempts ?? 12;
  }

  /** Creates the scope's budget for the period with this limit unless it exists (then nothing changes). */
  async ensureBudget(scope: string, period: string, limitUsd: number): Promise<{ created: boolean }> {
    const parsed = parseScope(scope);
    const checkedPeriod = parsePeriod(period);
    const limitMicros = usdToMicros(limitUsd, 'budget limit');
    return { created: await this.createScopeItem(parsed, checkedPeriod, limitMicros) };
  }

  /**
   * Sets a scope's limit for the period (admin), creating the budget if absent. `available` moves by the change in
   * the block limit in the same conditional update that checks the old limit, so concurrent reservations keep
   * their places and no read-modify-write of the totals happens. Setting the same limit again writes nothing.
   */
  async setLimit(
    scope: string,
    period: string,
    limitUsd: number,
  ): Promise<{ usage: BudgetUsage; crossings: ThresholdCrossing[] }> {
    const parsed = parseScope(scope);
    const checkedPeriod = parsePeriod(period);
    const limitMicros = usdToMicros(limitUsd, 'budget limit');
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const current = await this.readScopeItem(parsed.text, checkedPeriod);
      if (!current) {
        if (await this.createScopeItem(parsed, checkedPeriod, limitMicros)) {
          const created = await this.readScopeItem(parsed.text, checkedPeriod);
          if (created) return { usage: this.toUsage(created), crossings: [] };
        }
        continue;
      }
      const change = limitChange(current, limitMicros, this.thresholds.block);
      if (!change) return { usage: this.toUsage(current), crossings: [] };
      const updated = await this.conditionalUpdate({
        Key: budgetKeys.period(parsed.text, checkedPeriod),
        UpdateExpression:
          'SET #limit = :limit, #blockLimit = :blockLimit, #blockThreshold = :blockThreshold, #available = #available + :delta',
        ConditionExpression: '#limit = :oldLimit AND #blockLimit = :oldBlockLimit',
        ExpressionAttributeNames: names('#limit', '#blockLimit', '#blockThreshold', '#available'),
        ExpressionAttributeValues: {
          ':limit': change.limitMicros,
          ':blockLimit': change.blockLimitMicros,
          ':blockThreshold': this.thresholds.block,
          ':delta': change.availableDelta,
          ':oldLimit': current.limitMicros,
          ':oldBlockLimit': current.blockLimitMicros,
        },
      });
      if (!updated) continue;
      const item = scopeItemSchema.parse(updated);
      const crossings = await this.recordCrossings(item, 'setLimit');
      // The usage shows the thresholds this change crossed, as a read after it would.
      const marked = { ...item.crossings, ...Object.fromEntries(crossings.map((c) => [c.threshold, c])) };
      return { usage: this.toUsage({ ...item, crossings: marked }), crossings };
    }
    throw new ConcurrentUpdate(
      `gave up setting the limit of ${parsed.text} for ${checkedPeriod} after ${this.maxAttempts} attempts: the limit kept changing`,
    );
  }

  /**
   * Reserves `amountUsd` for a job in every scope (a saga: scope by scope, each a single conditional update on
   * "job not yet in this item AND available ≥ amount"). If a scope refuses, every reservation already made is
   * released before BudgetExceeded is thrown. Idempotent per job id: a replay returns the first result (or throws
   * the first refusal) and changes nothing.
   */
  async reserve(jobId: string, scopes: readonly string[], amountUsd: number, period: string): Promise<ReserveResult> {
    const id = parseJobId(jobId);
    const parsedScopes = this.parseJobScopes(scopes);
    const scopeTexts = parsedScopes.map((s) => s.text);
    const checkedPeriod = parsePeriod(period);
    const amountMicros = usdToMicros(amountUsd, 'reservation amount');
    const record = await this.claimJob(id, scopeTexts, checkedPeriod, amountMicros);
    if (record.state !== 'reserving') return this.answerReserveReplay(record);
    const run = record.run ?? 0;

    const reservedIn: ScopeItem[] = [];
    const unlimitedScopes: string[] = [];
    for (const scope of parsedScopes) {
      let outcome: ScopeReservation;
      try {
        outcome = await this.reserveInScope(id, scope, checkedPeriod, amountMicros, run);
      } catch (error) {
        // Not a refusal (missing team budget, contention, network): undo what this run reserved and leave the
        // record in `reserving`, so a replay after the cause is fixed starts cleanly. If the undo fails too (the
        // network is gone), the record still says `reserving`: a replay completes the saga, a release undoes it.
        await this.undoRun(id, scopeTexts, checkedPeriod, run).catch(() => undefined);
        throw error;
      }
      if (outcome.kind === 'exceeded') return this.refuse(id, scopeTexts, checkedPeriod, run, outcome.details);
      if (outcome.kind === 'unlimited') unlimitedScopes.push(scope.text);
      else if (outcome.item) reservedIn.push(outcome.item);
    }
    // Thresholds are marked only once every scope took its share: a reservation the saga undoes crossed nothing.
    const crossings: ThresholdCrossing[] = [];
    for (const item of reservedIn) crossings.push(...(await this.recordCrossings(item, id)));
    const result: ReserveResult = { ok: true, crossings, unlimitedScopes };
    const finished = await this.conditionalUpdate({
      Key: budgetKeys.job(id),
      UpdateExpression: 'SET #state = :reserved, reserveResult = :result',
      ConditionExpression: `#state = :reserving AND ${runCondition(run)}`,
      ExpressionAttributeNames: names('#state', '#run'),
      ExpressionAttributeValues: {
        ':reserved': 'reserved',
        ':reserving': 'reserving',
        ':run': run,
        ':result': { crossings, unlimitedScopes },
      },
    });
    if (finished) return result;
    // The record moved on while this saga ran: a concurrent duplicate finished (use its answer) or the job was
    // refused, released or settled meanwhile (then what this saga reserved must not stay behind).
    const now = await this.readJob(id);
    if (now?.state === 'reserved' && now.reserveResult) return { ok: true, ...now.reserveResult };
    if (now?.state === 'reserving') throw this.runOvertaken(id, run);
    await this.compensate(id, scopeTexts, checkedPeriod);
    // The reservation the crossings marked is gone: unmark them, or budget-watch would announce a crossing nothing
    // made and, the marker taking the period's place, the real one later this month would go unannounced.
    await this.withdrawCrossings(crossings, id);
    if (now?.refusal) throw new BudgetExceeded(now.refusal);
    throw new BudgetJobConflict(
      `job ${id} was ${now?.state ?? 'removed'} while its reservation was being made; nothing stays reserved for it`,
    );
  }

  /**
   * Budget-watch: the job's running cost so far. Monotonic and idempotent (the same or an older figure changes
   * nothing); moves money from the job's reservation to spent, and beyond the reservation it eats into available.
   * Reports crossings and the scopes now blocked, so the caller can pause their jobs.
   */
  async accrue(jobId: string, spentSoFarUsd: number): Promise<AccrueResult> {
    const id = parseJobId(jobId);
    const spentMicros = usdToMicros(spentSoFarUsd, 'running cost');
    const record = await this.readJob(id);
    if (!record)
      throw new UnknownBudgetJob(`job ${id} has no reservation in the budget ledger; accrue needs a reserve`);
    const outcomes = await this.chargeEntries(id, record, (entry) => accrualChange(entry, spentMicros));
    return {
      crossings: outcomes.flatMap((o) => o.crossings),
      blockedScopes: outcomes.filter((o) => o.blocked).map((o) => o.scope),
    };
  }

  /**
   * Applies a charge to the job's entry in every scope of its period, with the crossings each change makes. Only a
   * job that still holds its reservation takes a scope budgeted since (adopts an entry there): a stale tick or a late
   * cost after the job settled, released or was refused would otherwise charge a budget set after it ended, with an
   * entry no settle would ever close.
   */
  private async chargeEntries(
    id: string,
    record: JobRecord,
    compute: (entry: JobEntry) => EntryChange | null,
  ): Promise<Array<{ scope: string; changed: boolean; blocked: boolean; crossings: ThresholdCrossing[] }>> {
    const period = record.period;
    if (period === undefined) return [];
    const adopt = record.state === 'reserved';
    return Promise.all(
      record.scopes.map(async (scope) => {
        const applied = await this.applyToEntry(scope, period, id, compute, adopt);
        if (!applied) return { scope, changed: false, blocked: false, crossings: [] };
        const crossings = applied.changed ? await this.recordCrossings(applied.item, id) : [];
        return { scope, changed: applied.changed, blocked: isBlocked(applied.item), crossings };
      }),
    );
  }

  /**
   * Finalize: replaces the job's reservation with its actual cost in every scope (reserved −= what the job still
   * held; spent += actual − already accrued). Idempotent: a second settle changes nothing and returns the first
   * result, whatever amount it is given. Throws UnknownBudgetJob for a job never reserved.
   */
  async settle(jobId: string, actualUsd: number): Promise<SettleResult> {
    const id = parseJobId(jobId);
    const actualMicros = usdToMicros(actualUsd, 'actual cost');
    const record = await this.readJob(id);
    if (!record) {
      throw new UnknownBudgetJob(`job ${id} has no reservation in the budget ledger; settle needs a prior reserve`);
    }
    if (record.state === 'settled' && record.settleResult) return record.settleResult;
    // The first settle's amount wins: a replay mid-way (after a crash) finishes with the recorded figure.
    const settling = await this.conditionalUpdate({
      Key: budgetKeys.job(id),
      UpdateExpression: 'SET #state = :settling, settleActualMicros = if_not_exists(settleActualMicros, :actual)',
      ConditionExpression: 'attribute_exists(#pk) AND #state <> :settled',
      ExpressionAttributeNames: names('#state', '#pk'),
      ExpressionAttributeValues: { ':settling': 'settling', ':settled': 'settled', ':actual': actualMicros },
    });
    if (!settling) return this.storedSettlement(id);
    const moving = jobRecordSchema.parse(settling);
    const recordedMicros = moving.settleActualMicros ?? actualMicros;
    const period = moving.period;
    const crossings: ThresholdCrossing[] = [];
    if (period !== undefined) {
      const perScope = await Promise.all(
        moving.scopes.map(async (scope) => {
          const applied = await this.applyToEntry(scope, period, id, (e) => settlementChange(e, recordedMicros), true);
          return applied?.changed ? this.recordCrossings(applied.item, id) : [];
        }),
      );
      crossings.push(...perScope.flat());
    }
    const result: SettleResult = { jobId: id, actualUsd: microsToUsd(recordedMicros), crossings };
    const done = await this.conditionalUpdate({
      Key: budgetKeys.job(id),
      UpdateExpression: 'SET #state = :settled, settleResult = :result',
      ConditionExpression: '#state = :settling',
      ExpressionAttributeNames: names('#state'),
      ExpressionAttributeValues: { ':settled': 'settled', ':settling': 'settling', ':result': result },
    });
    return done ? result : this.storedSettlement(id);
  }

  /**
   * A cost recorded outside budget-watch's meter (an attempt's stop, an orphaned Batch job, an end Batch reported
   * late), whenever it comes: raises what the job is charged in every scope to `totalUsd`, its whole recorded cost, and
   * reports the crossings. While the job holds its entries (running, waiting for an attempt, paused for budget) it is
   * charged as accrue charges it, a scope budgeted since included; after it settled or released, its spend there rises
   * (the settling caller reads the job's costs again after it settles, so a cost recorded meanwhile is not missed).
   * Monotonic and idempotent like accrue. Throws UnknownBudgetJob for a job the ledger never saw.
   */
  async chargeRecorded(jobId: string, totalUsd: number): Promise<RecordedChargeResult> {
    const id = parseJobId(jobId);
    const totalMicros = usdToMicros(totalUsd, 'total cost');
    const record = await this.readJob(id);
    if (!record) {
      throw new UnknownBudgetJob(
        `job ${id} has no record in the budget ledger; charging its recorded cost needs a prior reserve`,
      );
    }
    const outcomes = await this.chargeEntries(id, record, (entry) => recordedChargeChange(entry, totalMicros));
    return {
      jobId: id,
      chargedScopes: outcomes.filter((o) => o.changed).map((o) => o.scope),
      crossings: outcomes.flatMap((o) => o.crossings),
    };
  }

  /**
   * Before a paused job resumes: raises its reservation in every scope to `targetUsd`, what it is forecast to cost
   * from here, so that no other job is admitted against money it is about to spend. All or nothing: when a scope's
   * available cannot cover its increase, what was raised in the others is taken back and BudgetExceeded gives that
   * scope's figures (requested = its increase); any other error takes them back too. Idempotent: an entry holding the
   * target already changes nothing. A scope budgeted since the job reserved (unlimited then, so the job holds no entry
   * there) gets an entry with the target reserved, checked against its available as any other. A job whose entry is
   * closed (released, settled) changes nothing. Throws UnknownBudgetJob for a job never reserved.
   *
   * Without a transaction across scope items (one item per scope) two limits remain, both on the safe side of
   * admission or short-lived: a call cut off between its raises (the function timed out) leaves the scopes it raised
   * holding more until the job resumes or ends (settle and release return every reservation); and of two resumers
   * at once, one whose refusal takes back a raise the other counted as already made leaves the resumed job holding
   * less in that scope, which its accruals then charge as they would any job's spend past its reservation.
   */
  async reserveTo(jobId: string, targetUsd: number): Promise<TopUpResult> {
    const id = parseJobId(jobId);
    const targetMicros = usdToMicros(targetUsd, 'reservation');
    const record = await this.readJob(id);
    if (!record) {
      throw new UnknownBudgetJob(`job ${id} has no reservation in the budget ledger; a top-up needs a prior reserve`);
    }
    const period = record.period;
    if (period === undefined || record.state !== 'reserved') return { jobId: id, raised: [], crossings: [] };
    // A scope short now refuses before anything is written; the raises below check each scope again as they write.
    for (const scope of record.scopes) {
      const item = await this.readScopeItem(scope, period, id);
      const entry = entryToRaise(item, id);
      const change = entry && topUpChange(entry, targetMicros);
      if (item && change && item.availableMicros < change.reservedDelta) {
        throw new BudgetExceeded(exceededDetails(item, change.reservedDelta));
      }
    }
    const raised: Array<{ scope: string; increase: number; item: ScopeItem }> = [];
    try {
      for (const scope of record.scopes) {
        const outcome = await this.raiseInScope(scope, period, id, targetMicros);
        if (outcome.kind === 'exceeded') throw new BudgetExceeded(outcome.details);
        if (outcome.kind === 'raised') raised.push({ scope, increase: outcome.increase, item: outcome.item });
      }
    } catch (error) {
      // Whatever stopped it (a scope short meanwhile, contention, the wire), what this call raised is taken back.
      await Promise.allSettled(
        raised.map((done) => this.applyToEntry(done.scope, period, id, (e) => topUpTakenBack(e, done.increase))),
      );
      throw error;
    }
    // Crossings only once every scope took its share: a top-up taken back leaves no alert behind.
    const crossings: ThresholdCrossing[] = [];
    for (const done of raised) crossings.push(...(await this.recordCrossings(done.item, id)));
    return {
      jobId: id,
      raised: raised.map((done) => ({ scope: done.scope, addedUsd: microsToUsd(done.increase) })),
      crossings,
    };
  }

  /**
   * A job paused for budget gives back what it holds: its reservation returns to every scope's available, what it
   * accrued stays spent, and its entries stay open, so a resume raises them again (reserveTo) to what it is then
   * forecast to cost to finish. A paused job spends nothing, so it holds no money another job could use, and a scope
   * blocked only by what its paused jobs held is blocked no more. Idempotent; a job never reserved, or whose entries
   * are closed, changes nothing.
   */
  async returnHeld(jobId: string): Promise<ReleaseResult> {
    const id = parseJobId(jobId);
    const record = await this.readJob(id);
    const period = record?.period;
    if (!record || period === undefined || record.state !== 'reserved') return { jobId: id, returned: [] };
    const returned = await Promise.all(
      record.scopes.map(async (scope) => {
        const applied = await this.applyToEntry(scope, period, id, (e) => topUpTakenBack(e, e.reserved));
        return { scope, returnedUsd: applied?.changed ? microsToUsd(applied.change.availableDelta) : 0 };
      }),
    );
    return { jobId: id, returned };
  }

  /**
   * Cancel before (or without further) spend: returns the job's remaining reservation in every scope; what was
   * already accrued stays spent. Idempotent: a replay returns the first result. Releasing a job the ledger never
   * saw leaves a tombstone, so a reserve arriving later (a cancel racing the cost gate) is refused, not leaked.
   */
  async release(jobId: string): Promise<ReleaseResult> {
    const id = parseJobId(jobId);
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const record = await this.readJob(id);
      if (!record) {
        const tombstone: ReleaseResult = { jobId: id, returned: [] };
        const created = await this.conditionalPut(
          { ...budgetKeys.job(id), jobId: id, state: 'released', scopes: [], releaseResult: tombstone },
          'attribute_not_exists(#pk)',
        );
        if (created) return tombstone;
        continue;
      }
      if (record.releaseResult) return record.releaseResult;
      if (record.state === 'refused' && record.period !== undefined) {
        // A refusal's undo cut off and never replayed: whatever the saga still holds goes back.
        return { jobId: id, returned: await this.compensate(id, record.scopes, record.period) };
      }
      if (!['reserving', 'reserved', 'releasing'].includes(record.state)) return { jobId: id, returned: [] };
      const releasing = await this.conditionalUpdate({
        Key: budgetKeys.job(id),
        UpdateExpression: 'SET #state = :releasing',
        ConditionExpression: '#state IN (:reserving, :reserved, :releasing)',
        ExpressionAttributeNames: names('#state'),
        ExpressionAttributeValues: { ':releasing': 'releasing', ':reserving': 'reserving', ':reserved': 'reserved' },
      });
      if (!releasing) continue;
      const returned = record.period === undefined ? [] : await this.compensate(id, record.scopes, record.period);
      const result: ReleaseResult = { jobId: id, returned };
      const done = await this.conditionalUpdate({
        Key: budgetKeys.job(id),
        UpdateExpression: 'SET #state = :released, releaseResult = :result',
        ConditionExpression: '#state = :releasing',
        ExpressionAttributeNames: names('#state'),
        ExpressionAttributeValues: { ':released': 'released', ':releasing': 'releasing', ':result': result },
      });
      if (done) return result;
      const now = await this.readJob(id);
      return now?.releaseResult ?? result;
    }
    throw new ConcurrentUpdate(
      `gave up releasing job ${id} after ${this.maxAttempts} attempts: its record kept changing`,
    );
  }

  /** A scope's budget for a period, or undefined when it has none (user/project scopes: unlimited). */
  async usage(scope: string, period: string): Promise<BudgetUsage | undefined> {
    const parsed = parseScope(scope);
    const item = await this.readScopeItem(parsed.text, parsePeriod(period));
    return item ? this.toUsage(item) : undefined;
  }

  /** The first of `scopes` whose budget for `period` is blocked (at or over its block threshold), if any. */
  async firstBlockedScope(scopes: readonly string[], period: string): Promise<string | undefined> {
    for (const scope of scopes) if ((await this.usage(scope, period))?.blocked) return scope;
    return undefined;
  }

  /** Every budgeted scope of a team for a period (team, users, projects), sorted by scope. */
  async listScopes(team: string, period: string): Promise<BudgetUsage[]> {
    const usages = (await this.scopeItems(team, period)).map((item) => this.toUsage(item));
    return usages.sort((a, b) => (a.scope < b.scope ? -1 : a.scope > b.scope ? 1 : 0));
  }

  /**
   * The budget alerts of a team's scopes for a period that were recorded but whose events are not marked out, oldest
   * first, from one query: crossings ({@link markPublished}; a marker recorded before markers carried `published`
   * counts as published) with when each was recorded, and exhaustions ({@link markExhaustionPublished}).
   */
  async unpublishedAlerts(
    team: string,
    period: string,
  ): Promise<{ crossings: RecordedCrossing[]; exhaustions: Exhaustion[] }> {
    const items = await this.scopeItems(team, period);
    return {
      crossings: unpublishedMarkers(items, (item) => item.crossings, markerSchema).map(
        ({ marker: { at, by: _by, published: _published, ...crossing } }) => ({ crossing, at }),
      ),
      exhaustions: unpublishedMarkers(items, (item) => item.exhaustions, exhaustionMarkerSchema).map(
        ({ item, marker }) => toExhaustion(item, marker),
      ),
    };
  }

  /**
   * The crossings whose markers are recorded and not yet marked published: what is still to announce. A write replayed
   * after its crossings went out (a step retried after it published them) reports them again; these are none of them.
   * A crossing without a marker (withdrawn with the reservation that crossed) is not to announce either.
   */
  async unpublished(crossings: readonly ThresholdCrossing[]): Promise<ThresholdCrossing[]> {
    const due: ThresholdCrossing[] = [];
    // One read per scope and period: a write that crossed warn and block at once reports both of one item.
    const items = new Map<string, Promise<ScopeItem | undefined>>();
    for (const crossing of crossings) {
      const [scope, period] = [parseScope(crossing.scope).text, parsePeriod(crossing.period)];
      const key = `${scope} ${period}`;
      if (!items.has(key)) items.set(key, this.readScopeItem(scope, period));
      const item = await items.get(key);
      const marker = markerSchema.safeParse(item?.crossings?.[crossing.threshold]);
      if (marker.success && marker.data.published === false) due.push(crossing);
    }
    return due;
  }

  /** Marks crossings published once their events are out (idempotent; a crossing with no marker is skipped). */
  async markPublished(crossings: readonly ThresholdCrossing[]): Promise<void> {
    for (const crossing of crossings) {
      await this.conditionalUpdate({
        Key: budgetKeys.period(parseScope(crossing.scope).text, parsePeriod(crossing.period)),
        UpdateExpression: 'SET #crossings.#threshold.#published = :true',
        ConditionExpression: 'attribute_exists(#crossings.#threshold)',
        ExpressionAttributeNames: { ...names('#crossings', '#published'), '#threshold': crossing.threshold },
        ExpressionAttributeValues: { ':true': true },
      });
    }
  }

  /**
   * Records, before they are stopped, that the running jobs `pausedJobIds` of a blocked scope pause: the exhaustion
   * of the scope's current limit, created by the first call and added to by later ones until its event is out.
   * Returns it as it now stands, or undefined when the scope has no budget or is not blocked (its limit was raised
   * meanwhile: nothing is to stop). A job added after the event went out is not recorded in it: its own
   * `Job PausedForBudget` names it. Idempotent: repeating a call adds nothing.
   */
  async recordExhaustion(
    scope: string,
    period: string,
    pausedJobIds: readonly string[],
  ): Promise<Exhaustion | undefined> {
    const parsed = parseScope(scope);
    const checkedPeriod = parsePeriod(period);
    const ids = [...new Set(pausedJobIds.map(parseJobId))];
    const Key = budgetKeys.period(parsed.text, checkedPeriod);
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const item = await this.readScopeItem(parsed.text, checkedPeriod);
      if (!item || !isBlocked(item)) return undefined;
      const limitKey = { '#limitKey': String(item.limitMicros) };
      if (item.exhaustions === undefined) {
        // An item written before exhaustions were kept: give it the map, then record into it.
        await this.conditionalUpdate({
          Key,
          UpdateExpression: 'SET #exhaustions = if_not_exists(#exhaustions, :empty)',
          ConditionExpression: 'attribute_exists(#pk)',
          ExpressionAttributeNames: names('#exhaustions', '#pk'),
          ExpressionAttributeValues: { ':empty': {} },
        });
        continue;
      }
      const stored = item.exhaustions[limitKey['#limitKey']];
      if (stored !== undefined) {
        const existing = toExhaustion(item, exhaustionMarkerSchema.parse(stored));
        const added = ids.filter((id) => !existing.pausedJobIds.includes(id));
        if (existing.published || added.length === 0) return existing;
        // The list only grows, so an unchanged length means no concurrent call added to it.
        const appended = await this.conditionalUpdate({
          Key,
          UpdateExpression: 'SET #exhaustions.#limitKey.#paused = list_append(#exhaustions.#limitKey.#paused, :added)',
          ConditionExpression:
            'size(#exhaustions.#limitKey.#paused) = :known AND #exhaustions.#limitKey.#published = :false',
          ExpressionAttributeNames: { ...names('#exhaustions', '#published'), ...limitKey, '#paused': 'pausedJobIds' },
          ExpressionAttributeValues: { ':added': added, ':known': existing.pausedJobIds.length, ':false': false },
        });
        if (appended) return { ...existing, pausedJobIds: [...existing.pausedJobIds, ...added] };
        continue;
      }
      const marker = {
        limitUsd: microsToUsd(item.limitMicros),
        spentUsd: microsToUsd(item.spentMicros),
        reservedUsd: microsToUsd(item.reservedMicros),
        pausedJobIds: ids,
        at: this.now().toISOString(),
        published: false,
      };
      const created = await this.conditionalUpdate({
        Key,
        UpdateExpression: 'SET #exhaustions.#limitKey = :marker',
        ConditionExpression: 'attribute_not_exists(#exhaustions.#limitKey)',
        ExpressionAttributeNames: { ...names('#exhaustions'), ...limitKey },
        ExpressionAttributeValues: { ':marker': marker },
      });
      if (created) return toExhaustion(item, marker);
    }
    throw new ConcurrentUpdate(
      `gave up recording the exhaustion of ${parsed.text} for ${checkedPeriod} after ${this.maxAttempts} attempts: it kept changing`,
    );
  }

  /** Marks an exhaustion's event out (idempotent; one with no marker is skipped). */
  async markExhaustionPublished(exhaustion: Exhaustion): Promise<void> {
    await this.conditionalUpdate({
      Key: budgetKeys.period(parseScope(exhaustion.scope).text, parsePeriod(exhaustion.period)),
      UpdateExpression: 'SET #exhaustions.#limitKey.#published = :true',
      ConditionExpression: 'attribute_exists(#exhaustions.#limitKey)',
      ExpressionAttributeNames: {
        ...names('#exhaustions', '#published'),
        '#limitKey': String(usdToMicros(exhaustion.limitUsd, 'budget limit')),
      },
      ExpressionAttributeValues: { ':true': true },
    });
  }

  /** Every scope item of a team for a period, without the jobs maps. */
  private async scopeItems(team: string, period: string): Promise<ScopeItem[]> {
    const teamScope = parseScope(`team:${team}`);
    const checkedPeriod = parsePeriod(period);
    const items: ScopeItem[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.client.query({
        TableName: this.tableName,
        IndexName: BUDGETS_INDEXES.byTeam.name,
        KeyConditionExpression: '#gpk = :gpk AND begins_with(#gsk, :prefix)',
        // The jobs map can be large; listing needs only the totals and markers.
        ProjectionExpression: SUMMARY_PROJECTION,
        ExpressionAttributeNames: {
          '#gpk': BUDGETS_INDEXES.byTeam.partition,
          '#gsk': BUDGETS_INDEXES.byTeam.sort,
          ...names(...SUMMARY_NAMES),
        },
        ExpressionAttributeValues: {
          ':gpk': budgetKeys.teamPartition(teamScope.team),
          ':prefix': budgetKeys.teamPeriodPrefix(checkedPeriod),
        },
        ExclusiveStartKey: start,
      });
      for (const raw of page.Items) items.push(scopeItemSchema.parse(raw));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }

  private parseJobScopes(scopes: readonly string[]): Scope[] {
    if (!Array.isArray(scopes) || scopes.length === 0) {
      throw new InvalidScope('a reservation needs at least one scope, e.g. ["team:nlp"]');
    }
    const parsed = scopes.map((s) => parseScope(s));
    const team = parsed[0]?.team;
    const seen = new Set<string>();
    for (const scope of parsed) {
      if (scope.team !== team) {
        throw new InvalidScope(`a job's scopes must all belong to one team: ${scope.text} is not of team "${team}"`);
      }
      if (seen.has(scope.text)) throw new InvalidScope(`scope ${scope.text} is listed twice`);
      seen.add(scope.text);
    }
    return parsed;
  }

  /** Creates the job record in `reserving`, or returns the existing one if it describes the same reservation. */
  private async claimJob(jobId: string, scopes: string[], period: string, amountMicros: number): Promise<JobRecord> {
    const fresh = {
      ...budgetKeys.job(jobId),
      jobId,
      state: 'reserving' as const,
      scopes,
      period,
      amountMicros,
      createdAt: this.now().toISOString(),
    };
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      if (await this.conditionalPut(fresh, 'attribute_not_exists(#pk)')) return jobRecordSchema.parse(fresh);
      const existing = await this.readJob(jobId);
      if (!existing) continue;
      if (existing.period === undefined) {
        throw new BudgetJobConflict(`job ${jobId} was released before it was reserved; it cannot be reserved now`);
      }
      const same =
        existing.period === period &&
        existing.amountMicros === amountMicros &&
        existing.scopes.length === scopes.length &&
        existing.scopes.every((s, i) => s === scopes[i]);
      if (!same) {
        throw new BudgetJobConflict(
          `job ${jobId} already has a reservation of $${microsToUsd(existing.amountMicros ?? 0)} for ${existing.scopes.join(
            ', ',
          )} in ${existing.period}; a job id reserves once (asked: $${microsToUsd(amountMicros)} for ${scopes.join(', ')} in ${period})`,
        );
      }
      return existing;
    }
    throw new ConcurrentUpdate(`gave up recording job ${jobId} after ${this.maxAttempts} attempts`);
  }

  private async answerReserveReplay(record: JobRecord): Promise<ReserveResult> {
    if (record.refusal) {
      // The refusal's undo may have been cut off (it runs after the refusal is recorded): the replay finishes it.
      if (record.period !== undefined) await this.compensate(record.jobId, record.scopes, record.period);
      throw new BudgetExceeded(record.refusal);
    }
    if (record.reserveResult) return { ok: true, ...record.reserveResult };
    throw new BudgetJobConflict(
      `job ${record.jobId} is ${record.state} without a completed reservation; it cannot be reserved now`,
    );
  }

  private async refuse(
    jobId: string,
    scopes: readonly string[],
    period: string,
    run: number,
    details: BudgetExceededDetails,
  ): Promise<ReserveResult> {
    const marked = await this.conditionalUpdate({
      Key: budgetKeys.job(jobId),
      UpdateExpression: 'SET #state = :refused, refusal = :refusal',
      ConditionExpression: `#state = :reserving AND ${runCondition(run)}`,
      ExpressionAttributeNames: names('#state', '#run'),
      ExpressionAttributeValues: { ':refused': 'refused', ':reserving': 'reserving', ':run': run, ':refusal': details },
    });
    let refusal = details;
    if (!marked) {
      // A concurrent duplicate of this reserve finished first: its reservation stands and must not be undone.
      const now = await this.readJob(jobId);
      if (now?.state === 'reserved' && now.reserveResult) return { ok: true, ...now.reserveResult };
      // A later run started (this run's undo is done or under way): the entries are that run's to keep or undo.
      if (now?.state === 'reserving') throw this.runOvertaken(jobId, run);
      if (now?.refusal) refusal = now.refusal;
    }
    await this.compensate(jobId, scopes, period);
    throw new BudgetExceeded(refusal);
  }

  /**
   * The undo of a run that failed: first the record moves on to the next run (on the condition that it is still
   * `reserving` at this run), so no saga of this run can complete over the undo; then every entry this run or an
   * earlier one holds is released. Undoes nothing when the record moved on: a twin finished (its reservation stands),
   * the job was refused or released (that undid it), or a later run started (its entries are its own).
   */
  private async undoRun(jobId: string, scopes: readonly string[], period: string, run: number): Promise<void> {
    const next = await this.conditionalUpdate({
      Key: budgetKeys.job(jobId),
      UpdateExpression: 'SET #run = :next',
      ConditionExpression: `#state = :reserving AND ${runCondition(run)}`,
      ExpressionAttributeNames: names('#state', '#run'),
      ExpressionAttributeValues: { ':reserving': 'reserving', ':run': run, ':next': run + 1 },
    });
    if (!next) return;
    await Promise.all(scopes.map((scope) => this.applyToEntry(scope, period, jobId, (e) => undoRunChange(e, run))));
  }

  private runOvertaken(jobId: string, run: number): ConcurrentUpdate {
    return new ConcurrentUpdate(
      `job ${jobId}'s reservation (run ${run}) was undone by an overlapping attempt that failed; the cost gate's retry makes it again`,
    );
  }

  /**
   * Returns every open reservation this job holds in these scopes (a release, and the saga's compensation), and says
   * how much each gave back. Idempotent: an entry already released gives back nothing.
   */
  private async compensate(
    jobId: string,
    scopes: readonly string[],
    period: string,
  ): Promise<ReleaseResult['returned']> {
    return Promise.all(
      scopes.map(async (scope) => {
        const applied = await this.applyToEntry(scope, period, jobId, releaseChange);
        return { scope, returnedUsd: applied?.changed ? microsToUsd(-applied.change.reservedDelta) : 0 };
      }),
    );
  }

  private async reserveInScope(
    jobId: string,
    scope: Scope,
    period: string,
    amountMicros: number,
    run: number,
  ): Promise<ScopeReservation> {
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const updated = await this.conditionalUpdate({
        Key: budgetKeys.period(scope.text, period),
        UpdateExpression: 'SET #jobs.#job = :entry, #reserved = #reserved + :amount, #available = #available - :amount',
        ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#jobs.#job) AND #available >= :amount',
        ExpressionAttributeNames: { ...names('#jobs', '#reserved', '#available', '#pk'), '#job': jobId },
        ExpressionAttributeValues: { ':entry': reservationEntry(amountMicros, run), ':amount': amountMicros },
      });
      if (updated) return { kind: 'reserved', item: scopeItemSchema.parse(updated) };
      const current = await this.readScopeItem(scope.text, period, jobId);
      if (!current) {
        if (scope.kind === 'team') {
          throw new BudgetNotFound(
            `${scope.text} has no budget for ${period}; the cost gate must create it (ensureBudget) before reserving`,
          );
        }
        return { kind: 'unlimited' };
      }
      const entry = current.jobs?.[jobId];
      const reopen = entry && reopenChange(entry, amountMicros, run);
      if (entry && !reopen) {
        // Already in this item: an earlier attempt of this job reserved here (or the job was charged or settled
        // since, which the saga's final state transition detects). An earlier run's reservation is claimed for
        // this run, so that run's undo leaves it alone; if that undo got there first, the next pass reopens it.
        const claim = claimChange(entry, run);
        if (!claim) return { kind: 'reserved' };
        const claimed = await this.conditionalUpdate({
          Key: budgetKeys.period(scope.text, period),
          UpdateExpression: 'SET #jobs.#job = :entry',
          ConditionExpression: '#jobs.#job.version = :version',
          ExpressionAttributeNames: { ...names('#jobs'), '#job': jobId },
          ExpressionAttributeValues: { ':entry': claim.entry, ':version': entry.version },
        });
        if (claimed) return { kind: 'reserved' };
        continue;
      }
      if (current.availableMicros >= amountMicros) {
        if (!entry || !reopen) continue; // money was returned between the write and the read: try again
        // An earlier attempt of this saga compensated here after a failure: take the reservation again.
        const reopened = await this.conditionalUpdate({
          Key: budgetKeys.period(scope.text, period),
          UpdateExpression:
            'SET #jobs.#job = :entry, #reserved = #reserved + :reserved, #available = #available + :available',
          ConditionExpression: '#jobs.#job.version = :version AND #available >= :amount',
          ExpressionAttributeNames: { ...names('#jobs', '#reserved', '#available'), '#job': jobId },
          ExpressionAttributeValues: {
            ':entry': reopen.entry,
            ':reserved': reopen.reservedDelta,
            ':available': reopen.availableDelta,
            ':version': entry.version,
            ':amount': amountMicros,
          },
        });
        if (reopened) return { kind: 'reserved', item: scopeItemSchema.parse(reopened) };
        continue;
      }
      return { kind: 'exceeded', details: exceededDetails(current, amountMicros) };
    }
    throw new ConcurrentUpdate(
      `gave up reserving job ${jobId} in ${scope.text} for ${period} after ${this.maxAttempts} attempts: available kept changing`,
    );
  }

  /** One scope's share of reserveTo: the entry raised to the target, on the condition that available covers it. */
  private async raiseInScope(
    scope: string,
    period: string,
    jobId: string,
    targetMicros: number,
  ): Promise<
    | { kind: 'raised'; increase: number; item: ScopeItem }
    | { kind: 'unchanged' }
    | { kind: 'exceeded'; details: BudgetExceededDetails }
  > {
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const current = await this.readScopeItem(scope, period, jobId);
      const found = current?.jobs?.[jobId];
      const entry = entryToRaise(current, jobId);
      const change = entry && topUpChange(entry, targetMicros);
      if (!current || !entry || !change) return { kind: 'unchanged' };
      const increase = change.reservedDelta;
      if (current.availableMicros < increase) {
        return { kind: 'exceeded', details: exceededDetails(current, increase) };
      }
      const updated = await this.conditionalUpdate({
        Key: budgetKeys.period(scope, period),
        UpdateExpression:
          'SET #jobs.#job = :entry, #reserved = #reserved + :increase, #available = #available - :increase',
        ConditionExpression: `${found ? '#jobs.#job.version = :version' : 'attribute_not_exists(#jobs.#job)'} AND #available >= :increase`,
        ExpressionAttributeNames: { ...names('#jobs', '#reserved', '#available'), '#job': jobId },
        ExpressionAttributeValues: {
          ':entry': change.entry,
          ':increase': increase,
          ...(found ? { ':version': entry.version } : {}),
        },
      });
      if (updated) return { kind: 'raised', increase, item: scopeItemSchema.parse(updated) };
    }
    throw new ConcurrentUpdate(
      `gave up raising job ${jobId}'s reservation in ${scope} for ${period} after ${this.maxAttempts} attempts: its entry or available kept changing`,
    );
  }

  /**
   * Applies a change to one job's entry in one scope item: read the entry, compute the change, write it with the
   * totals' deltas on the condition that the entry's version is still the one read (optimistic, per job entry).
   * Undefined when the scope has no item, or the job no entry there and not `adopt`. With `adopt`, a job without an
   * entry in a scope that has a budget (set after the job reserved, when the scope was unlimited) is charged there
   * from `adoptedEntry()`, written on the condition that no entry appeared meanwhile.
   */
  private async applyToEntry(
    scope: string,
    period: string,
    jobId: string,
    compute: (entry: JobEntry) => EntryChange | null,
    adopt = false,
  ): Promise<
    { changed: true; item: ScopeItem; change: EntryChange } | { changed: false; item: ScopeItem } | undefined
  > {
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      const current = await this.readScopeItem(scope, period, jobId);
      const found = current?.jobs?.[jobId];
      const entry = found ?? (adopt ? adoptedEntry() : undefined);
      if (!current || !entry) return undefined;
      const change = compute(entry);
      if (!change) return { changed: false, item: current };
      const updated = await this.conditionalUpdate({
        Key: budgetKeys.period(scope, period),
        UpdateExpression:
          'SET #jobs.#job = :entry, #spent = #spent + :spent, #reserved = #reserved + :reserved, #available = #available + :available',
        ConditionExpression: found ? '#jobs.#job.version = :version' : 'attribute_not_exists(#jobs.#job)',
        ExpressionAttributeNames: { ...names('#jobs', '#spent', '#reserved', '#available'), '#job': jobId },
        ExpressionAttributeValues: {
          ':entry': change.entry,
          ':spent': change.spentDelta,
          ':reserved': change.reservedDelta,
          ':available': change.availableDelta,
          ...(found ? { ':version': entry.version } : {}),
        },
      });
      if (updated) return { changed: true, item: scopeItemSchema.parse(updated), change };
    }
    throw new ConcurrentUpdate(
      `gave up updating job ${jobId} in ${scope} for ${period} after ${this.maxAttempts} attempts: its entry kept changing`,
    );
  }

  /**
   * Records a marker for each threshold the item's figures have reached and that has none yet. The marker is a
   * conditional set, so of many concurrent operations exactly one records (and reports) each crossing; an
   * operation that crashed before recording is made good by the next one that sees the figures.
   */
  private async recordCrossings(item: ScopeItem, by: string): Promise<ThresholdCrossing[]> {
    const reached = thresholdsReached(item, this.thresholds).filter((t) => item.crossings?.[t] === undefined);
    const crossings: ThresholdCrossing[] = [];
    for (const threshold of reached) {
      const crossing: ThresholdCrossing = {
        scope: item.scope,
        period: item.period,
        threshold,
        fraction: fractionUsed(item),
        spentUsd: microsToUsd(item.spentMicros),
        reservedUsd: microsToUsd(item.reservedMicros),
        limitUsd: microsToUsd(item.limitMicros),
      };
      const marked = await this.conditionalUpdate({
        Key: budgetKeys.period(item.scope, item.period),
        UpdateExpression: 'SET #crossings.#threshold = :marker',
        ConditionExpression: 'attribute_exists(#pk) AND attribute_not_exists(#crossings.#threshold)',
        ExpressionAttributeNames: { ...names('#crossings', '#pk'), '#threshold': threshold },
        // Unpublished until the writer's events are out (markPublished); budget-watch publishes what it finds left.
        ExpressionAttributeValues: { ':marker': { ...crossing, at: this.now().toISOString(), by, published: false } },
      });
      if (marked) crossings.push(crossing);
    }
    return crossings;
  }

  /**
   * Removes the crossing markers `by` recorded that are not published yet (a published one has been announced and
   * stays). A threshold the scope still stands past is marked again by its next reservation, accrual or settlement.
   */
  private async withdrawCrossings(crossings: readonly ThresholdCrossing[], by: string): Promise<void> {
    for (const crossing of crossings) {
      await this.conditionalUpdate({
        Key: budgetKeys.period(crossing.scope, crossing.period),
        UpdateExpression: 'REMOVE #crossings.#threshold',
        ConditionExpression: '#crossings.#threshold.#by = :by AND #crossings.#threshold.#published = :unpublished',
        ExpressionAttributeNames: {
          ...names('#crossings', '#by', '#published'),
          '#threshold': crossing.threshold,
        },
        ExpressionAttributeValues: { ':by': by, ':unpublished': false },
      });
    }
  }

  private async createScopeItem(scope: Scope, period: string, limitMicros: number): Promise<boolean> {
    const figures = newBudgetFigures(limitMicros, this.thresholds.block);
    return this.conditionalPut(
      {
        ...budgetKeys.period(scope.text, period),
        ...budgetKeys.teamIndex(scope.team, period, scope.text),
        scope: scope.text,
        team: scope.team,
        period,
        blockThreshold: this.thresholds.block,
        ...figures,
        jobs: {},
        crossings: {},
        exhaustions: {},
        createdAt: this.now().toISOString(),
      },
      'attribute_not_exists(#pk)',
    );
  }

  private async readScopeItem(scope: string, period: string, jobId?: string): Promise<ScopeItem | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: budgetKeys.period(scope, period),
      ConsistentRead: true,
      // Only the totals, markers and (when asked) one job's entry: the jobs map can be large.
      ProjectionExpression: jobId === undefined ? SUMMARY_PROJECTION : `${SUMMARY_PROJECTION}, #jobs.#job`,
      ExpressionAttributeNames:
        jobId === undefined ? names(...SUMMARY_NAMES) : { ...names(...SUMMARY_NAMES, '#jobs'), '#job': jobId },
    });
    return Item ? scopeItemSchema.parse(Item) : undefined;
  }

  private async readJob(jobId: string): Promise<JobRecord | undefined> {
    const { Item } = await this.client.get({
      TableName: this.tableName,
      Key: budgetKeys.job(jobId),
      ConsistentRead: true,
    });
    return Item ? jobRecordSchema.parse(Item) : undefined;
  }

  private async storedSettlement(jobId: string): Promise<SettleResult> {
    const record = await this.readJob(jobId);
    if (record?.settleResult) return record.settleResult;
    throw new ConcurrentUpdate(`job ${jobId} is being settled by another call; retry to read its settlement`);
  }

  private toUsage(item: ScopeItem): BudgetUsage {
    const fraction = fractionUsed(item);
    const crossed = (['warn', 'block'] as const).filter((t) => item.crossings?.[t] !== undefined);
    return {
      scope: item.scope,
      period: item.period,
      team: item.team,
      limitUsd: microsToUsd(item.limitMicros),
      blockLimitUsd: microsToUsd(item.blockLimitMicros),
      spentUsd: microsToUsd(item.spentMicros),
      reservedUsd: microsToUsd(item.reservedMicros),
      availableUsd: microsToUsd(item.availableMicros),
      percentUsed: fraction === null ? null : Math.round(fraction * 10000) / 100,
      warnThreshold: this.thresholds.warn,
      blockThreshold: item.blockThreshold,
      thresholdsCrossed: crossed,
      blocked: isBlocked(item),
    };
  }

  /** UpdateItem returning the new item, or undefined when its condition failed. */
  private async conditionalUpdate(input: {
    Key: Record<string, string>;
    UpdateExpression: string;
    ConditionExpression: string;
    ExpressionAttributeNames: Record<string, string>;
    ExpressionAttributeValues: Record<string, unknown>;
  }): Promise<Record<string, unknown> | undefined> {
    try {
      const { Attributes } = await this.client.update({ TableName: this.tableName, ReturnValues: 'ALL_NEW', ...input });
      return Attributes ?? {};
    } catch (error) {
      if (isConditionalCheckFailure(error)) return undefined;
      throw error;
    }
  }

  /** PutItem under a condition on the key; false when the condition failed. */
  private async conditionalPut(item: Record<string, unknown>, condition: string): Promise<boolean> {
    try {
      await this.client.put({
        TableName: this.tableName,
        Item: item,
        ConditionExpression: condition,
        ExpressionAttributeNames: names('#pk'),
      });
      return true;
    } catch (error) {
      if (isConditionalCheckFailure(error)) return false;
      throw error;
    }
  }
}

/** A scope's figures, in USD, as BudgetExceeded reports them for a request of `requestedMicros`. */
function exceededDetails(item: ScopeItem, requestedMicros: number): BudgetExceededDetails {
  return {
    scope: item.scope,
    period: item.period,
    limitUsd: microsToUsd(item.limitMicros),
    spentUsd: microsToUsd(item.spentMicros),
    reservedUsd: microsToUsd(item.reservedMicros),
    requestedUsd: microsToUsd(requestedMicros),
    availableUsd: microsToUsd(item.availableMicros),
    blockThreshold: item.blockThreshold,
  };
}
