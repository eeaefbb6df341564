import { Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as ecr from 'aws-cdk-lib/aws-ecr';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { Construct } from 'constructs';
import { JOBS_TABLE } from '../lambdas/shared/table-design';
import { ImageRepository } from './stateful/image-repository';
import { Tables } from './stateful/tables';
import { WorkspaceBucket } from './stateful/workspace-bucket';

/** Props for the stateful stack. */
export interface StatefulStackProps extends StackProps {
  /** Name of the training image repository (the platform stack publishes its image assets there). */
  readonly imageRepositoryName: string;
}

/**
 * Everything that holds data and must outlive a redeploy: the workspace bucket, the jobs and budgets tables and the
 * training image repository, all retained on stack deletion.
 *
 * Other stacks get these through explicitly named exports (`<stack>-WorkspaceBucketArn`, …) rather than CDK's
 * generated ones, so IAM policies and cdk-nag acknowledgements name them stably across refactors.
 */
export class StatefulStack extends Stack {
  /** Code bundles, checkpoints, metrics, summaries and reports (exported reference). */
  public readonly workspace: s3.IBucket;
  /** Jobs, attempts, decisions (exported reference, indexes included). */
  public readonly jobsTable: dynamodb.ITableV2;
  /** The budgets ledger (exported reference). */
  public readonly budgetsTable: dynamodb.ITableV2;
  /** Training images, scanned on push (exported reference). */
  public readonly imageRepository: ecr.IRepository;
  /** The resources themselves, for assertions and for stack-local wiring. */
  public readonly resources: {
    readonly workspace: s3.Bucket;
    readonly tables: Tables;
    readonly imageRepository: ecr.Repository;
  };

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    const workspace = new WorkspaceBucket(this, 'Workspace').bucket;
    const tables = new Tables(this, 'Tables');
    const imageRepository = new ImageRepository(this, 'TrainingImages', {
      repositoryName: props.imageRepositoryName,
    }).repository;
    this.resources = { workspace, tables, imageRepository };

    const exported = (name: string, value: string) => this.exportValue(value, { name: `${this.stackName}-${name}` });
    this.workspace = s3.Bucket.fromBucketAttributes(this, 'WorkspaceExport', {
      bucketArn: exported('WorkspaceBucketArn', workspace.bucketArn),
      bucketName: exported('WorkspaceBucketName', workspace.bucketName),
    });
    this.jobsTable = dynamodb.TableV2.fromTableAttributes(this, 'JobsExport', {
      tableArn: exported('JobsTableArn', tables.jobs.tableArn),
      globalIndexes: JOBS_TABLE.indexes.map((i) => i.name),
    });
    this.budgetsTable = dynamodb.TableV2.fromTableAttributes(this, 'BudgetsExport', {
      tableArn: exported('BudgetsTableArn', tables.budgets.tableArn),
    });
    this.imageRepository = ecr.Repository.fromRepositoryAttributes(this, 'ImagesExport', {
      repositoryArn: exported('ImageRepositoryArn', imageRepository.repositoryArn),
      repositoryName: props.imageRepositoryName,
    });
  }
}
