/**
 * zod schemas for the AWS events the event-driven handlers receive from EventBridge, each checked against AWS's
 * documented example payload (test/fixtures/events/):
 *
 * - "EC2 Spot Instance Interruption Warning" (source aws.ec2; detail `instance-id`, `instance-action` = terminate |
 *   stop | hibernate), https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html;
 * - "Batch Job State Change" (source aws.batch; detail = the Batch JobDetail, camelCase),
 *   https://docs.aws.amazon.com/batch/latest/userguide/batch_job_events.html — validated by domain/batch-job.ts;
 * - "Scheduled Event" (source aws.events; the budget-watch schedule),
 *   https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-run-lambda-schedule.html;
 * - "Step Functions Execution Status Change" (source aws.states; detail `executionArn`, `stateMachineArn`, `name`,
 *   `status`, `startDate`, `stopDate`, `input`, `output`, and `error`/`cause` when it failed; dates epoch ms),
 *   https://docs.aws.amazon.com/step-functions/latest/dg/cw-events.html.
 *
 * The envelope is checked strictly where the handler depends on it (source, detail-type, time) and leniently
 * elsewhere: AWS "might add other event types, sources, and details in the future".
 */
import * as z from 'zod/mini';
import { type BatchJob, InvalidBatchJob, parseBatchJob } from '../domain/batch-job';
import { describeIssues } from '../domain/zod-issues';

/** Raised when an incoming event is not the event a handler accepts; the message names each offending field. */
export class InvalidEvent extends Error {
  override name = 'InvalidEvent';
}

/** detail-type of the EC2 spot interruption warning. */
export const SPOT_INTERRUPTION_DETAIL_TYPE = 'EC2 Spot Instance Interruption Warning';
/** detail-type of Batch job state changes. */
export const BATCH_STATE_CHANGE_DETAIL_TYPE = 'Batch Job State Change';
/** detail-type of EventBridge schedules. */
export const SCHEDULED_EVENT_DETAIL_TYPE = 'Scheduled Event';

/** detail-type of Step Functions (standard workflow) execution status changes. */
export const EXECUTION_STATUS_CHANGE_DETAIL_TYPE = 'Step Functions Execution Status Change';
/** Statuses an execution ends in, besides SUCCEEDED. */
export const EXECUTION_END_STATUSES = ['FAILED', 'TIMED_OUT', 'ABORTED'] as const;
/** Every execution status Step Functions reports in the event. */
export const EXECUTION_STATUSES = ['RUNNING', 'SUCCEEDED', 'PENDING_REDRIVE', ...EXECUTION_END_STATUSES] as const;

/** What EC2 will do to the instance at the end of the warning. */
export const SPOT_INSTANCE_ACTIONS = ['terminate', 'stop', 'hibernate'] as const;

const time = z.iso.datetime({ offset: false, error: 'must be an ISO-8601 UTC time like 2026-11-20T14:02:11Z' });

function envelope<S extends string, D extends string, T extends z.ZodMiniType>(source: S, detailType: D, detail: T) {
  return z.looseObject({
    version: z.optional(z.string()),
    id: z.string().check(z.minLength(1, 'must be the event id')),
    'detail-type': z.literal(detailType, { error: `must be "${detailType}"` }),
    source: z.literal(source, { error: `must be "${source}"` }),
    account: z.optional(z.string()),
    time,
    region: z.optional(z.string()),
    resources: z.optional(z.array(z.string())),
    detail,
  });
}

/** zod schema of "EC2 Spot Instance Interruption Warning". */
export const spotInterruptionEventSchema = envelope(
  'aws.ec2',
  SPOT_INTERRUPTION_DETAIL_TYPE,
  z.looseObject({
    'instance-id': z
      .string()
      .check(z.regex(/^i-[0-9a-f]{8,17}$/, 'must be an EC2 instance id like i-1234567890abcdef0')),
    'instance-action': z.enum(SPOT_INSTANCE_ACTIONS, {
      error: `must be one of ${SPOT_INSTANCE_ACTIONS.join(', ')}`,
    }),
  }),
);

/** zod schema of the "Batch Job State Change" envelope (the detail is validated by parseBatchJob). */
export const batchStateChangeEventSchema = envelope(
  'aws.batch',
  BATCH_STATE_CHANGE_DETAIL_TYPE,
  z.record(z.string(), z.unknown(), { error: 'must be the Batch job detail (an object)' }),
);

const optionalText = z.optional(z.nullable(z.string()));

