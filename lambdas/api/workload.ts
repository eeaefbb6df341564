/**
 * Analysis, prices and estimate of one workload for one team, shared by POST /estimate and POST /jobs. The pure
 * steps live in lambdas/domain/assessment.ts (the lifecycle's Analyze step uses them too); this adds what the API
 * needs: refusing a tier the team may not use, and fetching spot quotes for the chosen tier.
 */
import type { TeamConfig, TierConfig, TrainyardConfig } from '../../lib/config';
import type { JobRequirements } from '../domain/analysis';
import { assessWorkload as assess, type PricedAssessment, priceAssessment, tiersForTeam } from '../domain/assessment';
import { priceTier, type TierPrice } from '../domain/prices';
import type { SpotQuotes } from '../shared/control-plane';
import { forbidden } from './errors';

export { estimateSummary } from '../domain/assessment';

/** The assessment of a workload on the tier it would run on. */
export type WorkloadAssessment = PricedAssessment;

/** The tiers a team may use (all tiers when its config lists none). */
export function tiersOf(config: TrainyardConfig, team: TeamConfig): TierConfig[] {
  return tiersForTeam(config, team.id);
}

/** Spot quotes for a tier, asked only for tiers that run on EC2 spot. */
async function quotesFor(spotQuotes: SpotQuotes, tier: TierConfig) {
  return tier.spotAllowed && tier.instanceTypes.length > 0 ? spotQuotes.quotesFor([...tier.instanceTypes]) : undefined;
}

/** Prices a tier with current spot quotes. */
export async function priceOf(spotQuotes: SpotQuotes, tier: TierConfig): Promise<TierPrice> {
  return priceTier(tier, await quotesFor(spotQuotes, tier));
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
  const requirements = workload.requirements ?? {};
  const assessment = assess({ files: workload.files, command: workload.command }, tiers, requirements);
  return priceAssessment(assessment, await quotesFor(deps.spotQuotes, assessment.tier), requirements);
}
