/**
 * What the lifecycle does after an attempt ends (issue 4): run another attempt (where, after how long), pause for
 * budget, or finalize the job. Called by the AttemptOutcome Lambda and by local mode with the classified outcome.
 *
 * Pure: the answer depends only on the input. The inputs can move between a handler's tries (a budget blocked since,
 * spot's record, the clock), so AttemptOutcome keeps its first decision on the decision record and a Step Functions
 * retry acts on that one; the counters are derived from the attempt records either way.
 *
 * Budgets are separate (DESIGN "Preemption and error retries have separate budgets"):
 * - preemption (reclaimed, moved, capacity-starved) never fails a job by itself; the placement policy moves it to
 *   on-demand after enough reclaims or a capacity wait, which ends the cycle;
 * - app errors are retried only while `appErrors < job.retries.maxAppRetries` (the user opted in), after
 *   `backoffSeconds × 2^(n−1)` seconds for the n-th retry, capped at {@link MAX_APP_BACKOFF_SECONDS};
 * - infrastructure errors have a fixed budget of {@link INFRA_RETRY_LIMIT} retries, after
 *   `INFRA_BACKOFF_SECONDS × 2^(n−1)`, capped at {@link MAX_INFRA_BACKOFF_SECONDS};
 * - failures right after a restore (harness exit 76) have {@link RESUME_RETRY_LIMIT} retries, at once: the harness
 *   tries a checkpoint twice, then falls back to the one before, so a corrupt checkpoint costs two short attempts
 *   and never the job.
 */
import type { JobCounters, JobRecord } from './job';
import type { AttemptOutcome } from './outcome';
import {
  type Capacity,
  decidePlacement,
  type PlacementPolicyConfig,
  type PlacementState,
  type SpotHistory,
  type TierSpot,
} from './placement';

/** Infrastructure-error retries allowed per job, independent of the user's app-error retries. */
export const INFRA_RETRY_LIMIT = 3;
/** First infrastructure retry waits this long; each further one doubles it. */
export const INFRA_BACKOFF_SECONDS = 30;
/** Longest wait before an infrastructure retry. */
export const MAX_INFRA_BACKOFF_SECONDS = 300;
/** Longest wait before an app-error retry, whatever backoffSeconds and the retry count say. */
export const MAX_APP_BACKOFF_SECONDS = 3600;
/**
 * Retries after the command failed right after a restore: the harness sets a checkpoint aside after its second such
 * failure, so 4 reach the checkpoint two before the newest.
 */
export const RESUME_RETRY_LIMIT = 4;

/** What the lifecycle knows when an attempt has ended. */
export interface NextStepInput {
  /** The job's counters (before this attempt), retry policy and requirements; a whole JobRecord will do. */
  job: Pick<JobRecord, 'counters' | 'retries' | 'requirements' | 'cancelRequested'>;
  /** How the attempt ended (classifyAttemptOutcome). */
  outcome: AttemptOutcome;
  /** Seconds since the job was submitted (the placement policy's clock). */
  nowSeconds: number;
  policy: PlacementPolicyConfig;
  /** Whether the tier and the user allow spot. */
  spotAllowed: boolean;
  /** Estimated compute the whole job needs, seconds. */
  workSeconds: number;
  /** Compute done and safely checkpointed so far, seconds. */
  progressSeconds: number;
  /** Whether spot capacity is observed available now; undefined = unknown. */
  spotAvailable?: boolean;
  /** Capacity the attempt that just ended ran on (keeps an error retry where it was); undefined = unknown. */
  lastCapacity?: Capacity;
  /**
   * Reclaims and capacity cancellations since the job last moved back to spot, when it has (the placement policy
   * counts from there). Defaults to the job's totals, which is exact for a job that never moved back.
   */
  sinceLastSpotMove?: { reclaims: number; capacityCancellations: number };
  /** What the job has observed of spot since submission (spotHistoryOf over its attempts); undefined = nothing. */
  spotHistory?: SpotHistory;
  /** For a capacity cancellation: how long the attempt waited in the spot queue, seconds; undefined = unknown. */
  spotUnavailableForSeconds?: number;
  /** What the budget watch's record of the tier says of spot now (tier-spot.ts tierSpotAt); undefined = no fresh record. */
  tierSpot?: TierSpot;
  /**
   * A budget the job is charged to that is at or over its limit now (ledger.firstBlockedScope); undefined = none.
   * The job then pauses instead of starting another attempt, as budget-watch would stop it at its next tick.
   */
  blockedScope?: string;
}

