import { describe, expect, it } from 'vitest';
import { latestPerAz, priceTier, type SpotQuote } from '../../lambdas/domain/prices';
import { parseConfig, type TierConfig } from '../../lib/config';

const seed = parseConfig({}).tiers;
const tier = (id: string): TierConfig => {
  const found = seed.find((t) => t.id === id);
  if (!found) throw new Error(`seed tier ${id} missing`);
  return found;
};
const quote = (instanceType: string, az: string, usdPerHour: number, timestamp: string): SpotQuote => ({
  instanceType,
  az,
  usdPerHour,
  timestamp,
});

describe('priceTier', () => {
  it.each([
    {
      name: 'takes the lowest of the latest prices across AZs, ignoring superseded and other-type quotes',
      tier: tier('gpu-small'),
      quotes: [
        quote('g4dn.xlarge', 'us-east-1a', 0.15, '2026-07-01T10:00:00Z'), // superseded by the 11:00 price
        quote('g4dn.xlarge', 'us-east-1a', 0.21, '2026-07-01T11:00:00Z'),
        quote('g4dn.xlarge', 'us-east-1b', 0.18, '2026-07-01T09:00:00Z'),
        quote('g4dn.2xlarge', 'us-east-1c', 0.1, '2026-07-01T11:00:00Z'), // not this tier's type
      ],
      expected: {
        tier: 'gpu-small',
        onDemandUsdPerHour: 0.526,
        spotUsdPerHour: 0.18,
        spotHighUsdPerHour: 0.21, // the spot environment may place an attempt in us-east-1a too
        spotSource: 'ec2-spot-price-history',
        spotInstanceType: 'g4dn.xlarge',
        spotAz: 'us-east-1b',
        nodes: 1,
      },
    },
    {
      name: 'quotes the cheapest pool across all the tier’s types, and the dearest as the bound',
      tier: tier('gpu-small'),
      quotes: [
        quote('g4dn.xlarge', 'us-east-1a', 0.2, '2026-07-01T11:00:00Z'),
        quote('g6.xlarge', 'us-east-1b', 0.17, '2026-07-01T11:00:00Z'),
        quote('g5.xlarge', 'us-east-1a', 0.41, '2026-07-01T10:00:00Z'),
        quote('g5.xlarge', 'us-east-1a', 0.38, '2026-07-01T11:00:00Z'), // supersedes 0.41
      ],
      expected: {
        tier: 'gpu-small',
        onDemandUsdPerHour: 0.526,
        spotUsdPerHour: 0.17,
        spotHighUsdPerHour: 0.38,
        spotSource: 'ec2-spot-price-history',
        spotInstanceType: 'g6.xlarge',
        spotAz: 'us-east-1b',
        nodes: 1,
      },
    },
    {
      name: 'has no separate bound when every pool costs the same',
      tier: tier('gpu-small'),
      quotes: [
        quote('g4dn.xlarge', 'us-east-1a', 0.2, '2026-07-01T11:00:00Z'),
        quote('g4dn.xlarge', 'us-east-1b', 0.2, '2026-07-01T11:00:00Z'),
      ],
      expected: {
        tier: 'gpu-small',
        onDemandUsdPerHour: 0.526,
        spotUsdPerHour: 0.2,
        spotSource: 'ec2-spot-price-history',
        spotInstanceType: 'g4dn.xlarge',
        spotAz: 'us-east-1a',
        nodes: 1,
      },
    },
    {
      name: 'falls back to the configured spot price when EC2 could not be read',
      tier: tier('gpu-large'),
      quotes: undefined,
      expected: {
        tier: 'gpu-large',
        onDemandUsdPerHour: 1.212,
        spotUsdPerHour: 0.5,
        spotSource: 'config-fallback',
        note: 'EC2 spot price history is unavailable; using the configured spot price $0.5/h',
        nodes: 1,
      },
    },
    {
      name: 'falls back when no quote matches the tier’s instance types',
      tier: tier('gpu-medium'),
      quotes: [quote('g4dn.xlarge', 'us-east-1a', 0.2, '2026-07-01T11:00:00Z')],
      expected: {
        tier: 'gpu-medium',
        onDemandUsdPerHour: 0.752,
        spotUsdPerHour: 0.27,
        spotSource: 'config-fallback',
        note: 'EC2 spot price history has no quotes for g4dn.2xlarge, g6.2xlarge, g5.2xlarge; using the configured spot price $0.27/h',
        nodes: 1,
      },
    },
    {
      name: 'reports not-allowed for a tier without spot',
      tier: tier('gpu-multinode'),
      quotes: [quote('g5.12xlarge', 'us-east-1a', 2, '2026-07-01T11:00:00Z')],
      expected: {
        tier: 'gpu-multinode',
        onDemandUsdPerHour: 5.672,
        spotSource: 'not-allowed',
        note: 'tier gpu-multinode does not allow spot capacity',
        nodes: 2,
      },
    },
    {
      name: 'uses the configured price for Fargate tiers',
      tier: tier('cpu-small'),
      quotes: [],
      expected: {
        tier: 'cpu-small',
        onDemandUsdPerHour: 0.025,
        spotUsdPerHour: 0.008,
        spotSource: 'config-fallback',
        note: 'tier cpu-small runs on Fargate, whose spot prices are not in EC2 spot price history; using the configured spot price $0.008/h',
        nodes: 1,
      },
    },
  ])('$name', ({ tier: t, quotes, expected }) => {
    expect(priceTier(t, quotes)).toEqual(expected);
  });

  it('says spot cost is unknown when neither EC2 nor config has a spot price', () => {
    const [custom] = parseConfig({
      tiers: [
        {
          id: 'gpu-x',
          kind: 'gpu',
          instanceTypes: ['g5.xlarge', 'g6.xlarge'],
          gpus: 1,
          gpuMemoryGiB: 24,
          vcpus: 4,
          memoryMiB: 15000,
          maxRuntime: '1h',
          onDemandUsdPerHour: 1,
          peakTflops: 100,
        },
      ],
    }).tiers;
    if (!custom) throw new Error('tier missing');
    expect(priceTier(custom, undefined)).toEqual({
      tier: 'gpu-x',
      onDemandUsdPerHour: 1,
      spotSource: 'config-fallback',
      note: 'EC2 spot price history is unavailable; no spot price is configured for tier gpu-x, so spot cost is unknown',
      nodes: 1,
    });
    // Two instance types: the cheaper current quote of either wins.
    const priced = priceTier(custom, [
      quote('g5.xlarge', 'us-west-2a', 0.45, '2026-07-01T11:00:00Z'),
      quote('g6.xlarge', 'us-west-2b', 0.39, '2026-07-01T11:00:00Z'),
    ]);
    expect([priced.spotUsdPerHour, priced.spotInstanceType, priced.spotAz]).toEqual([0.39, 'g6.xlarge', 'us-west-2b']);
  });
});

describe('latestPerAz', () => {
  it('keeps the newest quote per type and AZ and drops unusable prices', () => {
    const quotes = [
      quote('g4dn.xlarge', 'a', 0.2, '2026-07-01T10:00:00Z'),
      quote('g4dn.xlarge', 'a', 0.3, '2026-07-01T12:00:00Z'),
      quote('g4dn.xlarge', 'a', 0.25, '2026-07-01T11:00:00Z'),
      quote('g4dn.xlarge', 'b', Number.NaN, '2026-07-01T12:00:00Z'),
      quote('g4dn.xlarge', 'c', 0, '2026-07-01T12:00:00Z'),
      quote('g4dn.xlarge', 'd', 0.4, 'not a time'),
      quote('g5.xlarge', 'a', 0.5, '2026-07-01T09:00:00Z'),
    ];
    expect(latestPerAz(quotes)).toEqual([quotes[1], quotes[6]]);
  });
});
