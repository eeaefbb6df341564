// GET/DELETE /jobs…, resume, checkpoints and logs against real engines: team isolation (another team's job is a
// 404 indistinguishable from an unknown one), cancel in every state, resume only when paused, the job view's costs
// and forecast worked out by hand, and checkpoint listings that hide incomplete checkpoints.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeLogCursor, logStreamOf, MAX_CHECKPOINT_URLS } from '../../../lambdas/api/routes/artifacts';
import { FORECAST_METRICS_BYTES } from '../../../lambdas/api/routes/jobs';
import type { AttemptRecord, JobRecord, JobState } from '../../../lambdas/domain/job';
import { budgetPeriodOf } from '../../../lambdas/domain/watch';
import { jobKeysFor } from '../../../lambdas/domain/workspace-layout';
import { mapConcurrently } from '../../../lambdas/shared/concurrency';
import { type ApiBench, errorOf, PRINCIPALS, startApiBench, TEST_CONFIG_INPUT } from './support';

const AUDIO = 'arn:aws:iam::123456789012:role/audio-researchers';
const ROBOTICS = 'arn:aws:iam::123456789012:role/robotics-researchers';
let bench: ApiBench;
beforeAll(async () => {
  bench = await startApiBench({
    ...TEST_CONFIG_INPUT,
    teams: [
      ...TEST_CONFIG_INPUT.teams,
      { id: 'audio', principals: [AUDIO], monthlyBudgetUsd: 50 },
      { id: 'robotics', principals: [ROBOTICS], monthlyBudgetUsd: 50 },
    ],
  });
});
afterAll(async () => {
  await bench?.stop();
});

const NOW = Date.parse('2026-03-15T12:00:00.000Z');
let seq = 0;

async function seedJob(team: string, state: JobState, extra: Partial<JobRecord> = {}): Promise<JobRecord> {
  seq += 1;
  const jobId = `seed${String(seq).padStart(4, '0')}`;
  const job: JobRecord = {
    jobId,
    team,
    user: 'alice',
    tier: 'gpu-small',
    state,
    createdAt: new Date(NOW - 3_600_000 + seq * 1000).toISOString(),
    command: ['python', 'train.py'],
    requirements: {},
    retries: { maxAppRetries: 0, backoffSeconds: 60 },
    counters: { attempts: 0, reclaims: 0, capacityCancellations: 0, appErrors: 0, infraErrors: 0, resumeFailures: 0 },
    costSoFarUsd: 0,
    bundle: { key: `${jobKeysFor(team, jobId).bundle}`, bytes: 10, sha256: 'a'.repeat(64) },
    env: {},
    ...extra,
  };
  expect(await bench.jobs.createJob(job)).toBe(true);
  return job;
}

async function seedAttempt(jobId: string, attempt: number, extra: Partial<AttemptRecord> = {}): Promise<void> {
  await bench.jobs.putAttempt({
    jobId,
    attempt,
    capacity: 'spot',
    queue: 'trainyard-gpu-small-spot',
    nodes: 1,
    status: 'RUNNING',
    ...extra,
  });
}

describe('team isolation', () => {
  it("answers another team's job exactly like an unknown one (404) on every job route", async () => {
    const theirs = await seedJob('vision', 'PAUSED_BUDGET', { pauseToken: 'token-vision' });
    await seedAttempt(theirs.jobId, 1, { batchJobId: 'batch-vision-1', startedAt: NOW - 60_000 });
    const before = await bench.snapshot();
    const routes = [
      { method: 'GET', path: `/jobs/${theirs.jobId}` },
      { method: 'DELETE', path: `/jobs/${theirs.jobId}` },
      { method: 'POST', path: `/jobs/${theirs.jobId}/resume` },
      { method: 'GET', path: `/jobs/${theirs.jobId}/checkpoints` },
      { method: 'GET', path: `/jobs/${theirs.jobId}/logs` },
    ];
    for (const route of routes) {
      const mine = await bench.call({ ...route, as: PRINCIPALS.nlp });
      expect(mine.status, `${route.method} ${route.path}`).toBe(404);
      expect(errorOf(mine.body)).toEqual({ code: 'not_found', message: `job ${theirs.jobId} does not exist` });
      const unknownPath = route.path.replace(theirs.jobId, 'seed9999');
      const unknown = await bench.call({ ...route, path: unknownPath, as: PRINCIPALS.nlp });
      expect(unknown.status).toBe(404);
      expect(errorOf(unknown.body).message).toBe('job seed9999 does not exist');
    }
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated.filter((t) => t.batchJobId === 'batch-vision-1')).toEqual([]);
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-vision')).toEqual([]);
  });

  it("lists only the caller's team's jobs", async () => {
    const nlpJob = await seedJob('nlp', 'RUNNING');
    const visionJob = await seedJob('vision', 'RUNNING');
    const { status, body } = await bench.call({
      method: 'GET',
      path: '/jobs',
      as: PRINCIPALS.vision,
      query: { limit: '100' },
    });
    expect(status).toBe(200);
    const ids = (body.jobs as JobRecord[]).map((j) => j.jobId);
    expect(ids).toContain(visionJob.jobId);
    expect(ids).not.toContain(nlpJob.jobId);
    expect((body.jobs as JobRecord[]).every((j) => j.team === 'vision')).toBe(true);
  });

  it('refuses an unknown principal and an unsigned request with 403', async () => {
    const stranger = await bench.call({ method: 'GET', path: '/jobs', as: PRINCIPALS.stranger });
    expect(stranger.status).toBe(403);
    expect(errorOf(stranger.body).message).toBe(
      `principal ${PRINCIPALS.stranger} is not a member of any Trainyard team; ask an admin to add it to the config`,
    );
    const unsigned = await bench.call({ method: 'GET', path: '/jobs', as: null });
    expect(unsigned.status).toBe(403);
    expect(errorOf(unsigned.body).message).toBe(
      'the request carries no IAM principal; sign it with SigV4 (IAM authorization)',
    );
  });
});

