/**
 * The control plane on AWS, assembled from environment variables. Each dependency is built on first use, so a
 * function only needs (and is only granted) the variables and permissions of the parts its handler takes. A missing
 * variable fails with its name on first use, which may be on a path a handler rarely runs: test/infra/function-
 * ports.test.ts checks that every function has the variable and a grant for each part its handler's factory takes.
 */
import { awsBatchControl, awsEventPublisher, awsFleetFacts, awsLifecycleControl, awsLogReader } from './aws-ports';
import type { ControlPlane, SpotQuotes } from './control-plane';
import { createDocumentClient } from './dynamo';
import { requireEnv } from './env';
import { newJobId } from './ids';
import { JobStore } from './job-store';
import { BudgetLedger } from './ledger';
import type { MetricPublisher } from './ports';
import { configFromEnv } from './runtime-config';
import { SpotPriceCache } from './spot-prices';
import { Workspace } from './workspace';

/**
 * How the Lambdas' S3 client computes request checksums: only where an operation requires one. The SDK's default
 * (WHEN_SUPPORTED) signs the CRC32 of an empty body into a presigned PutObject URL, which the bundle uploaded there
 * does not match (POST /uploads).
 */
export const WORKSPACE_S3_CLIENT_CONFIG = { requestChecksumCalculation: 'WHEN_REQUIRED' } as const;

/** Environment variable names, as the stacks set them. */
export const ENV = {
  jobsTable: 'JOBS_TABLE_NAME',
  budgetsTable: 'BUDGETS_TABLE_NAME',
  workspaceBucket: 'WORKSPACE_BUCKET_NAME',
  stateMachine: 'STATE_MACHINE_ARN',
  eventBus: 'EVENT_BUS_NAME',
  batchPrefix: 'BATCH_NAME_PREFIX',
  trainingLogGroup: 'TRAINING_LOG_GROUP_NAME',
  /** Comma-separated subnets the compute environments launch into (budget-watch's spot probe scores their zones). */
  computeSubnets: 'COMPUTE_SUBNET_IDS',
} as const;

function lazy<T>(build: () => T): () => T {
  let value: T | undefined;
  return () => {
    value ??= build();
    return value;
  };
}

/** Parts only some functions use, passed by their handler.ts so that the other bundles leave them out. */
export interface AwsControlPlaneOptions {
  /** The metric publisher (metrics.ts stdoutMetricPublisher), for the functions that publish metrics. */
  readonly metrics?: () => MetricPublisher;
}

/**
 * A ControlPlane whose parts are built from the environment on first access. Without a metric publisher the plane's
 * type has no `metrics`, so a handler whose steps publish metrics does not compile against it: its handler.ts must
 * pass one.
 */
export function awsControlPlane(options: AwsControlPlaneOptions & { metrics: () => MetricPublisher }): ControlPlane;
export function awsControlPlane(options?: AwsControlPlaneOptions): Omit<ControlPlane, 'metrics'>;
export function awsControlPlane(options: AwsControlPlaneOptions = {}): ControlPlane {
  const config = lazy(configFromEnv);
  const documentClient = lazy(() => createDocumentClient());
  const parts = {
    config,
    jobs: lazy(() => new JobStore(documentClient(), requireEnv(ENV.jobsTable))),
    ledger: lazy(
      () =>
        new BudgetLedger({
          client: documentClient(),
          tableName: requireEnv(ENV.budgetsTable),
          thresholds: { warn: config().budgets.warnThreshold, block: config().budgets.blockThreshold },
        }),
    ),
    // The S3 client module loads on the first bucket operation, not at cold start (see workspace.ts).
    workspace: lazy(
      () =>
        new Workspace(
          async () => new (await import('@aws-sdk/client-s3')).S3Client(WORKSPACE_S3_CLIENT_CONFIG),
          requireEnv(ENV.workspaceBucket),
        ),
    ),
    batch: lazy(() => awsBatchControl()),
    events: lazy(() => awsEventPublisher(requireEnv(ENV.eventBus))),
    metrics: lazy((): MetricPublisher => {
      if (options.metrics) return options.metrics();
      throw new Error(
        'this function was built without a metric publisher: its handler.ts passes awsControlPlane({ metrics })',
      );
    }),
    lifecycle: lazy(() => awsLifecycleControl(() => requireEnv(ENV.stateMachine))),
    logs: lazy(() => awsLogReader(requireEnv(ENV.trainingLogGroup))),
    fleet: lazy(() => {
      const subnets = process.env[ENV.computeSubnets];
      return awsFleetFacts({}, subnets ? { computeSubnetIds: subnets.split(',') } : {});
    }),
    spotQuotes: lazy((): SpotQuotes => {
      // The EC2 client module loads on the first quote, not at cold start (see aws-ports.ts).
      let cache: Promise<SpotPriceCache> | undefined;
      return {
        async quotesFor(instanceTypes) {
          cache ??= import('@aws-sdk/client-ec2').then(
            ({ EC2Client }) => new SpotPriceCache(new EC2Client({}), 10 * 60_000),
          );
          return (await cache).quotesFor(instanceTypes);
        },
      };
    }),
    batchPrefix: lazy(() => requireEnv(ENV.batchPrefix)),
    trainingLogGroup: lazy(() => requireEnv(ENV.trainingLogGroup)),
  };
  const plane = { clock: () => new Date(), newId: () => newJobId() } as Record<string, unknown>;
  for (const [name, get] of Object.entries(parts)) Object.defineProperty(plane, name, { get, enumerable: true });
  return plane as unknown as ControlPlane;
}
