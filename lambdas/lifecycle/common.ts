/**
 * Helpers the lifecycle steps share: job events and derived counters. Counters are derived from the
 * attempt records every time rather than incremented, so a replayed step cannot count an attempt twice.
 */
import {
  buildEvent,
  type DetailType,
  type EventDetailInput,
  type EventEntry,
  type JobIdentity,
  jobIdentity,
} from '../domain/events';
import type { AttemptRecord, JobCounters, JobRecord } from '../domain/job';

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
