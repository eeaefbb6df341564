/**
 * `Job Started`, published once an attempt's start is recorded, at least once.
 *
 * Whoever records an attempt's `startedAt` (batch-events on Batch's RUNNING; batch-events or AttemptOutcome recording
 * the stop when RUNNING comes late or never) announces the start after its write, from the attempt as stored, then
 * marks it announced (`startAnnounced`). Announcing after the write means a start that was never recorded (a Batch job
 * its attempt does not own, whose write the store refused) is never announced. Announcing from the stored record
 * means every writer publishes the same event. A writer that fails between its write and the mark leaves the start
 * unannounced, and the retry of the same delivery or task announces it: every path that records a start calls this
 * on a replay too. The deterministic eventId lets a consumer drop the rare duplicate.
 */
import { type JobIdentity, jobStartedEvent } from '../domain/events';
import type { AttemptRecord } from '../domain/job';
import type { ControlPlane } from './control-plane';
import { logger } from './logger';

/**
 * Announces the start of `attempt` (as stored) when it is recorded as started by `batchJobId` and not yet announced;
 * returns whether it published.
 */
export async function announceStart(
  plane: Pick<ControlPlane, 'jobs' | 'events'>,
  job: JobIdentity,
  attempt: AttemptRecord | undefined,
  batchJobId: string,
): Promise<boolean> {
  if (attempt?.startedAt === undefined || attempt.startAnnounced || attempt.batchJobId !== batchJobId) return false;
  if (attempt.usdPerHour === undefined) {
    // Every writer of startedAt writes the price with it; a record without one cannot say what the start costs.
    logger.warn('attempt recorded as started without a price; its start is not announced', {
      jobId: job.jobId,
      attempt: attempt.attempt,
      batchJobId,
    });
    return false;
  }
  const { startedAt, usdPerHour } = attempt;
  await plane.events.publish([jobStartedEvent(job, attempt, { batchJobId, startedAt, usdPerHour })]);
  await plane.jobs.updateAttempt(job.jobId, attempt.attempt, { startAnnounced: true }, 'startAnnounced');
  return true;
}
