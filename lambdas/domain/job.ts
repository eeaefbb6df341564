/**
 * The job model shared by the API, the lifecycle handlers and local mode: job states and the transitions allowed
 * between them, and zod schemas for the job, attempt and decision records. The records are written to and read
 * from DynamoDB and returned by the API, so every read goes through these schemas.
 *
 * Timestamps: `createdAt` and decision `at` are ISO-8601 UTC strings (they are shown to people and sort as
 * strings); attempt `startedAt`/`stoppedAt` are epoch milliseconds, exactly as Batch reports them, so metering
 * uses them without conversion.
 */
import * as z from 'zod/mini';
import {
  CONFIG_ID_PATTERN,
  CONFIG_ID_RULE,
  findTier,
  MAX_RUNTIME_SECONDS,
  type TierConfig,
  type TrainyardConfig,
} from '../../lib/config';
import { BATCH_JOB_STATUSES } from './batch-job';
import { labelsSchema } from './labels';
import { attemptOutcomeSchema } from './outcome';
import { describeIssues } from './zod-issues';

/** Raised by {@link assertTransition} for a state change the lifecycle does not allow; names what is allowed. */
export class IllegalTransition extends Error {
  override name = 'IllegalTransition';
}

/** Raised when a stored or received record does not match its schema; names every offending field. */
export class InvalidJobRecord extends Error {
  override name = 'InvalidJobRecord';
}

/** Every state a job can be in. */
export const JOB_STATES = [
  'SUBMITTED',
  'ANALYZING',
  'REJECTED',
  'WAITING',
  'RUNNING',
  'PAUSED_BUDGET',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
] as const;

/** A job's lifecycle state. */
export type JobState = (typeof JOB_STATES)[number];

/** States a job never leaves. */
export const TERMINAL_STATES: readonly JobState[] = ['REJECTED', 'SUCCEEDED', 'FAILED', 'CANCELLED'];

/** States a job is still in the lifecycle in: every state but the terminal ones. */
export const LIVE_STATES: readonly JobState[] = JOB_STATES.filter((state) => !TERMINAL_STATES.includes(state));

/**
 * Allowed transitions. WAITING means "an attempt is queued in Batch"; a reclaimed, moved or retried job goes from
 * RUNNING back to WAITING for its next attempt. FAILED is reachable from every live state because a handler can
 * hit an unrecoverable error anywhere; CANCELLED because cancel works at any stage.
 */
export const TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  SUBMITTED: ['ANALYZING', 'REJECTED', 'CANCELLED', 'FAILED'],
  ANALYZING: ['WAITING', 'REJECTED', 'CANCELLED', 'FAILED'],
  WAITING: ['RUNNING', 'PAUSED_BUDGET', 'SUCCEEDED', 'CANCELLED', 'FAILED'],
  RUNNING: ['WAITING', 'PAUSED_BUDGET', 'SUCCEEDED', 'FAILED', 'CANCELLED'],
  PAUSED_BUDGET: ['WAITING', 'CANCELLED', 'FAILED'],
  REJECTED: [],
  SUCCEEDED: [],
  FAILED: [],
  CANCELLED: [],
};

/** True for REJECTED, SUCCEEDED, FAILED and CANCELLED; also takes a state read from outside (an API answer). */
export function isTerminal(state: unknown): boolean {
  return (TERMINAL_STATES as readonly unknown[]).includes(state);
}

/**
 * Throws {@link IllegalTransition} unless `from → to` is allowed. Writing the state a job is already in is allowed
 * (a no-op), so a handler that Step Functions retries can repeat its write.
 */
export function assertTransition(from: JobState, to: JobState): void {
  if (from === to) return;
  const allowed = TRANSITIONS[from];
  if (allowed.includes(to)) return;
  if (allowed.length === 0) {
    throw new IllegalTransition(`job state ${from} → ${to} is not allowed: ${from} is terminal and never changes`);
  }
  throw new IllegalTransition(
    `job state ${from} → ${to} is not allowed; from ${from} a job may go to ${allowed.join(', ')}`,
  );
}

