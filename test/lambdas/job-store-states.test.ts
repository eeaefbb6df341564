// JobStore.listJobsInStates against dynalite: the jobs of the given states across teams, read through the byState
// index (only the jobs in those states), or, on a table without that index, through each team's history.

import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobState } from '../../lambdas/domain/job';
import { InvalidJobRecord } from '../../lambdas/domain/job';
import type { DocumentClient } from '../../lambdas/shared/dynamo';
import { BY_STATE_RECHECK_MS, JobStore, jobItem } from '../../lambdas/shared/job-store';
import { decodeOpaqueCursor } from '../../lambdas/shared/opaque-cursor';
import { createTableRequest, JOBS_INDEXES, JOBS_TABLE } from '../../lambdas/shared/table-design';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';
import { jobRecord, T } from '../support/records';

/** The jobs table as it was before the byState index (a local mode folder from then, or a stack mid-upgrade). */
const WITHOUT_BY_STATE = 'trainyard-jobs-without-by-state';

let dynamo: TestDynamo;
/** Each store, with the number of items its Queries read (ScannedCount: what DynamoDB bills, kept or not). */
const stores: Record<
  'indexed' | 'unindexed',
  { store: JobStore; scanned: () => number; indexes: () => string[]; reset: () => void }
> = {} as never;

function countingStore(table: string, now?: () => Date) {
  let scanned = 0;
  let indexes: string[] = [];
  const client: DocumentClient = {
    ...dynamo.doc,
    query: async (input) => {
      if (input.IndexName !== undefined) indexes.push(input.IndexName);
      const out = await dynamo.doc.query(input);
      scanned += out.ScannedCount;
      return out;
    },
  };
  return {
    store: new JobStore(client, table, now),
    scanned: () => scanned,
    indexes: () => indexes,
    reset: () => {
      scanned = 0;
      indexes = [];
    },
  };
}

/**
 * A store on the indexed table whose client moves `jobId` from WAITING to RUNNING right after the first byState Query
 * has read (a job changing state while a read goes partition by partition); `queries()` counts the byState Queries.
 */
function storeMovingAfterFirstStateQuery(jobId: string) {
  let queries = 0;
  const client: DocumentClient = {
    ...dynamo.doc,
    query: async (input) => {
      const out = await dynamo.doc.query(input);
      if (input.IndexName === JOBS_INDEXES.byState.name && queries++ === 0)
        await stores.indexed.store.transition(jobId, ['WAITING'], 'RUNNING');
      return out;
    },
  };
  return { store: new JobStore(client, dynamo.tables.jobs), queries: () => queries };
}

beforeAll(async () => {
  dynamo = await startTestDynamo();
  await dynamo.client.send(
    new CreateTableCommand(
      createTableRequest(WITHOUT_BY_STATE, {
        ...JOBS_TABLE,
        indexes: JOBS_TABLE.indexes.filter((index) => index.name !== JOBS_INDEXES.byState.name),
      }),
    ),
  );
  stores.indexed = countingStore(dynamo.tables.jobs);
  stores.unindexed = countingStore(WITHOUT_BY_STATE);
  // Team "vision": 117 finished jobs with a running (7th), a waiting (47th) and a paused one (87th) among them; one
  // running job each in "nlp" (created first) and in "audio", a team not asked for.
  const states: JobState[] = ['RUNNING', 'WAITING', 'PAUSED_BUDGET'];
  for (const { store } of Object.values(stores)) {
    for (let i = 0; i < 120; i++) {
      const live = i % 40 === 7 ? states[Math.floor(i / 40)] : undefined;
      await store.createJob(
        jobRecord({
          jobId: `vision-${String(i).padStart(3, '0')}`,
          team: 'vision',
          state: live ?? (i % 2 === 0 ? 'SUCCEEDED' : 'FAILED'),
          createdAt: new Date(T.created + i * 60_000).toISOString(),
        }),
      );
    }
    await store.createJob(jobRecord({ jobId: 'nlp-001', team: 'nlp', state: 'RUNNING' }));
    await store.createJob(
      jobRecord({ jobId: 'audio-001', team: 'audio', state: 'RUNNING', createdAt: new Date(T.created).toISOString() }),
    );
  }
});

