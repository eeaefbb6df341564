import { describe, expect, it } from 'vitest';
import {
  type Capacity,
  DEADLINE_TUNING,
  decidePlacement,
  InvalidPlacementInput,
  NO_SPOT_HISTORY,
  type PlacementPolicyConfig,
  type PlacementState,
  type SpotPlanning,
  slackReserve,
  spotHistoryOf,
  type TierSpot,
  withTierSpot,
} from '../../lambdas/domain/placement';
import { FLEET_SPOT_MODEL } from '../../lambdas/domain/spot-fleet-model';
import { type PlanState, spotPlanFor } from '../../lambdas/domain/spot-planner';

// d = 360 s, check = 300 s → safety slack = 2·360 + 300 = 1020 s (plus 360 s when spot must be started).
// Tuning spelled out so the expectations below can be worked by hand: with no history the job expects spot 60 % of
// the time and 0.25 reclaims an hour, so reserve(T) = max(0.25·0.4·T, 1020 + (0.25/3600)·T·2·360)
// = max(0.1·T, 1020 + 0.05·T).
const config: PlacementPolicyConfig = {
  reclaimsBeforeOnDemand: 2,
  capacityWaitSeconds: 1200,
  restartOverheadSeconds: 360,
  checkIntervalSeconds: 300,
  deadline: {
    priorAvailability: 0.6,
    priorReclaimsPerHour: 0.25,
    priorWeightHours: 24,
    unavailabilityReserveFactor: 0.25,
    restartReserveFactor: 1,
    returnHoldRestarts: 2,
  },
};

const base: PlacementState = {
  moment: 'submit',
  nowSeconds: 0,
  workSeconds: 50_000,
  progressSeconds: 0,
  current: 'none',
  reclaims: 0,
  capacityCancellations: 0,
  spotAllowed: true,
};

interface Row {
  rule: string;
  state: Partial<PlacementState>;
  capacity: Capacity;
  move: boolean;
}

