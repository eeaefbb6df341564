/**
 * From a code bundle to a priced plan: workload analysis picks the tier, then the tier's prices give the cost
 * estimate and the amount the budget gate reserves. Pure; the caller fetches spot quotes for the chosen tier between
 * the two steps. The API (estimate, submit) and the lifecycle's Analyze step both call these.
 */
import { maxRuntimeSeconds, type TierConfig, type TrainyardConfig } from '../../lib/config';
import { analyzeWorkload, type CodeBundle, type Figure, type JobRequirements, type WorkloadAnalysis } from './analysis';
import { type CostEstimate, estimateCost } from './estimator';
import { priceTier, type SpotQuote, type TierPrice } from './prices';

/** The tiers a team may use (its `tiers` list, or all). */
export function tiersForTeam(config: TrainyardConfig, teamId: string): TierConfig[] {
  const team = config.teams.find((t) => t.id === teamId);
  if (!team?.tiers) return [...config.tiers];
  return config.tiers.filter((t) => team.tiers?.includes(t.id));
}

/** The analysis, the tier it settled on, and the runtime the estimate uses. */
export interface Assessment {
  readonly analysis: WorkloadAnalysis;
  readonly tier: TierConfig;
  /** Runtime used for cost: the user's, the analysis's, or — when neither is known — the tier's maximum. */
  readonly runtime: Figure<number>;
}

/** Analyses a bundle and settles the tier (throws the analysis's named errors when nothing fits). */
export function assessWorkload(
  bundle: CodeBundle,
  tiers: readonly TierConfig[],
  req: JobRequirements = {},
): Assessment {
  const analysis = analyzeWorkload(bundle, tiers, req);
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
  const runtime = estimated ?? {
    value: maxRuntimeSeconds(tier),
    basis: `runtime unknown (${analysis.unknowns[0] ?? 'no literal hyper-parameters'}); budgeted at tier ${tier.id}'s maximum of ${tier.maxRuntime}`,
    confidence: 'low' as const,
  };
  return { analysis, tier, runtime };
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
  const estimate = estimateCost(Math.max(1, Math.round(assessment.runtime.value)), price, {
    deadlineSeconds: req.deadlineSeconds,
    nodes: assessment.tier.nodes,
  });
  return { ...assessment, price, estimate };
}

/** The job record's estimate summary for a priced assessment. */
export function estimateSummary(priced: PricedAssessment) {
  const { estimate, runtime, analysis } = priced;
  const expected =
    estimate.recommendation === 'on-demand' || !estimate.spot
      ? estimate.onDemand.costUsd
      : estimate.spot.expectedCostUsd;
  return {
    costUsd: expected,
    runtimeSeconds: runtime.value,
    gpuMemoryGiB: analysis.peakGpuMemoryGiB?.value,
    confidence: runtime.confidence,
    basis: `${runtime.basis}; ${estimate.reasoning}`,
  };
}
