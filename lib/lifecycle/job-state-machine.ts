import { Duration, Stack } from 'aws-cdk-lib';
import type * as batch from 'aws-cdk-lib/aws-batch';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as tasks from 'aws-cdk-lib/aws-stepfunctions-tasks';
import { Construct } from 'constructs';
import { DYNAMODB_TRANSIENT_ERRORS } from '../../lambdas/shared/dynamo';
import { acknowledgeFinding, nagResourceName } from '../nag';

/** The Lambda behind each Task of the job lifecycle. */
export interface LifecycleSteps {
  readonly analyze: lambda.IFunction;
  readonly costGate: lambda.IFunction;
  readonly prepareAttempt: lambda.IFunction;
  readonly attemptOutcome: lambda.IFunction;
  readonly pause: lambda.IFunction;
  readonly backoff: lambda.IFunction;
  readonly finalize: lambda.IFunction;
}

/** Props for the job state machine. */
export interface JobStateMachineProps {
  /** The step functions. */
  readonly steps: LifecycleSteps;
  /** Queues attempts are submitted to (SubmitJob is granted on exactly these). */
  readonly jobQueues: readonly batch.IJobQueue[];
  /** Prefix of the platform's job definition names (SubmitJob is granted on `job-definition/<prefix>-*`). */
  readonly jobDefinitionPrefix: string;
  /** Execution log retention. */
  readonly logRetention: logs.RetentionDays;
  /** Where the failed-executions alarm notifies. @default - the alarm notifies no one */
  readonly alertTopic?: sns.ITopic;
}

/**
 * How a Lambda step rides out throttling and a service that is briefly unavailable: Lambda throttling the invoke, or
 * DynamoDB, S3, EventBridge or Batch answering so past the client's own retries (the step then fails under the
 * service's error name), or DynamoDB out of reach, answering garbage or failing with a 5xx of no type through all of
 * its client's attempts (lambdas/shared/dynamo.ts). 2 s doubling up to 2 minutes apart, 10 times: about 10 minutes. A wave of spot reclaims can throttle
 * for longer than STEP_RETRY's 14 s, and a resumable job must not end FAILED for it. Listed before STEP_RETRY, whose
 * States.TaskFailed would otherwise match these first.
 */
export const TRANSIENT_RETRY: sfn.RetryProps = {
  errors: [
    'Lambda.TooManyRequestsException',
    'ThrottlingException',
    'Throttling',
    'TooManyRequestsException',
    'ProvisionedThroughputExceededException',
    'RequestLimitExceeded',
    'SlowDown',
    'ServiceUnavailable',
    'ServiceUnavailableException',
    'InternalServerError',
    'InternalFailure',
    'EventDeliveryFailed',
    ...DYNAMODB_TRANSIENT_ERRORS,
  ],
  interval: Duration.seconds(2),
  maxAttempts: 10,
  backoffRate: 2,
  maxDelay: Duration.minutes(2),
};

/** How a Lambda step retries any other failure and the optimistic-concurrency conflicts: after 2 s, 4 s and 8 s. */
export const STEP_RETRY: sfn.RetryProps = {
  errors: ['States.TaskFailed', 'ConcurrentUpdate', 'JobStateConflict', 'AnalysisError'],
  interval: Duration.seconds(2),
  maxAttempts: 3,
  backoffRate: 2,
};

/**
 * How Finalize retries. It settles the ledger and ends the job, and nothing after it would: a Finalize that gave up
 * would leave the job's reservation held and the job in a live state. Any error is retried 12 times, 2 s doubling
 * up to 5 minutes apart (about 28 minutes in all); past that the execution fails, the failed-executions alarm fires
 * and the execution can be redriven from Finalize (docs/operations.md).
 */
export const FINALIZE_RETRY: sfn.RetryProps = {
  errors: ['States.ALL'],
  interval: Duration.seconds(2),
  maxAttempts: 12,
  backoffRate: 2,
  maxDelay: Duration.minutes(5),
};

/**
 * How AttemptOutcome waits for an attempt Batch ran although its task failed (SubmitJob's error after Batch created
 * the job, a lost poll), and Finalize for an attempt still in Batch when the job ends (AttemptOutcome failed): each
 * terminates the job and throws AttemptsStillRunning until Batch reports the job ended. 30 s growing 1.5× up to 5
 * minutes apart, 12 times: about 40 minutes, well past Batch's stop of a container that checkpoints on SIGTERM.
 * Listed before STEP_RETRY and FINALIZE_RETRY, whose States.TaskFailed and States.ALL would otherwise match it first.
 */
