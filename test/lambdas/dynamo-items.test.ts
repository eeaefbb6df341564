// Items to and from attribute values (lambdas/shared/dynamo-items.ts), checked against the AWS SDK's own
// @aws-sdk/util-dynamodb with the options the stores used with lib-dynamodb, and its refusals, which are ours.

import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, it } from 'vitest';
import { marshallItem, UnsupportedItemValue, unmarshallItem } from '../../lambdas/shared/dynamo-items';

const SDK_OPTIONS = { removeUndefinedValues: true, convertClassInstanceToMap: false } as const;

/** What the SDK writes for a value, as the JSON protocol sends it (its binary values as base64, as on the wire). */
function sdkWire(item: Record<string, unknown>): unknown {
  return JSON.parse(
    JSON.stringify(marshall(item, SDK_OPTIONS), (_key, value: unknown) =>
      value instanceof Uint8Array ? Buffer.from(value).toString('base64') : value,
    ),
  );
}

const ITEMS: Array<{ what: string; item: Record<string, unknown> }> = [
  {
    what: 'a job record’s kinds of values',
    item: {
      pk: 'JOB#j-1',
      sk: 'META',
      state: 'RUNNING',
      attempt: 2,
      costMicros: 1_234_567_890,
      usdPerHour: 0.9731,
      spot: true,
      stoppedAt: null,
      labels: { project: 'gpt', empty: '' },
      attempts: [{ n: 1, capacity: 'spot', reclaimed: true }, { n: 2 }],
    },
  },
  {
    what: 'negative, tiny and exponent numbers',
    item: { a: -3, b: 1e-7, c: 0.1 + 0.2, d: 0, e: Number.MAX_SAFE_INTEGER },
  },
  { what: 'deeply nested maps and lists', item: { a: { b: { c: [[1, 'x'], { d: [true, null] }] } } } },
  { what: 'empty maps and lists', item: { m: {}, l: [] } },
  { what: 'sets of strings and of numbers', item: { ss: new Set(['a', 'b']), ns: new Set([1, 2.5]) } },
  { what: 'binary values', item: { b: new Uint8Array([0, 1, 254, 255]), bs: new Set([new Uint8Array([7])]) } },
  { what: 'a bigint', item: { big: 12345678901234567890n } },
  { what: 'a map with no prototype', item: { m: Object.assign(Object.create(null) as object, { x: 1 }) } },
];

describe('marshallItem', () => {
  it.each(ITEMS)('writes $what as the AWS SDK does', ({ item }) => {
    expect(marshallItem(item)).toEqual(sdkWire(item));
  });

  it('leaves out undefined values in maps and lists, at any depth, as the SDK does with removeUndefinedValues', () => {
    const item = { keep: 1, drop: undefined, m: { drop: undefined, keep: 'x' }, l: [1, undefined, 2] };

    expect(marshallItem(item)).toEqual({
      keep: { N: '1' },
      m: { M: { keep: { S: 'x' } } },
      l: { L: [{ N: '1' }, { N: '2' }] },
    });
    expect(marshallItem(item)).toEqual(sdkWire(item));
  });

  it.each([
    { what: 'a Date', item: { at: { when: new Date(0) } }, message: 'attribute at.when is a Date' },
    { what: 'a class instance', item: { x: new (class Money {})() }, message: 'attribute x is a Money' },
    { what: 'NaN', item: { cost: Number.NaN }, message: 'attribute cost is NaN: DynamoDB numbers are finite' },
    { what: 'Infinity', item: { l: [1, Infinity] }, message: 'attribute l[1] is Infinity' },
    { what: 'an integer past 2^53', item: { n: 2 ** 60 }, message: 'past Number.MAX_SAFE_INTEGER' },
    { what: 'an empty set', item: { s: new Set() }, message: 'attribute s is an empty set' },
    { what: 'a mixed set', item: { s: new Set(['a', 1]) }, message: 'set of mixed or unsupported values' },
    { what: 'a function', item: { f: () => 1 }, message: 'attribute f is a function' },
    { what: 'a symbol', item: { s: Symbol('x') }, message: 'attribute s is a symbol' },
  ])('refuses $what and says where it was', ({ item, message }) => {
    expect(() => marshallItem(item)).toThrow(UnsupportedItemValue);
    expect(() => marshallItem(item)).toThrow(message);
  });
});

describe('unmarshallItem', () => {
  it.each(ITEMS)('reads $what back as the AWS SDK does', ({ item }) => {
    const wire = marshallItem(item);
    const sdk = unmarshall(marshall(item, SDK_OPTIONS));

    // The SDK reads an integer past 2^53 as a bigint; ours refuses it (below), so compare the others.
    if (Object.values(item).some((v) => typeof v === 'bigint')) return expect(() => unmarshallItem(wire)).toThrow();
    expect(unmarshallItem(wire)).toEqual(sdk);
  });

  it('round-trips a record unchanged', () => {
    const item = ITEMS[0]?.item as Record<string, unknown>;

    expect(unmarshallItem(marshallItem(item))).toEqual(item);
  });

  it.each([
    { what: 'a number past 2^53', value: { N: '9007199254740993' } },
    { what: 'a number DynamoDB keeps but a double overflows', value: { N: '1E+400' } },
  ])('refuses $what rather than read it inexactly', ({ value }) => {
    expect(() => unmarshallItem({ n: value })).toThrow('attribute n is');
  });

  it('refuses an attribute type it does not know', () => {
    expect(() => unmarshallItem({ x: { Q: 'x' } as never })).toThrow('attribute x has an attribute type');
  });
});