// Deadline 100 000 s, work 50 000 s. At t = 40 000 (T = 60 000) the reserve is max(6 000, 4 020) = 6 000 s; at
// t = 90 000 (T = 10 000) it is max(1 000, 1 520) = 1 520 s.
const rows: Row[] = [
  {
    rule: 'spot never when spot is not allowed (submit)',
    state: { spotAllowed: false },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'spot never when spot is not allowed (periodic check moves a spot attempt)',
    state: { spotAllowed: false, moment: 'periodic-check', current: 'spot', spotAvailable: true },
    capacity: 'on-demand',
    move: true,
  },
  { rule: 'no deadline: spot first', state: {}, capacity: 'spot', move: false },
  {
    rule: 'no deadline: resume on spot after a reclaim below the limit',
    state: { moment: 'attempt-reclaimed', current: 'spot', reclaims: 1 },
    capacity: 'spot',
    move: false,
  },
  {
    rule: 'no deadline: on-demand after reclaimsBeforeOnDemand reclaims',
    state: { moment: 'attempt-reclaimed', current: 'spot', reclaims: 2 },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'no deadline: on-demand after a capacity cancellation',
    state: { moment: 'capacity-cancelled', capacityCancellations: 1 },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'no deadline: back to spot at a periodic check once spot capacity is observed',
    state: { moment: 'periodic-check', current: 'on-demand', spotAvailable: true, progressSeconds: 1000 },
    capacity: 'spot',
    move: true,
  },
  {
    rule: 'no deadline: stays on on-demand while spot is not observed',
    state: { moment: 'periodic-check', current: 'on-demand', spotAvailable: false },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'no deadline: stays on on-demand when spot availability is unknown',
    state: { moment: 'periodic-check', current: 'on-demand' },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'deadline with slack: spot first',
    state: { deadlineSeconds: 100_000 },
    capacity: 'spot',
    move: false,
  },
  {
    // slack 1 000 s − 360 s start = 640 s < 1 020 s
    rule: 'deadline too tight for spot: on-demand from the start',
    state: { deadlineSeconds: 51_000 },
    capacity: 'on-demand',
    move: false,
  },
  {
    // slack = 100 000 − 40 000 − 40 000 = 20 000 s, on pace
    rule: 'deadline on pace: resume on spot after a reclaim',
    state: {
      deadlineSeconds: 100_000,
      moment: 'attempt-reclaimed',
      nowSeconds: 40_000,
      progressSeconds: 10_000,
      reclaims: 1,
    },
    capacity: 'spot',
    move: false,
  },
  {
    rule: 'deadline on pace: reclaim counts do not force on-demand (the slack decides)',
    state: {
      deadlineSeconds: 100_000,
      moment: 'attempt-reclaimed',
      nowSeconds: 40_000,
      progressSeconds: 10_000,
      reclaims: 5,
    },
    capacity: 'spot',
    move: false,
  },
  {
    // slack = 100 000 − 98 000 − 1 000 = 1 000 s; 1 000 − 360 < 1 020
    rule: 'deadline can no longer be met on spot: on-demand after a reclaim',
    state: { deadlineSeconds: 100_000, moment: 'attempt-reclaimed', nowSeconds: 98_000, progressSeconds: 49_000 },
    capacity: 'on-demand',
    move: false,
  },
  {
    // slack = 10 000 − 8 600 = 1 400 s < reserve 1 520 s; 1 400 − 360 ≥ 1 020, so still safe for spot
    rule: 'deadline slack under its reserve: on-demand after a capacity cancellation',
    state: { deadlineSeconds: 100_000, moment: 'capacity-cancelled', nowSeconds: 90_000, progressSeconds: 41_400 },
    capacity: 'on-demand',
    move: false,
  },
  {
    // slack 4 000 s ≥ reserve 1 520 s
    rule: 'deadline slack above its reserve: a capacity cancellation re-queues on spot',
    state: { deadlineSeconds: 100_000, moment: 'capacity-cancelled', nowSeconds: 90_000, progressSeconds: 46_000 },
    capacity: 'spot',
    move: false,
  },
  {
    rule: 'periodic check: a job waiting for spot with the slack under its reserve moves to on-demand',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'none',
      spotAvailable: false,
      nowSeconds: 90_000,
      progressSeconds: 41_400,
    },
    capacity: 'on-demand',
    move: true,
  },
  {
    // The same slack, but spot is seen available: the queued attempt is starting (its instance booting), not waiting.
    rule: 'periodic check: a queued job with the slack under its reserve stays while spot is seen available',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'none',
      spotAvailable: true,
      nowSeconds: 90_000,
      progressSeconds: 41_400,
    },
    capacity: 'spot',
    move: false,
  },
  {
    // slack = 100 000 − 99 000 − 500 = 500 s < 1 020 s even without a restart
    rule: 'periodic check: a spot job that can no longer absorb a reclaim moves to on-demand',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'spot',
      spotAvailable: true,
      nowSeconds: 99_000,
      progressSeconds: 49_500,
    },
    capacity: 'on-demand',
    move: true,
  },
  {
    rule: 'periodic check: a spot job on pace stays',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'spot',
      spotAvailable: true,
      nowSeconds: 50_000,
      progressSeconds: 30_000,
    },
    capacity: 'spot',
    move: false,
  },
  {
    // hold = 2·360 = 720 s; slack 6 000 − 360 ≥ 1 020
    rule: 'periodic check: on-demand moves back to spot once spot has been available for two restart overheads',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      spotAvailableForSeconds: 720,
      nowSeconds: 80_000,
      progressSeconds: 36_000,
    },
    capacity: 'spot',
    move: true,
  },
  {
    rule: 'periodic check: on-demand stays while spot has been available for less than the hold',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      spotAvailableForSeconds: 600,
      nowSeconds: 80_000,
      progressSeconds: 36_000,
    },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'periodic check: on-demand stays when the probe saw spot but not for how long',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      nowSeconds: 80_000,
      progressSeconds: 36_000,
    },
    capacity: 'on-demand',
    move: false,
  },
  {
    // slack = 20 000 − 18 700 = 1 300 s; 1 300 − 360 < 1 020: the restart would eat the safety net
    rule: 'periodic check: on-demand stays when the slack cannot pay for the restart to spot',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      spotAvailableForSeconds: 3_600,
      nowSeconds: 80_000,
      progressSeconds: 31_300,
    },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'periodic check: on-demand stays when spot is not observed',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: false,
      spotAvailableForSeconds: 3_600,
      nowSeconds: 80_000,
      progressSeconds: 45_000,
    },
    capacity: 'on-demand',
    move: false,
  },
];

