/**
 * The batch-events handler: EventBridge "Batch Job State Change" → the attempt record, the job's cost so far and
 * `Job Started`.
 *
 * - Ours or not: a Trainyard attempt carries the tags `trainyard:job-id` / `trainyard:attempt` (else the name
 *   `<jobId>-a<attempt>`) and has an attempt record that PrepareAttempt wrote; anything else is ignored, unwritten.
 *   So are the node jobs of a multi-node attempt (`<parent id>#<node>`, tags propagated): the parent is the attempt.
 * - RUNNABLE/STARTING/…: records the Batch job id once (so a cancel can terminate a job still waiting).
 * - RUNNABLE/STARTING/RUNNING of an orphan, a Batch job the attempt does not own: the attempt belongs to another
 *   Batch job, or its end is recorded without this one (AttemptOutcome or execution-ended found no job in Batch and
 *   recorded "not run"; ListJobs had not caught up with a job SubmitJob created before answering with an error).
 *   TerminateJob (`orphaned`, or `jobEnded` when the job is terminal), nothing recorded: two attempts of one job never
 *   train at once. Both writers are exclusive (the Batch job id is recorded only while no end is, "not run" only while
 *   no Batch job is), so when this handler's write is refused it reads the attempt again and terminates the orphan.
 *   An orphan's SUCCEEDED/FAILED, when it had started, records what it cost on its attempt (`orphans`, once per
 *   Batch job, priced as a start below), and the job pays for it: costSoFarUsd is recomputed with it, and the ledger
 *   is charged the new total at once (`chargeRecorded`), whether the job runs, waits, is paused for budget or has
 *   settled (a settlement still to come counts it too, since Finalize reads the costs again after it settles). When the job had already
 *   ended (its final event, summary and report went out with the cost it had then), its summary.json and report.html
 *   are written again (lambdas/shared/job-files.ts, keeping when it finished) and `Job Cost Amended` announces the new
 *   cost, on every delivery of the orphan's end (its eventId is the same).
 * - RUNNABLE/STARTING/RUNNING of the attempt's own Batch job when the attempt's end was recorded without Batch's word
 *   (`endUnseen`: Batch did not report the job when it was looked up, and it was billed to its last sign of life):
 *   terminated as an orphan, nothing recorded, so it never runs on unwatched. Its SUCCEEDED/FAILED, when Batch's record
 *   says it cost more than it was billed, records the stop and cost again from that record, once (`recordSeenEnd`:
 *   what it was billed stays as `unseenCostUsd`), and the job pays the difference as for a late stop below, with
 *   `Job Cost Amended` of cause `unseen-end` when the job had ended.
 * - RUNNABLE/STARTING/RUNNING of a job whose cancel was requested: TerminateJob with the cancel reason, after the Batch
 *   job id is recorded and from a read of the job made after that write; of a job that has already ended (Finalize ran
 *   while the attempt was still in Batch, after AttemptOutcome failed), TerminateJob with the `jobEnded` reason. A
 *   cancel that came before the id was recorded found nothing to terminate; this one closes that window (either the
 *   cancel saw the id or this read sees the cancel). TerminateJob of a job already stopping changes nothing, so every
 *   such delivery may send it.
 * - RUNNING: records, once (record-once on startedAt), the Batch job id, startedAt, status, the container's log
 *   stream (GET /jobs/{id}/logs reads it), the instance (the GSI
 *   byInstance the interruption handler reads) and the price per node-hour: the spot price in effect at the start
 *   for a spot instance (EC2 history; the tier's configured spot price when history is unavailable or its lookup
 *   fails), the tier's on-demand price for an on-demand instance; without an instance (Fargate, or an instance lookup
 *   that failed) the tier's price for the attempt's capacity. A failed lookup never leaves the start unrecorded. Moves the job WAITING → RUNNING. Announces the start (`Job Started`) after the write, from the attempt
 *   as stored, and marks it announced (lambdas/shared/start-announcement.ts): a start whose write was refused is
 *   never announced, and a delivery that fails between the write and the mark is retried and announces it. A RUNNING
 *   that comes after the attempt's stop was recorded finds startedAt set and records nothing.
 * - SUCCEEDED/FAILED: records stoppedAt and costUsd once (record-once on stoppedAt) with costOfAttempt — the same
 *   pure function AttemptOutcome uses, so whichever records first, the figure is the same. When it also records the
 *   start (RUNNING not handled yet), it announces it after the write. When the write is refused because the attempt
 *   was recorded as "not run" since the read, the Batch job is an orphan and billed as one. Then job.costSoFarUsd is
 *   recomputed from the recorded attempt costs, written only when it differs, and charged to the job's budgets
 *   (`chargeRecorded`, monotonic: budget-watch meters only running jobs, and nothing else would count a stop of a
 *   job that now waits or is paused before it resumes or ends). When the job had already ended
 *   (finalized by an earlier release, whose Finalize did not wait for the attempt to stop, as Finalize does now), its
 *   cost was not in the settlement: the attempt is marked
 *   `endedAfterJob` (in the stop's write, or right after it when the job ended in between), the ledger is charged the
 *   new total (a stop Finalize did count changes nothing), and, as for an orphan, the job's
 *   files are written again and `Job Cost Amended` is sent, on every delivery of a stop so marked.
 */
