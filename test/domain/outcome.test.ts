import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type BatchJob,
  InvalidBatchJob,
  normaliseBatchJobKeys,
  parseBatchFailureCause,
  parseBatchJob,
} from '../../lambdas/domain/batch-job';
import { type AttemptOutcome, classifyAttemptOutcome, OutcomeNotFinal } from '../../lambdas/domain/outcome';

const FIXTURES = join(import.meta.dirname, '../fixtures/batch');

function readFixture(name: string): unknown {
  return JSON.parse(readFileSync(join(FIXTURES, name), 'utf8'));
}

/** Loads a fixture the way the handler that receives it would: by its delivery shape. */
function loadJob(name: string): BatchJob {
  const raw = readFixture(name) as Record<string, unknown>;
  if (name.endsWith('.sfn-failure.json')) {
    expect(raw.Error).toBe('States.TaskFailed');
    return parseBatchFailureCause(String(raw.Cause));
  }
  if (name.endsWith('.event.json')) {
    expect(raw['detail-type']).toBe('Batch Job State Change');
    return parseBatchJob(raw.detail);
  }
  if (name.endsWith('.describe-jobs.json')) return parseBatchJob((raw.jobs as unknown[])[0]);
  return parseBatchJob(raw);
}

describe('parseBatchFailureCause / parseBatchJob', () => {
  it('reads the PascalCase job Step Functions puts in a States.TaskFailed Cause', () => {
    const job = loadJob('app-error-exit-1.describe-jobs.json');
    const sfn = loadJob('oom.sfn-failure.json');

    expect(job.status).toBe('FAILED');
    expect(sfn.jobId).toBe('e0a2b4c6-8d0f-4b2c-94a6-8d9e0f1a2b23');
    expect(sfn.attempts[0]?.container?.exitCode).toBe(137);
    expect(sfn.attempts[0]?.container?.reason).toBe('OutOfMemoryError: Container killed due to memory usage');
    expect(sfn.container?.exitCode).toBe(137);
    expect(sfn.timeout?.attemptDurationSeconds).toBe(7200);
  });

  it('reads the same job identically whether keys are camelCase (DescribeJobs, EventBridge) or PascalCase (Step Functions)', () => {
    const camel = (readFixture('reclaimed-spot.event.json') as { detail: Record<string, unknown> }).detail;
    const upper = (o: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(o).map(([k, v]) => [k.charAt(0).toUpperCase() + k.slice(1), v]));
    const attempts = (camel.attempts as Record<string, unknown>[]).map((a) =>
      upper({ ...a, container: upper(a.container as Record<string, unknown>) }),
    );
    const pascalJob = upper({ ...camel, attempts, container: upper(camel.container as Record<string, unknown>) });

    const fromCamel = parseBatchJob(camel);
    const fromPascal = parseBatchJob(pascalJob);

    expect(fromPascal.jobId).toBe(fromCamel.jobId);
    expect(fromPascal.statusReason).toBe('Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated.');
    expect(fromPascal.attempts).toEqual(fromCamel.attempts);
    expect(fromPascal.container?.logStreamName).toBe(fromCamel.container?.logStreamName);
  });

  it('keeps tag and parameter keys as the user wrote them and passes unknown fields through', () => {
    const job = parseBatchJob(
      normaliseBatchJobKeys({
        JobArn: 'arn:aws:batch:us-east-1:123456789012:job/x',
        JobName: 'n',
        JobId: 'x',
        JobQueue: 'q',
        Status: 'SUCCEEDED',
        CreatedAt: 1,
        Attempts: [],
        JobDefinition: 'd',
        Tags: { 'Trainyard:Team': 'vision' },
        Parameters: { Epochs: '3' },
        ShareIdentifier: 'vision',
      }),
    );

    expect(job.tags).toEqual({ 'Trainyard:Team': 'vision' });
    expect(job.parameters).toEqual({ Epochs: '3' });
    expect((job as Record<string, unknown>).shareIdentifier).toBe('vision');
  });

  it.each([
    ['not JSON', 'A cause message', /Cause is not JSON .*got "A cause message"/],
    ['a JSON array', '[1,2]', /must be a JSON object \(a Batch JobDetail\), got an array/],
    ['JSON null', 'null', /got null/],
    [
      'missing jobId',
      JSON.stringify({
        JobArn: 'a',
        JobName: 'n',
        JobQueue: 'q',
        Status: 'FAILED',
        CreatedAt: 1,
        Attempts: [],
        JobDefinition: 'd',
      }),
      /jobId: .*expected string/,
    ],
    [
      'an unknown status',
      JSON.stringify({
        JobArn: 'a',
        JobName: 'n',
        JobId: 'x',
        JobQueue: 'q',
        Status: 'DONE',
        CreatedAt: 1,
        Attempts: [],
        JobDefinition: 'd',
      }),
      /status: .*"SUBMITTED".*"FAILED"/,
    ],
    [
      'a string exit code',
      JSON.stringify({
        JobArn: 'a',
        JobName: 'n',
        JobId: 'x',
        JobQueue: 'q',
        Status: 'FAILED',
        CreatedAt: 1,
        Attempts: [{ Container: { ExitCode: '1' } }],
        JobDefinition: 'd',
      }),
      /attempts\[0\]\.container\.exitCode: .*expected number/,
    ],
  ])('refuses a Cause that is %s, naming what was wrong', (_what, cause, message) => {
    expect(() => parseBatchFailureCause(cause)).toThrow(InvalidBatchJob);
    expect(() => parseBatchFailureCause(cause)).toThrow(message);
  });
});

