/**
 * Cost estimator: expected cost and time of a run on spot (interruptions as a Poisson process, each losing half a
 * checkpoint interval of work plus a restart) versus on-demand, a recommendation with its break-even, and the amount
 * the budget gate should reserve. Pure. Formulas and sources: docs/cost-model.md.
 */
import { formatDuration, formatUsd } from './analysis/format';
import { atLeastMinimumBill, MINIMUM_BILLED_SECONDS } from './metering';
import type { TierPrice } from './prices';

/** What the spot model assumes about interruptions and recovery. */
export interface SpotAssumptions {
  /** Mean spot interruptions per node-hour of running. */
  interruptionsPerHour: number;
  /** Time from an interruption to training again: new instance, image pull, checkpoint restore, seconds. */
  restartOverheadSeconds: number;
  /** Seconds between checkpoints; an interruption loses half of one on average. */
  checkpointIntervalSeconds: number;
}

/**
 * Defaults, each sourced in docs/cost-model.md:
 * - 0.1 interruptions per hour: between AWS Spot Instance Advisor's bands for g4dn/g5 (5-10 % of instances per
 *   month, far lower per hour) and the p3.2xlarge preemption traces in shared/data/spot-traces (0.3-1.2 per running
 *   hour in scarce AZs, 2023); a deliberate middle until metered job summaries give a rate per tier.
 * - 300 s restart: Batch placement and instance launch (~1-2 min), pulling a multi-GB PyTorch GPU image (~2-3 min),
 *   restoring the checkpoint from S3.
 * - 600 s checkpoint interval: the harness's periodic sync; the interruption notice usually saves more, which this
 *   model does not count on (the 2-minute warning is best effort).
 */
export const DEFAULT_SPOT_ASSUMPTIONS: Readonly<SpotAssumptions> = {
  interruptionsPerHour: 0.1,
  restartOverheadSeconds: 300,
  checkpointIntervalSeconds: 600,
};

/** Quantile of the interruption count used for the spot `highUsd` bound. */
export const SPOT_HIGH_QUANTILE = 0.95;

/** The estimate for one run. */
export interface CostEstimate {
  runtimeSeconds: number;
  onDemand: { costUsd: number; hours: number };
  spot?: {
    expectedCostUsd: number;
    expectedHours: number;
    expectedInterruptions: number;
    /** No interruption at all. */
    lowUsd: number;
    /**
     * The 95th-percentile interruption count, each losing a full checkpoint interval plus the restart, priced at the
     * dearest spot pool the tier may land in (spotHighUsdPerHour).
     */
    highUsd: number;
    /** Interruption rate per node-hour at which spot's expected cost equals on-demand. */
    breakEvenInterruptionsPerHour: number;
  };
  recommendation: 'spot' | 'on-demand' | 'spot-with-fallback';
  /** One sentence, with the break-even when spot is priced. */
  reasoning: string;
  /**
   * What the budget gate should reserve: a conservative upper bound, rounded up to the cent, and never more than the
   * job can spend in `maxComputeSeconds` at its dearest price.
   */
  reservationUsd: number;
  /** The assumptions used, defaults filled in. */
  assumptions: SpotAssumptions;
  nodes: number;
}

/** An estimator input is out of range. */
export class InvalidEstimateInput extends Error {
  override name = 'InvalidEstimateInput';
}

/**
 * Estimates on-demand and spot cost of `runtimeSeconds` of uninterrupted compute on a priced tier. `maxComputeSeconds`
 * is the most the lifecycle lets the job run (its tier's maximum runtime over all attempts, and its deadline): the
 * reservation never asks for more than that many seconds at the dearest price the job can pay.
 */
