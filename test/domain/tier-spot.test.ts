// The budget watch's per-tier spot record (domain/tier-spot.ts): how each probe answer moves it forward, and what a
// decision reads from it. Ticks are 300 s apart; the gap that breaks a run is 2 × 300 + 60 = 660 s.
import { describe, expect, it } from 'vitest';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import {
  InvalidTierSpotRecord,
  nextTierSpot,
  parseTierSpotRecord,
  refittedTierSpotModel,
  TIER_SPOT_MODEL_PRIOR_WEIGHT,
  TIER_SPOT_MODEL_REFIT_SECONDS,
  type TierSpotRecord,
  tierSpotAfterReclaim,
  tierSpotAt,
  tierSpotMaxGapMs,
  tierSpotModel,
  tierSpotView,
} from '../../lambdas/domain/tier-spot';

const T0 = 1_795_183_200_000;
const MIN = 60_000;
const record = (fields: Partial<TierSpotRecord> = {}): TierSpotRecord => ({
  tier: 'gpu-small',
  available: true,
  sinceMs: T0,
  sinceChange: true,
  seenMs: T0 + 30 * MIN,
  ...fields,
});
/** A record's spot state, without what it has learnt (life table and model, covered on their own below). */
const stateOf = (r: TierSpotRecord | undefined) =>
  r && { tier: r.tier, available: r.available, sinceMs: r.sinceMs, sinceChange: r.sinceChange, seenMs: r.seenMs };

describe('tierSpotMaxGapMs', () => {
  it('lets one lost tick pass but not two: two intervals and a minute', () => {
    expect(tierSpotMaxGapMs(300)).toBe(660_000);
  });
});

describe('nextTierSpot', () => {
  const next = (stored: TierSpotRecord | undefined, available: boolean, nowMs: number) =>
    nextTierSpot(stored, 'gpu-small', available, nowMs, 300);

  it.each([
    {
      what: 'a first answer begins a record whose start the watch did not see',
      stored: undefined,
      available: false,
      nowMs: T0,
      expected: record({ available: false, sinceMs: T0, sinceChange: false, seenMs: T0 }),
    },
    {
      what: 'the same answer one tick later extends the run',
      stored: record(),
      available: true,
      nowMs: T0 + 35 * MIN,
      expected: record({ seenMs: T0 + 35 * MIN }),
    },
    {
      what: 'the same answer after one lost tick (600 s) still extends it',
      stored: record(),
      available: true,
      nowMs: T0 + 40 * MIN,
      expected: record({ seenMs: T0 + 40 * MIN }),
    },
    {
      what: 'another answer begins a run the watch saw begin',
      stored: record(),
      available: false,
      nowMs: T0 + 35 * MIN,
      expected: record({ available: false, sinceMs: T0 + 35 * MIN, sinceChange: true, seenMs: T0 + 35 * MIN }),
    },
    {
      what: 'the same answer after 661 s begins a new run: the watch cannot vouch for the time between',
      stored: record(),
      available: true,
      nowMs: T0 + 30 * MIN + 661_000,
      expected: record({ sinceMs: T0 + 30 * MIN + 661_000, sinceChange: false, seenMs: T0 + 30 * MIN + 661_000 }),
    },
    {
      what: 'another answer after a gap began at an unseen time',
      stored: record(),
      available: false,
      nowMs: T0 + 60 * MIN,
      expected: record({ available: false, sinceMs: T0 + 60 * MIN, sinceChange: false, seenMs: T0 + 60 * MIN }),
    },
  ])('$what', ({ stored, available, nowMs, expected }) => {
    expect(stateOf(next(stored, available, nowMs))).toEqual(expected);
  });

  it.each([
    { what: 'a replay of the stored tick', nowMs: T0 + 30 * MIN },
    { what: 'an older tick that lost the race', nowMs: T0 + 25 * MIN },
  ])('writes nothing for $what, whatever the answer', ({ nowMs }) => {
    expect(next(record(), true, nowMs)).toBeUndefined();
    expect(next(record(), false, nowMs)).toBeUndefined();
  });
});

