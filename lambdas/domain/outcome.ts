/**
 * Classifies how one attempt (one Batch job) ended, from Batch's own fields only: the job's and the last attempt's
 * `statusReason`, the container's `reason` and `exitCode`. The AttemptOutcome Lambda calls this with the job detail
 * that `batch:submitJob.sync` returned (success) or put in the `Cause` (failure); local mode calls it with the same.
 *
 * Order of precedence (first rule that matches wins) and why:
 *  1. Job status SUCCEEDED → succeeded. Batch only reports SUCCEEDED for exit code 0.
 *  2. Our own TerminateJob reasons (batch-reasons.ts) → their cause. Trainyard stopped the job on purpose, and the
 *     container's exit (75 after SIGTERM, 137 after SIGKILL) is a consequence of that, not the cause. TerminateJob's
 *     reason "is returned by future DescribeJobs operations on the job"
 *     (https://docs.aws.amazon.com/batch/latest/APIReference/API_TerminateJob.html).
 *  3. The queue's capacity-wait cancellation → capacity-starved. Batch writes `Canceled by JobStateTimeLimit action
 *     due to reason: CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY`
 *     (https://docs.aws.amazon.com/batch/latest/userguide/job_stuck_in_runnable_capacity.html); the job never ran.
 *     The same cancellation for a MISCONFIGURATION reason (UNPLACEABLE_REASONS) → infra-error, not resumable: no
 *     instance of the tier can hold the job, so no retry could place it.
 *  4. `Host EC2 (instance i-…) terminated.` (job or attempt statusReason) → reclaimed. The host went away under the
 *     container, so whatever exit code exists is noise. The CDK's `Reason.SPOT_INSTANCE_RECLAIMED` matches the same
 *     text (`onStatusReason: 'Host EC2*'`, aws-cdk-lib aws-batch job-definition-base). Likewise Fargate Spot's
 *     `Your Spot Task was interrupted.` (job or attempt statusReason, or the container's reason) on the CPU tiers'
 *     spot queues: a 75 after a saved checkpoint or a 137 after Fargate's SIGKILL are both the reclaim's doing.
 *  5. `Job attempt duration exceeded timeout` → timed-out. Batch sends SIGTERM at attemptDurationSeconds
 *     (https://docs.aws.amazon.com/batch/latest/userguide/job_timeouts.html), so the harness may then exit 75: the
 *     timeout, not the checkpointed exit, is why the attempt ended.
 *  6. Container reason `OutOfMemoryError: Container killed due to memory usage` → app-error (OOM), not resumable
 *     (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/out-of-memory.html). It comes with exit code 137,
 *     which rule 10 would call a plain app error; the reason says more.
 *  7. Container reasons from ECS's stopped-task error codes that mean the container never ran properly
 *     (CannotPullContainerError, ResourceInitializationError, CannotStartContainerError, DockerTimeoutError, …,
 *     https://docs.aws.amazon.com/AmazonECS/latest/developerguide/stopped-task-errors.html) → infra-error.
 *  8. Harness exit codes: 75 → reclaimed when a spot notice was recorded for the attempt, or the harness itself saw
 *     one from the instance metadata (its progress.json says so: a warning that came before the platform knew the
 *     instance), else moved (both resumable: the final checkpoint was synced); 76 → resume-failed (the command
 *     failed right after a restore; the harness marked the checkpoint and one is left to try, so another attempt is
 *     worth it); 78 → app-error, bad configuration; 79 → infra-error.
 *  9. No exit code at all (e.g. `Essential container in task exited` with no `exitCode`) → infra-error: the
 *     container did not report how it ended, which is the platform's failure, not the user's.
 * 10. Any other non-zero exit code → app-error. Exit 0 on a FAILED job → infra-error (Batch failed it anyway).
 */
import * as z from 'zod/mini';
import './zod-issues'; // zod's English issue messages
import type { BatchJob } from './batch-job';
import {
  CAPACITY_WAIT_REASON,
  FARGATE_SPOT_INTERRUPTED_PATTERN,
  HARNESS_EXIT,
  HOST_TERMINATED_PATTERN,
  TERMINATE_REASONS,
  TRAINYARD_REASON_PREFIX,
  UNPLACEABLE_REASONS,
} from './batch-reasons';