export function estimateCost(
  runtimeSeconds: number,
  price: TierPrice,
  opts: {
    deadlineSeconds?: number;
    assumptions?: Partial<SpotAssumptions>;
    nodes?: number;
    maxComputeSeconds?: number;
  } = {},
): CostEstimate {
  const assumptions: SpotAssumptions = { ...DEFAULT_SPOT_ASSUMPTIONS, ...opts.assumptions };
  const nodes = opts.nodes ?? price.nodes ?? 1;
  validate(runtimeSeconds, price, assumptions, nodes, opts.deadlineSeconds);
  const estimate = estimateUncapped(runtimeSeconds, price, assumptions, nodes, opts.deadlineSeconds);
  const cap = opts.maxComputeSeconds;
  if (cap === undefined) return estimate;
  const dearest = Math.max(price.onDemandUsdPerHour, price.spotHighUsdPerHour ?? 0, price.spotUsdPerHour ?? 0);
  const most = ceilCents((atLeastMinimumBill(cap) / 3600) * dearest * nodes);
  if (estimate.reservationUsd <= most) return estimate;
  return {
    ...estimate,
    reservationUsd: most,
    reasoning: `${estimate.reasoning} Reserved: ${formatUsd(most)}, what ${formatDuration(cap)} of compute (the most the job may run) costs at ${formatUsd(dearest)}/h${nodes > 1 ? ` × ${nodes} nodes` : ''}.`,
  };
}

function estimateUncapped(
  runtimeSeconds: number,
  price: TierPrice,
  assumptions: SpotAssumptions,
  nodes: number,
  deadline: number | undefined,
): CostEstimate {
  const onDemandHours = runtimeSeconds / 3600;
  const onDemandCost = (atLeastMinimumBill(runtimeSeconds) / 3600) * price.onDemandUsdPerHour * nodes;
  const onDemand = { costUsd: onDemandCost, hours: onDemandHours };
  const base = { runtimeSeconds, onDemand, assumptions, nodes };
  const reserveOnDemand = ceilCents(onDemandCost);
  const odText = `${formatUsd(onDemandCost)} on-demand`;

  const spotPrice = price.spotUsdPerHour;
  if (price.spotSource === 'not-allowed' || spotPrice === undefined) {
    const why =
      price.spotSource === 'not-allowed'
        ? `tier ${price.tier} does not allow spot`
        : `no spot price is known for ${price.tier}`;
    return {
      ...base,
      recommendation: 'on-demand',
      reasoning: `On-demand (${odText}) because ${why}.`,
      reservationUsd: reserveOnDemand,
    };
  }

  const { rate, lossSeconds, lostFraction } = spotLoss(nodes, assumptions);
  const breakEven = breakEvenRate(spotPrice, price.onDemandUsdPerHour, lossSeconds, nodes);
  const breakEvenText =
    breakEven === Number.POSITIVE_INFINITY
      ? 'spot stays cheaper at any interruption rate (nothing is lost per interruption)'
      : breakEven <= 0
        ? `spot is never cheaper (its ${formatUsd(spotPrice)}/h is not below ${formatUsd(price.onDemandUsdPerHour)}/h on-demand)`
        : `spot stays cheaper until ${trim(breakEven)} interruptions per hour`;

  if (lostFraction >= 1) {
    return {
      ...base,
      recommendation: 'on-demand',
      reasoning: `On-demand (${odText}) because at ${trim(rate)} interruptions per hour, each losing ${formatDuration(lossSeconds)}, a spot run would never finish; ${breakEvenText}.`,
      reservationUsd: reserveOnDemand,
    };
  }

  const { expectedSeconds, expectedInterruptions, highCount, highSeconds } = spotRunSeconds(
    runtimeSeconds,
    nodes,
    assumptions,
  );
  const expectedCost = (atLeastMinimumBill(expectedSeconds) / 3600) * spotPrice * nodes;
  const spot = {
    expectedCostUsd: expectedCost,
    expectedHours: expectedSeconds / 3600,
    expectedInterruptions,
    lowUsd: (atLeastMinimumBill(runtimeSeconds) / 3600) * spotPrice * nodes,
    // Every attempt, the first and one after each interruption, is billed at least the minimum.
    highUsd:
      (Math.max(highSeconds, (highCount + 1) * MINIMUM_BILLED_SECONDS) / 3600) *
      (price.spotHighUsdPerHour ?? spotPrice) *
      nodes,
    breakEvenInterruptionsPerHour: breakEven,
  };
  const reservationUsd = ceilCents(Math.max(onDemandCost, spot.highUsd));
  const spotText = `${formatUsd(expectedCost)} expected on spot over ${formatDuration(expectedSeconds)} with ${trim(expectedInterruptions)} interruptions`;
  const compare = `${spotText} vs ${odText}`;

  if (expectedCost >= onDemandCost) {
    return {
      ...base,
      spot,
      recommendation: 'on-demand',
      reasoning: `On-demand: ${compare}; ${breakEvenText}.`,
      reservationUsd,
    };
  }
  if (deadline !== undefined && expectedSeconds > deadline) {
    const onDemandMisses = runtimeSeconds > deadline ? ' (even on-demand needs longer)' : '';
    return {
      ...base,
      spot,
      recommendation: 'on-demand',
      reasoning: `On-demand: the expected spot time ${formatDuration(expectedSeconds)} breaks the ${formatDuration(deadline)} deadline${onDemandMisses} (${compare}); ${breakEvenText}.`,
      reservationUsd,
    };
  }
  if (deadline !== undefined && highSeconds > deadline) {
    return {
      ...base,
      spot,
      recommendation: 'spot-with-fallback',
      reasoning: `Spot with on-demand fallback: ${compare}, but ${highCount} interruption${highCount === 1 ? '' : 's'} (the ${SPOT_HIGH_QUANTILE * 100}th percentile) would take ${formatDuration(highSeconds)}, past the ${formatDuration(deadline)} deadline; ${breakEvenText}.`,
      reservationUsd,
    };
  }
  const margin = deadline !== undefined ? ` and meets the ${formatDuration(deadline)} deadline with margin` : '';
  return {
    ...base,
    spot,
    recommendation: 'spot',
    reasoning: `Spot: ${compare}${margin}; ${breakEvenText}.`,
    reservationUsd,
  };
}