describe('tierSpotAfterReclaim', () => {
  // The stored record: available since T0 (seen begin), last confirmed at T0 + 30 min.
  const foldReclaim = (stored: TierSpotRecord | undefined, atMs: number) =>
    tierSpotAfterReclaim(stored, 'gpu-small', atMs, 300);

  it.each([
    {
      what: 'a reclaim after the latest tick begins an outage the platform saw begin',
      stored: record(),
      atMs: T0 + 32 * MIN,
      expected: record({ available: false, sinceMs: T0 + 32 * MIN, sinceChange: true, seenMs: T0 + 32 * MIN }),
    },
    {
      what: 'so does one long after the latest tick, though the ticks between are unknown',
      stored: record(),
      atMs: T0 + 90 * MIN,
      expected: record({ available: false, sinceMs: T0 + 90 * MIN, sinceChange: true, seenMs: T0 + 90 * MIN }),
    },
    {
      what: 'a first reclaim begins the record with a seen outage',
      stored: undefined,
      atMs: T0,
      expected: record({ available: false, sinceMs: T0, sinceChange: true, seenMs: T0 }),
    },
    {
      what: 'a reclaim the probe did not see breaks the stretch: spot has been back since',
      stored: record(),
      atMs: T0 + 20 * MIN,
      expected: record({ sinceMs: T0 + 20 * MIN }),
    },
    {
      what: 'a reclaim at the start of a stretch the record did not see begin marks that start as seen',
      stored: record({ sinceChange: false }),
      atMs: T0,
      expected: record(),
    },
  ])('$what', ({ stored, atMs, expected }) => {
    expect(stateOf(foldReclaim(stored, atMs))).toEqual(expected);
  });

  it.each([
    { what: 'during a recorded outage', stored: record({ available: false }), atMs: T0 + 20 * MIN },
    { what: 'before the current stretch began', stored: record(), atMs: T0 - MIN },
    { what: 'replayed at the start it already set', stored: record({ sinceMs: T0 + 20 * MIN }), atMs: T0 + 20 * MIN },
  ])('changes nothing for a reclaim $what', ({ stored, atMs }) => {
    expect(foldReclaim(stored, atMs)).toBeUndefined();
  });
});

describe('one interruption that reclaims several of the tier’s attempts', () => {
  const BINS = FLEET_SPOT_MODEL.availableHazards.length;
  const empty = () => ({ atRisk: new Array(BINS).fill(0), ended: new Array(BINS).fill(0) });
  // Spot seen to begin at T0 and confirmed at T0 + 30 min, with a life table to count in.
  const stored = record({ lifeTable: { binSeconds: 600, wideBins: 5, available: empty(), unavailable: empty() } });
  const foldAll = (reclaims: readonly number[], from: TierSpotRecord = stored): TierSpotRecord =>
    reclaims.reduce((r, atMs) => tierSpotAfterReclaim(r, 'gpu-small', atMs, 300) ?? r, from);
  const endedStretches = (r: TierSpotRecord) => (r.lifeTable?.available.ended ?? []).reduce((a, b) => a + b, 0);
  // Three attempts' notices 4 s apart, each folded in by its own attempt-outcome after the watch's next tick.
  const WAVE = [T0 + 26 * MIN, T0 + 26 * MIN + 4_000, T0 + 26 * MIN + 8_000];

  it('counts one ended stretch, not one per attempt, in whatever order the folds run', () => {
    const ascending = foldAll(WAVE);
    const descending = foldAll([...WAVE].reverse());
    expect(endedStretches(ascending)).toBe(1);
    expect(endedStretches(descending)).toBe(1);
    // Spot is back since the wave's last reclaim either way.
    expect(stateOf(ascending)).toEqual(stateOf(descending));
    expect(ascending.sinceMs).toBe(T0 + 26 * MIN + 8_000);
    // And the refitted model does not depend on the order.
    const at = T0 + TIER_SPOT_MODEL_REFIT_SECONDS * 1000;
    expect(refittedTierSpotModel(ascending, at)).toEqual(refittedTierSpotModel(descending, at));
  });

  it('counts a reclaim more than a minute after the wave began as a stretch of its own', () => {
    const later = foldAll([T0 + 26 * MIN, T0 + 26 * MIN + 61_000]);
    expect(endedStretches(later)).toBe(2);
  });

  it('changes nothing for a replayed reclaim of the wave', () => {
    const folded = foldAll(WAVE);
    for (const atMs of WAVE) expect(tierSpotAfterReclaim(folded, 'gpu-small', atMs, 300)).toBeUndefined();
  });

  it('forgets the wave once a tick begins a stretch of its own', () => {
    const folded = foldAll([T0 + 26 * MIN]);
    expect(folded.waveMs).toBe(T0 + 26 * MIN);
    const outage = nextTierSpot(folded, 'gpu-small', false, T0 + 35 * MIN, 300);
    expect(outage?.waveMs).toBeUndefined();
    const sameStretch = nextTierSpot(folded, 'gpu-small', true, T0 + 35 * MIN, 300);
    expect(sameStretch?.waveMs).toBe(T0 + 26 * MIN);
  });
});