/**
 * A job's `checkpointDoneFile`: a path inside its checkpoint directory, `/`-separated names of letters, digits, `.`,
 * `_` and `-`, none starting with `.` (the harness skips dot-directories), at most 255 characters, and no name the
 * harness takes for a file still being written (`*.tmp`, `*.part`, …, `MANIFEST.json`). The harness checks the same
 * rule (images/harness/trainyard_harness/settings.py); a test holds the two together.
 */
export const CHECKPOINT_DONE_FILE_RULE =
  "must be a path inside the checkpoint directory of at most 255 characters: '/'-separated names of letters, digits, '.', '_' and '-', none starting with '.', and not a temporary name (*.tmp, *.temp, *.part, *.partial, *.swp, *~), nor MANIFEST.json at the top (the checkpoint's own)";
const CHECKPOINT_DONE_FILE_PATTERN = /^[A-Za-z0-9_-][A-Za-z0-9._-]*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$/;
const TEMPORARY_SUFFIXES = ['.tmp', '.temp', '.part', '.partial', '.swp', '~'];

/** Whether `path` may be a job's checkpointDoneFile ({@link CHECKPOINT_DONE_FILE_RULE}). */
export function isCheckpointDoneFile(path: string): boolean {
  const name = path.split('/').at(-1) ?? '';
  return (
    path.length <= 255 &&
    CHECKPOINT_DONE_FILE_PATTERN.test(path) &&
    path !== 'MANIFEST.json' &&
    !TEMPORARY_SUFFIXES.some((suffix) => name.endsWith(suffix))
  );
}

/** Job ids double as Step Functions execution names: 1-80 characters of A-Z a-z 0-9 _ -. */
export const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,80}$/;

const jobIdSchema = z
  .string()
  .check(
    z.regex(
      JOB_ID_PATTERN,
      "must be 1-80 characters of A-Z, a-z, 0-9, '_' and '-' (it names the Step Functions execution)",
    ),
  );
const idSchema = z.string().check(z.regex(CONFIG_ID_PATTERN, `must be ${CONFIG_ID_RULE}`));
/** A moment as the records keep it: an ISO 8601 UTC timestamp (`toISOString`'s form, fractional seconds optional). */
export const isoTimestamp = z.iso.datetime({ offset: false });
const epochMs = z.int().check(z.nonnegative());
const usd = z.number().check(z.nonnegative());

/**
 * GPU memory a job may ask for, GiB: from 10 MiB (DynamoDB stores no number under 1e-130, and nothing trains in less)
 * to 2 TiB.
 */
export const GPU_MEMORY_GIB = { min: 0.01, max: 2048 } as const;

/** The most steps a job may declare (`requirements.totalSteps`). */
export const MAX_TOTAL_STEPS = 1_000_000_000;

/** What the user asked for; every field optional (analysis fills the gaps). */
export const requirementsSchema = z.strictObject({
  tier: z.optional(idSchema),
  gpuMemoryGiB: z.optional(
    z
      .number()
      .check(
        z.refine(
          (gib) => gib >= GPU_MEMORY_GIB.min && gib <= GPU_MEMORY_GIB.max,
          `must be from ${GPU_MEMORY_GIB.min} to ${GPU_MEMORY_GIB.max} GiB`,
        ),
      ),
  ),
  /** Expected runtime of the whole job, seconds (at most 14 days, the longest maxRuntime a tier may have). */
  runtimeSeconds: z.optional(z.int().check(z.positive(), z.lte(MAX_RUNTIME_SECONDS))),
  /** Finish within this many seconds of submission (createdAt). */
  deadlineSeconds: z.optional(z.int().check(z.positive())),
  /**
   * Training steps the job runs in all (its `max_iters`), when the code does not say it as a literal: the harness's
   * progress counts up to it (a deadline job's placement needs to know how far it is) and the estimate uses it.
   */
  totalSteps: z.optional(z.int().check(z.positive(), z.lte(MAX_TOTAL_STEPS))),
});

/** App-error retry policy; defaults to no retries (DESIGN: retry app errors only when the user asked for it). */
export const retriesSchema = z.strictObject({
  maxAppRetries: z._default(z.int().check(z.gte(0), z.lte(10)), 0),
  backoffSeconds: z._default(z.int().check(z.gte(1), z.lte(3600)), 60),
});

