/**
 * How the API shows a job: attempts with durations and costs (a running attempt priced up to now), the cost so far,
 * and the progress forecast. Pure: the route reads the records and the harness's metrics and passes them in.
 */

import { orphanRunsOf } from '../domain/attempt-cost';
import { type Forecast, forecast, type ProgressSample } from '../domain/forecast';
import type { AttemptRecord, JobRecord } from '../domain/job';
import {
  atLeastMinimumBill,
  MICROS_PER_USD,
  microUsdToCents,
  runningCostUsd,
  sumAttemptCostsMicroUsd,
} from '../domain/metering';
import { readMetricsLog } from '../domain/metric-samples';
import { type JobProgress, progressFromHarness } from '../domain/watch';

/** A job as the API returns it: the pause task token stays inside (resume goes through POST /jobs/{id}/resume). */
export type PublicJob = Omit<JobRecord, 'pauseToken'>;

/** The job without its task token. */
export function publicJob(job: JobRecord): PublicJob {
  const { pauseToken: _token, ...rest } = job;
  return rest;
}

/** One attempt as shown: duration so far or in total, cost recorded or (while running) metered up to now. */
export type AttemptView = AttemptRecord & {
  readonly running: boolean;
  readonly durationSeconds?: number;
};

/** An attempt with its duration and cost; a running attempt's cost is metered up to `nowMs`. */
export function attemptView(attempt: AttemptRecord, nowMs: number): AttemptView {
  const running = attempt.startedAt !== undefined && attempt.stoppedAt === undefined;
  const end = attempt.stoppedAt ?? nowMs;
  const durationSeconds = attempt.startedAt !== undefined ? Math.max(0, (end - attempt.startedAt) / 1000) : undefined;
  const costUsd =
    attempt.costUsd ??
    (running && attempt.startedAt !== undefined && attempt.usdPerHour !== undefined
      ? runningCostUsd(attempt.startedAt, Math.max(nowMs, attempt.startedAt), attempt.usdPerHour, attempt.nodes)
      : undefined);
  return {
    ...attempt,
    running,
    ...(durationSeconds !== undefined && { durationSeconds }),
    ...(costUsd !== undefined && { costUsd }),
  };
}

/**
 * Sum of the attempts' costs (recorded or metered so far) and of the orphaned Batch jobs recorded on them, exact,
 * rounded to the cent.
 */
export function costSoFarUsd(attempts: readonly AttemptView[]): number {
  return microUsdToCents(costSoFarMicroUsd(attempts));
}

/** {@link costSoFarUsd} before the rounding to the cent, in whole micro-dollars. */
function costSoFarMicroUsd(attempts: readonly AttemptView[]): number {
  return sumAttemptCostsMicroUsd(
    attempts.flatMap((a) => [
      ...(a.costUsd !== undefined ? [a.costUsd] : []),
      ...orphanRunsOf(a).map((run) => run.costUsd),
    ]),
  );
}

/**
 * The progress to show: the newer of the job record's (budget-watch copies it from the harness at each periodic
 * check, so it can be minutes old) and the harness's progress.json as read now, the forecast's samples being read
 * now too; the raw document where it is the only one but cannot be read as progress (no step or total yet); null
 * when there is none.
 */
export function currentProgress(
  job: Pick<JobRecord, 'jobId' | 'progress'>,
  harness: Record<string, unknown> | undefined,
): JobProgress | Record<string, unknown> | null {
  const live = harness === undefined ? undefined : progressFromHarness(harness, job.jobId);
  const recorded = job.progress;
  if (live && (!recorded || Date.parse(live.updatedAt) >= Date.parse(recorded.updatedAt))) return live;
  return recorded ?? harness ?? null;
}

/**
 * Progress samples from the harness's metrics.jsonl (`{ time, attempt, step, … }` per line): elapsed is compute time
 * on the job across attempts — earlier attempts' full run time plus the time into this attempt — so a resume after
 * a reclaim does not count the gap between attempts. Lines without a step, an attempt start or a readable time are
 * skipped.
 */
export function progressSamples(metricsJsonl: string, attempts: readonly AttemptRecord[]): ProgressSample[] {
  const ordered = [...attempts].sort((a, b) => a.attempt - b.attempt);
  const offsetSeconds = new Map<number, number>();
  let total = 0;
  for (const a of ordered) {
    offsetSeconds.set(a.attempt, total);
    if (a.startedAt !== undefined && a.stoppedAt !== undefined) total += (a.stoppedAt - a.startedAt) / 1000;
  }
  const samples: ProgressSample[] = [];
  readMetricsLog(metricsJsonl, ({ step, attempt, timeMs }) => {
    if (step === undefined || attempt === undefined || timeMs === undefined) return;
    const record = ordered.find((a) => a.attempt === attempt);
    if (!record?.startedAt || timeMs < record.startedAt) return;
    samples.push({ step, elapsedSeconds: (offsetSeconds.get(attempt) ?? 0) + (timeMs - record.startedAt) / 1000 });
  });
  return samples;
}

/** The forecast of a live job, or why there is none. */
export type ForecastView =
  | { readonly available: true; readonly forecast: Forecast }
  | { readonly available: false; readonly reason: string };

/**
 * Forecast from the samples at the price of the newest attempt (its $/h × nodes). Finished jobs, jobs without a
 * total step count, a price or two usable samples get a reason instead.
 */
export function forecastView(input: {
  job: JobRecord;
  /** The attempts as shown at `nowMs` (attemptView): their costs so far, a running one's metered to now. */
  attempts: readonly AttemptView[];
  samples: readonly ProgressSample[];
  totalSteps?: number;
  nowMs: number;
  terminal: boolean;
}): ForecastView {
  if (input.terminal) return { available: false, reason: `the job is ${input.job.state}` };
  if (input.totalSteps === undefined) {
    return { available: false, reason: 'the total step count is unknown (the harness reports total_steps when set)' };
  }
  const current = [...input.attempts].sort((a, b) => b.attempt - a.attempt)[0];
  if (current?.usdPerHour === undefined) return { available: false, reason: 'no attempt has a price yet' };
  // A running attempt is billed at least 60 s from its start: what of that it has not run yet is paid for already.
  const ranSeconds =
    current.running && current.startedAt !== undefined ? Math.max(0, (input.nowMs - current.startedAt) / 1000) : 0;
  const result = forecast({
    samples: input.samples,
    totalSteps: input.totalSteps,
    spentUsd: costSoFarMicroUsd(input.attempts) / MICROS_PER_USD,
    usdPerHour: current.usdPerHour * current.nodes,
    billedAheadSeconds: current.running ? atLeastMinimumBill(ranSeconds) - ranSeconds : 0,
  });
  return result
    ? { available: true, forecast: result }
    : { available: false, reason: 'fewer than two progress samples with advancing steps so far' };
}
