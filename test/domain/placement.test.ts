import { describe, expect, it } from 'vitest';
import {
  type Capacity,
  decidePlacement,
  InvalidPlacementInput,
  type PlacementPolicyConfig,
  type PlacementState,
} from '../../lambdas/domain/placement';

// d = 360 s, check = 300 s → safety slack = 2·360 + 300 = 1020 s (plus 360 s when spot must be started).
const config: PlacementPolicyConfig = {
  reclaimsBeforeOnDemand: 2,
  capacityWaitSeconds: 1200,
  restartOverheadSeconds: 360,
  checkIntervalSeconds: 300,
  deadlineReserveFraction: 0.1,
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

// Deadline 100 000 s, work 50 000 s, reserve cap 0.1·50 000 = 5 000 s. The line at t is
// min(0.5·t, 50 000 − (100 000 − t) + 5 000): at t = 90 000 both give 45 000, at t = 40 000 the cap gives −5 000.
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
    // line(90 000) = 45 000 > 44 000: behind; slack = 10 000 − 6 000 = 4 000 s, still safe
    rule: 'deadline behind pace: on-demand after a capacity cancellation',
    state: { deadlineSeconds: 100_000, moment: 'capacity-cancelled', nowSeconds: 90_000, progressSeconds: 44_000 },
    capacity: 'on-demand',
    move: false,
  },
  {
    rule: 'deadline ahead of pace: a capacity cancellation re-queues on spot',
    state: { deadlineSeconds: 100_000, moment: 'capacity-cancelled', nowSeconds: 90_000, progressSeconds: 46_000 },
    capacity: 'spot',
    move: false,
  },
  {
    rule: 'periodic check: a job waiting for spot while behind pace moves to on-demand',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'none',
      spotAvailable: false,
      nowSeconds: 90_000,
      progressSeconds: 44_000,
    },
    capacity: 'on-demand',
    move: true,
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
    // line(80 000 + 720) = min(40 360, 35 720) = 35 720 ≤ 36 000: ahead; slack 6 000 − 360 ≥ 1 020
    rule: 'periodic check: on-demand moves back to spot when spot is observed and the job is comfortably ahead',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      nowSeconds: 80_000,
      progressSeconds: 36_000,
    },
    capacity: 'spot',
    move: true,
  },
  {
    rule: 'periodic check: on-demand stays when the job is not ahead of pace',
    state: {
      deadlineSeconds: 100_000,
      moment: 'periodic-check',
      current: 'on-demand',
      spotAvailable: true,
      nowSeconds: 80_000,
      progressSeconds: 35_000,
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

  it('uses UP’s line when it is below the capped reserve line (tight deadline)', () => {
    // Deadline 520 000, work 480 000, cap 48 000 > slack 40 000: at t = 260 000 the UP line is 240 000 and the capped
    // line 268 000, so the UP line applies: progress 230 000 (slack 10 000 s, safe) is behind and a waiting job moves
    // to on-demand; 245 000 is ahead and keeps waiting for spot.
    const at = (progressSeconds: number) =>
      decidePlacement(
        {
          ...base,
          workSeconds: 480_000,
          deadlineSeconds: 520_000,
          moment: 'periodic-check',
          current: 'none',
          spotAvailable: false,
          nowSeconds: 260_000,
          progressSeconds,
        },
        config,
      );
    expect(at(230_000)).toMatchObject({ capacity: 'on-demand', move: true });
    expect(at(245_000)).toMatchObject({ capacity: 'spot', move: false });
  });

  it.each([
    [{ nowSeconds: -1 }, 'state.nowSeconds must be a finite number >= 0, got -1'],
    [{ workSeconds: Number.NaN }, 'state.workSeconds must be a finite number >= 0, got NaN'],
    [{ deadlineSeconds: -5 }, 'state.deadlineSeconds must be a finite number >= 0, got -5'],
  ] as const)('refuses impossible state %o', (patch, message) => {
    expect(() => decidePlacement({ ...base, ...patch }, config)).toThrow(new InvalidPlacementInput(message));
  });

  it('refuses a config with zero reclaims before on-demand', () => {
    expect(() => decidePlacement(base, { ...config, reclaimsBeforeOnDemand: 0 })).toThrow(
      'config.reclaimsBeforeOnDemand must be a finite number >= 1, got 0',
    );
  });
});
