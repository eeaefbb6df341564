/**
 * Progress forecast: ETA and cost-to-finish of a running job from its progress samples. Throughput is the median of
 * the per-interval step rates over the most recent window, so one slow interval (an evaluation pass, a checkpoint
 * upload, a restart) neither stalls nor rushes the forecast; the range comes from the slowest and fastest interval
 * in that window. Pure. Formulas: docs/cost-model.md.
 */
import type { Figure } from './analysis';
import { formatDuration, formatUsd } from './analysis/format';

/** One progress observation; elapsed is compute seconds spent on this job so far (all attempts). */
export interface ProgressSample {
  step: number;
  elapsedSeconds: number;
}

/** Time and money to finish. */
export interface Forecast {
  etaSeconds: Figure<number>;
  /** ETA at the fastest and slowest interval rate in the window. */
  etaRangeSeconds: { low: number; high: number };
  /** What the running attempt will still cost: its run beyond the time already billed (billedAheadSeconds). */
  costToFinishUsd: { expected: number; low: number; high: number };
  /** spentUsd plus the expected cost to finish. */
  projectedTotalUsd: number;
  stepsPerSecond: number;
  fractionDone: number;
}

/** Intervals (consecutive sample pairs) the throughput is taken from: the most recent ones. */
export const FORECAST_WINDOW_INTERVALS = 10;

/** A forecast input is out of range (negative price or spend, non-finite total). */
export class InvalidForecastInput extends Error {
  override name = 'InvalidForecastInput';
}

/** Forecasts ETA and cost-to-finish; undefined with fewer than 2 usable samples or no progress in the window. */
export function forecast(input: {
  samples: readonly ProgressSample[];
  totalSteps: number;
  /** What the job has cost so far, exactly (not rounded to the cent: a small job's forecast would fall below it). */
  spentUsd: number;
  usdPerHour: number;
  /**
   * Seconds of the running attempt already in spentUsd but not yet run: the rest of EC2's 60 s minimum for a start
   * (default 0). The time to finish costs only beyond them.
   */
  billedAheadSeconds?: number;
}): Forecast | undefined {
  const { totalSteps, spentUsd, usdPerHour } = input;
  const billedAheadSeconds = input.billedAheadSeconds ?? 0;
  for (const [name, value] of [
    ['totalSteps', totalSteps],
    ['spentUsd', spentUsd],
    ['usdPerHour', usdPerHour],
    ['billedAheadSeconds', billedAheadSeconds],
  ] as const) {
    if (!Number.isFinite(value) || value < 0) {
      throw new InvalidForecastInput(`${name} must be a finite number >= 0, got ${String(value)}`);
    }
  }
  const samples = input.samples
    .filter((s) => Number.isFinite(s.step) && Number.isFinite(s.elapsedSeconds) && s.step >= 0 && s.elapsedSeconds >= 0)
    .slice()
    .sort((a, b) => a.elapsedSeconds - b.elapsedSeconds);
  // An interval counts when time moved forward and the step did not go back (a resume from an older checkpoint
  // moves the step back: that interval says nothing about throughput).
  const rates: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const prev = samples[i - 1] as ProgressSample;
    const cur = samples[i] as ProgressSample;
    const dt = cur.elapsedSeconds - prev.elapsedSeconds;
    const ds = cur.step - prev.step;
    if (dt > 0 && ds >= 0) rates.push(ds / dt);
  }
  const last = samples[samples.length - 1];
  if (rates.length === 0 || !last) return undefined;
  const window = rates.slice(-FORECAST_WINDOW_INTERVALS);
  const rate = median(window);
  if (rate <= 0) return undefined;
  const fastest = Math.max(...window);
  // The range holds the expected rate: with stalled intervals (rate 0) in the window the median can fall below every
  // interval that moved.
  const slowest = Math.min(rate, ...window.filter((r) => r > 0));
  const stalled = window.some((r) => r === 0);

  const remaining = Math.max(0, totalSteps - last.step);
  const eta = remaining / rate;
  const etaLow = remaining / fastest;
  const etaHigh = remaining / slowest;
  const cost = (seconds: number) => (Math.max(0, seconds - billedAheadSeconds) / 3600) * usdPerHour;
  const spread = fastest / slowest;
  const confidence: Figure<number>['confidence'] =
    window.length >= 5 && spread <= 1.25 && !stalled ? 'high' : window.length >= 3 ? 'medium' : 'low';
  const basis =
    remaining === 0
      ? `step ${last.step} of ${totalSteps}: done`
      : `${remaining} steps left at ${trim(rate)} steps/s (median of the last ${window.length} interval${window.length === 1 ? '' : 's'}; range ${trim(slowest)}-${trim(fastest)}), ≈${formatDuration(eta)} and ${formatUsd(cost(eta))} at ${formatUsd(usdPerHour)}/h`;
  return {
    etaSeconds: { value: eta, basis, confidence },
    etaRangeSeconds: { low: etaLow, high: etaHigh },
    costToFinishUsd: { expected: cost(eta), low: cost(etaLow), high: cost(etaHigh) },
    projectedTotalUsd: spentUsd + cost(eta),
    stepsPerSecond: rate,
    fractionDone: totalSteps > 0 ? Math.min(1, last.step / totalSteps) : 1,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

function trim(value: number): string {
  return Number(value.toPrecision(3)).toString();
}
