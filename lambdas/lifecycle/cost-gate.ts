/**
 * CostGate: reserve the job's estimated cost in every budget scope that applies (a saga; idempotent per job id) and
 * choose the first attempt's capacity. A scope that can't afford it REJECTS the job with the budget's numbers.
 */
import { BudgetExceeded, formatScope, jobScopes, periodOf } from '../domain/budgets';
import { tierOfJob } from '../domain/job';
import { decidePlacement } from '../domain/placement';
import { keepsTierSpotRecord, tierPlacementInputs } from '../domain/watch';
import { publishCrossings } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { jobEvent, progressSeconds, secondsSince } from './common';
import { type AttemptPlan, costGateInputSchema, parseStep } from './steps';

/** CostGate's output. */
export type CostGateOutput =
  | { jobId: string; next: 'prepare'; plan: AttemptPlan }
  | { jobId: string; next: 'finalize'; finalState: 'REJECTED' | 'CANCELLED'; reason: string };

/** Creates the CostGate step. */
export function createCostGateHandler(plane: Pick<ControlPlane, 'config' | 'jobs' | 'ledger' | 'events' | 'clock'>) {
  return async (input: unknown): Promise<CostGateOutput> => {
    const { jobId, reservationUsd } = parseStep(costGateInputSchema, 'CostGate', input);
    const job = await plane.jobs.requireJob(jobId);
    if (job.cancelRequested)
      return { jobId, next: 'finalize', finalState: 'CANCELLED', reason: 'cancelled before it ran' };
    const now = plane.clock();
    const team = plane.config.teams.find((t) => t.id === job.team);
    const period = periodOf(new Date(job.createdAt));
    if (team) await plane.ledger.ensureBudget(formatScope('team', team.id), period, team.monthlyBudgetUsd);
    try {
      const reserved = await plane.ledger.reserve(jobId, jobScopes(job), reservationUsd, period);
      await publishCrossings(plane, reserved.crossings, now.toISOString());
    } catch (error) {
      if (!(error instanceof BudgetExceeded)) throw error;
      const reason = `refused by the cost gate: ${error.message}`;
      await plane.jobs.transition(jobId, ['ANALYZING', 'REJECTED'], 'REJECTED', { reason });
      return { jobId, next: 'finalize', finalState: 'REJECTED', reason };
    }

    const tier = tierOfJob(plane.config, job);
    const tierSpotRecord = keepsTierSpotRecord(tier) ? await plane.jobs.getTierSpot(tier.id) : undefined;
    const { policy, tierSpot } = tierPlacementInputs(plane.config.spotPolicy, tier, tierSpotRecord, now.getTime());
    const placement = decidePlacement(
      {
        moment: 'submit',
        nowSeconds: secondsSince(job, now),
        deadlineSeconds: job.requirements.deadlineSeconds,
        workSeconds: job.estimate?.runtimeSeconds ?? 0,
        progressSeconds: progressSeconds(job),
        current: 'none',
        reclaims: 0,
        capacityCancellations: 0,
        spotAllowed: tier.spotAllowed,
        ...(tierSpot ? { tierSpot } : {}),
      },
      policy,
    );
    await plane.jobs.putDecision(jobId, {
      seq: 1,
      at: now.toISOString(),
      moment: 'submit',
      decision: `run-attempt ${placement.capacity}`,
      reason: placement.reason,
    });
    await plane.events.publish([
      jobEvent(
        'Job Submitted',
        job,
        {
          tier: job.tier,
          estimatedCostUsd: job.estimate?.costUsd ?? 0,
          estimatedRuntimeSeconds: job.estimate?.runtimeSeconds ?? 0,
          ...(job.requirements.deadlineSeconds ? { deadlineSeconds: job.requirements.deadlineSeconds } : {}),
        },
        new Date(job.createdAt),
      ),
    ]);
    return {
      jobId,
      next: 'prepare',
      plan: { attempt: 1, capacity: placement.capacity, resume: false, delaySeconds: 0 },
    };
  };
}
