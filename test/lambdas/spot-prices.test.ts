import {
  DescribeSpotPriceHistoryCommand,
  type DescribeSpotPriceHistoryCommandOutput,
  EC2Client,
} from '@aws-sdk/client-ec2';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, describe, expect, it } from 'vitest';
import { SpotPriceCache, type SpotPriceLogger } from '../../lambdas/shared/spot-prices';

// EC2 has no local engine, so the client is mocked with AWS's documented DescribeSpotPriceHistory response shape:
// SpotPriceHistory[] of { AvailabilityZone, InstanceType, ProductDescription, SpotPrice (string), Timestamp (Date) },
// plus NextToken while more pages remain.
const ec2Mock = mockClient(EC2Client);
afterEach(() => ec2Mock.reset());

const item = (InstanceType: string, AvailabilityZone: string, SpotPrice: string, at: string) => ({
  AvailabilityZone,
  InstanceType,
  ProductDescription: 'Linux/UNIX',
  SpotPrice,
  Timestamp: new Date(at),
});
const page = (
  items: ReturnType<typeof item>[],
  NextToken?: string,
): Partial<DescribeSpotPriceHistoryCommandOutput> => ({
  SpotPriceHistory: items as DescribeSpotPriceHistoryCommandOutput['SpotPriceHistory'],
  ...(NextToken !== undefined && { NextToken }),
});

class RecordingLogger implements SpotPriceLogger {
  readonly warnings: Array<{ message: string; attributes: Record<string, unknown> }> = [];
  warn(message: string, attributes: Record<string, unknown>): void {
    this.warnings.push({ message, attributes });
  }
}

/** A clock the test moves by hand. */
function clock(start: number) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

const T0 = Date.parse('2026-07-01T12:00:00Z');

describe('SpotPriceCache', () => {
  it('asks for Linux/UNIX prices from now for the given types and returns the latest per AZ per type', async () => {
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .resolves(
        page([
          item('g4dn.xlarge', 'us-east-1a', '0.210000', '2026-07-01T11:00:00Z'),
          item('g4dn.xlarge', 'us-east-1a', '0.150000', '2026-07-01T09:00:00Z'),
          item('g4dn.xlarge', 'us-east-1b', '0.180000', '2026-07-01T08:00:00Z'),
          item('g5.2xlarge', 'us-east-1a', '0.480000', '2026-07-01T10:30:00Z'),
        ]),
      );
    const c = clock(T0);
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, c.now, new RecordingLogger());

    const quotes = await cache.quotesFor(['g5.2xlarge', 'g4dn.xlarge']);

    expect(quotes).toEqual([
      { instanceType: 'g4dn.xlarge', az: 'us-east-1a', usdPerHour: 0.21, timestamp: '2026-07-01T11:00:00.000Z' },
      { instanceType: 'g4dn.xlarge', az: 'us-east-1b', usdPerHour: 0.18, timestamp: '2026-07-01T08:00:00.000Z' },
      { instanceType: 'g5.2xlarge', az: 'us-east-1a', usdPerHour: 0.48, timestamp: '2026-07-01T10:30:00.000Z' },
    ]);
    const calls = ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0]?.args[0].input).toEqual({
      InstanceTypes: ['g4dn.xlarge', 'g5.2xlarge'],
      ProductDescriptions: ['Linux/UNIX'],
      StartTime: new Date(T0),
    });
  });

  it('follows NextToken across pages', async () => {
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1a', '0.20', '2026-07-01T11:00:00Z')], 'page-2'))
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1b', '0.19', '2026-07-01T11:00:00Z')], 'page-3'))
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1c', '0.22', '2026-07-01T11:00:00Z')], ''));
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, () => T0, new RecordingLogger());

    const quotes = await cache.quotesFor(['g4dn.xlarge']);

    expect(quotes?.map((q) => [q.az, q.usdPerHour])).toEqual([
      ['us-east-1a', 0.2],
      ['us-east-1b', 0.19],
      ['us-east-1c', 0.22],
    ]);
    const tokens = ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand).map((call) => call.args[0].input.NextToken);
    expect(tokens).toEqual([undefined, 'page-2', 'page-3']);
  });

  it('calls EC2 once within the TTL and again once it has passed', async () => {
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1a', '0.20', '2026-07-01T11:00:00Z')]))
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1a', '0.25', '2026-07-01T12:01:00Z')]));
    const c = clock(T0);
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, c.now, new RecordingLogger());

    const first = await cache.quotesFor(['g4dn.xlarge']);
    c.advance(59_999);
    const withinTtl = await cache.quotesFor(['g4dn.xlarge', 'g4dn.xlarge']);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)).toHaveLength(1);
    expect(withinTtl).toBe(first);

    c.advance(1);
    const refreshed = await cache.quotesFor(['g4dn.xlarge']);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)).toHaveLength(2);
    expect(refreshed?.[0]?.usdPerHour).toBe(0.25);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)[1]?.args[0].input.StartTime).toEqual(
      new Date(T0 + 60_000),
    );
  });

  it('shares one EC2 call between concurrent lookups', async () => {
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .resolves(page([item('g4dn.xlarge', 'us-east-1a', '0.20', '2026-07-01T11:00:00Z')]));
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, () => T0, new RecordingLogger());

    const [a, b] = await Promise.all([cache.quotesFor(['g4dn.xlarge']), cache.quotesFor(['g4dn.xlarge'])]);

    expect(a).toEqual(b);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)).toHaveLength(1);
  });

  it('returns undefined and logs the reason when EC2 fails, and tries again on the next call', async () => {
    const denied = Object.assign(new Error('You are not authorized to perform this operation.'), {
      name: 'UnauthorizedOperation',
    });
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .rejectsOnce(denied)
      .resolvesOnce(page([item('g4dn.xlarge', 'us-east-1a', '0.20', '2026-07-01T11:00:00Z')]));
    const logger = new RecordingLogger();
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, () => T0, logger);

    expect(await cache.quotesFor(['g4dn.xlarge'])).toBeUndefined();
    expect(logger.warnings).toEqual([
      {
        message: 'spot price history unavailable; callers fall back to configured spot prices',
        attributes: {
          instanceTypes: ['g4dn.xlarge'],
          reason: 'UnauthorizedOperation: You are not authorized to perform this operation.',
        },
      },
    ]);
    // The failure is not cached for the TTL: the next call reaches EC2 and succeeds.
    expect(await cache.quotesFor(['g4dn.xlarge'])).toHaveLength(1);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)).toHaveLength(2);
  });

  it('skips entries without a usable price and needs no call for an empty type list', async () => {
    ec2Mock
      .on(DescribeSpotPriceHistoryCommand)
      .resolves(
        page([
          item('g4dn.xlarge', 'us-east-1a', 'n/a', '2026-07-01T11:00:00Z'),
          item('g4dn.xlarge', 'us-east-1b', '0.19', '2026-07-01T11:00:00Z'),
        ]),
      );
    const cache = new SpotPriceCache(new EC2Client({}), 60_000, () => T0, new RecordingLogger());

    expect(await cache.quotesFor([])).toEqual([]);
    expect(ec2Mock.commandCalls(DescribeSpotPriceHistoryCommand)).toHaveLength(0);
    expect((await cache.quotesFor(['g4dn.xlarge']))?.map((q) => q.az)).toEqual(['us-east-1b']);
  });
});