/** Raised when asked to classify a job that has not finished (status other than SUCCEEDED or FAILED). */
export class OutcomeNotFinal extends Error {
  override name = 'OutcomeNotFinal';
}

/** Every way an attempt can end. */
export const OUTCOME_KINDS = [
  'succeeded',
  'reclaimed',
  'capacity-starved',
  'budget-stopped',
  'cancelled',
  'moved',
  'timed-out',
  'app-error',
  'resume-failed',
  'infra-error',
] as const;

/** How an attempt ended. */
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

/** zod schema of an attempt's outcome (stored on the attempt record, returned by the API). */
export const attemptOutcomeSchema = z.strictObject({
  kind: z.enum(OUTCOME_KINDS),
  /** One sentence quoting Batch's own field that decided the kind. */
  reason: z.string().check(z.minLength(1)),
  exitCode: z.optional(z.int()),
  /** EC2 instance id, when Batch named it (spot reclaim). */
  instanceId: z.optional(z.string().check(z.regex(/^i-[0-9a-f]+$/))),
  /**
   * Whether another attempt of the same command can make progress from the saved state (the newest complete
   * checkpoint). False when the job is over (succeeded, cancelled, timed out) or when running it again as it is
   * cannot help (bad configuration, out of memory on this tier).
   */
  resumable: z.boolean(),
  /** For `moved`: the capacity Trainyard was moving the job to, when its TerminateJob reason said so. */
  moveTo: z.optional(z.enum(['spot', 'on-demand'])),
});

/** How one attempt ended, in Trainyard's terms. */
export type AttemptOutcome = z.output<typeof attemptOutcomeSchema>;

/** What the caller knows about the attempt that Batch does not: whether a spot interruption notice was recorded. */
export interface OutcomeContext {
  /** True when the interruption Lambda recorded an EC2 Spot Instance Interruption Warning for this attempt. */
  noticeRecorded?: boolean;
  /**
   * True when the attempt's harness reported a spot interruption notice it read from the instance metadata
   * (progress.json `spot_notice`), which the platform may not have recorded: a warning for an instance no attempt
   * was known to run on yet.
   */
  harnessSawNotice?: boolean;
}

/** Batch's statusReason when an attempt outlives the job's attemptDurationSeconds. */
export const ATTEMPT_TIMEOUT_REASON = 'Job attempt duration exceeded timeout';

/** Prefix of ECS's stopped reason when the container was OOM-killed (`OutOfMemoryError: Container killed due to memory usage`). */
export const OUT_OF_MEMORY_PREFIX = 'OutOfMemoryError';

/** ECS stopped-task error codes that mean the platform, not the user's code, failed to run the container. */
export const INFRA_CONTAINER_ERRORS = [
  'CannotPullContainerError',
  'ResourceInitializationError',
  'CannotStartContainerError',
  'CannotCreateContainerError',
  'CannotInspectContainerError',
  'CannotStopContainerError',
  'ContainerRuntimeError',
  'ContainerRuntimeTimeoutError',
  'DockerTimeoutError',
  'TaskFailedToStart',
] as const;

const TERMINATE_KINDS: Record<keyof typeof TERMINATE_REASONS, Omit<AttemptOutcome, 'reason'>> = {
  spotNotice: { kind: 'reclaimed', resumable: true },
  budgetPause: { kind: 'budget-stopped', resumable: true },
  cancel: { kind: 'cancelled', resumable: false },
  moveToOnDemand: { kind: 'moved', resumable: true, moveTo: 'on-demand' },
  moveToSpot: { kind: 'moved', resumable: true, moveTo: 'spot' },
  deadline: { kind: 'timed-out', resumable: false },
  jobEnded: { kind: 'infra-error', resumable: false },
  orphaned: { kind: 'infra-error', resumable: true },
};