afterAll(async () => {
  await dynamo.stop();
});

describe.each(['indexed', 'unindexed'] as const)('JobStore.listJobsInStates on the %s table', (which) => {
  it.each([
    { states: ['RUNNING'] as JobState[], ids: ['nlp-001', 'vision-007'] },
    { states: ['WAITING'] as JobState[], ids: ['vision-047'] },
    { states: ['RUNNING', 'PAUSED_BUDGET'] as JobState[], ids: ['nlp-001', 'vision-007', 'vision-087'] },
    {
      states: ['PAUSED_BUDGET', 'RUNNING', 'WAITING'] as JobState[],
      ids: ['nlp-001', 'vision-007', 'vision-047', 'vision-087'],
    },
    { states: [] as JobState[], ids: [] },
  ])('returns the $states jobs of the teams asked for, oldest first', async ({ states, ids }) => {
    const jobs = await stores[which].store.listJobsInStates(['vision', 'nlp'], states);

    expect(jobs.map((j) => j.jobId)).toEqual(ids);
    for (const job of jobs) expect(states).toContain(job.state);
  });

  it('returns nothing for no teams', async () => {
    expect(await stores[which].store.listJobsInStates([], ['RUNNING'])).toEqual([]);
  });

  it('with anyTeam, returns through the index the jobs of teams not asked for too (without it, those asked for)', async () => {
    // audio-001 is created first: the oldest. A team gone from the configuration still has its jobs to end.
    const jobs = await stores[which].store.listJobsInStates(['vision'], ['RUNNING'], undefined, true);

    expect(jobs.map((j) => j.jobId)).toEqual(
      which === 'indexed' ? ['audio-001', 'nlp-001', 'vision-007'] : ['vision-007'],
    );
  });
});

describe('what listJobsInStates reads', () => {
  it('through byState, only the jobs in the states asked for, not the teams’ finished history', async () => {
    const { store, scanned, reset } = stores.indexed;
    reset();

    await store.listJobsInStates(['vision', 'nlp'], ['RUNNING', 'WAITING', 'PAUSED_BUDGET']);

    // vision's three live jobs, nlp's and audio's running job (read, then left out as a team not asked for).
    expect(scanned()).toBe(5);
  });

  it('without byState, every job of each team asked for (the reason for the index)', async () => {
    const { store, scanned, reset } = stores.unindexed;
    reset();

    await store.listJobsInStates(['vision', 'nlp'], ['RUNNING', 'WAITING', 'PAUSED_BUDGET']);

    expect(scanned()).toBe(121);
  });
});

