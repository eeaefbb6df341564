import { describe, expect, it } from 'vitest';
import { countersSchema, type JobRecord, requirementsSchema, retriesSchema } from '../../lambdas/domain/job';
import { decideNextStep, type NextStep, type NextStepInput } from '../../lambdas/domain/next-step';
import type { AttemptOutcome } from '../../lambdas/domain/outcome';

/** DESIGN.md's deployed policy: 2 reclaims, 20 min capacity wait, 6 min restart, 5 min check. */
const POLICY = {
  reclaimsBeforeOnDemand: 2,
  capacityWaitSeconds: 1200,
  restartOverheadSeconds: 360,
  checkIntervalSeconds: 300,
};

function job(change: {
  counters?: Partial<JobRecord['counters']>;
  retries?: Partial<JobRecord['retries']>;
  deadlineSeconds?: number;
  cancelRequested?: boolean;
}): NextStepInput['job'] {
  // Through the record's own sub-schemas, so the documented defaults (no retries, 60 s backoff) apply.
  return {
    counters: countersSchema.parse(change.counters ?? {}),
    retries: retriesSchema.parse(change.retries ?? {}),
    requirements: requirementsSchema.parse(
      change.deadlineSeconds === undefined ? {} : { deadlineSeconds: change.deadlineSeconds },
    ),
    ...(change.cancelRequested === undefined ? {} : { cancelRequested: change.cancelRequested }),
  };
}

const OUTCOMES = {
  succeeded: { kind: 'succeeded', reason: 'Batch reports the job SUCCEEDED.', exitCode: 0, resumable: false },
  cancelled: { kind: 'cancelled', reason: 'Batch statusReason "Trainyard: cancelled by user".', resumable: false },
  timedOut: {
    kind: 'timed-out',
    reason: 'Batch statusReason "Job attempt duration exceeded timeout".',
    resumable: false,
  },
  budget: {
    kind: 'budget-stopped',
    reason: 'Batch statusReason "Trainyard: budget exhausted, paused".',
    resumable: true,
  },
  reclaimed: {
    kind: 'reclaimed',
    reason: 'Batch statusReason "Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated.".',
    instanceId: 'i-0f2b6a4c9d8e7f123',
    resumable: true,
  },
  starved: {
    kind: 'capacity-starved',
    reason: 'Batch statusReason "Canceled by JobStateTimeLimit action".',
    resumable: true,
  },
  movedToOnDemand: { kind: 'moved', reason: 'Trainyard: moving to on-demand.', resumable: true, moveTo: 'on-demand' },
  movedToSpot: { kind: 'moved', reason: 'Trainyard: moving back to spot.', resumable: true, moveTo: 'spot' },
  stopped75: {
    kind: 'moved',
    reason: 'Container exit code 75 with no spot notice recorded.',
    exitCode: 75,
    resumable: true,
  },
  exit1: {
    kind: 'app-error',
    reason: 'Container exit code 1: the training command failed.',
    exitCode: 1,
    resumable: true,
  },
  oom: {
    kind: 'app-error',
    reason: 'OutOfMemoryError: choose a tier with more memory.',
    exitCode: 137,
    resumable: false,
  },
  pull: { kind: 'infra-error', reason: 'CannotPullContainerError: not found.', resumable: true },
  unplaceable: {
    kind: 'infra-error',
    reason:
      'Batch statusReason "Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT": no instance can hold it.',
    resumable: false,
  },
  resume76: {
    kind: 'resume-failed',
    reason: 'Container exit code 76: the training command failed right after the checkpoint was restored.',
    exitCode: 76,
    resumable: true,
  },
} satisfies Record<string, AttemptOutcome>;

function input(outcome: AttemptOutcome, change: Partial<NextStepInput> = {}, jobChange = {}): NextStepInput {
  return {
    job: job(jobChange),
    outcome,
    nowSeconds: 1800,
    policy: POLICY,
    spotAllowed: true,
    workSeconds: 3600,
    progressSeconds: 1200,
    ...change,
  };
}

interface Row {
  name: string;
  input: NextStepInput;
  expected: Partial<NextStep>;
  reasonMentions?: string[];
}

const zero = { attempts: 0, reclaims: 0, capacityCancellations: 0, appErrors: 0, infraErrors: 0, resumeFailures: 0 };

