import { beforeAll, describe, expect, it } from 'vitest';
import { handlerOfEntry, memoryForEntry } from '../../lib/function';
import { STATE_NAMES } from '../../lib/lifecycle/job-state-machine';
import { synthesizeJobStateMachineDefinition } from '../../lib/local/definition';
import { actionsOf, BATCH_JOB_ARNS, batchActionsOf, resourcesOf, type Synthesized, synthesize } from './synth';

interface Retrier {
  ErrorEquals: string[];
  IntervalSeconds: number;
  MaxAttempts: number;
  BackoffRate: number;
  MaxDelaySeconds?: number;
}

let s: Synthesized;
beforeAll(() => {
  s = synthesize();
});

const stateMachine = () => {
  const found = resourcesOf(s.platformTemplate, 'AWS::StepFunctions::StateMachine');
  expect(found).toHaveLength(1);
  return (found[0] as [string, Record<string, unknown>])[1];
};
const roleStatements = (rolePrefix: string) =>
  resourcesOf(s.platformTemplate, 'AWS::IAM::Policy')
    .filter(([, p]) => JSON.stringify(p.Roles).includes(rolePrefix))
    .flatMap(([, p]) => (p.PolicyDocument as { Statement: Array<Record<string, unknown>> }).Statement);

describe('job state machine', () => {
  it('is a Standard state machine (one long-running execution per job)', () => {
    expect(stateMachine().StateMachineType).toBe('STANDARD');
  });

  it('logs every event with execution data', () => {
    expect(stateMachine().LoggingConfiguration).toMatchObject({ IncludeExecutionData: true, Level: 'ALL' });
  });

  it('traces executions with X-Ray', () => {
    expect(stateMachine().TracingConfiguration).toEqual({ Enabled: true });
  });

  it('has exactly the documented states', () => {
    const definition = JSON.stringify(stateMachine().DefinitionString);
    for (const name of Object.values(STATE_NAMES)) expect(definition).toContain(`\\"${name}\\":{`);
  });

  it('alarms on executions that failed, were aborted or timed out, notifying the alert topic', () => {
    const alarms = resourcesOf(s.platformTemplate, 'AWS::CloudWatch::Alarm').filter(([id]) =>
      id.startsWith('LifecycleExecutionsFailedAlarm'),
    );
    expect(alarms).toHaveLength(1);
    const [, alarm] = alarms[0] as [string, Record<string, unknown>];
    expect(alarm).toMatchObject({
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    const [machineId] = resourcesOf(s.platformTemplate, 'AWS::StepFunctions::StateMachine')[0] as [string, unknown];
    type Query = { Id: string; Expression?: string; ReturnData?: boolean; MetricStat?: Record<string, unknown> };
    const queries = alarm.Metrics as Query[];
    const sum = queries.find((q) => q.Expression !== undefined);
    // Each series filled with 0: Step Functions publishes a metric only where it counted something, and a sum with a
    // missing term has no value, so one failure alone would not breach.
    expect(sum?.Expression).toBe('FILL(failed, 0) + FILL(aborted, 0) + FILL(timedOut, 0)');
    const stats = Object.fromEntries(queries.filter((q) => q.MetricStat).map((q) => [q.Id, q.MetricStat]));
    for (const [id, metricName] of [
      ['failed', 'ExecutionsFailed'],
      ['aborted', 'ExecutionsAborted'],
      ['timedOut', 'ExecutionsTimedOut'],
    ]) {
      expect(stats[id as string]).toEqual({
        Metric: {
          Namespace: 'AWS/States',
          MetricName: metricName,
          Dimensions: [{ Name: 'StateMachineArn', Value: { Ref: machineId } }],
        },
        Period: 300,
        Stat: 'Sum',
      });
    }
    const topics = resourcesOf(s.platformTemplate, 'AWS::SNS::Topic').map(([id]) => ({ Ref: id }));
    expect(topics).toHaveLength(1);
    expect(alarm.AlarmActions).toEqual(topics);
  });

  it('retries any Finalize failure for over 25 minutes, and a failed pause step like the other steps', () => {
    const states = synthesizeJobStateMachineDefinition().States as Record<string, { Retry?: Retrier[] }>;
    const finalize = states[STATE_NAMES.finalize]?.Retry?.find((r) => r.ErrorEquals.includes('States.ALL'));
    if (!finalize) throw new Error('Finalize has no States.ALL retrier');
    let waited = 0;
    for (let i = 0; i < finalize.MaxAttempts; i++) {
      waited += Math.min(finalize.IntervalSeconds * finalize.BackoffRate ** i, finalize.MaxDelaySeconds ?? Infinity);
    }
    expect(waited).toBeGreaterThan(25 * 60);
    expect(states[STATE_NAMES.pausedForBudget]?.Retry).toEqual(states[STATE_NAMES.prepareAttempt]?.Retry);
  });

  it('waits out a backoff as a Task on its token that times out after the delay, so a cancel can end it', () => {
    const states = synthesizeJobStateMachineDefinition().States;
    const backoff = states[STATE_NAMES.backoff] as Record<string, unknown> & {
      Catch: Array<{ ErrorEquals: string[]; Next: string; ResultPath?: string | null }>;
      Retry: Retrier[];
    };
    expect(backoff).toMatchObject({
      Type: 'Task',
      Resource: 'arn:aws:states:::lambda:invoke.waitForTaskToken',
      TimeoutSecondsPath: '$.plan.delaySeconds',
      ResultPath: null,
      Next: STATE_NAMES.prepareAttempt,
      Parameters: { Payload: { 'jobId.$': '$.jobId', 'taskToken.$': '$$.Task.Token' } },
    });
    // The timeout is the wait's normal end: caught before the catch-all (States.ALL matches it too), input kept.
    expect(backoff.Catch[0]).toEqual({
      ErrorEquals: ['States.Timeout'],
      Next: STATE_NAMES.prepareAttempt,
      ResultPath: null,
    });
    expect(backoff.Catch[1]).toMatchObject({ ErrorEquals: ['States.ALL'], Next: STATE_NAMES.stepFailed });
    // No retrier takes the timeout for a failure (States.TaskFailed does not match States.Timeout).
    for (const retrier of backoff.Retry) expect(retrier.ErrorEquals).not.toContain('States.ALL');
    expect(backoff.Retry).toEqual(states[STATE_NAMES.pausedForBudget]?.Retry);
  });

  it('lets Pause and Backoff send task success to the job state machine alone', () => {
    const policies = resourcesOf(s.platformTemplate, 'AWS::IAM::Policy').filter(([id]) =>
      id.startsWith('LifecycleStepsTaskResponse'),
    );
    expect(policies).toHaveLength(1);
    const [, policy] = policies[0] ?? [];
    expect(policy?.PolicyDocument).toEqual({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: 'states:SendTaskSuccess',
          Resource: { Ref: expect.stringMatching(/^LifecycleStateMachine/) },
        },
      ],
    });
    expect(JSON.stringify(policy?.Roles)).toMatch(/LifecycleStepsPauseServiceRole/);
    expect(JSON.stringify(policy?.Roles)).toMatch(/LifecycleStepsBackoffServiceRole/);
    expect(policy?.Roles).toHaveLength(2);
  });

  it('lets the Backoff step write only the jobs table', () => {
    const statements = roleStatements('LifecycleStepsBackoffServiceRole');
    expect(JSON.stringify(statements)).not.toContain('BudgetsTable');
    expect(batchActionsOf(statements)).toEqual([]);
  });

  it.each([
    ['AttemptOutcome', STATE_NAMES.attemptOutcome, 'States.TaskFailed'],
    ['Finalize', STATE_NAMES.finalize, 'States.ALL'],
  ])(
    'retries %s for over 30 minutes while an attempt still in Batch is stopping, before any other retrier',
    (_, name, catchAll) => {
      const retry = synthesizeJobStateMachineDefinition().States[name] as { Retry: Retrier[] };
      const index = retry.Retry.findIndex((r) => r.ErrorEquals.includes('AttemptsStillRunning'));
      const wildcard = retry.Retry.findIndex((r) => r.ErrorEquals.includes(catchAll));
      expect(index).toBeGreaterThanOrEqual(0);
      // Step Functions uses the first retrier that matches, and States.TaskFailed and States.ALL match every error.
      expect(index).toBeLessThan(wildcard);
      const stopping = retry.Retry[index] as Retrier;
      let waited = 0;
      for (let i = 0; i < stopping.MaxAttempts; i++) {
        waited += Math.min(stopping.IntervalSeconds * stopping.BackoffRate ** i, stopping.MaxDelaySeconds ?? Infinity);
      }
      expect(waited).toBeGreaterThan(30 * 60);
      expect(stopping.IntervalSeconds).toBeGreaterThanOrEqual(30);
    },
  );

  it('lets AttemptOutcome look an attempt up in Batch and terminate it, and nothing else in Batch', () => {
    const statements = roleStatements('LifecycleStepsAttemptOutcomeServiceRole');
    expect(statements).toContainEqual({ Action: 'batch:TerminateJob', Effect: 'Allow', Resource: BATCH_JOB_ARNS });
    expect(batchActionsOf(statements)).toEqual(['batch:DescribeJobs', 'batch:ListJobs', 'batch:TerminateJob']);
    for (const step of ['Analyze', 'CostGate', 'PrepareAttempt']) {
      expect(batchActionsOf(roleStatements(`LifecycleSteps${step}ServiceRole`)), step).toEqual([]);
    }
  });

  it('lets Finalize look up and terminate an attempt still in Batch when its job ends, and nothing else in Batch', () => {
    const statements = roleStatements('LifecycleStepsFinalizeServiceRole');
    expect(statements).toContainEqual({ Action: 'batch:TerminateJob', Effect: 'Allow', Resource: BATCH_JOB_ARNS });
    expect(batchActionsOf(statements)).toEqual(['batch:DescribeJobs', 'batch:ListJobs', 'batch:TerminateJob']);
  });

  it('submits attempts only to the platform’s queues and job definitions', () => {
    const submit = roleStatements('LifecycleStateMachineRole').find((st) => st.Sid === 'SubmitAttempts');
    const resources = JSON.stringify(submit?.Resource);
    const queues = resourcesOf(s.platformTemplate, 'AWS::Batch::JobQueue').map(([id]) => id);
    for (const queue of queues) expect(resources).toContain(queue);
    expect(resources).toContain(':job-definition/trainyard-*');
    expect(actionsOf([submit ?? {}])).toEqual(['batch:SubmitJob', 'batch:TagResource']);
  });

  it('may terminate Batch jobs but nothing else in Batch beyond submitting and describing', () => {
    const statements = roleStatements('LifecycleStateMachineRole');
    const terminate = statements.find((st) => actionsOf([st]).includes('batch:TerminateJob'));
    expect(terminate?.Resource).toEqual(BATCH_JOB_ARNS);
    expect(batchActionsOf(statements)).toEqual([
      'batch:DescribeJobs',
      'batch:SubmitJob',
      'batch:TagResource',
      'batch:TerminateJob',
    ]);
  });

  it('lets only the steps that touch budgets use the budgets table, and only CostGate, Pause and Finalize write it', () => {
    // AttemptOutcome and PrepareAttempt read whether a budget is blocked (the job then pauses instead of starting
    // another attempt); Pause accrues the paused job's cost and gives back what it still holds.
    const access: Record<string, 'none' | 'read' | 'write'> = {
      Analyze: 'none',
      Backoff: 'none',
      PrepareAttempt: 'read',
      AttemptOutcome: 'read',
      CostGate: 'write',
      Pause: 'write',
      Finalize: 'write',
    };
    for (const [step, expected] of Object.entries(access)) {
      const onBudgets = roleStatements(`LifecycleSteps${step}ServiceRole`).filter((st) =>
        JSON.stringify(st.Resource).includes('BudgetsTableArn'),
      );
      const actions = actionsOf(onBudgets);
      const writes = actions.some((a) => /^dynamodb:(PutItem|UpdateItem|DeleteItem|BatchWriteItem)$/.test(a));
      const got = onBudgets.length === 0 ? 'none' : writes ? 'write' : 'read';
      expect(got, step).toBe(expected);
      if (expected === 'read') expect(actions, step).toContain('dynamodb:GetItem');
    }
  });

  it('lets only Finalize write to the workspace (summaries)', () => {
    for (const step of ['Analyze', 'PrepareAttempt', 'AttemptOutcome', 'Finalize']) {
      const writes = actionsOf(roleStatements(`LifecycleSteps${step}ServiceRole`)).includes('s3:PutObject');
      expect(writes, step).toBe(step === 'Finalize');
    }
  });

  it('lets Finalize read only each job’s metrics.jsonl and progress.json and write only its summary and report', () => {
    const s3Statements = roleStatements('LifecycleStepsFinalizeServiceRole').filter((st) =>
      actionsOf([st]).some((a) => a.startsWith('s3:')),
    );
    const keysOf = (action: string) =>
      s3Statements
        .filter((st) => actionsOf([st]).includes(action))
        .flatMap((st) => (Array.isArray(st.Resource) ? st.Resource : [st.Resource]))
        .map((r) => JSON.stringify(r).match(/"(\/[^"]*)"\]\]\}$/)?.[1]);

    expect(actionsOf(s3Statements).sort()).toEqual(['s3:GetObject', 's3:ListBucket', 's3:PutObject']);
    // progress.json: the last sign of an attempt whose Batch job Batch no longer reports (lifecycle/common.ts).
    expect(keysOf('s3:GetObject').sort()).toEqual([
      '/teams/*/jobs/*/metrics/metrics.jsonl',
      '/teams/*/jobs/*/metrics/progress.json',
    ]);
    expect(keysOf('s3:PutObject').sort()).toEqual(['/teams/*/jobs/*/report.html', '/teams/*/jobs/*/summary.json']);
    // Listing the team folders makes a job without metrics.jsonl read as missing, not as AccessDenied.
    const list = s3Statements.find((st) => actionsOf([st]).includes('s3:ListBucket'));
    expect(list?.Condition).toEqual({ StringLike: { 's3:prefix': ['teams/*'] } });
  });
});

