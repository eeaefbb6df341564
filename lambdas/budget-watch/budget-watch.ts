/**
 * The budget watch, every 5 minutes (EventBridge schedule): meters running jobs, enforces budgets, runs the periodic
 * placement check and resumes jobs whose budget allows them again.
 *
 * 1. Each tier that allows spot and whose placement-score probe can answer (at least SPOT_PROBE_MIN_INSTANCE_TYPES
 *    instance types) is probed (FleetFacts.spotCapacityAvailable; one call per distinct set of types per run), jobs
 *    or not, and its spot record (domain/tier-spot.ts: the answer and since when it has held without a break) moves
 *    forward: written only over the record it was computed from, and not at all for a tick the record already holds,
 *    so a replayed tick writes nothing. Placement decisions read it for the age of spot's state, which a job cannot
 *    see from its own attempts.
 * 1a. Starts never heard of: a WAITING job whose newest attempt was handed to Batch START_UNHEARD_AFTER_SECONDS ago
 *    or more with no start recorded is looked up in Batch (DescribeJobs by its Batch job id, else ListJobs by name in
 *    its queue; capped per run like the others); when Batch reports it RUNNING, the start is recorded exactly as
 *    batch-events records it from the state change that never came (the event's detail is DescribeJobs' job), and
 *    the job, now RUNNING, goes through 2–4 in this run. Without it, a job whose RUNNING event ended in batch-events'
 *    dead-letter queue ran unmetered and unstopped by any budget until its end, and the check in 5 took it for still
 *    waiting for capacity.
 * 2. Running jobs (capped per run; past the cap they take turns, oldest first from where the last tick stopped, the
 *    rest logged as deferred: {@link turnOf}): patch
 *    job.progress from the harness's progress.json (only when it changed); accrue the running cost — recorded costs
 *    of ended attempts plus the running attempt from its start to the tick's time at its price — with
 *    `ledger.accrue`, and emit `Budget Threshold Crossed` for each crossing the ledger reports (once per scope,
 *    period and threshold: the ledger records each crossing once; shared/budget-alerts.ts).
 * 3. Every running job charged to a blocked scope and month is stopped gracefully, those the cap left unmetered
 *    included: TerminateJob with the budget-pause reason (the harness checkpoints on SIGTERM; the lifecycle then
 *    pauses the job). Before the stops the ledger
 *    records the exhaustion and the jobs it pauses (`recordExhaustion`); after them `Budget Exhausted` names them
 *    and the exhaustion is marked published (shared/budget-alerts.ts). A job charged to several blocked scopes (its
 *    team's and its project's) is named in each one's exhaustion and stopped once.
 * 4. Other running jobs with an estimate get the periodic placement check (domain/watch.ts placementStateFor says
 *    what the policy is told, with the tier's record); a move is recorded as a decision (moment periodic-check) and
 *    the attempt is stopped with moveToOnDemand / moveToSpot — the lifecycle starts the next attempt on the other
 *    capacity. A deadline job running on on-demand learns from the record whether spot is back and for how long.
 * 5. WAITING deadline jobs whose attempt waits in the spot queue (queuedSpotAttempt) get the same check, with spot
 *    unavailable since the attempt was queued: the policy may move them to on-demand before the queue's capacity
 *    wait runs out (TerminateJob cancels the queued Batch job; nothing accrues while it waits).
 *    Before 3–5, a deadline job whose deadline has passed with an attempt still queued (an on-demand queue never
 *    cancels a wait) or running (Batch's timeout counts from the start, not the queueing) has it stopped with the
 *    deadline reason (`stop-attempt <n> deadline`, once); the lifecycle ends the job timed out.
 * 6. PAUSED_BUDGET jobs whose scopes are no longer blocked and can hold what the job is forecast to cost to finish
 *    (its reservation is raised to that first, `reserveToFinish`; a job a scope cannot cover stays paused, nothing
 *    raised): SendTaskSuccess(pauseToken, { action: 'resume' }), then the token is removed from the job. A paused
 *    deadline job whose deadline has passed is sent the same, with nothing reserved, blocked or not: its next step
 *    (PrepareAttempt) checks the deadline first and fails it.
 * 7. Budget alerts left behind: crossings of this month or the last that a writer (cost gate, finalize, the API,
 *    an earlier tick) recorded over a minute ago and never marked published are published now, and so are
 *    exhaustions an earlier tick recorded and did not announce (budget-alerts.ts).
 * 8. The platform's gauges at the tick's time (domain/platform-metrics.ts, when config.observability.platformMetrics
 *    is on): running jobs by capacity, waiting jobs, each team's spend rate and budget used, each probed tier's spot.
 *
 * Replays: "now" is the scheduled event's `time`, not the clock, so a redelivered tick accrues the same figure (the
 * ledger ignores a figure it has already seen). Each stop is recorded as a decision (`stop-attempt <n> budget-pause`,
 * `move-attempt <n> to <capacity>`) after its TerminateJob; a later tick that finds the decision does nothing, so
 * TerminateJob is called once per attempt and reason (again only if a run failed between the two). Resume removes
 * the token after SendTaskSuccess; a token Step Functions no longer knows counts as already used.
 * A failure on one job does not stop the others; the run then fails with {@link BudgetWatchIncomplete} naming them,
 * so the Errors alarm fires and EventBridge retries the (idempotent) run.
 */
