// The EventHandlers construct on a standalone stack: rules, patterns, retries, dead-letter queues, alarms, grants and
// a clean cdk-nag run. Lambda bundling is skipped ('aws:cdk:bundling-stacks': []): no esbuild runs here.
import { Fn, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { JOBS_TABLE } from '../../lambdas/shared/table-design';
import { createApp } from '../../lib/app';
import { parseConfig } from '../../lib/config';
import { EventHandlers, type EventHandlersProps } from '../../lib/lifecycle/event-handlers';
import { actionsOf, BATCH_JOB_ARNS, batchActionsOf, resourcesOf } from './synth';

const QUEUE_ARNS = [
  'arn:aws:batch:us-east-1:123456789012:job-queue/trainyard-gpu-small-spot',
  'arn:aws:batch:us-east-1:123456789012:job-queue/trainyard-gpu-small-on-demand',
];

interface Built {
  stack: Stack;
  template: Template;
  handlers: EventHandlers;
}

function build(overrides: Partial<EventHandlersProps> = {}, withTopic = true): Built {
  const app = createApp({ 'aws:cdk:bundling-stacks': [] });
  const stack = new Stack(app, 'EventHandlersTest');
  // Tables and bucket are imported by export name, as the platform stack receives them from the stateful stack.
  const imported = (name: string) => Fn.importValue(`Trainyard-Test-${name}`);
  const workspace = s3.Bucket.fromBucketAttributes(stack, 'Workspace', {
    bucketArn: imported('WorkspaceBucketArn'),
    bucketName: imported('WorkspaceBucketName'),
  });
  const jobsTable = dynamodb.TableV2.fromTableAttributes(stack, 'Jobs', {
    tableArn: imported('JobsTableArn'),
    globalIndexes: JOBS_TABLE.indexes.map((i) => i.name),
  });
  const budgetsTable = dynamodb.TableV2.fromTableAttributes(stack, 'Budgets', {
    tableArn: imported('BudgetsTableArn'),
  });
  const props: EventHandlersProps = {
    jobsTable,
    budgetsTable,
    workspace,
    eventBus: new events.EventBus(stack, 'Bus'),
    stateMachine: sfn.StateMachine.fromStateMachineArn(
      stack,
      'JobStateMachine',
      'arn:aws:states:us-east-1:123456789012:stateMachine:trainyard-jobs',
    ),
    config: parseConfig({}, 'test config'),
    batchPrefix: 'trainyard',
    logRetention: logs.RetentionDays.ONE_MONTH,
    ...(withTopic
      ? { alertTopic: sns.Topic.fromTopicArn(stack, 'Alerts', 'arn:aws:sns:us-east-1:123456789012:alerts') }
      : {}),
    ...overrides,
  };
  const handlers = new EventHandlers(stack, 'EventHandlers', props);
  return { stack, template: Template.fromStack(stack), handlers };
}

let built: Built;
beforeAll(() => {
  built = build();
});

const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
  built.stack.getLogicalId(construct.node.defaultChild as Parameters<Stack['getLogicalId']>[0]);

function ruleFor(fnLogicalId: string): Record<string, unknown> {
  const found = resourcesOf(built.template, 'AWS::Events::Rule').find(([, p]) =>
    JSON.stringify(p.Targets).includes(fnLogicalId),
  );
  if (!found) throw new Error(`no rule targets ${fnLogicalId}`);
  return found[1];
}

/** A CloudFormation `Fn::Join` of strings and pseudo-parameter `Ref`s, resolved with the given values. */
function resolveArn(value: unknown, refs: Record<string, string>): string {
  const [separator, parts] = (value as { 'Fn::Join': [string, unknown[]] })['Fn::Join'];
  return parts
    .map((part) => (typeof part === 'string' ? part : (refs[(part as { Ref: string }).Ref] ?? '<unresolved>')))
    .join(separator);
}

function policyOf(fnLogicalId: string): unknown[] {
  const fn = built.template.findResources('AWS::Lambda::Function')[fnLogicalId] as {
    Properties: { Role: { 'Fn::GetAtt': [string, string] } };
  };
  const role = fn.Properties.Role['Fn::GetAtt'][0];
  return resourcesOf(built.template, 'AWS::IAM::Policy')
    .filter(([, p]) => JSON.stringify(p.Roles).includes(role))
    .flatMap(([, p]) => (p.PolicyDocument as { Statement: unknown[] }).Statement);
}

describe('EventHandlers rules', () => {
  it('listens for EC2 spot interruption warnings on the default bus', () => {
    const rule = ruleFor(logicalId(built.handlers.interruption.function));
    expect(rule.EventBusName).toBeUndefined();
    expect(rule.EventPattern).toEqual({
      source: ['aws.ec2'],
      'detail-type': ['EC2 Spot Instance Interruption Warning'],
    });
  });

  it('listens for Batch job state changes of Trainyard’s queues only, in the statuses it acts on', () => {
    const rule = ruleFor(logicalId(built.handlers.batchEvents.function));
    expect(rule.EventBusName).toBeUndefined();
    expect(rule.EventPattern).toEqual({
      source: ['aws.batch'],
      'detail-type': ['Batch Job State Change'],
      detail: { jobQueue: [{ prefix: expect.anything() }], status: ['RUNNABLE', 'RUNNING', 'SUCCEEDED', 'FAILED'] },
    });
    // One prefix, this deployment's queues in its own account and region, whatever the number of tiers (a list of
    // every queue's ARN outgrew EventBridge's 2,048-character pattern at about a dozen tiers).
    const pattern = rule.EventPattern as { detail: { jobQueue: Array<{ prefix: unknown }> } };
    const prefix = resolveArn(pattern.detail.jobQueue[0]?.prefix, {
      'AWS::Partition': 'aws',
      'AWS::Region': 'us-east-1',
      'AWS::AccountId': '123456789012',
    });
    expect(prefix).toBe('arn:aws:batch:us-east-1:123456789012:job-queue/trainyard-');
    expect(QUEUE_ARNS.every((arn) => arn.startsWith(prefix))).toBe(true);
    for (const other of [
      'arn:aws:batch:us-east-1:999999999999:job-queue/trainyard-gpu-small-spot',
      'arn:aws:batch:eu-west-1:123456789012:job-queue/trainyard-gpu-small-spot',
      'arn:aws:batch:us-east-1:123456789012:job-queue/other-gpu-small-spot',
    ]) {
      expect(other.startsWith(prefix), other).toBe(false);
    }
  });

  it('listens for the job state machine’s executions that ended without Finalize, with time to wait for a stop', () => {
    const rule = ruleFor(logicalId(built.handlers.executionEnded.function));
    expect(rule.EventBusName).toBeUndefined();
    expect(rule.EventPattern).toEqual({
      source: ['aws.states'],
      'detail-type': ['Step Functions Execution Status Change'],
      detail: {
        stateMachineArn: ['arn:aws:states:us-east-1:123456789012:stateMachine:trainyard-jobs'],
        status: ['FAILED', 'TIMED_OUT', 'ABORTED'],
      },
    });
    built.template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('^Trainyard: a job execution failed'),
      Timeout: 600,
    });
  });

  it('runs budget-watch every 5 minutes, one run at a time, within the interval', () => {
    const rule = ruleFor(logicalId(built.handlers.budgetWatch.function));
    expect(rule.ScheduleExpression).toBe('rate(5 minutes)');
    built.template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('^Trainyard: every 5 minutes'),
      ReservedConcurrentExecutions: 1,
      Timeout: 240,
    });
  });

  it('gives every rule target a retry policy and its own dead-letter queue', () => {
    const targets = resourcesOf(built.template, 'AWS::Events::Rule').map(
      ([, p]) => (p.Targets as Array<Record<string, unknown>>)[0] ?? {},
    );
    expect(targets).toHaveLength(5);
    const queues = new Set(targets.map((t) => JSON.stringify(t.DeadLetterConfig)));
    expect(queues.size).toBe(5);
    expect(targets.map((t) => t.RetryPolicy)).toEqual([
      { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 900 },
      { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86400 },
      { MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 240 },
      { MaximumRetryAttempts: 185, MaximumEventAgeInSeconds: 86400 },
      { MaximumRetryAttempts: 8, MaximumEventAgeInSeconds: 21600 },
    ]);
  });
});

