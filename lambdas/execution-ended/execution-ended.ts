/**
 * The execution-ended handler: EventBridge "Step Functions Execution Status Change" of the job state machine with
 * status FAILED, TIMED_OUT or ABORTED → the job ends as Finalize would have ended it.
 *
 * Every failing step of the state machine is caught and routed to Finalize, so an execution ends this way only when
 * Finalize itself kept failing (its retries last about 28 minutes, or about 40 while an attempt Batch will not end
 * keeps it waiting) or Step Functions stopped it: an operator's
 * StopExecution, a timeout. Left there, the job shows a live state, its budget reservation stays held and, when it
 * was stopped mid-attempt, its container may still be running and billing with nobody left to watch it. So:
 *
 * 1. The job is the execution's name (Trainyard names each execution by its job id); a name that is no job is ignored.
 * 2. Every attempt whose end is not recorded is looked up in Batch (by its recorded Batch job id, else by queue and
 *    job name). One still queued or running gets TerminateJob (`Trainyard: job ended…`; the harness checkpoints on
 *    SIGTERM) and is looked up again every `pollMs` until Batch reports it ended; each ended one is recorded as
 *    AttemptOutcome records it (start, stop, cost and outcome, record-once). An attempt Batch has no job for never
 *    ran: recorded as ended at no cost. Past `waitMs` the handler throws {@link AttemptsStillRunning}, Lambda runs it
 *    again (twice), then the event waits in the dead-letter queue.
 * 3. Finalize, the same handler the state machine runs, with the job's final state: SUCCEEDED when its newest
 *    attempt's Batch job succeeded, CANCELLED when a cancel was requested, else FAILED with a reason naming the
 *    execution's status and error. It settles the ledger to the metered cost (or releases the reservation), sets the
 *    final state, writes the summary and report and announces the end; for a job Finalize had already made terminal
 *    it only completes what was left (its reason and state stand).
 *
 * Idempotent: the attempt writes are record-once, TerminateJob of a job already stopping changes nothing, and
 * Finalize is replay-safe; a redelivered event, or an execution an operator later redrives, finds the job as it is.
 */

import { isTerminal, JOB_ID_PATTERN, type JobRecord } from '../domain/job';
import { AttemptsStillRunning, endOpenAttempts, endWithoutOutcome } from '../lifecycle/common';
import { createFinalizeHandler, type FinalizeOutput } from '../lifecycle/finalize';
import type { ControlPlane } from '../shared/control-plane';
import {
  EXECUTION_END_STATUSES,
  type ExecutionStatusChange,
  parseExecutionStatusChangeEvent,
} from '../shared/event-schemas';
import { logger } from '../shared/logger';

/** How long one invocation waits for terminated attempts to end: under the function's 10-minute timeout. */
export const ATTEMPT_STOP_WAIT_MS = 8 * 60_000;
/** How often it looks a terminated attempt up again. */
export const ATTEMPT_STOP_POLL_MS = 10_000;

/** What one delivery did. */
export type ExecutionEndedResult =
  | { readonly action: 'ignored'; readonly why: 'not-ended' | 'not-a-job' | 'unknown-job' }
  | {
      readonly action: 'finalized';
      readonly jobId: string;
      readonly state: FinalizeOutput['state'];
      readonly costUsd: number;
      /** Batch jobs this delivery sent TerminateJob to. */
      readonly terminated: readonly string[];
    };

/** Options (tests shorten the wait). */
export interface ExecutionEndedOptions {
  /** @default ATTEMPT_STOP_WAIT_MS */
  readonly waitMs?: number;
  /** @default ATTEMPT_STOP_POLL_MS */
  readonly pollMs?: number;
  /** Waits between lookups. @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
}

type Plane = Pick<
  ControlPlane,
  'config' | 'jobs' | 'ledger' | 'workspace' | 'events' | 'batch' | 'clock' | 'metrics' | 'fleet'
>;

/** The reason a job that was still live ends with. */
export function executionEndedReason(ended: Pick<ExecutionStatusChange, 'status' | 'error' | 'cause'>): string {
  const what = { FAILED: 'failed', TIMED_OUT: 'timed out', ABORTED: 'was stopped' }[
    ended.status as 'FAILED' | 'TIMED_OUT' | 'ABORTED'
  ];
  const error = ended.error ? `: ${ended.error}${ended.cause ? ` — ${ended.cause.slice(0, 300)}` : ''}` : '';
  return `its lifecycle execution ${what} before the job was finalized${error}`;
}

/** Builds the execution-ended handler from the parts of the control plane it uses. */
export function createExecutionEndedHandler(plane: Plane, options: ExecutionEndedOptions = {}) {
  const waitMs = options.waitMs ?? ATTEMPT_STOP_WAIT_MS;
  const pollMs = options.pollMs ?? ATTEMPT_STOP_POLL_MS;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const finalize = createFinalizeHandler(plane);

  /**
   * Ends and records every attempt of the job whose end is not recorded; returns the Batch jobs it terminated and
   * the newest attempt's Batch status.
   */
  async function endAttempts(job: JobRecord): Promise<{ terminated: string[]; newestStatus?: string }> {
    const terminated = new Set<string>();
    for (let waitedMs = 0; ; waitedMs += pollMs) {
      const running = await endOpenAttempts(plane, job, terminated);
      if (running.length === 0) {
        const newest = (await plane.jobs.listAttempts(job.jobId)).at(-1);
        return { terminated: [...terminated], ...(newest ? { newestStatus: newest.status } : {}) };
      }
      if (waitedMs >= waitMs) {
        throw new AttemptsStillRunning(
          `job ${job.jobId}: attempts whose end is not recorded after ${Math.round(waitMs / 1000)} s: ${running.join(', ')}; the event is retried, and the job is finalized once Batch reports them ended (a running one was sent TerminateJob)`,
        );
      }
      await sleep(pollMs);
    }
  }

  return async function handleExecutionEnded(event: unknown): Promise<ExecutionEndedResult> {
    const ended = parseExecutionStatusChangeEvent(event);
    if (!(EXECUTION_END_STATUSES as readonly string[]).includes(ended.status)) {
      return { action: 'ignored', why: 'not-ended' };
    }
    const keys = { execution: ended.executionArn, status: ended.status };
    if (!JOB_ID_PATTERN.test(ended.name)) {
      logger.warn('execution is not named by a job id; ignored', keys);
      return { action: 'ignored', why: 'not-a-job' };
    }
    const job = await plane.jobs.getJob(ended.name);
    if (!job) {
      logger.warn('execution names a job that does not exist; ignored', keys);
      return { action: 'ignored', why: 'unknown-job' };
    }
    const { terminated, newestStatus } = await endAttempts(job);
    // Read again after the wait for the attempts (minutes, at worst): a cancel accepted meanwhile makes it CANCELLED.
    const now = (await plane.jobs.getJob(job.jobId)) ?? job;
    // The training may have finished before the execution could say so: then the job succeeded (its Batch job is
    // the evidence).
    const output = await finalize({
      jobId: job.jobId,
      ...(isTerminal(now.state) ? {} : endWithoutOutcome(now, newestStatus, executionEndedReason(ended))),
    });
    logger.info('job of an ended execution finalized', { ...keys, jobId: job.jobId, state: output.state });
    return { action: 'finalized', jobId: job.jobId, state: output.state, costUsd: output.costUsd, terminated };
  };
}
