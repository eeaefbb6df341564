/**
 * Code-unit order of strings: how DynamoDB sorts string keys, how SigV4 sorts a canonical query, and the one order
 * that is the same on every machine (`localeCompare` follows the locale, and is not).
 */
export function compareCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
