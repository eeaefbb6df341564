/**
 * The exact omniscient optimum: the cheapest schedule that knows the whole trace window, under the simulator's
 * semantics (bench/spot/simulator.ts), found by dynamic programming over time × progress × what is held.
 *
 * Exactness. Progress is kept on a grid of u = gcd(gap, d, C) seconds. Every reachable progress value is
 * (held ticks)·gap − (runs)·d, a multiple of u, so the grid loses nothing, including the partial tick in which an
 * instance's overhead ends (d need not be a whole number of ticks). The last tick is billed only until completion, so
 * completions are costed exactly from the grid value.
 *
 * Speed. Instead of stepping every tick, the DP steps over maximal runs of equal availability (segments), using three
 * facts about an optimal schedule (each an exchange argument; the tests check the DP against brute force over every
 * per-tick schedule on small traces):
 *  1. a spot run starts where a spot-available segment starts and lasts to its end or to completion (starting later or
 *     stopping earlier only gives up progress at the cheapest price, or swaps spot ticks for on-demand ones);
 *  2. an on-demand run starts at submission or right where a spot run was reclaimed (an on-demand run that follows
 *     waiting can slide earlier without changing its cost or progress, or merge with an earlier one);
 *  3. an on-demand run can end at any tick: the DP takes, for every progress value, the cheapest end tick with a
 *     windowed running minimum, so this costs one pass per segment.
 * On-demand runs carry "virtual" progress (progress before the run + held time − d), which is the true progress
 * once the run is past its overhead and a pessimistic value before; pessimistic values only describe dominated
 * schedules, so they never win the minimum.
 */
import type { JobWindow } from './simulator';
import { deadlineTicks } from './simulator';

function gcd(a: number, b: number): number {
  let x = Math.abs(a);
  let y = Math.abs(b);
  while (y) [x, y] = [y, x % y];
  return x;
}

/** Thrown when the optimum cannot be computed exactly on an integer grid (non-integer seconds). */
export class OptimumGridError extends Error {
  override name = 'OptimumGridError';
}

/** Reusable scratch buffers, so a sweep does not allocate per window. */
export class OptimumWorkspace {
  private buffers: Float64Array[] = [];
  private ints = new Int32Array(0);
  private size = 0;

  /** Returns `count` Float64Arrays of at least `size` entries (contents unspecified). */
  arrays(size: number, count: number): Float64Array[] {
    if (size > this.size || this.buffers.length < count) {
      this.size = Math.max(size, this.size);
      this.buffers = Array.from({ length: Math.max(count, this.buffers.length) }, () => new Float64Array(this.size));
      this.ints = new Int32Array(this.size);
    }
    return this.buffers;
  }

  /** An Int32Array of at least the last requested size. */
  deque(): Int32Array {
    return this.ints;
  }
}

