// The Backoff step against dynalite behind the real job store: the token it records, and a cancel it finds.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createBackoffHandler } from '../../lambdas/lifecycle/backoff';
import { type EventBench, JOB_ID, jobRecord, startEventBench } from '../lambdas/event-bench';

let bench: EventBench;
let backoff: ReturnType<typeof createBackoffHandler>;

beforeEach(async () => {
  bench = await startEventBench();
  backoff = createBackoffHandler({ jobs: bench.jobs, lifecycle: bench.ports.lifecycle });
});

afterEach(async () => {
  await bench.stop();
});

describe('Backoff', () => {
  it('records the token the execution waits on, and ends no wait by itself', async () => {
    await bench.jobs.createJob(jobRecord({ state: 'RUNNING' }));

    expect(await backoff({ jobId: JOB_ID, taskToken: 'token-1', delaySeconds: 60 })).toEqual({
      jobId: JOB_ID,
      waiting: true,
    });

    expect((await bench.jobs.requireJob(JOB_ID)).pauseToken).toBe('token-1');
    expect(bench.recorded.taskSuccesses).toEqual([]);
    // A retry of the step waits under its new token.
    await backoff({ jobId: JOB_ID, taskToken: 'token-2', delaySeconds: 60 });
    expect((await bench.jobs.requireJob(JOB_ID)).pauseToken).toBe('token-2');
  });

  it('ends the wait at once for a job cancelled before its token was stored', async () => {
    await bench.jobs.createJob(jobRecord({ state: 'RUNNING', cancelRequested: true }));

    expect(await backoff({ jobId: JOB_ID, taskToken: 'token-1', delaySeconds: 3600 })).toEqual({
      jobId: JOB_ID,
      waiting: false,
    });

    expect(bench.recorded.taskSuccesses).toEqual([{ token: 'token-1', output: { action: 'cancel' } }]);
  });

  it('ends the wait at once for a job that already ended, and leaves its record as it is', async () => {
    await bench.jobs.createJob(jobRecord({ state: 'FAILED' }));
    const before = await bench.jobs.requireJob(JOB_ID);

    await backoff({ jobId: JOB_ID, taskToken: 'token-1', delaySeconds: 60 });

    expect(bench.recorded.taskSuccesses).toEqual([{ token: 'token-1', output: { action: 'cancel' } }]);
    expect(await bench.jobs.requireJob(JOB_ID)).toEqual(before);
  });

  it.each([
    [{ taskToken: 'token-1', delaySeconds: 60 }, 'jobId'],
    [{ jobId: JOB_ID, delaySeconds: 60 }, 'taskToken'],
    [{ jobId: JOB_ID, taskToken: 'token-1', delaySeconds: 0 }, 'delaySeconds'],
  ])('refuses an input without what it needs (%j), naming the field and changing nothing', async (input, field) => {
    await bench.jobs.createJob(jobRecord({ state: 'RUNNING' }));

    await expect(backoff(input)).rejects.toThrow(new RegExp(`Backoff received an invalid input: .*${field}`));
    expect((await bench.jobs.requireJob(JOB_ID)).pauseToken).toBeUndefined();
  });
});
