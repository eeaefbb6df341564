import { describe, expect, it } from 'vitest';
import { greedyPolicy, onDemandOnlyPolicy, uniformProgressPolicy } from '../../bench/spot/baselines';
import { OptimumWorkspace, optimalCost } from '../../bench/spot/optimum';
import {
  type Holding,
  InvalidJobWindow,
  type JobWindow,
  P3_PRICES,
  schedulePolicy,
  simulate,
} from '../../bench/spot/simulator';
import { startOffsets } from '../../bench/spot/sweep';
import { InvalidTraceFile, parseTrace } from '../../bench/spot/traces';
import { isCheckTick, isWatchTick, TierSpotTimeline, trainyardPolicy } from '../../bench/spot/trainyard';
import { median, percentile } from '../../bench/stats';
import type { PlacementDecision, PlacementMoment } from '../../lambdas/domain/placement';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import { seededRandom } from '../../lib/seeded-random';

const HOUR = 3600;
// Simple prices so hand-worked costs are whole numbers: on-demand $3/h, spot $1/h.
const prices = { onDemand: 3, spot: 1 };
const hourly = (available: number[], workHours: number, deadlineHours: number, overheadHours = 0.5): JobWindow => ({
  available: Uint8Array.from(available),
  gapSeconds: HOUR,
  workSeconds: workHours * HOUR,
  deadlineSeconds: deadlineHours * HOUR,
  overheadSeconds: overheadHours * HOUR,
  prices,
});

describe('parseTrace', () => {
  it('reads counts >= 1 as available and 0 as unavailable', () => {
    const trace = parseTrace('t.json', JSON.stringify({ metadata: { gap_seconds: 600 }, data: [0, 1, 2, 0, 5] }));
    expect(trace.gapSeconds).toBe(600);
    expect([...trace.available]).toEqual([0, 1, 1, 0, 1]);
  });

  it.each([
    [{ metadata: {}, data: [1] }, 't.json: metadata.gap_seconds must be a positive integer, got undefined'],
    [{ metadata: { gap_seconds: 600 }, data: [] }, 't.json: data must be a non-empty array of instance counts'],
    [{ metadata: { gap_seconds: 600 }, data: [1, -1] }, 't.json: data[1] must be a count >= 0, got -1'],
  ])('refuses a malformed trace %o', (raw, message) => {
    expect(() => parseTrace('t.json', JSON.stringify(raw))).toThrow(new InvalidTraceFile(message));
  });
});

describe('simulate', () => {
  it('charges the restart overhead at the held price with no progress and bills the last tick until completion', () => {
    // Spot all along: 0.5 h overhead, then 3 h of work → 3.5 h of spot at $1/h.
    const result = simulate(hourly([1, 1, 1, 1, 1], 3, 5), () => 'spot');
    expect(result).toMatchObject({ finished: true, starts: 1, endSeconds: 3.5 * HOUR });
    expect(result.cost).toBeCloseTo(3.5, 9);
  });

  it('ends a spot attempt when the trace reclaims it and pays a new overhead on restart, keeping progress', () => {
    // Ticks: spot (0.5 progress), reclaimed (wait), spot again (0.5 overhead + 0.5), spot (1) → 2 h of work done at
    // 3.5 h; billed 1 + 1 + 1 = $3 spot… plus nothing for the waiting tick.
    const result = simulate(hourly([1, 0, 1, 1], 2, 4), () => 'spot');
    expect(result).toMatchObject({ finished: true, starts: 2, endSeconds: 4 * HOUR });
    expect(result.cost).toBeCloseTo(3, 9);
  });

  it('reports a miss when progress is short of the work at the deadline', () => {
    const result = simulate(hourly([0, 0, 0], 2, 3), () => 'spot');
    expect(result).toMatchObject({ finished: false, cost: 0, progressSeconds: 0 });
  });

  it('refuses a window shorter than the deadline', () => {
    expect(() => simulate(hourly([1, 1], 1, 3), () => 'spot')).toThrow(
      new InvalidJobWindow('trace window has 2 ticks, the deadline needs 3'),
    );
  });
});

