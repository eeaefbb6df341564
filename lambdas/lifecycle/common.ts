/**
 * Helpers the lifecycle steps share: job events, the record of an ended attempt and derived counters. Counters are derived from the
 * attempt records every time rather than incremented, so a replayed step cannot count an attempt twice.
 */

import { costOfAttempt } from '../domain/attempt-cost';
import type { BatchJob } from '../domain/batch-job';
import { attemptJobName } from '../domain/batch-names';
import { TERMINATE_REASONS } from '../domain/batch-reasons';
import {
  buildEvent,
  type DetailType,
  type EventDetailInput,
  type EventEntry,
  type JobIdentity,
  jobIdentity,
} from '../domain/events';
import { type AttemptRecord, type JobCounters, type JobRecord, tierOfJob } from '../domain/job';
import { type AttemptOutcome, classifyAttemptOutcome } from '../domain/outcome';
import type { ControlPlane } from '../shared/control-plane';
import { logger } from '../shared/logger';
import { announceStart } from '../shared/start-announcement';

/**
 * Raised when an attempt's Batch job is still queued or running where it should have ended (TerminateJob was sent):
 * the caller is run again (Lambda's retries for execution-ended, the state machine's for AttemptOutcome).
 */
export class AttemptsStillRunning extends Error {
  override name = 'AttemptsStillRunning';
}

/** Raised when the Batch port cannot look jobs up (a wiring error: the AWS and local ports can). */
export class BatchLookupUnavailable extends Error {
  override name = 'BatchLookupUnavailable';
}

/**
 * Raised instead of recording "not run" when batch-events recorded a Batch job for the attempt after the caller
 * looked it up and found none (ListJobs had not caught up): the caller looks it up again, by its id.
 */
export class AttemptGotBatchJob extends Error {
  override name = 'AttemptGotBatchJob';
}

/** An attempt's Batch job: by its recorded id, else the newest of its name in its queue; undefined if Batch has none. */
export async function lookUpAttempt(
  plane: Pick<ControlPlane, 'batch'>,
  job: Pick<JobRecord, 'jobId'>,
  attempt: Pick<AttemptRecord, 'attempt' | 'batchJobId' | 'queue'>,
): Promise<BatchJob | undefined> {
  if (!plane.batch.lookupJob) {
    throw new BatchLookupUnavailable('the Batch port cannot look jobs up (lookupJob), so attempts cannot be ended');
  }
  return plane.batch.lookupJob({
    ...(attempt.batchJobId ? { batchJobId: attempt.batchJobId } : {}),
    queue: attempt.queue,
    jobName: attemptJobName(job.jobId, attempt.attempt),
  });
}

/** A job event with the job's identity filled in. */
export function jobEvent<T extends DetailType>(
  type: T,
  job: JobIdentity,
  detail: Omit<EventDetailInput<T>, keyof JobIdentity | 'occurredAt'>,
  at: Date,
): EventEntry<T> {
  return buildEvent(type, {
    ...jobIdentity(job),
    ...detail,
    occurredAt: at.toISOString(),
  } as unknown as EventDetailInput<T>);
}

/** Counters as the attempts that have ended say, optionally leaving out one attempt (the one being decided). */
export function countersFrom(attempts: readonly AttemptRecord[], exceptAttempt?: number): JobCounters {
  const ended = attempts.filter((a) => a.outcome && a.attempt !== exceptAttempt);
  const count = (kinds: string[]) => ended.filter((a) => kinds.includes(a.outcome?.kind ?? '')).length;
  return {
    attempts: ended.length,
    reclaims: count(['reclaimed']),
    capacityCancellations: count(['capacity-starved']),
    appErrors: count(['app-error']),
    infraErrors: count(['infra-error']),
    resumeFailures: count(['resume-failed']),
  };
}

/** Seconds since the job was submitted. */
export function secondsSince(job: Pick<JobRecord, 'createdAt'>, now: Date): number {
  return Math.max(0, Math.floor((now.getTime() - Date.parse(job.createdAt)) / 1000));
}

/** Compute done so far, from the harness's progress fraction and the estimated total. */
export function progressSeconds(job: Pick<JobRecord, 'progress' | 'estimate'>): number {
  return Math.round((job.progress?.fraction ?? 0) * (job.estimate?.runtimeSeconds ?? 0));
}

/**
 * Records how an attempt ended, once (record-once on stoppedAt, then on outcome), and returns its outcome: from its
 * ended Batch job (the start too, announced with `Job Started`, when batch-events has not recorded it yet), or, for
 * an attempt that never ran, `notRun` says why (an infra-error to retry, no cost). A replay, or a second writer after
 * batch-events, writes nothing new: the figures are those of the same pure functions.
 *
 * "Not run" of an attempt that had no Batch job when the caller looked is written only while none is recorded:
 * batch-events records a Batch job only while no end is (and stops one that comes after), so a job Batch did create
 * is never both running and recorded as not run. When batch-events won that race this throws
 * {@link AttemptGotBatchJob}, and the caller looks the attempt up again.
 */