describe('EventHandlers function errors', () => {
  // EventBridge's retry policy covers delivery only; an event the function fails on is retried by Lambda and, without
  // a function dead-letter queue, dropped. Each function's queue is its rule target's.
  it('sends an event the function failed on after two retries to its handler’s dead-letter queue', () => {
    const handlers = [
      built.handlers.interruption,
      built.handlers.batchEvents,
      built.handlers.budgetWatch,
      built.handlers.executionEnded,
      ...(built.handlers.reports ? [built.handlers.reports] : []),
    ];
    expect(handlers).toHaveLength(5);
    const functions = new Map(resourcesOf(built.template, 'AWS::Lambda::Function'));
    const invokeConfigs = resourcesOf(built.template, 'AWS::Lambda::EventInvokeConfig');
    const ages: number[] = [];
    for (const handler of handlers) {
      const fnId = logicalId(handler.function);
      const queueArn = {
        'Fn::GetAtt': [built.stack.getLogicalId(handler.deadLetters.node.defaultChild as never), 'Arn'],
      };
      expect(functions.get(fnId)?.DeadLetterConfig).toEqual({ TargetArn: queueArn });
      expect(JSON.stringify(ruleFor(fnId).Targets)).toContain(JSON.stringify(queueArn));
      const config = invokeConfigs.find(([, p]) => JSON.stringify(p.FunctionName).includes(fnId))?.[1];
      expect(config).toMatchObject({ MaximumRetryAttempts: 2, Qualifier: '$LATEST' });
      ages.push(config?.MaximumEventAgeInSeconds as number);
    }
    // Lambda keeps an event at most 6 hours: the rule targets' longer ages are capped there.
    expect(ages).toEqual([900, 21_600, 240, 21_600, 21_600]);
    built.template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: 'sqs:SendMessage',
            Resource: {
              'Fn::GetAtt': [
                built.stack.getLogicalId(built.handlers.batchEvents.deadLetters.node.defaultChild as never),
                'Arn',
              ],
            },
          }),
        ]),
      },
    });
  });
});

