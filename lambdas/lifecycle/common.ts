/**
 * Helpers the lifecycle steps share: job events, the record of an ended attempt and derived counters. Counters are derived from the
 * attempt records every time rather than incremented, so a replayed step cannot count an attempt twice.
 */

import { costOfAttempt, costOfUnseenEnd } from '../domain/attempt-cost';
import type { BatchJob } from '../domain/batch-job';
import { HARNESS_EXIT, TERMINATE_REASONS } from '../domain/batch-reasons';
import {
  buildEvent,
  type DetailType,
  type EventDetailInput,
  type EventEntry,
  type JobIdentity,
  jobIdentity,
} from '../domain/events';
import { type AttemptRecord, type JobCounters, type JobRecord, TRANSITIONS, tierOfJob } from '../domain/job';
import { type AttemptOutcome, classifyAttemptOutcome, exitCodeOf } from '../domain/outcome';
import { attemptReportedAt, harnessSawSpotNotice } from '../domain/watch';
import { jobKeysFor } from '../domain/workspace-layout';
import { lookUpAttempt } from '../shared/batch-lookup';
import type { ControlPlane } from '../shared/control-plane';
import { logger } from '../shared/logger';
import { announceStart } from '../shared/start-announcement';
import { priceForStop } from '../shared/start-price';

/**
 * Raised when an attempt's Batch job is still queued or running where it should have ended (TerminateJob was sent):
 * the caller is run again (Lambda's retries for execution-ended, the state machine's for AttemptOutcome).
 */
export class AttemptsStillRunning extends Error {
  override name = 'AttemptsStillRunning';
}

/**
 * Raised instead of recording "not run" when batch-events recorded a Batch job for the attempt after the caller
 * looked it up and found none (ListJobs had not caught up): the caller looks it up again, by its id.
 */
export class AttemptGotBatchJob extends Error {
  override name = 'AttemptGotBatchJob';
}

/**
 * Raised instead of billing an attempt as forgotten when Batch does not report its recorded Batch job but the attempt
 * showed a sign of life too recently for Batch to have forgotten it (see {@link BATCH_REPORTS_JOBS_SECONDS}): the miss
 * is Batch's lag, the job may be running, and the caller looks it up again.
 */
export class BatchJobNotReported extends Error {
  override name = 'BatchJobNotReported';
}

/**
 * How long after an attempt's last sign of life Batch surely still reports its job: a day. AWS keeps an ended job for
 * days (about 7), and only a job that has ended can be forgotten, so within a day of the last sign a job DescribeJobs
 * does not return exists. Treating that miss as "forgotten" would record the end of an attempt that may be running,
 * billed to an estimate, with its Batch job left to run.
 */
export const BATCH_REPORTS_JOBS_SECONDS = 86_400;

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
 * ended Batch job (the start too, announced with `Job Started`, when batch-events has not recorded it yet), or, when
 * Batch has no job for it (`missing` says where the caller looked and why), from what is recorded. An attempt with no
 * Batch job recorded did not run: an infra-error to retry, at no cost. One whose recorded Batch job Batch no longer
 * reports ran, and stopped at a moment no one can now tell: it is billed from its start to the last sign of it
 * running ({@link lastSignOf}, {@link costOfUnseenEnd}), an infra-error whose reason says so; unless that sign is
 * too recent for Batch to have forgotten the job, when this throws {@link BatchJobNotReported} and records nothing. A replay, or a second
 * writer after batch-events, writes nothing new: the figures are those of the same pure functions.
 *
 * "Not run" of an attempt that had no Batch job when the caller looked is written only while none is recorded:
 * batch-events records a Batch job only while no end is (and stops one that comes after), so a job Batch did create
 * is never both running and recorded as not run. When batch-events won that race this throws
 * {@link AttemptGotBatchJob}, and the caller looks the attempt up again.
 */
