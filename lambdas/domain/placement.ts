/**
 * Trainyard's spot/on-demand placement policy: a pure function the attempt-outcome Lambda, the periodic progress check,
 * local mode and the spot benchmark (bench/spot) all call, so what is measured is what runs. Rationale and the
 * measured comparison with Greedy, Uniform Progress and the omniscient optimum: docs/adr/0001-spot-placement-policy.md.
 */

import { type PlanState, planFits, type SpotLengthModel, spotPlanFor } from './spot-planner';

/** The two kinds of capacity a job attempt can run on. */
export type Capacity = 'spot' | 'on-demand';

/** The moments at which the platform can act on a job, and so the only moments the policy is consulted. */
export type PlacementMoment = 'submit' | 'attempt-reclaimed' | 'capacity-cancelled' | 'periodic-check';

/** Tunables of the policy; the lifecycle passes the tier's or the job's values. */
export interface PlacementPolicyConfig {
  /** Spot reclaims (counted since the job last moved back to spot) after which a job without a deadline goes on-demand. */
  reclaimsBeforeOnDemand: number;
  /** How long a spot attempt may wait for capacity before the queue cancels it (the queue's jobStateTimeLimitActions). */
  capacityWaitSeconds: number;
  /** Time an attempt spends starting (instance boot, image pull, checkpoint restore) before it makes progress. */
  restartOverheadSeconds: number;
  /** Interval of the periodic progress check (300 s in the deployed platform). */
  checkIntervalSeconds: number;
  /** Deadline jobs: how the slack reserve is sized and when the job returns to spot. @default DEADLINE_TUNING */
  deadline?: Partial<DeadlineTuning>;
  /**
   * Whether the periodic check can see spot capacity while the job is on on-demand (a placement-score probe that
   * answers for the tier). Without it a deadline job that goes on-demand cannot come back, so it keeps no reserve
   * beyond the safety net: it waits for spot like Greedy and goes on-demand for good only when it must (ADR 0001
   * measured every larger reserve as worse without a way back). @default true
   */
  spotVisibleOnDemand?: boolean;
  /**
   * Deadline jobs whose check can see spot on on-demand: plan with this model of spot capacity (spot-planner.ts)
   * instead of the reserve rules. Undefined = the reserve rules.
   */
  spotPlanning?: SpotPlanning;
}

/** What the planner needs besides the job's state: the capacity model and the tier's price ratio. */
export interface SpotPlanning {
  /** How long spot's available stretches and outages last. */
  model: SpotLengthModel;
  /** Spot price ÷ on-demand price for the tier (0 < ratio ≤ 1). */
  spotPriceRatio: number;
  /**
   * How much the plan weighs the spread of a job's cost against its mean, per on-demand hour (spot-planner.ts
   * `riskAversion`; absent or 0: expected cost only). Deployed: {@link SPOT_PLAN_RISK_AVERSION}.
   */
  riskAversion?: number;
}

/**
 * The deployed plan's risk aversion per on-demand hour (ADR 0001, seventh version): the plan weighs a gamble as if
 * each on-demand hour it might add cost e^0.06 − 1 ≈ 6 % more than the one before, so where waiting for spot could
 * end in hours of on-demand with the slack spent, it takes a little less of the gamble than expected cost alone would.
 */
export const SPOT_PLAN_RISK_AVERSION = 0.06;

/** Distinct instance types a tier needs for a placement-score probe to answer (AWS scores fewer as always low). */
export const SPOT_PROBE_MIN_INSTANCE_TYPES = 3;

/** Whether a placement-score probe can answer for a tier with these instance types (see SPOT_PROBE_MIN_INSTANCE_TYPES). */
export function spotProbeCanAnswer(instanceTypes: readonly string[]): boolean {
  return new Set(instanceTypes).size >= SPOT_PROBE_MIN_INSTANCE_TYPES;
}

/**
 * The deadline rules' constants (ADR 0001). Prior beliefs about spot are blended with what the job has observed, each
 * weighted like `priorWeightHours` of observation, so a new job acts on the prior and a long one on its own history.
 */
