import { describe, expect, it } from 'vitest';
import {
  breakEvenRate,
  DEFAULT_SPOT_ASSUMPTIONS,
  estimateCost,
  InvalidEstimateInput,
  poissonQuantile,
} from '../../lambdas/domain/estimator';
import type { TierPrice } from '../../lambdas/domain/prices';

const gpuSmall: TierPrice = {
  tier: 'gpu-small',
  onDemandUsdPerHour: 0.526,
  spotUsdPerHour: 0.19,
  spotSource: 'config-fallback',
  nodes: 1,
};

// Worked by hand for one hour of compute on gpu-small with the defaults (0.1/h, 600 s checkpoints, 300 s restart):
// loss per interruption L = 600/2 + 300 = 600 s; lost fraction ρ = 0.1 × 600 / 3600 = 1/60;
// expected wall time T = 3600 / (1 − 1/60) = 3600 × 60/59 s = 1.016949… h; interruptions m = 0.1 × 60/59 = 0.101695;
// expected spot cost = 60/59 × 0.19 = $0.193220; 95th-percentile count: P(0) = e^−m = 0.9033 < 0.95,
// P(≤1) = 0.9033 × (1 + m) = 0.9952 ≥ 0.95 → 1 interruption → high = (3600 + 600 + 300) s = 1.25 h × 0.19 = $0.2375;
// break-even λ = 3600 × (1 − 0.19/0.526) / 600 = 3.8327 per hour.
const HOUR = {
  expectedHours: 60 / 59,
  expectedCost: (60 / 59) * 0.19,
  interruptions: 0.1 * (60 / 59),
  highUsd: 1.25 * 0.19,
  breakEven: (3600 * (1 - 0.19 / 0.526)) / 600,
};