export async function recordAttemptEnd(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'events' | 'workspace' | 'batch' | 'metrics' | 'fleet'>,
  job: JobRecord,
  attempt: AttemptRecord,
  ended: BatchJob | { missing: string },
  now: Date,
): Promise<AttemptOutcome> {
  const { jobId } = job;
  let outcome: AttemptOutcome;
  /** When the attempt stopped, as recorded (from Batch's end). */
  let stoppedAt: number | undefined;
  if ('missing' in ended && attempt.batchJobId !== undefined) {
    const unseen = unseenText(attempt.batchJobId);
    // Its stop recorded already (batch-events heard Batch's end, or a first run of this wrote it): that record stands.
    const asRecorded: AttemptOutcome = {
      kind: 'infra-error',
      reason: `${unseen}; its stop and cost are as recorded`,
      resumable: true,
    };
    if (attempt.stoppedAt !== undefined) {
      outcome = asRecorded;
    } else {
      const sign = await lastSignOf(plane, job, attempt);
      const lastSeen = Math.max(attempt.submittedAt ?? 0, attempt.startedAt ?? 0, sign?.at ?? 0);
      const reportsFor = plane.batch.reportsJobsForSeconds ?? BATCH_REPORTS_JOBS_SECONDS;
      if (now.getTime() - lastSeen < reportsFor * 1000) {
        throw new BatchJobNotReported(
          `job ${jobId} attempt ${attempt.attempt}: Batch does not report its job ${attempt.batchJobId}, last seen ${new Date(lastSeen).toISOString()}, too recently for Batch to have forgotten it; it is looked up again`,
        );
      }
      const tier = tierOfJob(plane.config, job);
      const { written } = await plane.jobs.recordStop(attempt, (current) => {
        const cost = costOfUnseenEnd(current, sign?.at, tier);
        return {
          status: 'FAILED',
          ...(current.startedAt === undefined && cost.startedAt !== undefined ? { startedAt: cost.startedAt } : {}),
          stoppedAt: cost.stoppedAt ?? now.getTime(),
          usdPerHour: cost.usdPerHour,
          costUsd: cost.costUsd,
          endUnseen: true,
        };
      });
      outcome = written
        ? { kind: 'infra-error', reason: `${unseen}; ${unseenBilling(attempt, sign)}`, resumable: true }
        : asRecorded;
    }
  } else if ('missing' in ended) {
    outcome = { kind: 'infra-error', reason: `the attempt did not run: ${ended.missing}`, resumable: true };
    const written = await plane.jobs.updateAttempt(
      jobId,
      attempt.attempt,
      { status: 'FAILED', stoppedAt: now.getTime(), costUsd: 0 },
      ['stoppedAt', 'batchJobId'],
    );
    if (!written) {
      const stored = await plane.jobs.getAttempt(jobId, attempt.attempt);
      // Refused for a Batch job the caller did not know of (whether or not its end is recorded too), not a replay.
      if (stored?.batchJobId !== undefined) {
        throw new AttemptGotBatchJob(
          `job ${jobId} attempt ${attempt.attempt}: Batch reported job ${stored.batchJobId} for it after it was looked up and not found; it is looked up again`,
        );
      }
    }
  } else {
    // Without a recorded notice, the harness's own report says whether IMDS warned of a reclaim (a warning that came
    // before batch-events had recorded the attempt's instance finds no attempt to record it on).
    const noticeRecorded = attempt.noticeAt !== undefined;
    const harnessSawNotice =
      !noticeRecorded &&
      exitCodeOf(ended) === HARNESS_EXIT.checkpointedResume &&
      harnessSawSpotNotice(await plane.workspace.getJson(jobKeysFor(job.team, jobId).progress), jobId, attempt.attempt);
    outcome = classifyAttemptOutcome(ended, { noticeRecorded, harnessSawNotice });
    const tier = tierOfJob(plane.config, job);
    // Priced as its start would have been when Batch's RUNNING never reached batch-events.
    const price = await priceForStop(plane, attempt, tier, ended);
    const { stored } = await plane.jobs.recordStop(attempt, (current) => {
      const cost = costOfAttempt(
        { ...current, ...(current.usdPerHour === undefined && price !== undefined && { usdPerHour: price }) },
        ended,
        tier,
      );
      return {
        batchJobId: ended.jobId,
        status: ended.status,
        startedAt: cost.startedAt,
        stoppedAt: cost.stoppedAt ?? now.getTime(),
        usdPerHour: cost.usdPerHour,
        costUsd: cost.costUsd,
        logStreamName: ended.attempts.at(-1)?.container?.logStreamName ?? ended.container?.logStreamName,
      };
    });
    stoppedAt = stored?.stoppedAt;
    // When Batch's RUNNING has not reached batch-events, this write recorded the start too; announce it (a replay
    // announces what a failed first run recorded and did not).
    await announceStart(plane, job, stored, ended.jobId);
  }
  const recorded = await plane.jobs.updateAttempt(jobId, attempt.attempt, { outcome }, 'outcome');
  // Counted by the write that recorded the outcome, so a replay (which finds it recorded) does not count it again.
  // Spot only: an on-demand host can be terminated too (hardware retirement, by hand), which is not spot's doing.
  if (
    recorded &&
    outcome.kind === 'reclaimed' &&
    attempt.capacity === 'spot' &&
    plane.config.observability.platformMetrics
  ) {
    await plane.metrics.publish(
      [{ metric: 'SpotReclaims', value: 1, dimensions: { Tier: job.tier } }],
      stoppedAt ?? now.getTime(),
    );
  }
  return outcome;
}

/** The last sign of an attempt running that the platform holds, and what it is. */
export interface SignOfLife {
  /** Epoch ms. */
  readonly at: number;
  readonly what: string;
}