export interface DeadlineTuning {
  /** Prior fraction of time spot capacity is available. */
  priorAvailability: number;
  /** Prior spot reclaims per hour of observation. */
  priorReclaimsPerHour: number;
  /** Weight of the priors, in hours of observation. */
  priorWeightHours: number;
  /** Reserve for unavailability: this share of (expected unavailable fraction × time left). */
  unavailabilityReserveFactor: number;
  /** Reserve for restarts: this many (expected reclaims in the time left × the 2·d a spot→on-demand→spot trip costs). */
  restartReserveFactor: number;
  /** An on-demand job returns to spot only after spot was observed available this many restart overheads in a row. */
  returnHoldRestarts: number;
}

/** The deployed deadline tuning, chosen on the issue-7 spot-trace sweep (ADR 0001, bench/results/latest.md). */
export const DEADLINE_TUNING: DeadlineTuning = {
  priorAvailability: 0.6,
  priorReclaimsPerHour: 0.25,
  priorWeightHours: 24,
  unavailabilityReserveFactor: 0.25,
  restartReserveFactor: 1,
  returnHoldRestarts: 2,
};

/** What a job has observed of spot capacity since submission, from its attempts (see spotHistoryOf). */
export interface SpotHistory {
  /** Seconds its spot attempts ran (capacity was there). */
  availableSeconds: number;
  /** Seconds its spot attempts waited in the queue for capacity. */
  unavailableSeconds: number;
  /** Spot reclaims since submission. */
  reclaims: number;
}

/** The history of a job that has not observed anything yet. */
export const NO_SPOT_HISTORY: SpotHistory = { availableSeconds: 0, unavailableSeconds: 0, reclaims: 0 };

/** The parts of an attempt record spotHistoryOf reads (epoch milliseconds). */
export interface SpotObservingAttempt {
  capacity: Capacity;
  submittedAt?: number;
  startedAt?: number;
  stoppedAt?: number;
  outcome?: { kind: string };
}

/**
 * Adds one attempt's observations: a spot attempt waited for capacity from submission to start (or to its stop when it
 * never started) and had capacity from start to stop; `nowMs` closes an attempt still open. On-demand attempts observe
 * nothing about spot.
 */
export function addSpotObservation(history: SpotHistory, attempt: SpotObservingAttempt, nowMs: number): SpotHistory {
  if (attempt.capacity !== 'spot') return history;
  const end = attempt.stoppedAt ?? nowMs;
  const waitedUntil = attempt.startedAt ?? end;
  const waited = attempt.submittedAt === undefined ? 0 : Math.max(0, waitedUntil - attempt.submittedAt) / 1000;
  const ran = attempt.startedAt === undefined ? 0 : Math.max(0, end - attempt.startedAt) / 1000;
  return {
    availableSeconds: history.availableSeconds + ran,
    unavailableSeconds: history.unavailableSeconds + waited,
    reclaims: history.reclaims + (attempt.outcome?.kind === 'reclaimed' ? 1 : 0),
  };
}

/** A job's spot history from its attempt records, as the lifecycle and the periodic check pass it to the policy. */
export function spotHistoryOf(attempts: readonly SpotObservingAttempt[], nowMs: number): SpotHistory {
  return attempts.reduce((history, attempt) => addSpotObservation(history, attempt, nowMs), NO_SPOT_HISTORY);
}

/** What the budget watch's per-tier record of spot capacity says at a decision (tier-spot.ts). */
export interface TierSpot {
  /** Whether the tier's placement-score probe said spot is available at the latest tick. */
  available: boolean;
  /** Seconds the probe has said so without a break, as far as the record goes back. */
  forSeconds: number;
  /** Whether the record saw the state begin; false = it began with the record and may be older than forSeconds. */
  sinceChange: boolean;
}