describe('what the record learns of the tier’s stretches', () => {
  const BINS = FLEET_SPOT_MODEL.availableHazards.length;
  const WEEK_MS = TIER_SPOT_MODEL_REFIT_SECONDS * 1000;
  /** A table of BINS zeros with the given entries set. */
  const bins = (entries: Record<number, number> = {}): number[] =>
    Array.from({ length: BINS }, (_, k) => entries[k] ?? 0);
  const next = (stored: TierSpotRecord | undefined, available: boolean, nowMs: number) =>
    nextTierSpot(stored, 'gpu-small', available, nowMs, 300);
  /** A record fitted at T0, so no refit is due for a week. */
  const fitted = (fields: Partial<TierSpotRecord> = {}) => record({ modelFittedMs: T0, ...fields });

  it('counts a stretch it saw begin when the watch sees it end, bin by bin of the fleet model', () => {
    // Available from T0 to T0 + 35 min (2 100 s): alive at the start of bins 0–3 (10 min each), ended in bin 3.
    const after = next(fitted(), false, T0 + 35 * MIN);
    expect(after?.lifeTable).toEqual({
      binSeconds: 600,
      wideBins: 5,
      available: { atRisk: bins({ 0: 1, 1: 1, 2: 1, 3: 1 }), ended: bins({ 3: 1 }) },
      unavailable: { atRisk: bins(), ended: bins() },
    });
    // The outage that began then is counted when it ends in turn (20 min: bins 0–1, ended in 1).
    let later = after;
    for (const minutes of [40, 45, 50]) later = next(later, false, T0 + minutes * MIN);
    later = next(later, true, T0 + 55 * MIN);
    expect(later?.lifeTable?.unavailable).toEqual({ atRisk: bins({ 0: 1, 1: 1 }), ended: bins({ 1: 1 }) });
    expect(later?.lifeTable?.available).toEqual(after?.lifeTable?.available);
  });

  it('counts a stretch older than the fine bins into the wide bins by exposure', () => {
    // 5 h: one at risk at the start of each 10-minute bin 0–23 (4 h), then 1 h = 6 ten-minute units of exposure in
    // the first wide bin (4–8 h), where it ended.
    const after = next(fitted({ seenMs: T0 + 295 * MIN }), false, T0 + 300 * MIN);
    const fine = Object.fromEntries(Array.from({ length: 24 }, (_, k) => [k, 1]));
    expect(after?.lifeTable?.available).toEqual({ atRisk: bins({ ...fine, 24: 6 }), ended: bins({ 24: 1 }) });
    // 3 days: 4 h in the fine bins, the whole of [4, 8), [8, 16), [16, 32) and [32, 64) h, then 8 h of the open bin
    // (64 h on), where it ended.
    const long = next(fitted({ seenMs: T0 + 72 * 60 * MIN - 5 * MIN }), false, T0 + 72 * 60 * MIN);
    expect(long?.lifeTable?.available).toEqual({
      atRisk: bins({ ...fine, 24: 24, 25: 48, 26: 96, 27: 192, 28: 48 }),
      ended: bins({ 28: 1 }),
    });
  });

  it('does not count a stretch whose start it did not see', () => {
    const after = next(fitted({ sinceChange: false }), false, T0 + 35 * MIN);
    expect(after?.lifeTable?.available).toEqual({ atRisk: bins(), ended: bins() });
  });

  it('counts a stretch the watch lost sight of as lasting at least until its last tick, not as ended', () => {
    // Seen from T0 to T0 + 30 min, then no tick for 661 s.
    const after = next(fitted(), true, T0 + 30 * MIN + 661_000);
    expect(after?.lifeTable?.available).toEqual({ atRisk: bins({ 0: 1, 1: 1, 2: 1 }), ended: bins() });
  });

  it('counts the stretch a reclaim broke as ended, once however often the reclaim is replayed', () => {
    const after = tierSpotAfterReclaim(fitted(), 'gpu-small', T0 + 20 * MIN, 300);
    expect(after?.lifeTable?.available).toEqual({ atRisk: bins({ 0: 1, 1: 1 }), ended: bins({ 1: 1 }) });
    expect(tierSpotAfterReclaim(after, 'gpu-small', T0 + 20 * MIN, 300)).toBeUndefined();
    // A reclaim after the latest tick ends the stretch there.
    const late = tierSpotAfterReclaim(fitted(), 'gpu-small', T0 + 32 * MIN, 300);
    expect(late?.lifeTable?.available.ended).toEqual(bins({ 3: 1 }));
  });

  it('starts a table for a record kept before the tables, a fresh one for a table of other bins, and migrates one kept before the wide bins', () => {
    expect(next(record(), false, T0 + 35 * MIN)?.lifeTable?.available.ended).toEqual(bins({ 3: 1 }));
    const otherBins = {
      binSeconds: 300,
      available: { atRisk: [5], ended: [5] },
      unavailable: { atRisk: [5], ended: [5] },
    };
    const after = next(fitted({ lifeTable: otherBins }), false, T0 + 35 * MIN);
    expect(after?.lifeTable?.binSeconds).toBe(600);
    expect(after?.lifeTable?.available.ended).toEqual(bins({ 3: 1 }));
    expect(after?.lifeTable?.unavailable.atRisk).toEqual(bins());
    // A table kept before the wide bins (24 bins of 10 minutes, the last pooled from 230 minutes on) keeps bins 0–22,
    // counted as they are now; the pooled one cannot be split, so the bins from 230 minutes on start afresh.
    const counts = (first: number) => Array.from({ length: 24 }, (_, k) => first + k);
    const beforeWideBins = {
      binSeconds: 600,
      available: { atRisk: counts(100), ended: counts(10) },
      unavailable: { atRisk: counts(200), ended: counts(20) },
    };
    const kept = (first: number) => bins(Object.fromEntries(Array.from({ length: 23 }, (_, k) => [k, first + k])));
    const migrated = next(fitted({ lifeTable: beforeWideBins }), false, T0 + 35 * MIN);
    expect(migrated?.lifeTable).toEqual({
      binSeconds: 600,
      wideBins: 5,
      // The available stretch that just ended (35 minutes: bins 0–3) is counted on top.
      available: {
        atRisk: kept(100).map((n, k) => n + (k <= 3 ? 1 : 0)),
        ended: kept(10).map((n, k) => n + (k === 3 ? 1 : 0)),
      },
      unavailable: { atRisk: kept(200), ended: kept(20) },
    });
  });

  it('fits the tier’s model at its first tick (nothing learnt: the fleet model) and again a week after each fit', () => {
    const first = next(undefined, true, T0);
    expect(first?.modelFittedMs).toBe(T0);
    expect(tierSpotModel(first)).toBeUndefined();

    const table = {
      binSeconds: 600,
      wideBins: 5,
      available: { atRisk: bins({ 0: 10, 1: 7 }), ended: bins({ 0: 3 }) },
      unavailable: { atRisk: bins(), ended: bins() },
    };
    const stored = record({ sinceChange: false, lifeTable: table, modelFittedMs: T0, seenMs: T0 + WEEK_MS - 5 * MIN });
    expect(next(stored, true, T0 + WEEK_MS - MIN)?.modelFittedMs).toBe(T0);
    const refitted = next(stored, true, T0 + WEEK_MS);
    expect(refitted?.modelFittedMs).toBe(T0 + WEEK_MS);
    // (ended + 20 × fleet) ÷ (at risk + 20), to 4 decimals; a bin the tier has not seen keeps the fleet's hazard.
    const fleet = FLEET_SPOT_MODEL.availableHazards;
    const w = TIER_SPOT_MODEL_PRIOR_WEIGHT;
    expect(w).toBe(20);
    const model = tierSpotModel(refitted);
    expect(model?.availableHazards[0]).toBe(Number(((3 + w * (fleet[0] as number)) / (10 + w)).toFixed(4)));
    expect(model?.availableHazards[1]).toBe(Number(((w * (fleet[1] as number)) / (7 + w)).toFixed(4)));
    expect(model?.availableHazards[2]).toBe(fleet[2]);
    expect(model?.unavailableHazards).toEqual(FLEET_SPOT_MODEL.unavailableHazards);
    // The model stands until the next refit, whatever the record sees meanwhile.
    expect(tierSpotModel(next(refitted, false, T0 + WEEK_MS + 5 * MIN))).toBe(model);
  });

  it('counts the open stretch as alive at a refit, without storing it in the table', () => {
    // Nothing counted yet; spot available since T0 (seen begin), 15 min at the refit: alive at the start of bins 0, 1.
    const stored = record({ modelFittedMs: T0 - WEEK_MS, seenMs: T0 + 10 * MIN });
    const model = refittedTierSpotModel(stored, T0 + 15 * MIN);
    const fleet = FLEET_SPOT_MODEL.availableHazards;
    expect(model?.availableHazards.slice(0, 3)).toEqual([
      Number(((20 * (fleet[0] as number)) / 21).toFixed(4)),
      Number(((20 * (fleet[1] as number)) / 21).toFixed(4)),
      fleet[2],
    ]);
    const ticked = next(stored, true, T0 + 15 * MIN);
    expect(ticked?.model).toEqual(model);
    expect(ticked?.lifeTable).toBe(stored.lifeTable);
    // A stretch whose start was not seen tells nothing: the fleet model stands.
    expect(refittedTierSpotModel({ ...stored, sinceChange: false }, T0 + 15 * MIN)).toBeUndefined();
  });
});