describe('GET /jobs', () => {
  it('pages newest first with limit and cursor', async () => {
    const seeded = [];
    for (let i = 0; i < 3; i++) seeded.push(await seedJob('audio', 'SUBMITTED'));
    const newestFirst = seeded.map((j) => j.jobId).reverse();
    const first = await bench.call({ method: 'GET', path: '/jobs', as: AUDIO, query: { limit: '2' } });
    expect(first.status).toBe(200);
    expect((first.body.jobs as JobRecord[]).map((j) => j.jobId)).toEqual(newestFirst.slice(0, 2));
    const cursor = first.body.nextCursor as string;
    expect(typeof cursor).toBe('string');
    const second = await bench.call({ method: 'GET', path: '/jobs', as: AUDIO, query: { limit: '2', cursor } });
    expect((second.body.jobs as JobRecord[]).map((j) => j.jobId)).toEqual(newestFirst.slice(2));
    // A cursor is the team's own: replaying it as another team is refused, not answered with their jobs.
    const stolen = await bench.call({ method: 'GET', path: '/jobs', as: PRINCIPALS.nlp, query: { cursor } });
    expect(stolen.status).toBe(400);
    expect(errorOf(stolen.body).message).toBe(
      'query.cursor: is not a cursor GET /jobs returned to this team; start again without it',
    );
  });

  it('refuses, as 400, a cursor crafted with this team’s index key but not the keys GET /jobs hands out', async () => {
    const job = await seedJob('audio', 'SUBMITTED');
    const genuine = {
      pk: `JOB#${job.jobId}`,
      sk: 'META',
      gsi1pk: 'TEAM#audio',
      gsi1sk: `${job.createdAt}#${job.jobId}`,
    };
    const crafted = [
      { gsi1pk: 'TEAM#audio' },
      { ...genuine, gsi1sk: 1 },
      { ...genuine, sk: 'ATTEMPT#001' },
      { ...genuine, pk: 'IDEMPOTENCY#audio#k1' },
      { ...genuine, gsi1sk: `${job.createdAt}#another-job` },
      { ...genuine, extra: 'x' },
      // Keys of the right shape that no job has: a sort key over DynamoDB's 1 KiB, a creation time not a timestamp.
      { ...genuine, gsi1sk: `${'a'.repeat(1100)}#${job.jobId}` },
      { ...genuine, gsi1sk: `yesterday#${job.jobId}` },
      { ...genuine, pk: 'JOB#a.b', gsi1sk: `${job.createdAt}#a.b` },
    ];
    for (const keys of crafted) {
      const cursor = Buffer.from(JSON.stringify(keys)).toString('base64url');
      const response = await bench.call({ method: 'GET', path: '/jobs', as: AUDIO, query: { cursor } });
      expect(response.status, JSON.stringify(keys)).toBe(400);
      expect(errorOf(response.body).message).toBe(
        'query.cursor: is not a cursor GET /jobs returned to this team; start again without it',
      );
    }
    // The keys as GET /jobs hands them out are a cursor: the page after this job holds only the team's older jobs.
    const cursor = Buffer.from(JSON.stringify(genuine)).toString('base64url');
    const after = await bench.call({ method: 'GET', path: '/jobs', as: AUDIO, query: { cursor } });
    expect(after.status).toBe(200);
    for (const older of after.body.jobs as JobRecord[]) {
      expect(`${older.createdAt}#${older.jobId}` < genuine.gsi1sk).toBe(true);
    }
  });

  describe('?label=', () => {
    // Robotics' jobs, oldest first: two sweeps interleaved with unlabelled jobs and one labelled otherwise.
    const seeded: Record<string, string> = {};
    beforeAll(async () => {
      const plan: Array<[string, Record<string, string> | undefined]> = [
        ['a1', { sweep: 'a', lr: '0.1' }],
        ['plain1', undefined],
        ['b1', { sweep: 'b', lr: '0.1' }],
        ['a2', { sweep: 'a', lr: '0.2' }],
        ['plain2', undefined],
        ['other', { owner: 'kim' }],
        ['a3', { sweep: 'a', lr: '0.3' }],
        ['plain3', undefined],
      ];
      for (const [name, labels] of plan) {
        seeded[name] = (await seedJob('robotics', 'SUCCEEDED', labels ? { labels } : {})).jobId;
      }
    });
    const ids = (names: string[]) => names.map((n) => seeded[n]);
    const list = async (query: Record<string, string>) => {
      const { status, body } = await bench.call({ method: 'GET', path: '/jobs', as: ROBOTICS, query });
      expect(status).toBe(200);
      return { ids: (body.jobs as JobRecord[]).map((j) => j.jobId), cursor: body.nextCursor as string | undefined };
    };

    it('keeps only the jobs with that label value, newest first, with their labels', async () => {
      expect(await list({ label: 'sweep=a' })).toEqual({ ids: ids(['a3', 'a2', 'a1']), cursor: undefined });
      const { body } = await bench.call({ method: 'GET', path: '/jobs', as: ROBOTICS, query: { label: 'sweep=b' } });
      expect((body.jobs as JobRecord[]).map((j) => j.labels)).toEqual([{ sweep: 'b', lr: '0.1' }]);
    });

    it('reads a bare key as "has the label" and a list as "all of them"', async () => {
      expect((await list({ label: 'sweep' })).ids).toEqual(ids(['a3', 'a2', 'b1', 'a1']));
      expect((await list({ label: 'lr=0.1' })).ids).toEqual(ids(['b1', 'a1']));
      expect((await list({ label: 'sweep=a,lr=0.1' })).ids).toEqual(ids(['a1']));
      expect((await list({ label: 'owner,sweep' })).ids).toEqual([]);
      expect((await list({ label: 'sweep=c' })).ids).toEqual([]);
    });

    it('pages the matches with limit and cursor, each match once', async () => {
      const first = await list({ label: 'sweep', limit: '3' });
      expect(first.ids).toEqual(ids(['a3', 'a2', 'b1']));
      expect(first.cursor).toEqual(expect.any(String));
      const second = await list({ label: 'sweep', limit: '3', cursor: first.cursor as string });
      expect(second).toEqual({ ids: ids(['a1']), cursor: undefined });
      // Exactly as many matches as the limit, all found in one read: no cursor to an empty page.
      expect(await list({ label: 'lr', limit: '4' })).toEqual({
        ids: ids(['a3', 'a2', 'b1', 'a1']),
        cursor: undefined,
      });
    });

    it('stops a page at its read budget and continues the search from the cursor', async () => {
      const selectors = [{ key: 'sweep', value: 'a' }];
      // Reading 3 jobs at a time: plain3, a3, other; then plain2, a2, b1; then plain1, a1 (and the end).
      const pages: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await bench.jobs.listJobsByTeam('robotics', {
          labels: selectors,
          limit: 10,
          maxRead: 3,
          ...(cursor !== undefined && { cursor }),
        });
        pages.push(page.jobs.map((j) => j.jobId));
        cursor = page.nextCursor;
      } while (cursor !== undefined && pages.length < 10);
      expect(pages).toEqual([ids(['a3']), ids(['a2']), ids(['a1'])]);
      // A read that finds nothing still hands on: sweep=b's one match is in the second read of three.
      const empty = await bench.jobs.listJobsByTeam('robotics', { labels: [{ key: 'sweep', value: 'b' }], maxRead: 3 });
      expect(empty.jobs).toEqual([]);
      expect(empty.nextCursor).toEqual(expect.any(String));
      const found = await bench.jobs.listJobsByTeam('robotics', {
        labels: [{ key: 'sweep', value: 'b' }],
        maxRead: 3,
        cursor: empty.nextCursor as string,
      });
      expect(found.jobs.map((j) => j.jobId)).toEqual(ids(['b1']));
      // A cursor the store did not hand out is a caller's bug: refused, never read as "from the start".
      await expect(bench.jobs.listJobsByTeam('robotics', { cursor: 'not-a-cursor' })).rejects.toThrow(
        'listJobsByTeam: cursor "not-a-cursor" is not one this store handed out',
      );
    });

    it.each([
      [
        { label: 'Sweep=a' },
        "query.label: \"Sweep=a\": label keys must be 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
      ],
      [
        { label: 'sweep=a,,lr' },
        'query.label: "sweep=a,,lr": selectors are key=value or key, separated by single commas (none empty), e.g. sweep=lr-grid,lr',
      ],
      [{ label: 'lr=1,lr=2' }, 'query.label: label lr is selected twice; a job has one value per label'],
    ])('refuses %j with 400', async (query, message) => {
      const { status, body } = await bench.call({ method: 'GET', path: '/jobs', as: ROBOTICS, query });
      expect(status).toBe(400);
      expect(errorOf(body).message).toBe(message);
    });
  });

  describe('?state=', () => {
    // Robotics' jobs in other states than the label tests' SUCCEEDED ones, oldest first, some labelled phase=x.
    const seeded: Record<string, string> = {};
    beforeAll(async () => {
      const plan: Array<[string, JobState, Record<string, string> | undefined]> = [
        ['waiting', 'WAITING', { phase: 'x' }],
        ['running1', 'RUNNING', undefined],
        ['failed', 'FAILED', { phase: 'x' }],
        ['running2', 'RUNNING', { phase: 'x' }],
      ];
      for (const [name, state, labels] of plan) {
        seeded[name] = (await seedJob('robotics', state, labels ? { labels } : {})).jobId;
      }
    });
    const list = async (query: Record<string, string>) => {
      const { status, body } = await bench.call({ method: 'GET', path: '/jobs', as: ROBOTICS, query });
      expect(status).toBe(200);
      return (body.jobs as JobRecord[]).map((j) => j.jobId);
    };
    const ids = (names: string[]) => names.map((n) => seeded[n]);

    it('keeps the jobs in any of the states, newest first, and combines with a label', async () => {
      expect(await list({ state: 'RUNNING' })).toEqual(ids(['running2', 'running1']));
      expect(await list({ state: 'RUNNING,WAITING' })).toEqual(ids(['running2', 'running1', 'waiting']));
      expect(await list({ state: 'RUNNING,WAITING', label: 'phase=x' })).toEqual(ids(['running2', 'waiting']));
      expect(await list({ state: 'CANCELLED' })).toEqual([]);
    });

    it.each([
      [
        { state: 'running' },
        'query.state: "running" is not a job state; states: SUBMITTED, ANALYZING, REJECTED, WAITING, RUNNING, PAUSED_BUDGET, SUCCEEDED, FAILED, CANCELLED (comma-separated for several)',
      ],
      [
        { state: 'RUNNING,,DONE' },
        'query.state: "", "DONE" are not job states; states: SUBMITTED, ANALYZING, REJECTED, WAITING, RUNNING, PAUSED_BUDGET, SUCCEEDED, FAILED, CANCELLED (comma-separated for several)',
      ],
    ])('refuses %j with 400', async (query, message) => {
      const { status, body } = await bench.call({ method: 'GET', path: '/jobs', as: ROBOTICS, query });
      expect(status).toBe(400);
      expect(errorOf(body).message).toBe(message);
    });
  });

  it.each([
    [{ limit: '0' }, 'query.limit: limit must be a whole number from 1 to 100'],
    [{ limit: '101' }, 'query.limit: limit must be a whole number from 1 to 100'],
    [{ limit: 'ten' }, 'query.limit: limit must be a whole number from 1 to 100'],
    [{ limit: '-1' }, 'query.limit: limit must be a whole number from 1 to 100'],
    [{ sort: 'asc' }, 'query: unknown field(s) "sort"'],
    [
      { cursor: 'bm90LWpzb24' },
      'query.cursor: is not a cursor GET /jobs returned to this team; start again without it',
    ],
  ])('refuses query %j with 400: %s', async (query, message) => {
    const { status, body } = await bench.call({ method: 'GET', path: '/jobs', query });
    expect(status).toBe(400);
    expect(errorOf(body).message).toBe(message);
  });
});

