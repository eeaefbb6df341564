// The PausedForBudget step against dynalite (jobs, budgets) behind the real adapters: what it charges and gives back.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createPauseHandler } from '../../lambdas/lifecycle/pause';
import {
  attemptRecord,
  CONFIG,
  type EventBench,
  JOB_ID,
  jobRecord,
  publishedOf,
  startEventBench,
  T,
} from '../lambdas/event-bench';

const PERIOD = new Date(T.created).toISOString().slice(0, 7);
let bench: EventBench;
let pause: ReturnType<typeof createPauseHandler>;

beforeEach(async () => {
  bench = await startEventBench();
  pause = createPauseHandler({
    config: CONFIG,
    jobs: bench.jobs,
    ledger: bench.ledger,
    events: bench.ports.events,
    lifecycle: bench.ports.lifecycle,
    clock: bench.clock,
  });
});

afterEach(async () => {
  await bench.stop();
});

describe('PausedForBudget', () => {
  /**
   * A job that reserved `reservedUsd` of a team budget; budget-watch last metered it at $3.00, and its attempt, stopped
   * for the budget a few minutes after that tick, is recorded at $3.40.
   */
  async function pausing(options: { limitUsd: number; reservedUsd: number }) {
    await bench.jobs.createJob(jobRecord({ state: 'RUNNING', costSoFarUsd: 3.4 }));
    await bench.jobs.putAttempt(
      attemptRecord({ status: 'FAILED', startedAt: T.started, stoppedAt: T.stopped, usdPerHour: 0.5, costUsd: 3.4 }),
    );
    await bench.ledger.ensureBudget('team:vision', PERIOD, options.limitUsd);
    await bench.ledger.reserve(JOB_ID, ['team:vision'], options.reservedUsd, PERIOD);
    await bench.ledger.accrue(JOB_ID, 3);
  }

  it('charges what the job ran since it was last metered, then gives back only what it still holds', async () => {
    await pausing({ limitUsd: 10, reservedUsd: 5 });

    expect(await pause({ jobId: JOB_ID, taskToken: 'token-1' })).toEqual({ jobId: JOB_ID, paused: true });

    // Spent $3.40, not the $3.00 last metered; the $1.60 left of the reservation is available again, not $2.00.
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({
      spentUsd: 3.4,
      reservedUsd: 0,
      availableUsd: 6.6,
    });
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ state: 'PAUSED_BUDGET', pauseToken: 'token-1' });
    // A retry of the step charges nothing twice.
    await pause({ jobId: JOB_ID, taskToken: 'token-2' });
    expect(await bench.ledger.usage('team:vision', PERIOD)).toMatchObject({ spentUsd: 3.4, availableUsd: 6.6 });
  });

  it('numbers each pause of a job: a retried step is the same pause, a pause after a resume is the next', async () => {
    await pausing({ limitUsd: 10, reservedUsd: 5 });
    const pauseIds = () => publishedOf(bench.recorded, 'Job PausedForBudget').map((e) => [e.eventId, e.pause]);

    await pause({ jobId: JOB_ID, taskToken: 'token-1' });
    // The step retried (its first try's token is on the job): the same pause, the same event id.
    await pause({ jobId: JOB_ID, taskToken: 'token-2' });
    // Retried again after budget-watch cleared the token of a try that died (a resume sent to it found it gone): still
    // the same pause, not yet resumed from.
    await bench.jobs.patchJob(JOB_ID, {}, ['pauseToken']);
    await pause({ jobId: JOB_ID, taskToken: 'token-3' });
    // Resumed (PrepareAttempt counts the pause resumed from and clears the spent token), then paused again before the
    // attempt starts.
    await bench.jobs.patchJob(JOB_ID, { resumedPauses: 1 }, ['pauseToken']);
    await pause({ jobId: JOB_ID, taskToken: 'token-4' });

    expect(pauseIds()).toEqual([
      [`${JOB_ID}/paused-for-budget/1`, 1],
      [`${JOB_ID}/paused-for-budget/1`, 1],
      [`${JOB_ID}/paused-for-budget/1`, 1],
      [`${JOB_ID}/paused-for-budget/2`, 2],
    ]);
    expect(await bench.jobs.requireJob(JOB_ID)).toMatchObject({ pauses: 2, resumedPauses: 1, pauseToken: 'token-4' });
  });

  it('announces the threshold the late charge crosses', async () => {
    // $3.20 reserved of $4.80 is 66.7 %; spent past the reservation, $3.40 is 70.8 %, over the 70 % warning.
    await pausing({ limitUsd: 4.8, reservedUsd: 3.2 });

    await pause({ jobId: JOB_ID, taskToken: 'token-1' });

    expect(publishedOf(bench.recorded, 'Budget Threshold Crossed')).toEqual([
      expect.objectContaining({ scope: 'team:vision', thresholdPercent: 70 }),
    ]);
  });
});
