/**
 * AttemptOutcome: an attempt ended (Batch's result or the caught failure). Classify it from Batch's own fields,
 * record its end and cost once, refresh progress, and decide what comes next — resume on spot, fall back to
 * on-demand, retry with backoff, pause for budget, or finalize — recording the decision and its reason.
 * Replay-safe: records are written once and counters are derived from the attempt records, never incremented.
 */
import { type BatchJob, parseBatchFailureCause, parseBatchJob } from '../domain/batch-job';
import { type AttemptRecord, tierOfJob } from '../domain/job';
import { decideNextStep } from '../domain/next-step';
import { type Capacity, spotHistoryOf } from '../domain/placement';
import { type TierSpotRecord, tierSpotAfterReclaim } from '../domain/tier-spot';
import {
  keepsTierSpotRecord,
  progressFromHarness,
  recordedCost,
  spotTroublesSinceLastMove,
  TIER_SPOT_CHECK_INTERVAL_SECONDS,
  tierPlacementInputs,
} from '../domain/watch';
import { jobKeysFor } from '../domain/workspace-layout';
import type { ControlPlane } from '../shared/control-plane';
import { countersFrom, jobEvent, progressSeconds, recordAttemptEnd, secondsSince } from './common';
import { type AttemptPlan, attemptOutcomeInputSchema, parseStep } from './steps';

/** AttemptOutcome's output: the Choice after it routes on `next`. */
export type AttemptOutcomeOutput =
  | { jobId: string; next: 'prepare' | 'wait' | 'pause'; plan: AttemptPlan }
  | { jobId: string; next: 'finalize'; finalState: 'SUCCEEDED' | 'FAILED' | 'CANCELLED'; reason: string };

/** Decision sequence number for the decision taken when attempt `n` ended (submit is 1; periodic moves n×100+50). */
export function outcomeDecisionSeq(attempt: number): number {
  return attempt * 100 + 1;
}

const INTERRUPTION_KINDS = ['reclaimed', 'capacity-starved', 'moved', 'budget-stopped'] as const;

/** Creates the AttemptOutcome step. */
export function createAttemptOutcomeHandler(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'workspace' | 'events' | 'clock'>,
) {
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
      batchJob = parseBatchFailureCause(batchError.Cause);
    }
    const outcome = await recordAttemptEnd(
      plane,
      job,
      attempt,
      // The job never reached Batch (SubmitJob refused, a runtime error): an infrastructure failure to retry.
      batchJob ?? {
        notRun: `${batchError?.Error ?? 'unknown error'}${batchError?.Cause ? ` — ${batchError.Cause.slice(0, 400)}` : ''}`,
      },
      now,
    );

    const attempts = await plane.jobs.listAttempts(jobId);
    const ended = attempts.find((a) => a.attempt === plan.attempt);
    const recorded = ended?.outcome ?? outcome;
    const progress =
      progressFromHarness(await plane.workspace.getJson(jobKeysFor(job.team, jobId).progress), jobId) ?? job.progress;
    const current = { ...job, progress, counters: countersFrom(attempts, plan.attempt) };
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
    const next = decideNextStep({
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
      ...queueWait(ended, now.getTime()),
    });

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
    });

    const events = [];
    if ((INTERRUPTION_KINDS as readonly string[]).includes(recorded.kind)) {
      events.push(
        jobEvent(
          'Job Interrupted',
          job,
          {
            attempt: plan.attempt,
            capacity: attempt.capacity,
            cause: recorded.kind as (typeof INTERRUPTION_KINDS)[number],
            ...(recorded.instanceId ? { instanceId: recorded.instanceId } : {}),
            reason: recorded.reason,
          },
          now,
        ),
      );
    }
    if (next.action === 'run-attempt' && next.fellBackToOnDemand) {
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
      return { jobId, next: 'finalize', finalState: next.finalState ?? 'FAILED', reason: next.reason };
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
