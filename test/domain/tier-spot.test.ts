// The budget watch's per-tier spot record (domain/tier-spot.ts): how each probe answer moves it forward, and what a
// decision reads from it. Ticks are 300 s apart; the gap that breaks a run is 2 × 300 + 60 = 660 s.
import { describe, expect, it } from 'vitest';
import {
  InvalidTierSpotRecord,
  nextTierSpot,
  parseTierSpotRecord,
  type TierSpotRecord,
  tierSpotAfterReclaim,
  tierSpotAt,
  tierSpotMaxGapMs,
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
    expect(next(stored, available, nowMs)).toEqual(expected);
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
    expect(foldReclaim(stored, atMs)).toEqual(expected);
  });

  it.each([
    { what: 'during a recorded outage', stored: record({ available: false }), atMs: T0 + 20 * MIN },
    { what: 'before the current stretch began', stored: record(), atMs: T0 - MIN },
    { what: 'replayed at the start it already set', stored: record({ sinceMs: T0 + 20 * MIN }), atMs: T0 + 20 * MIN },
  ])('changes nothing for a reclaim $what', ({ stored, atMs }) => {
    expect(foldReclaim(stored, atMs)).toBeUndefined();
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
  it.each([
    {
      what: 'a fresh record shows its state, since when, and whether the watch saw it begin',
      stored: record(),
      nowMs: T0 + 31 * MIN,
      expected: {
        state: 'available',
        since: '2026-11-20T14:00:00.000Z',
        sinceSeen: true,
        checkedAt: '2026-11-20T14:30:00.000Z',
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
      },
    },
    {
      what: 'a record not confirmed for 661 s is unknown, with when it was last checked',
      stored: record(),
      nowMs: T0 + 30 * MIN + 661_000,
      expected: { state: 'unknown', checkedAt: '2026-11-20T14:30:00.000Z' },
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
  ])('names what is wrong: $message', ({ raw, message }) => {
    expect(() => parseTierSpotRecord(raw)).toThrow(new InvalidTierSpotRecord(message));
  });
});
