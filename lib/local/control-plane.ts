/**
 * Assembles a ControlPlane on the local engines (dynalite, s3rver) with in-process ports, and the lifecycle step
 * handlers from it. Local mode and the lifecycle tests both build their control plane here, so they run exactly the
 * adapters and handlers the Lambdas run.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { createAnalyzeHandler } from '../../lambdas/lifecycle/analyze';
import { createAttemptOutcomeHandler } from '../../lambdas/lifecycle/attempt-outcome';
import { createBackoffHandler } from '../../lambdas/lifecycle/backoff';
import { createCostGateHandler } from '../../lambdas/lifecycle/cost-gate';
import { createFinalizeHandler } from '../../lambdas/lifecycle/finalize';
import { createPauseHandler } from '../../lambdas/lifecycle/pause';
import { createPrepareAttemptHandler } from '../../lambdas/lifecycle/prepare-attempt';
import type { ControlPlane, SpotQuotes } from '../../lambdas/shared/control-plane';
import { createDocumentClient } from '../../lambdas/shared/dynamo';
import { newJobId } from '../../lambdas/shared/ids';
import { JobStore } from '../../lambdas/shared/job-store';
import { BudgetLedger } from '../../lambdas/shared/ledger';
import type {
  BatchControl,
  EventPublisher,
  FleetFacts,
  LifecycleControl,
  LogReader,
  MetricPublisher,
} from '../../lambdas/shared/ports';
import { BUDGETS_TABLE, createTableRequest, JOBS_TABLE } from '../../lambdas/shared/table-design';
import { Workspace } from '../../lambdas/shared/workspace';
import type { TrainyardConfig } from '../config';
import { type EngineCredentials, OPEN_ENGINE_CREDENTIALS } from './engines';
import { LOCAL_NAMES } from './names';
import type { LocalStepHandlers } from './state-machine-runner';

/**
 * An S3 client for s3rver: path-style, and checksums only when required (else stream uploads corrupt); signing with
 * the credentials s3rver was started with (engines.ts).
 */
export function localS3Client(endpoint: string, credentials: EngineCredentials = OPEN_ENGINE_CREDENTIALS): S3Client {
  return new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { ...credentials },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** Creates the jobs and budgets tables unless they exist (a restarted local mode keeps its data). */
export async function ensureLocalTables(
  dynamoEndpoint: string,
  credentials: EngineCredentials = OPEN_ENGINE_CREDENTIALS,
): Promise<void> {
  const client = createDocumentClient({ endpoint: dynamoEndpoint, credentials });
  try {
    for (const [name, table] of [
      [LOCAL_NAMES.jobsTable, JOBS_TABLE],
      [LOCAL_NAMES.budgetsTable, BUDGETS_TABLE],
    ] as const) {
      try {
        await client.request('CreateTable', createTableRequest(name, table));
      } catch (error) {
        if ((error as Error).name !== 'ResourceInUseException') throw error;
      }
    }
  } finally {
    client.destroy();
  }
}

/** The key each local engine answers (engines.ts): kept apart, so what holds the bucket's key cannot reach the tables. */
export interface LocalEngineCredentials {
  readonly dynamo: EngineCredentials;
  readonly s3: EngineCredentials;
}

/** The ports and engines a local control plane is built from. */
export interface LocalPlaneParts {
  readonly config: TrainyardConfig;
  readonly dynamoEndpoint: string;
  readonly s3Endpoint: string;
  /** What each engine was started with (engines.ts). @default OPEN_ENGINE_CREDENTIALS for both */
  readonly engineCredentials?: LocalEngineCredentials;
  readonly batch: BatchControl;
  readonly events: EventPublisher;
  /** Where the metrics go (local mode: an EMF file beside the event log). */
  readonly metrics: MetricPublisher;
  /** Bound late: the local state machine needs the step handlers, which need the plane. */
  readonly lifecycle: () => LifecycleControl;
  readonly logs: LogReader;
  readonly fleet: FleetFacts;
  /** @default - no quotes: tiers' configured spot prices, reported as the fallback */
  readonly spotQuotes?: SpotQuotes;
  /** @default - the system clock */
  readonly clock?: () => Date;
}

/** A control plane over the local engines. */
export function localControlPlane(parts: LocalPlaneParts): ControlPlane {
  const clock = parts.clock ?? (() => new Date());
  const doc = createDocumentClient({
    endpoint: parts.dynamoEndpoint,
    credentials: parts.engineCredentials?.dynamo ?? OPEN_ENGINE_CREDENTIALS,
  });
  return {
    config: parts.config,
    jobs: new JobStore(doc, LOCAL_NAMES.jobsTable, clock),
    ledger: new BudgetLedger({
      client: doc,
      tableName: LOCAL_NAMES.budgetsTable,
      thresholds: { warn: parts.config.budgets.warnThreshold, block: parts.config.budgets.blockThreshold },
      now: clock,
    }),
    workspace: new S3rverWorkspace(localS3Client(parts.s3Endpoint, parts.engineCredentials?.s3), LOCAL_NAMES.bucket),
    batch: parts.batch,
    events: parts.events,
    metrics: parts.metrics,
    get lifecycle() {
      return parts.lifecycle();
    },
    logs: parts.logs,
    fleet: parts.fleet,
    spotQuotes: parts.spotQuotes ?? { quotesFor: async () => undefined },
    batchPrefix: 'trainyard',
    trainingLogGroup: 'trainyard-local',
    clock,
    newId: () => newJobId(clock()),
  };
}

/** The lifecycle's step handlers over a control plane (the same factories the Lambdas use). */
export function lifecycleSteps(plane: ControlPlane): LocalStepHandlers {
  return {
    analyze: createAnalyzeHandler(plane),
    costGate: createCostGateHandler(plane),
    prepareAttempt: createPrepareAttemptHandler(plane),
    attemptOutcome: createAttemptOutcomeHandler(plane),
    pause: createPauseHandler(plane),
    backoff: createBackoffHandler(plane),
    finalize: createFinalizeHandler(plane),
  };
}

/**
 * The workspace adapter, unchanged, except that a GET s3rver drops mid-body is retried (twice), in every read of an
 * object (get, getAtMost and so getJson, getTail): s3rver closes the connection when the object is replaced while it
 * streams it (the harness rewrites metrics.jsonl and progress.json every few seconds), which S3 never does — a GET
 * there returns the old or the new object whole.
 */
export class S3rverWorkspace extends Workspace {
  override get(key: string): Promise<Buffer | undefined> {
    return retryDropped(() => super.get(key));
  }

  override getAtMost(key: string, maxBytes: number): Promise<Buffer | undefined> {
    return retryDropped(() => super.getAtMost(key, maxBytes));
  }

  override getTail(key: string, maxBytes: number): Promise<Buffer | undefined> {
    return retryDropped(() => super.getTail(key, maxBytes));
  }
}

/** A read s3rver dropped mid-body, tried again up to twice. */
async function retryDropped<T>(read: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await read();
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const dropped = code === 'ECONNRESET' || (error as Error).message === 'aborted';
      if (!dropped || tries >= 3) throw error;
    }
  }
}