/** zod schema of "Step Functions Execution Status Change". */
export const executionStatusChangeEventSchema = envelope(
  'aws.states',
  EXECUTION_STATUS_CHANGE_DETAIL_TYPE,
  z.looseObject({
    executionArn: z.string().check(z.regex(/^arn:[^:]+:states:/, 'must be a Step Functions execution ARN')),
    stateMachineArn: z.string().check(z.regex(/^arn:[^:]+:states:/, 'must be a Step Functions state machine ARN')),
    name: z.string().check(z.minLength(1, 'must be the execution name')),
    status: z.enum(EXECUTION_STATUSES, { error: `must be one of ${EXECUTION_STATUSES.join(', ')}` }),
    startDate: z.optional(z.nullable(z.int())),
    stopDate: z.optional(z.nullable(z.int())),
    error: optionalText,
    cause: optionalText,
  }),
);

/** zod schema of an EventBridge "Scheduled Event". */
export const scheduledEventSchema = envelope('aws.events', SCHEDULED_EVENT_DETAIL_TYPE, z.optional(z.unknown()));

/** A validated spot interruption warning. */
export interface SpotInterruption {
  readonly eventId: string;
  readonly instanceId: string;
  readonly action: (typeof SPOT_INSTANCE_ACTIONS)[number];
  /** When EC2 emitted the warning, epoch ms (the event's `time`; the same on every redelivery). */
  readonly timeMs: number;
}

/** A validated Batch job state change. */
export interface BatchStateChange {
  readonly eventId: string;
  readonly timeMs: number;
  readonly job: BatchJob;
}

/** A validated execution status change. */
export interface ExecutionStatusChange {
  readonly eventId: string;
  readonly timeMs: number;
  readonly executionArn: string;
  readonly stateMachineArn: string;
  /** The execution name (Trainyard names a job's execution by the job id). */
  readonly name: string;
  readonly status: (typeof EXECUTION_STATUSES)[number];
  readonly stopDateMs?: number;
  readonly error?: string;
  readonly cause?: string;
}

/** A validated schedule tick. */
export interface ScheduleTick {
  readonly eventId: string;
  /** The scheduled time, epoch ms (the same on every redelivery). */
  readonly timeMs: number;
}

function parseWith<T extends z.ZodMiniType>(schema: T, what: string, event: unknown): z.output<T> {
  if (typeof event !== 'object' || event === null || Array.isArray(event)) {
    const got = event === null ? 'null' : Array.isArray(event) ? 'an array' : typeof event;
    throw new InvalidEvent(`expected an EventBridge "${what}" event (a JSON object), got ${got}`);
  }
  const result = schema.safeParse(event);
  if (!result.success) throw new InvalidEvent(`invalid "${what}" event: ${describeIssues(result.error.issues)}`);
  return result.data;
}

/** Validates an "EC2 Spot Instance Interruption Warning"; throws {@link InvalidEvent}. */
export function parseSpotInterruptionEvent(event: unknown): SpotInterruption {
  const parsed = parseWith(spotInterruptionEventSchema, SPOT_INTERRUPTION_DETAIL_TYPE, event);
  return {
    eventId: parsed.id,
    instanceId: parsed.detail['instance-id'],
    action: parsed.detail['instance-action'],
    timeMs: Date.parse(parsed.time),
  };
}

/** Validates a "Batch Job State Change" and its Batch job detail; throws {@link InvalidEvent}. */
export function parseBatchStateChangeEvent(event: unknown): BatchStateChange {
  const parsed = parseWith(batchStateChangeEventSchema, BATCH_STATE_CHANGE_DETAIL_TYPE, event);
  try {
    return { eventId: parsed.id, timeMs: Date.parse(parsed.time), job: parseBatchJob(parsed.detail, 'detail') };
  } catch (error) {
    if (error instanceof InvalidBatchJob) {
      throw new InvalidEvent(`invalid "${BATCH_STATE_CHANGE_DETAIL_TYPE}" event: ${error.message}`);
    }
    throw error;
  }
}

/** Validates an EventBridge "Scheduled Event"; throws {@link InvalidEvent}. */
export function parseScheduledEvent(event: unknown): ScheduleTick {
  const parsed = parseWith(scheduledEventSchema, SCHEDULED_EVENT_DETAIL_TYPE, event);
  return { eventId: parsed.id, timeMs: Date.parse(parsed.time) };
}

/** Validates a "Step Functions Execution Status Change"; throws {@link InvalidEvent}. */
export function parseExecutionStatusChangeEvent(event: unknown): ExecutionStatusChange {
  const parsed = parseWith(executionStatusChangeEventSchema, EXECUTION_STATUS_CHANGE_DETAIL_TYPE, event);
  const { executionArn, stateMachineArn, name, status, stopDate, error, cause } = parsed.detail;
  return {
    eventId: parsed.id,
    timeMs: Date.parse(parsed.time),
    executionArn,
    stateMachineArn,
    name,
    status,
    ...(typeof stopDate === 'number' ? { stopDateMs: stopDate } : {}),
    ...(error ? { error } : {}),
    ...(cause ? { cause } : {}),
  };
}
