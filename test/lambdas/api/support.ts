/**
 * Test bench for the API handler: real dynalite (jobs, budgets) and s3rver (workspace) behind the real adapters,
 * container logs read by local mode's log reader from files the test appends to, and the ports without a local engine
 * (Batch, Step Functions, EventBridge, spot quotes) as small in-process recorders. Events are API Gateway HTTP API payload 2.0 with an IAM authorizer, as AWS sends them.
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { type ApiEvent, createApiHandler } from '../../../lambdas/api/app';
import type { ApiPlane } from '../../../lambdas/api/plane';
import type { EventEntry } from '../../../lambdas/domain/events';
import type { SpotQuote } from '../../../lambdas/domain/prices';
import { JobStore } from '../../../lambdas/shared/job-store';
import { BudgetLedger } from '../../../lambdas/shared/ledger';
import { Workspace } from '../../../lambdas/shared/workspace';
import { parseConfig, type TrainyardConfig } from '../../../lib/config';
import { startS3rver } from '../../../lib/local/engines';
import { localLogReader } from '../../../lib/local/local-ports';
import { startTestDynamo, type TestDynamo } from '../../support/dynamo';

/** Principal ARNs used by the tests. */
export const PRINCIPALS = {
  nlp: 'arn:aws:iam::123456789012:role/nlp-researchers',
  nlpSession: 'arn:aws:sts::123456789012:assumed-role/nlp-researchers/Alice.Smith@example.com',
  vision: 'arn:aws:iam::123456789012:role/vision-researchers',
  admin: 'arn:aws:iam::123456789012:role/platform-admin',
  stranger: 'arn:aws:iam::123456789012:role/someone-else',
} as const;

/** Two teams (vision may use only two tiers), one admin, small limits so limit tests stay small. */
export const TEST_CONFIG_INPUT = {
  teams: [
    { id: 'nlp', principals: [PRINCIPALS.nlp], monthlyBudgetUsd: 1000 },
    { id: 'vision', principals: [PRINCIPALS.vision], monthlyBudgetUsd: 400, tiers: ['cpu-small', 'gpu-small'] },
  ],
  admins: [PRINCIPALS.admin],
  limits: { maxInlineBundleKiB: 8, maxBundleMiB: 1, maxEnvVars: 3 },
};

/** Everything the ports were asked to do. */
export interface Recorded {
  readonly terminated: Array<{ batchJobId: string; reason: string }>;
  readonly published: EventEntry[];
  readonly executions: Map<string, Record<string, unknown>>;
  readonly startCalls: string[];
  readonly taskSuccesses: Array<{ token: string; output: Record<string, unknown> }>;
  /** Task tokens Step Functions no longer knows (sendTaskSuccess fails with TaskTimedOut). */
  readonly spentTokens: Set<string>;
  /** Set to make the next StartExecution fail the way a dropped connection does (then it clears). */
  failNextStart: boolean;
}