/** The estimate the cost gate used, summarised for the record. */
export const estimateSummarySchema = z.strictObject({
  costUsd: usd,
  runtimeSeconds: z.number().check(z.nonnegative()),
  gpuMemoryGiB: z.optional(z.number().check(z.nonnegative())),
  confidence: z.enum(['low', 'medium', 'high']),
  /** What the estimate was based on, in a sentence. */
  basis: z.string().check(z.minLength(1)),
});

/** Per-job counters; preemptions and errors are counted apart because they have separate budgets. */
export const countersSchema = z.strictObject({
  /** Attempts that have ended (one per Batch job). */
  attempts: z._default(z.int().check(z.nonnegative()), 0),
  reclaims: z._default(z.int().check(z.nonnegative()), 0),
  capacityCancellations: z._default(z.int().check(z.nonnegative()), 0),
  appErrors: z._default(z.int().check(z.nonnegative()), 0),
  infraErrors: z._default(z.int().check(z.nonnegative()), 0),
  /** Attempts that failed right after restoring a checkpoint (harness exit 76). */
  resumeFailures: z._default(z.int().check(z.nonnegative()), 0),
});

/** Per-job counters. */
export type JobCounters = z.output<typeof countersSchema>;

/** Latest progress the harness reported. */
export const progressSchema = z.strictObject({
  step: z.optional(z.int().check(z.nonnegative())),
  totalSteps: z.optional(z.int().check(z.positive())),
  /** 0..1 of the work done. */
  fraction: z.number().check(z.gte(0), z.lte(1)),
  loss: z.optional(z.number()),
  updatedAt: isoTimestamp,
});

/** zod schema of the job record. */
export const jobRecordSchema = z.strictObject({
  jobId: jobIdSchema,
  team: idSchema,
  /** The user it is charged to: the caller's user name as the API resolved it (userNameOf), or one an admin named. */
  user: z.string().check(z.minLength(1), z.maxLength(512)),
  project: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
  /** What the submitter labelled it with (domain/labels.ts); descriptive only. */
  labels: z.optional(labelsSchema),
  tier: idSchema,
  state: z.enum(JOB_STATES),
  createdAt: isoTimestamp,
  command: z.array(z.string()).check(z.minLength(1, 'must hold the program and its arguments')),
  requirements: z.prefault(requirementsSchema, {}),
  retries: z.prefault(retriesSchema, {}),
  /** Arguments appended to the command when resuming from a checkpoint (e.g. nanoGPT's `--init_from=resume`). */
  resumeArgs: z.optional(z.array(z.string())),
  /** The file the script writes after each finished save; the harness uploads only finished saves (see below). */
  checkpointDoneFile: z.optional(z.string()),
  estimate: z.optional(estimateSummarySchema),
  counters: z.prefault(countersSchema, {}),
  costSoFarUsd: z._default(usd, 0),
  progress: z.optional(progressSchema),
  /** Why the job is in its state (refusal, failure, pause), one sentence. */
  reason: z.optional(z.string().check(z.minLength(1))),
  /** The code bundle (tar.gz) in the workspace bucket. */
  bundle: z.strictObject({
    key: z.string().check(z.minLength(1)),
    bytes: z.int().check(z.nonnegative()),
    sha256: z.string().check(z.regex(/^[0-9a-f]{64}$/, 'must be a hex sha256')),
  }),
  /** Environment variables for the user command. */
  env: z._default(z.record(z.string(), z.string()), {}),
  /** Set by a cancel request; every lifecycle step honours it at its next decision. */
  cancelRequested: z.optional(z.boolean()),
  /**
   * Step Functions task token the job's execution waits on: paused for budget (resume or cancel sends it task
   * success), or sitting out the wait before a retry (Backoff: a cancel sends it, and the job ends at once).
   */
  pauseToken: z.optional(z.string().check(z.minLength(1))),
  /**
   * How many times the job has been paused for budget (a retried pause step counts once); numbers its
   * `Job PausedForBudget` events, so a second pause is never taken for a repeat of the first.
   */
  pauses: z.optional(z.int().check(z.positive())),
  /**
   * How many of its pauses the job has been resumed from: PrepareAttempt counts the pause it takes a resumed job on
   * from. A pause step that finds the job paused for a pause not yet resumed from is that pause's step retried,
   * whatever became of the token its first try stored.
   */
  resumedPauses: z.optional(z.int().check(z.nonnegative())),
  /** Last change to the record. */
  updatedAt: z.optional(isoTimestamp),
});

