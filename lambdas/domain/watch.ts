/**
 * Pure rules of the event-driven handlers (batch-events, interruption, budget-watch): which Batch jobs are ours, what
 * a running job has cost so far, the harness's progress document, a job's budget scopes, the placement input of the
 * periodic check, and the decision records the watch writes. No AWS SDK, no clock: the handlers pass `now`.
 */
import * as z from 'zod/mini';
import './zod-issues'; // zod's English issue messages
import type { TierConfig } from '../../lib/config';
import { attemptPrice, recordedCostMicros } from './attempt-cost';
import type { BatchJob } from './batch-job';
import { periodOf } from './budgets';
import { ceilCents } from './estimator';
import type { AttemptRecord, DecisionRecord, JobRecord } from './job';
import { attemptCostMicroUsd, microUsdToCents } from './metering';
import {
  type Capacity,
  DEFAULT_PLACEMENT_CONFIG,
  type PlacementPolicyConfig,
  type PlacementState,
  SPOT_PLAN_RISK_AVERSION,
  spotHistoryOf,
  spotProbeCanAnswer,
  type TierSpot,
} from './placement';
import { FLEET_SPOT_MODEL } from './spot-fleet-model';
import type { SpotLengthModel } from './spot-planner';
import { type TierSpotRecord, tierSpotAt, tierSpotModel } from './tier-spot';

/** Batch tags Trainyard puts on every attempt it submits (propagated into the job detail's `tags`). */
export const TRAINYARD_TAGS = {
  jobId: 'trainyard:job-id',
  team: 'trainyard:team',
  attempt: 'trainyard:attempt',
} as const;

/** Which Trainyard attempt a Batch job is. */
export interface AttemptRef {
  readonly jobId: string;
  readonly attempt: number;
  /** The team tag, when the job carries it. */
  readonly team?: string;
}

const JOB_NAME_PATTERN = /^([A-Za-z0-9_-]{1,80})-a([1-9][0-9]{0,3})$/;
const ATTEMPT_TAG_PATTERN = /^[1-9][0-9]{0,3}$/;

/**
 * The Trainyard attempt a Batch job runs, from its tags (`trainyard:job-id` + `trainyard:attempt`), else from its
 * name `<jobId>-a<attempt>`; undefined for any other Batch job in the account. Tags win because they are set
 * explicitly at submit and cannot be confused with a user-chosen name.
 */
export function attemptRefOf(job: Pick<BatchJob, 'jobName' | 'tags'>): AttemptRef | undefined {
  const tags = job.tags ?? {};
  const taggedId = tags[TRAINYARD_TAGS.jobId];
  const taggedAttempt = tags[TRAINYARD_TAGS.attempt];
  const team = tags[TRAINYARD_TAGS.team];
  if (taggedId !== undefined && taggedAttempt !== undefined) {
    if (!/^[A-Za-z0-9_-]{1,80}$/.test(taggedId) || !ATTEMPT_TAG_PATTERN.test(taggedAttempt)) return undefined;
    return { jobId: taggedId, attempt: Number(taggedAttempt), ...(team ? { team } : {}) };
  }
  const named = JOB_NAME_PATTERN.exec(job.jobName);
  if (!named?.[1] || !named[2]) return undefined;
  return { jobId: named[1], attempt: Number(named[2]), ...(team ? { team } : {}) };
}

/** The highest-numbered attempt that `matches`. */
function newestAttempt(
  attempts: readonly AttemptRecord[],
  matches: (attempt: AttemptRecord) => boolean,
): AttemptRecord | undefined {
  return attempts
    .filter(matches)
    .reduce<AttemptRecord | undefined>((a, b) => (a && a.attempt > b.attempt ? a : b), undefined);
}

/** The attempt that is running now: started, not stopped, highest number. */
export function runningAttempt(attempts: readonly AttemptRecord[]): AttemptRecord | undefined {
  return newestAttempt(attempts, (a) => a.startedAt !== undefined && a.stoppedAt === undefined);
}

/**
 * The attempt waiting in the spot queue: handed to Batch (it has a Batch job id and a submission time) but neither
 * started nor stopped. The periodic check may move such a job to on-demand (its wait is an observed outage).
 */
export function queuedSpotAttempt(attempts: readonly AttemptRecord[]): AttemptRecord | undefined {
  return newestAttempt(
    attempts,
    (a) =>
      a.capacity === 'spot' &&
      a.batchJobId !== undefined &&
      a.submittedAt !== undefined &&
      a.startedAt === undefined &&
      a.stoppedAt === undefined,
  );
}

