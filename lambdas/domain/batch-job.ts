/**
 * The AWS Batch job detail, as one zod schema for the three places Trainyard receives it:
 *
 * - `DescribeJobs` (`jobs[]`, the JobDetail type) and the EventBridge "Batch Job State Change" event's `detail`
 *   ("The detail section resembles the JobDetail object that's returned from a DescribeJobs API operation",
 *   https://docs.aws.amazon.com/batch/latest/userguide/batch_job_events.html) — camelCase keys;
 * - Step Functions' `batch:submitJob.sync`: the task's output on success, and the JSON string in the `Cause` of
 *   `States.TaskFailed` on failure. Step Functions serialises the same JobDetail with PascalCase keys
 *   (`{"Attempts":[{"Container":{"ExitCode":1,...},"StatusReason":"Essential container in task exited"}],
 *   "Status":"FAILED",...}`, as recorded from real executions in NASA-IMPACT/hls-orchestration
 *   layers/hls_lambda_layer/python/hls_lambda_layer/batch_test_events.py).
 *
 * Both spellings are accepted: the structural keys Trainyard reads are normalised to camelCase before validation,
 * user-chosen keys (tags, parameters) are left as they are, and unknown keys pass through because AWS "might add
 * other event types, sources, and details in the future" (https://docs.aws.amazon.com/batch/latest/userguide/batch_cwe_events.html).
 * Timestamps are epoch milliseconds, as Batch reports them.
 */
import * as z from 'zod/mini';
import { describeIssues } from './zod-issues';

/** Raised when a Batch job payload (or a `States.TaskFailed` Cause) is not a Batch job detail; says what was wrong. */
export class InvalidBatchJob extends Error {
  override name = 'InvalidBatchJob';
}

/** Batch job statuses (https://docs.aws.amazon.com/batch/latest/userguide/job_states.html). */
export const BATCH_JOB_STATUSES = [
  'SUBMITTED',
  'PENDING',
  'RUNNABLE',
  'STARTING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
] as const;

/** One of the Batch job statuses. */
export type BatchJobStatus = (typeof BATCH_JOB_STATUSES)[number];

const epochMs = z.int().check(z.nonnegative());

const containerSchema = z.looseObject({
  containerInstanceArn: z.optional(z.string()),
  taskArn: z.optional(z.string()),
  exitCode: z.optional(z.int()),
  reason: z.optional(z.string()),
  logStreamName: z.optional(z.string()),
});

const attemptSchema = z.looseObject({
  container: z.optional(containerSchema),
  startedAt: z.optional(epochMs),
  stoppedAt: z.optional(epochMs),
  statusReason: z.optional(z.string()),
});

/**
 * zod schema of the Batch job detail (lenient: unknown keys pass through). Apply {@link normaliseBatchJobKeys} first.
 * What the API reference (JobDetail) leaves optional is optional here: a just-submitted job comes without `attempts`,
 * `jobArn` or even `createdAt` in AWS's own DescribeJobs example; no attempts reads as none.
 */
export const batchJobSchema = z.looseObject({
  jobArn: z.optional(z.string().check(z.minLength(1))),
  jobName: z.string().check(z.minLength(1)),
  jobId: z.string().check(z.minLength(1)),
  jobQueue: z.string().check(z.minLength(1)),
  status: z.enum(BATCH_JOB_STATUSES),
  statusReason: z.optional(z.string()),
  createdAt: z.optional(epochMs),
  startedAt: z.optional(epochMs),
  stoppedAt: z.optional(epochMs),
  attempts: z._default(z.array(attemptSchema), []),
  container: z.optional(containerSchema),
  tags: z.optional(z.record(z.string(), z.string())),
  parameters: z.optional(z.record(z.string(), z.string())),
  timeout: z.optional(z.looseObject({ attemptDurationSeconds: z.optional(z.int().check(z.positive())) })),
  jobDefinition: z.string().check(z.minLength(1)),
});

/** A validated Batch job detail (camelCase keys). */
export type BatchJob = z.output<typeof batchJobSchema>;

/** One attempt of a Batch job. */
export type BatchJobAttempt = BatchJob['attempts'][number];

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `ExitCode` → `exitCode`; a key already spelled in camelCase wins over its PascalCase twin. */
function camelKeys(value: unknown, nested: Record<string, (v: unknown) => unknown> = {}): unknown {
  if (!isRecord(value)) return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value)) {
    const camel = key.charAt(0).toLowerCase() + key.slice(1);
    if (camel !== key && Object.hasOwn(value, camel)) continue;
    const transform = nested[camel];
    out[camel] = transform ? transform(v) : v;
  }
  return out;
}

const camelContainer = (v: unknown) => camelKeys(v);
const camelAttempt = (v: unknown) => camelKeys(v, { container: camelContainer });

/**
 * Rewrites the structural keys of a job detail from Step Functions' PascalCase to the API's camelCase: the top
 * level, `attempts[]`, `attempts[].container`, `container`, `timeout` and `retryStrategy`. Tag and parameter keys
 * are user data and keep their spelling.
 */
export function normaliseBatchJobKeys(value: unknown): unknown {
  return camelKeys(value, {
    attempts: (v) => (Array.isArray(v) ? v.map(camelAttempt) : v),
    container: camelContainer,
    timeout: (v) => camelKeys(v),
    retryStrategy: (v) => camelKeys(v),
  });
}

/** Validates a Batch job detail in either spelling (DescribeJobs/EventBridge camelCase, Step Functions PascalCase). */
export function parseBatchJob(value: unknown, source = 'Batch job detail'): BatchJob {
  if (!isRecord(value)) {
    throw new InvalidBatchJob(
      `${source} must be a JSON object (a Batch JobDetail), got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`,
    );
  }
  const result = batchJobSchema.safeParse(normaliseBatchJobKeys(value));
  if (!result.success) {
    throw new InvalidBatchJob(`${source} is not a valid Batch job detail: ${describeIssues(result.error.issues)}`);
  }
  return result.data;
}

/**
 * Parses the `Cause` of a `States.TaskFailed` from `batch:submitJob.sync`: a JSON string holding the Batch job
 * detail. Throws {@link InvalidBatchJob} naming what was wrong (not JSON, not an object, or which fields failed).
 */
export function parseBatchFailureCause(cause: string): BatchJob {
  let parsed: unknown;
  try {
    parsed = JSON.parse(cause);
  } catch (error) {
    const preview = cause.length > 80 ? `${cause.slice(0, 80)}…` : cause;
    const why = error instanceof Error ? error.message : String(error);
    throw new InvalidBatchJob(
      `States.TaskFailed Cause is not JSON (${why}); expected the Batch job detail as a JSON string, got ${JSON.stringify(preview)}`,
    );
  }
  return parseBatchJob(parsed, 'States.TaskFailed Cause');
}
