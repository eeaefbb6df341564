/**
 * AttemptOutcome: an attempt ended (Batch's result or the caught failure). Classify it from Batch's own fields,
 * record its end and cost once, refresh progress, and decide what comes next — resume on spot, fall back to
 * on-demand, retry with backoff, pause for budget, or finalize — recording the decision and its reason.
 * Replay-safe: records are written once and counters are derived from the attempt records, never incremented.
 *
 * A caught failure without Batch's job in it (SubmitJob answered with an error, the task lost its job) does not prove
 * that Batch has no job: a SubmitJob that failed on a 5xx may have created it. So the attempt is looked up in Batch
 * first. An ended job is recorded as any other; a queued or running one is stopped (TerminateJob `orphaned`, the
 * harness checkpoints) and this step throws {@link AttemptsStillRunning}, which the state machine retries for up to
 * about 40 minutes, until Batch reports the job ended and its real cost is recorded (a failed lookup of a recorded
 * Batch job is retried the same way). Only when Batch has no such job, or none is recorded and the lookup fails, is the
 * attempt recorded as not run (or, with a Batch job recorded that Batch no longer reports, billed to the last sign of
 * it running: `recordAttemptEnd`); batch-events stops a Batch job that turns up for it later. Never two attempts of one
 * job train at once.
 */
import { type BatchJob, InvalidBatchJob, parseBatchFailureCause, parseBatchJob } from '../domain/batch-job';
import { TERMINATE_REASONS } from '../domain/batch-reasons';
import { jobScopes } from '../domain/budgets';
import { INTERRUPTION_CAUSES } from '../domain/events';
import { type AttemptRecord, type JobRecord, tierOfJob } from '../domain/job';
import { decideNextStep, type NextStep } from '../domain/next-step';
import type { AttemptOutcome } from '../domain/outcome';
import { type Capacity, spotHistoryOf } from '../domain/placement';
import { type TierSpotRecord, tierSpotAfterReclaim } from '../domain/tier-spot';
import {
  budgetPeriodOf,
  keepsTierSpotRecord,
  progressFromHarness,
  recordedCost,
  spotTroublesSinceLastMove,
  TIER_SPOT_CHECK_INTERVAL_SECONDS,
  tierPlacementInputs,
} from '../domain/watch';
import { jobKeysFor } from '../domain/workspace-layout';
import { BatchLookupUnavailable, lookUpAttempt } from '../shared/batch-lookup';
import type { ControlPlane } from '../shared/control-plane';
import { logger } from '../shared/logger';
import {
  AttemptGotBatchJob,
  AttemptsStillRunning,
  BatchJobNotReported,
  countersFrom,
  jobEvent,
  progressSeconds,
  recordAttemptEnd,
  secondsSince,
} from './common';
import { type AttemptPlan, attemptOutcomeInputSchema, parseStep } from './steps';

/** AttemptOutcome's output: the Choice after it routes on `next`. */
export type AttemptOutcomeOutput =
  | { jobId: string; next: 'prepare' | 'wait' | 'pause'; plan: AttemptPlan }
  | {
      jobId: string;
      next: 'finalize';
      finalState: 'SUCCEEDED' | 'FAILED' | 'CANCELLED';
      reason: string;
      failedAs?: 'timed-out';
    };

/** Decision sequence number for the decision taken when attempt `n` ended (submit is 1; periodic moves n×100+50). */
export function outcomeDecisionSeq(attempt: number): number {
  return attempt * 100 + 1;
}

