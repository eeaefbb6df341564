/**
 * Trainyard's spot/on-demand placement policy: a pure function the attempt-outcome Lambda, the periodic progress check,
 * local mode and the spot benchmark (bench/spot) all call, so what is measured is what runs. Rationale and the
 * measured comparison with Greedy, Uniform Progress and the omniscient optimum: docs/adr/0001-spot-placement-policy.md.
 */

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
  /**
   * Deadline jobs: the most slack, as a fraction of the job's work, the policy holds in reserve before it stops
   * waiting for spot. @default DEFAULT_DEADLINE_RESERVE_FRACTION
   */
  deadlineReserveFraction?: number;
}

/** Default slack reserve cap for deadline jobs, as a fraction of the work (chosen on the spot-trace sweep, ADR 0001). */
export const DEFAULT_DEADLINE_RESERVE_FRACTION = 0.3;

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
  if (config.deadlineReserveFraction !== undefined)
    requireFinite('config.deadlineReserveFraction', config.deadlineReserveFraction, 0);
  requireFinite('state.nowSeconds', state.nowSeconds, 0);
  requireFinite('state.workSeconds', state.workSeconds, 0);
  requireFinite('state.progressSeconds', state.progressSeconds, 0);
  requireFinite('state.reclaims', state.reclaims, 0);
  requireFinite('state.capacityCancellations', state.capacityCancellations, 0);
  if (state.deadlineSeconds !== undefined) requireFinite('state.deadlineSeconds', state.deadlineSeconds, 0);
}

const decision = (capacity: Capacity, move: boolean, reason: string): PlacementDecision => ({ capacity, move, reason });

/** Decides where the job's next (or current) attempt runs; pure and total over valid input. */
export function decidePlacement(state: PlacementState, config: PlacementPolicyConfig): PlacementDecision {
  validate(state, config);
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
 * Deadline-aware rules: Uniform Progress with a capped reserve. Slack = time left − work left. The job keeps a slack
 * reserve of min(UP's reserve, reserveCap): UP's reserve is (time left)·(1 − work/deadline), i.e. progress at or
 * above the line work·t/deadline; the cap makes a loose deadline behave like Greedy (wait for spot for free) until the
 * slack has shrunk to the cap, and a tight one behave exactly like UP. Behind the reserve the job uses spot if it has
 * it and on-demand otherwise; it leaves on-demand when spot is observed and it is ahead of the line at now + 2·d.
 * Safety net: on-demand for good once the slack could no longer absorb a missed check, a restart and a fallback.
 * Reclaim and capacity-cancellation counts do not force on-demand here: the slack says directly whether waiting for
 * spot is still affordable (ADR 0001 gives the measured cost of applying the count rules to deadline jobs).
 */
function decideWithDeadline(state: PlacementState, config: PlacementPolicyConfig, deadline: number): PlacementDecision {
  const d = config.restartOverheadSeconds;
  const work = state.workSeconds;
  const remainingWork = Math.max(0, work - state.progressSeconds);
  const slack = deadline - state.nowSeconds - remainingWork;
  const cap = (config.deadlineReserveFraction ?? DEFAULT_DEADLINE_RESERVE_FRACTION) * work;
  // Progress the job should have at time t: the UP line, or the deadline-pinned line that keeps `cap` of slack.
  const line = (t: number): number => {
    if (deadline <= 0) return work;
    const clamped = Math.min(t, deadline);
    return Math.min((work * clamped) / deadline, work - (deadline - clamped) + cap);
  };
  const behind = state.progressSeconds < line(state.nowSeconds);
  const safety = 2 * d + config.checkIntervalSeconds;
  const onSpotNow = state.current === 'spot' && state.spotAvailable !== false;
  const spotStartCost = onSpotNow ? 0 : d;
  const periodic = state.moment === 'periodic-check';
  const pace = `slack ${Math.round(slack)} s`;

  if (slack - spotStartCost < safety) {
    return decision(
      'on-demand',
      periodic && state.current !== 'on-demand',
      `Deadline: ${pace} can no longer absorb a spot restart and a fallback (needs ${safety + spotStartCost} s): on-demand to finish in time.`,
    );
  }
  switch (state.moment) {
    case 'submit':
      return decision('spot', false, `Deadline ${pace} allows spot: start on spot.`);
    case 'attempt-reclaimed':
    case 'capacity-cancelled': {
      const what = state.moment === 'attempt-reclaimed' ? 'Spot was reclaimed' : 'The spot queue had no capacity';
      if (behind) return decision('on-demand', false, `${what} and the job is behind its deadline pace: on-demand.`);
      return decision('spot', false, `${what} but the job is on pace for its deadline (${pace}): wait for spot again.`);
    }
    case 'periodic-check':
      if (state.current === 'on-demand') {
        const ahead = state.progressSeconds >= line(state.nowSeconds + 2 * d);
        if (state.spotAvailable === true && ahead && slack - d >= safety)
          return decision(
            'spot',
            true,
            'Spot is available and the job is ahead of its deadline pace: move back to spot.',
          );
        return decision('on-demand', false, 'Stay on on-demand until spot is available and the job is ahead of pace.');
      }
      if (state.current === 'none' && behind)
        return decision('on-demand', true, 'Waiting for spot while behind the deadline pace: move to on-demand.');
      return decision('spot', false, `On pace for the deadline (${pace}): stay on spot.`);
  }
}