describe('Greedy and Uniform Progress on hand-made traces', () => {
  // C = 4 h, D = 8 h, d = 0.5 h; spot only in the last four hours.
  // Optimum: one on-demand hour (0.5 h overhead + 0.5 h work, $3) ending where spot starts, then 4 h of spot
  // (0.5 h overhead + 3.5 h work, $4) = $7. Spot alone can give at most 3.5 h of work, so some on-demand is needed and
  // at least one full on-demand hour is needed for any on-demand progress: $7 is the minimum.
  // Greedy waits while slack − 1 h ≥ 0.5 h: at t = 3 h the slack is 1 h, so it goes on-demand for good: 4.5 h × $3.
  // UP is behind its line (0.5·t) from t = 1 h: on-demand for ticks 1–3 (2.5 h of work, $9), at t = 4 h it is on the
  // line at t + 2d (2.5 h) and spot is back: spot with 0.5 h overhead (+0.5 h) then 1 h → done at 6 h for $2: $11.
  const lateSpot = hourly([0, 0, 0, 0, 1, 1, 1, 1], 4, 8);
  // C = 3 h, D = 5 h, d = 0.5 h; spot always: both run spot from the start: 3.5 h × $1. Optimum is the same.
  const alwaysSpot = hourly([1, 1, 1, 1, 1], 3, 5);
  // C = 3 h, D = 5 h; spot from t = 2 h. Greedy/UP wait one hour, then (slack 1 h − 1 h < 0.5 h / < 1 h) on-demand
  // for good: 3.5 h × $3 = $10.5. Optimum: one on-demand hour ($3, 0.5 h of work) and spot for ticks 2–4
  // (2.5 h of work, $3) = $6.
  const shortSlack = hourly([0, 0, 1, 1, 1], 3, 5);

  it.each([
    ['late spot', lateSpot, 13.5, 11, 7],
    ['spot always', alwaysSpot, 3.5, 3.5, 3.5],
    ['short slack', shortSlack, 10.5, 10.5, 6],
  ])('%s: Greedy, UP and the optimum cost what the hand calculation says', (_name, job, greedy, up, optimum) => {
    const g = simulate(job, greedyPolicy(job));
    const u = simulate(job, uniformProgressPolicy(job));
    expect(g.finished && u.finished).toBe(true);
    expect(g.cost).toBeCloseTo(greedy, 9);
    expect(u.cost).toBeCloseTo(up, 9);
    expect(optimalCost(job)).toBeCloseTo(optimum, 9);
  });

  it('on-demand only costs C + d on-demand hours', () => {
    const result = simulate(lateSpot, onDemandOnlyPolicy());
    expect(result.cost).toBeCloseTo(4.5 * 3, 9);
  });
});

function bruteForceOptimum(job: JobWindow): number {
  const ticks = job.deadlineSeconds / job.gapSeconds;
  const schedule: Holding[] = new Array(ticks).fill('none');
  let best = Number.POSITIVE_INFINITY;
  const visit = (tick: number): void => {
    if (tick === ticks) {
      const result = simulate(job, schedulePolicy(schedule));
      if (result.finished && result.cost < best) best = result.cost;
      return;
    }
    for (const holding of ['none', 'spot', 'on-demand'] as const) {
      if (holding === 'spot' && job.available[tick] !== 1) continue;
      schedule[tick] = holding;
      visit(tick + 1);
    }
  };
  visit(0);
  return best;
}

describe('optimalCost', () => {
  it('equals brute force over every per-tick schedule on random tiny traces (partial-tick overheads included)', () => {
    const random = seededRandom(42);
    const workspace = new OptimumWorkspace();
    let compared = 0;
    for (let n = 0; n < 150; n++) {
      const ticks = 3 + Math.floor(random() * 6);
      const gap = [10, 12, 30][Math.floor(random() * 3)] as number;
      const overhead = [0, 3, 7, 15, 25][Math.floor(random() * 5)] as number;
      const work = Math.max(1, Math.floor(random() * (ticks * gap - overhead)));
      const job: JobWindow = {
        available: Uint8Array.from({ length: ticks }, () => (random() < 0.6 ? 1 : 0)),
        gapSeconds: gap,
        workSeconds: work,
        deadlineSeconds: ticks * gap,
        overheadSeconds: overhead,
        prices: random() < 0.5 ? P3_PRICES : { onDemand: 3.06, spot: 2.5 },
      };
      const expected = bruteForceOptimum(job);
      const actual = optimalCost(job, workspace);
      if (expected === Number.POSITIVE_INFINITY) expect(actual).toBe(Number.POSITIVE_INFINITY);
      else expect(actual).toBeCloseTo(expected, 9);
      compared++;
    }
    expect(compared).toBe(150);
  });

  it('is never above any policy’s cost on a real-trace-like window', () => {
    const random = seededRandom(7);
    const available = Uint8Array.from({ length: 300 }, (_, i) => (Math.sin(i / 9) + random() * 0.8 > 0 ? 1 : 0));
    const job: JobWindow = {
      available,
      gapSeconds: 600,
      workSeconds: 30 * HOUR,
      deadlineSeconds: 50 * HOUR,
      overheadSeconds: 1080,
      prices: P3_PRICES,
    };
    const optimum = optimalCost(job);
    for (const policy of [greedyPolicy(job), uniformProgressPolicy(job), onDemandOnlyPolicy()])
      expect(optimum).toBeLessThanOrEqual(simulate(job, policy).cost + 1e-9);
  });
});