/** Minimum cost, in dollars, of finishing the job by its deadline knowing the whole window; Infinity if impossible. */
export function optimalCost(job: JobWindow, workspace: OptimumWorkspace = new OptimumWorkspace()): number {
  const ticks = deadlineTicks(job);
  const g = job.gapSeconds;
  const d = job.overheadSeconds;
  const work = job.workSeconds;
  for (const [name, value] of [
    ['gapSeconds', g],
    ['overheadSeconds', d],
    ['workSeconds', work],
  ] as const)
    if (!Number.isInteger(value) || value < 0)
      throw new OptimumGridError(`${name} must be whole seconds, got ${value}`);
  const u = gcd(gcd(g, d), work) || 1;
  const G = g / u; // grid units per tick
  const dU = d / u; // grid units of overhead
  const pc = work / u; // grid units of work: reaching pc completes the job
  const off = dU; // index = progress + off, so virtual progress down to −d fits
  const size = off + pc;
  const [N, O, R] = workspace.arrays(size, 3) as [Float64Array, Float64Array, Float64Array];
  const dq = workspace.deque();
  const odUnit = (job.prices.onDemand * u) / 3600; // $ per grid unit on on-demand
  const spotUnit = (job.prices.spot * u) / 3600;
  const odTick = odUnit * G;
  N.fill(Infinity, 0, size);
  O.fill(Infinity, 0, size);
  N[off] = 0;
  O[0] = 0; // on-demand started at submission: virtual progress −d
  let best = Infinity;

  // Band of useful grid indices at tick t: progress above t·G is unreachable (those entries stay Infinity), and
  // progress that on-demand from t could not complete by the deadline can never finish (never read again).
  const lo = (t: number): number => Math.max(0, off + pc - (ticks - t) * G);
  const hi = (t: number): number => Math.min(size, off + t * G + 1);

  /** On-demand held over ticks [t, t + m): completions inside the stretch, then O shifted by m ticks. */
  const advanceOnDemand = (t: number, m: number): void => {
    const shift = m * G;
    const add = m * odTick;
    const from = lo(t);
    const to = hi(t);
    for (let i = from; i < to; i++) {
      const c = O[i] as number;
      if (c === Infinity) continue;
      const left = pc - (i - off); // grid units still to do
      if (left <= shift) {
        const done = c + left * odUnit;
        if (done < best) best = done;
      }
    }
    const next = lo(t + m);
    for (let i = hi(t + m) - 1; i >= next; i--) {
      const source = i - shift;
      O[i] = source >= from ? (O[source] as number) + add : Infinity;
    }
  };

  /** N = min(N, O ended after 0..m more ticks): a windowed running minimum along each residue chain. */
  const endOnDemandWithin = (t: number, m: number): void => {
    const from = lo(t);
    const to = hi(t + m);
    for (let r = 0; r < G; r++) {
      let head = 0;
      let tail = 0;
      const first = from + ((((r - from) % G) + G) % G);
      for (let i = first; i < to; i += G) {
        const k = (i - r) / G;
        const value = (O[i] as number) - k * odTick;
        while (tail > head) {
          const last = dq[tail - 1] as number;
          if ((O[last] as number) - ((last - r) / G) * odTick < value) break;
          tail--;
        }
        dq[tail++] = i;
        while (((dq[head] as number) - r) / G < k - m) head++;
        const j = dq[head] as number;
        const candidate = (O[j] as number) + (k - (j - r) / G) * odTick;
        if (candidate < (N[i] as number)) N[i] = candidate;
      }
    }
  };

  // Segments of equal availability inside the window.
  let tick = 0;
  while (tick < ticks) {
    const available = job.available[tick] === 1;
    let end = tick + 1;
    while (end < ticks && (job.available[end] === 1) === available) end++;
    const length = end - tick;
    if (!available) {
      endOnDemandWithin(tick, length);
      advanceOnDemand(tick, length);
      tick = end;
      continue;
    }
    // Spot run over the whole segment, from waiting or switching from on-demand.
    const from = lo(tick);
    const to = hi(tick);
    R.fill(Infinity, from, hi(end));
    const gain = length * G - dU;
    if (gain > 0) {
      const runCost = spotUnit * length * G;
      for (let i = from; i < to; i++) {
        const c = Math.min(N[i] as number, O[i] as number);
        if (c === Infinity) continue;
        const left = pc - (i - off);
        if (left <= gain) {
          const done = c + (dU + left) * spotUnit;
          if (done < best) best = done;
        } else if (c + runCost < (R[i + gain] as number)) R[i + gain] = c + runCost;
      }
    }
    // Or keep waiting / keep (or end) on-demand through the segment.
    endOnDemandWithin(tick, length);
    advanceOnDemand(tick, length);
    // After the segment: nothing held (waited, on-demand ended, or spot reclaimed); on-demand may start now.
    for (let i = lo(end), last = hi(end); i < last; i++) {
      const c = Math.min(N[i] as number, R[i] as number);
      N[i] = c;
      if (c !== Infinity && i >= dU && c < (O[i - dU] as number)) O[i - dU] = c;
    }
    tick = end;
  }
  return best;
}