interface Row {
  fixture: string;
  noticeRecorded?: boolean;
  harnessSawNotice?: boolean;
  expected: Partial<AttemptOutcome> & Pick<AttemptOutcome, 'kind' | 'resumable'>;
  /** Text from Batch's own field that the reason must quote. */
  quotes: string;
}

const TABLE: Row[] = [
  {
    fixture: 'succeeded.sfn-output.json',
    expected: { kind: 'succeeded', resumable: false, exitCode: 0 },
    quotes: 'SUCCEEDED',
  },
  {
    fixture: 'reclaimed-spot.event.json',
    expected: { kind: 'reclaimed', resumable: true, instanceId: 'i-0f2b6a4c9d8e7f123' },
    quotes: '"Host EC2 (instance i-0f2b6a4c9d8e7f123) terminated."',
  },
  {
    fixture: 'capacity-cancelled.sfn-failure.json',
    expected: { kind: 'capacity-starved', resumable: true },
    quotes: '"Canceled by JobStateTimeLimit action due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY"',
  },
  {
    // An on-demand attempt asking the g4dn.xlarge's nominal 16,384 MiB, which no instance registers.
    fixture: 'unplaceable-cancelled.sfn-failure.json',
    expected: { kind: 'infra-error', resumable: false },
    quotes: '"Canceled by JobStateTimeLimit action due to reason: MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT"',
  },
  {
    fixture: 'terminated-spot-notice.sfn-failure.json',
    expected: { kind: 'reclaimed', resumable: true, exitCode: 75 },
    quotes: '"Trainyard: spot interruption notice"',
  },
  {
    fixture: 'terminated-budget-pause.sfn-failure.json',
    expected: { kind: 'budget-stopped', resumable: true, exitCode: 75 },
    quotes: '"Trainyard: budget exhausted, paused"',
  },
  {
    fixture: 'terminated-cancel.sfn-failure.json',
    expected: { kind: 'cancelled', resumable: false, exitCode: 143 },
    quotes: '"Trainyard: cancelled by user"',
  },
  {
    fixture: 'terminated-cancel-runnable.event.json',
    expected: { kind: 'cancelled', resumable: false },
    quotes: '"Trainyard: cancelled by user"',
  },
  {
    fixture: 'terminated-move-to-on-demand.sfn-failure.json',
    expected: { kind: 'moved', resumable: true, moveTo: 'on-demand', exitCode: 75 },
    quotes: '"Trainyard: moving to on-demand"',
  },
  {
    fixture: 'terminated-move-to-spot.sfn-failure.json',
    expected: { kind: 'moved', resumable: true, moveTo: 'spot', exitCode: 75 },
    quotes: '"Trainyard: moving back to spot"',
  },
  {
    fixture: 'terminated-deadline.sfn-failure.json',
    expected: { kind: 'timed-out', resumable: false, exitCode: 75 },
    quotes: '"Trainyard: deadline reached"',
  },
  {
    fixture: 'app-error-exit-1.describe-jobs.json',
    expected: { kind: 'app-error', resumable: true, exitCode: 1 },
    quotes: 'exit code 1',
  },
  {
    fixture: 'harness-exit-75.sfn-failure.json',
    expected: { kind: 'moved', resumable: true, exitCode: 75 },
    quotes: 'exit code 75',
  },
  {
    fixture: 'harness-exit-75.sfn-failure.json',
    noticeRecorded: true,
    expected: { kind: 'reclaimed', resumable: true, exitCode: 75 },
    quotes: 'spot interruption notice',
  },
  {
    // The warning came before the platform knew the instance: only the harness, reading IMDS, saw it.
    fixture: 'harness-exit-75.sfn-failure.json',
    harnessSawNotice: true,
    expected: { kind: 'reclaimed', resumable: true, exitCode: 75 },
    quotes: 'notice it read from the instance metadata',
  },
  {
    // The harness's word counts for an exit 75 only: a TerminateJob reason still decides (rule 2).
    fixture: 'terminated-move-to-on-demand.sfn-failure.json',
    harnessSawNotice: true,
    expected: { kind: 'moved', resumable: true, moveTo: 'on-demand', exitCode: 75 },
    quotes: '"Trainyard: moving to on-demand"',
  },
  {
    fixture: 'oom.sfn-failure.json',
    expected: { kind: 'app-error', resumable: false, exitCode: 137 },
    quotes: '"OutOfMemoryError: Container killed due to memory usage"',
  },
  {
    fixture: 'cannot-pull-container.sfn-failure.json',
    expected: { kind: 'infra-error', resumable: true },
    quotes: '"CannotPullContainerError: pull image manifest has been retried 1 time(s)',
  },
  {
    fixture: 'timeout.sfn-failure.json',
    expected: { kind: 'timed-out', resumable: false, exitCode: 75 },
    quotes: '"Job attempt duration exceeded timeout"',
  },
];

