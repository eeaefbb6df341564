import { describe, expect, it } from 'vitest';
import {
  blendSpotLengthModel,
  emptySpotLifeTables,
  fitSpotLengthModel,
  InvalidSpotPlan,
  MAX_PLAN_GRID_POINTS,
  type PlanState,
  planAgeStarts,
  planFits,
  roundedSpotLengthModel,
  SpotPlan,
  type SpotPlanParameters,
  spotBinStarts,
  spotPlanFor,
  stepHazards,
  withSpotStretches,
} from '../../lambdas/domain/spot-planner';

describe('fitSpotLengthModel', () => {
  it('estimates each bin as ended ÷ alive at its start, pooling the last bin by exposure', () => {
    // Available: 600 s (ended in bin 0), 1200 s (ended in bin 1), 1800 s still going when observation stopped.
    // Bin 0: 3 alive, 1 ended → 1/3. Bin 1: 2 alive, 1 ended → 1/2. Bin 2 (last): 1 bin of exposure, 0 ended → 0.
    const model = fitSpotLengthModel(
      [
        { available: true, seconds: 600, ended: true },
        { available: true, seconds: 1200, ended: true },
        { available: true, seconds: 1800, ended: false },
        { available: false, seconds: 300, ended: true },
      ],
      600,
      3,
    );
    expect(model.binSeconds).toBe(600);
    expect(model.availableHazards).toEqual([1 / 3, 1 / 2, 0]);
    // One outage of 300 s ended in bin 0; later bins borrow the last estimate.
    expect(model.unavailableHazards).toEqual([1, 1, 1]);
  });

  it('uses 1/2 where there is no data at all, and rejects impossible input', () => {
    expect(fitSpotLengthModel([], 600, 2).availableHazards).toEqual([0.5, 0.5]);
    expect(() => fitSpotLengthModel([], 0, 2)).toThrow(InvalidSpotPlan);
    expect(() => fitSpotLengthModel([], 600, 0)).toThrow(/bins must be a whole number >= 1, got 0/);
    expect(() => fitSpotLengthModel([{ available: true, seconds: -5, ended: true }], 600, 2)).toThrow(
      /stretch lengths must be finite and > 0, got -5/,
    );
  });
});