describe('decidePlacement', () => {
  it.each(rows)('$rule', ({ state, capacity, move }) => {
    const decision = decidePlacement({ ...base, ...state }, config);
    expect(decision.capacity).toBe(capacity);
    expect(decision.move).toBe(move);
    expect(decision.reason.length).toBeGreaterThan(10);
  });

  // t = 40 000 (T = 60 000), progress 0: slack 10 000 s. With no history the reserve is 6 000 s, so the job waits for
  // spot after a reclaim; what it has observed can raise the reserve above its slack.
  const reclaimedAt40k = (spotHistory: PlacementState['spotHistory']) =>
    decidePlacement(
      { ...base, deadlineSeconds: 100_000, moment: 'attempt-reclaimed', nowSeconds: 40_000, spotHistory },
      config,
    );

  it('waits for spot on the prior alone when the slack is above the prior reserve', () => {
    expect(reclaimedAt40k(undefined)).toMatchObject({ capacity: 'spot' });
    expect(reclaimedAt40k(NO_SPOT_HISTORY)).toMatchObject({ capacity: 'spot' });
  });

  it('covers the outage sooner after seeing little spot', () => {
    // 24 h queued, never ran: availability (0 + 0.6·86 400) / 172 800 = 0.3, reserve 0.25·0.7·60 000 = 10 500 s.
    expect(reclaimedAt40k({ availableSeconds: 0, unavailableSeconds: 86_400, reclaims: 0 })).toMatchObject({
      capacity: 'on-demand',
    });
  });

  it('keeps slack for restarts after seeing many reclaims', () => {
    // 24 h running with 30 reclaims: (30 + 6) / 172 800 reclaims per second, reserve 1 020 + (36/172 800)·60 000·720
    // = 10 020 s > 10 000 s; availability 0.8 alone would ask only 0.25·0.2·60 000 = 3 000 s.
    expect(reclaimedAt40k({ availableSeconds: 86_400, unavailableSeconds: 0, reclaims: 30 })).toMatchObject({
      capacity: 'on-demand',
    });
    expect(reclaimedAt40k({ availableSeconds: 86_400, unavailableSeconds: 0, reclaims: 20 })).toMatchObject({
      capacity: 'spot',
    });
  });

  it('sizes the reserve as the larger of the unavailability and restart terms', () => {
    const tuning = { ...DEADLINE_TUNING, ...config.deadline };
    expect(slackReserve(NO_SPOT_HISTORY, 60_000, 1_020, 360, tuning)).toBeCloseTo(6_000, 6);
    expect(slackReserve(NO_SPOT_HISTORY, 10_000, 1_020, 360, tuning)).toBeCloseTo(1_520, 6);
  });

  it.each([
    [{ nowSeconds: -1 }, 'state.nowSeconds must be a finite number >= 0, got -1'],
    [{ workSeconds: Number.NaN }, 'state.workSeconds must be a finite number >= 0, got NaN'],
    [{ deadlineSeconds: -5 }, 'state.deadlineSeconds must be a finite number >= 0, got -5'],
    [{ spotAvailableForSeconds: -1 }, 'state.spotAvailableForSeconds must be a finite number >= 0, got -1'],
    [
      { spotHistory: { availableSeconds: 10, unavailableSeconds: Number.POSITIVE_INFINITY, reclaims: 0 } },
      'state.spotHistory.unavailableSeconds must be a finite number >= 0, got Infinity',
    ],
  ] as const)('refuses impossible state %o', (patch, message) => {
    expect(() => decidePlacement({ ...base, ...patch }, config)).toThrow(new InvalidPlacementInput(message));
  });

  it('refuses a config with zero reclaims before on-demand', () => {
    expect(() => decidePlacement(base, { ...config, reclaimsBeforeOnDemand: 0 })).toThrow(
      'config.reclaimsBeforeOnDemand must be a finite number >= 1, got 0',
    );
  });

  it('refuses a negative deadline tuning value', () => {
    expect(() => decidePlacement(base, { ...config, deadline: { returnHoldRestarts: -1 } })).toThrow(
      'config.deadline.returnHoldRestarts must be a finite number >= 0, got -1',
    );
  });
});