export async function recordAttemptEnd(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'events'>,
  job: JobRecord,
  attempt: AttemptRecord,
  ended: BatchJob | { notRun: string },
  now: Date,
): Promise<AttemptOutcome> {
  const { jobId } = job;
  let outcome: AttemptOutcome;
  if ('notRun' in ended) {
    outcome = { kind: 'infra-error', reason: `the attempt did not run: ${ended.notRun}`, resumable: true };
    const written = await plane.jobs.updateAttempt(
      jobId,
      attempt.attempt,
      { status: 'FAILED', stoppedAt: now.getTime(), costUsd: 0 },
      attempt.batchJobId === undefined ? ['stoppedAt', 'batchJobId'] : 'stoppedAt',
    );
    if (!written) {
      const stored = await plane.jobs.getAttempt(jobId, attempt.attempt);
      // Refused for a Batch job the caller did not know of (whether or not its end is recorded too), not a replay.
      if (stored?.batchJobId !== undefined && stored.batchJobId !== attempt.batchJobId) {
        throw new AttemptGotBatchJob(
          `job ${jobId} attempt ${attempt.attempt}: Batch reported job ${stored.batchJobId} for it after it was looked up and not found; it is looked up again`,
        );
      }
    }
  } else {
    outcome = classifyAttemptOutcome(ended, { noticeRecorded: attempt.noticeAt !== undefined });
    const cost = costOfAttempt(attempt, ended, tierOfJob(plane.config, job));
    const written = await plane.jobs.updateAttempt(
      jobId,
      attempt.attempt,
      {
        batchJobId: ended.jobId,
        status: ended.status,
        startedAt: cost.startedAt,
        stoppedAt: cost.stoppedAt ?? now.getTime(),
        usdPerHour: cost.usdPerHour,
        costUsd: cost.costUsd,
        logStreamName: ended.attempts.at(-1)?.container?.logStreamName ?? ended.container?.logStreamName,
      },
      'stoppedAt',
    );
    // When Batch's RUNNING has not reached batch-events, this write recorded the start too; announce it (a replay
    // announces what a failed first run recorded and did not).
    await announceStart(plane, job, written ?? (await plane.jobs.getAttempt(jobId, attempt.attempt)), ended.jobId);
  }
  await plane.jobs.updateAttempt(jobId, attempt.attempt, { outcome }, 'outcome');
  return outcome;
}

/**
 * One pass over the attempts of a job that is ending whose end is not recorded: each is looked up in Batch; one Batch
 * has no job for never ran (recorded as such, at no cost), one Batch ended is recorded as AttemptOutcome records it,
 * and one still queued or running gets TerminateJob (`Trainyard: job ended…`; the harness checkpoints on SIGTERM),
 * once per Batch job in `terminated`, which the caller keeps across passes. Returns the attempts still in Batch, as
 * text for the caller's AttemptsStillRunning; none left means every attempt's end and cost are recorded.
 */
export async function endOpenAttempts(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'events' | 'batch' | 'clock'>,
  job: JobRecord,
  terminated: Set<string>,
): Promise<string[]> {
  const attempts = await plane.jobs.listAttempts(job.jobId);
  const running: string[] = [];
  for (const attempt of attempts.filter((a) => a.stoppedAt === undefined || a.outcome === undefined)) {
    const batchJob = await lookUpAttempt(plane, job, attempt);
    const now = plane.clock();
    if (!batchJob) {
      try {
        await recordAttemptEnd(plane, job, attempt, { notRun: 'the job ended before it reached Batch' }, now);
      } catch (error) {
        if (!(error instanceof AttemptGotBatchJob)) throw error;
        running.push(`attempt ${attempt.attempt} (its Batch job appeared; looked up again)`);
      }
    } else if (batchJob.status === 'SUCCEEDED' || batchJob.status === 'FAILED') {
      await recordAttemptEnd(plane, job, attempt, batchJob, now);
    } else {
      if (!terminated.has(batchJob.jobId)) {
        await plane.batch.terminateJob(batchJob.jobId, TERMINATE_REASONS.jobEnded);
        terminated.add(batchJob.jobId);
        logger.warn('the job is ending with an attempt still in Batch; its Batch job is terminated', {
          jobId: job.jobId,
          attempt: attempt.attempt,
          batchJobId: batchJob.jobId,
          status: batchJob.status,
        });
      }
      running.push(`${batchJob.jobId} (attempt ${attempt.attempt}, ${batchJob.status})`);
    }
  }
  return running;
}
