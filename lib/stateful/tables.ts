import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { BUDGETS_TABLE, JOBS_TABLE, type TableDefinition } from '../../lambdas/shared/table-design';

/**
 * The platform's DynamoDB tables, created from the same engine-neutral definitions that local mode uses:
 * on-demand billing, point-in-time recovery, AWS-owned encryption, retained when the stack is deleted.
 */
export class Tables extends Construct {
  /** Jobs, attempts, decisions and idempotency claims; indexed by team/time and by EC2 instance. */
  public readonly jobs: dynamodb.TableV2;
  /** Budgets per scope and period: the ledger. */
  public readonly budgets: dynamodb.TableV2;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.jobs = tableFrom(this, 'Jobs', JOBS_TABLE);
    this.budgets = tableFrom(this, 'Budgets', BUDGETS_TABLE);
  }
}

function tableFrom(scope: Construct, id: string, definition: TableDefinition): dynamodb.TableV2 {
  const key = (name: string) => ({ name, type: dynamodb.AttributeType.STRING });
  return new dynamodb.TableV2(scope, id, {
    partitionKey: key(definition.partitionKey),
    sortKey: key(definition.sortKey),
    billing: dynamodb.Billing.onDemand(),
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    deletionProtection: true,
    removalPolicy: RemovalPolicy.RETAIN,
    globalSecondaryIndexes: definition.indexes.map((index) => ({
      indexName: index.name,
      partitionKey: key(index.partition),
      sortKey: key(index.sort),
      projectionType: dynamodb.ProjectionType.ALL,
    })),
  });
}