/**
 * Seconds after an attempt was handed to Batch from which the periodic check asks Batch whether it has started, while
 * no start is recorded. batch-events records a start within seconds of Batch's RUNNING event; an attempt this old with
 * none recorded is waiting in its queue, or its start was never heard of (the event went to the dead-letter queue, or
 * is still in EventBridge's retries), and a job running unheard of is metered by nothing and stopped by no budget.
 */
export const START_UNHEARD_AFTER_SECONDS = 600;

/**
 * The attempt to ask Batch about: handed to Batch at least START_UNHEARD_AFTER_SECONDS before `nowMs`, neither
 * started nor stopped as recorded, and the job's newest attempt.
 */
export function attemptToLookUp(attempts: readonly AttemptRecord[], nowMs: number): AttemptRecord | undefined {
  const newest = newestAttempt(attempts, () => true);
  if (newest?.submittedAt === undefined || newest.startedAt !== undefined || newest.stoppedAt !== undefined) {
    return undefined;
  }
  return nowMs - newest.submittedAt >= START_UNHEARD_AFTER_SECONDS * 1000 ? newest : undefined;
}

/**
 * A job's cost so far in USD, rounded to the cent: the recorded cost of every ended attempt and of every orphaned Batch
 * job, plus the running attempt from its start to `nowMs` at its price (per second, 60 s minimum, times its nodes).
 * Summed in micro-dollars.
 */
export function jobCostSoFar(attempts: readonly AttemptRecord[], tier: TierConfig, nowMs: number): number {
  let micros = 0;
  for (const attempt of attempts) {
    micros += recordedCostMicros(attempt);
    if (attempt.costUsd === undefined && attempt.startedAt !== undefined && attempt.stoppedAt === undefined) {
      micros += attemptCostMicroUsd({
        startedAtMs: attempt.startedAt,
        // A clock behind the recorded start (skew) must not make a negative span.
        stoppedAtMs: Math.max(nowMs, attempt.startedAt),
        usdPerHour: attemptPrice(attempt, tier),
        nodes: attempt.nodes,
      });
    }
  }
  return microUsdToCents(micros);
}

/**
 * Sum of recorded costs (ended attempts and their orphaned Batch jobs), rounded to the cent: what job.costSoFarUsd
 * holds and the ledger settles.
 */
export function recordedCost(attempts: readonly AttemptRecord[]): number {
  return microUsdToCents(attempts.reduce((sum, a) => sum + recordedCostMicros(a), 0));
}

/** The harness's progress.json (images/harness: metrics.py `progress()`); extra keys are tolerated. */
export const harnessProgressSchema = z.looseObject({
  job_id: z.string().check(z.minLength(1)),
  attempt: z.int().check(z.positive()),
  step: z.optional(z.nullable(z.int().check(z.nonnegative()))),
  total_steps: z.optional(z.nullable(z.int().check(z.positive()))),
  loss: z.optional(z.nullable(z.number())),
  updated_at: z.iso.datetime({ offset: true }),
  resumed_from_step: z.optional(z.nullable(z.int().check(z.nonnegative()))),
  /** Whether the harness read a spot interruption notice from the instance metadata during the attempt. */
  spot_notice: z.optional(z.boolean()),
});

type HarnessProgress = z.output<typeof harnessProgressSchema>;

/** progress.json when it is this attempt's (parsed); undefined when missing, malformed, another job's or attempt's. */
function attemptProgress(raw: unknown, jobId: string, attempt: number): HarnessProgress | undefined {
  const parsed = harnessProgressSchema.safeParse(raw);
  return parsed.success && parsed.data.job_id === jobId && parsed.data.attempt === attempt ? parsed.data : undefined;
}

/**
 * When the harness last reported from one attempt (epoch ms): progress.json's `updated_at` when the document is that
 * attempt's, else undefined (missing, malformed, another job's, or a later attempt's).
 */
export function attemptReportedAt(raw: unknown, jobId: string, attempt: number): number | undefined {
  const progress = attemptProgress(raw, jobId, attempt);
  return progress === undefined ? undefined : Date.parse(progress.updated_at);
}

/** Whether progress.json is this attempt's and says its harness read a spot interruption notice from IMDS. */
export function harnessSawSpotNotice(raw: unknown, jobId: string, attempt: number): boolean {
  return attemptProgress(raw, jobId, attempt)?.spot_notice === true;
}