/** What the platform knows about a job at a decision moment. */
export interface PlacementState {
  /** Why the policy is being consulted. */
  moment: PlacementMoment;
  /** Seconds since submission. */
  nowSeconds: number;
  /** Deadline in seconds from submission; undefined means the job has no deadline. */
  deadlineSeconds?: number;
  /** Estimated compute the job needs in total, in seconds. */
  workSeconds: number;
  /** Compute done so far and safely checkpointed, in seconds. */
  progressSeconds: number;
  /** What the job holds now (periodic check; 'none' = waiting in the spot queue or not started) or held last. */
  current: Capacity | 'none';
  /** Whether spot capacity is observed available now (a running spot attempt, or a placement-score probe); undefined = unknown. */
  spotAvailable?: boolean;
  /**
   * How long spot has been observed available without a break: on spot, since the attempt started; on on-demand, since
   * the probe first saw it; undefined = not seen.
   */
  spotAvailableForSeconds?: number;
  /**
   * How long spot has been observed unavailable without a break: waiting in the queue, since the attempt was queued;
   * at a capacity cancellation, the attempt's wait; undefined = not known (a reclaim is always an outage of age 0).
   */
  spotUnavailableForSeconds?: number;
  /** What the job has observed of spot since submission; undefined = nothing yet. */
  spotHistory?: SpotHistory;
  /**
   * What the budget watch's record of the tier says of spot now (tier-spot.ts tierSpotAt); undefined = no fresh
   * record. It completes the job's own sighting with what happened before the job could see (see withTierSpot).
   */
  tierSpot?: TierSpot;
  /** Spot reclaims since the job last moved (back) to spot, or since submission. */
  reclaims: number;
  /** Capacity cancellations since the job last moved (back) to spot, or since submission. */
  capacityCancellations: number;
  /** Whether the job's tier and the user allow spot at all. */
  spotAllowed: boolean;
}

/** The policy's answer. */
export interface PlacementDecision {
  /** Capacity the next (or continuing) attempt should use. */
  capacity: Capacity;
  /** At a periodic check: stop the running (or waiting) attempt and start one on `capacity` now. */
  move: boolean;
  /** One sentence, recorded in the job's decision log. */
  reason: string;
}

/** Thrown when the state or config handed to the policy is impossible (negative times, progress beyond work, ...). */
export class InvalidPlacementInput extends Error {
  override name = 'InvalidPlacementInput';
}

/** Deployed defaults (DESIGN.md "Lifecycle": 2 reclaims, 20 min capacity wait, 5 min check). */
export const DEFAULT_PLACEMENT_CONFIG: PlacementPolicyConfig = {
  reclaimsBeforeOnDemand: 2,
  capacityWaitSeconds: 1200,
  restartOverheadSeconds: 360,
  checkIntervalSeconds: 300,
};

function requireFinite(name: string, value: number, min: number): void {
  if (!Number.isFinite(value) || value < min)
    throw new InvalidPlacementInput(`${name} must be a finite number >= ${min}, got ${value}`);
}

function validate(state: PlacementState, config: PlacementPolicyConfig): void {
  requireFinite('config.reclaimsBeforeOnDemand', config.reclaimsBeforeOnDemand, 1);
  requireFinite('config.capacityWaitSeconds', config.capacityWaitSeconds, 0);
  requireFinite('config.restartOverheadSeconds', config.restartOverheadSeconds, 0);
  requireFinite('config.checkIntervalSeconds', config.checkIntervalSeconds, 1);
  for (const [key, value] of Object.entries(config.deadline ?? {})) requireFinite(`config.deadline.${key}`, value, 0);
  if (state.spotAvailableForSeconds !== undefined)
    requireFinite('state.spotAvailableForSeconds', state.spotAvailableForSeconds, 0);
  if (state.spotUnavailableForSeconds !== undefined)
    requireFinite('state.spotUnavailableForSeconds', state.spotUnavailableForSeconds, 0);
  if (config.spotPlanning !== undefined) {
    const ratio = config.spotPlanning.spotPriceRatio;
    if (!Number.isFinite(ratio) || ratio <= 0 || ratio > 1)
      throw new InvalidPlacementInput(`config.spotPlanning.spotPriceRatio must lie in (0, 1], got ${ratio}`);
    if (config.spotPlanning.riskAversion !== undefined)
      requireFinite('config.spotPlanning.riskAversion', config.spotPlanning.riskAversion, 0);
  }
  if (state.spotHistory !== undefined)
    for (const [key, value] of Object.entries(state.spotHistory)) requireFinite(`state.spotHistory.${key}`, value, 0);
  if (state.tierSpot !== undefined) requireFinite('state.tierSpot.forSeconds', state.tierSpot.forSeconds, 0);
  requireFinite('state.nowSeconds', state.nowSeconds, 0);
  requireFinite('state.workSeconds', state.workSeconds, 0);
  requireFinite('state.progressSeconds', state.progressSeconds, 0);
  requireFinite('state.reclaims', state.reclaims, 0);
  requireFinite('state.capacityCancellations', state.capacityCancellations, 0);
  if (state.deadlineSeconds !== undefined) requireFinite('state.deadlineSeconds', state.deadlineSeconds, 0);
}

