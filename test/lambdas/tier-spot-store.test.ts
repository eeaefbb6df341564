// The jobs table's tier spot records (JobStore.updateTierSpot) against dynalite: a write lands only over the record
// it was computed from, so a writer that lost a race recomputes from the winner's record.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidTierSpotRecord, type TierSpotRecord } from '../../lambdas/domain/tier-spot';
import type { DocumentClient } from '../../lambdas/shared/dynamo';
import { JobStore, TierSpotConflict } from '../../lambdas/shared/job-store';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';

const T0 = 1_795_183_200_000;
const record = (fields: Partial<TierSpotRecord> = {}): TierSpotRecord => ({
  tier: 'gpu-small',
  available: true,
  sinceMs: T0,
  sinceChange: true,
  seenMs: T0,
  ...fields,
});

let dynamo: TestDynamo;
let store: JobStore;
let tierCount = 0;
const freshTier = () => `tier-${++tierCount}`;

beforeAll(async () => {
  dynamo = await startTestDynamo();
  store = new JobStore(dynamo.doc, dynamo.tables.jobs);
});

afterAll(async () => {
  await dynamo.stop();
});

describe('JobStore.updateTierSpot', () => {
  it('stores what the update returns and reads it back; nothing to write leaves the record as it is', async () => {
    const tier = freshTier();
    expect(await store.getTierSpot(tier)).toBeUndefined();

    const first = await store.updateTierSpot(tier, () => record({ tier }));
    const unchanged = await store.updateTierSpot(tier, () => undefined);

    expect(first).toEqual(record({ tier }));
    expect(unchanged).toEqual(record({ tier }));
    expect(await store.getTierSpot(tier)).toEqual(record({ tier }));
  });

  it('asks again with the winner’s record when another writer changed it between the read and the write', async () => {
    const tier = freshTier();
    await store.updateTierSpot(tier, () => record({ tier }));
    const seen: Array<number | undefined> = [];
    // A rival stores seenMs T0 + 300 s just before this store's first write.
    const racing = storeWithRivals(tier, [{ seenMs: T0 + 300_000 }]);

    const result = await racing.updateTierSpot(tier, (stored) => {
      seen.push(stored?.seenMs);
      return stored && { ...stored, seenMs: stored.seenMs + 300_000 };
    });

    expect(seen).toEqual([T0, T0 + 300_000]);
    expect(result).toEqual(record({ tier, seenMs: T0 + 600_000 }));
    expect(await store.getTierSpot(tier)).toEqual(record({ tier, seenMs: T0 + 600_000 }));
  });

  it('asks again when the rival changed only whether the stretch’s start was seen (a reclaim at its first tick)', async () => {
    const tier = freshTier();
    await store.updateTierSpot(tier, () => record({ tier, sinceChange: false }));
    const seen: Array<boolean | undefined> = [];
    const racing = storeWithRivals(tier, [{ sinceChange: true }]);

    await racing.updateTierSpot(tier, (stored) => {
      seen.push(stored?.sinceChange);
      return stored && { ...stored, seenMs: stored.seenMs + 300_000 };
    });

    expect(seen).toEqual([false, true]);
    expect(await store.getTierSpot(tier)).toEqual(record({ tier, sinceChange: true, seenMs: T0 + 300_000 }));
  });

  it('gives up with TierSpotConflict when the record changes under it on every try, storing none of its own', async () => {
    const tier = freshTier();
    await store.updateTierSpot(tier, () => record({ tier }));
    const racing = storeWithRivals(tier, [{ seenMs: T0 + 1000 }, { seenMs: T0 + 2000 }, { seenMs: T0 + 3000 }]);

    await expect(
      racing.updateTierSpot(tier, (stored) => stored && { ...stored, seenMs: stored.seenMs + 1 }),
    ).rejects.toThrow(
      new TierSpotConflict(
        `tier ${tier}'s spot record kept changing under concurrent writers; it was not updated this time`,
      ),
    );
    expect(await store.getTierSpot(tier)).toEqual(record({ tier, seenMs: T0 + 3000 }));
  });

  it('refuses a record for another tier, or one that is not valid, and writes nothing', async () => {
    const tier = freshTier();
    await expect(store.updateTierSpot(tier, () => record({ tier: 'other' }))).rejects.toThrow(
      new InvalidTierSpotRecord(`a record for tier other cannot be stored as tier ${tier}'s`),
    );
    await expect(store.updateTierSpot(tier, () => record({ tier, sinceMs: T0 + 1 }))).rejects.toThrow(
      InvalidTierSpotRecord,
    );
    expect(await store.getTierSpot(tier)).toBeUndefined();
  });
});

/**
 * A store whose client lets a rival writer store the tier's record (`record` with the fields of `rivals`, one per
 * write) just before each of its own writes, as another Lambda would between its read and its write.
 */
function storeWithRivals(tier: string, rivals: Array<Partial<TierSpotRecord>>): JobStore {
  const queue = [...rivals];
  const client: DocumentClient = {
    ...dynamo.doc,
    async put(input) {
      const rival = queue.shift();
      if (rival !== undefined) await store.updateTierSpot(tier, () => record({ tier, ...rival }));
      return dynamo.doc.put(input);
    },
  };
  return new JobStore(client, dynamo.tables.jobs);
}
