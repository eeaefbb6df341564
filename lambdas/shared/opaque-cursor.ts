/**
 * Opaque cursors the API hands out (the job list's next page, a log follower's position): a JSON value as base64url,
 * so callers pass it back unread. Decoding never throws: what is not a cursor comes back undefined, for the caller
 * to refuse with a message that says which cursor was expected.
 */

/** A JSON value as an opaque cursor. */
export function encodeOpaqueCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** The JSON value a cursor holds; undefined when the text is not one. */
export function decodeOpaqueCursor(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}
