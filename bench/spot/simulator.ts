/**
 * Replays one window of a spot availability trace for one job under a policy. Semantics (issue 7): the job needs
 * `workSeconds` of progress before `deadlineSeconds`; decisions take effect at tick boundaries; every start of an
 * instance (first start, after a reclaim, any switch) spends `overheadSeconds` billed at the held capacity's price with
 * no progress; progress is never lost; each tick is billed at the price of what is held, the last one only until the
 * job completes; holding nothing (waiting for spot) is free. A spot attempt ends when the trace says spot is gone.
 */

/** What a job holds during a tick. */
export type Holding = 'none' | 'spot' | 'on-demand';

/** Prices in $/h (p3.2xlarge, as in the paper and the issue). */
export interface Prices {
  /** On-demand $/h. */
  onDemand: number;
  /** Spot $/h. */
  spot: number;
}

/** The prices the issue fixes: on-demand $3.06/h, spot $0.9731/h. */
export const P3_PRICES: Prices = { onDemand: 3.06, spot: 0.9731 };

/** One simulated job on one trace window. */
export interface JobWindow {
  /** Spot availability per tick (1 = available), starting at the job's submission; at least deadline/gap long. */
  available: Uint8Array;
  /**
   * The trace before submission, oldest first, ending at the tick before it: what the platform could have watched
   * before the job existed. Only policies that model such a watch read it. @default - nothing before submission
   */
  before?: Uint8Array;
  /** Tick length in seconds. */
  gapSeconds: number;
  /** Compute the job needs (C). */
  workSeconds: number;
  /** Deadline from submission (D); must be a whole number of ticks. */
  deadlineSeconds: number;
  /** Restart overhead per instance start (d). */
  overheadSeconds: number;
  /** Prices. */
  prices: Prices;
}

/** What a policy sees at the start of a tick. */
export interface TickView {
  /** Tick index from submission. */
  tick: number;
  /** Seconds since submission. */
  nowSeconds: number;
  /** Progress so far (seconds of compute). */
  progressSeconds: number;
  /** What was held during the previous tick, after any reclaim at this tick ('none' after a reclaim). */
  held: Holding;
  /** Whether spot is available during this tick (policies decide for themselves what they may look at). */
  spotAvailable: boolean;
  /** True when the job held spot in the previous tick and the trace reclaimed it at this tick. */
  reclaimed: boolean;
  /** Overhead still to be spent by the running instance before it makes progress. */
  overheadLeftSeconds: number;
}

/** A policy: called once per tick, returns what it wants to hold. Asking for spot while spot is unavailable waits. */
export type TickPolicy = (view: TickView) => Holding;

/** Outcome of one simulated job. */
export interface SimulationResult {
  /** Dollars spent. */
  cost: number;
  /** Whether the job reached its work before the deadline. */
  finished: boolean;
  /** Seconds from submission to completion, or the deadline when it missed. */
  endSeconds: number;
  /** Progress at the end. */
  progressSeconds: number;
  /** Instance starts (first, after reclaims, switches). */
  starts: number;
}

/** Thrown when a job window is inconsistent (deadline not on the tick grid, trace shorter than the deadline, ...). */
export class InvalidJobWindow extends Error {
  override name = 'InvalidJobWindow';
}

/** Number of ticks in the job's deadline, checking the window covers it. */
export function deadlineTicks(job: JobWindow): number {
  const ticks = job.deadlineSeconds / job.gapSeconds;
  if (!Number.isInteger(ticks) || ticks <= 0)
    throw new InvalidJobWindow(
      `deadline ${job.deadlineSeconds} s must be a positive whole number of ${job.gapSeconds} s ticks`,
    );
  if (job.available.length < ticks)
    throw new InvalidJobWindow(`trace window has ${job.available.length} ticks, the deadline needs ${ticks}`);
  return ticks;
}

/** Runs `policy` over the job window and returns cost and outcome. */
export function simulate(job: JobWindow, policy: TickPolicy): SimulationResult {
  const ticks = deadlineTicks(job);
  const g = job.gapSeconds;
  let progress = 0;
  let cost = 0;
  let held: Holding = 'none';
  let overheadLeft = 0;
  let starts = 0;
  for (let tick = 0; tick < ticks; tick++) {
    const spotAvailable = job.available[tick] === 1;
    const reclaimed = held === 'spot' && !spotAvailable;
    if (reclaimed) held = 'none';
    const wanted = policy({
      tick,
      nowSeconds: tick * g,
      progressSeconds: progress,
      held,
      spotAvailable,
      reclaimed,
      overheadLeftSeconds: held === 'none' ? 0 : overheadLeft,
    });
    const next: Holding = wanted === 'spot' && !spotAvailable ? 'none' : wanted;
    if (next !== held && next !== 'none') {
      overheadLeft = job.overheadSeconds;
      starts++;
    }
    held = next;
    if (held === 'none') continue;
    const price = held === 'spot' ? job.prices.spot : job.prices.onDemand;
    const overhead = Math.min(overheadLeft, g);
    overheadLeft -= overhead;
    const productive = g - overhead;
    const remaining = job.workSeconds - progress;
    if (productive >= remaining) {
      cost += (price * (overhead + remaining)) / 3600;
      return {
        cost,
        finished: true,
        endSeconds: tick * g + overhead + remaining,
        progressSeconds: job.workSeconds,
        starts,
      };
    }
    progress += productive;
    cost += (price * g) / 3600;
  }
  return { cost, finished: false, endSeconds: ticks * g, progressSeconds: progress, starts };
}

/** Cost of running the whole job on on-demand from submission: one start, then `workSeconds` of compute. */
export function onDemandOnlyCost(job: JobWindow): number {
  return (job.prices.onDemand * (job.overheadSeconds + job.workSeconds)) / 3600;
}

/** Replays a fixed per-tick schedule (used by the brute-force optimum in tests). */
export function schedulePolicy(schedule: readonly Holding[]): TickPolicy {
  return (view) => schedule[view.tick] ?? 'none';
}