/** The job record's progress field. */
export type JobProgress = NonNullable<JobRecord['progress']>;

/**
 * The job's progress from the harness's progress.json: step, total, fraction = step ÷ total (capped at 1), loss and
 * the harness's time. Undefined when the document is missing, malformed, for another job, or has no step and total
 * (no fraction can be known).
 */
export function progressFromHarness(raw: unknown, jobId: string): JobProgress | undefined {
  const parsed = harnessProgressSchema.safeParse(raw);
  if (!parsed.success || parsed.data.job_id !== jobId) return undefined;
  const { step, total_steps: totalSteps, loss, updated_at: updatedAt } = parsed.data;
  if (step === null || step === undefined || totalSteps === null || totalSteps === undefined) return undefined;
  return {
    step,
    totalSteps,
    fraction: Math.min(1, step / totalSteps),
    ...(loss !== null && loss !== undefined && Number.isFinite(loss) ? { loss } : {}),
    updatedAt: new Date(updatedAt).toISOString(),
  };
}

/** Whether two progress values say the same thing (so an unchanged progress.json writes nothing). */
export function sameProgress(a: JobProgress | undefined, b: JobProgress | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return (
    a.step === b.step &&
    a.totalSteps === b.totalSteps &&
    a.fraction === b.fraction &&
    a.loss === b.loss &&
    a.updatedAt === b.updatedAt
  );
}

/**
 * Progress from which a job's own cost rate is trusted for its cost to finish: below it, the cost so far is mostly
 * start-up (data, compile, a restore after a reclaim) and its rate would ask for many times the estimate.
 */
export const RATE_TRUSTED_FRACTION = 0.1;

/**
 * What a paused job is forecast to cost from here, the reservation it takes again before it resumes: the work left
 * (1 − the harness's progress fraction) priced at its estimate's rate, or, from RATE_TRUSTED_FRACTION of the work
 * done, at the rate its work so far cost when that is higher (a job that overran its estimate is expected to go on
 * doing so). The whole estimate while no progress is reported; nothing once it reports all done. Rounded up to the
 * cent.
 */
export function costToFinishUsd(job: Pick<JobRecord, 'estimate' | 'progress' | 'costSoFarUsd'>): number {
  const done = job.progress?.fraction ?? 0;
  if (done >= 1) return 0;
  const byEstimate = (job.estimate?.costUsd ?? 0) * (1 - done);
  const byRate = done >= RATE_TRUSTED_FRACTION ? (job.costSoFarUsd * (1 - done)) / done : 0;
  return ceilCents(Math.max(byEstimate, byRate));
}

/**
 * The budget period a job's reservation lives in: the month it was submitted (the cost gate reserves at submit).
 * Accruals of a job that runs into the next month still count against that reservation.
 */
export function budgetPeriodOf(job: Pick<JobRecord, 'createdAt'>): string {
  return periodOf(new Date(job.createdAt));
}

/** Reclaims and capacity cancellations since the job last moved back to spot (what the placement policy counts). */
export function spotTroublesSinceLastMove(attempts: readonly AttemptRecord[]): {
  reclaims: number;
  capacityCancellations: number;
} {
  const ordered = [...attempts].sort((a, b) => a.attempt - b.attempt);
  let start = 0;
  ordered.forEach((a, i) => {
    if (i > 0 && a.capacity === 'spot' && ordered[i - 1]?.capacity === 'on-demand') start = i;
  });
  const window = ordered.slice(start);
  return {
    reclaims: window.filter((a) => a.outcome?.kind === 'reclaimed').length,
    capacityCancellations: window.filter((a) => a.outcome?.kind === 'capacity-starved').length,
  };
}

/**
 * Whether budget-watch keeps a spot record for the tier (tier-spot.ts): the tier allows spot and its placement-score
 * probe can answer. Reclaims are folded into the same records, so only for these tiers.
 */
export function keepsTierSpotRecord(tier: Pick<TierConfig, 'spotAllowed' | 'instanceTypes'>): boolean {
  return tier.spotAllowed && spotProbeCanAnswer(tier.instanceTypes);
}

/** The interval the tier records' runs are measured against: budget-watch's schedule, the periodic check's. */
export const TIER_SPOT_CHECK_INTERVAL_SECONDS = DEFAULT_PLACEMENT_CONFIG.checkIntervalSeconds;