describe('classifyAttemptOutcome on documented Batch payloads', () => {
  it.each(TABLE)(
    '$fixture (notice recorded: $noticeRecorded, seen by the harness: $harnessSawNotice) → $expected.kind',
    (row) => {
      const job = loadJob(row.fixture);

      const outcome = classifyAttemptOutcome(job, {
        noticeRecorded: row.noticeRecorded,
        harnessSawNotice: row.harnessSawNotice,
      });

      expect(outcome).toMatchObject(row.expected);
      expect(outcome.reason).toContain(row.quotes);
      if (row.expected.exitCode === undefined) expect(outcome.exitCode).toBeUndefined();
      if (row.expected.instanceId === undefined) expect(outcome.instanceId).toBeUndefined();
      if (row.expected.moveTo === undefined) expect(outcome.moveTo).toBeUndefined();
    },
  );

  it('suggests a bigger tier when the container ran out of memory', () => {
    const outcome = classifyAttemptOutcome(loadJob('oom.sfn-failure.json'));

    expect(outcome.reason).toMatch(/out of memory.*tier with more memory/);
  });

  it('refuses to classify a job that is still running', () => {
    const job = loadJob('running.event.json');

    expect(() => classifyAttemptOutcome(job)).toThrow(OutcomeNotFinal);
    expect(() => classifyAttemptOutcome(job)).toThrow(/is RUNNING; only a SUCCEEDED or FAILED job/);
  });
});

/** A FAILED job built from the exit-1 fixture with the given fields replaced. */
function variant(change: {
  statusReason?: string;
  attemptReason?: string;
  exitCode?: number | null;
  containerReason?: string;
}): BatchJob {
  const job = structuredClone(loadJob('app-error-exit-1.describe-jobs.json'));
  const attempt = job.attempts[0];
  if (!attempt?.container || !job.container) throw new Error('fixture must have an attempt with a container');
  if (change.statusReason !== undefined) job.statusReason = change.statusReason;
  if (change.attemptReason !== undefined) attempt.statusReason = change.attemptReason;
  if (change.exitCode === null) {
    delete attempt.container.exitCode;
    delete job.container.exitCode;
  } else if (change.exitCode !== undefined) {
    attempt.container.exitCode = change.exitCode;
    job.container.exitCode = change.exitCode;
  }
  if (change.containerReason !== undefined) attempt.container.reason = change.containerReason;
  return job;
}