/** A job as stored and returned by the API. */
export type JobRecord = z.output<typeof jobRecordSchema>;

/**
 * A Batch job that ran under an attempt's name without being its own (SubmitJob answered an error after Batch had
 * created it, or the attempt's end was recorded before ListJobs showed it): batch-events stops it at its first event
 * and, when it had started, records what it cost here, so that the job and its budget pay for it.
 */
export const orphanRunSchema = z.strictObject({
  /** What it ran on: the instance's lifecycle, else the attempt's capacity. */
  capacity: z.enum(['spot', 'on-demand']),
  startedAt: epochMs,
  stoppedAt: epochMs,
  /** Price per node-hour it was billed at. */
  usdPerHour: usd,
  costUsd: usd,
});

/** An orphaned Batch job's run, as recorded on its attempt. */
export type OrphanRun = z.output<typeof orphanRunSchema>;

/** zod schema of one attempt (one Batch job). */
export const attemptRecordSchema = z.strictObject({
  jobId: jobIdSchema,
  /** 1 for the first attempt. */
  attempt: z.int().check(z.positive()),
  capacity: z.enum(['spot', 'on-demand']),
  queue: z.string().check(z.minLength(1)),
  batchJobId: z.optional(z.string().check(z.minLength(1))),
  instanceId: z.optional(
    z.string().check(z.regex(/^i-[0-9a-f]{8,17}$/, 'must be an EC2 instance id like i-0123456789abcdef0')),
  ),
  /** Price per node-hour paid for this attempt: the spot price at the instance's start, or on-demand. */
  usdPerHour: z.optional(usd),
  nodes: z._default(z.int().check(z.positive()), 1),
  /** When the attempt was handed to Batch. */
  submittedAt: z.optional(epochMs),
  startedAt: z.optional(epochMs),
  /** True once `Job Started` was published for this start (lambdas/shared/start-announcement.ts). */
  startAnnounced: z.optional(z.boolean()),
  stoppedAt: z.optional(epochMs),
  /**
   * True when the attempt's end, and so its cost, was recorded after its job had ended: Finalize settled the job
   * without it (batch-events charges it late, writes the job's files again and sends `Job Cost Amended`).
   */
  endedAfterJob: z.optional(z.boolean()),
  /**
   * True when the attempt's stop was recorded without Batch's word: Batch no longer reported its job, so it was billed
   * to the last sign of it running (lifecycle/common.ts). A Batch job of it reported live after that is terminated.
   */
  endUnseen: z.optional(z.boolean()),
  /**
   * What the attempt was billed while its end was unseen (`endUnseen`), kept when Batch reported the real end later and
   * the stop and cost were recorded again from Batch's record: the difference was added to the job's cost.
   */
  unseenCostUsd: z.optional(usd),
  /** When a spot interruption notice for its instance was recorded. */
  noticeAt: z.optional(epochMs),
  /** CloudWatch Logs stream of the attempt's container (Batch's container.logStreamName). */
  logStreamName: z.optional(z.string().check(z.minLength(1))),
  status: z.enum(BATCH_JOB_STATUSES),
  outcome: z.optional(attemptOutcomeSchema),
  /** The attempt's own Batch job's cost; orphans' costs are apart, in `orphans`. */
  costUsd: z.optional(usd),
  /** Orphaned Batch jobs that ran under this attempt's name, by Batch job id (each recorded once). */
  orphans: z.optional(z.record(z.string().check(z.minLength(1)), orphanRunSchema)),
});

/** An attempt as stored and returned by the API. */
export type AttemptRecord = z.output<typeof attemptRecordSchema>;

/** The moments at which the lifecycle decides something. */
export const DECISION_MOMENTS = [
  'submit',
  'attempt-ended',
  'attempt-reclaimed',
  'capacity-cancelled',
  'periodic-check',
] as const;

