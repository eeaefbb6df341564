/**
 * PrepareAttempt: turn the plan for the next attempt into a Batch SubmitJob request (queue by capacity, the team's
 * job definition for the tier, the harness settings, resume arguments when resuming) and record the attempt.
 * Honours a cancel request made while the job waited or was paused, and pauses (`next: 'pause'`) instead of starting
 * an attempt while a budget scope of the job is blocked. Each attempt's Batch timeout is what is left of the tier's
 * maximum runtime after the earlier attempts' runs (at least Batch's 60 s), and of the deadline. Replay-safe: the
 * attempt record is created once and the request is a function of it; `Job Resumed` goes out on every try, as of the
 * attempt's submission.
 */
import { maxRuntimeSeconds } from '../../lib/config';
import { attemptJobName, jobDefinitionName, queueName, shareIdentifierOf } from '../domain/batch-names';
import { jobScopes } from '../domain/budgets';
import { computeSecondsOf, isTerminal, type JobRecord, tierOfJob } from '../domain/job';
import { type ContainerOverrides, type SubmitJobInput, shellJoin } from '../domain/submit-job';
import { budgetPeriodOf, TRAINYARD_TAGS } from '../domain/watch';
import { checkpointToRestore, jobKeysFor, s3Uri } from '../domain/workspace-layout';
import type { ControlPlane } from '../shared/control-plane';
import { jobEvent, secondsSince } from './common';
import { type AttemptPlan, type FailedAs, parseStep, prepareInputSchema } from './steps';

/**
 * Seconds the harness gives the training process to checkpoint after a stop signal, by where the tier runs, each
 * leaving the rest of the container's stop timeout for the final upload: GPU tiers on EC2, whose ECS agent waits
 * 110 s (`ECS_CONTAINER_STOP_TIMEOUT`, lib/fleet/gpu-launch-template.ts) before SIGKILL; CPU tiers on Fargate, which
 * waits 30 s and lets no job definition change it.
 */
export const STOP_GRACE_SECONDS = { gpu: 60, cpu: 15 } as const;

/** PrepareAttempt's output. */
export type PrepareOutput =
  | { jobId: string; next: 'run'; plan: AttemptPlan; multiNode: boolean; submit: SubmitJobInput }
  | { jobId: string; next: 'finalize'; finalState?: 'CANCELLED' | 'FAILED'; reason: string; failedAs?: FailedAs }
  | { jobId: string; next: 'pause'; plan: AttemptPlan; scope: string };