/**
 * What interruptions cost a job on spot: `rate` per hour of wall time (any node's interruption stops a multi-node job,
 * so it scales with the node count), each losing `lossSeconds` on average (half a checkpoint interval and a restart),
 * the share of wall time lost `lostFraction` (ρ; at 1 or more a spot run never finishes).
 */
function spotLoss(
  nodes: number,
  assumptions: SpotAssumptions,
): { rate: number; lossSeconds: number; lostFraction: number } {
  const rate = assumptions.interruptionsPerHour * nodes;
  const lossSeconds = assumptions.checkpointIntervalSeconds / 2 + assumptions.restartOverheadSeconds;
  return { rate, lossSeconds, lostFraction: (rate * lossSeconds) / 3600 };
}

/**
 * How long `runtimeSeconds` of work takes on spot: expected T = R + rate·T·loss ⇒ T = R/(1 − ρ) (spotLoss); the high
 * figure is the SPOT_HIGH_QUANTILE interruption count, each losing a whole checkpoint interval and a restart. Infinite
 * when ρ ≥ 1 (the run never finishes).
 */
export function spotRunSeconds(
  runtimeSeconds: number,
  nodes: number,
  assumptions: SpotAssumptions = DEFAULT_SPOT_ASSUMPTIONS,
): { expectedSeconds: number; expectedInterruptions: number; highCount: number; highSeconds: number } {
  const { rate, lostFraction } = spotLoss(nodes, assumptions);
  if (lostFraction >= 1) {
    const never = Number.POSITIVE_INFINITY;
    return { expectedSeconds: never, expectedInterruptions: never, highCount: never, highSeconds: never };
  }
  const expectedSeconds = runtimeSeconds / (1 - lostFraction);
  const expectedInterruptions = (rate * expectedSeconds) / 3600;
  const highCount = poissonQuantile(expectedInterruptions, SPOT_HIGH_QUANTILE);
  const highSeconds =
    runtimeSeconds + highCount * (assumptions.checkpointIntervalSeconds + assumptions.restartOverheadSeconds);
  return { expectedSeconds, expectedInterruptions, highCount, highSeconds };
}

/**
 * Interruption rate per node-hour at which expected spot cost equals on-demand:
 * S/(1 − n·λ·L/3600) = O ⇒ λ = 3600·(1 − S/O)/(n·L). Infinite when nothing is lost; 0 when spot is not cheaper.
 */