/**
 * The step an attempt's end decided (AttemptOutcome), kept on its decision record so that a retry of that step acts on
 * the decision already recorded, not on one taken again from inputs that moved since (a budget blocked meanwhile, the
 * clock, spot's record). Not part of the API's view.
 */
export const decidedStepSchema = z.strictObject({
  action: z.enum(['run-attempt', 'finalize', 'pause-budget']),
  capacity: z.optional(z.enum(['spot', 'on-demand'])),
  delaySeconds: z.number().check(z.nonnegative()),
  resume: z.boolean(),
  finalState: z.optional(z.enum(['SUCCEEDED', 'FAILED', 'CANCELLED'])),
  failedAs: z.optional(z.literal('timed-out')),
  fellBackToOnDemand: z.boolean(),
});

/** A decided step as kept on its decision record. */
export type DecidedStep = z.output<typeof decidedStepSchema>;

/** zod schema of one recorded decision (the job's audit trail). */
export const decisionRecordSchema = z.strictObject({
  /** 1, 2, 3… per job; the sort key that makes a repeated write of the same decision idempotent. */
  seq: z.int().check(z.positive()),
  at: isoTimestamp,
  moment: z.enum(DECISION_MOMENTS),
  /** What was decided, e.g. `run-attempt on-demand`, `finalize FAILED`. */
  decision: z.string().check(z.minLength(1)),
  reason: z.string().check(z.minLength(1)),
  /** AttemptOutcome's decision as its output acts on it (records written before it was kept have none). */
  step: z.optional(decidedStepSchema),
});

/** A recorded decision. */
export type DecisionRecord = z.output<typeof decisionRecordSchema>;

function parseWith<T extends z.ZodMiniType>(schema: T, what: string, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new InvalidJobRecord(`invalid ${what}: ${describeIssues(result.error.issues)}`);
}

/** Validates a job record (from DynamoDB or built by a handler); throws {@link InvalidJobRecord}. */
export function parseJobRecord(value: unknown): JobRecord {
  return parseWith(jobRecordSchema, 'job record', value);
}

const jobChangeSchema = z.partial(jobRecordSchema);

/**
 * Validates fields about to be written to a job record, before the write; throws {@link InvalidJobRecord}. A field
 * the record's schema refuses, once written, would make the record unreadable: every read of the job, and every
 * listing of its team's jobs, would fail.
 */
export function parseJobChange(value: Record<string, unknown>): void {
  parseWith(jobChangeSchema, 'change to a job record', value);
}

/** Validates an attempt record; throws {@link InvalidJobRecord}. */
export function parseAttemptRecord(value: unknown): AttemptRecord {
  return parseWith(attemptRecordSchema, 'attempt record', value);
}

/** Validates an orphaned Batch job's run; throws {@link InvalidJobRecord}. */
export function parseOrphanRun(value: unknown): OrphanRun {
  return parseWith(orphanRunSchema, 'orphaned Batch job run', value);
}

/** Validates a decision record; throws {@link InvalidJobRecord}. */
export function parseDecisionRecord(value: unknown): DecisionRecord {
  return parseWith(decisionRecordSchema, 'decision record', value);
}

/** Raised when a job names a tier the configuration no longer defines (the config changed after it was submitted). */
export class UnknownJobTier extends Error {
  override name = 'UnknownJobTier';
}

/** Seconds the attempts ran, from Batch's start to its stop (an attempt without both ran none that is known). */
export function computeSecondsOf(attempts: ReadonlyArray<Pick<AttemptRecord, 'startedAt' | 'stoppedAt'>>): number {
  return attempts.reduce(
    (sum, a) => sum + (a.startedAt !== undefined && a.stoppedAt !== undefined ? (a.stoppedAt - a.startedAt) / 1000 : 0),
    0,
  );
}

/** The configured tier a job runs on; UnknownJobTier, listing the configured tiers, when there is none. */
export function tierOfJob(config: TrainyardConfig, job: Pick<JobRecord, 'tier' | 'jobId'>): TierConfig {
  const tier = findTier(config, job.tier);
  if (!tier) {
    throw new UnknownJobTier(
      `job ${job.jobId} runs on tier "${job.tier}", which the configuration does not define; tiers: ${config.tiers.map((t) => t.id).join(', ')}`,
    );
  }
  return tier;
}