describe('Lambda sizing', () => {
  const memoryByDescription = (): Map<string, number> =>
    new Map(
      resourcesOf(s.platformTemplate, 'AWS::Lambda::Function')
        .filter(([, p]) => String(p.Description ?? '').startsWith('Trainyard'))
        .map(([, p]) => [String(p.Description), Number(p.MemorySize)]),
    );

  it('gives the Lambdas that solve spot plans 1024 MiB, the two that unpack a bundle 3072 and the rest 512', () => {
    const memory = memoryByDescription();
    const planners = [...memory].filter(([d]) =>
      /reserve the estimate|classify an ended attempt|every 5 minutes meter running jobs/.test(d),
    );
    expect(planners).toHaveLength(3);
    for (const [description, mib] of planners) expect(mib, description).toBe(1024);
    // The API and Analyze both read a bundle whole and unpack it (up to 1 GiB): Analyze once had the house's 512 MiB,
    // and a bundle the API had taken ran it out of memory.
    const unpackers = [...memory].filter(([d]) => /HTTP API|analyse the code bundle/.test(d));
    expect(unpackers).toHaveLength(2);
    for (const [description, mib] of unpackers) expect(mib, description).toBe(3072);
    const others = [...memory].filter(([d]) => ![...planners, ...unpackers].some(([p]) => p === d));
    expect(others.length).toBeGreaterThanOrEqual(6);
    for (const [description, mib] of others) expect(mib, description).toBe(512);
  });

  it('gives the two that unpack a bundle more memory when the configuration allows larger bundles', () => {
    const large = synthesize({ limits: { maxBundleMiB: 1024 } });
    const unpackers = resourcesOf(large.platformTemplate, 'AWS::Lambda::Function').filter(([, p]) =>
      /HTTP API|analyse the code bundle/.test(String(p.Description)),
    );
    expect(unpackers).toHaveLength(2);
    // An archive of 1 GiB that does not compress: the archive and twice its tar, and 512 MiB of headroom.
    for (const [, p] of unpackers) expect(p.MemorySize).toBe(3 * 1024 + 512);
  });

  it('sizes a function by the handler folder of its entry, relative or absolute', () => {
    expect(handlerOfEntry('lambdas/budget-watch/handler.ts')).toBe('budget-watch');
    expect(handlerOfEntry('/repo/lambdas/cost-gate/handler.ts')).toBe('cost-gate');
    expect(memoryForEntry('/repo/lambdas/attempt-outcome/handler.ts', 500)).toBe(1024);
    expect(memoryForEntry('lambdas/finalize/handler.ts', 500)).toBe(512);
    expect(memoryForEntry('lambdas/analyze/handler.ts', 500)).toBe(3072);
    // A folder that only contains a planning handler's name is not one.
    expect(memoryForEntry('lambdas/cost-gate-report/handler.ts', 500)).toBe(512);
  });
});