export function breakEvenRate(
  spotUsdPerHour: number,
  onDemandUsdPerHour: number,
  lossSeconds: number,
  nodes = 1,
): number {
  if (spotUsdPerHour >= onDemandUsdPerHour) return 0;
  if (lossSeconds <= 0) return Number.POSITIVE_INFINITY;
  return (3600 * (1 - spotUsdPerHour / onDemandUsdPerHour)) / (nodes * lossSeconds);
}

/** Smallest k with P(X ≤ k) ≥ q for X ~ Poisson(mean); normal approximation for large means. */
export function poissonQuantile(mean: number, q: number): number {
  if (mean <= 0) return 0;
  if (mean > 500) return Math.ceil(mean + normalQuantile(q) * Math.sqrt(mean));
  let p = Math.exp(-mean);
  let cdf = p;
  let k = 0;
  while (cdf < q) {
    k++;
    p *= mean / k;
    cdf += p;
  }
  return k;
}

/** Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9), for the large-mean Poisson case. */
function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const at = (xs: number[], i: number) => xs[i] as number;
  const low = 0.02425;
  if (p < low) {
    const r = Math.sqrt(-2 * Math.log(p));
    return (
      (((((at(c, 0) * r + at(c, 1)) * r + at(c, 2)) * r + at(c, 3)) * r + at(c, 4)) * r + at(c, 5)) /
      ((((at(d, 0) * r + at(d, 1)) * r + at(d, 2)) * r + at(d, 3)) * r + 1)
    );
  }
  if (p > 1 - low) return -normalQuantile(1 - p);
  const r = p - 0.5;
  const s = r * r;
  return (
    ((((((at(a, 0) * s + at(a, 1)) * s + at(a, 2)) * s + at(a, 3)) * s + at(a, 4)) * s + at(a, 5)) * r) /
    (((((at(b, 0) * s + at(b, 1)) * s + at(b, 2)) * s + at(b, 3)) * s + at(b, 4)) * s + 1)
  );
}

function validate(
  runtimeSeconds: number,
  price: TierPrice,
  a: SpotAssumptions,
  nodes: number,
  deadlineSeconds: number | undefined,
): void {
  const check = (name: string, value: number, ok: boolean, rule: string) => {
    if (!ok) throw new InvalidEstimateInput(`${name} must be ${rule}, got ${String(value)}`);
  };
  const nonNegative = (name: string, v: number) => check(name, v, Number.isFinite(v) && v >= 0, 'a finite number >= 0');
  nonNegative('runtimeSeconds', runtimeSeconds);
  nonNegative('assumptions.interruptionsPerHour', a.interruptionsPerHour);
  nonNegative('assumptions.restartOverheadSeconds', a.restartOverheadSeconds);
  nonNegative('assumptions.checkpointIntervalSeconds', a.checkpointIntervalSeconds);
  check(
    'onDemandUsdPerHour',
    price.onDemandUsdPerHour,
    Number.isFinite(price.onDemandUsdPerHour) && price.onDemandUsdPerHour > 0,
    'a finite number > 0',
  );
  if (price.spotUsdPerHour !== undefined) {
    check(
      'spotUsdPerHour',
      price.spotUsdPerHour,
      Number.isFinite(price.spotUsdPerHour) && price.spotUsdPerHour > 0,
      'a finite number > 0',
    );
  }
  if (price.spotHighUsdPerHour !== undefined) {
    const low = price.spotUsdPerHour ?? 0;
    check(
      'spotHighUsdPerHour',
      price.spotHighUsdPerHour,
      Number.isFinite(price.spotHighUsdPerHour) && price.spotHighUsdPerHour >= low,
      `a finite number >= spotUsdPerHour (${low})`,
    );
  }
  check('nodes', nodes, Number.isInteger(nodes) && nodes >= 1, 'an integer >= 1');
  if (deadlineSeconds !== undefined) {
    check(
      'deadlineSeconds',
      deadlineSeconds,
      Number.isFinite(deadlineSeconds) && deadlineSeconds > 0,
      'a finite number > 0',
    );
  }
}

/** Rounds a dollar amount up to the cent. */
export function ceilCents(usd: number): number {
  // Guard against binary noise (0.1 + 0.2) pushing an exact cent amount up by one.
  return Math.ceil(Number((usd * 100).toFixed(6))) / 100;
}

function trim(value: number): string {
  return Number(value.toPrecision(3)).toString();
}