describe('life tables', () => {
  it('count each stretch alive at the start of each bin, and its end, without changing the tables given', () => {
    const empty = emptySpotLifeTables(600, 3);
    const tables = withSpotStretches(empty, [
      { available: true, seconds: 1200, ended: true },
      { available: true, seconds: 2700, ended: false },
      { available: false, seconds: 300, ended: true },
    ]);
    // 1 200 s: bins 0 and 1, ended in 1. 2 700 s: bins 0 and 1, then 2.5 bins of exposure in the pooled last one.
    expect(tables).toEqual({
      binSeconds: 600,
      available: { atRisk: [2, 2, 2.5], ended: [0, 1, 0] },
      unavailable: { atRisk: [1, 0, 0], ended: [1, 0, 0] },
    });
    expect(empty.available).toEqual({ atRisk: [0, 0, 0], ended: [0, 0, 0] });
    expect(() => emptySpotLifeTables(600, 0)).toThrow(/bins must be a whole number >= 1, got 0/);
  });

  it('blend with a prior as (ended + w · prior) ÷ (at risk + w) in every bin', () => {
    const prior = { binSeconds: 600, availableHazards: [0.2, 0.1], unavailableHazards: [0.5, 0.4] };
    const tables = {
      binSeconds: 600,
      available: { atRisk: [30, 10], ended: [15, 0] },
      unavailable: { atRisk: [0, 0], ended: [0, 0] },
    };
    const blended = blendSpotLengthModel(prior, tables, 10);
    // (15 + 10 · 0.2) ÷ (30 + 10) = 17/40; (0 + 10 · 0.1) ÷ (10 + 10) = 1/20; nothing seen: the prior.
    expect(blended.availableHazards).toEqual([17 / 40, 1 / 20]);
    expect(blended.unavailableHazards).toEqual([0.5, 0.4]);
    expect(() => blendSpotLengthModel(prior, tables, 0)).toThrow(/weight must be a finite number > 0, got 0/);
    expect(() => blendSpotLengthModel(prior, emptySpotLifeTables(600, 3), 10)).toThrow(
      /the available life table has 3 bins of 600 s \(0 wide\); the prior has 2 of 600 s \(0 wide\)/,
    );
  });

  it('count a stretch in wide bins by its exposure there, in units of the bin width, and end it in its bin', () => {
    // 4 bins of 600 s, the last 2 wide: [0, 600), [600, 1200), [1200, 2400), and 2400 s on.
    expect(spotBinStarts(600, 4, 2)).toEqual([0, 600, 1200, 2400]);
    const tables = withSpotStretches(emptySpotLifeTables(600, 4, 2), [
      { available: true, seconds: 2000, ended: true },
      { available: true, seconds: 3000, ended: false },
    ]);
    // 2 000 s: alive at the start of bins 0 and 1, then 800 s = 4/3 units of exposure in [1200, 2400), ended there.
    // 3 000 s: bins 0 and 1, the whole of [1200, 2400) (2 units), then 600 s (1 unit) in the open bin, still going.
    expect(tables.wideBins).toBe(2);
    const [first, second, wide, open] = tables.available.atRisk;
    expect([first, second, open]).toEqual([2, 2, 1]);
    expect(wide).toBeCloseTo(4 / 3 + 2, 12);
    expect(tables.available.ended).toEqual([0, 0, 1, 0]);
    const model = fitSpotLengthModel(
      [
        { available: true, seconds: 2000, ended: true },
        { available: true, seconds: 3000, ended: false },
      ],
      600,
      4,
      2,
    );
    expect(model).toMatchObject({ binSeconds: 600, wideBins: 2, unavailableHazards: [0.5, 0.5, 0.5, 0.5] });
    expect(model.availableHazards[2]).toBeCloseTo(1 / (4 / 3 + 2), 12);
    expect([0, 1, 3].map((bin) => model.availableHazards[bin])).toEqual([0, 0, 0]);
    expect(() => spotBinStarts(600, 4, 4)).toThrow(/wideBins must be a whole number in \[0, 3\] for 4 bins, got 4/);
    expect(() => blendSpotLengthModel({ ...model, wideBins: 1 }, emptySpotLifeTables(600, 4, 2), 10)).toThrow(
      /has 4 bins of 600 s \(2 wide\); the prior has 4 of 600 s \(1 wide\)/,
    );
  });

  it('round a model’s hazards to 4 decimals', () => {
    expect(
      roundedSpotLengthModel({ binSeconds: 600, availableHazards: [1 / 3], unavailableHazards: [0.123456] }),
    ).toEqual({ binSeconds: 600, availableHazards: [0.3333], unavailableHazards: [0.1235] });
  });
});

describe('plan ages', () => {
  it('tell the first ages apart step by step, then in phases doubling up to the model’s open bin', () => {
    // Steps of 300 s, 2 told apart, a model open from 4 800 s: [600, 1200), [1200, 2400), [2400, 4800), then open.
    expect(planAgeStarts(300, 2, 4800)).toEqual([0, 300, 600, 1200, 2400, 4800]);
    // A model without wide bins (24 bins of 600 s, open from 13 800 s) keeps the plan's one state for every age
    // from 24 steps on, as before the phases.
    expect(planAgeStarts(300, 24, 23 * 600)).toEqual([...Array.from({ length: 24 }, (_, k) => k * 300), 7200]);
  });

  it('give a phase the constant chance per step with the model’s survival across it', () => {
    // Bins of 600 s: 0.2, 0.5, then 0.1 for ever. The phase [0, 900) lives through bin 0 and half of bin 1: survival
    // 0.8 · √0.5 over 3 steps of 300 s.
    const [phase] = stepHazards([0.2, 0.5, 0.1], 600, 0, 300, [0, 900, 1200]);
    expect(phase).toBeCloseTo(1 - (0.8 * Math.sqrt(0.5)) ** (1 / 3), 12);
  });
});

