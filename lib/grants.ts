import { Stack } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type { IConstruct } from 'constructs';
import { jobKeysFor } from '../lambdas/domain/workspace-layout';
import { BUDGETS_INDEXES } from '../lambdas/shared/table-design';
import { acknowledgeFinding, nagResourceName } from './nag';

/** Key patterns of objects of any job (`jobKeysFor('*', '*')`), by what the function does with them. */
export interface JobObjectAccess {
  /** Objects the function reads (s3:GetObject). */
  readonly read: readonly string[];
  /** Objects the function writes whole (s3:PutObject). */
  readonly write: readonly string[];
}

/**
 * What a function that finalizes jobs (Finalize, execution-ended) touches in the workspace: it reads each job's
 * metrics.jsonl (the report's samples) and progress.json (the last sign of an attempt whose Batch job Batch no longer
 * reports), and writes its summary.json and report.html.
 */
export function finalizerObjects(): JobObjectAccess {
  const anyJob = jobKeysFor('*', '*');
  return { read: [anyJob.metricsLog, anyJob.progress], write: [anyJob.summary, anyJob.report] };
}

/**
 * Grants a control-plane function exactly GetObject on the `read` and PutObject on the `write` key patterns of every
 * job, and listing of the team folders, without which a missing object reads as AccessDenied instead of missing.
 * Each pattern's wildcard (any team, any job) is acknowledged with `why`.
 */
export function grantJobObjects(
  fn: iam.IGrantable & IConstruct,
  bucket: s3.IBucket,
  access: JobObjectAccess,
  why: string,
): void {
  for (const [action, keys] of [
    ['s3:GetObject', access.read],
    ['s3:PutObject', access.write],
  ] as const) {
    if (keys.length === 0) continue;
    fn.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: [action], resources: keys.map((key) => bucket.arnForObjects(key)) }),
    );
  }
  fn.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['s3:ListBucket'],
      resources: [bucket.bucketArn],
      conditions: { StringLike: { 's3:prefix': ['teams/*'] } },
    }),
  );
  const name = nagResourceName(fn, bucket.bucketArn);
  for (const key of [...access.read, ...access.write]) acknowledgeFinding(fn, `IAM5[Resource::${name}/${key}]`, why);
}

/**
 * The DynamoDB actions the stores send (lambdas/shared/dynamo.ts): single-item reads and Query, single-item writes.
 * The L2's grantReadData/grantReadWriteData add Scan, BatchGetItem, BatchWriteItem, DeleteItem, ConditionCheckItem
 * and the stream reads, none of which any function calls: a function can no more scan or delete the ledger than its
 * code does.
 */
export const TABLE_READ_ACTIONS = ['dynamodb:GetItem', 'dynamodb:Query'] as const;
export const TABLE_WRITE_ACTIONS = ['dynamodb:PutItem', 'dynamodb:UpdateItem'] as const;

/** GetItem and Query on the table and its indexes. */
/**
 * What pricing a Batch job's start takes (lambdas/shared/start-price.ts): the EC2 instance behind its ECS container
 * instance, and the spot price history of its type and zone. Acknowledges the container-instance wildcard; the
 * caller's `IAM5[Resource::*]` acknowledgement must name ec2:DescribeInstances and ec2:DescribeSpotPriceHistory.
 */
export function grantStartPricing(fn: lambda.Function): void {
  const stack = Stack.of(fn);
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      actions: ['ecs:DescribeContainerInstances'],
      resources: [stack.formatArn({ service: 'ecs', resource: 'container-instance', resourceName: '*' })],
    }),
  );
  fn.addToRolePolicy(
    new iam.PolicyStatement({ actions: ['ec2:DescribeInstances', 'ec2:DescribeSpotPriceHistory'], resources: ['*'] }),
  );
  acknowledgeFinding(
    fn,
    'IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:<AWS::AccountId>:container-instance/*]',
    'Looks up the EC2 instance behind a Batch job’s container instance; Batch creates and names the ECS clusters, so container-instance/* in this account and region is the narrowest ARN.',
  );
}

export function grantTableReads(table: dynamodb.ITableV2, fn: iam.IGrantable): void {
  table.grant(fn, ...TABLE_READ_ACTIONS);
}

/** GetItem, Query, PutItem and UpdateItem on the table (and the reads on its indexes). */
export function grantTableReadWrites(table: dynamodb.ITableV2, fn: iam.IGrantable): void {
  table.grant(fn, ...TABLE_READ_ACTIONS, ...TABLE_WRITE_ACTIONS);
}

/** Acknowledges the `<table>/index/*` wildcard that a table grant with global secondary indexes adds. */
export function acknowledgeTableIndexes(fn: IConstruct, tableArn: string, why: string): void {
  acknowledgeFinding(fn, `IAM5[Resource::${nagResourceName(fn, tableArn)}/index/*]`, why);
}

/**
 * Query on the budgets table's byTeam index, for the functions that list a team's budgets (GET /budgets) or its
 * alerts left unpublished (budget-watch). Named exactly: the table is imported without its indexes, so the other
 * functions' table grants do not reach them.
 */
export function grantBudgetsByTeam(fn: iam.IGrantable, budgetsTable: dynamodb.ITableV2): void {
  fn.grantPrincipal.addToPrincipalPolicy(
    new iam.PolicyStatement({
      actions: ['dynamodb:Query'],
      resources: [`${budgetsTable.tableArn}/index/${BUDGETS_INDEXES.byTeam.name}`],
    }),
  );
}