describe('tierSpotAt', () => {
  it.each([
    {
      what: 'a record confirmed at this tick says how long the state has held',
      stored: record(),
      nowMs: T0 + 30 * MIN,
      expected: { available: true, forSeconds: 1800, sinceChange: true },
    },
    {
      what: 'between ticks, the age keeps growing',
      stored: record({ available: false, sinceChange: false }),
      nowMs: T0 + 32 * MIN,
      expected: { available: false, forSeconds: 1920, sinceChange: false },
    },
    {
      what: 'a record confirmed 660 s ago is still fresh',
      stored: record(),
      nowMs: T0 + 30 * MIN + 660_000,
      expected: { available: true, forSeconds: 2460, sinceChange: true },
    },
    {
      what: 'a decision timed before the run began reads an age of 0',
      stored: record({ sinceMs: T0 + 30 * MIN }),
      nowMs: T0 + 29 * MIN,
      expected: { available: true, forSeconds: 0, sinceChange: true },
    },
    { what: 'no record says nothing', stored: undefined, nowMs: T0, expected: undefined },
    {
      what: 'a record not confirmed for 661 s says nothing: spot may have changed since',
      stored: record(),
      nowMs: T0 + 30 * MIN + 661_000,
      expected: undefined,
    },
  ])('$what', ({ stored, nowMs, expected }) => {
    expect(tierSpotAt(stored, nowMs, 300)).toEqual(expected);
  });
});