describe.each(['indexed', 'unindexed'] as const)('a record that does not parse, on the %s table', (which) => {
  const table = () => (which === 'indexed' ? dynamo.tables.jobs : WITHOUT_BY_STATE);

  it('is handed to onInvalid and the others returned; without onInvalid, it throws', async () => {
    const { store } = stores[which];
    const bad = jobRecord({ jobId: 'lab-bad', team: 'lab', state: 'RUNNING' });
    await dynamo.doc.put({
      TableName: table(),
      Item: { ...jobItem(bad), user: 7 },
    });
    await store.createJob(
      jobRecord({
        jobId: 'lab-good',
        team: 'lab',
        state: 'RUNNING',
        createdAt: new Date(T.created + 60_000).toISOString(),
      }),
    );
    const invalid: string[] = [];

    const jobs = await store.listJobsInStates(['lab'], ['RUNNING'], ({ key, error }) =>
      invalid.push(`${key}: ${error.message}`),
    );

    expect(jobs.map((j) => j.jobId)).toEqual(['lab-good']);
    expect(invalid).toEqual([expect.stringMatching(/^JOB#lab-bad: invalid job record: user/)]);
    await expect(store.listJobsInStates(['lab'], ['RUNNING'])).rejects.toThrow(InvalidJobRecord);
  });
});

describe('a job that changes state between two of the index queries', () => {
  it('is returned once, as the later query read it', async () => {
    // The store's queries run state by state in the order asked; the job moves after the first query has read it.
    const { store } = stores.indexed;
    await store.createJob(jobRecord({ jobId: 'moving-001', team: 'moving', state: 'WAITING' }));

    const jobs = await storeMovingAfterFirstStateQuery('moving-001').store.listJobsInStates(
      ['moving'],
      ['WAITING', 'RUNNING'],
    );

    expect(jobs.map((j) => [j.jobId, j.state])).toEqual([['moving-001', 'RUNNING']]);
  });
});

describe('listJobsByTeam with one live state', () => {
  // The beforeAll's tables: vision has 117 finished jobs and one job in each live state; nlp and audio one running.
  it('reads only that state’s jobs through byState, newest first, page by page with the team’s cursors', async () => {
    const { store, scanned, reset } = stores.indexed;
    for (const [i, id] of ['vision-200', 'vision-201'].entries()) {
      await store.createJob(
        jobRecord({
          jobId: id,
          team: 'vision',
          state: 'RUNNING',
          createdAt: new Date(T.created + (200 + i) * 60_000).toISOString(),
        }),
      );
    }
    reset();

    const first = await store.listJobsByTeam('vision', { states: ['RUNNING'], limit: 2 });
    expect(stores.indexed.indexes()).toEqual(['byState']);
    const second = await store.listJobsByTeam('vision', { states: ['RUNNING'], limit: 2, cursor: first.nextCursor });

    expect(first.jobs.map((j) => j.jobId)).toEqual(['vision-201', 'vision-200']);
    expect(second.jobs.map((j) => j.jobId)).toEqual(['vision-007']);
    expect(second.nextCursor).toBeUndefined();
    // Every RUNNING job of every team is read at most twice (the last of a full page is where the next one starts),
    // none of vision's finished ones.
    expect(scanned()).toBeLessThanOrEqual(2 * 7);
  });

  it('gives the jobs the byTeam reading gives, and takes its cursors', async () => {
    const indexed = stores.indexed.store;
    const all = await indexed.listJobsByTeam('vision', { limit: 1000 });
    const running = all.jobs.filter((j) => j.state === 'RUNNING').map((j) => j.jobId);

    const page = await indexed.listJobsByTeam('vision', { states: ['RUNNING'], limit: 1000 });
    expect(page.jobs.map((j) => j.jobId)).toEqual(running);
    // An unfiltered page ending just before vision-119 (its cursor: byTeam keys), continued with the state: the running
    // jobs older than where it ended.
    const head = await indexed.listJobsByTeam('vision', { limit: all.jobs.findIndex((j) => j.jobId === 'vision-119') });
    const rest = await indexed.listJobsByTeam('vision', { states: ['RUNNING'], cursor: head.nextCursor });
    expect(rest.jobs.map((j) => j.jobId)).toEqual(['vision-007']);
  });

  it('reads a table without byState through byTeam, to the same jobs', async () => {
    let now = T.created;
    const { store, indexes, reset } = countingStore(WITHOUT_BY_STATE, () => new Date(now));

    const page = await store.listJobsByTeam('vision', { states: ['RUNNING'] });

    expect(page.jobs.map((j) => j.jobId)).toEqual(['vision-007']);
    expect(indexes()).toEqual(['byState', 'byTeam']);
    // Found missing, the index is not asked for again until BY_STATE_RECHECK_MS have passed.
    reset();
    await store.listJobsInStates(['vision'], ['RUNNING']);
    now += BY_STATE_RECHECK_MS - 1;
    await store.listJobsByTeam('vision', { states: ['RUNNING'] });
    expect(indexes()).toEqual(['byTeam', 'byTeam']);
    now += 1;
    await store.listJobsByTeam('vision', { states: ['RUNNING'] });
    expect(indexes()).toEqual(['byTeam', 'byTeam', 'byState', 'byTeam']);
  });

  it('reads a terminal state through byTeam (dense in a team’s history, sparse among every team’s)', async () => {
    const { store, indexes, reset } = stores.indexed;
    reset();

    const page = await store.listJobsByTeam('vision', { states: ['SUCCEEDED'], limit: 5 });

    expect(page.jobs.map((j) => j.jobId)).toEqual([
      'vision-118',
      'vision-116',
      'vision-114',
      'vision-112',
      'vision-110',
    ]);
    expect(new Set(indexes())).toEqual(new Set(['byTeam']));
  });
});

describe('listJobsByTeam with several live states', () => {
  // vision: 117 finished jobs, vision-007 and (from the tests above) vision-200/201 running, vision-047 waiting,
  // vision-087 paused; other teams' running jobs share the RUNNING partition.
  const live: JobState[] = ['WAITING', 'RUNNING', 'PAUSED_BUDGET'];

  it('reads only those states’ jobs, merged newest first as byTeam orders them, page by page', async () => {
    const { store, scanned, indexes, reset } = stores.indexed;
    const everything = await store.listJobsByTeam('vision', { limit: 1000 });
    const expected = everything.jobs.filter((j) => live.includes(j.state)).map((j) => j.jobId);
    reset();

    const found: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await store.listJobsByTeam('vision', { states: live, limit: 2, cursor });
      found.push(...page.jobs.map((j) => j.jobId));
      cursor = page.nextCursor;
    } while (cursor);

    expect(expected).toEqual(['vision-201', 'vision-200', 'vision-087', 'vision-047', 'vision-007']);
    expect(found).toEqual(expected);
    expect(new Set(indexes())).toEqual(new Set(['byState']));
    // Three pages, each reading each of the three partitions at most once: the live jobs of every team (9 here), and
    // none of vision's 117 finished ones.
    expect(scanned()).toBeLessThanOrEqual(3 * 9);
    // Before the index (or without it), the first page alone reads through vision's history to its third live job.
    stores.unindexed.reset();
    await stores.unindexed.store.listJobsByTeam('vision', { states: live, limit: 2 });
    expect(stores.unindexed.scanned()).toBeGreaterThanOrEqual(120 - 47);
  });

  it('gives the jobs and cursors the byTeam reading gives, either continuing the other', async () => {
    const indexed = stores.indexed.store;
    const unindexed = stores.unindexed.store;
    // The unindexed table has vision's first 120 jobs only; list what both hold: created before vision-200.
    const both = await unindexed.listJobsByTeam('vision', { states: live, limit: 1000 });
    expect(both.jobs.map((j) => j.jobId)).toEqual(['vision-087', 'vision-047', 'vision-007']);

    const viaIndex = await indexed.listJobsByTeam('vision', { states: live, limit: 3 });
    expect(viaIndex.jobs.map((j) => j.jobId)).toEqual(['vision-201', 'vision-200', 'vision-087']);
    // The index's cursor, continued through byTeam (states mixed with a terminal one), and byTeam's through the index.
    const onByTeam = await indexed.listJobsByTeam('vision', {
      states: [...live, 'SUCCEEDED'],
      limit: 2,
      cursor: viaIndex.nextCursor,
    });
    expect(onByTeam.jobs.map((j) => j.jobId)).toEqual(['vision-086', 'vision-084']);
    const backOnIndex = await indexed.listJobsByTeam('vision', { states: live, cursor: onByTeam.nextCursor });
    expect(backOnIndex.jobs.map((j) => j.jobId)).toEqual(['vision-047', 'vision-007']);
    expect(backOnIndex.nextCursor).toBeUndefined();
  });

  it('reads a list of states with a terminal one through byTeam', async () => {
    const { store, indexes, reset } = stores.indexed;
    reset();

    const page = await store.listJobsByTeam('vision', { states: ['RUNNING', 'FAILED'], limit: 3 });

    expect(page.jobs.map((j) => j.jobId)).toEqual(['vision-201', 'vision-200', 'vision-119']);
    expect(new Set(indexes())).toEqual(new Set(['byTeam']));
  });

  it('hands out a job that moves between two of the states while the page is read once', async () => {
    const { store } = stores.indexed;
    for (const [i, state] of (['WAITING', 'RUNNING'] as const).entries()) {
      await store.createJob(
        jobRecord({
          jobId: `hopping-00${i}`,
          team: 'hopping',
          state,
          createdAt: new Date(T.created + i * 60_000).toISOString(),
        }),
      );
    }
    // The WAITING partition is read first (states in the order asked); hopping-000 moves to RUNNING right after.
    const moving = storeMovingAfterFirstStateQuery('hopping-000');

    const page = await moving.store.listJobsByTeam('hopping', { states: ['WAITING', 'RUNNING'] });

    expect(moving.queries()).toBe(2);
    expect(page.jobs.map((j) => j.jobId)).toEqual(['hopping-001', 'hopping-000']);
    expect(page.nextCursor).toBeUndefined();
  });
});

// Last in the file: it crowds the RUNNING partition that the tests above count reads of.
describe('listJobsByTeam with live states crowded by another team', () => {
  beforeAll(async () => {
    // 300 running jobs of another team, all created between vision-007 and vision-200.
    for (let i = 0; i < 300; i++) {
      await stores.indexed.store.createJob(
        jobRecord({
          jobId: `crowd-${String(i).padStart(3, '0')}`,
          team: 'crowd',
          state: 'RUNNING',
          createdAt: new Date(T.created + 60 * 60_000 + i * 10_000).toISOString(),
        }),
      );
    }
  });

  it.each([
    { states: ['RUNNING'] as JobState[], ids: ['vision-201', 'vision-200', 'vision-007'] },
    { states: ['WAITING', 'RUNNING'] as JobState[], ids: ['vision-201', 'vision-200', 'vision-047', 'vision-007'] },
  ])(
    '$states: hands out cursors naming only the team’s own jobs, reading on through byTeam where byState is crowded',
    async ({ states, ids }) => {
      const { store, indexes, scanned, reset } = stores.indexed;
      reset();
      const found: string[] = [];
      const cursors: unknown[] = [];
      const readPerPage: number[] = [];
      let cursor: string | undefined;
      do {
        const before = scanned();
        const page = await store.listJobsByTeam('vision', { states, limit: 2, maxRead: 100, cursor });
        readPerPage.push(scanned() - before);
        found.push(...page.jobs.map((j) => j.jobId));
        cursor = page.nextCursor;
        if (cursor) cursors.push(decodeOpaqueCursor(cursor));
      } while (cursor);

      expect(found).toEqual(ids);
      expect(cursors.length).toBeGreaterThan(0);
      for (const at of cursors) {
        expect(at).toMatchObject({ pk: expect.stringMatching(/^JOB#vision-/), gsi1pk: 'TEAM#vision' });
      }
      // The second page read the crowd through byState, then went on through byTeam, each page within its budget.
      expect(indexes()).toContain('byTeam');
      for (const read of readPerPage) expect(read).toBeLessThanOrEqual(100);
      expect(Math.max(...readPerPage)).toBeGreaterThan(50);
    },
  );
});

describe('a change the job record refuses', () => {
  it('is refused before it is written, so the record stays readable', async () => {
    const { store } = stores.indexed;
    await store.createJob(jobRecord({ jobId: 'change-001', team: 'change', state: 'RUNNING' }));
    const before = await store.requireJob('change-001');

    // A step count that is not a whole number: written, it would make every read of the job fail.
    const progress = { totalSteps: 1666.5, fraction: 0, updatedAt: '2026-11-20T09:00:00.000Z' };
    await expect(store.patchJob('change-001', { progress })).rejects.toThrow(
      /^invalid change to a job record: progress\.totalSteps/,
    );
    await expect(store.transition('change-001', ['RUNNING'], 'WAITING', { progress })).rejects.toThrow(
      InvalidJobRecord,
    );
    expect(await store.requireJob('change-001')).toEqual(before);
  });
});