/**
 * The policy settings of the deployed platform for a job's tier, from config (ADR 0001 defaults for the rest). The
 * periodic check can see spot while a job is on on-demand only for tiers whose placement-score probe answers, i.e.
 * with at least SPOT_PROBE_MIN_INSTANCE_TYPES distinct instance types. Deadline jobs on such a tier are planned with
 * the tier's spot model (`tierModel`: what its spot record has learnt, tier-spot.ts tierSpotModel) or else the fleet
 * model (spot-planner.ts), at the tier's spot ÷ on-demand price; a tier without a configured spot price below its
 * on-demand price keeps the reserve rules.
 */
export function placementConfigFrom(
  base: PlacementPolicyConfig,
  spotPolicy: { reclaimsBeforeOnDemand: number; capacityWaitMinutes: number },
  tier: Pick<TierConfig, 'instanceTypes' | 'onDemandUsdPerHour' | 'spotUsdPerHour'>,
  tierModel?: SpotLengthModel,
): PlacementPolicyConfig {
  const spotVisibleOnDemand = spotProbeCanAnswer(tier.instanceTypes);
  const spot = tier.spotUsdPerHour;
  const plannable = spotVisibleOnDemand && spot !== undefined && spot < tier.onDemandUsdPerHour;
  return {
    ...base,
    // The policy needs at least one reclaim before falling back; config 0 means "never wait on spot again".
    reclaimsBeforeOnDemand: Math.max(1, spotPolicy.reclaimsBeforeOnDemand),
    capacityWaitSeconds: spotPolicy.capacityWaitMinutes * 60,
    spotVisibleOnDemand,
    ...(plannable
      ? {
          spotPlanning: {
            model: tierModel ?? FLEET_SPOT_MODEL,
            spotPriceRatio: spot / tier.onDemandUsdPerHour,
            riskAversion: SPOT_PLAN_RISK_AVERSION,
          },
        }
      : {}),
  };
}

/**
 * What every placement decision for a job on `tier` reads besides the job: the deployed policy for the tier
 * (placementConfigFrom with ADR 0001's defaults, planning with the model the tier's record has learnt) and what the
 * record says of spot at `nowMs` (tierSpotAt: undefined without a record or with a stale one).
 */
export function tierPlacementInputs(
  spotPolicy: { reclaimsBeforeOnDemand: number; capacityWaitMinutes: number },
  tier: Pick<TierConfig, 'instanceTypes' | 'onDemandUsdPerHour' | 'spotUsdPerHour'>,
  record: TierSpotRecord | undefined,
  nowMs: number,
): { policy: PlacementPolicyConfig; tierSpot: TierSpot | undefined } {
  return {
    policy: placementConfigFrom(DEFAULT_PLACEMENT_CONFIG, spotPolicy, tier, tierSpotModel(record)),
    tierSpot: tierSpotAt(record, nowMs, TIER_SPOT_CHECK_INTERVAL_SECONDS),
  };
}

/**
 * What the periodic check tells the placement policy about a running job:
 * - nowSeconds: seconds since createdAt; deadlineSeconds: the user's deadline (none → no deadline rules);
 * - workSeconds: the estimate's runtime; progressSeconds: progress.fraction × workSeconds (the harness's latest step,
 *   not only the checkpointed part: the policy's margin covers the difference of at most one checkpoint interval);
 * - current: the running attempt's capacity; spotAvailable: true while a spot attempt is running (the capacity is
 *   observably there), with spotAvailableForSeconds since the attempt started; on on-demand the job itself sees
 *   nothing of spot: `tierSpot` (the budget watch's record of the tier, tier-spot.ts tierSpotAt) says what the
 *   tier's probe saw and since when;
 * - spotHistory: what the job's spot attempts observed since submission (spotHistoryOf, open attempts up to now);
 * - reclaims / capacityCancellations: since the job last moved back to spot; spotAllowed: the tier's setting.
 * A job whose attempt waits in the spot queue (queuedSpotAttempt) is 'none' with spot unavailable since it was queued,
 * once it has waited `startAllowanceSeconds` (the restart overhead: an instance booting and pulling the image keeps a
 * placed attempt RUNNABLE that long). A younger one is starting, not proof of an outage: while the tier's record sees
 * spot it is on spot, available since it was queued (its start is not charged a second time, so a move to spot is
 * not undone while its attempt starts); otherwise it says nothing of spot and the record, if any, speaks.
 * Undefined when the job has no estimate (no work figure) or no running or queued attempt.
 */