describe('stepHazards', () => {
  it('converts a constant hazard per bin to the same survival per step, the capped age included', () => {
    // 10 % per 600 s bin is 1 − √0.9 per 300 s step at every age; the cap keeps it (an exponential's mean remaining life).
    const perStep = stepHazards([0.1, 0.1], 600, 0, 300, [0, 300, 600, 900]);
    expect(perStep).toHaveLength(4);
    for (const h of perStep) expect(h).toBeCloseTo(1 - Math.sqrt(0.9), 12);
  });

  it('gives the capped age the hazard of the mean remaining length, not the bin at the cap', () => {
    // Bins: 0.5, then 0 (an artefact), then 0.5 for ever. A stretch at the cap (age 1 bin) survives bin 1 for sure,
    // then lasts 600 s / −ln 0.5 on average: mean remaining 600 + 600/ln 2 s.
    const [, capped] = stepHazards([0.5, 0, 0.5], 600, 0, 600, [0, 600]);
    expect(capped).toBeCloseTo(1 - Math.exp(-600 / (600 + 600 / Math.LN2)), 12);
  });
});

const step = 300;
const plan = (overrides: Partial<SpotPlanParameters>): SpotPlan =>
  SpotPlan.solve({
    stepSeconds: step,
    horizonSteps: 40,
    maxWorkSeconds: 6000,
    restartOverheadSeconds: 300,
    spotPriceRatio: 0.3,
    model: { binSeconds: step, availableHazards: [0.02], unavailableHazards: [0.2] },
    ...overrides,
  });
const waiting: PlanState = {
  timeLeftSeconds: 40 * step,
  workLeftSeconds: 6000,
  held: 'none',
  spotAvailable: false,
  stateAgeSeconds: 0,
};