describe('classifyAttemptOutcome precedence', () => {
  it.each([
    {
      name: 'our spot-notice reason wins over the checkpointed exit 75 even with no notice recorded',
      job: () => variant({ statusReason: 'Trainyard: spot interruption notice', exitCode: 75 }),
      kind: 'reclaimed',
    },
    {
      name: 'our move reason wins over an app exit code',
      job: () => variant({ statusReason: 'Trainyard: moving to on-demand', exitCode: 1 }),
      kind: 'moved',
    },
    {
      name: 'a host termination in the attempt statusReason wins over an exit code',
      job: () =>
        variant({
          statusReason: 'Essential container in task exited',
          attemptReason: 'Host EC2 (instance i-00aa11bb22cc33dd4) terminated.',
          exitCode: 1,
        }),
      kind: 'reclaimed',
    },
    {
      name: 'a Fargate Spot interruption wins over the checkpointed exit 75 with no notice (no EC2 warning exists)',
      job: () => variant({ statusReason: 'Your Spot Task was interrupted.', exitCode: 75 }),
      kind: 'reclaimed',
    },
    {
      name: 'a Fargate Spot interruption wins over the SIGKILL exit 137 of a save that overran its 30 s',
      job: () =>
        variant({
          statusReason: 'Essential container in task exited',
          attemptReason: 'Your Spot Task was interrupted.',
          exitCode: 137,
        }),
      kind: 'reclaimed',
    },
    {
      name: 'a Fargate Spot interruption in the container reason counts too',
      job: () => variant({ exitCode: 143, containerReason: 'Your Spot Task was interrupted.' }),
      kind: 'reclaimed',
    },
    {
      name: 'the Batch timeout wins over OOM and exit codes',
      job: () =>
        variant({
          statusReason: 'Job attempt duration exceeded timeout',
          exitCode: 137,
          containerReason: 'OutOfMemoryError: Container killed due to memory usage',
        }),
      kind: 'timed-out',
    },
    {
      name: 'OOM wins over the generic exit 137',
      job: () => variant({ exitCode: 137, containerReason: 'OutOfMemoryError: Container killed due to memory usage' }),
      kind: 'app-error',
    },
    {
      name: 'a container start failure wins over an exit code',
      job: () =>
        variant({
          exitCode: 1,
          containerReason: 'ResourceInitializationError: failed to validate logger args: signal: killed',
        }),
      kind: 'infra-error',
    },
    { name: 'exit 76 is a failure right after a restore', job: () => variant({ exitCode: 76 }), kind: 'resume-failed' },
    { name: 'exit 78 is a configuration error', job: () => variant({ exitCode: 78 }), kind: 'app-error' },
    { name: 'exit 79 is an infrastructure error', job: () => variant({ exitCode: 79 }), kind: 'infra-error' },
    {
      name: 'Essential container in task exited with no exit code is an infrastructure error',
      job: () => variant({ exitCode: null }),
      kind: 'infra-error',
    },
    {
      name: 'DockerTimeoutError is an infrastructure error',
      job: () => variant({ exitCode: null, containerReason: 'DockerTimeoutError: Could not transition to created' }),
      kind: 'infra-error',
    },
    {
      name: 'CannotStartContainerError is an infrastructure error',
      job: () => variant({ exitCode: null, containerReason: 'CannotStartContainerError: Error response from daemon' }),
      kind: 'infra-error',
    },
    {
      name: 'exit 0 on a FAILED job is an infrastructure error',
      job: () => variant({ exitCode: 0 }),
      kind: 'infra-error',
    },
    {
      name: 'an unknown reason with our prefix is an infrastructure error, not a guess',
      job: () => variant({ statusReason: 'Trainyard: something new', exitCode: 75 }),
      kind: 'infra-error',
    },
  ] as const)('$name', ({ job, kind }) => {
    const outcome = classifyAttemptOutcome(job());

    expect(outcome.kind).toBe(kind);
  });

  it('marks exit 78 as not resumable (running the same configuration again cannot help)', () => {
    const outcome = classifyAttemptOutcome(variant({ exitCode: 78 }));

    expect(outcome).toMatchObject({ kind: 'app-error', exitCode: 78, resumable: false });
    expect(outcome.reason).toContain('configuration');
  });

  it('marks exit 76 as resumable: the harness left a checkpoint to try', () => {
    const outcome = classifyAttemptOutcome(variant({ exitCode: 76 }));

    expect(outcome).toMatchObject({ kind: 'resume-failed', exitCode: 76, resumable: true });
    expect(outcome.reason).toContain('right after the checkpoint was restored');
  });

  it('extracts the instance id from the attempt statusReason', () => {
    const outcome = classifyAttemptOutcome(
      variant({ attemptReason: 'Host EC2 (instance i-00aa11bb22cc33dd4) terminated.', exitCode: null }),
    );

    expect(outcome.instanceId).toBe('i-00aa11bb22cc33dd4');
  });
});