const TERMINATE_EXPLANATIONS: Record<keyof typeof TERMINATE_REASONS, string> = {
  spotNotice: 'Trainyard stopped it on a spot interruption notice',
  budgetPause: 'Trainyard paused it because a budget is exhausted',
  cancel: 'the user cancelled it',
  moveToOnDemand: 'Trainyard is moving it to on-demand capacity',
  moveToSpot: 'Trainyard is moving it back to spot capacity',
  deadline: 'its deadline was reached',
  jobEnded: 'its job had already ended (the lifecycle execution failed or was stopped), so Trainyard stopped it',
  orphaned:
    'its submission seemed to fail (or its end was already recorded) while Batch ran it, so Trainyard stopped it; the job goes on from its last checkpoint',
};

const quote = (text: string) => JSON.stringify(text);

function withExit(outcome: AttemptOutcome, exitCode: number | undefined): AttemptOutcome {
  return exitCode === undefined ? outcome : { ...outcome, exitCode };
}

/** The container's exit code of a Batch job's last try (or of the job), when it reported one. */
export function exitCodeOf(job: Pick<BatchJob, 'attempts' | 'container'>): number | undefined {
  return job.attempts.at(-1)?.container?.exitCode ?? job.container?.exitCode;
}

/**
 * Classifies a finished Batch job (one attempt) by the precedence documented at the top of this module.
 * Throws {@link OutcomeNotFinal} for a job that is not SUCCEEDED or FAILED.
 */
