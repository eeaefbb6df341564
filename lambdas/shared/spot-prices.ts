/**
 * EC2 spot price adapter: the current spot price per availability zone for a set of instance types, from
 * DescribeSpotPriceHistory, cached for a TTL so a burst of estimates costs one EC2 call. On any error it returns
 * undefined and logs why; the caller (priceTier) then reports the config fallback.
 */

import { Logger } from '@aws-lambda-powertools/logger';
import type { DescribeSpotPriceHistoryCommandInput, EC2Client } from '@aws-sdk/client-ec2';
import { latestPerAz, type SpotQuote } from '../domain/prices';

/** The part of a logger the cache uses (Powertools Logger satisfies it). */
export interface SpotPriceLogger {
  warn(message: string, attributes: Record<string, unknown>): void;
}

/** Pages read per lookup at most; a price history for a handful of types and "now" fits in one or two. */
export const MAX_SPOT_PRICE_PAGES = 20;

const defaultLogger = new Logger({ serviceName: 'trainyard' });

/** Caches current spot quotes per set of instance types for `ttlMs`. */
export class SpotPriceCache {
  private readonly entries = new Map<string, { fetchedAt: number; quotes: Promise<SpotQuote[] | undefined> }>();

  /** `now` returns epoch milliseconds (injectable for tests); `logger` receives one warning per failed lookup. */
  constructor(
    private readonly ec2: EC2Client,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
    private readonly logger: SpotPriceLogger = defaultLogger,
  ) {
    if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new RangeError(`ttlMs must be a finite number >= 0, got ${ttlMs}`);
  }

  /** Latest Linux/UNIX spot quote per AZ per instance type; undefined when EC2 could not be read. */
  async quotesFor(instanceTypes: string[]): Promise<SpotQuote[] | undefined> {
    const types = [...new Set(instanceTypes)].sort();
    if (types.length === 0) return [];
    const key = types.join(',');
    const at = this.now();
    const cached = this.entries.get(key);
    if (cached && at - cached.fetchedAt < this.ttlMs) return cached.quotes;
    // The promise is cached, not the result, so concurrent callers share one lookup.
    const quotes = this.fetch(types, at);
    this.entries.set(key, { fetchedAt: at, quotes });
    const result = await quotes;
    // A failure is not cached: the next caller tries EC2 again rather than living on the fallback for a whole TTL.
    if (result === undefined && this.entries.get(key)?.quotes === quotes) this.entries.delete(key);
    return result;
  }

  private async fetch(instanceTypes: string[], at: number): Promise<SpotQuote[] | undefined> {
    const quotes: SpotQuote[] = [];
    let nextToken: string | undefined;
    try {
      // Loaded on first use: the EC2 client module is slow to load and most invocations never price spot.
      const { DescribeSpotPriceHistoryCommand } = await import('@aws-sdk/client-ec2');
      for (let page = 0; page < MAX_SPOT_PRICE_PAGES; page++) {
        const out = await this.ec2.send(
          new DescribeSpotPriceHistoryCommand({
            InstanceTypes: instanceTypes as DescribeSpotPriceHistoryCommandInput['InstanceTypes'],
            ProductDescriptions: ['Linux/UNIX'],
            // With a start time of now, EC2 returns the price in effect now for each AZ and type.
            StartTime: new Date(at),
            ...(nextToken && { NextToken: nextToken }),
          }),
        );
        for (const item of out.SpotPriceHistory ?? []) {
          const usdPerHour = Number(item.SpotPrice);
          if (!item.InstanceType || !item.AvailabilityZone || !item.Timestamp || !Number.isFinite(usdPerHour)) continue;
          quotes.push({
            instanceType: item.InstanceType,
            az: item.AvailabilityZone,
            usdPerHour,
            timestamp: new Date(item.Timestamp).toISOString(),
          });
        }
        if (!out.NextToken || out.NextToken === nextToken) return latestPerAz(quotes);
        nextToken = out.NextToken;
      }
      this.logger.warn('spot price history did not end within the page limit; using the prices read so far', {
        instanceTypes,
        pages: MAX_SPOT_PRICE_PAGES,
      });
      return latestPerAz(quotes);
    } catch (error) {
      const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      this.logger.warn('spot price history unavailable; callers fall back to configured spot prices', {
        instanceTypes,
        reason,
      });
      return undefined;
    }
  }
}