describe('tierSpotView', () => {
  // T0 is 2026-11-20T14:00:00.000Z; the record's latest tick is 30 minutes later.
  const availableSinceT0 = {
    state: 'available',
    since: '2026-11-20T14:00:00.000Z',
    sinceSeen: true,
    checkedAt: '2026-11-20T14:30:00.000Z',
  };
  const fleet = { source: 'fleet', stretchesCounted: { available: 0, unavailable: 0 } };
  it.each([
    {
      what: 'a fresh record shows its state, since when, and whether the watch saw it begin',
      stored: record(),
      nowMs: T0 + 31 * MIN,
      expected: { ...availableSinceT0, model: fleet },
    },
    {
      what: 'a record that has learnt the tier’s model says when it was fitted and from how many stretches',
      stored: record({
        modelFittedMs: T0 - 60 * MIN,
        lifeTable: {
          binSeconds: 600,
          available: { atRisk: [7, 3], ended: [4, 3] },
          unavailable: { atRisk: [5, 1], ended: [4, 1] },
        },
        model: { binSeconds: 600, availableHazards: [0.5, 0.9], unavailableHazards: [0.8, 0.9] },
      }),
      nowMs: T0 + 31 * MIN,
      expected: {
        ...availableSinceT0,
        model: {
          source: 'tier',
          fittedAt: '2026-11-20T13:00:00.000Z',
          stretchesCounted: { available: 7, unavailable: 5 },
        },
      },
    },
    {
      what: 'an outage whose start the watch did not see says so',
      stored: record({ available: false, sinceChange: false }),
      nowMs: T0 + 30 * MIN,
      expected: {
        state: 'unavailable',
        since: '2026-11-20T14:00:00.000Z',
        sinceSeen: false,
        checkedAt: '2026-11-20T14:30:00.000Z',
        model: fleet,
      },
    },
    {
      what: 'a record not confirmed for 661 s is unknown, with when it was last checked',
      stored: record(),
      nowMs: T0 + 30 * MIN + 661_000,
      expected: {
        state: 'unknown',
        checkedAt: '2026-11-20T14:30:00.000Z',
        model: fleet,
      },
    },
    { what: 'no record is unknown', stored: undefined, nowMs: T0, expected: { state: 'unknown' } },
  ])('$what', ({ stored, nowMs, expected }) => {
    expect(tierSpotView(stored, nowMs, 300)).toEqual(expected);
  });
});