import type { TierConfig } from '../../lib/config';
import { createBatchJobRecorder } from '../batch-events/batch-events';
import { attemptPrice } from '../domain/attempt-cost';
import { TERMINATE_REASONS } from '../domain/batch-reasons';
import { BudgetExceeded, formatScope, jobScopes, periodBefore, periodOf } from '../domain/budgets';
import { type AttemptRecord, type DecisionRecord, type JobRecord, type JobState, tierOfJob } from '../domain/job';
import { DEFAULT_PLACEMENT_CONFIG, decidePlacement } from '../domain/placement';
import type { MetricDatum } from '../domain/platform-metrics';
import { nextTierSpot, type TierSpotRecord } from '../domain/tier-spot';
import {
  attemptPastDeadline,
  attemptToLookUp,
  budgetPauseDecision,
  budgetPeriodOf,
  deadlineDecision,
  deadlinePassed,
  hasDecision,
  jobCostSoFar,
  keepsTierSpotRecord,
  moveDecision,
  nextDecisionSeq,
  placementStateFor,
  progressFromHarness,
  queuedSpotAttempt,
  runningAttempt,
  sameProgress,
  TIER_SPOT_CHECK_INTERVAL_SECONDS,
  tierPlacementInputs,
} from '../domain/watch';
import { jobKeysFor } from '../domain/workspace-layout';
import { lookUpAttempt } from '../shared/batch-lookup';
import { publishCrossings, publishExhaustion, publishLeftBehind, reserveToFinish } from '../shared/budget-alerts';
import type { ControlPlane } from '../shared/control-plane';
import { parseScheduledEvent } from '../shared/event-schemas';
import { UnknownBudgetJob } from '../shared/ledger';
import { logger } from '../shared/logger';

/** Raised at the end of a run in which some jobs could not be handled; names each job and why. */
export class BudgetWatchIncomplete extends Error {
  override name = 'BudgetWatchIncomplete';
}

/** Raised when a decision could not be given a sequence number because others kept taking them. */
export class DecisionNotRecorded extends Error {
  override name = 'DecisionNotRecorded';
}

/** Options of the watch. */
export interface BudgetWatchOptions {
  /** Most running jobs (and, separately, paused jobs) handled per run. @default 100 */
  readonly maxJobsPerRun?: number;
}

/** What one run did (job ids per action), for logs and tests. */
export interface BudgetWatchResult {
  /** The spot probe's answer for each tier it could answer for this run. */
  readonly spotSeen: Array<{ tier: string; available: boolean }>;
  /** Waiting jobs whose attempt Batch reported running with no start recorded: the start was recorded from it. */
  readonly startsRecorded: string[];
  readonly metered: string[];
  readonly progressUpdated: string[];
  readonly budgetStopped: string[];
  /**
   * Jobs whose queued or running attempt was stopped because their deadline had passed, and paused jobs whose pause
   * was ended for it (they fail at their next step).
   */
  readonly deadlineStopped: string[];
  readonly moved: Array<{ jobId: string; to: 'spot' | 'on-demand' }>;
  readonly resumed: string[];
  /** Jobs left for the next run because of the cap. */
  readonly deferred: string[];
  /** Events published. */
  events: number;
}