describe('GET /jobs/{id}', () => {
  it('forecasts a small job at least what it has cost, counting the 60 s minimum its attempts are billed', async () => {
    // The demo's job: a reclaimed attempt of 22 s, billed as 60 s ($0.0005 at $0.03/h), and a running one 20 s in,
    // billed 60 s so far; 40 steps left at 2 steps/s take 20 s, inside the minimum already billed.
    const job = await seedJob('nlp', 'RUNNING');
    await seedAttempt(job.jobId, 1, {
      batchJobId: 'b-1',
      startedAt: NOW - 60_000,
      stoppedAt: NOW - 38_000,
      usdPerHour: 0.03,
      costUsd: 0.0005,
      status: 'FAILED',
    });
    await seedAttempt(job.jobId, 2, { batchJobId: 'b-2', startedAt: NOW - 20_000, usdPerHour: 0.03 });
    const iso = (ms: number) => new Date(ms).toISOString();
    const lines = [0, 5, 10, 15, 20].map((s, i) => ({
      time: iso(NOW - 20_000 + s * 1000),
      attempt: 2,
      step: 20 + 10 * i,
    }));
    const keys = jobKeysFor('nlp', job.jobId);
    await bench.workspace.put(keys.metricsLog, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    await bench.workspace.put(keys.progress, JSON.stringify({ step: 60, total_steps: 100 }));

    const { body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });
    const forecast = (body.forecast as { forecast: Record<string, unknown> }).forecast;
    expect((forecast.etaSeconds as { value: number }).value).toBeCloseTo(20, 9);
    // Both attempts' 60 s: $0.0005 each. The 20 s to finish fall within the running attempt's minimum.
    expect((forecast.costToFinishUsd as { expected: number }).expected).toBe(0);
    expect(forecast.projectedTotalUsd).toBeCloseTo(0.001, 12);
    expect(body.costSoFarUsd).toBe(0);
  });

  it('shows attempts with durations and costs, the cost so far and a forecast from the metrics', async () => {
    const job = await seedJob('nlp', 'RUNNING', { pauseToken: 'secret-token' });
    const t0 = NOW - 3_600_000;
    // Attempt 1: spot, 600 s, recorded cost $0.05. Attempt 2: running for 1800 s at $0.20/h.
    await seedAttempt(job.jobId, 1, {
      batchJobId: 'b-1',
      startedAt: t0,
      stoppedAt: t0 + 600_000,
      usdPerHour: 0.3,
      costUsd: 0.05,
      status: 'FAILED',
    });
    await seedAttempt(job.jobId, 2, { batchJobId: 'b-2', startedAt: NOW - 1_800_000, usdPerHour: 0.2 });
    await bench.jobs.putDecision(job.jobId, {
      seq: 1,
      at: new Date(t0).toISOString(),
      moment: 'submit',
      decision: 'run-attempt spot',
      reason: 'spot is cheaper',
    });
    // 100 steps per 300 s in both attempts; attempt 2 resumes at step 200 where attempt 1 stopped.
    const iso = (ms: number) => new Date(ms).toISOString();
    const a2 = NOW - 1_800_000;
    const lines = [
      { time: iso(t0), attempt: 1, step: 0 },
      { time: iso(t0 + 300_000), attempt: 1, step: 100 },
      { time: iso(t0 + 600_000), attempt: 1, step: 200 },
      { time: iso(a2), attempt: 2, step: 200 },
      { time: iso(a2 + 300_000), attempt: 2, step: 300 },
      { time: iso(a2 + 600_000), attempt: 2, step: 400 },
      { time: iso(a2 + 900_000), attempt: 2, step: 500, loss: 1.5 },
      { time: iso(a2 + 1_800_000), attempt: 2, gpu_util: 90 },
    ];
    const keys = jobKeysFor('nlp', job.jobId);
    await bench.workspace.put(keys.metricsLog, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    await bench.workspace.put(keys.progress, JSON.stringify({ step: 500, total_steps: 1000, loss: 1.5 }));

    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });
    expect(status).toBe(200);
    expect(body.job).not.toHaveProperty('pauseToken');
    const attempts = body.attempts as Array<AttemptRecord & { durationSeconds: number; running: boolean }>;
    expect(attempts.map((a) => [a.attempt, a.running, a.durationSeconds, a.costUsd])).toEqual([
      [1, false, 600, 0.05],
      [2, true, 1800, 0.1],
    ]);
    expect(body.costSoFarUsd).toBe(0.15);
    expect((body.decisions as unknown[]).length).toBe(1);
    expect(body.progress).toMatchObject({ step: 500, total_steps: 1000 });
    // Rate 1/3 step/s in every interval; 500 steps left → 1500 s; at $0.20/h that is $0.0833….
    const forecast = body.forecast as { available: boolean; forecast: Record<string, unknown> };
    expect(forecast.available).toBe(true);
    expect(forecast.forecast.stepsPerSecond).toBeCloseTo(1 / 3, 12);
    expect((forecast.forecast.etaSeconds as { value: number }).value).toBeCloseTo(1500, 9);
    expect((forecast.forecast.costToFinishUsd as { expected: number }).expected).toBeCloseTo((1500 / 3600) * 0.2, 12);
    expect(forecast.forecast.fractionDone).toBe(0.5);
    expect(forecast.forecast.projectedTotalUsd).toBeCloseTo(0.15 + (1500 / 3600) * 0.2, 12);
  });

  it.each([
    ['a negative', -1],
    ['an infinite (1e400 in JSON)', '1e400'],
    ['a fractional', 10.5],
  ])('answers 200 with no forecast when progress.json gives %s total_steps', async (_what, total) => {
    const job = await seedJob('nlp', 'RUNNING');
    await seedAttempt(job.jobId, 1, { batchJobId: 'b-1', startedAt: NOW - 600_000, usdPerHour: 0.2 });
    const keys = jobKeysFor('nlp', job.jobId);
    const iso = (ms: number) => new Date(ms).toISOString();
    const samples = [0, 1, 2].map((i) =>
      JSON.stringify({ time: iso(NOW - 600_000 + i * 300_000), attempt: 1, step: i * 5 }),
    );
    await bench.workspace.put(keys.metricsLog, `${samples.join('\n')}\n`);
    await bench.workspace.put(keys.progress, `{"job_id":"${job.jobId}","attempt":1,"step":10,"total_steps":${total}}`);

    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });

    expect(status).toBe(200);
    expect(body.forecast).toEqual({
      available: false,
      reason: 'the total step count is unknown (the harness reports total_steps when set)',
    });
  });

  it.each([
    {
      what: 'a newer progress.json wins over the record the last periodic check wrote',
      harness: { step: 500, updated_at: '2026-01-01T00:04:00.000Z' },
      shown: { step: 500, totalSteps: 1000, fraction: 0.5, loss: 2.5, updatedAt: '2026-01-01T00:04:00.000Z' },
    },
    {
      what: 'a progress.json with no step yet (a new attempt) leaves the record',
      harness: { step: null, updated_at: '2026-01-01T00:04:00.000Z' },
      shown: { step: 300, totalSteps: 1000, fraction: 0.3, updatedAt: '2026-01-01T00:00:00.000Z' },
    },
    {
      what: 'an older progress.json leaves the record',
      harness: { step: 200, updated_at: '2025-12-31T23:59:00.000Z' },
      shown: { step: 300, totalSteps: 1000, fraction: 0.3, updatedAt: '2026-01-01T00:00:00.000Z' },
    },
  ])('shows the newest progress: $what', async ({ harness, shown }) => {
    const job = await seedJob('nlp', 'RUNNING', {
      progress: { step: 300, totalSteps: 1000, fraction: 0.3, updatedAt: '2026-01-01T00:00:00.000Z' },
    });
    await seedAttempt(job.jobId, 1, { batchJobId: 'b-1', startedAt: NOW - 600_000, usdPerHour: 0.2 });
    const document = { job_id: job.jobId, attempt: 1, total_steps: 1000, loss: 2.5, ...harness };
    await bench.workspace.put(jobKeysFor('nlp', job.jobId).progress, JSON.stringify(document));

    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });
    expect(status).toBe(200);
    expect(body.progress).toEqual(shown);
  });

  it('shows an attempt’s orphaned Batch jobs apart from its own cost, and counts them in the cost so far', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const orphan = {
      capacity: 'on-demand',
      startedAt: NOW - 900_000,
      stoppedAt: NOW - 840_000,
      usdPerHour: 3.06,
    } as const;
    // Attempt 1 was recorded as not run; the Batch job SubmitJob had created ran 60 s on on-demand: $0.051, $0.05.
    await seedAttempt(job.jobId, 1, { status: 'FAILED', stoppedAt: NOW - 950_000, costUsd: 0 });
    await bench.jobs.recordOrphanRun(job.jobId, 1, 'b-orphan', { ...orphan, costUsd: 0.05 });
    await seedAttempt(job.jobId, 2, { batchJobId: 'b-2', startedAt: NOW - 600_000, usdPerHour: 0.3 });

    const { body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });

    const [first] = body.attempts as Array<AttemptRecord & { running: boolean }>;
    expect(first?.costUsd).toBe(0);
    expect(first?.orphans).toEqual({ 'b-orphan': { ...orphan, costUsd: 0.05 } });
    // $0.05 + attempt 2's 600 s at $0.30/h ($0.05).
    expect(body.costSoFarUsd).toBe(0.1);
  });

  it('forecasts from the end of a metrics log larger than it reads, at the newest rate', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const started = NOW - 7_200_000;
    await seedAttempt(job.jobId, 1, { batchJobId: 'b-1', startedAt: started, usdPerHour: 0.36 });
    // Over 1 MiB of early samples at 1 step/s (padded), then the newest ones at 2 steps/s: 10 steps every 5 s.
    const iso = (ms: number) => new Date(ms).toISOString();
    const pad = 'x'.repeat(400);
    const early = Array.from({ length: 3000 }, (_, i) =>
      JSON.stringify({ time: iso(started + i * 1000), attempt: 1, step: i, note: pad }),
    );
    const recent = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({ time: iso(started + 3_000_000 + i * 5000), attempt: 1, step: 3000 + i * 10 }),
    );
    const log = `${[...early, ...recent].join('\n')}\n`;
    expect(Buffer.byteLength(log)).toBeGreaterThan(FORECAST_METRICS_BYTES);
    const keys = jobKeysFor('nlp', job.jobId);
    await bench.workspace.put(keys.metricsLog, log);
    await bench.workspace.put(keys.progress, JSON.stringify({ step: 3190, total_steps: 4000 }));
    const wholeReads = vi.spyOn(bench.workspace, 'get');

    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });

    expect(status).toBe(200);
    // Its end only: the log is never read whole.
    expect(wholeReads.mock.calls.map(([key]) => key)).not.toContain(keys.metricsLog);
    wholeReads.mockRestore();
    const forecast = body.forecast as { available: boolean; forecast: Record<string, unknown> };
    expect(forecast.available).toBe(true);
    expect(forecast.forecast.stepsPerSecond).toBeCloseTo(2, 12);
    // 4000 − 3190 = 810 steps left at 2 steps/s.
    expect((forecast.forecast.etaSeconds as { value: number }).value).toBeCloseTo(405, 9);
  });

  it('gives a finished job no forecast, with the reason', async () => {
    const job = await seedJob('nlp', 'SUCCEEDED');
    const { body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}` });
    expect(body.forecast).toEqual({ available: false, reason: 'the job is SUCCEEDED' });
    expect(body.costSoFarUsd).toBe(0);
  });
});

describe('DELETE /jobs/{id} (cancel)', () => {
  it('flags a SUBMITTED job and calls nothing else', async () => {
    const job = await seedJob('nlp', 'SUBMITTED');
    const terminated = bench.recorded.terminated.length;
    const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect(status).toBe(202);
    expect(body).toMatchObject({ job: { cancelRequested: true }, terminatedBatchJob: false, releasedPause: false });
    expect((await bench.jobs.getJob(job.jobId))?.cancelRequested).toBe(true);
    expect(bench.recorded.terminated.length).toBe(terminated);
  });

  it('terminates the running Batch job of a RUNNING job with the cancel reason', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    await seedAttempt(job.jobId, 1, {
      batchJobId: 'b-old',
      startedAt: NOW - 900_000,
      stoppedAt: NOW - 600_000,
      status: 'FAILED',
    });
    await seedAttempt(job.jobId, 2, { batchJobId: 'b-current', startedAt: NOW - 300_000 });
    const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect(status).toBe(202);
    expect(body.terminatedBatchJob).toBe(true);
    expect(bench.recorded.terminated.filter((t) => t.batchJobId.startsWith('b-'))).toEqual([
      { batchJobId: 'b-current', reason: 'Trainyard: cancelled by user' },
    ]);
  });

  it.each([
    [
      'a newest attempt that already stopped',
      { batchJobId: 'b-stopped', startedAt: NOW - 60_000, stoppedAt: NOW - 1000 },
    ],
    ['a newest attempt Batch has not named yet', {}],
  ])('does not terminate a WAITING job with %s', async (_name, attempt) => {
    const job = await seedJob('nlp', 'WAITING');
    await seedAttempt(job.jobId, 1, { status: 'RUNNABLE', ...attempt });
    const before = bench.recorded.terminated.length;
    const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect(status).toBe(202);
    expect(body.terminatedBatchJob).toBe(false);
    expect(bench.recorded.terminated.length).toBe(before);
  });

  it('releases a PAUSED_BUDGET job to cancel through its task token; a repeated cancel is harmless', async () => {
    const job = await seedJob('nlp', 'PAUSED_BUDGET', { pauseToken: 'token-cancel' });
    const first = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect(first.status).toBe(202);
    expect(first.body.releasedPause).toBe(true);
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-cancel')).toEqual([
      { token: 'token-cancel', output: { action: 'cancel' } },
    ]);
    const again = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect(again.status).toBe(202);
    expect(again.body.releasedPause).toBe(false);
  });

  it('releases a pause that was recorded while the cancel was being flagged', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    // The Pause step lands after the cancel read the job (RUNNING, no token) and before it set the flag.
    const requestCancel = bench.jobs.requestCancel.bind(bench.jobs);
    const racing = vi.spyOn(bench.jobs, 'requestCancel').mockImplementationOnce(async (...args) => {
      await bench.jobs.transition(job.jobId, ['RUNNING'], 'PAUSED_BUDGET', { pauseToken: 'token-late' });
      return requestCancel(...args);
    });
    try {
      const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
      expect(status).toBe(202);
      expect(body.releasedPause).toBe(true);
    } finally {
      racing.mockRestore();
    }
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-late')).toEqual([
      { token: 'token-late', output: { action: 'cancel' } },
    ]);
  });

  /** Ends the job as the lifecycle would, between the API's read of it and its cancel flag. */
  function endBeforeTheFlag(jobId: string, to: 'SUCCEEDED' | 'CANCELLED') {
    const requestCancel = bench.jobs.requestCancel.bind(bench.jobs);
    return vi.spyOn(bench.jobs, 'requestCancel').mockImplementationOnce(async (...args) => {
      await bench.jobs.transition(jobId, ['RUNNING'], to);
      return requestCancel(...args);
    });
  }

  it('answers 409 job_finished for a job that finished between the read and the flag, changing and stopping nothing', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    await seedAttempt(job.jobId, 1, { batchJobId: 'b-finishing', startedAt: NOW - 300_000 });
    const racing = endBeforeTheFlag(job.jobId, 'SUCCEEDED');
    const terminations = bench.recorded.terminated.length;
    let ended: JobRecord | undefined;
    try {
      const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
      ended = await bench.jobs.getJob(job.jobId);
      expect(status).toBe(409);
      expect(errorOf(body)).toEqual({
        code: 'job_finished',
        message: `job ${job.jobId} is SUCCEEDED; a finished job cannot be cancelled`,
        details: { state: 'SUCCEEDED' },
      });
    } finally {
      racing.mockRestore();
    }
    expect(bench.recorded.terminated.length).toBe(terminations);
    // The refused cancel wrote nothing on the finished job.
    expect(ended).not.toHaveProperty('cancelRequested');
  });

  it('answers 409 job_finished, now and after, for a job the platform cancelled between the read and the flag', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const racing = endBeforeTheFlag(job.jobId, 'CANCELLED');
    try {
      const first = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
      expect([first.status, errorOf(first.body).code]).toEqual([409, 'job_finished']);
    } finally {
      racing.mockRestore();
    }
    // No cancel request was recorded, so the job still says the platform cancelled it, and so does a cancel sent again.
    expect(await bench.jobs.getJob(job.jobId)).not.toHaveProperty('cancelRequested');
    const again = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
    expect([again.status, errorOf(again.body).code]).toEqual([409, 'job_finished']);
  });

  it('answers a cancel repeated after the first ended the job (CANCELLED) with 202 and the job, doing nothing', async () => {
    const job = await seedJob('nlp', 'CANCELLED', { cancelRequested: true, pauseToken: 'token-spent' });
    await seedAttempt(job.jobId, 1, { batchJobId: 'b-cancelled', startedAt: NOW - 300_000 });
    const before = await bench.snapshot();
    const terminations = bench.recorded.terminated.length;
    const releases = bench.recorded.taskSuccesses.length;

    const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });

    expect(status).toBe(202);
    expect(body).toMatchObject({
      job: { jobId: job.jobId, state: 'CANCELLED', cancelRequested: true },
      terminatedBatchJob: false,
      releasedPause: false,
    });
    expect(await bench.snapshot()).toEqual(before);
    expect(bench.recorded.terminated.length).toBe(terminations);
    expect(bench.recorded.taskSuccesses.length).toBe(releases);
  });

  it.each(['SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED'] as const)(
    'refuses to cancel a %s job with 409 naming the state, writing nothing',
    async (state) => {
      const job = await seedJob('nlp', state);
      const before = await bench.snapshot();
      const { status, body } = await bench.call({ method: 'DELETE', path: `/jobs/${job.jobId}` });
      expect(status).toBe(409);
      expect(errorOf(body)).toEqual({
        code: 'job_finished',
        message: `job ${job.jobId} is ${state}; a finished job cannot be cancelled`,
        details: { state },
      });
      expect(await bench.snapshot()).toEqual(before);
    },
  );
});

describe('POST /jobs/{id}/resume', () => {
  it('resumes a PAUSED_BUDGET job through its task token, once', async () => {
    const job = await seedJob('nlp', 'PAUSED_BUDGET', { pauseToken: 'token-resume' });
    const { status } = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });
    expect(status).toBe(202);
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-resume')).toEqual([
      { token: 'token-resume', output: { action: 'resume' } },
    ]);
    const again = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });
    expect(again.status).toBe(409);
    expect(errorOf(again.body).message).toBe(
      `job ${job.jobId} is no longer waiting to be resumed (its pause already ended)`,
    );
  });

  it.each(['SUBMITTED', 'ANALYZING', 'WAITING', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'REJECTED'] as const)(
    'refuses to resume a %s job with 409 naming the state',
    async (state) => {
      const job = await seedJob('nlp', state);
      const { status, body } = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });
      expect(status).toBe(409);
      expect(errorOf(body)).toEqual({
        code: 'job_not_paused',
        message: `job ${job.jobId} is ${state}; only a job in PAUSED_BUDGET can be resumed`,
        details: { state },
      });
    },
  );

  it('refuses a paused job whose pause is not recorded yet, and one being cancelled', async () => {
    const pausing = await seedJob('nlp', 'PAUSED_BUDGET');
    const a = await bench.call({ method: 'POST', path: `/jobs/${pausing.jobId}/resume` });
    expect([a.status, errorOf(a.body).code]).toEqual([409, 'job_pausing']);
    const cancelling = await seedJob('nlp', 'PAUSED_BUDGET', { pauseToken: 'token-x', cancelRequested: true });
    const b = await bench.call({ method: 'POST', path: `/jobs/${cancelling.jobId}/resume` });
    expect([b.status, errorOf(b.body).message]).toEqual([
      409,
      `job ${cancelling.jobId} is being cancelled; it cannot be resumed`,
    ]);
    expect(bench.recorded.taskSuccesses.some((t) => t.token === 'token-x')).toBe(false);
  });
});

describe('POST /jobs/{id}/resume while a budget is still blocked', () => {
  it('refuses with 409 naming the blocked budget, sends nothing, and resumes once the limit is raised', async () => {
    const job = await seedJob('nlp', 'PAUSED_BUDGET', { user: 'carol', pauseToken: 'token-blocked' });
    // Carol's $1 budget for the job's month is spent by another of her jobs: $1.20 accrued.
    const period = budgetPeriodOf(job);
    await bench.ledger.ensureBudget('user:nlp/carol', period, 1);
    await bench.ledger.reserve('seedblocker', ['user:nlp/carol'], 0.5, period);
    await bench.ledger.accrue('seedblocker', 1.2);

    const refused = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });

    expect(refused.status).toBe(409);
    expect(errorOf(refused.body)).toEqual({
      code: 'budget_blocked',
      message: `job ${job.jobId} cannot resume: budget user:nlp/carol for ${period} is still at or over its limit; an admin raises it with PUT /budgets/{scope}, then resume (budget-watch also resumes it within 5 minutes of the raise)`,
      details: { state: 'PAUSED_BUDGET', scope: 'user:nlp/carol', period },
    });
    expect(bench.recorded.taskSuccesses.some((t) => t.token === 'token-blocked')).toBe(false);

    await bench.ledger.setLimit('user:nlp/carol', period, 5);
    const resumed = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });
    expect(resumed.status).toBe(202);
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-blocked')).toEqual([
      { token: 'token-blocked', output: { action: 'resume' } },
    ]);
  });
});

describe('POST /jobs/{id}/resume holds what the job is forecast to cost to finish', () => {
  it('refuses with 409 when a budget cannot hold it, raising nothing, and reserves it once the limit allows', async () => {
    // Half done for $4, its whole $4 estimate: $4 more to finish at its own rate, none of it still reserved.
    const job = await seedJob('nlp', 'PAUSED_BUDGET', {
      user: 'dana',
      pauseToken: 'token-short',
      estimate: { costUsd: 4, runtimeSeconds: 7200, confidence: 'medium', basis: 'seeded' },
      progress: { fraction: 0.5, updatedAt: new Date(NOW).toISOString() },
      costSoFarUsd: 4,
    });
    const period = budgetPeriodOf(job);
    const scopes = ['team:nlp', 'user:nlp/dana'];
    await bench.ledger.ensureBudget('team:nlp', period, 1000);
    await bench.ledger.ensureBudget('user:nlp/dana', period, 5);
    await bench.ledger.reserve(job.jobId, scopes, 4, period);
    await bench.ledger.accrue(job.jobId, 4);
    const before = await Promise.all(scopes.map((scope) => bench.ledger.usage(scope, period)));

    // Dana's $5 is not blocked ($4 spent), but its $1 available cannot hold the $4 the job is about to spend.
    const refused = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });

    expect(refused.status).toBe(409);
    expect(errorOf(refused.body)).toEqual({
      code: 'budget_insufficient',
      message: `job ${job.jobId} cannot resume: it is forecast to cost $4.00 more than it holds, and budget user:nlp/dana for ${period} has $1.00 available; an admin raises it with PUT /budgets/{scope}, then resume`,
      details: { state: 'PAUSED_BUDGET', scope: 'user:nlp/dana', period, requestedUsd: 4, availableUsd: 1 },
    });
    expect(bench.recorded.taskSuccesses.some((t) => t.token === 'token-short')).toBe(false);
    expect(await Promise.all(scopes.map((scope) => bench.ledger.usage(scope, period)))).toEqual(before);

    await bench.ledger.setLimit('user:nlp/dana', period, 8);
    const resumed = await bench.call({ method: 'POST', path: `/jobs/${job.jobId}/resume` });

    expect(resumed.status).toBe(202);
    expect(bench.recorded.taskSuccesses.filter((t) => t.token === 'token-short')).toHaveLength(1);
    const [team, user] = await Promise.all(scopes.map((scope) => bench.ledger.usage(scope, period)));
    expect([team?.spentUsd, team?.reservedUsd, user?.spentUsd, user?.reservedUsd, user?.availableUsd]).toEqual([
      4, 4, 4, 4, 0,
    ]);
  });
});

describe('GET /jobs/{id}/checkpoints', () => {
  it('lists only complete checkpoints (manifest present), newest first, with working download URLs', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const prefix = jobKeysFor('nlp', job.jobId).checkpoints;
    await bench.workspace.put(`${prefix}ckpt-000001/model.pt`, 'weights-1');
    await bench.workspace.put(
      `${prefix}ckpt-000001/MANIFEST.json`,
      JSON.stringify({ step: 100, attempt: 1, created_at: '2026-03-15T11:00:00Z' }),
    );
    await bench.workspace.put(`${prefix}ckpt-000002/model.pt`, 'weights-2');
    await bench.workspace.put(`${prefix}ckpt-000002/MANIFEST.json`, JSON.stringify({ step: 200, attempt: 2 }));
    // Being written: no manifest yet.
    await bench.workspace.put(`${prefix}ckpt-000003/model.pt`, 'partial');

    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}/checkpoints` });
    expect(status).toBe(200);
    const checkpoints = body.checkpoints as Array<{
      name: string;
      step: number;
      files: Array<{ path: string; size: number; url: string }>;
    }>;
    expect(checkpoints.map((c) => [c.name, c.step])).toEqual([
      ['ckpt-000002', 200],
      ['ckpt-000001', 100],
    ]);
    const file = checkpoints[1]?.files[0];
    expect(file).toMatchObject({ path: 'model.pt', size: 'weights-1'.length });
    const download = await fetch(file?.url ?? '');
    expect(await download.text()).toBe('weights-1');
  });
});