export const ATTEMPT_STOP_RETRY: sfn.RetryProps = {
  errors: ['AttemptsStillRunning'],
  interval: Duration.seconds(30),
  maxAttempts: 12,
  backoffRate: 1.5,
  maxDelay: Duration.minutes(5),
};

/**
 * State names are part of the contract: local mode binds its handlers to Tasks by name, and the API and tests read
 * execution histories by them.
 */
export const STATE_NAMES = {
  analyze: 'Analyze',
  afterAnalyze: 'AfterAnalyze',
  costGate: 'CostGate',
  afterCostGate: 'AfterCostGate',
  prepareAttempt: 'PrepareAttempt',
  afterPrepare: 'AfterPrepare',
  runAttempt: 'RunAttempt',
  runMultiNodeAttempt: 'RunMultiNodeAttempt',
  attemptOutcome: 'AttemptOutcome',
  nextStep: 'NextStep',
  backoff: 'Backoff',
  pausedForBudget: 'PausedForBudget',
  stepFailed: 'StepFailed',
  finalize: 'Finalize',
  done: 'Done',
} as const;

/**
 * One Standard execution per job (named by job id): Analyze → CostGate → PrepareAttempt → RunAttempt
 * (batch:submitJob.sync) → AttemptOutcome → loop (resume, fall back, retry after backoff), pause for budget, or
 * Finalize. Lambdas decide and return where to go next; Choice states route on `$.next`. Logging ALL, X-Ray tracing.
 */
