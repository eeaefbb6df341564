/**
 * Analysis, prices and estimate of one workload for one team, shared by POST /estimate and POST /jobs: the analysis
 * sees only the tiers the team may use, the chosen tier (recommendation or override) is priced with current spot
 * quotes, and its runtime figure feeds the cost estimate.
 */
import { maxRuntimeSeconds, type TeamConfig, type TierConfig, type TrainyardConfig } from '../../lib/config';
import { analyzeWorkload, type Figure, type JobRequirements, type WorkloadAnalysis } from '../domain/analysis';
import { formatDuration } from '../domain/analysis/format';
import { type CostEstimate, estimateCost } from '../domain/estimator';
import type { JobRecord } from '../domain/job';
import { priceTier, type TierPrice } from '../domain/prices';
import type { SpotQuotes } from '../shared/control-plane';
import { forbidden } from './errors';

/** The tiers a team may use (all tiers when its config lists none). */
export function tiersOf(config: TrainyardConfig, team: TeamConfig): TierConfig[] {
  const allowed = team.tiers;
  return allowed ? config.tiers.filter((t) => allowed.includes(t.id)) : [...config.tiers];
}

/** Prices a tier with current spot quotes; quotes are only asked for tiers that run on EC2 spot. */
export async function priceOf(spotQuotes: SpotQuotes, tier: TierConfig): Promise<TierPrice> {
  const quotes =
    tier.spotAllowed && tier.instanceTypes.length > 0 ? await spotQuotes.quotesFor(tier.instanceTypes) : undefined;
  return priceTier(tier, quotes);
}

/** The assessment of a workload on the tier it would run on. */
export interface WorkloadAssessment {
  readonly analysis: WorkloadAnalysis;
  readonly tier: TierConfig;
  readonly price: TierPrice;
  /** Runtime the estimate is based on: the analysis's figure for the tier, else the tier's maximum. */
  readonly runtime: Figure<number>;
  readonly estimate: CostEstimate;
}

/**
 * Analyses a workload against the team's tiers and estimates it on the recommended (or requested) tier. A requested
 * tier that exists but is not the team's is refused with 403; an unknown one raises UnknownTier (400) listing the
 * team's tiers; nothing fitting raises WorkloadRefused (422).
 */
export async function assessWorkload(
  deps: { config: TrainyardConfig; spotQuotes: SpotQuotes },
  team: TeamConfig,
  workload: { files: Record<string, string>; command: string[]; requirements?: JobRequirements },
): Promise<WorkloadAssessment> {
  const tiers = tiersOf(deps.config, team);
  const requested = workload.requirements?.tier;
  if (
    requested !== undefined &&
    deps.config.tiers.some((t) => t.id === requested) &&
    !tiers.some((t) => t.id === requested)
  ) {
    throw forbidden(`team ${team.id} may not use tier ${requested}; its tiers: ${tiers.map((t) => t.id).join(', ')}`);
  }
  const analysis = analyzeWorkload(
    { files: workload.files, command: workload.command },
    tiers,
    workload.requirements ?? {},
  );
  // analyzeWorkload sets recommendedTier whenever it returns (it throws WorkloadRefused otherwise).
  const tier = tiers.find((t) => t.id === analysis.recommendedTier) as TierConfig;
  const price = await priceOf(deps.spotQuotes, tier);
  const assessed = analysis.perTier.find((t) => t.tier === tier.id)?.runtimeSeconds;
  const maxSeconds = maxRuntimeSeconds(tier);
  const runtime: Figure<number> = assessed ?? {
    value: maxSeconds,
    basis: `runtime not estimated; assuming ${tier.id}'s maximum runtime ${formatDuration(maxSeconds)}`,
    confidence: 'low',
  };
  const deadlineSeconds = workload.requirements?.deadlineSeconds;
  const estimate = estimateCost(runtime.value, price, {
    nodes: tier.nodes,
    ...(deadlineSeconds !== undefined && { deadlineSeconds }),
  });
  return { analysis, tier, price, runtime, estimate };
}

/**
 * The job record's estimate summary. costUsd is the reservation (the conservative bound the cost gate holds), not
 * the expected cost: the record says what the budget must cover; the full estimate is in the API response.
 */
export function estimateSummary(assessment: WorkloadAssessment): NonNullable<JobRecord['estimate']> {
  const { analysis, runtime, estimate } = assessment;
  return {
    costUsd: estimate.reservationUsd,
    runtimeSeconds: runtime.value,
    ...(analysis.peakGpuMemoryGiB && { gpuMemoryGiB: analysis.peakGpuMemoryGiB.value }),
    confidence: runtime.confidence,
    basis: `reservation for ${formatDuration(runtime.value)} on ${assessment.tier.id} (${runtime.basis}); ${estimate.reasoning}`,
  };
}