describe('decidePlacement: the deadline safety net and a running job', () => {
  // Deadline 60 000 s, d = 360 s, check 300 s: the safety net asks for 2·360 + 300 = 1 020 s of slack.
  const spotPlan: PlacementPolicyConfig = {
    ...config,
    spotPlanning: { model: { binSeconds: 300, availableHazards: [0], unavailableHazards: [0.5] }, spotPriceRatio: 0.3 },
  };
  const onSpot: PlacementState = {
    ...base,
    deadlineSeconds: 60_000,
    moment: 'periodic-check',
    nowSeconds: 59_700,
    current: 'spot',
    spotAvailable: true,
  };

  it.each([
    { policy: 'the reserve rules', with: config },
    { policy: 'a spot plan', with: spotPlan },
  ])('never stops a running job with no work left, 300 s before its deadline ($policy)', ({ with: policy }) => {
    // Its last save, upload or evaluation is running: a move would add a 360 s restart and miss the deadline.
    const done = { ...onSpot, progressSeconds: 50_000 };
    expect(decidePlacement(done, policy)).toEqual({
      capacity: 'spot',
      move: false,
      reason: 'No work is left: the job stays on spot to finish.',
    });
    expect(decidePlacement({ ...done, current: 'on-demand' }, policy)).toMatchObject({
      capacity: 'on-demand',
      move: false,
    });
  });

  it('keeps a running spot job on spot once its slack is under a restart: on-demand could not make it either', () => {
    // 100 s of work in 400 s: slack 300 s < d. On-demand would spend 360 s starting and 100 s working.
    expect(decidePlacement({ ...onSpot, nowSeconds: 59_600, progressSeconds: 49_900 }, config)).toEqual({
      capacity: 'spot',
      move: false,
      reason:
        'Deadline: slack 300 s is less than a 360 s restart, so on-demand could not finish in time either: the job stays on spot.',
    });
    // Slack 500 s: on-demand can still finish (360 + 100 < 600), so the safety net moves it, as before.
    expect(decidePlacement({ ...onSpot, nowSeconds: 59_400, progressSeconds: 49_900 }, config)).toMatchObject({
      capacity: 'on-demand',
      move: true,
    });
  });

  it('still moves a queued attempt with no work left to on-demand when the slack runs out', () => {
    // Queued: spot is not there for it, so waiting on may miss the deadline; on-demand restores and finishes.
    const queued = { ...onSpot, nowSeconds: 59_000, progressSeconds: 50_000, spotAvailable: false };
    expect(decidePlacement(queued, config)).toMatchObject({ capacity: 'on-demand', move: true });
  });
});

describe('decidePlacement without a spot probe on on-demand', () => {
  it('keeps no reserve beyond the safety net, since an on-demand job could not come back', () => {
    // t = 90 000, progress 41 400: slack 1 400 s. With the probe the reserve is 1 520 s (on-demand); without it the
    // reserve is the safety net, 1 020 s, and 1 400 − 360 ≥ 1 020 still allows waiting for spot.
    const state: PlacementState = {
      ...base,
      deadlineSeconds: 100_000,
      moment: 'attempt-reclaimed',
      nowSeconds: 90_000,
      progressSeconds: 41_400,
    };
    expect(decidePlacement(state, config).capacity).toBe('on-demand');
    expect(decidePlacement(state, { ...config, spotVisibleOnDemand: false }).capacity).toBe('spot');
  });
});

