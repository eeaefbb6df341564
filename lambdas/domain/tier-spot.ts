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
 * Pure: the writers fold observations in with these functions and store the result with a write conditional on the
 * record they read, so a replayed tick or reclaim changes nothing; deciders read it with {@link tierSpotAt}.
 */
import * as z from 'zod';
import type { TierSpot } from './placement';
import { describeIssues } from './zod-issues';

/** Raised when a stored tier spot record does not match its schema. */
export class InvalidTierSpotRecord extends Error {
  override name = 'InvalidTierSpotRecord';
}

const epochMs = z.number().int().nonnegative();

/** zod schema of the record (one item per tier in the jobs table). */
export const tierSpotRecordSchema = z
  .strictObject({
    /** The tier's id. */
    tier: z.string().min(1),
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
  })
  .refine((r) => r.sinceMs <= r.seenMs, { message: 'sinceMs must not be after seenMs', path: ['sinceMs'] });

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

/**
 * The record after the probe answered `available` at the tick `nowMs`, or undefined when there is nothing to write
 * (the stored record is from this tick or a later one: a replay, or a slower run that lost the race).
 * - same answer as the record, within the gap → the run goes on (`seenMs` moves);
 * - another answer → a new run that began at this tick, and the watch saw it change;
 * - no record, or the last tick was too long ago → a new run whose start the watch did not see.
 */
export function nextTierSpot(
  record: TierSpotRecord | undefined,
  tier: string,
  available: boolean,
  nowMs: number,
  checkIntervalSeconds: number,
): TierSpotRecord | undefined {
  if (record !== undefined && nowMs <= record.seenMs) return undefined;
  const unbroken = record !== undefined && nowMs - record.seenMs <= tierSpotMaxGapMs(checkIntervalSeconds);
  if (unbroken && record.available === available) return { ...record, seenMs: nowMs };
  return { tier, available, sinceMs: nowMs, sinceChange: unbroken, seenMs: nowMs };
}

/**
 * The record after a reclaim of one of the tier's spot attempts at `atMs`, or undefined when it changes nothing:
 * - after the record's latest tick → an outage that began then, and the platform saw it begin;
 * - within the record's current stretch of "available" → the stretch was broken then: spot has been back since;
 * - during an outage already recorded, or before the current run began → nothing new (so a replay changes nothing).
 */
export function tierSpotAfterReclaim(
  record: TierSpotRecord | undefined,
  tier: string,
  atMs: number,
  checkIntervalSeconds: number,
): TierSpotRecord | undefined {
  if (record === undefined || atMs > record.seenMs) {
    const next = nextTierSpot(record, tier, false, atMs, checkIntervalSeconds);
    return next && next.sinceMs === atMs ? { ...next, sinceChange: true } : next;
  }
  if (!record.available || atMs < record.sinceMs || (atMs === record.sinceMs && record.sinceChange)) return undefined;
  return { ...record, sinceMs: atMs, sinceChange: true };
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
}

/** The record as GET /tiers shows it at `nowMs`: fresh as {@link tierSpotAt} reads it, or 'unknown'. */
export function tierSpotView(
  record: TierSpotRecord | undefined,
  nowMs: number,
  checkIntervalSeconds: number,
): TierSpotView {
  if (record === undefined) return { state: 'unknown' };
  const checkedAt = new Date(record.seenMs).toISOString();
  if (tierSpotAt(record, nowMs, checkIntervalSeconds) === undefined) return { state: 'unknown', checkedAt };
  return {
    state: record.available ? 'available' : 'unavailable',
    since: new Date(record.sinceMs).toISOString(),
    sinceSeen: record.sinceChange,
    checkedAt,
  };
}
