/**
 * Plain JavaScript values to and from DynamoDB's attribute values, as the stores write and read them. The rules are
 * those the stores were built on with `@aws-sdk/lib-dynamodb` (removeUndefinedValues, no class instances, plain
 * numbers), and test/lambdas/dynamo-items.test.ts checks them against `@aws-sdk/util-dynamodb` value for value:
 * - undefined inside a map or list is left out (an optional field stays optional);
 * - a number must be finite and, if an integer, a safe one: DynamoDB keeps 38 digits, a JavaScript number does not,
 *   and the stores count money in integer micro-dollars;
 * - a Date, a class instance or a function is refused, not flattened: one slipped into an item is a bug;
 * - string and number sets, and binary values, are supported for completeness; an empty set is refused (DynamoDB
 *   has none).
 */

/** One DynamoDB attribute value, as the JSON protocol writes it. */
export type AttributeValue =
  | { S: string }
  | { N: string }
  | { BOOL: boolean }
  | { NULL: true }
  | { B: string }
  | { L: AttributeValue[] }
  | { M: Record<string, AttributeValue> }
  | { SS: string[] }
  | { NS: string[] }
  | { BS: string[] };

/** Raised for a value DynamoDB cannot hold as the stores use it; `path` says where in the item it was. */
export class UnsupportedItemValue extends Error {
  override name = 'UnsupportedItemValue';
}

/** A map of values (an item, a key, expression attribute values) as attribute values; undefined ones left out. */
export function marshallItem(item: Readonly<Record<string, unknown>>): Record<string, AttributeValue> {
  return marshallMap(item, '');
}

/** Attribute values back to plain values. */
export function unmarshallItem(item: Readonly<Record<string, AttributeValue>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(item)) out[name] = unmarshallValue(value, name);
  return out;
}

function marshallMap(map: Readonly<Record<string, unknown>>, path: string): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const [name, value] of Object.entries(map)) {
    if (value === undefined) continue;
    out[name] = marshallValue(value, path === '' ? name : `${path}.${name}`);
  }
  return out;
}

function marshallValue(value: unknown, path: string): AttributeValue {
  switch (typeof value) {
    case 'string':
      return { S: value };
    case 'boolean':
      return { BOOL: value };
    case 'number':
      return { N: numberText(value, path) };
    case 'bigint':
      return { N: value.toString() };
    case 'object': {
      if (value === null) return { NULL: true };
      if (Array.isArray(value))
        return {
          L: value.flatMap((element, index) =>
            element === undefined ? [] : [marshallValue(element, `${path}[${index}]`)],
          ),
        };
      if (value instanceof Set) return marshallSet(value, path);
      if (value instanceof Uint8Array) return { B: Buffer.from(value).toString('base64') };
      const prototype = Object.getPrototypeOf(value) as unknown;
      if (prototype === Object.prototype || prototype === null)
        return { M: marshallMap(value as Record<string, unknown>, path) };
      throw new UnsupportedItemValue(
        `${describe(path)} is a ${(value as object).constructor?.name ?? 'class instance'}: an item holds plain ` +
          'objects, arrays, strings, numbers, booleans, null, sets and Uint8Arrays; convert it first ' +
          '(a time as an ISO string or epoch milliseconds)',
      );
    }
    default:
      throw new UnsupportedItemValue(`${describe(path)} is a ${typeof value}, which an item cannot hold`);
  }
}

function marshallSet(set: Set<unknown>, path: string): AttributeValue {
  const values = [...set];
  if (values.length === 0) throw new UnsupportedItemValue(`${describe(path)} is an empty set, which DynamoDB has not`);
  if (values.every((v) => typeof v === 'string')) return { SS: values as string[] };
  if (values.every((v) => typeof v === 'number' || typeof v === 'bigint'))
    return {
      NS: values.map((v, i) => (typeof v === 'bigint' ? v.toString() : numberText(v as number, `${path}{${i}}`))),
    };
  if (values.every((v) => v instanceof Uint8Array))
    return { BS: values.map((v) => Buffer.from(v as Uint8Array).toString('base64')) };
  throw new UnsupportedItemValue(
    `${describe(path)} is a set of mixed or unsupported values: a set holds only strings, only numbers or only binary`,
  );
}

function numberText(value: number, path: string): string {
  if (!Number.isFinite(value))
    throw new UnsupportedItemValue(`${describe(path)} is ${value}: DynamoDB numbers are finite`);
  if (Number.isInteger(value) && !Number.isSafeInteger(value))
    throw new UnsupportedItemValue(
      `${describe(path)} is ${value}, past Number.MAX_SAFE_INTEGER: it would not read back exactly; use a bigint`,
    );
  return String(value);
}

function unmarshallValue(value: AttributeValue, path: string): unknown {
  if ('S' in value) return value.S;
  if ('N' in value) return numberValue(value.N, path);
  if ('BOOL' in value) return value.BOOL;
  if ('NULL' in value) return null;
  if ('M' in value) {
    const out: Record<string, unknown> = {};
    for (const [name, inner] of Object.entries(value.M)) out[name] = unmarshallValue(inner, `${path}.${name}`);
    return out;
  }
  if ('L' in value) return value.L.map((inner, index) => unmarshallValue(inner, `${path}[${index}]`));
  if ('SS' in value) return new Set(value.SS);
  if ('NS' in value) return new Set(value.NS.map((n) => numberValue(n, path)));
  if ('B' in value) return new Uint8Array(Buffer.from(value.B, 'base64'));
  if ('BS' in value) return new Set(value.BS.map((b) => new Uint8Array(Buffer.from(b, 'base64'))));
  throw new UnsupportedItemValue(
    `${describe(path)} has an attribute type this client does not read: ${JSON.stringify(value)}`,
  );
}

function numberValue(text: string, path: string): number {
  const value = Number(text);
  if (!Number.isFinite(value) || (Number.isInteger(value) && !Number.isSafeInteger(value)))
    throw new UnsupportedItemValue(`${describe(path)} is ${text}, which a JavaScript number cannot hold exactly`);
  return value;
}

function describe(path: string): string {
  return path === '' ? 'the value' : `attribute ${path}`;
}