describe('SpotPlan', () => {
  it('waits for spot while the slack allows it and takes on-demand when it no longer does', () => {
    const p = plan({});
    expect(p.decide(waiting)).toBe('spot');
    // Work 6000 s + one restart 300 s = 21 steps: with 21 steps left, waiting one more would miss the deadline.
    expect(p.decide({ ...waiting, timeLeftSeconds: 21 * step })).toBe('on-demand');
  });

  it('goes back from on-demand to spot only when spot is expected to last long enough to pay for the restarts', () => {
    const onDemand: PlanState = { ...waiting, held: 'on-demand', spotAvailable: true };
    // Spot that is never reclaimed: 0.3·(6000 + 300) < 6000, so move.
    expect(
      plan({ model: { binSeconds: step, availableHazards: [0], unavailableHazards: [0.2] } }).decide(onDemand),
    ).toBe('spot');
    // Spot reclaimed within a step 90 % of the time: the 300 s restart eats the whole step, so stay.
    expect(
      plan({ model: { binSeconds: step, availableHazards: [0.9], unavailableHazards: [0.2] } }).decide(onDemand),
    ).toBe('on-demand');
  });

  it('keeps a job on spot while it runs there', () => {
    expect(plan({}).decide({ ...waiting, held: 'spot', spotAvailable: true })).toBe('spot');
  });

  it('reads the age of what it sees: a young spot stretch is not worth a restart, an old one is', () => {
    // Available stretches: 90 % end within their first step, 1 % per step after that.
    const p = plan({ model: { binSeconds: step, availableHazards: [0.9, 0.01], unavailableHazards: [0.2] } });
    const onDemand: PlanState = { ...waiting, held: 'on-demand', spotAvailable: true };
    expect(p.decide({ ...onDemand, stateAgeSeconds: 0 })).toBe('on-demand');
    expect(p.decide({ ...onDemand, stateAgeSeconds: 5 * step })).toBe('spot');
  });

  it('tells an outage of hours from one of days where the model’s wide bins do', () => {
    // Outages end at 5 % a step until they are 16 h old, never after; spot once there stays. 24 bins of one step
    // (2 h), then wide ones: [2, 4), [4, 8), [8, 16) h, and 16 h on.
    const unavailableHazards = [...new Array(27).fill(0.05), 0];
    const availableHazards = new Array(28).fill(0);
    const p = plan({ model: { binSeconds: step, wideBins: 4, availableHazards, unavailableHazards } });
    const onDemand: PlanState = { ...waiting, held: 'on-demand', spotAvailable: false };
    // 3 h old: likely back within the slack, worth leaving on-demand for the queue. 40 h old: never back; leaving
    // would only cost a restart.
    expect(p.decide({ ...onDemand, stateAgeSeconds: 3 * 3600 })).toBe('spot');
    expect(p.decide({ ...onDemand, stateAgeSeconds: 40 * 3600 })).toBe('on-demand');
    expect(p.decide({ ...onDemand, stateAgeSeconds: Number.POSITIVE_INFINITY })).toBe('on-demand');
    // The same counts without wide bins pool every age from 230 minutes on: one age state for both.
    const pooled = plan({ model: { binSeconds: step, availableHazards, unavailableHazards } });
    expect(pooled.decide({ ...onDemand, stateAgeSeconds: 3 * 3600 })).toBe(
      pooled.decide({ ...onDemand, stateAgeSeconds: 40 * 3600 }),
    );
    expect(() =>
      plan({ model: { binSeconds: step, wideBins: 1, availableHazards: [0], unavailableHazards: [0.1, 0.1] } }),
    ).toThrow(/model.wideBins must be a whole number in \[0, 0\] for the 1 bins of model.availableHazards, got 1/);
  });

  it('weighs the spread of the cost when told to be risk-averse: a sure cost beats a gamble of equal certainty', () => {
    // One 300 s step of work, one 300 s restart, three steps to the deadline, spot at half price and reclaimed within a
    // step half the time. On-demand now costs 2 cells for sure (restart + work). Spot now costs 0.5 for the restart
    // step, then 0.5 to finish if it stays, or 2 on on-demand if it is reclaimed (too late to wait): 1.75 expected.
    // With risk aversion g per cell the plan compares E[e^(g·cost)]: 0.5·e^g + 0.5·e^(2.5g) for spot against e^(2g).
    const gamble = (g: number): number => 0.5 * Math.exp(g) + 0.5 * Math.exp(2.5 * g) - Math.exp(2 * g);
    let [low, high] = [0.1, 2];
    for (let i = 0; i < 60; i++)
      [low, high] = gamble((low + high) / 2) < 0 ? [(low + high) / 2, high] : [low, (low + high) / 2];
    const threshold = low;
    expect(threshold).toBeGreaterThan(0.5);
    expect(threshold).toBeLessThan(1);
    const tiny = (riskAversion?: number): SpotPlan =>
      plan({
        horizonSteps: 3,
        maxWorkSeconds: step,
        spotPriceRatio: 0.5,
        model: { binSeconds: step, availableHazards: [0.5], unavailableHazards: [0.2] },
        ...(riskAversion === undefined ? {} : { riskAversion }),
      });
    const now: PlanState = {
      timeLeftSeconds: 3 * step,
      workLeftSeconds: step,
      held: 'none',
      spotAvailable: true,
      stateAgeSeconds: 0,
    };
    // Per on-demand hour: a cell is 300 s of on-demand, so g per cell is 12·g per hour.
    const perHour = 3600 / step;
    expect(tiny().decide(now)).toBe('spot');
    expect(tiny(0).decide(now)).toBe('spot');
    expect(tiny(threshold * 0.98 * perHour).decide(now)).toBe('spot');
    expect(tiny(threshold * 1.02 * perHour).decide(now)).toBe('on-demand');
  });

  it('keeps the deadline when risk-averse, and decides as a risk-neutral plan at zero risk aversion', () => {
    const averse = plan({ riskAversion: 0.5 });
    expect(averse.decide(waiting)).toBe('spot');
    expect(averse.decide({ ...waiting, timeLeftSeconds: 21 * step })).toBe('on-demand');
    const neutral = plan({});
    const zero = plan({ riskAversion: 0 });
    for (let steps = 1; steps <= 40; steps++)
      for (let work = 0; work <= 6000; work += 300)
        for (const held of ['none', 'spot', 'on-demand'] as const)
          for (const spotAvailable of held === 'spot' ? [true] : [true, false])
            for (const stateAgeSeconds of [0, step, 10 * step, Number.POSITIVE_INFINITY]) {
              const state = {
                timeLeftSeconds: steps * step,
                workLeftSeconds: work,
                held,
                spotAvailable,
                stateAgeSeconds,
              };
              expect(zero.decide(state)).toBe(neutral.decide(state));
            }
  });

  it('answers only for states it was solved for, and rejects impossible parameters', () => {
    const p = plan({});
    expect(p.covers({ ...waiting, timeLeftSeconds: 41 * step })).toBe(false);
    expect(() => p.decide({ ...waiting, workLeftSeconds: 7000 })).toThrow(/outside the plan/);
    expect(() => plan({ spotPriceRatio: 1.5 })).toThrow(/spotPriceRatio must be at most 1, got 1.5/);
    expect(() => plan({ horizonSteps: 2.5 })).toThrow(/horizonSteps must be a whole number >= 0, got 2.5/);
    expect(() => plan({ riskAversion: -0.1 })).toThrow(/riskAversion must be a finite number >= 0, got -0.1/);
    expect(() => plan({ riskAversion: Number.NaN })).toThrow(/riskAversion must be a finite number >= 0, got NaN/);
    // Costs reach (6000 + 6·300 + 2·300) s = 2.33 on-demand hours: 300 per hour would weigh e^700.
    expect(() => plan({ riskAversion: 300 })).toThrow(
      /riskAversion 300 per on-demand hour is too large for a plan whose costs reach 2.3 on-demand hours: their product must be at most 500/,
    );
    expect(() => plan({ model: { binSeconds: step, availableHazards: [], unavailableHazards: [0.2] } })).toThrow(
      /model.availableHazards must hold at least one hazard/,
    );
    expect(() => plan({ model: { binSeconds: step, availableHazards: [1.2], unavailableHazards: [0.2] } })).toThrow(
      /entries must lie in \[0, 1\], got 1.2/,
    );
  });
});