/** A running bench. */
export interface ApiBench {
  readonly config: TrainyardConfig;
  readonly dynamo: TestDynamo;
  readonly workspace: Workspace;
  readonly jobs: JobStore;
  readonly ledger: BudgetLedger;
  readonly recorded: Recorded;
  /** Current quotes the spot port answers with (undefined: EC2 unavailable). */
  quotes: SpotQuote[] | undefined;
  /** The clock every part uses. */
  now: Date;
  readonly handler: (event: ApiEvent) => Promise<APIGatewayProxyStructuredResultV2>;
  /** Sends a request and returns the status and parsed body. */
  call(request: RequestSpec): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Appends lines to a container log stream, as the awslogs driver would (local mode's file layout). */
  appendLog(logStreamName: string, lines: readonly string[]): void;
  /** Every item of both tables and every object key in the bucket: compare before/after a refused request. */
  snapshot(): Promise<{ jobs: unknown[]; budgets: unknown[]; objects: string[] }>;
  stop(): Promise<void>;
}

/** One request. */
export interface RequestSpec {
  readonly method: string;
  readonly path: string;
  /** Principal ARN; null sends no authorizer context at all. */
  readonly as?: string | null;
  /** An object is sent as JSON; a string as is. */
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
  readonly query?: Record<string, string>;
  readonly base64?: boolean;
}

/** An HTTP API payload 2.0 event with an IAM authorizer, shaped as API Gateway delivers it. */
export function apiEvent(spec: RequestSpec): ApiEvent {
  const as = spec.as === undefined ? PRINCIPALS.nlp : spec.as;
  const rawBody =
    spec.body === undefined ? undefined : typeof spec.body === 'string' ? spec.body : JSON.stringify(spec.body);
  const body = rawBody !== undefined && spec.base64 ? Buffer.from(rawBody).toString('base64') : rawBody;
  const query = spec.query ?? {};
  const account = as ? (/::(\d{12}):/.exec(as)?.[1] ?? '123456789012') : '123456789012';
  return {
    version: '2.0',
    routeKey: `${spec.method} ${spec.path}`,
    rawPath: spec.path,
    rawQueryString: new URLSearchParams(query).toString(),
    headers: {
      'content-type': 'application/json',
      host: 'abc123.execute-api.us-east-1.amazonaws.com',
      ...spec.headers,
    },
    ...(Object.keys(query).length > 0 && { queryStringParameters: query }),
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc123',
      domainName: 'abc123.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'abc123',
      http: { method: spec.method, path: spec.path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.1', userAgent: 'vitest' },
      requestId: 'req-1',
      routeKey: `${spec.method} ${spec.path}`,
      stage: '$default',
      time: '15/Mar/2026:12:00:00 +0000',
      timeEpoch: 1773576000000,
      authorizer: as
        ? {
            iam: {
              accessKey: 'ASIAEXAMPLE',
              accountId: account,
              callerId: 'AROAEXAMPLE:session',
              cognitoIdentity: null,
              principalOrgId: null,
              userArn: as,
              userId: 'AROAEXAMPLE:session',
            },
          }
        : undefined,
    },
    ...(body !== undefined && { body }),
    isBase64Encoded: Boolean(spec.base64),
    // AWS sends null for cognitoIdentity and principalOrgId outside those features; the types say string.
  } as unknown as ApiEvent;
}

/** Starts the engines and builds the handler over them. */
export async function startApiBench(configInput: unknown = TEST_CONFIG_INPUT): Promise<ApiBench> {
  const config = parseConfig(configInput, 'test config');
  const dynamo = await startTestDynamo();
  const directory = mkdtempSync(join(tmpdir(), 'trainyard-api-s3-'));
  const bucket = 'trainyard-workspace';
  const s3engine = await startS3rver({ directory, buckets: [bucket] });
  const s3 = new S3Client({
    endpoint: s3engine.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const logsDir = mkdtempSync(join(tmpdir(), 'trainyard-api-logs-'));
  const recorded: Recorded = {
    terminated: [],
    published: [],
    executions: new Map(),
    startCalls: [],
    taskSuccesses: [],
    spentTokens: new Set(),
    failNextStart: false,
  };
  let seq = 0;
  const bench = {
    config,
    dynamo,
    recorded,
    quotes: undefined as SpotQuote[] | undefined,
    now: new Date('2026-03-15T12:00:00.000Z'),
  } as ApiBench;
  const clock = () => bench.now;
  const workspace = new Workspace(s3, bucket);
  const jobs = new JobStore(dynamo.doc, dynamo.tables.jobs, clock);
  const ledger = new BudgetLedger({
    client: dynamo.doc,
    tableName: dynamo.tables.budgets,
    thresholds: { warn: config.budgets.warnThreshold, block: config.budgets.blockThreshold },
    now: clock,
  });
  const plane: ApiPlane = {
    config,
    jobs,
    ledger,
    workspace,
    batch: {
      async terminateJob(batchJobId, reason) {
        recorded.terminated.push({ batchJobId, reason });
      },
    },
    events: {
      async publish(entries) {
        recorded.published.push(...entries);
      },
    },
    lifecycle: {
      // Like Step Functions: an execution name is used once; starting it again is not a second execution.
      async startExecution(name, input) {
        recorded.startCalls.push(name);
        if (recorded.failNextStart) {
          recorded.failNextStart = false;
          throw Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
        }
        if (recorded.executions.has(name)) return { alreadyStarted: true };
        recorded.executions.set(name, input);
        return { alreadyStarted: false };
      },
      async sendTaskSuccess(token, output) {
        if (recorded.spentTokens.has(token)) {
          throw Object.assign(new Error('Task Timed Out'), { name: 'TaskTimedOut' });
        }
        recorded.taskSuccesses.push({ token, output });
        recorded.spentTokens.add(token);
      },
    },
    logs: localLogReader(logsDir),
    spotQuotes: {
      async quotesFor(types) {
        return bench.quotes?.filter((q) => types.includes(q.instanceType));
      },
    },
    batchPrefix: 'trainyard',
    clock,
    newId: () => {
      seq += 1;
      return `j${String(seq).padStart(6, '0')}`;
    },
  };
  const handler = createApiHandler(plane);
  Object.assign(bench, {
    workspace,
    jobs,
    ledger,
    handler,
    async call(spec: RequestSpec) {
      const result = await handler(apiEvent(spec));
      return { status: result.statusCode ?? 0, body: JSON.parse(result.body ?? 'null') as Record<string, unknown> };
    },
    appendLog(logStreamName: string, lines: readonly string[]) {
      const file = join(logsDir, `${logStreamName}.log`);
      mkdirSync(dirname(file), { recursive: true });
      appendFileSync(file, lines.map((line) => `${line}\n`).join(''));
    },
    async snapshot() {
      return {
        jobs: await dynamo.scanAll(dynamo.tables.jobs),
        budgets: await dynamo.scanAll(dynamo.tables.budgets),
        objects: (await workspace.list('')).map((o) => o.key).sort(),
      };
    },
    async stop() {
      s3.destroy();
      await s3engine.stop();
      await dynamo.stop();
      rmSync(directory, { recursive: true, force: true });
      rmSync(logsDir, { recursive: true, force: true });
    },
  });
  return bench;
}

export { projectBundle, projectFiles } from '../../support/projects';

/** The error body of a response, typed. */
export function errorOf(body: Record<string, unknown>): {
  code: string;
  message: string;
  details?: Record<string, unknown>;
} {
  return body.error as { code: string; message: string; details?: Record<string, unknown> };
}