import { costOfAttempt } from '../domain/attempt-cost';
import type { BatchJob } from '../domain/batch-job';
import { TERMINATE_REASONS } from '../domain/batch-reasons';
import { UnknownBudgetJob, usdToMicros } from '../domain/budgets';
import { buildEvent, jobIdentity } from '../domain/events';
import { type AttemptRecord, isTerminal, type JobRecord, tierOfJob } from '../domain/job';
import { MICROS_PER_USD } from '../domain/metering';
import { attemptRefOf, recordedCost } from '../domain/watch';
import { publishCrossings } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { parseBatchStateChangeEvent } from '../shared/event-schemas';
import { rewriteJobFiles } from '../shared/job-files';
import { JobStateConflict } from '../shared/job-store';
import { logger } from '../shared/logger';
import { announceStart } from '../shared/start-announcement';
import { instanceOfBatchJob, priceForStop, startPrice } from '../shared/start-price';

/** Raised when a job names a tier the deployed configuration does not define. */

/** What one delivery did. */
export type BatchEventResult =
  | {
      readonly action: 'ignored';
      readonly why: 'not-trainyard' | 'node-of-parallel-job' | 'unknown-attempt' | 'team-mismatch' | 'no-stop-time';
    }
  | {
      readonly action: 'queued' | 'started' | 'stopped' | 'orphaned';
      readonly jobId: string;
      readonly attempt: number;
    };

/** Whether the job has ended with its final event sent: SUCCEEDED, FAILED or CANCELLED (a rejected job never ran). */
function hasEnded(job: JobRecord): job is JobRecord & { state: 'SUCCEEDED' | 'FAILED' | 'CANCELLED' } {
  return job.state === 'SUCCEEDED' || job.state === 'FAILED' || job.state === 'CANCELLED';
}

type Plane = Pick<ControlPlane, 'config' | 'jobs' | 'events' | 'fleet' | 'batch' | 'ledger' | 'workspace' | 'clock'>;

/** Builds the batch-events handler from the parts of the control plane it uses. */
export function createBatchEventsHandler(plane: Plane) {
  const record = createBatchJobRecorder(plane);
  return async function handleBatchStateChange(event: unknown): Promise<BatchEventResult> {
    return record(parseBatchStateChangeEvent(event).job);
  };
}

/**
 * What batch-events does with a Batch job as a state change reports it: the event's detail, which is DescribeJobs'
 * job (so budget-watch records through it a start whose event never arrived, from DescribeJobs).
 */