const decision = (capacity: Capacity, move: boolean, reason: string): PlacementDecision => ({ capacity, move, reason });

/**
 * The job's own sighting of spot completed by the tier's record. The job's sighting wins where the two disagree (a
 * queued attempt that has not started proves there is no capacity for it, whatever the score says; a reclaim is an
 * outage of age 0 by itself); where they agree, the state is as old as the older of the two says; where the job saw
 * nothing (on on-demand, at submission), the record says what spot is and for how long. An outage the record did not
 * see begin keeps the age the job knows, or none (taken as old) when the job knows none.
 */
export function withTierSpot(state: PlacementState): PlacementState {
  const tier = state.tierSpot;
  if (tier === undefined || state.moment === 'attempt-reclaimed') return state;
  const available = state.spotAvailable ?? tier.available;
  if (available !== tier.available) return state;
  if (available)
    return {
      ...state,
      spotAvailable: true,
      spotAvailableForSeconds: Math.max(state.spotAvailableForSeconds ?? 0, tier.forSeconds),
    };
  const jobAge = state.spotUnavailableForSeconds;
  if (jobAge === undefined && !tier.sinceChange) return { ...state, spotAvailable: false };
  return { ...state, spotAvailable: false, spotUnavailableForSeconds: Math.max(jobAge ?? 0, tier.forSeconds) };
}

/** Decides where the job's next (or current) attempt runs; pure and total over valid input. */
export function decidePlacement(observed: PlacementState, config: PlacementPolicyConfig): PlacementDecision {
  validate(observed, config);
  // Jobs without a deadline keep the count rules on what they see themselves: on on-demand they are never told spot
  // is back, so a job that fell back after its reclaims stays there (no rule holds it from bouncing back at once).
  const state = observed.deadlineSeconds === undefined ? observed : withTierSpot(observed);
  const periodic = state.moment === 'periodic-check';
  if (!state.spotAllowed) {
    const move = periodic && state.current !== 'on-demand';
    return decision('on-demand', move, 'Spot is not allowed for this job, so it runs on on-demand.');
  }
  return state.deadlineSeconds === undefined
    ? decideWithoutDeadline(state, config)
    : decideWithDeadline(state, config, state.deadlineSeconds);
}

function decideWithoutDeadline(state: PlacementState, config: PlacementPolicyConfig): PlacementDecision {
  switch (state.moment) {
    case 'submit':
      return decision('spot', false, 'No deadline: start on spot, the cheapest capacity.');
    case 'attempt-reclaimed':
      if (state.reclaims >= config.reclaimsBeforeOnDemand)
        return decision(
          'on-demand',
          false,
          `Spot was reclaimed ${state.reclaims} times (limit ${config.reclaimsBeforeOnDemand}): fall back to on-demand.`,
        );
      return decision(
        'spot',
        false,
        `Spot was reclaimed (${state.reclaims} of ${config.reclaimsBeforeOnDemand}): resume on spot.`,
      );
    case 'capacity-cancelled':
      return decision(
        'on-demand',
        false,
        `No spot capacity for ${config.capacityWaitSeconds} s: fall back to on-demand.`,
      );
    case 'periodic-check':
      if (state.current === 'on-demand' && state.spotAvailable === true)
        return decision('spot', true, 'No deadline and spot capacity is available again: move back to spot.');
      if (state.current === 'on-demand')
        return decision('on-demand', false, 'Spot capacity is not observed available: stay on on-demand.');
      return decision('spot', false, 'No deadline: stay on spot.');
  }
}