/** The decision. */
export interface NextStep {
  action: 'run-attempt' | 'finalize' | 'pause-budget';
  /** For run-attempt: the capacity of the next attempt. */
  capacity?: Capacity;
  /** For run-attempt: wait this long before submitting (backoff); 0 otherwise. */
  delaySeconds: number;
  /** The job's counters with this attempt counted. */
  counters: JobCounters;
  /** For finalize. */
  finalState?: 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
  /** For a FAILED finalize that no attempt's outcome explains: the deadline passed before the next attempt. */
  failedAs?: 'timed-out';
  /** For run-attempt: resume from the newest complete checkpoint (append the job's resumeArgs). */
  resume: boolean;
  /**
   * For run-attempt, and a pause that holds the attempt back: the job leaves spot for on-demand (reclaims, capacity
   * wait or a move); emit `Job FellBackToOnDemand`.
   */
  fellBackToOnDemand: boolean;
  /** One sentence, recorded in the job's decision log. */
  reason: string;
}

function backoff(base: number, retry: number, cap: number): number {
  return Math.min(base * 2 ** (retry - 1), cap);
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** Decides what happens after an attempt ended; same input, same output. */
export function decideNextStep(input: NextStepInput): NextStep {
  const { job, outcome } = input;
  const before = job.counters;
  const counters: JobCounters = { ...before, attempts: before.attempts + 1 };
  const finalize = (finalState: NonNullable<NextStep['finalState']>, reason: string): NextStep => ({
    action: 'finalize',
    delaySeconds: 0,
    counters,
    finalState,
    resume: false,
    fellBackToOnDemand: false,
    reason,
  });
  const deadline = job.requirements.deadlineSeconds;
  const runAttempt = (capacity: Capacity, delaySeconds: number, reason: string, fellBack = false): NextStep => {
    if (deadline !== undefined && input.nowSeconds + delaySeconds >= deadline) {
      return {
        ...finalize(
          'FAILED',
          `The deadline (${deadline} s after submission) has passed or would pass before the next attempt starts; ${outcome.reason}`,
        ),
        failedAs: 'timed-out',
      };
    }
    if (input.blockedScope !== undefined) {
      return {
        action: 'pause-budget',
        capacity,
        delaySeconds: 0,
        counters,
        resume: false, // a paused job always resumes from its newest checkpoint (AttemptOutcome's plan)
        // The move to on-demand is decided now, whenever the attempt runs: AttemptOutcome announces it with the pause.
        fellBackToOnDemand: fellBack,
        reason: `Paused until the budget is raised: budget ${input.blockedScope} is at or over its limit, so the next attempt (${capacity}) does not start; ${outcome.reason}`,
      };
    }
    return {
      action: 'run-attempt',
      capacity,
      delaySeconds,
      counters,
      resume: outcome.resumable,
      fellBackToOnDemand: fellBack,
      reason,
    };
  };
  const placementState = (moment: PlacementState['moment'], current: PlacementState['current']): PlacementState => ({
    moment,
    nowSeconds: input.nowSeconds,
    deadlineSeconds: deadline,
    workSeconds: input.workSeconds,
    progressSeconds: input.progressSeconds,
    current,
    spotAvailable: input.spotAvailable,
    ...(input.spotHistory ? { spotHistory: input.spotHistory } : {}),
    ...(input.tierSpot ? { tierSpot: input.tierSpot } : {}),
    ...(moment === 'capacity-cancelled' && input.spotUnavailableForSeconds !== undefined
      ? { spotUnavailableForSeconds: input.spotUnavailableForSeconds }
      : {}),
    reclaims: (input.sinceLastSpotMove?.reclaims ?? before.reclaims) + (moment === 'attempt-reclaimed' ? 1 : 0),
    capacityCancellations:
      (input.sinceLastSpotMove?.capacityCancellations ?? before.capacityCancellations) +
      (moment === 'capacity-cancelled' ? 1 : 0),
    spotAllowed: input.spotAllowed,
  });
  /** Where an error retry or an unexplained stop runs: where it last ran if that was on-demand, else as at submit. */
  const retryCapacity = (): { capacity: Capacity; why: string } => {
    if (input.lastCapacity === 'on-demand') return { capacity: 'on-demand', why: 'stay on on-demand where it ran' };
    const placed = decidePlacement(placementState('submit', 'none'), input.policy);
    return { capacity: placed.capacity, why: placed.reason };
  };

  // A cancel that came after the attempt ended (or as it ended, before its TerminateJob could say so): nothing more
  // starts, however the attempt ended; only a success stands as one.
  if (input.job.cancelRequested && outcome.kind !== 'succeeded' && outcome.kind !== 'cancelled') {
    return finalize(
      'CANCELLED',
      `The job was cancelled; its last attempt had ended (${outcome.kind}: ${outcome.reason}) and none other starts.`,
    );
  }

  switch (outcome.kind) {
    case 'succeeded':
      return finalize('SUCCEEDED', `The attempt succeeded: ${outcome.reason}`);

    case 'cancelled':
      return finalize('CANCELLED', `The job was cancelled: ${outcome.reason}`);

    case 'timed-out':
      return finalize('FAILED', `The job ran out of time: ${outcome.reason}`);

    case 'budget-stopped':
      return {
        action: 'pause-budget',
        delaySeconds: 0,
        counters,
        resume: false,
        fellBackToOnDemand: false,
        reason: `Paused until the budget is raised (it resumes from its checkpoint then): ${outcome.reason}`,
      };

    case 'reclaimed': {
      counters.reclaims = before.reclaims + 1;
      if (input.lastCapacity === 'on-demand') {
        // An on-demand host going away is not a spot signal: resume where it ran.
        return runAttempt(
          'on-demand',
          0,
          `The on-demand host was terminated: resume from the checkpoint on on-demand.`,
        );
      }
      // Spot has just gone from under the job: its restart on spot is not free (the benchmark's view of a reclaim).
      const placed = decidePlacement(
        { ...placementState('attempt-reclaimed', 'spot'), spotAvailable: false },
        input.policy,
      );
      return runAttempt(
        placed.capacity,
        0,
        `Reclaim ${counters.reclaims}: resume from the checkpoint on ${placed.capacity}. ${placed.reason}`,
        placed.capacity === 'on-demand',
      );
    }

    case 'capacity-starved': {
      counters.capacityCancellations = before.capacityCancellations + 1;
      const placed = decidePlacement(placementState('capacity-cancelled', 'none'), input.policy);
      return runAttempt(
        placed.capacity,
        0,
        `Capacity cancellation ${counters.capacityCancellations}: run on ${placed.capacity}. ${placed.reason}`,
        placed.capacity === 'on-demand',
      );
    }

    case 'moved': {
      if (outcome.moveTo !== undefined) {
        const capacity: Capacity = outcome.moveTo === 'spot' && !input.spotAllowed ? 'on-demand' : outcome.moveTo;
        const note = capacity === outcome.moveTo ? '' : ' (spot is no longer allowed, so on-demand)';
        return runAttempt(
          capacity,
          0,
          `Moved as decided: resume from the checkpoint on ${capacity}${note}.`,
          capacity === 'on-demand',
        );
      }
      const { capacity, why } = retryCapacity();
      return runAttempt(
        capacity,
        0,
        `The attempt was stopped and checkpointed: resume on ${capacity} (${why.replace(/\.$/, '')}).`,
      );
    }

    case 'app-error': {
      counters.appErrors = before.appErrors + 1;
      const allowed = job.retries.maxAppRetries;
      if (!outcome.resumable) {
        return finalize('FAILED', `Not retried, running it again as it is cannot help: ${outcome.reason}`);
      }
      if (before.appErrors >= allowed) {
        const asked =
          allowed === 0
            ? 'no app-error retries were requested'
            : `all ${allowed} app-error ${allowed === 1 ? 'retry' : 'retries'} used`;
        return finalize('FAILED', `Failed (${asked}): ${outcome.reason}`);
      }
      const retry = counters.appErrors;
      const delay = backoff(job.retries.backoffSeconds, retry, MAX_APP_BACKOFF_SECONDS);
      const { capacity, why } = retryCapacity();
      return runAttempt(
        capacity,
        delay,
        `App-error retry ${retry} of ${allowed} on ${capacity} after ${delay} s (backoff ${job.retries.backoffSeconds} s × 2^${retry - 1}, capped at ${MAX_APP_BACKOFF_SECONDS} s; ${why.replace(/\.$/, '')}): ${outcome.reason}`,
      );
    }

    case 'resume-failed': {
      counters.resumeFailures = before.resumeFailures + 1;
      if (before.resumeFailures >= RESUME_RETRY_LIMIT) {
        return finalize(
          'FAILED',
          `Failed: ${plural(counters.resumeFailures, 'attempt')} failed right after restoring a checkpoint (limit ${RESUME_RETRY_LIMIT} retries): ${outcome.reason}`,
        );
      }
      const { capacity, why } = retryCapacity();
      return runAttempt(
        capacity,
        0,
        `Resume retry ${counters.resumeFailures} of ${RESUME_RETRY_LIMIT} on ${capacity} (${why.replace(/\.$/, '')}): ${outcome.reason}`,
      );
    }

    case 'infra-error': {
      counters.infraErrors = before.infraErrors + 1;
      if (!outcome.resumable) {
        return finalize('FAILED', `Not retried, running it again as it is cannot help: ${outcome.reason}`);
      }
      if (before.infraErrors >= INFRA_RETRY_LIMIT) {
        return finalize(
          'FAILED',
          `Failed after ${plural(counters.infraErrors, 'infrastructure error')} (limit ${INFRA_RETRY_LIMIT} retries): ${outcome.reason}`,
        );
      }
      const retry = counters.infraErrors;
      const delay = backoff(INFRA_BACKOFF_SECONDS, retry, MAX_INFRA_BACKOFF_SECONDS);
      const { capacity, why } = retryCapacity();
      return runAttempt(
        capacity,
        delay,
        `Infrastructure retry ${retry} of ${INFRA_RETRY_LIMIT} on ${capacity} after ${delay} s (${why.replace(/\.$/, '')}): ${outcome.reason}`,
      );
    }
  }
}
