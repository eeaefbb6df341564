/**
 * From a code bundle to a priced plan: workload analysis picks the tier, then the tier's prices give the cost
 * estimate and the amount the budget gate reserves. Pure; the caller fetches spot quotes for the chosen tier between
 * the two steps. The API (estimate, submit) and the lifecycle's Analyze step both call these.
 */
import { maxRuntimeSeconds, type TierConfig, type TrainyardConfig } from '../../lib/config';
import {
  analyzeWorkload,
  type CodeBundle,
  type Figure,
  InvalidRequirement,
  type JobRequirements,
  type WorkloadAnalysis,
  WorkloadRefused,
} from './analysis';
import { formatDuration } from './analysis/format';
import { type CostEstimate, estimateCost } from './estimator';
import type { JobRecord } from './job';
import { priceTier, type SpotQuote, type TierPrice } from './prices';

/** The tiers a team may use (its `tiers` list, or all). */
export function tiersForTeam(config: TrainyardConfig, teamId: string): TierConfig[] {
  const allowed = config.teams.find((t) => t.id === teamId)?.tiers;
  return allowed ? config.tiers.filter((t) => allowed.includes(t.id)) : [...config.tiers];
}

/** The analysis, the tier it settled on, and the runtime the estimate uses. */
export interface Assessment {
  readonly analysis: WorkloadAnalysis;
  readonly tier: TierConfig;
  /** Runtime used for cost: the analysis's figure for the tier (a user override included), else the tier's maximum. */
  readonly runtime: Figure<number>;
}

/**
 * The longest runtime an analysis may estimate before the job is refused as misread (a year). A tier the user names
 * keeps a job that outlasts its maximum runtime (the job stops there); a year or more is a mistake in max_iters or
 * the model's sizes, and a figure far beyond it is one no record could keep.
 */
export const MAX_ESTIMATED_RUNTIME_SECONDS = 365 * 86_400;

/** Analyses a bundle and settles the tier (throws the analysis's named errors when nothing fits). */
export function assessWorkload(
  bundle: CodeBundle,
  tiers: readonly TierConfig[],
  req: JobRequirements = {},
): Assessment {
  let analysis: WorkloadAnalysis;
  try {
    analysis = analyzeWorkload(bundle, tiers, req);
  } catch (error) {
    // No tier fits one that would run over a year anywhere, each for its maximum runtime: the figure is misread,
    // which is what to say (the refusal would list tiers that cannot help, with figures JSON cannot hold).
    if (error instanceof WorkloadRefused && req.runtimeSeconds === undefined) {
      const fastest = fastestEstimate(error.analysis);
      if (fastest !== undefined && !(fastest.runtime.value <= MAX_ESTIMATED_RUNTIME_SECONDS)) {
        throw overAYear(fastest.tier, fastest.runtime);
      }
    }
    throw error;
  }
  const tierId = analysis.recommendedTier;
  const tier = tiers.find((t) => t.id === tierId);
  if (!tier) throw new Error(`analysis recommended tier ${tierId}, which is not among the tiers it was given`);
  if (req.runtimeSeconds !== undefined) {
    return {
      analysis,
      tier,
      runtime: { value: req.runtimeSeconds, basis: 'runtime given by the user', confidence: 'high' },
    };
  }
  const estimated = analysis.perTier.find((t) => t.tier === tier.id)?.runtimeSeconds;
  if (estimated !== undefined && !(estimated.value <= MAX_ESTIMATED_RUNTIME_SECONDS))
    throw overAYear(tier.id, estimated);
  const maxSeconds = maxComputeSecondsOf(tier, req);
  const runtime = estimated ?? {
    value: maxSeconds,
    basis:
      maxSeconds < maxRuntimeSeconds(tier)
        ? `runtime not estimated; assuming the job runs until its deadline, ${formatDuration(maxSeconds)}`
        : `runtime not estimated; assuming ${tier.id}'s maximum runtime ${formatDuration(maxSeconds)}`,
    confidence: 'low' as const,
  };
  return { analysis, tier, runtime };
}

/** The refusal of a workload read as running over a year on `tierId`. */
function overAYear(tierId: string, estimated: { value: number; basis: string }): InvalidRequirement {
  return new InvalidRequirement(
    `the workload as read would run ${Number.isFinite(estimated.value) ? `about ${formatDuration(estimated.value)} on ${tierId} (${estimated.basis})` : `for ever on ${tierId} (its figures are past what a number holds)`}, over a year, where no tier runs a job longer than 14 days: check max_iters and the model's sizes, or give runtimeSeconds (the CLI's --runtime)`,
  );
}

/** The tier an analysis estimates the shortest runtime on, with that estimate; undefined when it estimates none. */
function fastestEstimate(
  analysis: WorkloadAnalysis,
): { tier: string; runtime: { value: number; basis: string } } | undefined {
  let fastest: { tier: string; runtime: { value: number; basis: string } } | undefined;
  for (const t of analysis.perTier) {
    const runtime = t.runtimeSeconds;
    if (runtime === undefined) continue;
    if (fastest === undefined || runtime.value < fastest.runtime.value || Number.isNaN(fastest.runtime.value)) {
      fastest = { tier: t.tier, runtime };
    }
  }
  return fastest;
}

/**
 * The most compute a job may use on a tier: the tier's maximum runtime over all its attempts, and no more than its
 * deadline (PrepareAttempt times each attempt out at what is left of both).
 */
export function maxComputeSecondsOf(tier: TierConfig, req: JobRequirements): number {
  return Math.min(maxRuntimeSeconds(tier), req.deadlineSeconds ?? Number.POSITIVE_INFINITY);
}

/** Prices and estimate for an assessment. */
export interface PricedAssessment extends Assessment {
  readonly price: TierPrice;
  readonly estimate: CostEstimate;
}

/** Prices the assessed tier (spot quotes for its instance types, if any) and estimates cost and reservation. */
export function priceAssessment(
  assessment: Assessment,
  quotes: readonly SpotQuote[] | undefined,
  req: JobRequirements = {},
): PricedAssessment {
  const price = priceTier(assessment.tier, quotes);
  const estimate = estimateCost(assessment.runtime.value, price, {
    nodes: assessment.tier.nodes,
    maxComputeSeconds: maxComputeSecondsOf(assessment.tier, req),
    ...(req.deadlineSeconds !== undefined && { deadlineSeconds: req.deadlineSeconds }),
  });
  return { ...assessment, price, estimate };
}

/**
 * The job record's estimate summary. costUsd is the reservation (the conservative bound the cost gate holds), not
 * the expected cost: the record says what the budget must cover; the full estimate is in the API response.
 */
export function estimateSummary(priced: PricedAssessment): NonNullable<JobRecord['estimate']> {
  const { analysis, runtime, estimate, tier } = priced;
  return {
    costUsd: estimate.reservationUsd,
    runtimeSeconds: runtime.value,
    ...(analysis.peakGpuMemoryGiB && { gpuMemoryGiB: analysis.peakGpuMemoryGiB.value }),
    confidence: runtime.confidence,
    basis: `reservation for ${formatDuration(runtime.value)} on ${tier.id} (${runtime.basis}); ${estimate.reasoning}`,
  };
}