describe('GET /jobs/{id}/checkpoints past the URLs one answer carries', () => {
  // A job keeping many checkpoints of many files: ckpt-000003 (3 files) fits the answer's URLs, ckpt-000002
  // (MAX_CHECKPOINT_URLS + 2 files: more than one page of its own) does not, and ckpt-000001 (1 file) comes after it.
  let job: JobRecord;
  let prefix: string;
  const many = MAX_CHECKPOINT_URLS + 2;
  const shard = (i: number) => `shards/${String(i).padStart(5, '0')}.pt`;
  beforeAll(async () => {
    job = await seedJob('nlp', 'RUNNING');
    prefix = jobKeysFor('nlp', job.jobId).checkpoints;
    const puts: Array<[string, string]> = [
      [`${prefix}ckpt-000001/model.pt`, 'one'],
      [`${prefix}ckpt-000001/MANIFEST.json`, JSON.stringify({ step: 1 })],
      [`${prefix}ckpt-000002/MANIFEST.json`, JSON.stringify({ step: 2 })],
      [`${prefix}ckpt-000003/b.pt`, 'bb'],
      [`${prefix}ckpt-000003/a.pt`, 'a'],
      [`${prefix}ckpt-000003/c/d.pt`, 'ddd'],
      [`${prefix}ckpt-000003/MANIFEST.json`, JSON.stringify({ step: 3 })],
    ];
    for (let i = 0; i < many; i++) puts.push([`${prefix}ckpt-000002/${shard(i)}`, `shard ${i}`]);
    await mapConcurrently(puts, 16, ([key, body]) => bench.workspace.put(key, body));
  }, 60_000);

  type Listed = {
    name: string;
    fileCount: number;
    bytes: number;
    filesOmitted?: true;
    files?: Array<{ path: string; size: number; url: string }>;
  };
  async function list(query: Record<string, string> = {}) {
    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}/checkpoints`, query });
    return { status, body, checkpoints: body.checkpoints as Listed[] };
  }

  it('presigns the newest checkpoints whose files fit, and lists the rest with their counts and no files', async () => {
    const { status, body, checkpoints } = await list();
    expect(status).toBe(200);
    expect(body.nextFilesAfter).toBeUndefined();
    const shardBytes = Array.from({ length: many }, (_, i) => `shard ${i}`.length).reduce((a, b) => a + b, 0);
    expect(checkpoints.map((c) => [c.name, c.fileCount, c.bytes, c.filesOmitted ?? false])).toEqual([
      ['ckpt-000003', 3, 6, false],
      ['ckpt-000002', many, shardBytes, true],
      ['ckpt-000001', 1, 3, true],
    ]);
    expect(checkpoints[0]?.files?.map((f) => [f.path, f.size])).toEqual([
      ['a.pt', 1],
      ['b.pt', 2],
      ['c/d.pt', 3],
    ]);
    expect(checkpoints[1]?.files).toBeUndefined();
    expect(checkpoints[2]?.files).toBeUndefined();
  });

  it('gives one named checkpoint its files in path order, a page at a time, every file once', async () => {
    const first = await list({ checkpoint: 'ckpt-000002' });
    expect(first.status).toBe(200);
    expect(first.checkpoints.map((c) => [c.name, c.fileCount])).toEqual([['ckpt-000002', many]]);
    const page1 = first.checkpoints[0]?.files ?? [];
    expect(page1).toHaveLength(MAX_CHECKPOINT_URLS);
    expect(first.body.nextFilesAfter).toBe(shard(MAX_CHECKPOINT_URLS - 1));

    const second = await list({ checkpoint: 'ckpt-000002', filesAfter: String(first.body.nextFilesAfter) });
    expect(second.status).toBe(200);
    expect(second.body.nextFilesAfter).toBeUndefined();
    const page2 = second.checkpoints[0]?.files ?? [];
    expect([...page1, ...page2].map((f) => f.path)).toEqual(Array.from({ length: many }, (_, i) => shard(i)));
    const last = page2.at(-1);
    expect(await (await fetch(last?.url ?? '')).text()).toBe(`shard ${many - 1}`);

    const older = await list({ checkpoint: 'ckpt-000001' });
    expect(older.checkpoints[0]?.files?.map((f) => f.path)).toEqual(['model.pt']);
    expect(older.body.nextFilesAfter).toBeUndefined();
  });

  it('refuses a name that is not a checkpoint, one the job lacks, and filesAfter without a checkpoint, changing nothing', async () => {
    const before = await bench.snapshot();
    const malformed = await list({ checkpoint: '../ckpt-000001' });
    expect(malformed.status).toBe(400);
    expect(errorOf(malformed.body).message).toBe(
      'query.checkpoint: must be a checkpoint name as the listing gives it, e.g. ckpt-000120',
    );
    const missing = await list({ checkpoint: 'ckpt-000004' });
    expect(missing.status).toBe(404);
    expect(errorOf(missing.body).message).toBe(
      `job ${job.jobId} has no complete checkpoint ckpt-000004; it has ckpt-000003, ckpt-000002, ckpt-000001`,
    );
    const unanchored = await list({ filesAfter: shard(3) });
    expect(unanchored.status).toBe(400);
    expect(errorOf(unanchored.body).message).toMatch(/^query\.filesAfter: pages the files of one checkpoint; name it/);
    expect(await bench.snapshot()).toEqual(before);
  });
});

describe('GET /jobs/{id}/logs', () => {
  it('returns no lines while no attempt has a log stream', async () => {
    const job = await seedJob('nlp', 'WAITING');
    await seedAttempt(job.jobId, 1, { status: 'RUNNABLE' });
    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${job.jobId}/logs` });
    expect(status).toBe(200);
    expect(body).toEqual({
      jobId: job.jobId,
      attempt: 1,
      logStreamName: null,
      lines: [],
      nextCursor: expect.any(String),
    });
  });

  /** GET /jobs/{id}/logs with a query; the answer's status, lines, attempt and cursor. */
  async function readLogs(jobId: string, query: Record<string, string> = {}) {
    const { status, body } = await bench.call({ method: 'GET', path: `/jobs/${jobId}/logs`, query });
    return {
      status,
      body,
      lines: body.lines as string[],
      attempt: body.attempt as number | null,
      next: body.nextCursor as string,
    };
  }

  it('answers the newest lines with a cursor after which come exactly the lines logged since, however many', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const stream = `trainyard-nlp-gpu-small/default/${job.jobId}-1`;
    await seedAttempt(job.jobId, 1, { logStreamName: stream });
    bench.appendLog(stream, ['one', 'two', 'three']);

    const first = await readLogs(job.jobId, { limit: '2' });
    bench.appendLog(stream, ['four', 'same', 'same', 'same', 'five']);
    const second = await readLogs(job.jobId, { limit: '2', after: first.next });
    const third = await readLogs(job.jobId, { limit: '2', after: second.next });
    const fourth = await readLogs(job.jobId, { limit: '2', after: third.next });
    const caughtUp = await readLogs(job.jobId, { limit: '2', after: fourth.next });

    expect(first).toMatchObject({ status: 200, lines: ['two', 'three'], attempt: 1 });
    expect(first.body.logStreamName).toBe(stream);
    expect([second.lines, third.lines, fourth.lines]).toEqual([['four', 'same'], ['same', 'same'], ['five']]);
    expect(caughtUp).toMatchObject({ status: 200, lines: [], attempt: 1, next: fourth.next });
  });

  it('goes on from the first line of the next attempt once the cursor has read all of its own', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const firstStream = `trainyard-nlp-gpu-small/default/${job.jobId}-1`;
    await seedAttempt(job.jobId, 1, { logStreamName: firstStream });
    bench.appendLog(firstStream, ['a1']);
    const start = await readLogs(job.jobId);
    bench.appendLog(firstStream, ['a2 (its last line)']);
    const secondStream = `trainyard-nlp-gpu-small/default/${job.jobId}-2`;
    await seedAttempt(job.jobId, 2, { logStreamName: secondStream });
    bench.appendLog(secondStream, ['b1', 'b2', 'b3']);

    const rest = await readLogs(job.jobId, { after: start.next });
    const next = await readLogs(job.jobId, { after: rest.next });

    expect(rest).toMatchObject({ lines: ['a2 (its last line)'], attempt: 1 });
    expect(next).toMatchObject({ lines: ['b1', 'b2', 'b3'], attempt: 2 });
    expect(next.body.logStreamName).toBe(secondStream);
  });

  it('follows a job from before its first attempt to the first line of that attempt', async () => {
    const job = await seedJob('nlp', 'WAITING');
    const before = await readLogs(job.jobId);
    const stream = `trainyard-nlp-gpu-small/default/${job.jobId}-1`;
    await seedAttempt(job.jobId, 1, { logStreamName: stream });
    bench.appendLog(stream, ['first', 'second']);

    const after = await readLogs(job.jobId, { limit: '1', after: before.next });

    expect(before).toMatchObject({ lines: [], attempt: null });
    expect(after).toMatchObject({ lines: ['first'], attempt: 1 });
  });

  it('keeps a cursor in its attempt when attempt is given, and refuses one of another attempt', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const firstStream = `trainyard-nlp-gpu-small/default/${job.jobId}-1`;
    await seedAttempt(job.jobId, 1, { logStreamName: firstStream });
    bench.appendLog(firstStream, ['a1']);
    await seedAttempt(job.jobId, 2, { logStreamName: `trainyard-nlp-gpu-small/default/${job.jobId}-2` });
    bench.appendLog(`trainyard-nlp-gpu-small/default/${job.jobId}-2`, ['b1']);
    const pinned = await readLogs(job.jobId, { attempt: '1' });

    const stays = await readLogs(job.jobId, { attempt: '1', after: pinned.next });
    const mismatched = await readLogs(job.jobId, { attempt: '2', after: pinned.next });

    expect(stays).toMatchObject({ status: 200, lines: [], attempt: 1 });
    expect(mismatched.status).toBe(400);
    expect(errorOf(mismatched.body).message).toBe(
      "query.after: is a cursor into attempt 1, but attempt=2 was asked for; pass that attempt's cursor, or leave attempt out",
    );
  });

  it('refuses a cursor whose log position cannot be read from, saying why and how to start over', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const stream = `trainyard-nlp-gpu-small/default/${job.jobId}-1`;
    await seedAttempt(job.jobId, 1, { logStreamName: stream });
    bench.appendLog(stream, ['one']);

    const { status, body } = await readLogs(job.jobId, {
      after: encodeLogCursor({ jobId: job.jobId, attempt: 1, position: '999' }),
    });

    expect(status).toBe(400);
    expect(errorOf(body).message).toBe(
      "query.after: the log position it holds cannot be read from (byte 999 is past the end of the log, which holds 4 bytes); CloudWatch's positions last 24 hours: leave after out to start from the newest lines",
    );
  });

  it("refuses a cursor that is not one this job's logs handed out, saying how to start over", async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const other = await seedJob('nlp', 'RUNNING');
    const othersCursor = (await readLogs(other.jobId)).next;

    for (const after of ['not-a-cursor', othersCursor]) {
      const { status, body } = await readLogs(job.jobId, { after });
      expect(status).toBe(400);
      expect(errorOf(body).message).toBe(
        `query.after: is not a nextCursor GET /jobs/${job.jobId}/logs returned; leave it out to start from the newest lines`,
      );
    }
  });

  it('names the attempts a job has when asked for one it does not have', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    await seedAttempt(job.jobId, 1);
    await seedAttempt(job.jobId, 2);
    const { status, body } = await bench.call({
      method: 'GET',
      path: `/jobs/${job.jobId}/logs`,
      query: { attempt: '3' },
    });
    expect(status).toBe(404);
    expect(errorOf(body).message).toBe(`job ${job.jobId} has no attempt 3; it has attempts 1-2`);
  });

  it('refuses a limit outside 1..1000', async () => {
    const job = await seedJob('nlp', 'RUNNING');
    const { status, body } = await bench.call({
      method: 'GET',
      path: `/jobs/${job.jobId}/logs`,
      query: { limit: '5000' },
    });
    expect(status).toBe(400);
    expect(errorOf(body).message).toBe('query.limit: limit must be a whole number from 1 to 1000');
  });

  it('finds the stream from the recorded name, else from the task ARN under the team’s stream prefix', () => {
    const job = { team: 'nlp', tier: 'gpu-small' } as JobRecord;
    const base = {
      jobId: 'j1',
      attempt: 1,
      capacity: 'spot',
      queue: 'q',
      nodes: 1,
      status: 'RUNNING',
    } as AttemptRecord;
    const recorded = { ...base, logStreamName: 'trainyard-nlp-gpu-small/default/abc' } as AttemptRecord;
    const fromTask = {
      ...base,
      taskArn: 'arn:aws:ecs:us-east-1:123456789012:task/trainyard-gpu/0f1e2d3c',
    } as AttemptRecord;
    expect(logStreamOf(recorded, job)).toBe('trainyard-nlp-gpu-small/default/abc');
    // ECS names the stream <stream prefix>/<container>/<task id>; the job definitions' prefix is the team.
    expect(logStreamOf(fromTask, job)).toBe('nlp/default/0f1e2d3c');
    expect(logStreamOf(base, job)).toBeUndefined();
  });
});
