/**
 * The budget watch's record of each tier's spot capacity: every tick it asks the tier's placement-score probe and
 * keeps the answer and since when it has held without a break, whether or not any job is there to see it. Placement
 * decisions read it for the age of spot's current state, which a job cannot know from its own attempts: a job
 * submitted into an outage that began hours before sees the outage as only as old as its own wait (ADR 0001).
 *
 * A reclaim of one of the tier's spot attempts is an observation too, and one the probe (every 5 minutes, a placement
 * score) misses: a spot stretch the probe saw unbroken may have been interrupted between two ticks. attempt-outcome
 * folds each reclaim in with {@link tierSpotAfterReclaim}, so a stretch counts only from the last reclaim the platform
 * saw.
 *
 * The record also learns how long the tier's spot stretches last (ADR 0001, fifth version). Each stretch whose start
 * the record saw is counted into a life table when it ends (or, when the watch stopped, as lasting at least until its
 * last tick), and every {@link TIER_SPOT_MODEL_REFIT_SECONDS} the watch refits the tier's model: the fleet model
 * blended with the table ({@link TIER_SPOT_MODEL_PRIOR_WEIGHT}). The deciders plan with it ({@link tierSpotModel}).
 * It changes only at a refit, so the processes deciding for the tier keep sharing one solved plan for a week.
 *
 * Pure: the writers fold observations in with these functions and store the result with a write conditional on the
 * record they read, so a replayed tick or reclaim changes nothing; deciders read it with {@link tierSpotAt}.
 */
import * as z from 'zod/mini';
import type { TierSpot } from './placement';
import { FLEET_SPOT_MODEL } from './spot-fleet-model';
import {
  blendSpotLengthModel,
  emptySpotLifeTables,
  roundedSpotLengthModel,
  type SpotLengthModel,
  type SpotLifeTable,
  type SpotLifeTables,
  type SpotStretch,
  withSpotStretches,
} from './spot-planner';
import { describeIssues } from './zod-issues';

/** Raised when a stored tier spot record does not match its schema. */
export class InvalidTierSpotRecord extends Error {
  override name = 'InvalidTierSpotRecord';
}

const epochMs = z.int().check(z.nonnegative());
const count = z.number().check(z.nonnegative());
const lifeTableSchema = z
  .strictObject({
    atRisk: z.readonly(z.array(count).check(z.minLength(1))),
    ended: z.readonly(z.array(count).check(z.minLength(1))),
  })
  .check(
    z.refine((t) => t.atRisk.length === t.ended.length, { message: 'atRisk and ended must have one entry per bin' }),
  );
const hazards = z.readonly(z.array(z.number().check(z.gte(0), z.lte(1))).check(z.minLength(1)));
/** How many of a model's or a table's last bins are wide (spot-planner.ts spotBinStarts). */
const wideBins = z.int().check(z.nonnegative());
/** A model's or a table's wide bins leave at least one bin of binSeconds. */
const fewerWideBins = (bins: number, wide: number | undefined): boolean => (wide ?? 0) < bins;

/**
 * How often the watch refits a tier's model from its life table. Measured on the full sweep (ADR 0001): a weekly
 * refit lost no setting against planning with the fleet model alone; a daily one lost four.
 */
export const TIER_SPOT_MODEL_REFIT_SECONDS = 7 * 24 * 3600;
/**
 * How many stretches of each age the fleet model counts for when blended with a tier's table (ADR 0001: 20 met both
 * of the sweep's conditions in more settings than 5).
 */
export const TIER_SPOT_MODEL_PRIOR_WEIGHT = 20;

/**
 * How far apart the reclaims of one interruption may fall, seconds. One capacity event takes back many instances of a
 * pool, their notices seconds apart, each folded in by its own attempt-outcome in whatever order they run. Within a
 * minute no attempt can have started on a new instance and been reclaimed again (its instance boots and pulls the
 * image first); nor, in the traces, can one job be reclaimed twice (two ticks of 32 s at the least).
 */
export const RECLAIM_WAVE_SECONDS = 60;

