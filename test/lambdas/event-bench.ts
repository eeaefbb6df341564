/**
 * Test bench for the EventBridge-driven handlers (interruption, batch-events, budget-watch): real dynalite (jobs,
 * budgets) and, on request, s3rver (workspace) behind the real adapters; the ports with no local engine (Batch,
 * EventBridge, Step Functions, EC2/ECS fleet facts) as in-process recorders. Fixtures are AWS's documented payloads
 * (test/fixtures/events/README.md).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { S3Client } from '@aws-sdk/client-s3';
import type { BatchJob } from '../../lambdas/domain/batch-job';
import type { EventEntry } from '../../lambdas/domain/events';
import { JobStore } from '../../lambdas/shared/job-store';
import { BudgetLedger } from '../../lambdas/shared/ledger';
import { emfMetricPublisher } from '../../lambdas/shared/metrics';
import type { BatchJobRef, InstanceFacts, MetricPublisher } from '../../lambdas/shared/ports';
import { Workspace } from '../../lambdas/shared/workspace';
import { parseConfig, type TrainyardConfig } from '../../lib/config';
import { startS3rver } from '../../lib/local/engines';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';
import { T } from '../support/records';

export { attemptRecord, JOB_ID, jobRecord, T } from '../support/records';

/** The Batch job id in the fixtures. */
export const BATCH_JOB_ID = '4c7599ae-0a82-49aa-ba5a-4727fcce14a8';
/** The spot instance in the fixtures. */
export const INSTANCE_ID = 'i-0f2b6a4c9d8e7f123';

/** Two teams; default tiers (gpu-small: on-demand 0.526, spot fallback 0.19 per hour). */
export const CONFIG: TrainyardConfig = parseConfig(
  {
    teams: [
      { id: 'vision', monthlyBudgetUsd: 400 },
      { id: 'nlp', monthlyBudgetUsd: 1000 },
    ],
  },
  'test config',
);

/** Reads a fixture as a fresh object. */
export function fixture(name: string): Record<string, unknown> {
  return JSON.parse(readFileSync(fileURLToPath(new URL(`../fixtures/events/${name}.json`, import.meta.url)), 'utf8'));
}

/** A fixture with a change applied to a deep copy. */
export function fixtureWith(
  name: string,
  change: (event: Record<string, unknown> & { detail: Record<string, unknown> }) => void,
) {
  const event = fixture(name) as Record<string, unknown> & { detail: Record<string, unknown> };
  change(event);
  return event;
}

/** Everything the ports were asked to do. */
export interface Recorded {
  readonly terminated: Array<{ batchJobId: string; reason: string }>;
  readonly published: EventEntry[];
  readonly taskSuccesses: Array<{ token: string; output: Record<string, unknown> }>;
  readonly instanceLookups: string[];
  /** Batch jobs looked up (DescribeJobs by id, else ListJobs by name in a queue). */
  readonly batchLookups: BatchJobRef[];
  readonly priceLookups: Array<{ instanceType: string; az: string; atMs: number }>;
  /** EMF lines the metric publisher wrote (read them with test/support/emf.ts). */
  readonly metricLines: string[];
}

/** A running bench. */
export interface EventBench {
  readonly dynamo: TestDynamo;
  readonly jobs: JobStore;
  readonly ledger: BudgetLedger;
  readonly workspace: Workspace;
  readonly recorded: Recorded;
  /** The Batch jobs DescribeJobs and ListJobs know (empty: Batch reports no job). */
  batchJobs: BatchJob[];
  /** What the fleet port answers for any container instance (undefined: not found; an Error: thrown). */
  instance: InstanceFacts | undefined | Error;
  /** What the spot price history answers (undefined: no history; an Error: thrown). */
  spotPrice: number | undefined | Error;
  /** Fails the next TerminateJob calls with a throttling error (count). */
  failTerminations: number;
  /** Fails the next PutEvents calls with a throttling error, publishing nothing (count). */
  failPublishes: number;
  /** Token Step Functions no longer knows (sendTaskSuccess fails with TaskTimedOut). */
  readonly spentTokens: Set<string>;
  readonly ports: {
    batch: {
      terminateJob(batchJobId: string, reason: string): Promise<void>;
      lookupJob(ref: BatchJobRef): Promise<BatchJob | undefined>;
    };
    events: { publish(entries: readonly EventEntry[]): Promise<void> };
    lifecycle: {
      startExecution(name: string, input: Record<string, unknown>): Promise<{ alreadyStarted: boolean }>;
      sendTaskSuccess(token: string, output: Record<string, unknown>): Promise<void>;
    };
    fleet: {
      instanceFor(arn: string): Promise<InstanceFacts | undefined>;
      spotPriceAt(instanceType: string, az: string, atMs: number): Promise<number | undefined>;
    };
    metrics: MetricPublisher;
  };
  /** The time the stores, the ledger and the handlers' planes read. */
  readonly clock: () => Date;
  /** Every item of both tables. */
  snapshot(): Promise<{ jobs: unknown[]; budgets: unknown[] }>;
  /** Clears the recorders. */
  resetRecorded(): void;
  stop(): Promise<void>;
}