describe('spotHistoryOf', () => {
  const t0 = 1_700_000_000_000;
  it('counts queue waits as unavailable, runs as available, and reclaims; on-demand observes nothing', () => {
    const history = spotHistoryOf(
      [
        // queued 10 min, ran 2 h, reclaimed
        {
          capacity: 'spot',
          submittedAt: t0,
          startedAt: t0 + 600_000,
          stoppedAt: t0 + 7_800_000,
          outcome: { kind: 'reclaimed' },
        },
        // queued 20 min, cancelled by the queue without starting
        {
          capacity: 'spot',
          submittedAt: t0 + 7_800_000,
          stoppedAt: t0 + 9_000_000,
          outcome: { kind: 'capacity-starved' },
        },
        { capacity: 'on-demand', submittedAt: t0 + 9_000_000, startedAt: t0 + 9_100_000, stoppedAt: t0 + 12_600_000 },
        // still running at now = t0 + 14 400 000: queued 100 s, running 1 700 s so far
        { capacity: 'spot', submittedAt: t0 + 12_600_000, startedAt: t0 + 12_700_000 },
      ],
      t0 + 14_400_000,
    );
    expect(history).toEqual({ availableSeconds: 7_200 + 1_700, unavailableSeconds: 600 + 1_200 + 100, reclaims: 1 });
  });

  it('is empty for a job without attempts', () => {
    expect(spotHistoryOf([], t0)).toEqual({ availableSeconds: 0, unavailableSeconds: 0, reclaims: 0 });
  });
});