describe('plan size', () => {
  it('decides every state it answers for as a larger plan does, near the top of its work grid too', () => {
    // A restart of 1 080 s adds 3.6 cells of work: a plan that clamped its grid at the most work it answers for
    // would value the restarts of its largest states too low, so a plan solved for exactly one job would decide
    // that job's first moments otherwise than a plan solved for a larger one.
    const model = { binSeconds: 600, availableHazards: [0.2, 0.1, 0.05], unavailableHazards: [0.4, 0.2, 0.1] };
    const base = { stepSeconds: step, restartOverheadSeconds: 1080, spotPriceRatio: 0.32, model };
    const exact = SpotPlan.solve({ ...base, horizonSteps: 120, maxWorkSeconds: 72 * step });
    const larger = SpotPlan.solve({ ...base, horizonSteps: 180, maxWorkSeconds: 108 * step });
    let compared = 0;
    const differing: PlanState[] = [];
    for (let steps = 1; steps <= 120; steps++)
      for (let cells = 0; cells <= 72; cells++)
        for (const [held, spotAvailable] of [
          ['none', false],
          ['none', true],
          ['spot', true],
          ['on-demand', false],
          ['on-demand', true],
        ] as const)
          for (let age = 0; age <= 24; age += 4) {
            const state = {
              timeLeftSeconds: steps * step,
              workLeftSeconds: cells * step,
              held,
              spotAvailable,
              stateAgeSeconds: age * step,
            };
            if (exact.decide(state) !== larger.decide(state)) differing.push(state);
            compared++;
          }
    expect(compared).toBe(120 * 73 * 5 * 7);
    expect(differing.slice(0, 3)).toEqual([]);
  });
});