/** Creates the AttemptOutcome step. */
export function createAttemptOutcomeHandler(
  plane: Pick<
    ControlPlane,
    'config' | 'jobs' | 'workspace' | 'events' | 'batch' | 'clock' | 'ledger' | 'metrics' | 'fleet'
  >,
) {
  /**
   * The attempt's task failed with no Batch job in its error: the job Batch has for it after all, ended, or undefined
   * when it has none. One still queued or running is terminated, and this throws until Batch reports it ended.
   */
  async function findInBatch(job: JobRecord, attempt: AttemptRecord, error: string): Promise<BatchJob | undefined> {
    let found: BatchJob | undefined;
    try {
      found = await lookUpAttempt(plane, job, attempt);
    } catch (failure) {
      if (failure instanceof BatchLookupUnavailable) throw failure;
      const why = failure instanceof Error ? `${failure.name}: ${failure.message}` : String(failure);
      if (attempt.batchJobId !== undefined) {
        throw new AttemptsStillRunning(
          `job ${job.jobId} attempt ${attempt.attempt}: its task failed (${error}) and its Batch job ${attempt.batchJobId} could not be looked up (${why}); this step runs again`,
        );
      }
      // No Batch job recorded: "not run" it is; batch-events stops a Batch job that turns up for it after all.
      logger.warn('attempt whose task failed could not be looked up in Batch; recorded as not run', {
        jobId: job.jobId,
        attempt: attempt.attempt,
        error,
        lookup: why,
      });
      return undefined;
    }
    if (!found || found.status === 'SUCCEEDED' || found.status === 'FAILED') return found;
    await plane.batch.terminateJob(found.jobId, TERMINATE_REASONS.orphaned);
    logger.warn('attempt whose task failed is running in Batch; terminated', {
      jobId: job.jobId,
      attempt: attempt.attempt,
      batchJobId: found.jobId,
      status: found.status,
      error,
    });
    throw new AttemptsStillRunning(
      `job ${job.jobId} attempt ${attempt.attempt}: its task failed (${error}) but Batch has it as ${found.jobId}, ${found.status}; TerminateJob sent, and this step runs again until Batch reports it ended`,
    );
  }

  return async (input: unknown): Promise<AttemptOutcomeOutput> => {
    const { jobId, plan, batch, batchError } = parseStep(attemptOutcomeInputSchema, 'AttemptOutcome', input);
    const job = await plane.jobs.requireJob(jobId);
    const tier = tierOfJob(plane.config, job);
    const now = plane.clock();
    const attempt = await plane.jobs.getAttempt(jobId, plan.attempt);
    if (!attempt) throw new Error(`job ${jobId} has no attempt ${plan.attempt} to record an outcome for`);

    let batchJob: BatchJob | undefined;
    if (batch !== undefined) {
      batchJob = parseBatchJob(batch, 'RunAttempt output');
    } else if (batchError?.Error === 'States.TaskFailed' && batchError.Cause?.trim().startsWith('{')) {
      try {
        batchJob = parseBatchFailureCause(batchError.Cause);
      } catch (failure) {
        // Step Functions cuts a cause at 32,768 characters, and a job detail with a long command and environment can
        // pass that: the job is looked up in Batch instead, as when the failure carries none.
        if (!(failure instanceof InvalidBatchJob)) throw failure;
        logger.warn('the failed task’s cause is no readable Batch job; the attempt is looked up in Batch', {
          jobId,
          attempt: plan.attempt,
          causeCharacters: batchError.Cause.length,
          reason: failure.message,
        });
      }
    }
    const error = `${batchError?.Error ?? 'unknown error'}${batchError?.Cause ? ` — ${batchError.Cause.slice(0, 400)}` : ''}`;
    if (!batchJob && attempt.outcome === undefined) batchJob = await findInBatch(job, attempt, error);
    let outcome: AttemptOutcome;
    try {
      // Without a Batch job: not run (SubmitJob refused it), or run and forgotten by Batch; an infra-error to retry.
      outcome = await recordAttemptEnd(plane, job, attempt, batchJob ?? { missing: error }, now);
    } catch (failure) {
      if (!(failure instanceof AttemptGotBatchJob) && !(failure instanceof BatchJobNotReported)) throw failure;
      throw new AttemptsStillRunning(`${failure.message} (the task failed: ${error})`);
    }

    const attempts = await plane.jobs.listAttempts(jobId);
    const ended = attempts.find((a) => a.attempt === plan.attempt);
    const recorded = ended?.outcome ?? outcome;
    const progress =
      progressFromHarness(await plane.workspace.getJson(jobKeysFor(job.team, jobId).progress), jobId) ?? job.progress;
    // Read again for a cancel made while this step ran (its TerminateJob found the attempt already ended).
    const { cancelRequested } = await plane.jobs.requireJob(jobId);
    const current = { ...job, cancelRequested, progress, counters: countersFrom(attempts, plan.attempt) };
    let tierSpotRecord: TierSpotRecord | undefined;
    if (keepsTierSpotRecord(tier)) {
      // A reclaim breaks the tier's spot stretch where the 5-minute probe may not have seen it (tier-spot.ts).
      const reclaimedAt =
        recorded.kind === 'reclaimed' && attempt.capacity === 'spot'
          ? (ended?.noticeAt ?? ended?.stoppedAt ?? now.getTime())
          : undefined;
      tierSpotRecord =
        reclaimedAt === undefined
          ? await plane.jobs.getTierSpot(tier.id)
          : await plane.jobs.updateTierSpot(tier.id, (stored) =>
              tierSpotAfterReclaim(stored, tier.id, reclaimedAt, TIER_SPOT_CHECK_INTERVAL_SECONDS),
            );
    }
    const { policy, tierSpot } = tierPlacementInputs(plane.config.spotPolicy, tier, tierSpotRecord, now.getTime());
    // A budget blocked since the attempt started (budget-watch stops running jobs only at its next tick).
    const blockedScope = await plane.ledger.firstBlockedScope(jobScopes(job), budgetPeriodOf(job));
    const decided = decideNextStep({
      job: current,
      outcome: recorded,
      nowSeconds: secondsSince(job, now),
      policy,
      spotAllowed: tier.spotAllowed,
      workSeconds: job.estimate?.runtimeSeconds ?? 0,
      progressSeconds: progressSeconds(current),
      lastCapacity: attempt.capacity,
      sinceLastSpotMove: spotTroublesSinceLastMove(attempts.filter((a) => a.attempt !== plan.attempt)),
      spotHistory: spotHistoryOf(attempts, now.getTime()),
      ...(tierSpot ? { tierSpot } : {}),
      ...(blockedScope !== undefined ? { blockedScope } : {}),
      ...queueWait(ended, now.getTime()),
    });
    // A retry of this step acts on the decision the first try recorded: deciding again could take another path (a
    // budget blocked since, spot's record moved on) than the decision log and the events already say.
    const recordedDecision = await plane.jobs.getDecision(jobId, outcomeDecisionSeq(plan.attempt));
    const next: NextStep =
      recordedDecision?.step !== undefined
        ? { ...recordedDecision.step, counters: decided.counters, reason: recordedDecision.reason }
        : decided;

    await plane.jobs.patchJob(jobId, {
      counters: next.counters,
      costSoFarUsd: recordedCost(attempts),
      ...(progress ? { progress } : {}),
      reason: next.reason,
    });
    const decision =
      next.action === 'run-attempt'
        ? `run-attempt ${next.capacity}${next.delaySeconds ? ` after ${next.delaySeconds} s` : ''}${next.resume ? ' (resume)' : ''}`
        : next.action === 'finalize'
          ? `finalize ${next.finalState}`
          : 'pause-budget';
    await plane.jobs.putDecision(jobId, {
      seq: outcomeDecisionSeq(plan.attempt),
      at: now.toISOString(),
      moment:
        recorded.kind === 'reclaimed'
          ? 'attempt-reclaimed'
          : recorded.kind === 'capacity-starved'
            ? 'capacity-cancelled'
            : 'attempt-ended',
      decision,
      reason: next.reason,
      step: {
        action: next.action,
        ...(next.capacity !== undefined && { capacity: next.capacity }),
        delaySeconds: next.delaySeconds,
        resume: next.resume,
        ...(next.finalState !== undefined && { finalState: next.finalState }),
        ...(next.failedAs !== undefined && { failedAs: next.failedAs }),
        fellBackToOnDemand: next.fellBackToOnDemand,
      },
    });

    const events = [];
    // An interruption the job goes on from (another attempt, or a budget pause): one it ends at (its deadline passed,
    // a cancel was asked for) is told by the job's final event alone.
    if ((INTERRUPTION_CAUSES as readonly string[]).includes(recorded.kind) && next.action !== 'finalize') {
      events.push(
        jobEvent(
          'Job Interrupted',
          job,
          {
            attempt: plan.attempt,
            capacity: attempt.capacity,
            cause: recorded.kind as (typeof INTERRUPTION_CAUSES)[number],
            ...(recorded.instanceId ? { instanceId: recorded.instanceId } : {}),
            reason: recorded.reason,
          },
          // When the attempt stopped, as recorded: the same on every try of this step.
          ended?.stoppedAt !== undefined ? new Date(ended.stoppedAt) : now,
        ),
      );
    }
    if (next.action !== 'finalize' && next.fellBackToOnDemand) {
      events.push(
        jobEvent(
          'Job FellBackToOnDemand',
          job,
          {
            attempt: plan.attempt + 1,
            reclaims: next.counters.reclaims,
            capacityCancellations: next.counters.capacityCancellations,
            reason: next.reason,
          },
          now,
        ),
      );
    }
    if (events.length > 0) await plane.events.publish(events);

    if (next.action === 'finalize') {
      return {
        jobId,
        next: 'finalize',
        finalState: next.finalState ?? 'FAILED',
        reason: next.reason,
        ...(next.failedAs !== undefined && { failedAs: next.failedAs }),
      };
    }
    const capacity: Capacity = next.capacity ?? attempt.capacity;
    const nextPlan: AttemptPlan = {
      attempt: plan.attempt + 1,
      capacity,
      resume: next.action === 'pause-budget' ? true : next.resume,
      delaySeconds: next.action === 'pause-budget' ? 0 : next.delaySeconds,
    };
    if (next.action === 'pause-budget') return { jobId, next: 'pause', plan: nextPlan };
    return { jobId, next: nextPlan.delaySeconds > 0 ? 'wait' : 'prepare', plan: nextPlan };
  };
}

/** How long a spot attempt that never started waited in the queue (submission to stop), for the placement policy. */
function queueWait(attempt: AttemptRecord | undefined, nowMs: number): { spotUnavailableForSeconds?: number } {
  if (attempt?.capacity !== 'spot' || attempt.startedAt !== undefined || attempt.submittedAt === undefined) return {};
  return { spotUnavailableForSeconds: Math.max(0, ((attempt.stoppedAt ?? nowMs) - attempt.submittedAt) / 1000) };
}