describe('Trainyard in the simulator', () => {
  it.each([
    [600, [1, 2, 3, 4]],
    [32, [10, 19, 29, 38]],
  ])('applies the 300 s check at the first %i s tick boundary at or after each multiple of 300 s', (gap, expected) => {
    const checks = Array.from({ length: 40 }, (_, tick) => tick).filter((tick) => isCheckTick(tick, gap, 300));
    expect(checks.slice(0, 4)).toEqual(expected);
  });

  it('consults the production policy only at submit, reclaim, capacity cancellation and check moments', () => {
    // 600 s ticks: spot, reclaimed for 5 ticks (capacity cancellation after 1200 s of waiting), spot again.
    const job: JobWindow = {
      available: Uint8Array.from([1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
      gapSeconds: 600,
      workSeconds: 2 * HOUR,
      deadlineSeconds: 20 * 600,
      overheadSeconds: 180,
      prices: P3_PRICES,
    };
    const moments: string[] = [];
    const result = simulate(
      job,
      trainyardPolicy(
        job,
        { reclaimsBeforeOnDemand: 2, capacityWaitSeconds: 1200, checkIntervalSeconds: 300 },
        { onDecision: (m) => moments.push(m) },
      ),
    );
    expect(result.finished).toBe(true);
    expect(moments[0]).toBe('submit');
    expect(moments).toContain('attempt-reclaimed');
    expect(moments).toContain('capacity-cancelled');
    expect(new Set(moments)).toEqual(new Set(['submit', 'attempt-reclaimed', 'capacity-cancelled', 'periodic-check']));
  });
});

describe('the tier’s spot record in the simulator', () => {
  it.each([
    [600, [0, -1, -2, -3]],
    // 300 s multiples before submission at 32 s ticks: −288 s (−9), −576 s (−18), −896 s (−28).
    [32, [0, -9, -18, -28]],
  ])('checks a job at the %i s tick boundary at or after each multiple of 300 s from submission', (gap, expected) => {
    const ticks = Array.from({ length: 40 }, (_, i) => -i || 0).filter((tick) => isWatchTick(tick, gap, 300));
    expect(ticks.slice(0, 4)).toEqual(expected);
  });

  it.each([
    {
      what: 'an outage the watch saw begin two ticks before submission',
      trace: [1, 1, 0, 0],
      // Ticks 0..3 are at 0, 600, 1200 and 1800 s from the start of the trace; the outage was first seen at 1200 s,
      // ending the available stretch the record began with (its start unseen, so not counted).
      expected: { available: false, sinceMs: 1_200_000, sinceChange: true, seenMs: 1_800_000 },
    },
    {
      what: 'a stretch that reaches the start of the trace began with the record',
      trace: [1, 1, 1],
      expected: { available: true, sinceMs: 0, sinceChange: false, seenMs: 1_200_000 },
    },
  ])('keeps the record as the watch would from the start of the trace: $what', ({ trace, expected }) => {
    const timeline = new TierSpotTimeline(Uint8Array.from(trace), 600, 300);
    expect(timeline.before(trace.length)).toMatchObject({ tier: 'sim', ...expected });
    expect(timeline.before(0)).toBeUndefined();
    expect(() => timeline.before(trace.length + 1)).toThrow(RangeError);
  });

  it('probes every 300 s from the start of the trace and does not see what happens between its probes', () => {
    // 32 s ticks; the watch probes ticks 0 (0 s), 10 (320 s), 19 (608 s) and 29 (928 s). A one-tick outage at
    // tick 25 falls between them.
    const trace = new Uint8Array(30).fill(1);
    trace[25] = 0;
    expect(new TierSpotTimeline(trace, 32, 300).before(30)).toMatchObject({
      available: true,
      sinceMs: 0,
      sinceChange: false,
      seenMs: 928_000,
    });
  });

  it('counts the stretches it saw begin and end, and refits the tier’s model a week after the last fit', () => {
    // 600 s ticks: unseen start, then outages of 2 ticks and available stretches of 4, repeated for 8 days.
    const day = 144;
    const trace = Uint8Array.from({ length: 8 * day }, (_, tick) => (tick < 3 || tick % 6 >= 2 ? 1 : 0));
    const timeline = new TierSpotTimeline(trace, 600, 300);
    const week = 7 * day;
    // Fitted at the first probe with nothing learnt (the fleet model), again at the first probe a week later.
    expect(timeline.before(week)).toMatchObject({ modelFittedMs: 0 });
    expect(timeline.before(week)?.model).toBeUndefined();
    const refitted = timeline.before(week + 1);
    expect(refitted?.modelFittedMs).toBe(week * 600_000);
    // Outages last 1,200 s: each that began at tick 6k (k ≥ 1) and was seen to end (at 6k + 2 ≤ the refit's tick)
    // ended in bin 1, none in bin 0. The one the refit's tick begins has no length yet.
    const outages = refitted?.lifeTable?.unavailable;
    const seenOutages = Math.floor((week - 2) / 6);
    expect(outages?.ended.slice(0, 2)).toEqual([0, seenOutages]);
    expect(outages?.atRisk.slice(0, 3)).toEqual([seenOutages, seenOutages, 0]);
    // The blend moves the tier's outage hazard in bin 1 towards 1 and in bin 0 towards 0.
    const fleet = FLEET_SPOT_MODEL.unavailableHazards;
    expect(refitted?.model?.unavailableHazards[1]).toBeCloseTo(
      (seenOutages + 20 * (fleet[1] as number)) / (seenOutages + 20),
      4,
    );
    expect(refitted?.model?.unavailableHazards[0]).toBeCloseTo((20 * (fleet[0] as number)) / (seenOutages + 20), 4);

    // Given another fleet model (a sweep's, fitted without the trace it replays), the refit blends with that one.
    const prior = { ...FLEET_SPOT_MODEL, unavailableHazards: FLEET_SPOT_MODEL.unavailableHazards.map(() => 0.5) };
    const held = new TierSpotTimeline(trace, 600, 300, prior).before(week + 1);
    expect(held?.lifeTable).toEqual(refitted?.lifeTable);
    expect(held?.model?.unavailableHazards[0]).toBeCloseTo((20 * 0.5) / (seenOutages + 20), 4);
  });

  it('tells the production policy at submission how old the outage it is submitted into is, when a probe can answer', () => {
    // 600 s ticks; spot has been out for 5 h (30 ticks) before submission and stays out for the job's first hour.
    const job: JobWindow = {
      available: Uint8Array.from([0, 0, 0, 0, 0, 0, ...new Array<number>(14).fill(1)]),
      before: Uint8Array.from([1, ...new Array<number>(30).fill(0)]),
      gapSeconds: 600,
      workSeconds: 2 * HOUR,
      deadlineSeconds: 20 * 600,
      overheadSeconds: 180,
      prices: P3_PRICES,
    };
    const planned = {
      reclaimsBeforeOnDemand: 2,
      capacityWaitSeconds: 1200,
      checkIntervalSeconds: 300,
      spotPlanning: { model: FLEET_SPOT_MODEL, spotPriceRatio: P3_PRICES.spot / P3_PRICES.onDemand },
    };
    const firstReason = (config: typeof planned & { spotVisibleOnDemand?: boolean }): string => {
      const decisions: Array<[PlacementMoment, PlacementDecision]> = [];
      simulate(
        job,
        trainyardPolicy(job, config, { onDecision: (moment, decision) => decisions.push([moment, decision]) }),
      );
      expect(decisions[0]?.[0]).toBe('submit');
      return decisions[0]?.[1].reason ?? '';
    };
    // The watch first saw the outage at tick −30: at submission it is 30 × 600 s old.
    expect(firstReason(planned)).toContain('spot unavailable for 18000 s');
    expect(firstReason({ ...planned, spotVisibleOnDemand: false })).not.toContain('spot unavailable');
  });
});

describe('sweep helpers', () => {
  it('draws reproducible offsets whose windows lie inside the trace', () => {
    const trace = { name: 'x', gapSeconds: 600, available: new Uint8Array(1000) };
    const a = startOffsets(trace, 900, 50, 1);
    expect(a).toEqual(startOffsets(trace, 900, 50, 1));
    expect(Math.max(...a)).toBeLessThanOrEqual(100);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(0);
  });

  it('takes the nearest-rank percentile of unsorted values', () => {
    expect(percentile([5, 1, 2, 3, 4, 6, 7, 8, 9, 10], 90)).toBe(9);
    expect(percentile([30, 10, 20], 50)).toBe(20);
    expect(percentile([30, 10, 20], 99)).toBe(30);
    expect(percentile([30, 10, 20], 0)).toBe(10);
    expect(percentile([], 50)).toBeNaN();
  });

  it("takes the median as the middle value, or the mean of the two middle ones (a cold start's median of 20)", () => {
    expect(median([30, 10, 20])).toBe(20);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    const twenty = Array.from({ length: 20 }, (_, i) => 140 + i);
    expect(median(twenty)).toBe(149.5);
    expect(median([])).toBeNaN();
  });
});