describe('parseTierSpotRecord', () => {
  it('accepts a stored record as it is', () => {
    expect(parseTierSpotRecord(record())).toEqual(record());
  });

  it.each([
    {
      raw: { ...record(), sinceMs: T0 + 31 * MIN },
      message: 'invalid tier spot record: sinceMs: sinceMs must not be after seenMs',
    },
    {
      raw: { ...record(), available: 'yes' },
      message: 'invalid tier spot record: available: Invalid input: expected boolean, received string',
    },
    { raw: { ...record(), extra: 1 }, message: 'invalid tier spot record: (root): Unrecognized key: "extra"' },
    {
      raw: {
        ...record(),
        lifeTable: {
          binSeconds: 600,
          available: { atRisk: [1, 1], ended: [1] },
          unavailable: { atRisk: [0], ended: [0] },
        },
      },
      message: 'invalid tier spot record: lifeTable.available: atRisk and ended must have one entry per bin',
    },
    {
      raw: { ...record(), model: { binSeconds: 600, availableHazards: [1.5], unavailableHazards: [0.5] } },
      message: 'invalid tier spot record: model.availableHazards[0]: Too big: expected number to be <=1',
    },
    {
      raw: {
        ...record(),
        model: { binSeconds: 600, wideBins: 2, availableHazards: [0.1, 0.1], unavailableHazards: [0.5, 0.5] },
      },
      message: 'invalid tier spot record: model.wideBins: wideBins must be fewer than the bins',
    },
    {
      raw: {
        ...record(),
        lifeTable: {
          binSeconds: 600,
          wideBins: 1.5,
          available: { atRisk: [1, 1], ended: [1, 0] },
          unavailable: { atRisk: [0, 0], ended: [0, 0] },
        },
      },
      message: 'invalid tier spot record: lifeTable.wideBins: Invalid input: expected int, received number',
    },
  ])('names what is wrong: $message', ({ raw, message }) => {
    expect(() => parseTierSpotRecord(raw)).toThrow(new InvalidTierSpotRecord(message));
  });
});
