import { Duration, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import { REPORT_KINDS, REPORT_SCHEDULE, type ReportKind } from '../../lambdas/domain/showback';
import { jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { ENV } from '../../lambdas/shared/aws-control-plane';
import {
  BATCH_STATE_CHANGE_DETAIL_TYPE,
  EXECUTION_END_STATUSES,
  EXECUTION_STATUS_CHANGE_DETAIL_TYPE,
  SPOT_INTERRUPTION_DETAIL_TYPE,
} from '../../lambdas/shared/event-schemas';
import type { TrainyardConfig } from '../config';
import { TrainyardFunction } from '../function';
import {
  finalizerObjects,
  grantBudgetsByTeam,
  grantJobObjects,
  grantStartPricing,
  grantTableReads,
  grantTableReadWrites,
} from '../grants';
import { acknowledgeFinding, nagResourceName } from '../nag';

/** Props of the event-driven handlers. */
export interface EventHandlersProps {
  /** Jobs table (attempts, decisions; the byInstance and byTeam indexes). */
  readonly jobsTable: dynamodb.ITableV2;
  /** Budgets table (budget-watch accrues and reads usage). */
  readonly budgetsTable: dynamodb.ITableV2;
  /** Workspace bucket (budget-watch reads each job's metrics/progress.json). */
  readonly workspace: s3.IBucket;
  /** The platform bus the handlers put Trainyard events on. */
  readonly eventBus: events.IEventBus;
  /** The job state machine (budget-watch resumes paused jobs with SendTaskSuccess). */
  readonly stateMachine: sfn.IStateMachine;
  /** Resolved configuration (tiers, teams, budgets, spot policy), baked into the functions. */
  readonly config: TrainyardConfig;
  /**
   * Prefix of Batch queue and job definition names. The Batch rule listens to the queues it starts (`<prefix>-…` in
   * this account and region): one prefix, where a list of every queue's ARN outgrew EventBridge's 2,048-character
   * event pattern at about a dozen tiers.
   */
  readonly batchPrefix: string;
  /** Retention of the functions' logs. */
  readonly logRetention: logs.RetentionDays;
  /** Topic the alarms notify. @default - alarms with no actions (visible in the console only) */
  readonly alertTopic?: sns.ITopic;
  /**
   * Subnets the compute environments launch into: budget-watch's spot probe scores only their Availability Zones.
   * @default - the probe scores every zone of the region
   */
  readonly computeSubnets?: readonly ec2.ISubnet[];
}

/** One event-driven function with its rules, dead-letter queue and alarms. */
export interface EventHandler {
  readonly function: TrainyardFunction;
  /** The rules that invoke it (one, except for the reports' daily and weekly schedules). */
  readonly rules: events.Rule[];
  readonly deadLetters: sqs.Queue;
  readonly deadLetterAlarm: cloudwatch.Alarm;
  readonly errorsAlarm: cloudwatch.Alarm;
}

/** Batch statuses the batch-events handler acts on (RUNNABLE records the Batch job id; the others start/stop). */
export const BATCH_STATUSES_HANDLED = ['RUNNABLE', 'RUNNING', 'SUCCEEDED', 'FAILED'] as const;

/** Retries of an event the function failed on: Lambda's asynchronous maximum (1 and 2 minutes after the failure). */
export const FUNCTION_ERROR_RETRIES = 2;
/** The longest Lambda keeps an asynchronous event (for function errors and throttles) before the dead-letter queue. */
export const MAX_ASYNC_EVENT_AGE = Duration.hours(6);

/** How often budget-watch runs. */
export const BUDGET_WATCH_INTERVAL = Duration.minutes(5);
/** The budget watch's timeout: under BUDGET_WATCH_INTERVAL, so runs do not overlap. */
export const BUDGET_WATCH_TIMEOUT = Duration.minutes(4);
/** Runs in a row without an invocation after which BudgetWatchSilentAlarm fires (15 minutes). */
export const BUDGET_WATCH_SILENT_PERIODS = 3;

/** The scheduled showback reports' EventBridge schedules, from domain/showback.ts REPORT_SCHEDULE (UTC). */
export const REPORT_SCHEDULES = Object.fromEntries(
  REPORT_KINDS.map((kind) => {
    const { hour, minute, monday } = REPORT_SCHEDULE[kind];
    const at = { minute: String(minute), hour: String(hour) };
    return [kind, events.Schedule.cron(monday ? { ...at, weekDay: 'MON' } : at)];
  }),
) as Record<ReportKind, events.Schedule>;
/** The execution-ended timeout: above its wait for terminated attempts to end (ATTEMPT_STOP_WAIT_MS, 8 minutes). */
export const EXECUTION_ENDED_TIMEOUT = Duration.minutes(10);

/** The reports' timeout: one run reads every team's jobs of the period and writes their reports. */
export const REPORTS_TIMEOUT = Duration.minutes(10);

/**
 * The EventBridge-driven Lambdas: interruption (EC2 spot interruption warnings on the default bus), batch-events
 * (Batch job state changes of Trainyard's queues, default bus), budget-watch (every 5 minutes) and, when
 * `config.reports` asks for a schedule, reports (the daily and weekly showback).
 * Each rule target has a retry policy and an encrypted, SSL-only dead-letter queue, which is also where Lambda puts an
 * event the function still failed on after FUNCTION_ERROR_RETRIES (EventBridge's retries cover delivery only); an
 * alarm fires when a DLQ holds a message and when a function reports errors.
 *
 * Grants, and why each is as wide as it is:
 * - jobs table read/write for all three (the L2 grant includes the table's indexes: byInstance, byTeam);
 *   budgets table read/write and workspace read of `teams/<team>/jobs/<job>/metrics/progress.json` for budget-watch;
 *   for batch-events, budgets read and UpdateItem (charging a recorded cost), and each job's summary.json and
 *   metrics.jsonl read and summary.json and report.html written (an ended job's files rewritten with that cost);
 * - events:PutEvents on the platform bus only; states:SendTaskSuccess on the job state machine only;
 * - batch:TerminateJob on this account and region's job ARNs: Batch assigns job ids at submit (acknowledged);
 * - for batch-events, and budget-watch recording a start whose event never came, ecs:DescribeContainerInstances on
 *   this account and region's container instances (Batch names the clusters); ec2:DescribeInstances and
 *   ec2:DescribeSpotPriceHistory, which have no resource-level permissions (acknowledged);
 * - for budget-watch, batch:DescribeJobs and batch:ListJobs (looking up an attempt whose start went unrecorded),
 *   ec2:GetSpotPlacementScores (the spot probe of on-demand deadline jobs) and ec2:DescribeSubnets (the zones of the
 *   compute subnets it scores), which have no resource-level permissions either (acknowledged).
 */
export class EventHandlers extends Construct {
  /** EC2 spot interruption warnings → TerminateJob, record the notice. */
  public readonly interruption: EventHandler;
  /** Batch job state changes → attempt records, instance and price, cost, Job Started. */
  public readonly batchEvents: EventHandler;
  /** Every 5 minutes → progress, accrual, thresholds, budget stops, placement moves, resumes. */
  public readonly budgetWatch: EventHandler;
  /** Fires when budget-watch has not been invoked for BUDGET_WATCH_SILENT_PERIODS runs in a row. */
  public readonly budgetWatchSilentAlarm: cloudwatch.Alarm;
  /** A job execution failed, timed out or was stopped → its attempts ended and recorded, the job finalized. */
  public readonly executionEnded: EventHandler;
  /** Daily and/or weekly → showback reports to the workspace, Cost Report Ready; absent when neither is configured. */
  public readonly reports?: EventHandler;

  constructor(scope: Construct, id: string, props: EventHandlersProps) {
    super(scope, id);
    if (!/^[a-z][a-z0-9-]{0,39}$/.test(props.batchPrefix)) {
      throw new Error(
        `batchPrefix must be 1-40 characters of a-z, 0-9 and '-', starting with a letter (it prefixes Batch queue names), got "${props.batchPrefix}"`,
      );
    }

    this.interruption = this.handler('Interruption', props, {
      entry: 'lambdas/interruption/handler.ts',
      description: 'Trainyard: spot interruption warning → stop the attempt so it checkpoints, record the notice',
      environment: { [ENV.jobsTable]: props.jobsTable.tableName },
      rules: [
        {
          description: 'EC2 spot interruption warnings (any instance; the handler ignores instances it does not know)',
          eventPattern: { source: ['aws.ec2'], detailType: [SPOT_INTERRUPTION_DETAIL_TYPE] },
        },
      ],
      // A notice is useful for two minutes; record it late rather than never, but not after the attempt is over.
      retry: { retryAttempts: 8, maxEventAge: Duration.minutes(15) },
    });

    this.batchEvents = this.handler('BatchEvents', props, {
      entry: 'lambdas/batch-events/handler.ts',
      description: 'Trainyard: Batch job state change → attempt start/stop, instance, price, cost, Job Started',
      environment: {
        [ENV.jobsTable]: props.jobsTable.tableName,
        [ENV.budgetsTable]: props.budgetsTable.tableName,
        [ENV.workspaceBucket]: props.workspace.bucketName,
        [ENV.eventBus]: props.eventBus.eventBusName,
      },
      rules: [
        {
          description: 'Batch job state changes of Trainyard queues',
          eventPattern: {
            source: ['aws.batch'],
            detailType: [BATCH_STATE_CHANGE_DETAIL_TYPE],
            detail: {
              // A queue of another deployment whose prefix starts with this one's (`trainyard-dev-…`) matches too;
              // the handler ignores its jobs, which name no attempt in this deployment's table.
              jobQueue: events.Match.prefix(
                Stack.of(this).formatArn({
                  service: 'batch',
                  resource: 'job-queue',
                  resourceName: `${props.batchPrefix}-`,
                }),
              ),
              status: [...BATCH_STATUSES_HANDLED],
            },
          },
        },
      ],
      // Start and stop times are billing records: keep delivering for longer than an outage is likely to last. (An
      // event the function fails on gets Lambda's two retries, 1 and 2 minutes later; a throttled one is kept up to
      // 6 hours; then it waits in the dead-letter queue for a replay.)
      retry: { retryAttempts: 185, maxEventAge: Duration.hours(24) },
    });

    this.budgetWatch = this.handler('BudgetWatch', props, {
      entry: 'lambdas/budget-watch/handler.ts',
      description:
        'Trainyard: every 5 minutes meter running jobs, enforce budgets, check placement, resume paused jobs',
      environment: {
        [ENV.jobsTable]: props.jobsTable.tableName,
        [ENV.budgetsTable]: props.budgetsTable.tableName,
        [ENV.workspaceBucket]: props.workspace.bucketName,
        [ENV.eventBus]: props.eventBus.eventBusName,
        [ENV.stateMachine]: props.stateMachine.stateMachineArn,
        ...(props.computeSubnets?.length
          ? { [ENV.computeSubnets]: props.computeSubnets.map((subnet) => subnet.subnetId).join(',') }
          : {}),
      },
      timeout: BUDGET_WATCH_TIMEOUT,
      rules: [
        {
          description: 'Budget watch and periodic placement check',
          schedule: events.Schedule.rate(BUDGET_WATCH_INTERVAL),
        },
      ],
      // A tick older than the next one is worth nothing: the next run recomputes everything.
      retry: { retryAttempts: 2, maxEventAge: Duration.minutes(4) },
    });
    // One run at a time: decisions are numbered by reading the job's log, and two runs would race for numbers.
    (this.budgetWatch.function.node.defaultChild as lambda.CfnFunction).reservedConcurrentExecutions = 1;
    // Metering, budget stops and placement checks all ride on this schedule: a watch that stops running (a disabled
    // rule, a throttled function) is as dangerous as one that fails, and raises no error.
    this.budgetWatchSilentAlarm = new cloudwatch.Alarm(this, 'BudgetWatchSilentAlarm', {
      alarmDescription: `Trainyard BudgetWatch: not invoked for ${BUDGET_WATCH_SILENT_PERIODS * BUDGET_WATCH_INTERVAL.toMinutes()} minutes; running jobs are not metered, budgets not enforced and placement not checked until it runs again`,
      metric: this.budgetWatch.function.metricInvocations({
        period: BUDGET_WATCH_INTERVAL,
        statistic: cloudwatch.Stats.SUM,
      }),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: BUDGET_WATCH_SILENT_PERIODS,
      datapointsToAlarm: BUDGET_WATCH_SILENT_PERIODS,
      // Lambda publishes no Invocations datapoint for a period without invocations: missing is the silence itself.
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
    });
    if (props.alertTopic) this.budgetWatchSilentAlarm.addAlarmAction(new cloudwatchActions.SnsAction(props.alertTopic));

    this.executionEnded = this.handler('ExecutionEnded', props, {
      entry: 'lambdas/execution-ended/handler.ts',
      description:
        'Trainyard: a job execution failed, timed out or was stopped → stop its attempt, settle the ledger, finalize',
      environment: {
        [ENV.jobsTable]: props.jobsTable.tableName,
        [ENV.budgetsTable]: props.budgetsTable.tableName,
        [ENV.workspaceBucket]: props.workspace.bucketName,
        [ENV.eventBus]: props.eventBus.eventBusName,
      },
      timeout: EXECUTION_ENDED_TIMEOUT,
      rules: [
        {
          description: 'Job executions that ended without Finalize (failed, timed out, stopped)',
          eventPattern: {
            source: ['aws.states'],
            detailType: [EXECUTION_STATUS_CHANGE_DETAIL_TYPE],
            detail: { stateMachineArn: [props.stateMachine.stateMachineArn], status: [...EXECUTION_END_STATUSES] },
          },
        },
      ],
      // Until it runs the job's reservation stays held: keep delivering through an outage.
      retry: { retryAttempts: 185, maxEventAge: Duration.hours(24) },
    });

    const kinds = REPORT_KINDS.filter((kind) => props.config.reports[kind]);
    if (kinds.length > 0) {
      this.reports = this.handler('Reports', props, {
        entry: 'lambdas/reports/handler.ts',
        description: `Trainyard: ${kinds.join(' and ')} showback reports per team, user, project and tier → workspace reports/, Cost Report Ready`,
        environment: {
          [ENV.jobsTable]: props.jobsTable.tableName,
          [ENV.workspaceBucket]: props.workspace.bucketName,
          [ENV.eventBus]: props.eventBus.eventBusName,
        },
        timeout: REPORTS_TIMEOUT,
        rules: kinds.map((kind) => ({
          id: kind === 'daily' ? 'Daily' : 'Weekly',
          description: `The ${kind} showback report`,
          schedule: REPORT_SCHEDULES[kind],
          // The report and the schedule's own time, so a redelivered run reports the same period.
          input: events.RuleTargetInput.fromObject({ report: kind, time: events.EventField.time }),
        })),
        // A report a day late is still the report: keep retrying through a short outage.
        retry: { retryAttempts: 8, maxEventAge: Duration.hours(6) },
      });
    }

    this.grant(props);
  }

  private handler(
    id: string,
    props: EventHandlersProps,
    spec: {
      entry: string;
      description: string;
      environment: Record<string, string>;
      timeout?: Duration;
      rules: Array<{
        /** Suffix of the rule's id when a function has several rules. */
        id?: string;
        description: string;
        eventPattern?: events.EventPattern;
        schedule?: events.Schedule;
        /** What the target receives instead of the event. */
        input?: events.RuleTargetInput;
      }>;
      retry: { retryAttempts: number; maxEventAge: Duration };
    },
  ): EventHandler {
    const deadLetters = new sqs.Queue(this, `${id}DeadLetters`, {
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      retentionPeriod: Duration.days(14),
    });
    acknowledgeFinding(
      deadLetters,
      'SQS3',
      `This queue is the dead-letter queue of the ${id} rule target and of the function's asynchronous invocations.`,
    );
    // EventBridge invokes the function asynchronously: its retry policy and dead-letter queue cover delivery only
    // (throttling, a missing permission). An event the function fails on is Lambda's to retry, and without this
    // Lambda would drop it after its retries: they go to the same queue, the event itself as the body.
    const fn = new TrainyardFunction(this, `${id}Function`, {
      entry: spec.entry,
      description: spec.description,
      environment: spec.environment,
      logRetention: props.logRetention,
      deadLetterQueue: deadLetters,
      config: props.config,
      ...(spec.timeout ? { timeout: spec.timeout } : {}),
    });
    fn.configureAsyncInvoke({
      retryAttempts: FUNCTION_ERROR_RETRIES,
      maxEventAge: Duration.seconds(Math.min(spec.retry.maxEventAge.toSeconds(), MAX_ASYNC_EVENT_AGE.toSeconds())),
    });
    const rules = spec.rules.map(
      (rule) =>
        new events.Rule(this, `${id}${rule.id ?? ''}Rule`, {
          description: rule.description,
          ...(rule.eventPattern ? { eventPattern: rule.eventPattern } : {}),
          ...(rule.schedule ? { schedule: rule.schedule } : {}),
          targets: [
            new targets.LambdaFunction(fn, {
              deadLetterQueue: deadLetters,
              retryAttempts: spec.retry.retryAttempts,
              maxEventAge: spec.retry.maxEventAge,
              ...(rule.input ? { event: rule.input } : {}),
            }),
          ],
        }),
    );
    const deadLetterAlarm = new cloudwatch.Alarm(this, `${id}DeadLettersAlarm`, {
      alarmDescription: `Trainyard ${id}: events the function could not handle after retries are waiting in its dead-letter queue`,
      metric: deadLetters.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: cloudwatch.Stats.MAXIMUM,
      }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const errorsAlarm = new cloudwatch.Alarm(this, `${id}ErrorsAlarm`, {
      alarmDescription: `Trainyard ${id}: the function reported errors`,
      metric: fn.metricErrors({ period: Duration.minutes(5), statistic: cloudwatch.Stats.SUM }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (props.alertTopic) {
      const action = new cloudwatchActions.SnsAction(props.alertTopic);
      deadLetterAlarm.addAlarmAction(action);
      errorsAlarm.addAlarmAction(action);
    }
    return { function: fn, rules, deadLetters, deadLetterAlarm, errorsAlarm };
  }

  private grant(props: EventHandlersProps): void {
    const stack = Stack.of(this);
    const interruption = this.interruption.function;
    const batchEvents = this.batchEvents.function;
    const budgetWatch = this.budgetWatch.function;
    const jobArns = stack.formatArn({ service: 'batch', resource: 'job', resourceName: '*' });
    const terminate = () => new iam.PolicyStatement({ actions: ['batch:TerminateJob'], resources: [jobArns] });

    for (const fn of [interruption, batchEvents, budgetWatch]) grantTableReadWrites(props.jobsTable, fn);
    // Interruption announces nothing (AttemptOutcome announces the attempt's end).
    for (const fn of [batchEvents, budgetWatch]) props.eventBus.grantPutEventsTo(fn);
    interruption.addToRolePolicy(terminate());
    budgetWatch.addToRolePolicy(terminate());
    batchEvents.addToRolePolicy(terminate());
    // A start's instance and price: batch-events from the state change, budget-watch from DescribeJobs when the
    // state change never came.
    for (const fn of [batchEvents, budgetWatch]) grantStartPricing(fn);
    budgetWatch.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['batch:DescribeJobs', 'batch:ListJobs'], resources: ['*'] }),
    );
    grantTableReadWrites(props.budgetsTable, budgetWatch);
    grantBudgetsByTeam(budgetWatch, props.budgetsTable);
    // A recorded cost (an attempt's stop, an orphaned Batch job's run) is charged to the job's budgets at once (ledger
    // chargeRecorded): reads and updates of existing items, never a new one.
    grantTableReads(props.budgetsTable, batchEvents);
    props.budgetsTable.grant(batchEvents, 'dynamodb:UpdateItem');
    // ...and its job's summary.json and report.html are written again with the new cost (lambdas/shared/job-files.ts).
    const anyJob = jobKeysFor('*', '*');
    grantJobObjects(
      batchEvents,
      props.workspace,
      { read: [anyJob.summary, anyJob.metricsLog], write: [anyJob.summary, anyJob.report] },
      'Rewrites an ended job’s summary.json and report.html when an orphaned Batch job’s cost is added to it: reads the summary (when the job finished) and metrics.jsonl, writes those two files, nothing else in the workspace.',
    );
    grantJobObjects(
      budgetWatch,
      props.workspace,
      { read: [anyJob.progress], write: [] },
      'Meters the running jobs of every team: reads each job’s progress.json, nothing else in the workspace.',
    );
    props.stateMachine.grant(budgetWatch, 'states:SendTaskSuccess');
    // The spot probe, and the zones of the compute subnets it scores.
    budgetWatch.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['ec2:GetSpotPlacementScores', 'ec2:DescribeSubnets'], resources: ['*'] }),
    );

    const jobsIndexes = `IAM5[Resource::${nagResourceName(this, props.jobsTable.tableArn)}/index/*]`;
    const terminateAck = [
      'IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*]',
      'TerminateJob targets the attempt’s Batch job; Batch assigns job ids at submit, so job/* in this account and region is the narrowest ARN.',
    ] as const;
    const ack = (fn: lambda.IFunction, finding: string, reason: string) =>
      acknowledgeFinding(fn.role as iam.IRole, finding, reason);
    ack(interruption, 'IAM5[Resource::*]', 'X-Ray trace writes (active tracing) have no resource-level permissions.');
    ack(
      budgetWatch,
      'IAM5[Resource::*]',
      'ec2:GetSpotPlacementScores (the spot probe of on-demand deadline jobs), ec2:DescribeSubnets (the zones of the compute subnets it scores), batch:DescribeJobs and batch:ListJobs (looking up an attempt whose start went unrecorded), ec2:DescribeInstances and ec2:DescribeSpotPriceHistory (that start’s instance and price) and X-Ray trace writes have no resource-level permissions.',
    );

    ack(interruption, jobsIndexes, 'Finds the attempt on a warned instance through the jobs table index byInstance.');
    ack(interruption, ...terminateAck);
    ack(
      batchEvents,
      jobsIndexes,
      'The table grant covers the jobs table’s indexes (byInstance is written with the attempt).',
    );
    ack(
      batchEvents,
      'IAM5[Resource::*]',
      'ec2:DescribeInstances (instance type, AZ, spot or on-demand), ec2:DescribeSpotPriceHistory and X-Ray trace writes have no resource-level permissions.',
    );
    ack(batchEvents, ...terminateAck);
    ack(budgetWatch, jobsIndexes, 'Lists each team’s running and paused jobs through the jobs table index byTeam.');
    ack(budgetWatch, ...terminateAck);

    this.grantExecutionEnded(this.executionEnded.function, props, terminate(), terminateAck, jobsIndexes);
    if (this.reports) this.grantReports(this.reports.function, props);
  }

  /**
   * execution-ended does what Finalize does (jobs and budgets tables, each job's metrics.jsonl and progress.json read and its
   * summary.json and report.html written, the bus) and ends attempts: Batch TerminateJob, DescribeJobs and ListJobs.
   */
  private grantExecutionEnded(
    fn: TrainyardFunction,
    props: EventHandlersProps,
    terminate: iam.PolicyStatement,
    terminateAck: readonly [string, string],
    jobsIndexes: string,
  ): void {
    grantTableReadWrites(props.jobsTable, fn);
    grantTableReadWrites(props.budgetsTable, fn);
    props.eventBus.grantPutEventsTo(fn);
    grantJobObjects(
      fn,
      props.workspace,
      finalizerObjects(),
      'Finalizes jobs of every team, as Finalize does: reads each job’s metrics.jsonl and progress.json and writes its summary.json and report.html, nothing else in the workspace.',
    );
    fn.addToRolePolicy(terminate);
    fn.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['batch:DescribeJobs', 'batch:ListJobs'], resources: ['*'] }),
    );
    // An attempt whose start was never recorded is priced at its stop, from its instance.
    grantStartPricing(fn);
    const ack = (finding: string, reason: string) => acknowledgeFinding(fn.role as iam.IRole, finding, reason);
    ack(jobsIndexes, 'The table grant covers the jobs table’s indexes (Query on byTeam and byState).');
    ack(...terminateAck);
    ack(
      'IAM5[Resource::*]',
      'batch:DescribeJobs and batch:ListJobs (looking up the attempts of an ended execution), ec2:DescribeInstances and ec2:DescribeSpotPriceHistory (pricing an attempt whose start went unrecorded) and X-Ray trace writes have no resource-level permissions.',
    );
  }

  /**
   * The reports function reads jobs and attempts (the byTeam index and job partitions), writes only its announcement
   * records (PutItem), writes objects under the workspace's reports/ prefix only, and puts events on the platform bus.
   */
  private grantReports(reports: lambda.IFunction, props: EventHandlersProps): void {
    grantTableReads(props.jobsTable, reports);
    props.jobsTable.grant(reports, 'dynamodb:PutItem');
    // PutObject only (the L2 grantPut adds multipart aborts, retention and tagging, none of which a report needs).
    reports.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['s3:PutObject'], resources: [props.workspace.arnForObjects('reports/*')] }),
    );
    props.eventBus.grantPutEventsTo(reports);
    const ack = (finding: string, reason: string) => acknowledgeFinding(reports.role as iam.IRole, finding, reason);
    ack(
      `IAM5[Resource::${nagResourceName(this, props.jobsTable.tableArn)}/index/*]`,
      'Lists each team’s jobs of the period through the jobs table index byTeam (the L2 read grant covers the indexes).',
    );
    ack(
      `IAM5[Resource::${nagResourceName(this, props.workspace.bucketArn)}/reports/*]`,
      'Writes the showback reports, which live under reports/ only (outside every team’s prefix).',
    );
    ack('IAM5[Resource::*]', 'X-Ray trace writes (active tracing) have no resource-level permissions.');
  }
}
