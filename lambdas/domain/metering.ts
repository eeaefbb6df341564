/**
 * Attempt metering: what an attempt cost, from its start and stop times and the price per node-hour it ran at.
 *
 * Billing rules (DESIGN "Metering"): EC2 bills Linux instances, on-demand and spot, per second with a 60-second
 * minimum each time an instance starts (https://aws.amazon.com/ec2/pricing/ — "per-second billing … minimum of 60
 * seconds"). Trainyard assumes each attempt starts its own instances (true for a scaled-from-zero compute
 * environment; an over-estimate by at most 60 s when Batch reuses a warm instance). A started partial second is
 * billed as a whole second. The spot price paid is the spot price in effect when the instance started; the caller
 * looks it up (see {@link spotPriceAt}) and passes it as `usdPerHour`.
 *
 * Money is exact: prices are turned into integer micro-dollars per hour and costs are computed with BigInt, then
 * rounded once to the nearest micro-dollar (half up). Totals are sums of integer micro-dollars, rounded to the cent
 * (half up) only at the edge, by {@link sumAttemptCosts}. So a job's cost never drifts with float rounding however
 * many attempts it has.
 */

/** Raised for impossible metering input (stop before start, negative price, fractional node count, …). */
export class InvalidMeteringInput extends Error {
  override name = 'InvalidMeteringInput';
}

/** EC2's minimum billed time per instance start, seconds. */
export const MINIMUM_BILLED_SECONDS = 60;

/** Micro-dollars in a dollar: the unit money is metered and summed in. */
export const MICROS_PER_USD = 1_000_000;
const SECONDS_PER_HOUR = 3600n;

/** One attempt's billing input. */
export interface AttemptUsage {
  /** Epoch ms the attempt started (Batch's `startedAt`). */
  startedAtMs: number;
  /** Epoch ms it stopped (Batch's `stoppedAt`), or now for a running attempt. */
  stoppedAtMs: number;
  /** Price per node-hour: the spot price at the instance's start, or the on-demand price. */
  usdPerHour: number;
  /** Instances the attempt ran on (1 unless multi-node). */
  nodes: number;
}

function check(usage: AttemptUsage): void {
  const { startedAtMs, stoppedAtMs, usdPerHour, nodes } = usage;
  if (!Number.isSafeInteger(startedAtMs) || startedAtMs < 0) {
    throw new InvalidMeteringInput(`startedAtMs must be epoch milliseconds (an integer >= 0), got ${startedAtMs}`);
  }
  if (!Number.isSafeInteger(stoppedAtMs) || stoppedAtMs < 0) {
    throw new InvalidMeteringInput(`stoppedAtMs must be epoch milliseconds (an integer >= 0), got ${stoppedAtMs}`);
  }
  if (stoppedAtMs < startedAtMs) {
    throw new InvalidMeteringInput(
      `stoppedAtMs ${stoppedAtMs} is before startedAtMs ${startedAtMs}; an attempt cannot stop before it starts`,
    );
  }
  if (!Number.isFinite(usdPerHour) || usdPerHour < 0 || usdPerHour > 1000) {
    throw new InvalidMeteringInput(`usdPerHour must be a price from 0 to 1000 USD per node-hour, got ${usdPerHour}`);
  }
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 64) {
    throw new InvalidMeteringInput(`nodes must be a whole number from 1 to 64, got ${nodes}`);
  }
}

/** Seconds EC2 bills for one instance that ran from start to stop: whole seconds, at least 60. */
export function billedSeconds(startedAtMs: number, stoppedAtMs: number): number {
  check({ startedAtMs, stoppedAtMs, usdPerHour: 0, nodes: 1 });
  return atLeastMinimumBill(Math.ceil((stoppedAtMs - startedAtMs) / 1000));
}

/** A run of `seconds` as billed: every start is billed at least {@link MINIMUM_BILLED_SECONDS} (EC2 and Fargate). */
export function atLeastMinimumBill(seconds: number): number {
  return Math.max(MINIMUM_BILLED_SECONDS, seconds);
}

/** An attempt's cost in integer micro-dollars (exact to the micro-dollar, rounded half up once). */
export function attemptCostMicroUsd(usage: AttemptUsage): number {
  check(usage);
  const seconds = BigInt(billedSeconds(usage.startedAtMs, usage.stoppedAtMs));
  const microPerHour = BigInt(Math.round(usage.usdPerHour * MICROS_PER_USD));
  const numerator = microPerHour * seconds * BigInt(usage.nodes);
  return Number((numerator + SECONDS_PER_HOUR / 2n) / SECONDS_PER_HOUR);
}

/** An attempt's cost in USD, exact to the micro-dollar (not rounded to the cent: round totals, not parts). */
export function attemptCostUsd(usage: AttemptUsage): number {
  return attemptCostMicroUsd(usage) / MICROS_PER_USD;
}

/** Cost so far of an attempt that is still running, in USD (micro-dollar exact); the 60 s minimum applies. */
export function runningCostUsd(startedAtMs: number, nowMs: number, usdPerHour: number, nodes = 1): number {
  return attemptCostUsd({ startedAtMs, stoppedAtMs: nowMs, usdPerHour, nodes });
}

/** Rounds a micro-dollar amount to whole cents, half up, and returns USD. */
export function microUsdToCents(microUsd: number): number {
  if (!Number.isSafeInteger(microUsd) || microUsd < 0) {
    throw new InvalidMeteringInput(`a cost must be a whole, non-negative number of micro-dollars, got ${microUsd}`);
  }
  return Math.floor((microUsd + 5000) / 10_000) / 100;
}

/**
 * Sums attempt costs (USD, as {@link attemptCostUsd} returns them) exactly and rounds the total to the cent, half up.
 * Each part is read back as integer micro-dollars, so 0.005 + 0.005 + 0.005 is 0.02, not a float's 0.01.
 */
export function sumAttemptCosts(costsUsd: readonly number[]): number {
  return microUsdToCents(sumAttemptCostsMicroUsd(costsUsd));
}

/** {@link sumAttemptCosts} before the rounding to the cent: whole micro-dollars. */
export function sumAttemptCostsMicroUsd(costsUsd: readonly number[]): number {
  let total = 0;
  for (const [index, cost] of costsUsd.entries()) {
    if (!Number.isFinite(cost) || cost < 0) {
      throw new InvalidMeteringInput(`cost #${index + 1} must be a non-negative number of USD, got ${cost}`);
    }
    total += Math.round(cost * MICROS_PER_USD);
  }
  return total;
}

/** One point of EC2 spot price history (DescribeSpotPriceHistory: Timestamp, SpotPrice). */
export interface SpotPricePoint {
  timestampMs: number;
  usdPerHour: number;
}

/**
 * The spot price in effect at `atMs`: the newest history point at or before it. Undefined when the history does
 * not reach back that far (the caller then uses the tier's configured spot price). Order of `history` is free.
 */
export function spotPriceAt(history: readonly SpotPricePoint[], atMs: number): number | undefined {
  let best: SpotPricePoint | undefined;
  for (const point of history) {
    if (point.timestampMs <= atMs && (best === undefined || point.timestampMs > best.timestampMs)) best = point;
  }
  return best?.usdPerHour;
}
