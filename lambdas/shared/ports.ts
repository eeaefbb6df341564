/**
 * What the control plane needs from services that have no local engine (Batch, Step Functions task tokens,
 * EventBridge, CloudWatch Logs and metrics, EC2/ECS facts). On AWS each port is an SDK adapter (aws-ports.ts); in
 * local mode and tests it is an in-process implementation that answers with AWS's documented shapes.
 */
import type { BatchJob } from '../domain/batch-job';
import type { EventEntry } from '../domain/events';
import type { MetricDatum } from '../domain/platform-metrics';

/** Which Batch job an attempt is: its id once recorded, else its queue and job name (`<jobId>-a<attempt>`). */
export interface BatchJobRef {
  readonly batchJobId?: string;
  readonly queue: string;
  readonly jobName: string;
}

/** Stops Batch jobs, and looks one up. */
export interface BatchControl {
  /** TerminateJob with a reason Batch returns as the job's statusReason (see batch-reasons.ts). */
  terminateJob(batchJobId: string, reason: string): Promise<void>;
  /**
   * The Batch job as DescribeJobs reports it: by id, or, without one, the newest job of that name in that queue
   * (ListJobs filtered by JOB_NAME, which lists every status); undefined when Batch has no such job. Optional so that
   * the doubles of handlers that never look a job up need not pretend to; the execution-ended handler requires it.
   */
  lookupJob?(ref: BatchJobRef): Promise<BatchJob | undefined>;
  /**
   * Seconds after its last sign of life within which a job Batch does not report cannot have been forgotten, so the
   * miss is Batch's lag (DescribeJobs can trail a job for a moment) and the caller looks again. @default
   * BATCH_REPORTS_JOBS_SECONDS (AWS keeps an ended job for days); local mode's runner forgets every job on a restart: 0
   */
  readonly reportsJobsForSeconds?: number;
}

/** Puts events on the platform bus. */
export interface EventPublisher {
  /** PutEvents; entries are built and validated by buildEvent. */
  publish(entries: readonly EventEntry[]): Promise<void>;
}

/** Starts and resumes job executions. */
export interface LifecycleControl {
  /** StartExecution named `name`; an execution with that name already running or done is not an error. */
  startExecution(name: string, input: Record<string, unknown>): Promise<{ alreadyStarted: boolean }>;
  /** SendTaskSuccess to a paused job's task token (resume, or cancel while paused). */
  sendTaskSuccess(taskToken: string, output: Record<string, unknown>): Promise<void>;
}

/**
 * Where a read of a log stream starts: after a position an earlier read handed back (`LogPage.next`), at the
 * stream's first line ('head'), or at its newest lines ('tail': the last `limit` of them).
 */
export type LogReadStart = { readonly after: string } | 'head' | 'tail';

/** Lines read from a log stream, and where the next read goes on from. */
export interface LogPage {
  /** Complete lines, oldest first. */
  readonly lines: string[];
  /**
   * The position just after the last line read (on AWS, GetLogEvents' nextForwardToken; locally, a byte offset):
   * read `{ after: next }` for the lines that follow. Undefined when the stream does not exist yet: read its 'head'.
   */
  readonly next?: string;
  /** Whether the read reached the end of what the stream holds now (nothing more to read until it grows). */
  readonly atEnd: boolean;
}

/** A log position that is not one the reader handed out, or one that no longer holds (CloudWatch's last 24 hours). */
export class InvalidLogPosition extends Error {
  override name = 'InvalidLogPosition';
}

/** Reads a job's container logs. */
export interface LogReader {
  /**
   * At most `limit` lines of an attempt's log stream from `start`, with the position after them, so a reader that
   * follows the stream gets every line once, however many arrive between two reads; throws InvalidLogPosition for an
   * `after` the reader cannot go on from.
   */
  readLines(logStreamName: string, start: LogReadStart, limit: number): Promise<LogPage>;
}

/** Where and how an attempt's instance runs, for metering at the price actually paid. */
export interface InstanceFacts {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly lifecycle: 'spot' | 'on-demand';
}

/** Looks up an attempt's EC2 instance and its price. */
export interface FleetFacts {
  /** The EC2 instance behind an ECS container instance (ECS DescribeContainerInstances + EC2 DescribeInstances). */
  instanceFor(containerInstanceArn: string): Promise<InstanceFacts | undefined>;
  /** Spot price per hour in effect for that type and AZ at `atMs` (EC2 DescribeSpotPriceHistory). */
  spotPriceAt(instanceType: string, availabilityZone: string, atMs: number): Promise<number | undefined>;
  /**
   * Whether spot capacity for these instance types is available now in the platform's region (the periodic check's
   * placement-score probe); undefined when it could not tell. Never throws: a failed probe must not fail the watch.
   * Optional so that fleets which cannot probe (benchmark and test doubles) need not pretend to; a fleet without it
   * answers "could not tell", and the check then keeps an on-demand job on on-demand.
   */
  spotCapacityAvailable?(instanceTypes: readonly string[]): Promise<boolean | undefined>;
}

/** Publishes Trainyard's metrics (domain/platform-metrics.ts); on AWS as EMF lines that CloudWatch Logs extracts. */
export interface MetricPublisher {
  /** Publishes `datums` as measured at `atMs`; throws InvalidMetric, publishing nothing, for a datum off-catalogue. */
  publish(datums: readonly MetricDatum[], atMs: number): Promise<void>;
}
