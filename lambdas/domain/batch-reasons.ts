/**
 * The reasons Trainyard writes into AWS Batch (TerminateJob reasons, the spot queues' capacity-wait action) and the
 * exit codes its harness uses. The compute stack configures Batch with these strings and the outcome classifier
 * recognises them, so both import them from here.
 */

/** Prefix on every TerminateJob reason Trainyard sends; Batch returns it as the job's statusReason. */
export const TRAINYARD_REASON_PREFIX = 'Trainyard:';

/** TerminateJob reasons, one per cause, so an attempt's end can be classified from Batch's own fields. */
export const TERMINATE_REASONS = {
  spotNotice: `${TRAINYARD_REASON_PREFIX} spot interruption notice`,
  budgetPause: `${TRAINYARD_REASON_PREFIX} budget exhausted, paused`,
  cancel: `${TRAINYARD_REASON_PREFIX} cancelled by user`,
  moveToOnDemand: `${TRAINYARD_REASON_PREFIX} moving to on-demand`,
  moveToSpot: `${TRAINYARD_REASON_PREFIX} moving back to spot`,
  deadline: `${TRAINYARD_REASON_PREFIX} deadline reached`,
  jobEnded: `${TRAINYARD_REASON_PREFIX} job ended, its lifecycle execution stopped`,
  orphaned: `${TRAINYARD_REASON_PREFIX} orphaned attempt, its lifecycle had lost track of it`,
} as const;

/** Reason the spot queues' jobStateTimeLimitActions attach when they cancel a job stuck waiting for capacity. */
export const CAPACITY_WAIT_REASON = 'CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY';

/**
 * Reasons every queue's jobStateTimeLimitActions attach when they cancel a job Batch can never place: no instance of
 * the compute environments can hold what it asks (JOB_RESOURCE_REQUIREMENT), or it asks more vCPUs than their maxvCpus
 * (COMPUTE_ENVIRONMENT_MAX_RESOURCE). Config validation keeps tiers inside their instances; these end, rather than
 * leave RUNNABLE for ever, a job that slips past it (an instance type whose memory the catalog does not know).
 */
export const UNPLACEABLE_REASONS = [
  'MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT',
  'MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE',
] as const;

/** How long a job Batch says it cannot place sits RUNNABLE before its queue cancels it: Batch's minimum, 600 s. */
export const UNPLACEABLE_WAIT_SECONDS = 600;

/** Batch's statusReason when the host of a spot attempt was reclaimed: `Host EC2 (instance i-…) terminated.` */
export const HOST_TERMINATED_PATTERN = /^Host EC2 \(instance (i-[0-9a-f]+)\) terminated\.?$/;

/**
 * The stop reason of a Fargate Spot task reclaimed by AWS (the CPU tiers' spot queues run on Fargate Spot), which
 * Batch hands on as the job's statusReason: `Your Spot Task was interrupted.` Fargate sends no EC2 interruption
 * warning and serves no instance metadata notice; the task gets SIGTERM and, 30 s later, SIGKILL
 * (https://docs.aws.amazon.com/AmazonECS/latest/developerguide/fargate-capacity-providers.html).
 */
export const FARGATE_SPOT_INTERRUPTED_PATTERN = /^Your Spot Task was interrupted\.?$/;

/** The reason itself, as Batch writes it (local mode's runner reports it for a Fargate Spot interruption). */
export const FARGATE_SPOT_INTERRUPTED_REASON = 'Your Spot Task was interrupted.';

/** Harness exit codes (images/harness/README.md). */
export const HARNESS_EXIT = {
  success: 0,
  /** Interrupted (spot notice or SIGTERM), final checkpoint synced: resume me. */
  checkpointedResume: 75,
  /**
   * The command failed right after a restore, before reporting a step or saving: the harness marked that checkpoint
   * (set aside after two such failures, the one before restored instead) and an older or the same one remains: run me again.
   */
  resumeFailed: 76,
  badConfiguration: 78,
  infrastructure: 79,
} as const;
