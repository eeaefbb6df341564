// JobStore.listJobsInStates against dynalite: the jobs of the given states across teams, filtered by DynamoDB.

import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobState } from '../../lambdas/domain/job';
import { InvalidJobRecord } from '../../lambdas/domain/job';
import { JobStore } from '../../lambdas/shared/job-store';
import { jobKeys } from '../../lambdas/shared/table-design';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';
import { jobRecord, T } from '../support/records';

let dynamo: TestDynamo;
let store: JobStore;

beforeAll(async () => {
  dynamo = await startTestDynamo();
  store = new JobStore(dynamo.doc, dynamo.tables.jobs);
  // Team "vision": 117 finished jobs with a running (7th), a waiting (47th) and a paused one (87th) among them; one
  // running job each in "nlp" and in "audio", a team not asked for.
  const states: JobState[] = ['RUNNING', 'WAITING', 'PAUSED_BUDGET'];
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
  await store.createJob(jobRecord({ jobId: 'audio-001', team: 'audio', state: 'RUNNING' }));
});

afterAll(async () => {
  await dynamo.stop();
});

describe('JobStore.listJobsInStates', () => {
  it.each([
    { states: ['RUNNING'] as JobState[], ids: ['vision-007', 'nlp-001'] },
    { states: ['WAITING'] as JobState[], ids: ['vision-047'] },
    { states: ['RUNNING', 'PAUSED_BUDGET'] as JobState[], ids: ['vision-007', 'vision-087', 'nlp-001'] },
    { states: [] as JobState[], ids: [] },
  ])('returns the $states jobs of the teams asked for, oldest first per team', async ({ states, ids }) => {
    const jobs = await store.listJobsInStates(['vision', 'nlp'], states);

    expect(jobs.map((j) => j.jobId)).toEqual(ids);
    for (const job of jobs) expect(states).toContain(job.state);
  });

  it('hands a record that does not parse to onInvalid and returns the others; without it, throws', async () => {
    const bad = jobRecord({ jobId: 'lab-bad', team: 'lab', state: 'RUNNING' });
    await dynamo.doc.send(
      new PutCommand({
        TableName: dynamo.tables.jobs,
        Item: { ...jobKeys.job(bad.jobId), ...jobKeys.teamIndex('lab', bad.createdAt, bad.jobId), ...bad, user: 7 },
      }),
    );
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
