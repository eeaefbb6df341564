/**
 * The interruption handler: EventBridge "EC2 Spot Instance Interruption Warning" → stop every attempt still running
 * on that instance early so its container gets SIGTERM (and checkpoints) well inside the two-minute warning. Batch
 * reuses warm instances and packs jobs onto large ones: the instance's other attempts, of this job or others, have
 * ended or run beside it.
 *
 * Order and idempotency (EventBridge delivers at least once): the attempt's `noticeAt` is the record-once marker.
 * A delivery that finds it set changes nothing and calls nothing. Otherwise the handler calls TerminateJob and only
 * then records `noticeAt` (updateAttempt(..., 'noticeAt')). Recording last means a failure part-way (TerminateJob
 * throttled) makes the Lambda fail and EventBridge retry the whole thing, instead of leaving a recorded notice whose
 * TerminateJob never happened; the price is a repeated TerminateJob (harmless on a job that is already stopping) only
 * after such a failure. The `SpotInterruptions` metric counts the notice once, after it is recorded.
 *
 * It announces nothing: `Job Interrupted` is the attempt's end, which AttemptOutcome publishes once Batch reports it
 * (cause reclaimed, since the notice is recorded), with Batch's reason and stop time. An event at the warning would
 * take that event's id with a warning's time and reason, and would be wrong for an attempt that then finishes.
 */
import { TERMINATE_REASONS } from '../domain/batch-reasons';
import type { AttemptRecord } from '../domain/job';
import type { ControlPlane } from '../shared/control-plane';
import { parseSpotInterruptionEvent, type SpotInterruption } from '../shared/event-schemas';
import { logger } from '../shared/logger';

/** What one delivery did to one attempt running on the warned instance. */
export type AttemptNotice =
  | { readonly action: 'replay'; readonly jobId: string; readonly attempt: number }
  | {
      readonly action: 'stopped';
      readonly jobId: string;
      readonly attempt: number;
      /** False when the attempt had no Batch job id yet, so there was nothing to terminate. */
      readonly terminated: boolean;
    };

/** What one delivery did. */
export type InterruptionResult =
  | { readonly action: 'ignored'; readonly why: 'unknown-instance' | 'attempt-ended' }
  | { readonly action: 'handled'; readonly attempts: readonly AttemptNotice[] };

/** Builds the interruption handler from the parts of the control plane it uses. */
export function createInterruptionHandler(plane: Pick<ControlPlane, 'config' | 'jobs' | 'batch' | 'metrics'>) {
  /** Stops one attempt running on the warned instance, or finds that a delivery before this one did. */
  async function noticeAttempt(notice: SpotInterruption, attempt: AttemptRecord): Promise<AttemptNotice> {
    const keys = { jobId: attempt.jobId, attempt: attempt.attempt, instanceId: notice.instanceId };
    if (attempt.noticeAt !== undefined) {
      logger.info('spot interruption warning already handled', keys);
      return { action: 'replay', jobId: attempt.jobId, attempt: attempt.attempt };
    }
    const job = await plane.jobs.requireJob(attempt.jobId);
    let terminated = false;
    if (attempt.batchJobId) {
      await plane.batch.terminateJob(attempt.batchJobId, TERMINATE_REASONS.spotNotice);
      terminated = true;
    } else {
      logger.warn('spot interruption warning for an attempt with no Batch job id; nothing to terminate', keys);
    }
    const recorded = await plane.jobs.updateAttempt(
      attempt.jobId,
      attempt.attempt,
      { noticeAt: notice.timeMs },
      'noticeAt',
    );
    // Counted by the delivery whose write recorded the notice, so neither a redelivery (which finds it) nor a
    // concurrent duplicate (whose record-once write is refused) counts it twice.
    if (recorded && plane.config.observability.platformMetrics) {
      await plane.metrics.publish(
        [{ metric: 'SpotInterruptions', value: 1, dimensions: { Tier: job.tier } }],
        notice.timeMs,
      );
    }
    logger.info('spot interruption warning handled', { ...keys, terminated });
    return { action: 'stopped', jobId: attempt.jobId, attempt: attempt.attempt, terminated };
  }

  return async function handleSpotInterruption(event: unknown): Promise<InterruptionResult> {
    const notice = parseSpotInterruptionEvent(event);
    const attempts = await plane.jobs.findAttemptsByInstance(notice.instanceId);
    if (attempts.length === 0) {
      // Any spot instance in the account raises this event; most are not ours. One of ours whose attempt batch-events
      // has not recorded yet (still starting) is told by the harness instead: it reads the notice from IMDS, and its
      // progress.json says so, which AttemptOutcome reads when it classifies the exit 75 (outcome.ts rule 8).
      logger.info('spot interruption warning for an instance no attempt ran on', { instanceId: notice.instanceId });
      return { action: 'ignored', why: 'unknown-instance' };
    }
    // The attempts of other jobs that ran there before, on a warm instance Batch reused, have ended; every attempt
    // still running there (Batch may pack several onto one instance) loses the instance.
    const running = attempts.filter((attempt) => attempt.stoppedAt === undefined);
    if (running.length === 0) {
      // An attempt that lands there later and is still starting is told of the notice by its harness (above).
      logger.info('spot interruption warning for an instance whose attempts have all ended', {
        instanceId: notice.instanceId,
        attempts: attempts.length,
      });
      return { action: 'ignored', why: 'attempt-ended' };
    }
    // One by one: a failure part-way fails the delivery, and EventBridge's retry finds the attempts already
    // stopped recorded (replays) and stops the rest.
    const handled: AttemptNotice[] = [];
    for (const attempt of running) handled.push(await noticeAttempt(notice, attempt));
    return { action: 'handled', attempts: handled };
  };
}