describe('EventHandlers dead-letter queues and alarms', () => {
  it('encrypts every dead-letter queue and refuses non-TLS access', () => {
    built.template.resourceCountIs('AWS::SQS::Queue', 5);
    for (const [, queue] of resourcesOf(built.template, 'AWS::SQS::Queue')) {
      expect(queue).toMatchObject({ SqsManagedSseEnabled: true, MessageRetentionPeriod: 1_209_600 });
    }
    const policies = resourcesOf(built.template, 'AWS::SQS::QueuePolicy');
    const denies = policies.filter(([, p]) =>
      JSON.stringify(p.PolicyDocument).includes('"aws:SecureTransport":"false"'),
    );
    expect(denies).toHaveLength(5);
  });

  it('alarms on any message in a dead-letter queue, notifying the alert topic', () => {
    const alarms = resourcesOf(built.template, 'AWS::CloudWatch::Alarm').filter(
      ([, p]) => p.MetricName === 'ApproximateNumberOfMessagesVisible',
    );
    expect(alarms).toHaveLength(5);
    for (const [, alarm] of alarms) {
      expect(alarm).toMatchObject({
        Namespace: 'AWS/SQS',
        Statistic: 'Maximum',
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
        AlarmActions: ['arn:aws:sns:us-east-1:123456789012:alerts'],
      });
    }
  });

  it('alarms on each function’s errors, notifying the alert topic', () => {
    const alarms = resourcesOf(built.template, 'AWS::CloudWatch::Alarm').filter(([, p]) => p.MetricName === 'Errors');
    expect(alarms).toHaveLength(5);
    for (const [, alarm] of alarms) {
      expect(alarm).toMatchObject({
        Namespace: 'AWS/Lambda',
        Statistic: 'Sum',
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
        AlarmActions: ['arn:aws:sns:us-east-1:123456789012:alerts'],
      });
    }
  });

  it('alarms when budget-watch has not been invoked for three runs in a row, missing data included', () => {
    const alarms = resourcesOf(built.template, 'AWS::CloudWatch::Alarm').filter(
      ([, p]) => p.MetricName === 'Invocations',
    );
    expect(alarms).toHaveLength(1);
    const [, alarm] = alarms[0] as [string, Record<string, unknown>];
    expect(alarm).toMatchObject({
      Namespace: 'AWS/Lambda',
      Statistic: 'Sum',
      Period: 300,
      Threshold: 1,
      ComparisonOperator: 'LessThanThreshold',
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
      TreatMissingData: 'breaching',
      AlarmActions: ['arn:aws:sns:us-east-1:123456789012:alerts'],
    });
    const functionName = (alarm.Dimensions as Array<{ Name: string; Value: { Ref: string } }>)[0];
    expect(functionName?.Name).toBe('FunctionName');
    const watch = resourcesOf(built.template, 'AWS::Lambda::Function').find(([, p]) =>
      String(p.Description).includes('every 5 minutes meter running jobs'),
    );
    expect(functionName?.Value).toEqual({ Ref: watch?.[0] });
    expect(String(alarm.AlarmDescription)).toContain('not invoked for 15 minutes');
  });

  it('creates alarms without actions when no alert topic is given', () => {
    const { template } = build({}, false);
    for (const [, alarm] of resourcesOf(template, 'AWS::CloudWatch::Alarm')) {
      expect(alarm.AlarmActions).toBeUndefined();
    }
    template.resourceCountIs('AWS::CloudWatch::Alarm', 11);
  });
});