/** Starts dynalite (and s3rver when `withS3`) and builds the ports. */
export async function startEventBench(options: { withS3?: boolean; now?: Date } = {}): Promise<EventBench> {
  const now = options.now ?? new Date(T.started + 60_000);
  const dynamo = await startTestDynamo();
  let stopS3 = async () => {};
  let workspace = new Workspace(new S3Client({ region: 'us-east-1' }), 'unused');
  if (options.withS3) {
    const directory = mkdtempSync(join(tmpdir(), 'trainyard-events-s3-'));
    const bucket = 'trainyard-workspace';
    const engine = await startS3rver({ directory, buckets: [bucket] });
    const s3 = new S3Client({
      endpoint: engine.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    workspace = new Workspace(s3, bucket);
    stopS3 = async () => {
      s3.destroy();
      await engine.stop();
      rmSync(directory, { recursive: true, force: true });
    };
  }
  const recorded: Recorded = {
    terminated: [],
    published: [],
    taskSuccesses: [],
    instanceLookups: [],
    batchLookups: [],
    priceLookups: [],
    metricLines: [],
  };
  const bench = {
    dynamo,
    jobs: new JobStore(dynamo.doc, dynamo.tables.jobs, () => now),
    ledger: new BudgetLedger({
      client: dynamo.doc,
      tableName: dynamo.tables.budgets,
      thresholds: { warn: CONFIG.budgets.warnThreshold, block: CONFIG.budgets.blockThreshold },
      now: () => now,
    }),
    workspace,
    recorded,
    clock: () => now,
    batchJobs: [],
    instance: undefined,
    spotPrice: undefined,
    failTerminations: 0,
    failPublishes: 0,
    spentTokens: new Set<string>(),
  } as unknown as EventBench;
  const mutable = bench as { -readonly [K in keyof EventBench]: EventBench[K] };
  mutable.ports = {
    batch: {
      async terminateJob(batchJobId, reason) {
        if (bench.failTerminations > 0) {
          bench.failTerminations -= 1;
          throw Object.assign(new Error('Rate exceeded'), { name: 'TooManyRequestsException' });
        }
        recorded.terminated.push({ batchJobId, reason });
      },
      // DescribeJobs by id; else ListJobs filtered by name in the queue (its newest), then DescribeJobs of it.
      async lookupJob(ref) {
        recorded.batchLookups.push(ref);
        if (ref.batchJobId !== undefined) return bench.batchJobs.find((j) => j.jobId === ref.batchJobId);
        return bench.batchJobs
          .filter((j) => j.jobName === ref.jobName && j.jobQueue.endsWith(`/${ref.queue}`))
          .sort((a, b) => (b.createdAt ?? 0) - (a.createdAt ?? 0))[0];
      },
    },
    events: {
      async publish(entries) {
        if (bench.failPublishes > 0) {
          bench.failPublishes -= 1;
          throw Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' });
        }
        recorded.published.push(...entries);
      },
    },
    lifecycle: {
      async startExecution() {
        return { alreadyStarted: false };
      },
      async sendTaskSuccess(token, output) {
        if (bench.spentTokens.has(token)) {
          throw Object.assign(new Error('Task Timed Out'), { name: 'TaskTimedOut' });
        }
        recorded.taskSuccesses.push({ token, output });
        bench.spentTokens.add(token);
      },
    },
    fleet: {
      async instanceFor(arn) {
        recorded.instanceLookups.push(arn);
        if (bench.instance instanceof Error) throw bench.instance;
        return bench.instance;
      },
      async spotPriceAt(instanceType, az, atMs) {
        recorded.priceLookups.push({ instanceType, az, atMs });
        if (bench.spotPrice instanceof Error) throw bench.spotPrice;
        return bench.spotPrice;
      },
    },
    // CloudWatch has no local engine: the real EMF publisher writes its lines to the recorder.
    metrics: emfMetricPublisher((lines) => {
      recorded.metricLines.push(...lines.split('\n').filter((line) => line !== ''));
    }),
  };
  mutable.snapshot = async () => ({
    jobs: await dynamo.scanAll(dynamo.tables.jobs),
    budgets: await dynamo.scanAll(dynamo.tables.budgets),
  });
  mutable.resetRecorded = () => {
    for (const list of Object.values(recorded)) (list as unknown[]).length = 0;
  };
  mutable.stop = async () => {
    await stopS3();
    await dynamo.stop();
  };
  return bench;
}

/** Detail of every published event of a type, parsed. */
export function publishedOf(recorded: Recorded, detailType: string): Array<Record<string, unknown>> {
  return recorded.published.filter((e) => e.DetailType === detailType).map((e) => JSON.parse(e.Detail));
}