describe('estimateCost', () => {
  it('never reserves more than the job may spend in the compute the lifecycle lets it run', () => {
    // 10 h asked, 2 h allowed (gpu-small's maxRuntime): 2 h at the dearest price the job can pay, on-demand $0.526/h.
    const capped = estimateCost(36_000, gpuSmall, { maxComputeSeconds: 7200 });
    expect(capped.reservationUsd).toBe(1.06); // 2 × 0.526 = 1.052 → up to the cent
    expect(capped.reasoning).toMatch(/Reserved: \$1\.06, what 2 h of compute \(the most the job may run\) costs/);
    expect(estimateCost(36_000, gpuSmall).reservationUsd).toBe(5.26);
    // A dearer spot pool than on-demand sets the price; nodes multiply it; a cap above the need changes nothing.
    const pricey = { ...gpuSmall, spotHighUsdPerHour: 0.6, nodes: 2 };
    expect(estimateCost(36_000, pricey, { maxComputeSeconds: 3600 }).reservationUsd).toBe(1.2); // 1 h × 0.6 × 2
    expect(estimateCost(3600, gpuSmall, { maxComputeSeconds: 7200 })).toEqual(estimateCost(3600, gpuSmall));
  });

  it('bills a short job at least the minute every start is billed, in its costs, its reservation and its cap', () => {
    // 10 s of work is billed 60 s a node: on-demand 60/3600 × $0.526 = $0.008767, reserved $0.01; two nodes twice that.
    const short = estimateCost(10, gpuSmall);
    expect(short.onDemand.costUsd).toBeCloseTo((60 / 3600) * 0.526, 12);
    expect(short.onDemand.hours).toBeCloseTo(10 / 3600, 12);
    expect(short.spot?.lowUsd).toBeCloseTo((60 / 3600) * 0.19, 12);
    // A 10 s job's expected spot time is 10 × 60/59 s, billed as 60 s.
    expect(short.spot?.expectedCostUsd).toBeCloseTo((60 / 3600) * 0.19, 12);
    // gpu-multinode's two nodes at $5.672/h: one 10 s attempt is billed 2 × 60 s = $0.189, reserved $0.19.
    const multi: TierPrice = { tier: 'gpu-multinode', onDemandUsdPerHour: 5.672, spotSource: 'not-allowed', nodes: 2 };
    expect(estimateCost(10, multi).reservationUsd).toBe(0.19);
    // A cap of 30 s of compute still leaves one attempt's billed minute: 2 × 60 s at $5.672/h.
    expect(estimateCost(3600, multi, { maxComputeSeconds: 30 }).reservationUsd).toBe(0.19);
    // Past the minute nothing changes: an hour is an hour.
    expect(estimateCost(3600, gpuSmall).onDemand.costUsd).toBe(0.526);
  });

  it('computes expected spot time and cost with Poisson interruptions', () => {
    const e = estimateCost(3600, gpuSmall);
    expect(e.onDemand).toEqual({ costUsd: 0.526, hours: 1 });
    expect(e.spot?.expectedHours).toBeCloseTo(HOUR.expectedHours, 12);
    expect(e.spot?.expectedCostUsd).toBeCloseTo(HOUR.expectedCost, 12);
    expect(e.spot?.expectedInterruptions).toBeCloseTo(HOUR.interruptions, 12);
    expect(e.spot?.lowUsd).toBeCloseTo(0.19, 12);
    expect(e.spot?.highUsd).toBeCloseTo(HOUR.highUsd, 12);
    expect(e.spot?.breakEvenInterruptionsPerHour).toBeCloseTo(HOUR.breakEven, 12);
    expect(e.recommendation).toBe('spot');
    expect(e.reasoning).toBe(
      'Spot: $0.19 expected on spot over 61 min with 0.102 interruptions vs $0.53 on-demand; spot stays cheaper until 3.83 interruptions per hour.',
    );
    // max($0.526 on-demand, $0.2375 spot high) rounded up to the cent.
    expect(e.reservationUsd).toBe(0.53);
    expect(e.assumptions).toEqual(DEFAULT_SPOT_ASSUMPTIONS);
  });

  it.each([
    {
      name: 'spot when the deadline is met even in the high case',
      deadline: 4600, // high case 4500 s
      recommendation: 'spot',
      reasoning:
        'Spot: $0.19 expected on spot over 61 min with 0.102 interruptions vs $0.53 on-demand and meets the 76.7 min deadline with margin; spot stays cheaper until 3.83 interruptions per hour.',
    },
    {
      name: 'spot with fallback when the expected time meets the deadline but the high case does not',
      deadline: 3700, // expected 3661 s ≤ 3700 < 4500 s
      recommendation: 'spot-with-fallback',
      reasoning:
        'Spot with on-demand fallback: $0.19 expected on spot over 61 min with 0.102 interruptions vs $0.53 on-demand, but 1 interruption (the 95th percentile) would take 75 min, past the 61.7 min deadline; spot stays cheaper until 3.83 interruptions per hour.',
    },
    {
      name: 'on-demand when the expected spot time breaks the deadline',
      deadline: 3650, // expected 3661 s > 3650
      recommendation: 'on-demand',
      reasoning:
        'On-demand: the expected spot time 61 min breaks the 60.8 min deadline ($0.19 expected on spot over 61 min with 0.102 interruptions vs $0.53 on-demand); spot stays cheaper until 3.83 interruptions per hour.',
    },
  ])('$name', ({ deadline, recommendation, reasoning }) => {
    const e = estimateCost(3600, gpuSmall, { deadlineSeconds: deadline });
    expect(e.recommendation).toBe(recommendation);
    expect(e.reasoning).toBe(reasoning);
  });

  it('recommends on-demand when spot is not allowed and reserves the on-demand cost of every node', () => {
    const multinode: TierPrice = {
      tier: 'gpu-multinode',
      onDemandUsdPerHour: 5.672,
      spotSource: 'not-allowed',
      nodes: 2,
    };
    const e = estimateCost(1800, multinode);
    // 0.5 h × $5.672 × 2 nodes = $5.672 → reserve $5.68 (rounded up to the cent).
    expect(e.onDemand).toEqual({ costUsd: 5.672, hours: 0.5 });
    expect(e.spot).toBeUndefined();
    expect(e.recommendation).toBe('on-demand');
    expect(e.reasoning).toBe('On-demand ($5.67 on-demand) because tier gpu-multinode does not allow spot.');
    expect(e.reservationUsd).toBe(5.68);
  });

  it('recommends on-demand when interruptions make spot dearer, and gives the break-even', () => {
    // λ = 1/h, L = 600 s: ρ = 1/6, T = 1.2 h, spot $0.5 × 1.2 = $0.60 > $0.526; break-even 6 × (1 − 0.5/0.526).
    const e = estimateCost(3600, { ...gpuSmall, spotUsdPerHour: 0.5 }, { assumptions: { interruptionsPerHour: 1 } });
    expect(e.spot?.expectedCostUsd).toBeCloseTo(0.6, 12);
    expect(e.recommendation).toBe('on-demand');
    expect(e.reasoning).toBe(
      'On-demand: $0.60 expected on spot over 72 min with 1.2 interruptions vs $0.53 on-demand; spot stays cheaper until 0.297 interruptions per hour.',
    );
    // 95th percentile of Poisson(1.2) is 3 (CDF 0.301, 0.663, 0.879, 0.966): 3600 + 3 × 900 s = 1.75 h × $0.5.
    expect(e.spot?.highUsd).toBeCloseTo(0.875, 12);
    expect(e.reservationUsd).toBe(0.88);
  });

  it('prices the high figure and the reservation at the dearest spot pool, the rest at the cheapest', () => {
    // Same hour as HOUR, but the tier's pools range from $0.19 to $0.48: expected and low stay at $0.19; the
    // 95th-percentile run (1.25 h, worked out above) at $0.48 is $0.60, above the $0.526 on-demand cost.
    const e = estimateCost(3600, { ...gpuSmall, spotHighUsdPerHour: 0.48 });
    expect(e.spot?.expectedCostUsd).toBeCloseTo(HOUR.expectedCost, 12);
    expect(e.spot?.lowUsd).toBeCloseTo(0.19, 12);
    expect(e.spot?.highUsd).toBeCloseTo(1.25 * 0.48, 12);
    expect(e.reservationUsd).toBe(0.6);
  });

  it('recommends on-demand when a spot run could never finish', () => {
    // 6 interruptions/h × 600 s lost each = the whole hour.
    const e = estimateCost(3600, gpuSmall, { assumptions: { interruptionsPerHour: 6 } });
    expect(e.spot).toBeUndefined();
    expect(e.recommendation).toBe('on-demand');
    expect(e.reasoning).toBe(
      'On-demand ($0.53 on-demand) because at 6 interruptions per hour, each losing 10 min, a spot run would never finish; spot stays cheaper until 3.83 interruptions per hour.',
    );
    expect(e.reservationUsd).toBe(0.53);
  });

  it('scales the interruption rate and the cost with the node count', () => {
    // 2 nodes: job rate 0.2/h, ρ = 0.2 × 600/3600 = 1/30, T = 3600 × 30/29 s; cost = 30/29 h × 0.19 × 2.
    const e = estimateCost(3600, gpuSmall, { nodes: 2 });
    expect(e.nodes).toBe(2);
    expect(e.onDemand.costUsd).toBeCloseTo(1.052, 12);
    expect(e.spot?.expectedCostUsd).toBeCloseTo((30 / 29) * 0.38, 12);
    expect(e.spot?.expectedInterruptions).toBeCloseTo(0.2 * (30 / 29), 12);
    // Break-even per node-hour halves: 3600 × (1 − 0.19/0.526) / (2 × 600).
    expect(e.spot?.breakEvenInterruptionsPerHour).toBeCloseTo(HOUR.breakEven / 2, 12);
  });

  it('treats a run that loses nothing per interruption as always cheaper on spot', () => {
    const e = estimateCost(7200, gpuSmall, {
      assumptions: { checkpointIntervalSeconds: 0, restartOverheadSeconds: 0 },
    });
    expect(e.spot?.expectedHours).toBe(2);
    expect(e.spot?.breakEvenInterruptionsPerHour).toBe(Number.POSITIVE_INFINITY);
    expect(e.reasoning).toMatch(
      /; spot stays cheaper at any interruption rate \(nothing is lost per interruption\)\.$/,
    );
  });

  it('reports unknown spot prices as on-demand', () => {
    const e = estimateCost(600, { tier: 'gpu-x', onDemandUsdPerHour: 1, spotSource: 'config-fallback' });
    expect(e.recommendation).toBe('on-demand');
    expect(e.reasoning).toBe('On-demand ($0.17 on-demand) because no spot price is known for gpu-x.');
    expect(e.reservationUsd).toBe(0.17);
  });

  it.each([
    { run: () => estimateCost(-1, gpuSmall), message: 'runtimeSeconds must be a finite number >= 0, got -1' },
    { run: () => estimateCost(Number.NaN, gpuSmall), message: 'runtimeSeconds must be a finite number >= 0, got NaN' },
    { run: () => estimateCost(60, gpuSmall, { nodes: 0 }), message: 'nodes must be an integer >= 1, got 0' },
    {
      run: () => estimateCost(60, gpuSmall, { assumptions: { interruptionsPerHour: -0.1 } }),
      message: 'assumptions.interruptionsPerHour must be a finite number >= 0, got -0.1',
    },
    {
      run: () => estimateCost(60, gpuSmall, { deadlineSeconds: 0 }),
      message: 'deadlineSeconds must be a finite number > 0, got 0',
    },
    {
      run: () => estimateCost(60, { ...gpuSmall, spotUsdPerHour: -1 }),
      message: 'spotUsdPerHour must be a finite number > 0, got -1',
    },
    {
      run: () => estimateCost(60, { ...gpuSmall, spotHighUsdPerHour: 0.1 }),
      message: 'spotHighUsdPerHour must be a finite number >= spotUsdPerHour (0.19), got 0.1',
    },
  ])('rejects bad input: $message', ({ run, message }) => {
    expect(run).toThrow(new InvalidEstimateInput(message));
  });
});

