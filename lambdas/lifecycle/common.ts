/**
 * Helpers the lifecycle steps share: job events, derived counters and the tier lookup. Counters are derived from the
 * attempt records every time rather than incremented, so a replayed step cannot count an attempt twice.
 */
import { findTier, type TierConfig, type TrainyardConfig } from '../../lib/config';
import { scopesForJob } from '../domain/budgets';
import { buildEvent, type DetailType, type EventDetailInput, type EventEntry } from '../domain/events';
import type { AttemptRecord, JobCounters, JobRecord } from '../domain/job';

/** Raised when a job names a tier the configuration no longer has. */
export class UnknownJobTier extends Error {
  override name = 'UnknownJobTier';
}

/** The job's tier from config. */
export function tierOf(config: TrainyardConfig, job: Pick<JobRecord, 'tier' | 'jobId'>): TierConfig {
  const tier = findTier(config, job.tier);
  if (!tier)
    throw new UnknownJobTier(`job ${job.jobId} runs on tier ${job.tier}, which the configuration no longer defines`);
  return tier;
}

/** A job event with the job's identity filled in. */
export function jobEvent<T extends DetailType>(
  type: T,
  job: Pick<JobRecord, 'jobId' | 'team' | 'user' | 'project'>,
  detail: Omit<EventDetailInput<T>, 'jobId' | 'team' | 'user' | 'project' | 'occurredAt'>,
  at: Date,
): EventEntry<T> {
  const identity = {
    jobId: job.jobId,
    team: job.team,
    user: job.user,
    ...(job.project ? { project: job.project } : {}),
  };
  return buildEvent(type, { ...identity, ...detail, occurredAt: at.toISOString() } as unknown as EventDetailInput<T>);
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
  };
}

/**
 * Reclaims and capacity cancellations since the job last moved back to spot (an on-demand attempt followed by a
 * spot one), which is what the placement policy counts.
 */
export function sinceLastSpotMove(attempts: readonly AttemptRecord[], exceptAttempt?: number) {
  const ordered = [...attempts].filter((a) => a.attempt !== exceptAttempt).sort((a, b) => a.attempt - b.attempt);
  let start = 0;
  ordered.forEach((a, i) => {
    if (i > 0 && a.capacity === 'spot' && ordered[i - 1]?.capacity === 'on-demand') start = i;
  });
  const window = ordered.slice(start).filter((a) => a.outcome);
  return {
    reclaims: window.filter((a) => a.outcome?.kind === 'reclaimed').length,
    capacityCancellations: window.filter((a) => a.outcome?.kind === 'capacity-starved').length,
  };
}

/** Sum of the recorded attempt costs, exact to the cent. */
export function totalCost(attempts: readonly AttemptRecord[]): number {
  const cents = attempts.reduce((sum, a) => sum + Math.round((a.costUsd ?? 0) * 100), 0);
  return cents / 100;
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
 * A budget scope id for the submitting user: the user name when it is already a valid id, otherwise the last segment
 * of the principal ARN (assumed-role session or user name), lowercased and reduced to the allowed characters.
 */
export function userScopeId(user: string): string | undefined {
  const last = user.split('/').at(-1) ?? user;
  const id = last
    .toLowerCase()
    .replace(/[^a-z0-9._-]/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 64);
  return id.length > 0 ? id : undefined;
}

/** The budget scopes a job reserves against: team, user, and project when given. */
export function budgetScopes(job: Pick<JobRecord, 'team' | 'user' | 'project'>): string[] {
  return scopesForJob({ team: job.team, user: userScopeId(job.user), project: job.project });
}