/**
 * Deadline rules: spend the slack waiting for spot like Greedy, but keep a reserve that lets the job cover outages
 * with on-demand and come back to spot, instead of Greedy's on-demand-for-good. Slack = time left − work left.
 * - Reserve = max(u·(1 − â)·T, safety + r·λ̂·T·2d): T the time left, â the expected spot availability and λ̂ the
 *   expected reclaims per second (the job's own observations blended with priors), 2d what a spot→on-demand→spot trip
 *   costs in slack. The first term keeps the slack a spot-poor future needs, the second the trips a spot-rich but
 *   flaky one needs.
 * - Slack under the reserve ("behind"): an outage is covered with on-demand (at a reclaim, a capacity cancellation or
 *   the check of a queued attempt); at or above it the job waits for spot in the queue.
 * - On on-demand, a check moves the job back to spot once spot has been seen available for `returnHoldRestarts`·d in
 *   a row (short windows do not pay for two restarts) and the slack still passes the safety net after the restart.
 * - Safety net: on-demand once the slack could no longer absorb a spot start, a missed check and a fallback
 *   (2d + check interval); at submit this puts a too-tight job on on-demand from the start. A running job is not
 *   moved by it when it has no work left (its last save), nor from spot once the slack is under d (on-demand's start
 *   alone would miss the deadline).
 * Reclaim and capacity-cancellation counts do not force on-demand here: the slack says directly whether waiting for
 * spot is still affordable (ADR 0001 gives the measured cost of applying the count rules to deadline jobs).
 */
function decideWithDeadline(state: PlacementState, config: PlacementPolicyConfig, deadline: number): PlacementDecision {
  const tuning: DeadlineTuning = { ...DEADLINE_TUNING, ...config.deadline };
  const d = config.restartOverheadSeconds;
  const timeLeft = Math.max(0, deadline - state.nowSeconds);
  const workLeft = Math.max(0, state.workSeconds - state.progressSeconds);
  const slack = timeLeft - workLeft;
  const safety = 2 * d + config.checkIntervalSeconds;
  const onSpotNow = state.current === 'spot' && state.spotAvailable !== false;
  const spotStartCost = onSpotNow ? 0 : d;
  const periodic = state.moment === 'periodic-check';
  const pace = `slack ${Math.round(slack)} s`;
  // The check of a running attempt (a queued one is not running: the safety net may still move it to on-demand).
  const running = periodic && (state.current === 'on-demand' || onSpotNow);
  const held: Capacity = state.current === 'on-demand' ? 'on-demand' : 'spot';

  // A running job with no work left (its last save, upload or evaluation) is never stopped: a move would only add a
  // restart, and near the deadline make it miss.
  if (running && workLeft <= 0) return decision(held, false, `No work is left: the job stays on ${held} to finish.`);
  if (slack - spotStartCost < safety) {
    // With less slack than a restart takes, on-demand could not finish in time either (its start alone takes d), and
    // the deadline stops the job: staying on spot is its only chance.
    if (running && onSpotNow && slack < d)
      return decision(
        'spot',
        false,
        `Deadline: ${pace} is less than a ${d} s restart, so on-demand could not finish in time either: the job stays on spot.`,
      );
    return decision(
      'on-demand',
      periodic && state.current !== 'on-demand',
      `Deadline: ${pace} can no longer absorb a spot restart and a fallback (needs ${safety + spotStartCost} s): on-demand to finish in time.`,
    );
  }
  // A plan too large to solve in a Lambda (a very long deadline and job; MAX_PLAN_GRID_POINTS) keeps the reserve rules.
  if (
    config.spotPlanning &&
    config.spotVisibleOnDemand !== false &&
    planFits(timeLeft, workLeft, config.checkIntervalSeconds)
  )
    return decideByPlan(
      state,
      config,
      config.spotPlanning,
      { timeLeftSeconds: timeLeft, workLeftSeconds: workLeft },
      pace,
    );
  const reserve =
    config.spotVisibleOnDemand === false
      ? safety
      : slackReserve(state.spotHistory ?? NO_SPOT_HISTORY, timeLeft, safety, d, tuning);
  const behind = slack < reserve;
  const standing = `${pace}, reserve ${Math.round(reserve)} s`;
  switch (state.moment) {
    case 'submit':
      return decision('spot', false, `Deadline ${pace} allows spot: start on spot.`);
    case 'attempt-reclaimed':
    case 'capacity-cancelled': {
      const what = state.moment === 'attempt-reclaimed' ? 'Spot was reclaimed' : 'The spot queue had no capacity';
      if (behind)
        return decision('on-demand', false, `${what} and the slack is under its reserve (${standing}): on-demand.`);
      return decision('spot', false, `${what} but the slack is above its reserve (${standing}): wait for spot again.`);
    }
    case 'periodic-check':
      if (state.current === 'on-demand') {
        const hold = tuning.returnHoldRestarts * d;
        const seenFor = state.spotAvailable === true ? (state.spotAvailableForSeconds ?? 0) : 0;
        if (seenFor >= hold && slack - d >= safety)
          return decision(
            'spot',
            true,
            `Spot has been available for ${Math.round(seenFor)} s (at least ${hold} s) and ${pace} can pay the restart: move back to spot.`,
          );
        return decision('on-demand', false, `Stay on on-demand until spot has been available for ${hold} s.`);
      }
      // A queued attempt while spot is seen available is starting, not waiting: it is left to start.
      if (state.current === 'none' && behind && state.spotAvailable !== true)
        return decision(
          'on-demand',
          true,
          `Waiting for spot with the slack under its reserve (${standing}): move to on-demand.`,
        );
      return decision('spot', false, `Slack above its safety net (${standing}): stay on spot.`);
  }
}