describe('decidePlacement with a spot plan', () => {
  // d = 360 s, check = 300 s. Deadline 100 000 s, work 50 000 s: at submission the slack is 50 000 s.
  const planned = (availableHazards: number[], unavailableHazards: number[]): PlacementPolicyConfig => ({
    ...config,
    spotPlanning: { model: { binSeconds: 300, availableHazards, unavailableHazards }, spotPriceRatio: 0.3 },
  });
  // Spot, once there, stays; an outage ends within a check half the time.
  const steady = planned([0], [0.5]);
  // Spot is reclaimed within a check 90 % of the time: a restart onto it never pays.
  const flicker = planned([0.9], [0.5]);
  const deadline: PlacementState = { ...base, deadlineSeconds: 100_000 };
  const onDemand: PlacementState = {
    ...deadline,
    moment: 'periodic-check',
    nowSeconds: 40_000,
    progressSeconds: 30_000,
    current: 'on-demand',
  };

  it('starts on spot and waits for it again after a reclaim or a capacity cancellation while the slack is large', () => {
    expect(decidePlacement(deadline, steady)).toMatchObject({ capacity: 'spot', move: false });
    expect(decidePlacement({ ...deadline, moment: 'attempt-reclaimed', current: 'spot' }, steady)).toMatchObject({
      capacity: 'spot',
      reason: expect.stringContaining('the plan waits for spot again'),
    });
    expect(
      decidePlacement({ ...deadline, moment: 'capacity-cancelled', spotUnavailableForSeconds: 1200 }, steady),
    ).toMatchObject({ capacity: 'spot', move: false });
  });

  it('moves an on-demand job back to spot only when spot is expected to last long enough to pay the restart', () => {
    const seen = { ...onDemand, spotAvailable: true, spotAvailableForSeconds: 600 };
    expect(decidePlacement(seen, steady)).toMatchObject({
      capacity: 'spot',
      move: true,
      reason: expect.stringContaining('the plan rates spot cheaper: move back to spot'),
    });
    expect(decidePlacement(seen, flicker)).toMatchObject({
      capacity: 'on-demand',
      move: false,
      reason: expect.stringContaining('the plan keeps the job on on-demand'),
    });
  });

  it('never stops a job with no work left, nor moves one back to spot whose work left cannot pay the restart', () => {
    const seen = { ...onDemand, spotAvailable: true, spotAvailableForSeconds: 600 };
    // Done (its last save or upload running): stays where it runs, on-demand or spot.
    expect(decidePlacement({ ...seen, progressSeconds: 50_000 }, steady)).toMatchObject({
      capacity: 'on-demand',
      move: false,
      reason: 'No work is left: the job stays on on-demand to finish.',
    });
    expect(
      decidePlacement({ ...seen, current: 'spot', progressSeconds: 50_000, spotAvailable: true }, steady),
    ).toMatchObject({ capacity: 'spot', move: false });
    // 100 s left: on spot it would cost (100 + 360) × 0.3 = 138 on-demand seconds, more than the 100 it costs as is.
    expect(decidePlacement({ ...seen, progressSeconds: 49_900 }, steady)).toMatchObject({
      capacity: 'on-demand',
      move: false,
      reason: '100 s of work left cannot pay for a 360 s restart on spot: the job finishes on on-demand.',
    });
    // 600 s left: (600 + 360) × 0.3 = 288 < 600, so the plan decides, and moves it.
    expect(decidePlacement({ ...seen, progressSeconds: 49_400 }, steady)).toMatchObject({
      capacity: 'spot',
      move: true,
    });
  });

  it('keeps an on-demand job running through an outage the plan would wait out in the queue', () => {
    // 20 000 s of work in 60 000 s: the plan itself rates waiting cheaper, since an outage ends within a check half the
    // time and spot then stays at 0.3 of the price.
    const out = { ...onDemand, spotAvailable: false, spotUnavailableForSeconds: 600 };
    const planState: PlanState = {
      timeLeftSeconds: 60_000,
      workLeftSeconds: 20_000,
      held: 'on-demand',
      spotAvailable: false,
      stateAgeSeconds: 600,
    };
    const { model, spotPriceRatio } = steady.spotPlanning as SpotPlanning;
    const parameters = { stepSeconds: 300, restartOverheadSeconds: 360, spotPriceRatio, model };
    expect(spotPlanFor(planState, parameters).decide(planState)).toBe('spot');
    expect(decidePlacement(out, steady)).toEqual({
      capacity: 'on-demand',
      move: false,
      reason: 'With slack 40000 s and spot unavailable for 600 s, the job stays on on-demand until spot is back.',
    });
    // The tier's record alone says the same (the job sees nothing itself on on-demand).
    const recorded = { ...onDemand, tierSpot: { available: false, forSeconds: 600, sinceChange: true } };
    expect(decidePlacement(recorded, steady)).toMatchObject({ capacity: 'on-demand', move: false });
  });

  it('keeps an on-demand job where it is while the probe cannot tell', () => {
    expect(decidePlacement(onDemand, steady)).toEqual({
      capacity: 'on-demand',
      move: false,
      reason: 'Spot capacity cannot be observed now: stay on on-demand.',
    });
  });

  it('keeps the safety net in front of the plan', () => {
    // At t = 98 000 with 1 000 s of work left the slack is 1 000 s, under 2·360 + 300 + 360: on-demand now.
    const late = { ...deadline, moment: 'periodic-check' as const, nowSeconds: 98_000, progressSeconds: 49_000 };
    expect(decidePlacement({ ...late, current: 'spot', spotAvailable: true }, steady)).toMatchObject({
      capacity: 'on-demand',
      move: true,
      reason: expect.stringContaining('can no longer absorb a spot restart'),
    });
  });

  it('leaves jobs without a deadline to the count rules, and rejects a price ratio outside (0, 1] or a negative risk aversion', () => {
    expect(
      decidePlacement({ ...base, moment: 'attempt-reclaimed', current: 'spot', reclaims: 2 }, steady),
    ).toMatchObject({ capacity: 'on-demand' });
    const bad = {
      ...planned([0], [0.5]),
      spotPlanning: { ...(steady.spotPlanning as SpotPlanning), spotPriceRatio: 0 },
    };
    expect(() => decidePlacement(deadline, bad)).toThrow(
      /config.spotPlanning.spotPriceRatio must lie in \(0, 1\], got 0/,
    );
    const averse = {
      ...planned([0], [0.5]),
      spotPlanning: { ...(steady.spotPlanning as SpotPlanning), riskAversion: -1 },
    };
    expect(() => decidePlacement(deadline, averse)).toThrow(
      /config.spotPlanning.riskAversion must be a finite number >= 0, got -1/,
    );
  });

  it('plans with the configured risk aversion: a gamble on short-lived spot gives way to on-demand', () => {
    // Spot lasts about 50 minutes (reclaimed at 10 % a check), an outage about 4 hours (2 % a check), and each start
    // costs 30 minutes: at 0.3 of the price, spot is cheaper on average, but a run of reclaims and outages can eat the
    // 4 hours of slack and end on on-demand with every restart paid. A risk-neutral plan takes the gamble; one that
    // weighs the spread at 1 per on-demand hour takes the sure price.
    const gamble = (riskAversion: number): PlacementPolicyConfig => ({
      ...config,
      restartOverheadSeconds: 1800,
      spotPlanning: {
        model: { binSeconds: 300, availableHazards: [0.1], unavailableHazards: [0.02] },
        spotPriceRatio: 0.3,
        riskAversion,
      },
    });
    const submit: PlacementState = {
      ...base,
      workSeconds: 20_000,
      deadlineSeconds: 20_000 + 14_400,
      spotAvailable: true,
      spotAvailableForSeconds: 0,
    };
    expect(decidePlacement(submit, gamble(0)).capacity).toBe('spot');
    expect(decidePlacement(submit, gamble(1)).capacity).toBe('on-demand');
  });

  it('keeps the reserve rules for a job too large to plan (a week to the deadline, 3 days of work)', () => {
    const long: PlacementState = {
      ...deadline,
      deadlineSeconds: 7 * 86_400,
      workSeconds: 3 * 86_400,
      moment: 'attempt-reclaimed',
      current: 'spot',
    };
    expect(decidePlacement(long, steady).reason).toContain('reserve');
    expect(decidePlacement(long, steady).reason).not.toContain('plan');
  });
});