/** zod schema of the record (one item per tier in the jobs table). */
export const tierSpotRecordSchema = z
  .strictObject({
    /** The tier's id. */
    tier: z.string().check(z.minLength(1)),
    /** The probe's latest answer. */
    available: z.boolean(),
    /** The first tick (epoch ms) of the unbroken run of ticks that gave this answer. */
    sinceMs: epochMs,
    /**
     * True when the watch saw spot change to this state at `sinceMs`; false when the record began (or began again
     * after a gap in the ticks) then, so the state may be older than the record says.
     */
    sinceChange: z.boolean(),
    /** The latest tick (epoch ms) that gave this answer. */
    seenMs: epochMs,
    /**
     * The stretches counted so far (those whose start the record saw, once they ended or the watch lost sight of
     * them), per age bin of the fleet model (spot-planner.ts SpotLifeTables); absent on a record kept before the
     * tables, which starts one at its next change.
     */
    lifeTable: z.optional(
      z
        .strictObject({
          binSeconds: z.number().check(z.positive()),
          wideBins: z.optional(wideBins),
          available: lifeTableSchema,
          unavailable: lifeTableSchema,
        })
        .check(
          z.refine((t) => fewerWideBins(Math.min(t.available.atRisk.length, t.unavailable.atRisk.length), t.wideBins), {
            message: 'wideBins must be fewer than the bins',
            path: ['wideBins'],
          }),
        ),
    ),
    /**
     * The first reclaim (epoch ms) of the interruption that began the current stretch of "available", when a reclaim
     * folded in began it; absent otherwise. Reclaims of other attempts within RECLAIM_WAVE_SECONDS of it are the same
     * interruption, not stretches of their own.
     */
    waveMs: z.optional(epochMs),
    /** When (epoch ms) the watch last refitted the tier's model; absent on a record kept before the models (its next tick fits one). */
    modelFittedMs: z.optional(epochMs),
    /** The tier's model as last refitted; absent = the fleet model (nothing learnt yet). */
    model: z.optional(
      z
        .strictObject({
          binSeconds: z.number().check(z.positive()),
          wideBins: z.optional(wideBins),
          availableHazards: hazards,
          unavailableHazards: hazards,
        })
        .check(
          z.refine((m) => fewerWideBins(Math.min(m.availableHazards.length, m.unavailableHazards.length), m.wideBins), {
            message: 'wideBins must be fewer than the bins',
            path: ['wideBins'],
          }),
        ),
    ),
  })
  .check(z.refine((r) => r.sinceMs <= r.seenMs, { message: 'sinceMs must not be after seenMs', path: ['sinceMs'] }));

/** A tier's spot record as stored. */
export type TierSpotRecord = z.output<typeof tierSpotRecordSchema>;

/** Parses a stored record, naming every offending field. */
export function parseTierSpotRecord(raw: unknown): TierSpotRecord {
  const parsed = tierSpotRecordSchema.safeParse(raw);
  if (!parsed.success)
    throw new InvalidTierSpotRecord(`invalid tier spot record: ${describeIssues(parsed.error.issues)}`);
  return parsed.data;
}

/**
 * Longest time between two ticks for their answers to count as one unbroken run: two check intervals and a minute,
 * so one late or lost scheduled tick does not break it, and a watch that stopped does not vouch for the time between.
 */
export function tierSpotMaxGapMs(checkIntervalSeconds: number): number {
  return (2 * checkIntervalSeconds + 60) * 1000;
}

/** The fleet model's bins: the tables a record keeps, so that a refit can blend them with it. */
const freshLifeTables = (): SpotLifeTables =>
  emptySpotLifeTables(
    FLEET_SPOT_MODEL.binSeconds,
    FLEET_SPOT_MODEL.availableHazards.length,
    FLEET_SPOT_MODEL.wideBins ?? 0,
  );

/**
 * The record's tables, in the fleet model's bins. A table in other bins starts afresh, except one kept before the wide
 * bins (the same 10-minute bins, the last of them pooled from its start on): its bins before the pooled one were
 * counted exactly as they are now and are kept; the pooled one cannot be split into the bins that now cover its ages,
 * so those start afresh (a bin's hazard is estimated from its own counts, so the others stay unbiased).
 */
function lifeTablesOf(record: TierSpotRecord | undefined): SpotLifeTables {
  const table = record?.lifeTable;
  const fresh = freshLifeTables();
  if (table === undefined || table.binSeconds !== fresh.binSeconds) return fresh;
  const bins = fresh.available.atRisk.length;
  const sameBins = (t: SpotLifeTables): boolean =>
    (t.wideBins ?? 0) === (fresh.wideBins ?? 0) &&
    t.available.atRisk.length === bins &&
    t.unavailable.atRisk.length === bins;
  if (sameBins(table)) return table;
  const fineBins = bins - (fresh.wideBins ?? 0);
  const pooledBefore = (table.wideBins ?? 0) === 0 && table.available.atRisk.length === fineBins;
  if (!pooledBefore || table.unavailable.atRisk.length !== fineBins) return fresh;
  const kept = ({ atRisk, ended }: SpotLifeTable): SpotLifeTable => {
    const exact = (counts: readonly number[]) => [
      ...counts.slice(0, fineBins - 1),
      ...new Array(bins - fineBins + 1).fill(0),
    ];
    return { atRisk: exact(atRisk), ended: exact(ended) };
  };
  return { ...fresh, available: kept(table.available), unavailable: kept(table.unavailable) };
}