const TABLE: Row[] = [
  {
    name: 'a success finalizes SUCCEEDED',
    input: input(OUTCOMES.succeeded),
    expected: { action: 'finalize', finalState: 'SUCCEEDED', delaySeconds: 0, counters: { ...zero, attempts: 1 } },
  },
  {
    name: 'a cancel finalizes CANCELLED',
    input: input(OUTCOMES.cancelled),
    expected: { action: 'finalize', finalState: 'CANCELLED' },
    reasonMentions: ['cancelled by user'],
  },
  {
    name: 'a timeout finalizes FAILED with the reason',
    input: input(OUTCOMES.timedOut),
    expected: { action: 'finalize', finalState: 'FAILED' },
    reasonMentions: ['Job attempt duration exceeded timeout'],
  },
  {
    name: 'a budget stop pauses, with no final state',
    input: input(OUTCOMES.budget),
    expected: {
      action: 'pause-budget',
      finalState: undefined,
      capacity: undefined,
      counters: { ...zero, attempts: 1 },
    },
    reasonMentions: ['budget'],
  },
  {
    name: 'the first reclaim resumes on spot at once',
    input: input(OUTCOMES.reclaimed),
    expected: {
      action: 'run-attempt',
      capacity: 'spot',
      delaySeconds: 0,
      resume: true,
      fellBackToOnDemand: false,
      counters: { ...zero, attempts: 1, reclaims: 1 },
    },
  },
  {
    name: 'a reclaim while a budget of the job is blocked pauses, keeping where the next attempt would run',
    input: input(OUTCOMES.reclaimed, { blockedScope: 'user:vision/alice' }),
    expected: {
      action: 'pause-budget',
      capacity: 'spot',
      delaySeconds: 0,
      fellBackToOnDemand: false,
      counters: { ...zero, attempts: 1, reclaims: 1 },
    },
    reasonMentions: ['user:vision/alice', 'at or over its limit'],
  },
  {
    name: 'the second reclaim while a budget is blocked pauses, and the fall-back to on-demand is announced now',
    input: input(OUTCOMES.reclaimed, { blockedScope: 'team:vision' }, { counters: { attempts: 1, reclaims: 1 } }),
    expected: { action: 'pause-budget', capacity: 'on-demand', fellBackToOnDemand: true },
    reasonMentions: ['team:vision'],
  },
  {
    name: 'an app error retried while a budget is blocked pauses instead of waiting out the backoff',
    input: input(
      OUTCOMES.exit1,
      { blockedScope: 'team:vision' },
      { retries: { maxAppRetries: 3, backoffSeconds: 45 } },
    ),
    expected: { action: 'pause-budget', delaySeconds: 0, counters: { ...zero, attempts: 1, appErrors: 1 } },
    reasonMentions: ['team:vision'],
  },
  {
    name: 'a success while a budget is blocked still finalizes SUCCEEDED',
    input: input(OUTCOMES.succeeded, { blockedScope: 'team:vision' }),
    expected: { action: 'finalize', finalState: 'SUCCEEDED' },
  },
  {
    name: 'the second reclaim falls back to on-demand',
    input: input(OUTCOMES.reclaimed, {}, { counters: { attempts: 1, reclaims: 1 } }),
    expected: {
      action: 'run-attempt',
      capacity: 'on-demand',
      fellBackToOnDemand: true,
      counters: { ...zero, attempts: 2, reclaims: 2 },
    },
  },
  {
    name: 'reclaims before the job moved back to spot do not count toward the fallback',
    input: input(
      OUTCOMES.reclaimed,
      { sinceLastSpotMove: { reclaims: 0, capacityCancellations: 0 } },
      { counters: { attempts: 4, reclaims: 3 } },
    ),
    expected: { action: 'run-attempt', capacity: 'spot', counters: { ...zero, attempts: 5, reclaims: 4 } },
  },
  {
    name: 'a reclaim when spot is no longer allowed goes on-demand',
    input: input(OUTCOMES.reclaimed, { spotAllowed: false }),
    expected: { action: 'run-attempt', capacity: 'on-demand' },
  },
  {
    name: 'an on-demand host termination resumes on on-demand',
    input: input(OUTCOMES.reclaimed, { lastCapacity: 'on-demand' }),
    expected: { action: 'run-attempt', capacity: 'on-demand', fellBackToOnDemand: false },
  },
  {
    name: 'a capacity cancellation goes on-demand and counts separately',
    input: input(OUTCOMES.starved, {}, { counters: { attempts: 1, reclaims: 1 } }),
    expected: {
      action: 'run-attempt',
      capacity: 'on-demand',
      delaySeconds: 0,
      fellBackToOnDemand: true,
      counters: { ...zero, attempts: 2, reclaims: 1, capacityCancellations: 1 },
    },
  },
  {
    name: 'a move to on-demand resumes there',
    input: input(OUTCOMES.movedToOnDemand),
    expected: { action: 'run-attempt', capacity: 'on-demand', resume: true, counters: { ...zero, attempts: 1 } },
  },
  {
    name: 'a move back to spot resumes on spot',
    input: input(OUTCOMES.movedToSpot),
    expected: { action: 'run-attempt', capacity: 'spot', resume: true, fellBackToOnDemand: false },
  },
  {
    name: 'a move back to spot when spot is no longer allowed stays on-demand',
    input: input(OUTCOMES.movedToSpot, { spotAllowed: false }),
    expected: { action: 'run-attempt', capacity: 'on-demand' },
    reasonMentions: ['no longer allowed'],
  },
  {
    name: 'an unexplained checkpointed stop (exit 75) resumes where it ran when that was on-demand',
    input: input(OUTCOMES.stopped75, { lastCapacity: 'on-demand' }),
    expected: { action: 'run-attempt', capacity: 'on-demand', resume: true, delaySeconds: 0 },
  },
  {
    name: 'an app error without requested retries fails with the reason',
    input: input(OUTCOMES.exit1),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 1, appErrors: 1 } },
    reasonMentions: ['no app-error retries were requested', 'Container exit code 1'],
  },
  {
    name: 'the first app-error retry waits backoffSeconds',
    input: input(OUTCOMES.exit1, {}, { retries: { maxAppRetries: 3, backoffSeconds: 45 } }),
    expected: {
      action: 'run-attempt',
      capacity: 'spot',
      delaySeconds: 45,
      resume: true,
      counters: { ...zero, attempts: 1, appErrors: 1 },
    },
    reasonMentions: ['retry 1 of 3'],
  },
  {
    name: 'the second app-error retry waits twice as long',
    input: input(
      OUTCOMES.exit1,
      {},
      { retries: { maxAppRetries: 3, backoffSeconds: 45 }, counters: { attempts: 1, appErrors: 1 } },
    ),
    expected: { action: 'run-attempt', delaySeconds: 90, counters: { ...zero, attempts: 2, appErrors: 2 } },
  },
  {
    name: 'the third app-error retry waits four times as long',
    input: input(
      OUTCOMES.exit1,
      {},
      { retries: { maxAppRetries: 3, backoffSeconds: 45 }, counters: { attempts: 2, appErrors: 2 } },
    ),
    expected: { action: 'run-attempt', delaySeconds: 180 },
  },
  {
    name: 'app errors beyond maxAppRetries fail',
    input: input(
      OUTCOMES.exit1,
      {},
      { retries: { maxAppRetries: 3, backoffSeconds: 45 }, counters: { attempts: 3, appErrors: 3 } },
    ),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 4, appErrors: 4 } },
    reasonMentions: ['all 3 app-error retries used'],
  },
  {
    name: 'the app-error backoff is capped at one hour',
    input: input(
      OUTCOMES.exit1,
      {},
      { retries: { maxAppRetries: 5, backoffSeconds: 3000 }, counters: { attempts: 1, appErrors: 1 } },
    ),
    expected: { action: 'run-attempt', delaySeconds: 3600 },
    reasonMentions: ['capped at 3600 s'],
  },
  {
    name: 'an app-error retry stays on on-demand when that is where it ran',
    input: input(OUTCOMES.exit1, { lastCapacity: 'on-demand' }, { retries: { maxAppRetries: 1 } }),
    expected: { action: 'run-attempt', capacity: 'on-demand' },
  },
  {
    name: 'an out-of-memory error is not retried even with retries left',
    input: input(OUTCOMES.oom, {}, { retries: { maxAppRetries: 3 } }),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 1, appErrors: 1 } },
    reasonMentions: ['tier with more memory'],
  },
  {
    name: 'the first infrastructure error is retried after 30 s without touching app-error counts',
    input: input(OUTCOMES.pull),
    expected: {
      action: 'run-attempt',
      capacity: 'spot',
      delaySeconds: 30,
      counters: { ...zero, attempts: 1, infraErrors: 1 },
    },
  },
  {
    name: 'the third infrastructure error is retried after 120 s',
    input: input(OUTCOMES.pull, {}, { counters: { attempts: 2, infraErrors: 2 } }),
    expected: { action: 'run-attempt', delaySeconds: 120, counters: { ...zero, attempts: 3, infraErrors: 3 } },
  },
  {
    name: 'a job Batch can never place fails at once, with infrastructure retries left',
    input: input(OUTCOMES.unplaceable),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 1, infraErrors: 1 } },
    reasonMentions: ['Not retried', 'MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT'],
  },
  {
    name: 'the fourth infrastructure error fails the job',
    input: input(OUTCOMES.pull, {}, { counters: { attempts: 3, infraErrors: 3 } }),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 4, infraErrors: 4 } },
    reasonMentions: ['4 infrastructure errors', 'CannotPullContainerError'],
  },
  {
    name: 'a failure right after a restore is retried at once, apart from the app-error budget the user left at 0',
    input: input(OUTCOMES.resume76, {}, { counters: { attempts: 2, appErrors: 0 } }),
    expected: {
      action: 'run-attempt',
      capacity: 'spot',
      delaySeconds: 0,
      resume: true,
      counters: { ...zero, attempts: 3, resumeFailures: 1 },
    },
    reasonMentions: ['Resume retry 1 of 4', 'exit code 76'],
  },
  {
    name: 'a resume retry stays on on-demand when that is where it ran',
    input: input(OUTCOMES.resume76, { lastCapacity: 'on-demand' }),
    expected: { action: 'run-attempt', capacity: 'on-demand' },
  },
  {
    name: 'the fourth failure after a restore is still retried',
    input: input(OUTCOMES.resume76, {}, { counters: { attempts: 3, resumeFailures: 3 } }),
    expected: { action: 'run-attempt', counters: { ...zero, attempts: 4, resumeFailures: 4 } },
    reasonMentions: ['Resume retry 4 of 4'],
  },
  {
    name: 'the fifth failure after a restore fails the job',
    input: input(OUTCOMES.resume76, {}, { counters: { attempts: 4, resumeFailures: 4 } }),
    expected: { action: 'finalize', finalState: 'FAILED', counters: { ...zero, attempts: 5, resumeFailures: 5 } },
    reasonMentions: ['5 attempts failed right after restoring a checkpoint', 'limit 4'],
  },
  {
    name: 'a reclaim whose slack cannot absorb a spot restart goes on-demand to meet the deadline',
    // 7200 s deadline, at 3600 s with 4200 s of work left: slack is negative.
    input: input(
      OUTCOMES.reclaimed,
      { nowSeconds: 3600, workSeconds: 7200, progressSeconds: 3000 },
      { deadlineSeconds: 7200 },
    ),
    expected: { action: 'run-attempt', capacity: 'on-demand', fellBackToOnDemand: true },
  },
  {
    name: 'a reclaim counts the restart on spot against the slack: 1 200 s cannot absorb it and a fallback, so on-demand',
    // 7200 s deadline, at 3600 s with 2400 s of work left: slack 1200 s, under the safety net (2 × 360 + 300 s) plus
    // the 360 s start on spot again; spot has just gone, so that start is not free.
    input: input(
      OUTCOMES.reclaimed,
      { nowSeconds: 3600, workSeconds: 7200, progressSeconds: 4800, spotAvailable: true },
      { deadlineSeconds: 7200 },
    ),
    expected: { action: 'run-attempt', capacity: 'on-demand', fellBackToOnDemand: true },
    reasonMentions: ['can no longer absorb a spot restart'],
  },
  {
    name: 'a reclaim after the deadline has passed fails the job, as timed out',
    input: input(OUTCOMES.reclaimed, { nowSeconds: 7300 }, { deadlineSeconds: 7200 }),
    expected: { action: 'finalize', finalState: 'FAILED', failedAs: 'timed-out' },
    reasonMentions: ['deadline'],
  },
  {
    name: 'an app-error retry whose backoff would end past the deadline fails the job, as timed out',
    input: input(
      OUTCOMES.exit1,
      { nowSeconds: 7000 },
      { deadlineSeconds: 7200, retries: { maxAppRetries: 2, backoffSeconds: 600 } },
    ),
    expected: { action: 'finalize', finalState: 'FAILED', failedAs: 'timed-out' },
    reasonMentions: ['deadline'],
  },
];

