import { describe, expect, it } from 'vitest';
import {
  attemptCostMicroUsd,
  attemptCostUsd,
  billedSeconds,
  InvalidMeteringInput,
  microUsdToCents,
  runningCostUsd,
  spotPriceAt,
  sumAttemptCosts,
} from '../../lambdas/domain/metering';

const T0 = 1_763_646_000_000;

describe('billedSeconds', () => {
  it.each([
    [0, 60],
    [1, 60],
    [59_999, 60],
    [60_000, 60],
    [60_001, 61],
    [90_400, 91],
    [3_600_000, 3600],
  ])('%i ms of runtime bills %i s', (ms, seconds) => {
    expect(billedSeconds(T0, T0 + ms)).toBe(seconds);
  });
});

describe('attemptCostUsd', () => {
  // Expected values worked out by hand: price × billed seconds × nodes / 3600, rounded to the micro-dollar.
  it.each([
    { what: 'one on-demand hour of g4dn.xlarge', ms: 3_600_000, price: 0.526, nodes: 1, micro: 526_000 },
    { what: '30 s is billed as the 60 s minimum', ms: 30_000, price: 0.526, nodes: 1, micro: 8767 }, // 8766.67
    { what: 'a started second is billed whole', ms: 90_400, price: 0.526, nodes: 1, micro: 13_296 }, // 91 s: 13296.11
    { what: 'a reclaimed spot attempt at the start price', ms: 2_403_117, price: 0.1897, nodes: 1, micro: 126_677 }, // 189700 µ$/h × 2404 s / 3600 = 126677.44
    { what: 'four g5.12xlarge nodes for 10 minutes', ms: 600_000, price: 5.672, nodes: 4, micro: 3_781_333 },
    { what: 'a free attempt', ms: 120_000, price: 0, nodes: 1, micro: 0 },
    { what: 'half a micro-dollar rounds up', ms: 60_000, price: 0.00003, nodes: 1, micro: 1 }, // 30 µ$/h × 60 s = 0.5 µ$
  ])('$what', ({ ms, price, nodes, micro }) => {
    const usage = { startedAtMs: T0, stoppedAtMs: T0 + ms, usdPerHour: price, nodes };

    expect(attemptCostMicroUsd(usage)).toBe(micro);
    expect(attemptCostUsd(usage)).toBe(micro / 1_000_000);
  });

  it('stays exact for a 14-day 64-node attempt at 1000 $/h (beyond float-safe integer products)', () => {
    const days14 = 14 * 86_400_000;

    const micro = attemptCostMicroUsd({ startedAtMs: T0, stoppedAtMs: T0 + days14, usdPerHour: 1000, nodes: 64 });

    expect(micro).toBe(1000 * 1_000_000 * 14 * 24 * 64);
  });

  it.each([
    [{ stoppedAtMs: T0 - 1 }, /stoppedAtMs .* is before startedAtMs/],
    [{ usdPerHour: -0.1 }, /usdPerHour must be a price from 0 to 1000/],
    [{ usdPerHour: Number.NaN }, /usdPerHour must be a price/],
    [{ nodes: 0 }, /nodes must be a whole number from 1 to 64, got 0/],
    [{ nodes: 1.5 }, /nodes must be a whole number/],
    [{ startedAtMs: 1.5 }, /startedAtMs must be epoch milliseconds/],
  ])('refuses %j', (change, message) => {
    const usage = { startedAtMs: T0, stoppedAtMs: T0 + 1000, usdPerHour: 0.5, nodes: 1, ...change };

    expect(() => attemptCostUsd(usage)).toThrow(InvalidMeteringInput);
    expect(() => attemptCostUsd(usage)).toThrow(message);
  });
});

describe('runningCostUsd', () => {
  it('accrues a running attempt up to now with the 60 s minimum', () => {
    expect(runningCostUsd(T0, T0 + 10_000, 0.752)).toBe(0.012533); // 60 s × 0.752 / 3600 = 0.0125333
    expect(runningCostUsd(T0, T0 + 1_800_000, 0.752)).toBe(0.376);
    expect(runningCostUsd(T0, T0 + 1_800_000, 0.752, 2)).toBe(0.752);
  });

  it('refuses a clock that reads before the start', () => {
    expect(() => runningCostUsd(T0, T0 - 5000, 0.752)).toThrow(/before startedAtMs/);
  });
});

describe('sumAttemptCosts', () => {
  it.each([
    { parts: [], total: 0 },
    { parts: [0.008767, 0.013296, 0.126677], total: 0.15 }, // 148740 µ$
    { parts: [0.005, 0.005, 0.005], total: 0.02 }, // 15000 µ$ rounds half up
    { parts: [1.005], total: 1.01 }, // naive Math.round(1.005 * 100) / 100 gives 1 (1.005 * 100 is 100.49999…)
    { parts: [0.1, 0.2], total: 0.3 },
    { parts: [0.004999], total: 0 },
    { parts: [0.005], total: 0.01 },
    { parts: Array.from({ length: 1000 }, () => 0.000001), total: 0 }, // 1000 µ$ = $0.001
    { parts: Array.from({ length: 10_000 }, () => 0.000001), total: 0.01 },
  ])('sums $parts.length parts to $total', ({ parts, total }) => {
    expect(sumAttemptCosts(parts)).toBe(total);
  });

  it('names the offending part', () => {
    expect(() => sumAttemptCosts([0.1, -0.2])).toThrow('cost #2 must be a non-negative number of USD, got -0.2');
  });

  it('rounds micro-dollars to cents half up', () => {
    expect(microUsdToCents(1_234_999)).toBe(1.23);
    expect(microUsdToCents(1_235_000)).toBe(1.24);
    expect(() => microUsdToCents(1.5)).toThrow(InvalidMeteringInput);
  });
});

describe('spotPriceAt', () => {
  const history = [
    { timestampMs: T0 + 3_600_000, usdPerHour: 0.2104 },
    { timestampMs: T0, usdPerHour: 0.1897 },
    { timestampMs: T0 + 7_200_000, usdPerHour: 0.1983 },
  ];

  it.each([
    ['before any point', T0 - 1, undefined],
    ['exactly at a point', T0, 0.1897],
    ['between points (the earlier one is in effect)', T0 + 3_599_999, 0.1897],
    ['at the second point', T0 + 3_600_000, 0.2104],
    ['after the last point', T0 + 9_000_000, 0.1983],
  ])('%s', (_what, at, price) => {
    expect(spotPriceAt(history, at)).toBe(price);
  });
});
