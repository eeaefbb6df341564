/**
 * The cost of one Trainyard attempt (one Batch job), as a pure function of Batch's own record of it and the price
 * paid. Both the AttemptOutcome step and the batch-events handler record an attempt's end with this function, and
 * whichever comes first wins (a record-once write), so the figure cannot differ with the order they arrive in.
 */
import type { TierConfig } from '../../lib/config';
import type { BatchJob } from './batch-job';
import { compareCodeUnits } from './code-unit-order';
import type { AttemptRecord, OrphanRun } from './job';
import { attemptCostMicroUsd, MICROS_PER_USD } from './metering';

/** What an ended attempt cost and when it ran. */
export interface AttemptCost {
  /** First instance start (epoch ms); undefined when it never started. */
  readonly startedAt?: number;
  /** Last stop (epoch ms). */
  readonly stoppedAt?: number;
  /** Price per node-hour used. */
  readonly usdPerHour: number;
  /**
   * Cost in USD to the micro-dollar, as metered: a job's total is rounded to the cent only once, over all its attempts
   * (an attempt rounded to the cent on its own could lose up to half a cent; ten one-minute reclaims at $0.19/h,
   * $0.0032 each, would have added up to $0.00).
   */
  readonly costUsd: number;
}

/**
 * Price per node-hour of an attempt: what was recorded when its instance started (the spot price in effect, or
 * on-demand), else the tier's configured figure for its capacity.
 */
export function attemptPrice(attempt: Pick<AttemptRecord, 'usdPerHour' | 'capacity'>, tier: TierConfig): number {
  if (attempt.usdPerHour !== undefined) return attempt.usdPerHour;
  return attempt.capacity === 'spot' ? (tier.spotUsdPerHour ?? tier.onDemandUsdPerHour) : tier.onDemandUsdPerHour;
}

/**
 * Cost of an attempt from its Batch job: each Batch-level try (infrastructure retries) that started is billed per
 * second with AWS's 60 s minimum per instance start; a try that never started costs nothing.
 */
export function costOfAttempt(
  attempt: Pick<AttemptRecord, 'usdPerHour' | 'capacity' | 'nodes'>,
  batchJob: Pick<BatchJob, 'attempts' | 'startedAt' | 'stoppedAt'>,
  tier: TierConfig,
): AttemptCost {
  const usdPerHour = attemptPrice(attempt, tier);
  const spans = batchJob.attempts
    .filter((a) => a.startedAt !== undefined)
    .map((a) => ({
      startedAt: a.startedAt as number,
      stoppedAt: a.stoppedAt ?? batchJob.stoppedAt ?? (a.startedAt as number),
    }));
  if (spans.length === 0 && batchJob.startedAt !== undefined) {
    spans.push({ startedAt: batchJob.startedAt, stoppedAt: batchJob.stoppedAt ?? batchJob.startedAt });
  }
  if (spans.length === 0) return { usdPerHour, costUsd: 0, stoppedAt: batchJob.stoppedAt };
  const micros = spans.reduce(
    (sum, span) =>
      sum +
      attemptCostMicroUsd({
        startedAtMs: span.startedAt,
        stoppedAtMs: Math.max(span.stoppedAt, span.startedAt),
        usdPerHour,
        nodes: attempt.nodes,
      }),
    0,
  );
  return {
    startedAt: Math.min(...spans.map((s) => s.startedAt)),
    stoppedAt: Math.max(...spans.map((s) => s.stoppedAt)),
    usdPerHour,
    costUsd: micros / MICROS_PER_USD,
  };
}

/**
 * Cost of an attempt whose Batch job Batch no longer reports (AWS keeps an ended job for about 7 days; local mode's
 * Batch forgets its jobs when it restarts), so when it stopped is unknown: billed from its recorded start to
 * `lastSeenAt`, the last sign of it running (epoch ms), the least it can have run. A last sign before the start counts
 * as the start (AWS's 60 s minimum still applies). Without a recorded start, a sign of it running proves one start,
 * billed at that moment (the minimum); without either, it cost nothing.
 */
export function costOfUnseenEnd(
  attempt: Pick<AttemptRecord, 'usdPerHour' | 'capacity' | 'nodes' | 'startedAt'>,
  lastSeenAt: number | undefined,
  tier: TierConfig,
): AttemptCost {
  const startedAt = attempt.startedAt ?? lastSeenAt;
  const stoppedAt = startedAt === undefined ? undefined : Math.max(startedAt, lastSeenAt ?? startedAt);
  return costOfAttempt(attempt, { attempts: [], startedAt, stoppedAt }, tier);
}

/** An orphaned Batch job's run with its Batch job id. */
export type OrphanRunOf = OrphanRun & { readonly batchJobId: string };

/** The orphaned Batch jobs recorded on an attempt, in the order they started. */
export function orphanRunsOf(attempt: Pick<AttemptRecord, 'orphans'>): OrphanRunOf[] {
  return Object.entries(attempt.orphans ?? {})
    .map(([batchJobId, run]) => ({ batchJobId, ...run }))
    .sort((a, b) => a.startedAt - b.startedAt || compareCodeUnits(a.batchJobId, b.batchJobId));
}

/**
 * What an attempt billed, as attempt records: its own Batch job, then each orphaned Batch job recorded on it as an
 * ended run with its own Batch job id, capacity, times, price and cost. Showback and the report's cost curve spread
 * these runs over time the way they spread attempts.
 */
export function billedRunsOf(attempt: AttemptRecord): AttemptRecord[] {
  const { orphans: _orphans, ...own } = attempt;
  return [own, ...orphanRunsOf(attempt).map(({ batchJobId, ...run }) => ({ ...own, batchJobId, ...run }))];
}

/** What an attempt's orphaned Batch jobs cost, in integer micro-dollars (0 without any). */
function orphanCostMicros(attempt: Pick<AttemptRecord, 'orphans'>): number {
  return orphanRunsOf(attempt).reduce((sum, run) => sum + Math.round(run.costUsd * MICROS_PER_USD), 0);
}

/**
 * What an ended attempt put on its job, in integer micro-dollars: its own recorded cost and its orphans'. Nothing for
 * its own Batch job while that has no recorded cost (running, or never started).
 */
export function recordedCostMicros(attempt: Pick<AttemptRecord, 'costUsd' | 'orphans'>): number {
  return Math.round((attempt.costUsd ?? 0) * MICROS_PER_USD) + orphanCostMicros(attempt);
}