describe('decideNextStep for a job whose cancel was requested', () => {
  it.each([
    { name: 'an app error it would retry', outcome: OUTCOMES.exit1, retries: { maxAppRetries: 2 } },
    { name: 'a reclaim it would resume', outcome: OUTCOMES.reclaimed, retries: {} },
    { name: 'a budget stop it would pause for', outcome: OUTCOMES.budget, retries: {} },
    { name: 'an infra error it would retry', outcome: OUTCOMES.pull, retries: {} },
  ])('ends CANCELLED after $name, starting nothing more', ({ outcome, retries }) => {
    const step = decideNextStep(input(outcome, {}, { cancelRequested: true, retries }));

    expect(step).toMatchObject({ action: 'finalize', finalState: 'CANCELLED', delaySeconds: 0 });
    expect(step.reason).toContain(outcome.kind);
  });

  it('keeps a success a success', () => {
    expect(decideNextStep(input(OUTCOMES.succeeded, {}, { cancelRequested: true }))).toMatchObject({
      action: 'finalize',
      finalState: 'SUCCEEDED',
    });
  });
});

describe('decideNextStep', () => {
  it.each(TABLE)('$name', ({ input: given, expected, reasonMentions }) => {
    const step = decideNextStep(given);

    const defined = Object.fromEntries(Object.entries(expected).filter(([, v]) => v !== undefined));
    expect(step).toMatchObject(defined);
    for (const [key, value] of Object.entries(expected)) {
      if (value === undefined) expect(step[key as keyof NextStep]).toBeUndefined();
    }
    for (const text of reasonMentions ?? []) expect(step.reason).toContain(text);
  });

  it.each(TABLE)('gives one non-empty reason and a consistent shape: $name', ({ input: given }) => {
    const step = decideNextStep(given);

    expect(step.reason.trim().length).toBeGreaterThan(10);
    expect(step.reason).not.toContain('\n');
    if (step.action === 'run-attempt') {
      expect(step.capacity).toBeDefined();
      expect(step.finalState).toBeUndefined();
    } else {
      expect(step.delaySeconds).toBe(0);
      expect(step.resume).toBe(false);
    }
    if (step.action === 'finalize') expect(step.finalState).toBeDefined();
  });

  it('is idempotent: the same input gives the same decision and leaves the input untouched', () => {
    const given = input(OUTCOMES.exit1, {}, { retries: { maxAppRetries: 2 }, counters: { attempts: 1, appErrors: 1 } });
    const snapshot = structuredClone(given);

    const first = decideNextStep(given);
    const second = decideNextStep(given);

    expect(second).toEqual(first);
    expect(given).toEqual(snapshot);
  });

  it('hands the spot history to the placement policy after a reclaim', () => {
    // Deadline 100 000 s, work 50 000 s, t = 40 000 s, nothing done: slack 10 000 s. The deployed reserve with no
    // history is max(0.25·0.4·60 000, 1 020 + (0.25/3600)·60 000·720) = 6 000 s, so the job waits for spot; after a
    // day queued without spot, availability (0 + 0.6·86 400) / 172 800 = 0.3 and the reserve 0.25·0.7·60 000 =
    // 10 500 s > 10 000 s, so the outage is covered with on-demand.
    const at = (spotHistory?: NextStepInput['spotHistory']) =>
      decideNextStep(
        input(
          OUTCOMES.reclaimed,
          { nowSeconds: 40_000, workSeconds: 50_000, progressSeconds: 0, ...(spotHistory ? { spotHistory } : {}) },
          { deadlineSeconds: 100_000 },
        ),
      );
    expect(at()).toMatchObject({ action: 'run-attempt', capacity: 'spot' });
    expect(at({ availableSeconds: 0, unavailableSeconds: 86_400, reclaims: 0 })).toMatchObject({
      action: 'run-attempt',
      capacity: 'on-demand',
    });
  });

  it('tells a planned policy how long a cancelled attempt waited in the spot queue', () => {
    const planned = {
      ...POLICY,
      spotPlanning: {
        model: { binSeconds: 300, availableHazards: [0], unavailableHazards: [0.5] },
        spotPriceRatio: 0.3,
      },
    };
    const next = decideNextStep(
      input(
        OUTCOMES.starved,
        {
          policy: planned,
          nowSeconds: 40_000,
          workSeconds: 50_000,
          progressSeconds: 0,
          spotUnavailableForSeconds: 1200,
        },
        { deadlineSeconds: 100_000 },
      ),
    );
    expect(next).toMatchObject({ action: 'run-attempt', capacity: 'spot' });
    expect(next.reason).toContain('The spot queue had no capacity for 1200 s');
  });
});
