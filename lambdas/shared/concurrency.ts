/** Bounded concurrency for independent async work: a few requests in flight at once, results in input order. */

/**
 * `fn` over every item, at most `limit` calls in flight, results in the items' order. After a failure no new call
 * starts; the calls in flight finish, then the failure of the earliest item among those that ran is thrown, so the
 * error a caller sees does not depend on which request happened to answer first.
 */
export async function mapConcurrently<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
  const out = new Array<R>(items.length);
  let next = 0;
  let failure: { index: number; error: unknown } | undefined;
  const fail = (index: number, error: unknown) => {
    if (failure === undefined || index < failure.index) failure = { index, error };
  };
  const worker = async () => {
    while (failure === undefined && next < items.length) {
      const index = next++;
      try {
        out[index] = await fn(items[index] as T, index);
      } catch (error) {
        fail(index, error);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (failure !== undefined) throw failure.error;
  return out;
}