export function placementStateFor(
  job: Pick<JobRecord, 'createdAt' | 'requirements' | 'estimate' | 'progress'>,
  attempts: readonly AttemptRecord[],
  tier: Pick<TierConfig, 'spotAllowed'>,
  nowMs: number,
  tierSpot?: TierSpot,
  startAllowanceSeconds = 0,
): PlacementState | undefined {
  const running = runningAttempt(attempts);
  const queued = running ? undefined : queuedSpotAttempt(attempts);
  if (!job.estimate || !(running || queued)) return undefined;
  const workSeconds = job.estimate.runtimeSeconds;
  const troubles = spotTroublesSinceLastMove(attempts);
  const since = (ms: number): number => Math.max(0, (nowMs - ms) / 1000);
  let observed: Pick<
    PlacementState,
    'current' | 'spotAvailable' | 'spotAvailableForSeconds' | 'spotUnavailableForSeconds'
  >;
  if (queued?.submittedAt !== undefined) {
    const waited = since(queued.submittedAt);
    if (waited >= startAllowanceSeconds)
      observed = { current: 'none', spotAvailable: false, spotUnavailableForSeconds: waited };
    else if (tierSpot?.available)
      // Starting while the tier's probe sees spot: it is on spot, its start under way since it was queued, as the
      // benchmark's simulator places it. Taken as waiting, its start would be charged again at every check until it
      // ran, and a job moved to spot with 1,380-1,680 s of slack (d = 360 s) would be sent back at the next check.
      observed = { current: 'spot', spotAvailable: true, spotAvailableForSeconds: waited };
    else observed = { current: 'none' };
  } else if (running?.capacity === 'spot')
    observed = {
      current: 'spot',
      spotAvailable: true,
      ...(running.startedAt !== undefined ? { spotAvailableForSeconds: since(running.startedAt) } : {}),
    };
  else observed = { current: 'on-demand' };
  return {
    moment: 'periodic-check',
    nowSeconds: since(Date.parse(job.createdAt)),
    ...(job.requirements.deadlineSeconds !== undefined ? { deadlineSeconds: job.requirements.deadlineSeconds } : {}),
    workSeconds,
    progressSeconds: Math.min(workSeconds, (job.progress?.fraction ?? 0) * workSeconds),
    ...observed,
    spotHistory: spotHistoryOf(attempts, nowMs),
    ...(tierSpot ? { tierSpot } : {}),
    reclaims: troubles.reclaims,
    capacityCancellations: troubles.capacityCancellations,
    spotAllowed: tier.spotAllowed,
  };
}

/** Decision text for stopping an attempt because its budget is exhausted. */
export function budgetPauseDecision(attempt: number): string {
  return `stop-attempt ${attempt} budget-pause`;
}

/** Decision text for stopping a job's attempt because its deadline has passed. */
export function deadlineDecision(attempt: number): string {
  return `stop-attempt ${attempt} deadline`;
}

/**
 * The attempt a job has in Batch, queued or running, that its deadline has outlived at `nowMs`; undefined when the
 * job has no deadline, it has not passed, or no attempt is in Batch. A queue may hold an attempt past the deadline
 * (on-demand queues have no capacity wait, and Batch's attempt timeout counts from the start), and nothing else
 * would end it.
 */
export function attemptPastDeadline(
  job: JobRecord,
  attempts: readonly AttemptRecord[],
  nowMs: number,
): AttemptRecord | undefined {
  if (!deadlinePassed(job, nowMs)) return undefined;
  return newestAttempt(attempts, (a) => a.batchJobId !== undefined && a.stoppedAt === undefined);
}

/** Whether a job has a deadline and it has passed at `nowMs`. */
export function deadlinePassed(job: Pick<JobRecord, 'createdAt' | 'requirements'>, nowMs: number): boolean {
  const deadline = job.requirements.deadlineSeconds;
  return deadline !== undefined && nowMs >= Date.parse(job.createdAt) + deadline * 1000;
}

/** Decision text for moving a running attempt to other capacity. */
export function moveDecision(attempt: number, to: Capacity): string {
  return `move-attempt ${attempt} to ${to}`;
}

/** Whether the job's decision log already holds this decision (the watch's record-once check). */
export function hasDecision(decisions: readonly DecisionRecord[], decision: string): boolean {
  return decisions.some((d) => d.decision === decision);
}

/** The next decision sequence number (1 for the first). */
export function nextDecisionSeq(decisions: readonly DecisionRecord[]): number {
  return decisions.reduce((max, d) => Math.max(max, d.seq), 0) + 1;
}