export function classifyAttemptOutcome(job: BatchJob, context: OutcomeContext = {}): AttemptOutcome {
  if (job.status !== 'SUCCEEDED' && job.status !== 'FAILED') {
    throw new OutcomeNotFinal(
      `Batch job ${job.jobId} is ${job.status}; only a SUCCEEDED or FAILED job has an outcome to classify`,
    );
  }
  const lastAttempt = job.attempts.at(-1);
  const exitCode = exitCodeOf(job);
  const containerReason = lastAttempt?.container?.reason ?? job.container?.reason;
  const jobReason = job.statusReason?.trim();
  const attemptReason = lastAttempt?.statusReason?.trim();
  const statusReasons = [jobReason, attemptReason].filter((r): r is string => r !== undefined && r !== '');

  // 1. Success.
  if (job.status === 'SUCCEEDED') {
    return withExit({ kind: 'succeeded', reason: `Batch reports the job SUCCEEDED.`, resumable: false }, exitCode);
  }

  // 2. Our own TerminateJob reasons.
  if (jobReason?.startsWith(TRAINYARD_REASON_PREFIX)) {
    const entry = (Object.entries(TERMINATE_REASONS) as [keyof typeof TERMINATE_REASONS, string][]).find(
      ([, text]) => text === jobReason,
    );
    if (entry) {
      const [key] = entry;
      return withExit(
        { ...TERMINATE_KINDS[key], reason: `Batch statusReason ${quote(jobReason)}: ${TERMINATE_EXPLANATIONS[key]}.` },
        exitCode,
      );
    }
    return withExit(
      {
        kind: 'infra-error',
        reason: `Batch statusReason ${quote(jobReason)} carries Trainyard's prefix but is not a reason this version sends (${Object.values(TERMINATE_REASONS).map(quote).join(', ')}).`,
        resumable: true,
      },
      exitCode,
    );
  }

  // 3. Capacity-wait cancellation by the queue's jobStateTimeLimitActions.
  const capacityReason = statusReasons.find((r) => r.includes(CAPACITY_WAIT_REASON));
  if (capacityReason) {
    return {
      kind: 'capacity-starved',
      reason: `Batch statusReason ${quote(capacityReason)}: no instance capacity was found within the queue's wait limit.`,
      resumable: true,
    };
  }

  const unplaceableReason = statusReasons.find((r) => UNPLACEABLE_REASONS.some((u) => r.includes(u)));
  if (unplaceableReason) {
    return {
      kind: 'infra-error',
      reason: `Batch statusReason ${quote(unplaceableReason)}: no instance of the tier's compute environments can hold what the job asks (vCPUs, memory, GPUs), so it was never placed; the tier's configuration needs fixing.`,
      resumable: false,
    };
  }

  // 4. The host EC2 instance went away (spot reclaim).
  for (const reason of statusReasons) {
    const match = HOST_TERMINATED_PATTERN.exec(reason);
    if (match?.[1]) {
      return withExit(
        {
          kind: 'reclaimed',
          reason: `Batch statusReason ${quote(reason)}: the spot instance was reclaimed.`,
          instanceId: match[1],
          resumable: true,
        },
        exitCode,
      );
    }
  }

  const fargateReason = [...statusReasons, containerReason?.trim()].find(
    (r): r is string => r !== undefined && FARGATE_SPOT_INTERRUPTED_PATTERN.test(r),
  );
  if (fargateReason) {
    return withExit(
      {
        kind: 'reclaimed',
        reason: `Batch reason ${quote(fargateReason)}: the Fargate Spot capacity was reclaimed.`,
        resumable: true,
      },
      exitCode,
    );
  }

  // 5. Batch's own attempt timeout.
  const timeoutReason = statusReasons.find((r) => r.startsWith(ATTEMPT_TIMEOUT_REASON));
  if (timeoutReason) {
    return withExit(
      {
        kind: 'timed-out',
        reason: `Batch statusReason ${quote(timeoutReason)}: the attempt ran past the tier's maximum runtime.`,
        resumable: false,
      },
      exitCode,
    );
  }

  // 6. Out of memory.
  if (containerReason?.startsWith(OUT_OF_MEMORY_PREFIX)) {
    return withExit(
      {
        kind: 'app-error',
        reason: `Batch container reason ${quote(containerReason)}: the job ran out of memory; choose a tier with more memory (or reduce batch size).`,
        resumable: false,
      },
      exitCode,
    );
  }

  // 7. The platform could not run the container.
  const infraCode = INFRA_CONTAINER_ERRORS.find((code) => containerReason?.startsWith(code));
  if (containerReason && infraCode) {
    return withExit(
      {
        kind: 'infra-error',
        reason: `Batch container reason ${quote(containerReason)}: the platform failed to run the container (${infraCode}).`,
        resumable: true,
      },
      exitCode,
    );
  }

  // 8. Harness exit codes.
  if (exitCode === HARNESS_EXIT.checkpointedResume) {
    if (context.noticeRecorded || context.harnessSawNotice) {
      const notice = context.noticeRecorded
        ? 'the recorded spot interruption notice'
        : 'a spot interruption notice it read from the instance metadata (the platform had recorded none)';
      return {
        kind: 'reclaimed',
        reason: `Container exit code 75: the harness checkpointed after ${notice}.`,
        exitCode,
        resumable: true,
      };
    }
    return {
      kind: 'moved',
      reason: `Container exit code 75 with no spot notice recorded: the harness was stopped (SIGTERM) and checkpointed.`,
      exitCode,
      resumable: true,
    };
  }
  if (exitCode === HARNESS_EXIT.resumeFailed) {
    return {
      kind: 'resume-failed',
      reason: `Container exit code 76: the training command failed right after the checkpoint was restored, before reporting a step; the harness marked that checkpoint (a second failure sets it aside for the one before).`,
      exitCode,
      resumable: true,
    };
  }
  if (exitCode === HARNESS_EXIT.badConfiguration) {
    return {
      kind: 'app-error',
      reason: `Container exit code 78: the harness rejected the job's configuration; fix it and resubmit.`,
      exitCode,
      resumable: false,
    };
  }
  if (exitCode === HARNESS_EXIT.infrastructure) {
    return {
      kind: 'infra-error',
      reason: `Container exit code 79: the harness hit an infrastructure failure (S3, metadata or GPU).`,
      exitCode,
      resumable: true,
    };
  }

  // 9. No exit code: the container did not report how it ended.
  if (exitCode === undefined) {
    const said = containerReason ?? attemptReason ?? jobReason;
    return {
      kind: 'infra-error',
      reason: said
        ? `Batch reported ${quote(said)} with no container exit code: the container did not report how it ended.`
        : 'Batch reported FAILED with no statusReason and no container exit code.',
      resumable: true,
    };
  }

  // 10. Exit codes.
  if (exitCode === 0) {
    return {
      kind: 'infra-error',
      reason: `Batch reported FAILED (${quote(jobReason ?? 'no statusReason')}) although the container exited 0.`,
      exitCode,
      resumable: true,
    };
  }
  return {
    kind: 'app-error',
    reason: `Container exit code ${exitCode}${containerReason ? ` (${quote(containerReason)})` : ''}: the training command failed.`,
    exitCode,
    resumable: true,
  };
}