describe('withTierSpot', () => {
  const seen = (available: boolean, forSeconds: number, sinceChange = true): TierSpot => ({
    available,
    forSeconds,
    sinceChange,
  });
  const check: PlacementState = { ...base, moment: 'periodic-check', nowSeconds: 7200, deadlineSeconds: 100_000 };
  type Sighting = Pick<PlacementState, 'spotAvailable' | 'spotAvailableForSeconds' | 'spotUnavailableForSeconds'>;
  it.each<{ what: string; state: PlacementState; tier: TierSpot; expected: Sighting }>([
    {
      what: 'on on-demand the record says what spot is and for how long',
      state: { ...check, current: 'on-demand' },
      tier: seen(true, 5400),
      expected: { spotAvailable: true, spotAvailableForSeconds: 5400 },
    },
    {
      what: 'on on-demand an outage the record saw begin has its age',
      state: { ...check, current: 'on-demand' },
      tier: seen(false, 5400),
      expected: { spotAvailable: false, spotUnavailableForSeconds: 5400 },
    },
    {
      what: 'on on-demand an outage the record did not see begin stays of unknown age (taken as old)',
      state: { ...check, current: 'on-demand' },
      tier: seen(false, 5400, false),
      expected: { spotAvailable: false },
    },
    {
      what: 'on spot the state is as old as the older sighting: the record’s',
      state: { ...check, current: 'spot', spotAvailable: true, spotAvailableForSeconds: 600 },
      tier: seen(true, 5400),
      expected: { spotAvailable: true, spotAvailableForSeconds: 5400 },
    },
    {
      what: 'on spot the state is as old as the older sighting: the job’s',
      state: { ...check, current: 'spot', spotAvailable: true, spotAvailableForSeconds: 6000 },
      tier: seen(true, 5400, false),
      expected: { spotAvailable: true, spotAvailableForSeconds: 6000 },
    },
    {
      what: 'in the queue, the outage began before the job queued',
      state: { ...check, current: 'none', spotAvailable: false, spotUnavailableForSeconds: 1200 },
      tier: seen(false, 54_000),
      expected: { spotAvailable: false, spotUnavailableForSeconds: 54_000 },
    },
    {
      what: 'in the queue, an outage the record did not see begin is at least as old as either',
      state: { ...check, current: 'none', spotAvailable: false, spotUnavailableForSeconds: 1200 },
      tier: seen(false, 900, false),
      expected: { spotAvailable: false, spotUnavailableForSeconds: 1200 },
    },
    {
      what: 'in the queue, the job’s own sighting wins over a record that says available',
      state: { ...check, current: 'none', spotAvailable: false, spotUnavailableForSeconds: 1200 },
      tier: seen(true, 5400),
      expected: { spotAvailable: false, spotUnavailableForSeconds: 1200 },
    },
    {
      what: 'at a reclaim the outage is new whatever the record saw before it',
      state: { ...check, moment: 'attempt-reclaimed', current: 'spot', spotAvailable: false },
      tier: seen(false, 54_000),
      expected: { spotAvailable: false },
    },
    {
      what: 'at submission the record says what spot is',
      state: { ...base, deadlineSeconds: 100_000 },
      tier: seen(false, 54_000),
      expected: { spotAvailable: false, spotUnavailableForSeconds: 54_000 },
    },
  ])('$what', ({ state, tier, expected }) => {
    const merged = withTierSpot({ ...state, tierSpot: tier });
    expect({
      spotAvailable: merged.spotAvailable,
      spotAvailableForSeconds: merged.spotAvailableForSeconds,
      spotUnavailableForSeconds: merged.spotUnavailableForSeconds,
    }).toEqual({
      spotAvailable: undefined,
      spotAvailableForSeconds: undefined,
      spotUnavailableForSeconds: undefined,
      ...expected,
    });
  });

  it('is not told to a job without a deadline: on on-demand it stays, whatever the record says', () => {
    const noDeadline: PlacementState = { ...base, moment: 'periodic-check', nowSeconds: 7200, current: 'on-demand' };
    expect(decidePlacement({ ...noDeadline, tierSpot: seen(true, 5400) }, config)).toEqual(
      decidePlacement(noDeadline, config),
    );
    expect(decidePlacement({ ...noDeadline, tierSpot: seen(true, 5400) }, config).capacity).toBe('on-demand');
  });

  it('changes nothing without a record', () => {
    const state: PlacementState = { ...check, current: 'none', spotAvailable: false, spotUnavailableForSeconds: 60 };
    expect(withTierSpot(state)).toBe(state);
  });

  it('rejects a record with a negative or non-finite age, naming it', () => {
    expect(() => decidePlacement({ ...check, current: 'on-demand', tierSpot: seen(true, -1) }, config)).toThrow(
      new InvalidPlacementInput('state.tierSpot.forSeconds must be a finite number >= 0, got -1'),
    );
  });
});