describe('poissonQuantile and breakEvenRate', () => {
  it.each([
    [0, 0],
    // P(0) = 0.607, P(≤1) = 0.910, P(≤2) = 0.986.
    [0.5, 2],
    // P(≤2) = 0.920, P(≤3) = 0.981.
    [1, 3],
    // Normal approximation above a mean of 500: 1000 + 1.6449 × √1000 = 1052.01 → 1053.
    [1000, 1053],
  ])('95th percentile of Poisson(%s) is %s', (mean, k) => {
    expect(poissonQuantile(mean, 0.95)).toBe(k);
  });

  it.each([
    { spot: 0.19, onDemand: 0.526, loss: 600, nodes: 1, expected: (3600 * (1 - 0.19 / 0.526)) / 600 },
    { spot: 0.6, onDemand: 0.526, loss: 600, nodes: 1, expected: 0 },
    { spot: 0.2, onDemand: 1, loss: 1800, nodes: 4, expected: (3600 * 0.8) / (4 * 1800) },
  ])(
    'break-even for spot $spot vs on-demand $onDemand, $loss s lost, $nodes nodes',
    ({ spot, onDemand, loss, nodes, expected }) => {
      expect(breakEvenRate(spot, onDemand, loss, nodes)).toBeCloseTo(expected, 12);
    },
  );
});