type Plane = Pick<
  ControlPlane,
  'config' | 'jobs' | 'ledger' | 'workspace' | 'batch' | 'events' | 'lifecycle' | 'fleet' | 'metrics' | 'clock'
>;

/** Spot probes of one run, by distinct sorted instance types: each set is asked once per run. */
type SpotProbes = Map<string, Promise<boolean | undefined>>;

interface Metered {
  job: JobRecord;
  attempts: AttemptRecord[];
  tier: TierConfig;
  blockedScopes: string[];
  /**
   * Why the accrual's threshold crossings could not be published (they stay recorded, unpublished, for a later run).
   * The accrual stands and its blocked scopes still stop their jobs: a stop never waits on an alert getting out.
   */
  unpublished?: Error;
}

/** A running attempt to stop for an exhausted budget. */
interface BudgetStop {
  m: Metered;
  attempt: number;
  batchJobId: string;
  decisions: DecisionRecord[];
}

/** A scope in the month a job is charged to: budgets block per scope and month. */
function scopeMonth(scope: string, job: JobRecord): string {
  return `${scope} ${budgetPeriodOf(job)}`;
}

/** Step Functions errors meaning the task token was already used or expired: nothing left to resume. */
const GONE_TOKEN_ERRORS = ['TaskDoesNotExist', 'TaskTimedOut', 'InvalidToken'];