/**
 * The record's current stretch as it stands at `untilMs`, when the record saw it begin: ended (a change was seen then)
 * or only known to have lasted so long; undefined when its start was not seen or it has no length yet.
 */
function currentStretch(record: TierSpotRecord, untilMs: number, ended: boolean): SpotStretch | undefined {
  if (!record.sinceChange || untilMs <= record.sinceMs) return undefined;
  return { available: record.available, seconds: (untilMs - record.sinceMs) / 1000, ended };
}

/** The record with the current stretch (if its start was seen) counted into its tables as `ended` at `untilMs`. */
function withStretchCounted(record: TierSpotRecord | undefined, untilMs: number, ended: boolean): SpotLifeTables {
  const tables = lifeTablesOf(record);
  const stretch = record && currentStretch(record, untilMs, ended);
  return stretch ? withSpotStretches(tables, [stretch]) : tables;
}

/**
 * The tier's model refitted at `nowMs` from the record's tables and its open stretch (alive so far): the fleet model
 * blended with them, rounded as stored; undefined while nothing has been counted (the fleet model stands). `prior` is
 * the fleet model: the deployed FLEET_SPOT_MODEL, or in the benchmark one fitted without the trace it replays.
 */
export function refittedTierSpotModel(
  record: TierSpotRecord,
  nowMs: number,
  prior: SpotLengthModel = FLEET_SPOT_MODEL,
): SpotLengthModel | undefined {
  const tables = withStretchCounted(record, nowMs, false);
  const seen = [tables.available, tables.unavailable].some((t) => t.atRisk.some((n) => n > 0));
  return seen ? roundedSpotLengthModel(blendSpotLengthModel(prior, tables, TIER_SPOT_MODEL_PRIOR_WEIGHT)) : undefined;
}

/**
 * The record with its model refitted when none has been fitted yet or the last fit is a refit interval old: at the
 * watch's tick, or at a reclaim folded in after the latest tick, whichever moves the record first.
 */
function refitIfDue(record: TierSpotRecord, nowMs: number, prior: SpotLengthModel | undefined): TierSpotRecord {
  if (record.modelFittedMs !== undefined && nowMs - record.modelFittedMs < TIER_SPOT_MODEL_REFIT_SECONDS * 1000)
    return record;
  const { model: _, ...rest } = record;
  const model = refittedTierSpotModel(record, nowMs, prior);
  return { ...rest, modelFittedMs: nowMs, ...(model ? { model } : {}) };
}

/**
 * The record after the probe answered `available` at the tick `nowMs`, or undefined when there is nothing to write
 * (the stored record is from this tick or a later one: a replay, or a slower run that lost the race).
 * - same answer as the record, within the gap → the run goes on (`seenMs` moves);
 * - another answer → a new run that began at this tick, and the watch saw it change; the run that ended is counted
 *   into the life table when its start was seen;
 * - no record, or the last tick was too long ago → a new run whose start the watch did not see; the run before it is
 *   counted as lasting at least until its last tick.
 * The tier's model is refitted when due ({@link TIER_SPOT_MODEL_REFIT_SECONDS}), blended with `prior` (by default the
 * deployed fleet model; see {@link refittedTierSpotModel}).
 */
export function nextTierSpot(
  record: TierSpotRecord | undefined,
  tier: string,
  available: boolean,
  nowMs: number,
  checkIntervalSeconds: number,
  prior?: SpotLengthModel,
): TierSpotRecord | undefined {
  if (record !== undefined && nowMs <= record.seenMs) return undefined;
  const unbroken = record !== undefined && nowMs - record.seenMs <= tierSpotMaxGapMs(checkIntervalSeconds);
  if (unbroken && record.available === available) return refitIfDue({ ...record, seenMs: nowMs }, nowMs, prior);
  const lifeTable = withStretchCounted(record, unbroken ? nowMs : (record?.seenMs ?? nowMs), unbroken);
  // A new stretch, begun by this tick: no reclaim began it.
  const { waveMs: _wave, ...kept } = record ?? {};
  return refitIfDue(
    {
      ...kept,
      lifeTable,
      tier,
      available,
      sinceMs: nowMs,
      sinceChange: unbroken,
      seenMs: nowMs,
    },
    nowMs,
    prior,
  );
}

/**
 * The record after a reclaim of one of the tier's spot attempts at `atMs`, or undefined when it changes nothing:
 * - after the record's latest tick → an outage that began then, and the platform saw it begin;
 * - within the record's current stretch of "available" → the stretch was broken then (it is counted into the life
 *   table as ended, when its start was seen): spot has been back since; unless a reclaim of the same interruption
 *   began that stretch (within RECLAIM_WAVE_SECONDS of the first): then nothing is counted, and spot is back since
 *   this reclaim, so that one interruption over several jobs counts once, whatever order their folds run in;
 * - during an outage already recorded, or before the current run began → nothing new (so a replay changes nothing).
 */
