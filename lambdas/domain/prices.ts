/**
 * Tier prices: on-demand from config, spot from EC2 spot price history quotes (the lowest latest price across AZs
 * for the tier's instance types, and the dearest, since the spot environment may place an attempt in any of those
 * pools), with the config value as a reported fallback. Pure: the quotes come from the adapter in
 * lambdas/shared/spot-prices.ts.
 */
import type { TierConfig } from '../../lib/config';

/** One spot price point for an instance type in an availability zone. */
export interface SpotQuote {
  instanceType: string;
  az: string;
  usdPerHour: number;
  /** ISO 8601 time the price took effect. */
  timestamp: string;
}

/** What a tier costs per node-hour, and where the spot figure came from. */
export interface TierPrice {
  tier: string;
  onDemandUsdPerHour: number;
  spotUsdPerHour?: number;
  /**
   * The dearest latest spot price among the tier's pools (instance type × AZ), which bounds what an attempt can be
   * charged; the cost estimate's high figure and the budget reservation use it. Absent: spotUsdPerHour is the bound.
   */
  spotHighUsdPerHour?: number;
  spotSource: 'ec2-spot-price-history' | 'config-fallback' | 'not-allowed';
  note?: string;
  /** The instance type and AZ of the quoted spot price (ec2-spot-price-history only). */
  spotInstanceType?: string;
  spotAz?: string;
  /** Nodes per job on this tier (prices above are per node); estimateCost multiplies by it. */
  nodes?: number;
}

/** Prices a tier from config and (optionally) current spot quotes; `undefined` quotes means none could be read. */
export function priceTier(tier: TierConfig, quotes: readonly SpotQuote[] | undefined): TierPrice {
  const base = { tier: tier.id, onDemandUsdPerHour: tier.onDemandUsdPerHour, nodes: tier.nodes };
  if (!tier.spotAllowed) {
    return { ...base, spotSource: 'not-allowed', note: `tier ${tier.id} does not allow spot capacity` };
  }
  const fallback = (why: string): TierPrice => {
    const configured = tier.spotUsdPerHour;
    return {
      ...base,
      ...(configured !== undefined && { spotUsdPerHour: configured }),
      spotSource: 'config-fallback',
      note:
        configured !== undefined
          ? `${why}; using the configured spot price $${configured}/h`
          : `${why}; no spot price is configured for tier ${tier.id}, so spot cost is unknown`,
    };
  };
  if (tier.instanceTypes.length === 0) {
    return fallback(`tier ${tier.id} runs on Fargate, whose spot prices are not in EC2 spot price history`);
  }
  if (quotes === undefined) return fallback('EC2 spot price history is unavailable');

  const latest = latestPerAz(quotes.filter((q) => tier.instanceTypes.includes(q.instanceType)));
  const best = cheapest(latest);
  if (!best) return fallback(`EC2 spot price history has no quotes for ${tier.instanceTypes.join(', ')}`);
  const dearest = Math.max(...latest.map((q) => q.usdPerHour));
  return {
    ...base,
    spotUsdPerHour: best.usdPerHour,
    ...(dearest > best.usdPerHour && { spotHighUsdPerHour: dearest }),
    spotSource: 'ec2-spot-price-history',
    spotInstanceType: best.instanceType,
    spotAz: best.az,
  };
}

/** The quote with the lowest price among the latest quotes per (instance type, AZ). */
function cheapest(latest: readonly SpotQuote[]): SpotQuote | undefined {
  let best: SpotQuote | undefined;
  for (const q of latest) {
    if (!best || q.usdPerHour < best.usdPerHour) best = q;
  }
  return best;
}

/** Keeps the newest quote per (instance type, AZ), dropping quotes with unusable prices or timestamps. */
export function latestPerAz(quotes: readonly SpotQuote[]): SpotQuote[] {
  const byKey = new Map<string, { quote: SpotQuote; at: number }>();
  for (const quote of quotes) {
    const at = Date.parse(quote.timestamp);
    if (!Number.isFinite(quote.usdPerHour) || quote.usdPerHour <= 0 || Number.isNaN(at)) continue;
    const key = `${quote.instanceType}\u0000${quote.az}`;
    const seen = byKey.get(key);
    if (!seen || at > seen.at) byKey.set(key, { quote, at });
  }
  return [...byKey.values()].map((v) => v.quote);
}
