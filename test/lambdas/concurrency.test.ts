// mapConcurrently: input order kept, the limit held, and a failure reported the same way whatever answers first.
import { describe, expect, it } from 'vitest';
import { mapConcurrently } from '../../lambdas/shared/concurrency';

/** A call that resolves (or rejects) when the test says, recording how many calls were in flight. */
function controlled() {
  const pending = new Map<number, { resolve: (v: string) => void; reject: (e: Error) => void }>();
  let inFlight = 0;
  let most = 0;
  const fn = (item: number) =>
    new Promise<string>((resolve, reject) => {
      inFlight += 1;
      most = Math.max(most, inFlight);
      const done = () => {
        inFlight -= 1;
      };
      pending.set(item, {
        resolve: (v) => {
          done();
          resolve(v);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
    });
  const settle = async (item: number, outcome: string | Error) => {
    while (!pending.has(item)) await new Promise((r) => setImmediate(r));
    const call = pending.get(item);
    if (outcome instanceof Error) call?.reject(outcome);
    else call?.resolve(outcome);
  };
  return { fn, settle, started: () => [...pending.keys()], most: () => most };
}

describe('mapConcurrently', () => {
  it('keeps the items’ order whatever order the calls finish in, with at most `limit` in flight', async () => {
    const c = controlled();
    const run = mapConcurrently([0, 1, 2, 3, 4], 2, c.fn);
    for (const item of [1, 0, 3, 2, 4]) await c.settle(item, `r${item}`);
    expect(await run).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    expect(c.most()).toBe(2);
  });

  it('starts nothing new after a failure and throws the earliest failed item’s error', async () => {
    const c = controlled();
    const run = mapConcurrently([0, 1, 2, 3, 4, 5], 3, c.fn);
    const outcome = run.then(
      () => 'resolved',
      (error: Error) => error.message,
    );
    let settled = false;
    void outcome.then(() => {
      settled = true;
    });
    await c.settle(2, new Error('item 2 failed'));
    await c.settle(1, new Error('item 1 failed'));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false); // item 0 is still in flight
    await c.settle(0, 'r0');
    // The first failure kept items 3-5 from starting; of the two, item 1's error is the one thrown.
    expect(await outcome).toBe('item 1 failed');
    expect(c.started()).toEqual([0, 1, 2]);
  });

  it('handles no items, and refuses a limit that is not a positive integer', async () => {
    expect(await mapConcurrently([], 4, async () => 1)).toEqual([]);
    await expect(mapConcurrently([1], 0, async () => 1)).rejects.toThrow('limit must be a positive integer, got 0');
  });
});
