/**
 * Helpers the lifecycle steps share: job events, the record of an ended attempt and derived counters. Counters are derived from the
 * attempt records every time rather than incremented, so a replayed step cannot count an attempt twice.
 */

import { costOfAttempt } from '../domain/attempt-cost';
import type { BatchJob } from '../domain/batch-job';
import {
  buildEvent,
  type DetailType,
  type EventDetailInput,
  type EventEntry,
  type JobIdentity,
  jobIdentity,
  startAnnouncedWithStop,
} from '../domain/events';
import { type AttemptRecord, type JobCounters, type JobRecord, tierOfJob } from '../domain/job';
import { type AttemptOutcome, classifyAttemptOutcome } from '../domain/outcome';
import type { ControlPlane } from '../shared/control-plane';

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
    await plane.jobs.updateAttempt(
      jobId,
      attempt.attempt,
      { status: 'FAILED', stoppedAt: now.getTime(), costUsd: 0 },
      'stoppedAt',
    );
  } else {
    outcome = classifyAttemptOutcome(ended, { noticeRecorded: attempt.noticeAt !== undefined });
    const cost = costOfAttempt(attempt, ended, tierOfJob(plane.config, job));
    // Batch's RUNNING has not reached batch-events yet: this write records the start, so it announces it.
    const start = startAnnouncedWithStop(job, attempt, ended.jobId, cost);
    if (start.length > 0) await plane.events.publish(start);
    await plane.jobs.updateAttempt(
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
  }
  await plane.jobs.updateAttempt(jobId, attempt.attempt, { outcome }, 'outcome');
  return outcome;
}