describe('EventHandlers grants', () => {
  it('lets interruption and batch-events (a cancelled job’s attempt) terminate Batch jobs only', () => {
    const terminate = {
      Action: 'batch:TerminateJob',
      Effect: 'Allow',
      Resource: BATCH_JOB_ARNS,
    };
    for (const handler of ['interruption', 'batchEvents'] as const) {
      const statements = policyOf(logicalId(built.handlers[handler].function));
      expect(statements).toContainEqual(terminate);
      expect(batchActionsOf(statements)).toEqual(['batch:TerminateJob']);
    }
  });

  it('lets execution-ended end attempts (terminate, describe, list Batch jobs) and finalize as Finalize does', () => {
    const statements = policyOf(logicalId(built.handlers.executionEnded.function));
    expect(statements).toContainEqual({ Action: 'batch:TerminateJob', Effect: 'Allow', Resource: BATCH_JOB_ARNS });
    expect(batchActionsOf(statements)).toEqual(['batch:DescribeJobs', 'batch:ListJobs', 'batch:TerminateJob']);
    const s3 = statements.filter((st) => actionsOf([st]).some((a) => a.startsWith('s3:')));
    const keys = JSON.stringify(s3);
    for (const key of ['metrics/metrics.jsonl', 'metrics/progress.json', 'summary.json', 'report.html']) {
      expect(keys).toContain(key);
    }
    expect(actionsOf(s3).sort()).toEqual(['s3:GetObject', 's3:ListBucket', 's3:PutObject']);
    expect(actionsOf(statements)).toEqual(expect.arrayContaining(['events:PutEvents', 'dynamodb:UpdateItem']));
    expect(actionsOf(statements)).not.toContain('ec2:GetSpotPlacementScores');
  });

  it('lets batch-events and budget-watch (a start whose event never came) describe container instances, instances and spot prices', () => {
    for (const fn of [built.handlers.batchEvents.function, built.handlers.budgetWatch.function]) {
      const statements = policyOf(logicalId(fn));
      // Statements on '*' are merged by CDK (X-Ray's trace writes share it), so look at the actions on '*'.
      const onAnything = statements.filter((st) => (st as { Resource: unknown }).Resource === '*');
      expect(actionsOf(onAnything)).toEqual(
        expect.arrayContaining(['ec2:DescribeInstances', 'ec2:DescribeSpotPriceHistory']),
      );
      expect(statements).toContainEqual(
        expect.objectContaining({
          Action: 'ecs:DescribeContainerInstances',
          Resource: {
            'Fn::Join': [
              '',
              [
                'arn:',
                { Ref: 'AWS::Partition' },
                ':ecs:',
                { Ref: 'AWS::Region' },
                ':',
                { Ref: 'AWS::AccountId' },
                ':container-instance/*',
              ],
            ],
          },
        }),
      );
    }
    const interruptionActions = actionsOf(policyOf(logicalId(built.handlers.interruption.function)));
    expect(interruptionActions.filter((a) => a.startsWith('ec2:') || a.startsWith('ecs:'))).toEqual([]);
    // It announces nothing: AttemptOutcome publishes Job Interrupted when the attempt ends.
    expect(interruptionActions).not.toContain('events:PutEvents');
    const budgetWatchActions = actionsOf(policyOf(logicalId(built.handlers.budgetWatch.function)));
    expect(budgetWatchActions.filter((a) => a.startsWith('ec2:') || a.startsWith('ecs:')).sort()).toEqual([
      'ec2:DescribeInstances',
      'ec2:DescribeSpotPriceHistory',
      'ec2:DescribeSubnets',
      'ec2:GetSpotPlacementScores',
      'ecs:DescribeContainerInstances',
    ]);
  });

  it('lets budget-watch look attempts up in Batch (DescribeJobs, ListJobs) and terminate them, nothing else of Batch', () => {
    const statements = policyOf(logicalId(built.handlers.budgetWatch.function));
    expect(batchActionsOf(statements)).toEqual(['batch:DescribeJobs', 'batch:ListJobs', 'batch:TerminateJob']);
    expect(statements).toContainEqual({ Action: 'batch:TerminateJob', Effect: 'Allow', Resource: BATCH_JOB_ARNS });
  });

  it('tells budget-watch the compute subnets, whose zones alone its spot probe scores', () => {
    const app = createApp({ 'aws:cdk:bundling-stacks': [] });
    const stack = new Stack(app, 'SubnetsOnly');
    const subnets = ['subnet-0aaa1111', 'subnet-0bbb2222'].map((id) => ec2.Subnet.fromSubnetId(stack, id, id));
    const withSubnets = build({ computeSubnets: subnets });

    withSubnets.template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('every 5 minutes meter running jobs'),
      Environment: { Variables: Match.objectLike({ COMPUTE_SUBNET_IDS: 'subnet-0aaa1111,subnet-0bbb2222' }) },
    });
    // Without subnets (the default), the probe scores every zone of the region and the variable is not set.
    const budgetWatch = built.template.findResources('AWS::Lambda::Function', {
      Properties: { Description: Match.stringLikeRegexp('every 5 minutes meter running jobs') },
    });
    const variables = Object.values(budgetWatch).map((r) => r.Properties.Environment.Variables);
    expect(variables).toHaveLength(1);
    expect(variables[0]).not.toHaveProperty('COMPUTE_SUBNET_IDS');
  });

  it('lets only budget-watch read spot placement scores, on any resource (the action has no resource-level permissions)', () => {
    const statements = policyOf(logicalId(built.handlers.budgetWatch.function));
    const onAnything = statements.filter((st) => (st as { Resource: unknown }).Resource === '*');
    expect(actionsOf(onAnything)).toContain('ec2:GetSpotPlacementScores');
    for (const fn of [built.handlers.interruption.function, built.handlers.batchEvents.function]) {
      expect(actionsOf(policyOf(logicalId(fn)))).not.toContain('ec2:GetSpotPlacementScores');
    }
  });

  it('lets budget-watch read only progress.json in the workspace and resume only the job state machine', () => {
    const statements = policyOf(logicalId(built.handlers.budgetWatch.function));
    const s3Resources = statements
      .filter((s) => actionsOf([s]).some((a) => a.startsWith('s3:')))
      .flatMap((s) => (s as { Resource: unknown[] }).Resource);
    expect(JSON.stringify(s3Resources)).toContain('/teams/*/jobs/*/metrics/progress.json');
    expect(JSON.stringify(s3Resources)).not.toContain('"/*"');
    expect(statements).toContainEqual(
      expect.objectContaining({
        Action: 'states:SendTaskSuccess',
        Resource: 'arn:aws:states:us-east-1:123456789012:stateMachine:trainyard-jobs',
      }),
    );
  });

  it('gives the budgets table to budget-watch and, to update what exists, batch-events; no workspace to interruption', () => {
    const budgetsTable = 'Trainyard-Test-BudgetsTableArn';
    expect(JSON.stringify(policyOf(logicalId(built.handlers.budgetWatch.function)))).toContain(String(budgetsTable));
    const batchEvents = policyOf(logicalId(built.handlers.batchEvents.function));
    const onBudgets = batchEvents.filter((s) => JSON.stringify(s).includes(budgetsTable));
    expect(actionsOf(onBudgets)).toContain('dynamodb:UpdateItem');
    expect(actionsOf(onBudgets)).toContain('dynamodb:GetItem');
    expect(actionsOf(onBudgets)).not.toContain('dynamodb:PutItem');
    expect(actionsOf(onBudgets)).not.toContain('dynamodb:DeleteItem');
    expect(JSON.stringify(policyOf(logicalId(built.handlers.interruption.function)))).not.toContain(budgetsTable);
    for (const fn of [built.handlers.interruption.function, built.handlers.batchEvents.function]) {
      expect(JSON.stringify(policyOf(logicalId(fn)))).not.toContain('states:');
    }
    expect(JSON.stringify(policyOf(logicalId(built.handlers.interruption.function)))).not.toContain('s3:');
  });

  it('lets batch-events read an ended job’s summary and metrics and write its summary and report, nothing else', () => {
    const statements = policyOf(logicalId(built.handlers.batchEvents.function));
    const s3 = statements.filter((st) => actionsOf([st]).some((a) => a.startsWith('s3:')));
    const keysOf = (action: string) =>
      JSON.stringify(
        s3.filter((st) => actionsOf([st]).includes(action)).map((st) => (st as { Resource: unknown }).Resource),
      );
    expect(actionsOf(s3).sort()).toEqual(['s3:GetObject', 's3:ListBucket', 's3:PutObject']);
    expect(keysOf('s3:GetObject')).toContain('/teams/*/jobs/*/summary.json');
    expect(keysOf('s3:GetObject')).toContain('/teams/*/jobs/*/metrics/metrics.jsonl');
    expect(keysOf('s3:GetObject')).not.toContain('report.html');
    expect(keysOf('s3:PutObject')).toContain('/teams/*/jobs/*/summary.json');
    expect(keysOf('s3:PutObject')).toContain('/teams/*/jobs/*/report.html');
    expect(keysOf('s3:PutObject')).not.toContain('metrics');
    expect(keysOf('s3:PutObject')).not.toContain('checkpoints');
  });

  it('names the resources each function uses in its environment', () => {
    built.template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('^Trainyard: every 5 minutes'),
      Environment: {
        Variables: Match.objectLike({
          JOBS_TABLE_NAME: Match.anyValue(),
          BUDGETS_TABLE_NAME: Match.anyValue(),
          WORKSPACE_BUCKET_NAME: { 'Fn::ImportValue': 'Trainyard-Test-WorkspaceBucketName' },
          EVENT_BUS_NAME: Match.anyValue(),
          STATE_MACHINE_ARN: 'arn:aws:states:us-east-1:123456789012:stateMachine:trainyard-jobs',
        }),
      },
    });
  });
});