function byAge(a: JobRecord, b: JobRecord): number {
  return a.createdAt === b.createdAt ? (a.jobId < b.jobId ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1;
}

/** How often the watch runs: its schedule (lib/lifecycle/event-handlers.ts BUDGET_WATCH_INTERVAL), the periodic check. */
const WATCH_PERIOD_MS = DEFAULT_PLACEMENT_CONFIG.checkIntervalSeconds * 1000;

/**
 * The jobs this tick handles when there are more than `cap`: oldest first, from where the previous tick stopped, so
 * they take turns and each is handled at least once every ceil(n / cap) ticks (the oldest `cap` every time would leave
 * the others unmetered, unstopped and unchecked for as long as the oldest run). The turn follows from the tick's time,
 * so a replayed tick handles the same jobs.
 */
function turnOf<T extends JobRecord>(jobs: readonly T[], cap: number, nowMs: number): { now: T[]; later: T[] } {
  const sorted = [...jobs].sort(byAge);
  if (sorted.length <= cap) return { now: sorted, later: [] };
  const start = (Math.floor(nowMs / WATCH_PERIOD_MS) * cap) % sorted.length;
  const rotated = [...sorted.slice(start), ...sorted.slice(0, start)];
  return { now: rotated.slice(0, cap), later: rotated.slice(cap) };
}

/** Builds the budget watch from the parts of the control plane it uses. */
export function createBudgetWatchHandler(plane: Plane, options: BudgetWatchOptions = {}) {
  const cap = options.maxJobsPerRun ?? 100;
  const recordBatchJob = createBatchJobRecorder(plane);

  /** Writes a decision under the next free sequence number; re-reads to make sure no concurrent writer took it. */
  async function recordDecision(
    jobId: string,
    known: readonly DecisionRecord[],
    record: Omit<DecisionRecord, 'seq'>,
  ): Promise<void> {
    let decisions = known;
    for (let tries = 0; tries < 3; tries++) {
      const seq = nextDecisionSeq(decisions);
      await plane.jobs.putDecision(jobId, { seq, ...record });
      decisions = await plane.jobs.listDecisions(jobId);
      if (decisions.some((d) => d.seq === seq && d.decision === record.decision)) return;
    }
    throw new DecisionNotRecorded(
      `could not record decision "${record.decision}" for job ${jobId}: its sequence numbers kept being taken by concurrent writers`,
    );
  }

  /**
   * Asks Batch about a waiting job's attempt whose start has gone unrecorded for START_UNHEARD_AFTER_SECONDS and, when
   * Batch reports it running, records the start as batch-events does from the event that never came (the event's
   * detail is DescribeJobs' job). Whether it recorded one: the job is then RUNNING, and metered from its start.
   */
  async function recordUnheardStart(
    job: JobRecord,
    attempts: readonly AttemptRecord[],
    nowMs: number,
  ): Promise<boolean> {
    const attempt = attemptToLookUp(attempts, nowMs);
    if (!attempt) return false;
    const batchJob = await lookUpAttempt(plane, job, attempt);
    if (batchJob?.status !== 'RUNNING') return false;
    const recorded = await recordBatchJob(batchJob);
    if (recorded.action !== 'started') return false;
    logger.warn(
      'Batch reports an attempt running whose start was not recorded (its state change never arrived); the start is recorded from DescribeJobs',
      {
        jobId: job.jobId,
        attempt: attempt.attempt,
        batchJobId: batchJob.jobId,
        startedAt: batchJob.startedAt,
      },
    );
    return true;
  }

  /** Progress and accrual for one running job; returns what the later passes need. */
  async function meter(job: JobRecord, nowMs: number, at: string, result: BudgetWatchResult): Promise<Metered> {
    const tier = tierOfJob(plane.config, job);
    let current = job;
    const progress = progressFromHarness(
      await plane.workspace.getJson(jobKeysFor(job.team, job.jobId).progress),
      job.jobId,
    );
    if (progress && !sameProgress(progress, job.progress)) {
      current = await plane.jobs.patchJob(job.jobId, { progress });
      result.progressUpdated.push(job.jobId);
    }
    const attempts = await plane.jobs.listAttempts(job.jobId);
    const costSoFar = jobCostSoFar(attempts, tier, nowMs);
    let blockedScopes: string[] = [];
    let unpublished: Error | undefined;
    try {
      const accrual = await plane.ledger.accrue(job.jobId, costSoFar);
      blockedScopes = accrual.blockedScopes;
      result.metered.push(job.jobId);
      try {
        result.events += await publishCrossings(plane, accrual.crossings, at);
      } catch (error) {
        unpublished = error as Error;
      }
    } catch (error) {
      if (!(error instanceof UnknownBudgetJob)) throw error;
      logger.warn('running job has no reservation in the budget ledger; not metered', { jobId: job.jobId });
    }
    return { job: current, attempts, tier, blockedScopes, ...(unpublished && { unpublished }) };
  }

  /** The running attempt a job in a blocked scope is still to be stopped for, with its decisions; undefined once done. */
  async function pendingBudgetStop(m: Metered): Promise<BudgetStop | undefined> {
    const attempt = runningAttempt(m.attempts);
    if (!attempt?.batchJobId) return undefined;
    const decisions = await plane.jobs.listDecisions(m.job.jobId);
    if (hasDecision(decisions, budgetPauseDecision(attempt.attempt))) return undefined;
    return { m, attempt: attempt.attempt, batchJobId: attempt.batchJobId, decisions };
  }

  /** Stops a job's running attempt gracefully for its exhausted budget, and records the decision. */
  async function stopForBudget(stop: BudgetStop, scope: string, at: string): Promise<void> {
    await plane.batch.terminateJob(stop.batchJobId, TERMINATE_REASONS.budgetPause);
    await recordDecision(stop.m.job.jobId, stop.decisions, {
      at,
      moment: 'periodic-check',
      decision: budgetPauseDecision(stop.attempt),
      reason: `Budget ${scope} for ${budgetPeriodOf(stop.m.job)} is exhausted: attempt ${stop.attempt} is stopped gracefully (it checkpoints) and the job pauses until the budget allows it.`,
    });
  }

  /**
   * Stops the attempt a job's deadline has outlived (`attemptPastDeadline`) with the deadline reason, once: the
   * lifecycle classifies the attempt as timed out and ends the job. Whether it stopped one.
   */
  async function stopAtDeadline(job: JobRecord, attempts: readonly AttemptRecord[], nowMs: number, at: string) {
    const attempt = attemptPastDeadline(job, attempts, nowMs);
    if (!attempt?.batchJobId) return false;
    const decisions = await plane.jobs.listDecisions(job.jobId);
    const decision = deadlineDecision(attempt.attempt);
    if (hasDecision(decisions, decision)) return false;
    await plane.batch.terminateJob(attempt.batchJobId, TERMINATE_REASONS.deadline);
    await recordDecision(job.jobId, decisions, {
      at,
      moment: 'periodic-check',
      decision,
      reason: `The deadline (${job.requirements.deadlineSeconds} s after submission) has passed: attempt ${attempt.attempt} is stopped, ${attempt.startedAt === undefined ? 'still queued' : 'still running'}.`,
    });
    return true;
  }

  /** Whether spot capacity for the tier's instance types is available now, asked once per run and set of types. */
  function probeSpot(tier: TierConfig, probes: SpotProbes): Promise<boolean | undefined> {
    const types = [...new Set(tier.instanceTypes)].sort();
    const key = types.join(',');
    let probe = probes.get(key);
    if (probe === undefined) {
      probe = plane.fleet.spotCapacityAvailable?.(types) ?? Promise.resolve(undefined);
      probes.set(key, probe);
    }
    return probe;
  }

  /**
   * Probes one tier and moves its spot record forward; returns the record this run's decisions read (the stored one
   * when the probe could not tell, the newer one when another run stored it first).
   */
  async function observeTier(
    tier: TierConfig,
    nowMs: number,
    probes: SpotProbes,
    result: BudgetWatchResult,
  ): Promise<TierSpotRecord | undefined> {
    const available = await probeSpot(tier, probes);
    if (available === undefined) return plane.jobs.getTierSpot(tier.id);
    result.spotSeen.push({ tier: tier.id, available });
    return plane.jobs.updateTierSpot(tier.id, (stored) =>
      nextTierSpot(stored, tier.id, available, nowMs, TIER_SPOT_CHECK_INTERVAL_SECONDS),
    );
  }

  /** The periodic placement check for one job; the capacity moved to, or undefined. */
  async function checkPlacement(
    m: Metered,
    nowMs: number,
    at: string,
    tierSpots: ReadonlyMap<string, TierSpotRecord>,
  ): Promise<'spot' | 'on-demand' | undefined> {
    const { policy, tierSpot } = tierPlacementInputs(plane.config.spotPolicy, m.tier, tierSpots.get(m.tier.id), nowMs);
    const state = placementStateFor(m.job, m.attempts, m.tier, nowMs, tierSpot, policy.restartOverheadSeconds);
    const attempt = runningAttempt(m.attempts) ?? queuedSpotAttempt(m.attempts);
    if (!state || !attempt?.batchJobId) return undefined;
    const placement = decidePlacement(state, policy);
    if (!placement.move || placement.capacity === state.current) return undefined;
    const decisions = await plane.jobs.listDecisions(m.job.jobId);
    const decision = moveDecision(attempt.attempt, placement.capacity);
    if (hasDecision(decisions, decision)) return undefined;
    const reason = placement.capacity === 'on-demand' ? TERMINATE_REASONS.moveToOnDemand : TERMINATE_REASONS.moveToSpot;
    await plane.batch.terminateJob(attempt.batchJobId, reason);
    await recordDecision(m.job.jobId, decisions, {
      at,
      moment: 'periodic-check',
      decision,
      reason: placement.reason,
    });
    return placement.capacity;
  }

  /**
   * The platform's gauges for this tick: the metered jobs' running attempts by capacity and, per team, their price
   * per hour; the waiting jobs; each team's budget used this month; each probed tier's spot.
   */
  async function gauges(
    metered: readonly Metered[],
    waitingJobs: number,
    nowMs: number,
    spotSeen: BudgetWatchResult['spotSeen'],
  ): Promise<MetricDatum[]> {
    const running = { spot: 0, 'on-demand': 0 };
    const spendRate = new Map(plane.config.teams.map((t) => [t.id, 0]));
    for (const m of metered) {
      const attempt = runningAttempt(m.attempts);
      if (!attempt) continue;
      running[attempt.capacity] += 1;
      const rate = attemptPrice(attempt, m.tier) * (attempt.nodes ?? 1);
      spendRate.set(m.job.team, (spendRate.get(m.job.team) ?? 0) + rate);
    }
    const datums: MetricDatum[] = [
      { metric: 'RunningJobs', value: running.spot, dimensions: { Capacity: 'spot' } },
      { metric: 'RunningJobs', value: running['on-demand'], dimensions: { Capacity: 'on-demand' } },
      { metric: 'WaitingJobs', value: waitingJobs },
    ];
    const period = periodOf(new Date(nowMs));
    for (const [team, usdPerHour] of spendRate) {
      datums.push({ metric: 'SpendRate', value: Math.round(usdPerHour * 10_000) / 10_000, dimensions: { Team: team } });
      const percentUsed = (await plane.ledger.usage(formatScope('team', team), period))?.percentUsed;
      if (typeof percentUsed === 'number') {
        datums.push({ metric: 'BudgetUsed', value: percentUsed, dimensions: { Team: team } });
      }
    }
    for (const { tier, available } of spotSeen) {
      datums.push({ metric: 'SpotAvailable', value: available ? 1 : 0, dimensions: { Tier: tier } });
    }
    return datums;
  }

  /**
   * Ends the pause of a job whose deadline has passed, budget or not: the resumed execution's next step
   * (PrepareAttempt) checks the deadline before the budget and fails the job. Nothing is reserved for it. True when
   * it sent the resume; without it, a deadline job paused for budget would wait for a raise that could no longer help.
   */
  async function releaseAtDeadline(job: JobRecord, nowMs: number): Promise<boolean> {
    if (!job.pauseToken || !deadlinePassed(job, nowMs)) return false;
    logger.info('a paused job reached its deadline; its pause ends so that the job fails', { jobId: job.jobId });
    await releasePause(job);
    return true;
  }

  /** Resumes a paused job when none of its scopes is blocked; true when it sent the resume. */
  async function resumeIfAllowed(job: JobRecord, at: string): Promise<boolean> {
    if (!job.pauseToken) return false;
    if (await plane.ledger.firstBlockedScope(jobScopes(job), budgetPeriodOf(job))) return false;
    try {
      await reserveToFinish(plane, job, at);
    } catch (error) {
      if (!(error instanceof BudgetExceeded)) throw error;
      const { scope, requestedUsd, availableUsd } = error.details;
      logger.info('a paused job stays paused: a budget cannot hold what it is forecast to cost to finish', {
        jobId: job.jobId,
        scope,
        requestedUsd,
        availableUsd,
      });
      return false;
    }
    await releasePause(job);
    return true;
  }

  /** Sends the job's pause token `resume` (one already spent is fine) and clears that token from the job. */
  async function releasePause(job: JobRecord): Promise<void> {
    if (!job.pauseToken) return;
    try {
      await plane.lifecycle.sendTaskSuccess(job.pauseToken, { action: 'resume' });
    } catch (error) {
      if (!GONE_TOKEN_ERRORS.includes((error as Error).name)) throw error;
      logger.info('pause token already used or expired; clearing it', {
        jobId: job.jobId,
        error: (error as Error).name,
      });
    }
    // Only the token it sent: one the pause step stored since (a retry) is what the execution now waits on.
    if (!(await plane.jobs.removePauseToken(job.jobId, job.pauseToken))) {
      logger.warn('the job’s pause token changed while it was resumed; the new one is kept for the next run', {
        jobId: job.jobId,
      });
    }
  }

  return async function runBudgetWatch(event: unknown): Promise<BudgetWatchResult> {
    const tick = parseScheduledEvent(event);
    const nowMs = tick.timeMs;
    const at = new Date(nowMs).toISOString();
    const teams = plane.config.teams.map((t) => t.id);
    const result: BudgetWatchResult = {
      spotSeen: [],
      startsRecorded: [],
      metered: [],
      progressUpdated: [],
      budgetStopped: [],
      deadlineStopped: [],
      moved: [],
      resumed: [],
      deferred: [],
      events: 0,
    };
    const failures: string[] = [];
    const attempt = async (jobId: string, work: () => Promise<void>) => {
      try {
        await work();
      } catch (error) {
        const e = error as Error;
        logger.error('budget watch failed for a job', { jobId, error: `${e.name}: ${e.message}` });
        failures.push(`${jobId}: ${e.name}: ${e.message}`);
      }
    };

    const probes: SpotProbes = new Map();
    const tierSpots = new Map<string, TierSpotRecord>();
    for (const tier of plane.config.tiers.filter(keepsTierSpotRecord)) {
      await attempt(`tier ${tier.id}`, async () => {
        try {
          const record = await observeTier(tier, nowMs, probes, result);
          if (record) tierSpots.set(tier.id, record);
        } catch (error) {
          // The tick could not be stored (throttled, or lost every race with reclaim folds): the run fails naming the
          // tier, but its jobs' checks read the stored record, as when the probe cannot tell, not none (which would
          // plan them with the fleet model and without spot's state, and a move decided so is not undone).
          const stored = await plane.jobs.getTierSpot(tier.id).catch(() => undefined);
          if (stored) tierSpots.set(tier.id, stored);
          throw error;
        }
      });
    }

    // The jobs this tick handles, in one read of the live states: a record that does not parse is this run's failure
    // (named, so the run ends incomplete), never every other job's.
    let live = await plane.jobs.listJobsInStates(teams, ['RUNNING', 'WAITING', 'PAUSED_BUDGET'], ({ key, error }) => {
      logger.error('budget watch could not read a job record', { key, error: error.message });
      failures.push(`${key}: ${error.name}: ${error.message}`);
    });
    const inState = (state: JobState) => live.filter((job) => job.state === state);
    const defer = (jobs: readonly JobRecord[]) => {
      for (const { jobId } of jobs) if (!result.deferred.includes(jobId)) result.deferred.push(jobId);
    };

    // Starts never heard of, before anything reads the jobs' states: a job Batch runs while its record says WAITING
    // would be metered by nothing, stopped by no budget, and checked as if it still waited for capacity.
    // A waiting job's attempts, read once for this check and the placement check below (a recorded start drops them).
    const waitingAttempts = new Map<string, AttemptRecord[]>();
    const attemptsOfWaiting = async (jobId: string) => {
      const attempts = waitingAttempts.get(jobId) ?? (await plane.jobs.listAttempts(jobId));
      waitingAttempts.set(jobId, attempts);
      return attempts;
    };
    const unheard = turnOf(inState('WAITING'), cap, nowMs);
    defer(unheard.later);
    for (const job of unheard.now) {
      await attempt(job.jobId, async () => {
        if (await recordUnheardStart(job, await attemptsOfWaiting(job.jobId), nowMs)) {
          result.startsRecorded.push(job.jobId);
          waitingAttempts.delete(job.jobId); // its start was written: read again by whatever looks at it next
        }
      });
    }
    if (result.startsRecorded.length > 0) {
      const started = new Map<string, JobRecord>();
      for (const jobId of result.startsRecorded) {
        const job = await plane.jobs.getJob(jobId);
        if (job) started.set(jobId, job);
      }
      live = live.map((job) => started.get(job.jobId) ?? job);
    }

    const allWaiting = inState('WAITING');
    const running = turnOf(inState('RUNNING'), cap, nowMs);
    defer(running.later);
    const metered: Metered[] = [];
    for (const job of running.now) {
      await attempt(job.jobId, async () => {
        const m = await meter(job, nowMs, at, result);
        metered.push(m);
        // Counted as this job's failure (the run ends incomplete and is retried), after its blocked scopes are kept.
        if (m.unpublished) throw m.unpublished;
      });
    }

    // A scope's month blocked by any job's accrual stops every running job charged to it, including jobs metered
    // before it tipped; the others get the placement check.
    const blocked = new Set(metered.flatMap((m) => m.blockedScopes.map((scope) => scopeMonth(scope, m.job))));
    // Running jobs the cap leaves unmetered this run are stopped all the same when a blocked scope charges them: the
    // cap bounds the metering, not how long a blocked budget keeps paying.
    const unmetered: Metered[] = [];
    for (const job of running.later) {
      if (!jobScopes(job).some((scope) => blocked.has(scopeMonth(scope, job)))) continue;
      await attempt(job.jobId, async () => {
        const attempts = await plane.jobs.listAttempts(job.jobId);
        unmetered.push({ job, attempts, tier: tierOfJob(plane.config, job), blockedScopes: [] });
      });
    }
    // A job charged to several blocked scopes is in each one's exhaustion (each gets its `Budget Exhausted`), and is
    // stopped once, by the first of them whose exhaustion is recorded.
    const stops = new Map<string, { scope: string; period: string; pending: BudgetStop[] }>();
    for (const m of [...metered, ...unmetered]) {
      const scopes = [...new Set([...m.blockedScopes, ...jobScopes(m.job)])].filter((s) =>
        blocked.has(scopeMonth(s, m.job)),
      );
      await attempt(m.job.jobId, async () => {
        if (await stopAtDeadline(m.job, m.attempts, nowMs, at)) {
          result.deadlineStopped.push(m.job.jobId);
          return;
        }
        if (scopes.length > 0) {
          const stop = await pendingBudgetStop(m);
          if (!stop) return;
          for (const scope of scopes) {
            const key = scopeMonth(scope, m.job);
            const entry = stops.get(key) ?? { scope, period: budgetPeriodOf(m.job), pending: [] };
            entry.pending.push(stop);
            stops.set(key, entry);
          }
          return;
        }
        const to = await checkPlacement(m, nowMs, at, tierSpots);
        if (to) result.moved.push({ jobId: m.job.jobId, to });
      });
    }

    // Each exhausted scope: record which jobs pause, stop them, then announce it (a failed announcement is made good
    // by step 7 on a later tick).
    const stoppedForBudget = new Set<string>();
    for (const { scope, period, pending } of stops.values()) {
      await attempt(`${scope} ${period}`, async () => {
        const exhaustion = await plane.ledger.recordExhaustion(
          scope,
          period,
          pending.map((stop) => stop.m.job.jobId),
        );
        if (!exhaustion) return; // its limit was raised since the accrual: nothing to stop for it
        for (const stop of pending) {
          if (stoppedForBudget.has(stop.m.job.jobId)) continue;
          await attempt(stop.m.job.jobId, async () => {
            await stopForBudget(stop, scope, at);
            stoppedForBudget.add(stop.m.job.jobId);
            result.budgetStopped.push(stop.m.job.jobId);
          });
        }
        if (!exhaustion.published) {
          await publishExhaustion(plane, exhaustion);
          result.events += 1;
        }
      });
    }

    // Deadline jobs waiting in the spot queue: the check may move them to on-demand before the capacity wait ends.
    const waiting = turnOf(
      allWaiting.filter((job) => job.requirements.deadlineSeconds !== undefined && job.estimate !== undefined),
      cap,
      nowMs,
    );
    defer(waiting.later);
    for (const job of waiting.now) {
      await attempt(job.jobId, async () => {
        const attempts = await attemptsOfWaiting(job.jobId);
        if (await stopAtDeadline(job, attempts, nowMs, at)) {
          result.deadlineStopped.push(job.jobId);
          return;
        }
        if (!queuedSpotAttempt(attempts)) return;
        const queued: Metered = { job, attempts, tier: tierOfJob(plane.config, job), blockedScopes: [] };
        const to = await checkPlacement(queued, nowMs, at, tierSpots);
        if (to) result.moved.push({ jobId: job.jobId, to });
      });
    }

    const paused = turnOf(inState('PAUSED_BUDGET'), cap, nowMs);
    defer(paused.later);
    for (const job of paused.now) {
      await attempt(job.jobId, async () => {
        if (await releaseAtDeadline(job, nowMs)) result.deadlineStopped.push(job.jobId);
        else if (await resumeIfAllowed(job, at)) result.resumed.push(job.jobId);
      });
    }

    // Threshold alerts a writer recorded and did not get out; last month's too, for a crossing at its very end.
    await attempt('budget alerts', async () => {
      const periods = [periodOf(new Date(nowMs)), periodBefore(periodOf(new Date(nowMs)))];
      result.events += await publishLeftBehind(plane, teams, periods, nowMs);
    });

    if (plane.config.observability.platformMetrics) {
      await attempt('metrics', async () => {
        await plane.metrics.publish(await gauges(metered, allWaiting.length, nowMs, result.spotSeen), nowMs);
      });
    }

    if (result.deferred.length > 0) {
      logger.warn('budget watch cap reached; jobs left for the next run', { cap, deferred: result.deferred });
    }
    logger.info('budget watch run', {
      metered: result.metered.length,
      startsRecorded: result.startsRecorded,
      budgetStopped: result.budgetStopped,
      deadlineStopped: result.deadlineStopped,
      moved: result.moved,
      resumed: result.resumed,
    });
    if (failures.length > 0) {
      throw new BudgetWatchIncomplete(
        `budget watch could not handle ${failures.length} item(s): ${failures.join(' | ')}`,
      );
    }
    return result;
  };
}