/**
 * Deadline rules with a plan (spot-planner.ts): the action the plan rates cheapest for what the job holds, whether
 * spot is there and for how long it has been so. At submission the tier's record says what spot is and since when;
 * without one, spot is taken as available and new: spot unless the plan would take on-demand even then. On on-demand
 * the job moves back to spot only when spot is seen available and the plan rates it cheaper: it stays while spot is
 * out (the plan would sometimes park it in the queue to wait, a bet measured to lose; ADR 0001, eighth version) and
 * while neither the probe nor the record can tell.
 */
function decideByPlan(
  state: PlacementState,
  config: PlacementPolicyConfig,
  planning: SpotPlanning,
  base: Pick<PlanState, 'timeLeftSeconds' | 'workLeftSeconds'>,
  pace: string,
): PlacementDecision {
  const plan = (planState: PlanState): Capacity =>
    spotPlanFor(planState, {
      stepSeconds: config.checkIntervalSeconds,
      restartOverheadSeconds: config.restartOverheadSeconds,
      spotPriceRatio: planning.spotPriceRatio,
      model: planning.model,
      ...(planning.riskAversion === undefined ? {} : { riskAversion: planning.riskAversion }),
    }).decide(planState);
  // An outage of unknown age (the probe does not say since when) is taken as an old one: the least hopeful.
  const unavailableFor = state.spotUnavailableForSeconds ?? Number.POSITIVE_INFINITY;
  switch (state.moment) {
    case 'submit': {
      const available = state.spotAvailable !== false;
      const age = available ? (state.spotAvailableForSeconds ?? 0) : unavailableFor;
      const capacity = plan({ ...base, held: 'none', spotAvailable: available, stateAgeSeconds: age });
      const seen =
        state.spotAvailable === undefined
          ? ''
          : ` and spot ${available ? 'available' : 'unavailable'}${Number.isFinite(age) ? ` for ${Math.round(age)} s` : ''}`;
      return decision(
        capacity,
        false,
        capacity === 'spot'
          ? `Deadline ${pace}${seen}: the plan starts on spot.`
          : `Deadline ${pace}${seen}: the plan rates on-demand cheaper than waiting for spot.`,
      );
    }
    case 'attempt-reclaimed':
    case 'capacity-cancelled': {
      const age = state.moment === 'attempt-reclaimed' ? 0 : unavailableFor;
      const what =
        state.moment === 'attempt-reclaimed'
          ? 'Spot was reclaimed'
          : `The spot queue had no capacity${Number.isFinite(age) ? ` for ${Math.round(age)} s` : ''}`;
      const capacity = plan({ ...base, held: 'none', spotAvailable: false, stateAgeSeconds: age });
      return decision(
        capacity,
        false,
        capacity === 'spot'
          ? `${what}; with ${pace} the plan waits for spot again.`
          : `${what}; with ${pace} the plan rates on-demand cheaper than waiting.`,
      );
    }
    case 'periodic-check': {
      if (state.current === 'on-demand' && state.spotAvailable === undefined)
        return decision('on-demand', false, 'Spot capacity cannot be observed now: stay on on-demand.');
      const available = state.current === 'spot' ? state.spotAvailable !== false : state.spotAvailable === true;
      const age = available ? (state.spotAvailableForSeconds ?? 0) : unavailableFor;
      // A running on-demand job is not stopped to wait in the queue for capacity that is not there (ADR 0001, eighth
      // version): it moves back once spot is seen again.
      if (state.current === 'on-demand' && !available)
        return decision(
          'on-demand',
          false,
          `With ${pace} and spot unavailable${Number.isFinite(age) ? ` for ${Math.round(age)} s` : ''}, ` +
            'the job stays on on-demand until spot is back.',
        );
      const held = state.current === 'spot' && !available ? 'none' : state.current;
      const heldCapacity: Capacity = state.current === 'on-demand' ? 'on-demand' : 'spot';
      // A running job with no work left (its last save or upload) is never stopped; nor is one moved back to spot
      // when the work left could not pay for the restart even if spot held to the end (the plan counts work in whole
      // check intervals, so near the end it sees more work than there is).
      const work = base.workLeftSeconds;
      if (state.current !== 'none' && work <= 0)
        return decision(heldCapacity, false, `No work is left: the job stays on ${heldCapacity} to finish.`);
      if (state.current === 'on-demand' && (work + config.restartOverheadSeconds) * planning.spotPriceRatio >= work)
        return decision(
          'on-demand',
          false,
          `${Math.round(work)} s of work left cannot pay for a ${config.restartOverheadSeconds} s restart on spot: the job finishes on on-demand.`,
        );
      const capacity = plan({ ...base, held, spotAvailable: available, stateAgeSeconds: age });
      const seen = `spot ${available ? 'available' : 'unavailable'} for ${Math.round(age)} s`;
      if (capacity === heldCapacity)
        return decision(capacity, false, `With ${pace} and ${seen}, the plan keeps the job on ${capacity}.`);
      return decision(
        capacity,
        true,
        capacity === 'spot'
          ? `With ${pace} and ${seen}, the plan rates spot cheaper: move back to spot.`
          : `With ${pace} and ${seen}, the plan rates on-demand cheaper than waiting: move to on-demand.`,
      );
    }
  }
}

/** The slack a deadline job keeps before it stops waiting for spot (see decideWithDeadline). */
export function slackReserve(
  history: SpotHistory,
  timeLeftSeconds: number,
  safetySeconds: number,
  restartOverheadSeconds: number,
  tuning: DeadlineTuning,
): number {
  const weight = tuning.priorWeightHours * 3600;
  const observed = history.availableSeconds + history.unavailableSeconds + weight;
  const availability = (history.availableSeconds + tuning.priorAvailability * weight) / observed;
  const reclaimsPerSecond = (history.reclaims + (tuning.priorReclaimsPerHour / 3600) * weight) / observed;
  const forUnavailability = tuning.unavailabilityReserveFactor * (1 - availability) * timeLeftSeconds;
  const forRestarts =
    safetySeconds + tuning.restartReserveFactor * reclaimsPerSecond * timeLeftSeconds * 2 * restartOverheadSeconds;
  return Math.max(forUnavailability, forRestarts);
}