/** Creates the PrepareAttempt step. */
export function createPrepareAttemptHandler(
  plane: Pick<ControlPlane, 'config' | 'jobs' | 'ledger' | 'workspace' | 'events' | 'batchPrefix' | 'clock'>,
) {
  return async (input: unknown): Promise<PrepareOutput> => {
    const { jobId, plan } = parseStep(prepareInputSchema, 'PrepareAttempt', input);
    const job = await plane.jobs.requireJob(jobId);
    if (isTerminal(job.state)) return { jobId, next: 'finalize', reason: `job is already ${job.state}` };
    if (job.cancelRequested)
      return { jobId, next: 'finalize', finalState: 'CANCELLED', reason: 'cancelled by the user' };
    const now = plane.clock();
    const tier = tierOfJob(plane.config, job);
    const queue = queueName(plane.batchPrefix, tier.id, plan.capacity);
    const remainingDeadline =
      job.requirements.deadlineSeconds === undefined
        ? Number.POSITIVE_INFINITY
        : job.requirements.deadlineSeconds - secondsSince(job, now);
    if (remainingDeadline <= 0) {
      return {
        jobId,
        next: 'finalize',
        finalState: 'FAILED',
        failedAs: 'timed-out',
        reason: 'the deadline passed before the next attempt could start',
      };
    }

    // The tier's maximum runtime bounds the job, not each attempt: what the earlier attempts ran is spent (else a
    // reclaim, a move or a budget pause would hand a runaway job a fresh maximum each time).
    const attempts = await plane.jobs.listAttempts(jobId);
    const earlier = attempts.filter((a) => a.attempt < plan.attempt);
    const remainingRuntime = maxRuntimeSeconds(tier) - computeSecondsOf(earlier);
    if (remainingRuntime <= 0) {
      return {
        jobId,
        next: 'finalize',
        finalState: 'FAILED',
        failedAs: 'timed-out',
        reason: `the job ran its tier's maximum runtime (${maxRuntimeSeconds(tier)} s on ${tier.id}) over ${earlier.length} attempt(s)`,
      };
    }

    const existing = attempts.find((a) => a.attempt === plan.attempt);
    if (!existing) {
      // A budget blocked while the job waited (a backoff before a retry): pause rather than start an attempt that
      // budget-watch would stop at its next tick. An attempt already recorded (a replay) goes ahead as planned.
      const blocked = await plane.ledger.firstBlockedScope(jobScopes(job), budgetPeriodOf(job));
      if (blocked !== undefined) {
        // Blocked before its first attempt (between the cost gate and now): the job is still ANALYZING, and the pause
        // step takes a WAITING job, as a job that runs would be by now.
        if (job.state === 'ANALYZING') await plane.jobs.transition(jobId, ['ANALYZING', 'WAITING'], 'WAITING');
        // The token of a pause or backoff the job was resumed from is spent; a pause resumed from is counted, so the
        // pause step counts a new one (a resume whose budget could not hold the job pauses it again).
        if (job.state === 'PAUSED_BUDGET') await plane.jobs.patchJob(jobId, resumedFrom(job), ['pauseToken']);
        else if (job.pauseToken !== undefined) await plane.jobs.patchJob(jobId, {}, ['pauseToken']);
        return { jobId, next: 'pause', plan, scope: blocked };
      }
    }
    const attempt =
      existing ??
      (await plane.jobs.putAttempt({
        jobId,
        attempt: plan.attempt,
        capacity: plan.capacity,
        queue,
        nodes: tier.nodes,
        status: 'SUBMITTED',
        submittedAt: now.getTime(),
      }));
    if (job.state === 'PAUSED_BUDGET') {
      await plane.jobs.transition(jobId, ['PAUSED_BUDGET'], 'WAITING', resumedFrom(job));
    } else {
      await plane.jobs.transition(jobId, ['ANALYZING', 'WAITING', 'RUNNING'], 'WAITING');
    }
    // The token of the pause or the backoff the job waited in is spent: a cancel has nothing to send it now.
    if (job.state === 'PAUSED_BUDGET' || job.pauseToken !== undefined) {
      await plane.jobs.patchJob(jobId, {}, ['pauseToken']);
    }

    const keys = jobKeysFor(job.team, jobId);
    const bucket = plane.workspace.bucket;
    const environment: Record<string, string> = {
      ...job.env,
      TRAINYARD_JOB_ID: jobId,
      TRAINYARD_ATTEMPT: String(attempt.attempt),
      TRAINYARD_CODE_URI: s3Uri(bucket, job.bundle.key),
      // The team's jobs can write its folder: the harness runs only the bundle that was submitted.
      TRAINYARD_CODE_SHA256: job.bundle.sha256,
      TRAINYARD_CHECKPOINT_URI: s3Uri(bucket, keys.checkpoints),
      TRAINYARD_METRICS_URI: s3Uri(bucket, keys.metrics),
      TRAINYARD_STOP_GRACE_SECONDS: String(STOP_GRACE_SECONDS[tier.kind]),
      // The harness appends these only when it restored a checkpoint; a fresh attempt passes none.
      TRAINYARD_RESUME_ARGS: plan.resume ? shellJoin(job.resumeArgs ?? ['--init_from=resume']) : '',
      ...(job.progress?.totalSteps ? { TRAINYARD_TOTAL_STEPS: String(job.progress.totalSteps) } : {}),
      ...(job.checkpointDoneFile ? { TRAINYARD_CHECKPOINT_DONE_FILE: job.checkpointDoneFile } : {}),
    };
    const overrides: ContainerOverrides = {
      Command: job.command,
      Environment: Object.entries(environment).map(([Name, Value]) => ({ Name, Value })),
    };
    const timeout = Math.max(60, Math.floor(Math.min(remainingRuntime, remainingDeadline)));
    const submit: SubmitJobInput = {
      JobName: attemptJobName(jobId, attempt.attempt),
      JobQueue: queue,
      JobDefinition: jobDefinitionName(plane.batchPrefix, job.team, tier.id),
      ShareIdentifier: shareIdentifierOf(job.team),
      ...(tier.nodes > 1
        ? { NodeOverrides: { NodePropertyOverrides: [{ TargetNodes: '0:', ContainerOverrides: overrides }] } }
        : { ContainerOverrides: overrides }),
      Timeout: { AttemptDurationSeconds: timeout },
      Tags: {
        [TRAINYARD_TAGS.jobId]: jobId,
        [TRAINYARD_TAGS.team]: job.team,
        [TRAINYARD_TAGS.attempt]: String(attempt.attempt),
      },
      PropagateTags: true,
    };
    // Announced on every try, not only the one that recorded the attempt: a try that failed after recording it
    // (PutEvents throttled, a timeout) must not lose the event. The id and the time are the attempt's, so a
    // consumer drops the repeat.
    if (plan.resume) {
      const checkpoints = await plane.workspace.listCheckpoints(keys.checkpoints);
      const from = checkpointToRestore(checkpoints); // the one the harness will restore
      await plane.events.publish([
        jobEvent(
          'Job Resumed',
          job,
          {
            attempt: attempt.attempt,
            capacity: plan.capacity,
            ...(from ? { checkpointUri: s3Uri(bucket, `${keys.checkpoints}${from.name}/`) } : {}),
            reason: from
              ? `resuming from ${from.name}${from.step !== undefined ? ` (step ${from.step})` : ''}`
              : 'no complete checkpoint yet: the attempt starts over',
          },
          new Date(attempt.submittedAt ?? now.getTime()),
        ),
      ]);
    }
    return { jobId, next: 'run', plan: { ...plan, capacity: attempt.capacity }, multiNode: tier.nodes > 1, submit };
  };
}

/** A paused job's pause counted as resumed from, as PrepareAttempt takes the job on after the resume. */
function resumedFrom(job: JobRecord): { resumedPauses: number } {
  return { resumedPauses: job.pauses ?? 0 };
}