export function createBatchJobRecorder(plane: Plane) {
  /**
   * Records the start once; then, for the attempt as stored after (read again when the write was refused), announces
   * it and moves the job to RUNNING. Both are done again on a replay that finds the start recorded, so a delivery that
   * failed after its write is completed by the retry.
   */
  async function started(
    batchJob: BatchJob,
    job: JobRecord,
    attempt: AttemptRecord,
  ): Promise<AttemptRecord | undefined> {
    let stored: AttemptRecord | undefined = attempt;
    if (attempt.startedAt === undefined) {
      const startedAt =
        batchJob.startedAt ?? batchJob.attempts.at(-1)?.startedAt ?? batchJob.createdAt ?? plane.clock().getTime();
      const tier = tierOfJob(plane.config, job);
      const instance = await instanceOf(batchJob);
      const usdPerHour = await startPrice(plane, attempt, tier, instance, startedAt);
      const logStreamName = batchJob.container?.logStreamName ?? batchJob.attempts.at(-1)?.container?.logStreamName;
      stored =
        (await plane.jobs.updateAttempt(
          job.jobId,
          attempt.attempt,
          {
            batchJobId: batchJob.jobId,
            startedAt,
            status: 'RUNNING',
            usdPerHour,
            ...(instance ? { instanceId: instance.instanceId } : {}),
            ...(logStreamName ? { logStreamName } : {}),
          },
          ['startedAt', 'stoppedAt'],
        )) ?? (await plane.jobs.getAttempt(job.jobId, attempt.attempt));
    }
    if (stored?.batchJobId !== batchJob.jobId) return stored;
    await announceStart(plane, job, stored, batchJob.jobId);
    // Only the attempt that is still the job's live one moves the job to RUNNING (events can arrive late).
    const live = stored.stoppedAt === undefined && job.counters.attempts < attempt.attempt;
    if (live && job.state === 'WAITING') {
      try {
        await plane.jobs.transition(job.jobId, ['WAITING'], 'RUNNING');
      } catch (error) {
        if (!(error instanceof JobStateConflict)) throw error;
        logger.info('job moved on before its attempt started; state left as it is', {
          jobId: job.jobId,
          attempt: attempt.attempt,
          reason: error.message,
        });
      }
    }
    return stored;
  }

  /**
   * The instance a Batch job ran on, when Batch names its container instance and the fleet still knows it. A lookup
   * that fails (ECS or EC2 throttled past the SDK's retries) gives none: the start is recorded, priced by the
   * attempt's capacity, rather than not at all (an unrecorded start leaves the job WAITING, where budget-watch does
   * not meter it); only the spot-notice lookup by instance misses it, and the harness still sees the notice itself.
   */
  const instanceOf = (batchJob: BatchJob) => instanceOfBatchJob(plane, batchJob);

  /**
   * job.costSoFarUsd from the recorded costs, written only when it differs, and the job's budgets charged the new
   * total (`chargeRecorded`: monotonic, so what budget-watch accrued or Finalize settled is not charged twice). A job
   * waiting for its next attempt or paused for budget is metered by nothing else, and a paused one holds no
   * reservation: without this, money it has spent would stay available to other jobs until it resumed. Run on every
   * delivery, so a crash between the writes is repaired by the redelivery.
   */
  async function costRecorded(job: JobRecord): Promise<{ attempts: AttemptRecord[]; total: number }> {
    const attempts = await plane.jobs.listAttempts(job.jobId);
    const total = recordedCost(attempts);
    if (total !== job.costSoFarUsd) await plane.jobs.patchJob(job.jobId, { costSoFarUsd: total });
    try {
      const charged = await plane.ledger.chargeRecorded(job.jobId, total);
      if (charged.chargedScopes.length > 0) {
        logger.info('the job’s recorded cost was charged to its budgets', {
          jobId: job.jobId,
          totalUsd: total,
          scopes: charged.chargedScopes,
        });
      }
      await publishCrossings(plane, charged.crossings, plane.clock().toISOString());
    } catch (error) {
      if (!(error instanceof UnknownBudgetJob)) throw error;
      logger.info('job has no budget record; its recorded cost is on the job only', { jobId: job.jobId });
    }
    return { attempts, total };
  }

  /**
   * Records the stop once (and the start with it when RUNNING was not handled), announces a start recorded but not
   * announced, and puts the cost on the job. A write refused because "not run" was recorded since the read makes this
   * Batch job an orphan, billed as one.
   */
  async function stopped(batchJob: BatchJob, job: JobRecord, attempt: AttemptRecord): Promise<BatchEventResult> {
    let stored: AttemptRecord | undefined = attempt;
    let recordedHere = false;
    if (attempt.stoppedAt === undefined) {
      const tier = tierOfJob(plane.config, job);
      const logStreamName = batchJob.container?.logStreamName ?? batchJob.attempts.at(-1)?.container?.logStreamName;
      const stoppedAt = costOfAttempt(attempt, batchJob, tier).stoppedAt;
      if (stoppedAt === undefined) {
        logger.warn('Batch reported a finished job without a stop time; nothing recorded', {
          jobId: job.jobId,
          attempt: attempt.attempt,
          batchJobId: batchJob.jobId,
        });
        return { action: 'ignored', why: 'no-stop-time' };
      }
      // Priced as its start would have been when Batch's RUNNING never reached the platform (or came after).
      const price = await priceForStop(plane, attempt, tier, batchJob);
      const recorded = await plane.jobs.recordStop(attempt, (current) => {
        const cost = costOfAttempt(
          { ...current, ...(current.usdPerHour === undefined && price !== undefined && { usdPerHour: price }) },
          batchJob,
          tier,
        );
        return {
          batchJobId: batchJob.jobId,
          status: batchJob.status,
          ...(cost.startedAt !== undefined && current.startedAt === undefined ? { startedAt: cost.startedAt } : {}),
          stoppedAt,
          ...(logStreamName && current.logStreamName === undefined ? { logStreamName } : {}),
          usdPerHour: cost.usdPerHour,
          costUsd: cost.costUsd,
          ...(hasEnded(job) ? { endedAfterJob: true } : {}),
        };
      });
      recordedHere = recorded.written !== undefined;
      stored = recorded.stored;
      if (stored && stored.batchJobId !== batchJob.jobId) return orphaned(batchJob, job, stored);
    } else if (attempt.endUnseen && attempt.batchJobId === batchJob.jobId) {
      // Billed to its last sign of running when Batch did not report it; Batch's record of its end now says how long
      // it ran. More than billed is recorded again (the least it ran was billed, so it never comes back lower).
      const seen = costOfAttempt(attempt, batchJob, tierOfJob(plane.config, job));
      if (seen.stoppedAt !== undefined && seen.costUsd > (attempt.costUsd ?? 0)) {
        const written = await plane.jobs.recordSeenEnd(attempt, {
          status: batchJob.status,
          ...(seen.startedAt !== undefined && { startedAt: seen.startedAt }),
          stoppedAt: seen.stoppedAt,
          costUsd: seen.costUsd,
          ...(hasEnded(job) ? { endedAfterJob: true } : {}),
        });
        recordedHere = written !== undefined;
        stored = written ?? (await plane.jobs.getAttempt(job.jobId, attempt.attempt));
        if (written) {
          logger.warn('an attempt billed while its end was unseen ran longer by Batch’s record; billed again', {
            jobId: job.jobId,
            attempt: attempt.attempt,
            batchJobId: batchJob.jobId,
            billedUsd: attempt.costUsd,
            costUsd: seen.costUsd,
          });
        }
      }
    }
    await announceStart(plane, job, stored, batchJob.jobId);
    // Read after the write: a job that ended before it was settled without this attempt's cost.
    const current = (await plane.jobs.getJob(job.jobId)) ?? job;
    if (!hasEnded(current)) {
      await costRecorded(current);
      return { action: 'stopped', jobId: job.jobId, attempt: attempt.attempt };
    }
    if (recordedHere && stored && !stored.endedAfterJob) {
      // The job ended between the first read and the write (Finalize may have read the costs before it or after).
      stored = (await plane.jobs.updateAttempt(job.jobId, attempt.attempt, { endedAfterJob: true })) ?? stored;
    }
    // Charged whenever the job has ended: monotonic, so a stop Finalize had counted changes nothing.
    const { total } = await costRecorded(current);
    if (stored?.endedAfterJob && stored.stoppedAt !== undefined && stored.costUsd !== undefined) {
      // An end seen late added what Batch's record says beyond what its unseen end was billed.
      const unseen = stored.unseenCostUsd;
      const added =
        unseen === undefined ? stored.costUsd : (usdToMicros(stored.costUsd) - usdToMicros(unseen)) / MICROS_PER_USD;
      const run = { capacity: stored.capacity, stoppedAt: stored.stoppedAt, costUsd: added };
      const cause = unseen === undefined ? 'late-stop' : 'unseen-end';
      await amendEndedJob(current, cause, attempt.attempt, batchJob.jobId, run, total);
    }
    return { action: 'stopped', jobId: job.jobId, attempt: attempt.attempt };
  }

  /**
   * A cost recorded after the job ended (an orphan's, or its own attempt's end): the job's summary and report are
   * written again with it, and `Job Cost Amended` announces it, since the job's final event went out without it.
   */
  async function amendEndedJob(
    job: JobRecord,
    cause: 'orphan' | 'late-stop' | 'unseen-end',
    attempt: number,
    batchJobId: string,
    run: { capacity: AttemptRecord['capacity']; stoppedAt: number; costUsd: number },
    total: number,
  ): Promise<void> {
    if (!hasEnded(job)) return;
    await rewriteJobFiles(plane, job.jobId);
    await plane.events.publish([
      buildEvent('Job Cost Amended', {
        ...jobIdentity(job),
        occurredAt: new Date(run.stoppedAt).toISOString(),
        state: job.state,
        cause,
        attempt,
        batchJobId,
        capacity: run.capacity,
        addedUsd: run.costUsd,
        costUsd: total,
      }),
    ]);
  }

  /** Records what an ended orphan cost on its attempt, once, and puts it on the job and its budget. */
  async function billOrphan(batchJob: BatchJob, job: JobRecord, attempt: AttemptRecord): Promise<void> {
    const keys = { jobId: job.jobId, attempt: attempt.attempt, batchJobId: batchJob.jobId, status: batchJob.status };
    const tier = tierOfJob(plane.config, job);
    const ran = costOfAttempt({ capacity: attempt.capacity, nodes: attempt.nodes }, batchJob, tier);
    if (ran.startedAt === undefined || ran.stoppedAt === undefined) {
      logger.info('a Batch job its attempt does not own ended before it started; it cost nothing', keys);
      return;
    }
    const instance = await instanceOf(batchJob);
    const usdPerHour = await startPrice(plane, attempt, tier, instance, ran.startedAt);
    const cost = costOfAttempt({ capacity: attempt.capacity, nodes: attempt.nodes, usdPerHour }, batchJob, tier);
    const run = {
      capacity: instance?.lifecycle ?? attempt.capacity,
      startedAt: ran.startedAt,
      stoppedAt: ran.stoppedAt,
      usdPerHour,
      costUsd: cost.costUsd,
    };
    if (await plane.jobs.recordOrphanRun(job.jobId, attempt.attempt, batchJob.jobId, run)) {
      logger.warn('a Batch job its attempt does not own ended; its cost is added to the job’s', {
        ...keys,
        costUsd: run.costUsd,
      });
    }
    const current = (await plane.jobs.getJob(job.jobId)) ?? job;
    const { attempts, total } = await costRecorded(current);
    const stored = attempts.find((a) => a.attempt === attempt.attempt)?.orphans?.[batchJob.jobId];
    if (stored) await amendEndedJob(current, 'orphan', attempt.attempt, batchJob.jobId, stored, total);
  }

  /**
   * Stops a Batch job its attempt does not own, or bills it when it has ended (see the module comment); records
   * nothing else.
   */
  async function orphaned(batchJob: BatchJob, job: JobRecord, attempt: AttemptRecord): Promise<BatchEventResult> {
    const keys = {
      jobId: job.jobId,
      attempt: attempt.attempt,
      batchJobId: batchJob.jobId,
      status: batchJob.status,
      ...(attempt.batchJobId ? { attemptBatchJobId: attempt.batchJobId } : {}),
    };
    if (batchJob.status === 'SUCCEEDED' || batchJob.status === 'FAILED') {
      await billOrphan(batchJob, job, attempt);
    } else {
      const current = (await plane.jobs.getJob(job.jobId)) ?? job;
      await plane.batch.terminateJob(
        batchJob.jobId,
        isTerminal(current.state) ? TERMINATE_REASONS.jobEnded : TERMINATE_REASONS.orphaned,
      );
      logger.warn(
        'a Batch job running or queued that no live attempt owns (another job, or its end recorded); terminated',
        keys,
      );
    }
    return { action: 'orphaned', jobId: job.jobId, attempt: attempt.attempt };
  }

  /**
   * Terminates a live attempt's Batch job when its job's cancel was requested, or its job has already ended (Finalize
   * ran while the attempt was still in Batch); the job is read after the Batch job id was recorded.
   */
  async function terminateIfUnwanted(jobId: string, batchJobId: string): Promise<void> {
    const job = await plane.jobs.getJob(jobId);
    if (job && isTerminal(job.state)) {
      await plane.batch.terminateJob(batchJobId, TERMINATE_REASONS.jobEnded);
      logger.warn('attempt of a job that has ended terminated as Batch reported it', { jobId, batchJobId });
    } else if (job?.cancelRequested) {
      await plane.batch.terminateJob(batchJobId, TERMINATE_REASONS.cancel);
      logger.info('attempt of a cancelled job terminated as Batch reported it', { jobId, batchJobId });
    }
  }

  return async function recordBatchJob(batchJob: BatchJob): Promise<BatchEventResult> {
    const ref = attemptRefOf(batchJob);
    if (!ref) return { action: 'ignored', why: 'not-trainyard' };
    // A node of a multi-node parallel job (`<parent id>#<node index>`): the parent job is the attempt.
    if (batchJob.jobId.includes('#')) return { action: 'ignored', why: 'node-of-parallel-job' };
    const keys = { jobId: ref.jobId, attempt: ref.attempt, batchJobId: batchJob.jobId, status: batchJob.status };
    const [job, attempt] = await Promise.all([
      plane.jobs.getJob(ref.jobId),
      plane.jobs.getAttempt(ref.jobId, ref.attempt),
    ]);
    if (!job || !attempt) {
      logger.warn('Batch job names a Trainyard attempt that does not exist; ignored', keys);
      return { action: 'ignored', why: 'unknown-attempt' };
    }
    if (ref.team !== undefined && ref.team !== job.team) {
      logger.warn('Batch job tagged with another team than its job; ignored', { ...keys, tagTeam: ref.team });
      return { action: 'ignored', why: 'team-mismatch' };
    }
    // The attempt owns this Batch job, or owns none and has not ended (then this job is about to be recorded).
    const owns = (a: AttemptRecord) =>
      a.batchJobId === batchJob.jobId || (a.batchJobId === undefined && a.stoppedAt === undefined);
    if (!owns(attempt)) return orphaned(batchJob, job, attempt);
    if (batchJob.status === 'SUCCEEDED' || batchJob.status === 'FAILED') return stopped(batchJob, job, attempt);
    // Its own Batch job, live, with the attempt's end recorded without Batch's word: the job moved on without it.
    // Never left to run unwatched. (A late RUNNING of a job whose end Batch reported is stale, and left alone.)
    if (attempt.endUnseen) return orphaned(batchJob, job, attempt);

    let recorded: AttemptRecord | undefined = attempt;
    if (batchJob.status === 'RUNNING') {
      recorded = await started(batchJob, job, attempt);
    } else if (attempt.batchJobId === undefined) {
      recorded = await plane.jobs.updateAttempt(
        job.jobId,
        attempt.attempt,
        { batchJobId: batchJob.jobId, status: batchJob.status },
        ['batchJobId', 'stoppedAt'],
      );
      // Refused: another Batch job was recorded, or "not run" was, since the read above.
      if (!recorded) recorded = await plane.jobs.getAttempt(job.jobId, attempt.attempt);
    }
    if (recorded && !owns(recorded)) return orphaned(batchJob, job, recorded);
    await terminateIfUnwanted(job.jobId, batchJob.jobId);
    return { action: batchJob.status === 'RUNNING' ? 'started' : 'queued', jobId: job.jobId, attempt: attempt.attempt };
  };
}
