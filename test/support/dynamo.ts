/**
 * Test helper: a fresh dynalite (DynamoDB API on loopback, in memory) with Trainyard's tables created from the same
 * table design the stack deploys, and document clients pointed at it. Each call gets its own engine, so test files
 * running in parallel never share state.
 */
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { createDocumentClient, type DocumentClient } from '../../lambdas/shared/dynamo';
import { BUDGETS_TABLE, createTableRequest, JOBS_TABLE } from '../../lambdas/shared/table-design';
import { startDynalite } from '../../lib/local/engines';

/** A running dynalite with Trainyard's tables. */
export interface TestDynamo {
  /** The engine's loopback URL (for adapters that build their own client). */
  readonly endpoint: string;
  /** The stores' document client (lambdas/shared/dynamo.ts) against the engine. */
  readonly doc: DocumentClient;
  /**
   * The AWS SDK's low-level client against the engine, for table admin and raw attribute values: an implementation
   * independent of the stores' client, so what the tests check through it was not read back by the code under test.
   */
  readonly client: DynamoDBClient;
  /** Table names created in this engine. */
  readonly tables: { readonly jobs: string; readonly budgets: string };
  /** Every item of a table, read consistently through the SDK and sorted by pk/sk (for before/after comparisons). */
  scanAll(tableName: string): Promise<Record<string, unknown>[]>;
  /** Stops the engine and the client. */
  stop(): Promise<void>;
}

/** Starts dynalite and creates the jobs and budgets tables (names overridable). */
export async function startTestDynamo(
  options: { jobsTable?: string; budgetsTable?: string } = {},
): Promise<TestDynamo> {
  const engine = await startDynalite();
  const doc = createDocumentClient({ endpoint: engine.endpoint });
  const client = new DynamoDBClient({
    endpoint: engine.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const sdkDoc = DynamoDBDocumentClient.from(client);
  const tables = { jobs: options.jobsTable ?? 'trainyard-jobs', budgets: options.budgetsTable ?? 'trainyard-budgets' };
  try {
    await client.send(new CreateTableCommand(createTableRequest(tables.jobs, JOBS_TABLE)));
    await client.send(new CreateTableCommand(createTableRequest(tables.budgets, BUDGETS_TABLE)));
  } catch (error) {
    doc.destroy();
    client.destroy();
    await engine.stop();
    throw error;
  }
  return {
    endpoint: engine.endpoint,
    doc,
    client,
    tables,
    scanAll: (tableName) => scanAll(sdkDoc, tableName),
    stop: async () => {
      doc.destroy();
      client.destroy();
      await engine.stop();
    },
  };
}

async function scanAll(doc: DynamoDBDocumentClient, tableName: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(
      new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  const key = (item: Record<string, unknown>) => `${String(item.pk)}\u0000${String(item.sk)}`;
  return items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}