/**
 * The last sign of an attempt running: its harness's last report (progress.json, while it is that attempt's; the
 * harness writes it at least once a minute on a GPU and as its command exits) or its spot notice, whichever is later.
 */
export async function lastSignOf(
  plane: Pick<ControlPlane, 'workspace'>,
  job: Pick<JobRecord, 'jobId' | 'team'>,
  attempt: Pick<AttemptRecord, 'attempt' | 'noticeAt'>,
): Promise<SignOfLife | undefined> {
  const progress = await plane.workspace.getJson(jobKeysFor(job.team, job.jobId).progress);
  const reported = attemptReportedAt(progress, job.jobId, attempt.attempt);
  const signs: SignOfLife[] = [];
  if (reported !== undefined) signs.push({ at: reported, what: "the harness's last progress report" });
  if (attempt.noticeAt !== undefined) signs.push({ at: attempt.noticeAt, what: 'its spot interruption notice' });
  return signs.sort((a, b) => b.at - a.at)[0];
}

/** What an attempt whose Batch job Batch no longer reports is, in its outcome's reason. */
function unseenText(batchJobId: string): string {
  return `Batch no longer reports its job ${batchJobId} (it keeps an ended job for about 7 days), so when and how the attempt ended is unknown`;
}

/** What such an attempt is billed for, as {@link costOfUnseenEnd} bills it. */
function unseenBilling(attempt: Pick<AttemptRecord, 'startedAt'>, sign: SignOfLife | undefined): string {
  const seen = sign && `${sign.what} at ${new Date(sign.at).toISOString()}`;
  if (attempt.startedAt === undefined) {
    return seen
      ? `no start was recorded: billed for one start (AWS's 60 s minimum) at the last sign of it running, ${seen}`
      : 'no start was recorded, nor any sign of it running: nothing is billed';
  }
  if (sign === undefined || sign.at <= attempt.startedAt) {
    return "billed for its start only (AWS's 60 s minimum): nothing recorded shows it running after its start";
  }
  return `billed from its start to the last sign of it running, ${seen}`;
}

/** Whether an attempt's end (its stop, cost and outcome) is still to be recorded. */
export function endUnrecorded(attempt: Pick<AttemptRecord, 'stoppedAt' | 'outcome'>): boolean {
  return attempt.stoppedAt === undefined || attempt.outcome === undefined;
}

/**
 * One pass over the attempts of a job that is ending whose end is not recorded: each is looked up in Batch; one Batch
 * has no job for is recorded by {@link recordAttemptEnd} (not run, at no cost, or, with a Batch job recorded that Batch
 * no longer reports, billed to the last sign of it running), one Batch ended is recorded as AttemptOutcome records it,
 * and one still queued or running gets TerminateJob (`Trainyard: job ended…`; the harness checkpoints on SIGTERM),
 * once per Batch job in `terminated`, which the caller keeps across passes. Returns the attempts still in Batch, as
 * text for the caller's AttemptsStillRunning; none left means every attempt's end and cost are recorded.
 */
export async function endOpenAttempts(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'events' | 'batch' | 'clock' | 'workspace' | 'metrics' | 'fleet'>,
  job: JobRecord,
  terminated: Set<string>,
): Promise<string[]> {
  const attempts = await plane.jobs.listAttempts(job.jobId);
  const running: string[] = [];
  for (const attempt of attempts.filter(endUnrecorded)) {
    const batchJob = await lookUpAttempt(plane, job, attempt);
    const now = plane.clock();
    if (!batchJob) {
      try {
        await recordAttemptEnd(plane, job, attempt, { missing: 'the job ended before it reached Batch' }, now);
      } catch (error) {
        if (error instanceof AttemptGotBatchJob) {
          running.push(`attempt ${attempt.attempt} (its Batch job appeared; looked up again)`);
        } else if (error instanceof BatchJobNotReported) {
          running.push(
            `attempt ${attempt.attempt} (Batch job ${attempt.batchJobId} not reported yet; looked up again)`,
          );
        } else {
          throw error;
        }
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

/**
 * The final state of a live job whose lifecycle ended without an outcome step's word (a step kept failing, or the
 * execution itself ended): SUCCEEDED when its newest attempt's Batch job succeeded (the training finished; only the
 * bookkeeping failed), CANCELLED when a cancel was asked for, else FAILED; with the reason to record.
 */
export function endWithoutOutcome(
  job: Pick<JobRecord, 'state' | 'cancelRequested'>,
  newestStatus: string | undefined,
  cause: string,
): { finalState: 'SUCCEEDED' | 'CANCELLED' | 'FAILED'; reason: string } {
  if (newestStatus === 'SUCCEEDED' && TRANSITIONS[job.state].includes('SUCCEEDED')) {
    return { finalState: 'SUCCEEDED', reason: `the attempt succeeded; ${cause}` };
  }
  return { finalState: job.cancelRequested ? 'CANCELLED' : 'FAILED', reason: cause };
}