describe('EventHandlers reports', () => {
  const reportRules = (template: Template) =>
    resourcesOf(template, 'AWS::Events::Rule').filter(([, p]) => String(p.Description).includes('showback report'));

  it('runs the weekly showback on Mondays at 01:30 UTC by default, with the report kind and the schedule’s time', () => {
    const rules = reportRules(built.template);
    expect(rules.map(([, p]) => p.ScheduleExpression)).toEqual(['cron(30 1 ? * MON *)']);
    const [weekly] = rules;
    if (!weekly) throw new Error('no weekly report rule');
    const target = (weekly[1].Targets as Array<Record<string, unknown>>)[0];
    expect(target?.InputTransformer).toEqual({
      InputPathsMap: { time: '$.time' },
      InputTemplate: '{"report":"weekly","time":<time>}',
    });
    built.template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('^Trainyard: weekly showback reports'),
      Timeout: 600,
    });
  });

  it('adds the daily schedule when configured, and no function at all when neither is', () => {
    const both = build({ config: parseConfig({ reports: { daily: true } }, 'test config') });
    expect(reportRules(both.template).map(([, p]) => p.ScheduleExpression)).toEqual([
      'cron(0 1 * * ? *)',
      'cron(30 1 ? * MON *)',
    ]);
    const none = build({ config: parseConfig({ reports: { weekly: false } }, 'test config') });
    expect(none.handlers.reports).toBeUndefined();
    expect(reportRules(none.template)).toEqual([]);
    none.template.resourceCountIs('AWS::Lambda::Function', 4);
  });

  it('lets reports read jobs, put only its records, write only under reports/ and put events', () => {
    const reports = built.handlers.reports?.function;
    if (!reports) throw new Error('the default configuration has a weekly report');
    const statements = policyOf(logicalId(reports));
    const actions = actionsOf(statements);
    expect(actions.filter((a) => a.startsWith('s3:'))).toEqual(['s3:PutObject']);
    expect(JSON.stringify(statements.filter((s) => actionsOf([s]).includes('s3:PutObject')))).toContain('/reports/*"');
    expect(actions).toContain('dynamodb:PutItem');
    expect(actions).toContain('dynamodb:Query');
    expect(actions).not.toContain('dynamodb:UpdateItem');
    expect(actions).not.toContain('dynamodb:DeleteItem');
    expect(actions).toContain('events:PutEvents');
    expect(JSON.stringify(statements)).not.toContain('BudgetsTableArn');
  });
});

describe('EventHandlers props and cdk-nag', () => {
  it('refuses a batch prefix that cannot prefix a queue name', () => {
    expect(() => build({ batchPrefix: 'Trainyard_' })).toThrow(
      `batchPrefix must be 1-40 characters of a-z, 0-9 and '-', starting with a letter (it prefixes Batch queue names), got "Trainyard_"`,
    );
  });

  it('acknowledges IAM findings only by their exact id, each with a reason', () => {
    const acks = built.handlers.node.findAll().flatMap((c) =>
      c.node.metadata
        .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
        .flatMap((m) => Object.entries(m.data as Record<string, string>))
        .map(([id, reason]) => ({ id: id.replace(/^Annotation::/, ''), reason })),
    );
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.reason.length, ack.id).toBeGreaterThan(20);
      if (/AwsSolutions-IAM[45]/.test(ack.id)) {
        expect(ack.id).toMatch(/^AwsSolutions-IAM[45]\[(Resource|Action|Policy)::.+\]$/);
      }
    }
  });

  it('reports no unacknowledged cdk-nag findings', () => {
    const { stack } = build();
    const violations = new AwsSolutionsChecks().validateScope(stack).violations;
    expect(violations.map((v) => v.ruleName)).toEqual([]);
  });
});