describe('spotPlanFor', () => {
  const parameters = {
    stepSeconds: step,
    restartOverheadSeconds: 300,
    spotPriceRatio: 0.3,
    model: { binSeconds: step, availableHazards: [0.02], unavailableHazards: [0.2] },
  };

  it('reuses a plan for later and smaller states, grows it for larger ones, and keeps one per overhead', () => {
    const first = spotPlanFor(waiting, parameters);
    const later = spotPlanFor({ ...waiting, timeLeftSeconds: 30 * step, workLeftSeconds: 3000 }, parameters);
    expect(later).toBe(first);
    const other = spotPlanFor(waiting, { ...parameters, restartOverheadSeconds: 600 });
    expect(other).not.toBe(first);
    expect(other.parameters.restartOverheadSeconds).toBe(600);
    // A longer job than the cached plan covers grows it: by half again in each dimension (40 → 60 steps, 6 000 →
    // 9 000 s of work), or to what the job needs where that is more.
    const longer = spotPlanFor({ ...waiting, workLeftSeconds: 9000, timeLeftSeconds: 50 * step }, parameters);
    expect(longer.parameters.maxWorkSeconds).toBe(9000);
    expect(longer.parameters.horizonSteps).toBe(60);
    // The grown plan serves the smaller job too; a plan for another overhead is kept beside it.
    expect(spotPlanFor(waiting, parameters)).toBe(longer);
    expect(spotPlanFor(waiting, { ...parameters, restartOverheadSeconds: 600 })).toBe(other);
  });

  it('shares a plan between equal models read afresh, not between different ones', () => {
    const plan = spotPlanFor(waiting, parameters);
    const copy = { ...parameters, model: structuredClone(parameters.model) };
    expect(spotPlanFor(waiting, copy)).toBe(plan);
    const other = { ...parameters, model: { ...parameters.model, unavailableHazards: [0.3] } };
    expect(spotPlanFor(waiting, other)).not.toBe(plan);
  });

  it('keeps a plan per risk aversion', () => {
    const neutral = spotPlanFor(waiting, parameters);
    const averse = spotPlanFor(waiting, { ...parameters, riskAversion: 0.12 });
    expect(averse).not.toBe(neutral);
    expect(averse.parameters.riskAversion).toBe(0.12);
    expect(spotPlanFor(waiting, { ...parameters, riskAversion: 0.12 })).toBe(averse);
  });

  it('grows a plan by half again in the dimension a state outgrows, so a run of slightly larger jobs solves once', () => {
    const model = { binSeconds: step, availableHazards: [0.03], unavailableHazards: [0.25] };
    const grown = { ...parameters, model };
    const first = spotPlanFor({ ...waiting, timeLeftSeconds: 40 * step, workLeftSeconds: 6000 }, grown);
    const longer = spotPlanFor({ ...waiting, timeLeftSeconds: 41 * step, workLeftSeconds: 6000 }, grown);
    expect(longer).not.toBe(first);
    expect(longer.parameters).toMatchObject({ horizonSteps: 60, maxWorkSeconds: 6000 });
    expect(spotPlanFor({ ...waiting, timeLeftSeconds: 59 * step, workLeftSeconds: 6000 }, grown)).toBe(longer);
  });

  it('keeps plans side by side for jobs no one plan can cover, so deciding them in turn solves each once', () => {
    const model = { binSeconds: step, availableHazards: [0.04], unavailableHazards: [0.15] };
    const side = { ...parameters, model };
    // 2,000 steps with 10 cells of work, and 10 steps with 2,000 cells: together 2,001 × 2,002 points, past the limit.
    const long = { ...waiting, timeLeftSeconds: 2000 * step, workLeftSeconds: 10 * step };
    const heavy = { ...waiting, timeLeftSeconds: 10 * step, workLeftSeconds: 2000 * step };
    expect(2001 * 2002).toBeGreaterThan(MAX_PLAN_GRID_POINTS);
    const forLong = spotPlanFor(long, side);
    const forHeavy = spotPlanFor(heavy, side);
    expect(forHeavy).not.toBe(forLong);
    expect(forHeavy.parameters).toMatchObject({ horizonSteps: 10, maxWorkSeconds: 2000 * step });
    // The next round of decisions finds both plans: neither replaced the other.
    expect(spotPlanFor(long, side)).toBe(forLong);
    expect(spotPlanFor(heavy, side)).toBe(forHeavy);
    // A job a little longer than the long one's plan grows that plan, not the heavy one's.
    const longer = spotPlanFor({ ...long, timeLeftSeconds: 2100 * step }, side);
    expect(longer.parameters).toMatchObject({ horizonSteps: 3000, maxWorkSeconds: 10 * step });
    expect(spotPlanFor(long, side)).toBe(longer);
    expect(spotPlanFor(heavy, side)).toBe(forHeavy);
  });
});

describe('planFits', () => {
  it('admits plans up to MAX_PLAN_GRID_POINTS grid points: (steps + 1) × (work cells + 1)', () => {
    // 92 h to the deadline (1104 steps of 300 s) and 48 h of work (576 cells): 1105 × 578 points.
    expect(planFits(92 * 3600, 48 * 3600, 300)).toBe(true);
    expect(1105 * 578).toBeLessThanOrEqual(MAX_PLAN_GRID_POINTS);
    // A week to the deadline with 3 days of work: 2017 × 866 points.
    expect(planFits(7 * 86_400, 3 * 86_400, 300)).toBe(false);
    expect(2017 * 866).toBeGreaterThan(MAX_PLAN_GRID_POINTS);
  });
});