describe('decidePlacement with the tier’s spot record and the fleet model', () => {
  // gpu-small's prices (0.19 / 0.526 $/h), d = 360 s, check 300 s: the deployed planning config.
  const fleet: PlacementPolicyConfig = {
    ...config,
    spotPlanning: { model: FLEET_SPOT_MODEL, spotPriceRatio: 0.19 / 0.526 },
  };
  const longOutage: TierSpot = { available: false, forSeconds: 15 * 3600, sinceChange: true };

  it('starts a job with 1 500 s of slack on on-demand when spot has been out for 15 h, on spot otherwise', () => {
    // Work 3 600 s, deadline 5 100 s: the safety net (1 020 s + a 360 s start) lets it try spot.
    const submit: PlacementState = { ...base, workSeconds: 3600, deadlineSeconds: 5100 };
    expect(decidePlacement(submit, fleet).capacity).toBe('spot');
    expect(decidePlacement({ ...submit, tierSpot: longOutage }, fleet)).toMatchObject({
      capacity: 'on-demand',
      reason: expect.stringContaining('spot unavailable for 54000 s'),
    });
  });

  it('moves a queued 48 h job to on-demand when the outage it queued into is 15 h old, not when it is its own 29 min', () => {
    // Deadline 54 h, queued since 65 s after submission, checked at 1 800 s: slack 19 800 s.
    const queued: PlacementState = {
      ...base,
      moment: 'periodic-check',
      nowSeconds: 1800,
      workSeconds: 48 * 3600,
      deadlineSeconds: 54 * 3600,
      current: 'none',
      spotAvailable: false,
      spotUnavailableForSeconds: 1735,
    };
    expect(decidePlacement(queued, fleet)).toMatchObject({ capacity: 'spot', move: false });
    expect(decidePlacement({ ...queued, tierSpot: longOutage }, fleet)).toMatchObject({
      capacity: 'on-demand',
      move: true,
      reason: expect.stringContaining('spot unavailable for 54000 s'),
    });
  });
});
