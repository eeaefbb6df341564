import * as path from 'node:path';
import { Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as events from 'aws-cdk-lib/aws-events';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { CHECKPOINT_MANIFEST, jobKeysFor } from '../../lambdas/domain/workspace-layout';
import { ENV } from '../../lambdas/shared/aws-control-plane';
import type { TrainyardConfig } from '../config';
import { TrainyardFunction } from '../function';
import {
  acknowledgeTableIndexes,
  finalizerObjects,
  grantJobObjects,
  grantStartPricing,
  grantTableReads,
  grantTableReadWrites,
} from '../grants';
import { acknowledgeFinding } from '../nag';
import type { LifecycleSteps } from './job-state-machine';

/** Repository root, for Lambda entries. */
export const REPOSITORY_ROOT = path.join(import.meta.dirname, '..', '..');

/** Props for the lifecycle step functions. */
export interface LifecycleFunctionsProps {
  readonly config: TrainyardConfig;
  readonly jobsTable: dynamodb.ITableV2;
  readonly budgetsTable: dynamodb.ITableV2;
  readonly workspace: s3.IBucket;
  readonly eventBus: events.IEventBus;
  readonly batchPrefix: string;
  readonly logRetention: logs.RetentionDays;
}

/**
 * The seven Lambdas behind the job state machine's Tasks, each granted only what its step touches: every step reads
 * and writes the jobs table; budgets, workspace, bus and spot prices only where used.
 */
export class LifecycleFunctions extends Construct implements LifecycleSteps {
  public readonly analyze: TrainyardFunction;
  public readonly costGate: TrainyardFunction;
  public readonly prepareAttempt: TrainyardFunction;
  public readonly attemptOutcome: TrainyardFunction;
  public readonly pause: TrainyardFunction;
  public readonly backoff: TrainyardFunction;
  public readonly finalize: TrainyardFunction;

  constructor(scope: Construct, id: string, props: LifecycleFunctionsProps) {
    super(scope, id);
    const make = (fnId: string, folder: string, description: string, env: Record<string, string>) => {
      const fn = new TrainyardFunction(this, fnId, {
        entry: path.join(REPOSITORY_ROOT, 'lambdas', folder, 'handler.ts'),
        description,
        config: props.config,
        logRetention: props.logRetention,
        environment: { [ENV.jobsTable]: props.jobsTable.tableName, ...env },
      });
      grantTableReadWrites(props.jobsTable, fn);
      acknowledgeTableIndexes(
        fn,
        props.jobsTable.tableArn,
        'Reads jobs by team and attempts by EC2 instance through the table’s indexes.',
      );
      return fn;
    };
    const bucket = { [ENV.workspaceBucket]: props.workspace.bucketName };
    const budgets = { [ENV.budgetsTable]: props.budgetsTable.tableName };
    const bus = { [ENV.eventBus]: props.eventBus.eventBusName };

    this.analyze = make(
      'Analyze',
      'analyze',
      'Trainyard lifecycle: analyse the code bundle, pick the tier, estimate cost',
      bucket,
    );
    const anyJob = jobKeysFor('*', '*');
    grantJobObjects(
      this.analyze,
      props.workspace,
      { read: [anyJob.bundle], write: [] },
      'Analyses the code bundle of jobs of every team: reads each job’s code.tar.gz, nothing else in the workspace.',
    );
    this.analyze.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['ec2:DescribeSpotPriceHistory'], resources: ['*'] }),
    );

    this.costGate = make('CostGate', 'cost-gate', 'Trainyard lifecycle: reserve the estimate in every budget scope', {
      ...budgets,
      ...bus,
    });
    grantTableReadWrites(props.budgetsTable, this.costGate);

    this.prepareAttempt = make(
      'PrepareAttempt',
      'prepare-attempt',
      'Trainyard lifecycle: plan the next Batch attempt',
      {
        ...bucket,
        ...budgets,
        ...bus,
        [ENV.batchPrefix]: props.batchPrefix,
      },
    );
    grantJobObjects(
      this.prepareAttempt,
      props.workspace,
      { read: [`${anyJob.checkpoints}*/${CHECKPOINT_MANIFEST}`], write: [] },
      'Finds the checkpoint an attempt of any team’s job resumes from: lists the job’s checkpoints and reads their manifests, nothing else.',
    );
    // Whether a budget the job is charged to is blocked: the job then pauses instead of starting its next attempt.
    grantTableReads(props.budgetsTable, this.prepareAttempt);

    this.attemptOutcome = make(
      'AttemptOutcome',
      'attempt-outcome',
      'Trainyard lifecycle: classify an ended attempt and decide what next',
      {
        ...bucket,
        ...budgets,
        ...bus,
      },
    );
    grantJobObjects(
      this.attemptOutcome,
      props.workspace,
      { read: [anyJob.progress], write: [] },
      'Reads the progress an ended attempt of any team’s job reported (progress.json), nothing else in the workspace.',
    );
    // Whether a budget the job is charged to is blocked: the job then pauses instead of starting another attempt.
    grantTableReads(props.budgetsTable, this.attemptOutcome);
    // An attempt whose task failed is looked up in Batch, and stopped if Batch runs it after all.
    this.attemptOutcome.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['batch:TerminateJob'],
        resources: [Stack.of(this).formatArn({ service: 'batch', resource: 'job', resourceName: '*' })],
      }),
    );
    this.attemptOutcome.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['batch:DescribeJobs', 'batch:ListJobs'], resources: ['*'] }),
    );
    // An attempt whose start Batch never reported is priced at its stop, from its instance, as its start would be.
    grantStartPricing(this.attemptOutcome);

    this.pause = make('Pause', 'pause', 'Trainyard lifecycle: pause a job whose budget is exhausted', {
      ...budgets,
      ...bus,
    });
    // It accrues the job's recorded cost and gives back what the job still holds (ledger writes).
    grantTableReadWrites(props.budgetsTable, this.pause);

    this.backoff = make(
      'Backoff',
      'backoff',
      'Trainyard lifecycle: record the task token a job waits on before its next attempt, so a cancel ends the wait',
      {},
    );
    // A cancel that came before the token was stored: the step sends it task success itself. Pause does the same; both
    // are granted SendTaskSuccess on the job state machine alone once it exists (JobStateMachine).

    this.finalize = make(
      'Finalize',
      'finalize',
      'Trainyard lifecycle: settle the ledger, write the summary and report, announce',
      {
        ...bucket,
        ...budgets,
        ...bus,
      },
    );
    grantTableReadWrites(props.budgetsTable, this.finalize);
    grantJobObjects(
      this.finalize,
      props.workspace,
      finalizerObjects(),
      'Finalize serves every team: it reads each job’s metrics.jsonl and progress.json and writes its summary.json and report.html, nothing else in the workspace.',
    );

    // A job can end with an attempt still in Batch (AttemptOutcome failed): Finalize looks it up, stops it and waits.
    this.finalize.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['batch:TerminateJob'],
        resources: [Stack.of(this).formatArn({ service: 'batch', resource: 'job', resourceName: '*' })],
      }),
    );
    this.finalize.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['batch:DescribeJobs', 'batch:ListJobs'], resources: ['*'] }),
    );
    grantStartPricing(this.finalize);

    for (const fn of [this.costGate, this.prepareAttempt, this.attemptOutcome, this.pause, this.finalize]) {
      props.eventBus.grantPutEventsTo(fn);
    }
    acknowledgeFinding(
      this.analyze,
      'IAM5[Resource::*]',
      'ec2:DescribeSpotPriceHistory has no resource-level permissions.',
    );
    acknowledgeFinding(
      this.attemptOutcome,
      'IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*]',
      'TerminateJob stops an attempt Batch ran although its task failed; Batch assigns job ids at submit, so job/* in this account and region is the narrowest ARN.',
    );
    acknowledgeFinding(
      this.attemptOutcome,
      'IAM5[Resource::*]',
      'batch:DescribeJobs and batch:ListJobs (looking up an attempt whose task failed), ec2:DescribeInstances and ec2:DescribeSpotPriceHistory (pricing an attempt whose start went unrecorded) have no resource-level permissions.',
    );
    acknowledgeFinding(
      this.finalize,
      'IAM5[Resource::arn:<AWS::Partition>:batch:<AWS::Region>:<AWS::AccountId>:job/*]',
      'TerminateJob stops an attempt still in Batch when its job ends; Batch assigns job ids at submit, so job/* in this account and region is the narrowest ARN.',
    );
    acknowledgeFinding(
      this.finalize,
      'IAM5[Resource::*]',
      'batch:DescribeJobs and batch:ListJobs (looking up an attempt still in Batch when its job ends), ec2:DescribeInstances and ec2:DescribeSpotPriceHistory (pricing an attempt whose start went unrecorded) have no resource-level permissions.',
    );
  }
}