export function tierSpotAfterReclaim(
  record: TierSpotRecord | undefined,
  tier: string,
  atMs: number,
  checkIntervalSeconds: number,
  prior?: SpotLengthModel,
): TierSpotRecord | undefined {
  if (record === undefined || atMs > record.seenMs) {
    const next = nextTierSpot(record, tier, false, atMs, checkIntervalSeconds, prior);
    return next && next.sinceMs === atMs ? { ...next, sinceChange: true } : next;
  }
  if (!record.available || atMs < record.sinceMs || (atMs === record.sinceMs && record.sinceChange)) return undefined;
  if (record.waveMs !== undefined && atMs - record.waveMs <= RECLAIM_WAVE_SECONDS * 1000)
    return { ...record, sinceMs: atMs, sinceChange: true };
  return {
    ...record,
    lifeTable: withStretchCounted(record, atMs, true),
    sinceMs: atMs,
    sinceChange: true,
    waveMs: atMs,
  };
}

/**
 * The spot model the tier's deadline jobs are planned with: the record's, refitted by the watch, or undefined for the
 * fleet model (no record, or nothing learnt yet). A stale record's model still stands: it is a long-run figure.
 */
export function tierSpotModel(record: TierSpotRecord | undefined): SpotLengthModel | undefined {
  return record?.model;
}

/**
 * What the record says at `nowMs` for a placement decision: spot's state and for how long it has held; undefined when
 * there is no record or the watch has not confirmed it within {@link tierSpotMaxGapMs} (it may have changed since).
 */
export function tierSpotAt(
  record: TierSpotRecord | undefined,
  nowMs: number,
  checkIntervalSeconds: number,
): TierSpot | undefined {
  if (record === undefined || nowMs - record.seenMs > tierSpotMaxGapMs(checkIntervalSeconds)) return undefined;
  return {
    available: record.available,
    forSeconds: Math.max(0, nowMs - record.sinceMs) / 1000,
    sinceChange: record.sinceChange,
  };
}

/** What GET /tiers shows of a tier's spot record. */
export interface TierSpotView {
  /** Spot capacity now, as the watch last confirmed it; 'unknown' with no record or one gone stale. */
  state: 'available' | 'unavailable' | 'unknown';
  /** Since when the state has held (ISO 8601); absent when unknown. */
  since?: string;
  /** False when the watch did not see the state begin at `since` (it began the record then): it may be older. */
  sinceSeen?: boolean;
  /** The watch's latest tick that confirmed the record (ISO 8601); absent when there is no record. */
  checkedAt?: string;
  /** The spot model the tier's deadline jobs are planned with (a long-run figure: shown stale or not); absent with no record. */
  model?: TierSpotModelView;
}

/** What GET /tiers shows of the model a tier's record has learnt. */
export interface TierSpotModelView {
  /** 'tier': refitted from the tier's own stretches, blended with the fleet model; 'fleet': nothing learnt yet. */
  source: 'tier' | 'fleet';
  /** When the watch last refitted it (ISO 8601); absent on a record kept before the models. */
  fittedAt?: string;
  /** Stretches of each kind counted into the life table so far. */
  stretchesCounted: { available: number; unavailable: number };
}

/** The model part of the view: every counted stretch was alive at the start of the first bin. */
function tierSpotModelView(record: TierSpotRecord): TierSpotModelView {
  const counted = (table: { atRisk: readonly number[] } | undefined): number => Math.round(table?.atRisk[0] ?? 0);
  return {
    source: record.model ? 'tier' : 'fleet',
    ...(record.modelFittedMs === undefined ? {} : { fittedAt: new Date(record.modelFittedMs).toISOString() }),
    stretchesCounted: {
      available: counted(record.lifeTable?.available),
      unavailable: counted(record.lifeTable?.unavailable),
    },
  };
}

/**
 * The record as GET /tiers shows it at `nowMs`: fresh as {@link tierSpotAt} reads it, or 'unknown'; with the model it
 * has learnt either way.
 */
export function tierSpotView(
  record: TierSpotRecord | undefined,
  nowMs: number,
  checkIntervalSeconds: number,
): TierSpotView {
  if (record === undefined) return { state: 'unknown' };
  const checkedAt = new Date(record.seenMs).toISOString();
  const model = tierSpotModelView(record);
  if (tierSpotAt(record, nowMs, checkIntervalSeconds) === undefined) return { state: 'unknown', checkedAt, model };
  return {
    state: record.available ? 'available' : 'unavailable',
    since: new Date(record.sinceMs).toISOString(),
    sinceSeen: record.sinceChange,
    checkedAt,
    model,
  };
}