export class JobStateMachine extends Construct {
  /** The state machine. */
  public readonly stateMachine: sfn.StateMachine;
  /** Fires when an execution fails: a job's lifecycle stopped before it ended and settled. */
  public readonly failedExecutionsAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: JobStateMachineProps) {
    super(scope, id);
    const n = STATE_NAMES;
    const step = (name: string, fn: lambda.IFunction, ...retries: sfn.RetryProps[]) => {
      const task = new tasks.LambdaInvoke(this, name, {
        lambdaFunction: fn,
        payloadResponseOnly: true,
        retryOnServiceExceptions: true,
      });
      for (const retry of retries.length > 0 ? retries : [TRANSIENT_RETRY, STEP_RETRY]) task.addRetry(retry);
      return task;
    };
    const nextIs = (value: string) => sfn.Condition.stringEquals('$.next', value);

    const done = new sfn.Succeed(this, n.done);
    const finalize = step(n.finalize, props.steps.finalize, ATTEMPT_STOP_RETRY, FINALIZE_RETRY).next(done);
    // A step that keeps failing ends the job, with the ledger settled, rather than leaving it dangling. No final state
    // is passed: Finalize takes it from the records (SUCCEEDED when the newest attempt succeeded, CANCELLED when a
    // cancel was asked for, else FAILED), as the execution-ended rule does.
    const stepFailed = new sfn.Pass(this, n.stepFailed, {
      parameters: { 'jobId.$': '$.jobId', 'reason.$': '$.failure.Cause' },
    }).next(finalize);
    const guarded = (task: sfn.TaskStateBase) => task.addCatch(stepFailed, { resultPath: '$.failure' });

    const attemptOutcome = guarded(
      step(n.attemptOutcome, props.steps.attemptOutcome, ATTEMPT_STOP_RETRY, TRANSIENT_RETRY, STEP_RETRY),
    );
    const submitJob = (name: string, overrides: Record<string, string>) =>
      new sfn.CustomState(this, name, {
        stateJson: {
          Type: 'Task',
          Resource: `arn:${Stack.of(this).partition}:states:::batch:submitJob.sync`,
          Parameters: {
            'JobName.$': '$.submit.JobName',
            'JobQueue.$': '$.submit.JobQueue',
            'JobDefinition.$': '$.submit.JobDefinition',
            'ShareIdentifier.$': '$.submit.ShareIdentifier',
            'Timeout.$': '$.submit.Timeout',
            'Tags.$': '$.submit.Tags',
            PropagateTags: true,
            ...overrides,
          },
          ResultPath: '$.batch',
          // Only members a finished job always has: a path the output lacks fails the execution (States.Runtime,
          // which no Catch takes), and the API reference leaves jobArn and createdAt optional (nothing reads them).
          ResultSelector: {
            'JobId.$': '$.JobId',
            'JobName.$': '$.JobName',
            'JobQueue.$': '$.JobQueue',
            'JobDefinition.$': '$.JobDefinition',
            'Status.$': '$.Status',
            'StartedAt.$': '$.StartedAt',
            'StoppedAt.$': '$.StoppedAt',
            'Attempts.$': '$.Attempts',
          },
        },
      })
        .addCatch(attemptOutcome, { errors: ['States.ALL'], resultPath: '$.batchError' })
        .next(attemptOutcome);
    const runAttempt = submitJob(n.runAttempt, { 'ContainerOverrides.$': '$.submit.ContainerOverrides' });
    const runMultiNode = submitJob(n.runMultiNodeAttempt, {
      'NodeOverrides.$': '$.submit.NodeOverrides',
    });

    const prepareAttempt = guarded(step(n.prepareAttempt, props.steps.prepareAttempt));
    // The wait before a retry, as a Task that waits on its token and times out after the delay (not a Wait state, which
    // nothing can cut short): a cancel sends the token task success, and the job ends at once instead of up to an hour
    // later. Either way the next step is PrepareAttempt, which honours the cancel or starts the attempt.
    const backoff = new tasks.LambdaInvoke(this, n.backoff, {
      lambdaFunction: props.steps.backoff,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({
        'jobId.$': '$.jobId',
        'delaySeconds.$': '$.plan.delaySeconds',
        taskToken: sfn.JsonPath.taskToken,
      }),
      taskTimeout: sfn.Timeout.at('$.plan.delaySeconds'),
      resultPath: sfn.JsonPath.DISCARD,
    })
      .addRetry(TRANSIENT_RETRY)
      .addRetry(STEP_RETRY)
      // The delay is over. Caught before the catch-all: States.ALL matches States.Timeout too.
      .addCatch(prepareAttempt, { errors: [sfn.Errors.TIMEOUT], resultPath: sfn.JsonPath.DISCARD })
      .addCatch(stepFailed, { resultPath: '$.failure' })
      .next(prepareAttempt);
    const pausedForBudget = new tasks.LambdaInvoke(this, n.pausedForBudget, {
      lambdaFunction: props.steps.pause,
      integrationPattern: sfn.IntegrationPattern.WAIT_FOR_TASK_TOKEN,
      payload: sfn.TaskInput.fromObject({ 'jobId.$': '$.jobId', taskToken: sfn.JsonPath.taskToken }),
      resultPath: '$.resume',
    })
      // A pause that failed once (PutEvents throttled, a DynamoDB hiccup) is tried again with a new token, rather
      // than ending a paused job as FAILED.
      .addRetry(TRANSIENT_RETRY)
      .addRetry(STEP_RETRY)
      .addCatch(stepFailed, { resultPath: '$.failure' })
      .next(prepareAttempt);
    prepareAttempt.next(
      new sfn.Choice(this, n.afterPrepare)
        .when(nextIs('finalize'), finalize)
        .when(nextIs('pause'), pausedForBudget)
        .when(sfn.Condition.booleanEquals('$.multiNode', true), runMultiNode)
        .otherwise(runAttempt),
    );
    attemptOutcome.next(
      new sfn.Choice(this, n.nextStep)
        .when(nextIs('finalize'), finalize)
        .when(nextIs('pause'), pausedForBudget)
        .when(nextIs('wait'), backoff)
        .otherwise(prepareAttempt),
    );

    const costGate = guarded(step(n.costGate, props.steps.costGate)).next(
      new sfn.Choice(this, n.afterCostGate).when(nextIs('finalize'), finalize).otherwise(prepareAttempt),
    );
    const analyze = guarded(step(n.analyze, props.steps.analyze)).next(
      new sfn.Choice(this, n.afterAnalyze).when(nextIs('finalize'), finalize).otherwise(costGate),
    );

    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(analyze),
      comment: 'Trainyard job lifecycle: one execution per job, named by job id',
      tracingEnabled: true,
      logs: {
        destination: new logs.LogGroup(this, 'ExecutionLogs', { retention: props.logRetention }),
        level: sfn.LogLevel.ALL,
        includeExecutionData: true,
      },
    });
    this.failedExecutionsAlarm = new cloudwatch.Alarm(this, 'ExecutionsFailedAlarm', {
      alarmDescription:
        'Trainyard lifecycle: a job execution failed, was aborted or timed out before its Finalize completed; the job may still hold its budget reservation and show a live state (runbook: docs/operations.md, "Failed executions")',
      // Failed, aborted (stopped by hand) or timed out: each ends a job's execution before its Finalize completed.
      // Step Functions publishes each metric only for a period it counted something in, and a sum of series has no
      // value where any of them has none: unfilled, one failure with no abort or time-out beside it would sum to
      // nothing, and the alarm (missing data: not breaching) would stay quiet.
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(failed, 0) + FILL(aborted, 0) + FILL(timedOut, 0)',
        label: 'Executions failed, aborted or timed out',
        period: Duration.minutes(5),
        usingMetrics: {
          failed: this.stateMachine.metricFailed({ statistic: cloudwatch.Stats.SUM }),
          aborted: this.stateMachine.metricAborted({ statistic: cloudwatch.Stats.SUM }),
          timedOut: this.stateMachine.metricTimedOut({ statistic: cloudwatch.Stats.SUM }),
        },
      }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (props.alertTopic) this.failedExecutionsAlarm.addAlarmAction(new cloudwatchActions.SnsAction(props.alertTopic));
    this.grantBatchIntegration(props);
    // Pause and Backoff end a wait of their own execution (a cancel or a resume that came before the token was stored)
    // with SendTaskSuccess, on this state machine alone. The grant is a policy of its own, not the roles' default
    // policy: a function waits for its default policy, and this state machine for the functions.
    const taskResponse = new iam.Policy(this, 'StepsTaskResponse', {
      statements: [
        new iam.PolicyStatement({
          actions: ['states:SendTaskSuccess'],
          resources: [this.stateMachine.stateMachineArn],
        }),
      ],
    });
    for (const fn of [props.steps.pause, props.steps.backoff]) {
      if (fn.role) taskResponse.attachToRole(fn.role);
    }
    const s = props.steps;
    for (const fn of [s.analyze, s.costGate, s.prepareAttempt, s.attemptOutcome, s.pause, s.backoff, s.finalize]) {
      acknowledgeFinding(
        this.stateMachine.role,
        `IAM5[Resource::${nagResourceName(this, fn.functionArn)}:*]`,
        'LambdaInvoke may call any version or alias of its own step function.',
      );
    }
  }

  /** What `batch:submitJob.sync` needs: SubmitJob on our queues and definitions, plus its managed rule. */
  private grantBatchIntegration(props: JobStateMachineProps): void {
    const stack = Stack.of(this);
    const role = this.stateMachine.role;
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'SubmitAttempts',
        actions: ['batch:SubmitJob', 'batch:TagResource'],
        resources: [
          ...props.jobQueues.map((q) => q.jobQueueArn),
          stack.formatArn({
            service: 'batch',
            resource: 'job-definition',
            resourceName: `${props.jobDefinitionPrefix}-*`,
          }),
          stack.formatArn({ service: 'batch', resource: 'job', resourceName: '*' }),
        ],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({ sid: 'TrackAttempts', actions: ['batch:DescribeJobs'], resources: ['*'] }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'StopAttempts',
        actions: ['batch:TerminateJob'],
        resources: [stack.formatArn({ service: 'batch', resource: 'job', resourceName: '*' })],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'BatchSyncRule',
        actions: ['events:PutTargets', 'events:PutRule', 'events:DescribeRule'],
        resources: [
          stack.formatArn({
            service: 'events',
            resource: 'rule',
            resourceName: 'StepFunctionsGetEventsForBatchJobsRule',
          }),
        ],
      }),
    );
    const arn = (resource: string) => `arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:${resource}`;
    acknowledgeFinding(
      role,
      `IAM5[Resource::${arn(`job-definition/${props.jobDefinitionPrefix}-*`)}]`,
      'SubmitJob on the platform’s own job definitions (every revision, named by prefix).',
    );
    acknowledgeFinding(
      role,
      `IAM5[Resource::${arn('job/*')}]`,
      'Batch names the job it creates at submit time; the queue and definition already confine it.',
    );
    acknowledgeFinding(
      role,
      'IAM5[Resource::*]',
      'batch:DescribeJobs (how the .sync integration follows a job) has no resource-level permissions.',
    );
  }
}
