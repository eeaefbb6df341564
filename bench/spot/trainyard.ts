/**
 * Trainyard's production policy (lambdas/domain/placement.ts, imported, never copied) driven the way the deployed
 * lifecycle drives it: consulted only at submission, when a spot attempt is reclaimed, when the spot queue cancels an
 * attempt that waited `capacityWaitSeconds`, and at the periodic check every `checkIntervalSeconds`. Decisions take
 * effect at tick boundaries; a check that falls inside a tick is applied at the next boundary (with 600 s ticks and a
 * 300 s check that is every tick; with 32 s ticks, the boundary at or after each multiple of 300 s).
 *
 * What the policy is told is what the lifecycle can know: the spot history is folded from attempt records with the
 * same `addSpotObservation` the Lambdas use (a spot attempt waited in the queue from submission to start, ran from
 * start to stop); on on-demand, the check's placement-score probe reports spot, and how long it has seen it without
 * a break.
 */
import {
  addSpotObservation,
  type Capacity,
  decidePlacement,
  NO_SPOT_HISTORY,
  type PlacementDecision,
  type PlacementMoment,
  type PlacementPolicyConfig,
  type SpotHistory,
  type SpotObservingAttempt,
} from '../../lambdas/domain/placement';
import type { Holding, JobWindow, TickPolicy, TickView } from './simulator';

/** What the lifecycle has in flight for the job. */
type Attempt = 'spot-queued' | 'spot-running' | 'on-demand-running';

/** Whether a periodic check falls in ((tick−1)·gap, tick·gap], i.e. is applied at this tick's boundary. */
export function isCheckTick(tick: number, gapSeconds: number, checkIntervalSeconds: number): boolean {
  if (tick === 0) return false;
  return (
    Math.floor((tick * gapSeconds) / checkIntervalSeconds) >
    Math.floor(((tick - 1) * gapSeconds) / checkIntervalSeconds)
  );
}

/** Builds the simulator policy for Trainyard with the job's restart overhead and the given lifecycle config. */
export function trainyardPolicy(
  job: JobWindow,
  config: Omit<PlacementPolicyConfig, 'restartOverheadSeconds'>,
  onDecision?: (moment: PlacementMoment, decision: PlacementDecision) => void,
): TickPolicy {
  // The setting supplies the restart overhead and the prices (the plan weighs spot against on-demand at their ratio).
  const policyConfig: PlacementPolicyConfig = {
    ...config,
    restartOverheadSeconds: job.overheadSeconds,
    ...(config.spotPlanning
      ? { spotPlanning: { ...config.spotPlanning, spotPriceRatio: job.prices.spot / job.prices.onDemand } }
      : {}),
  };
  let attempt: Attempt | undefined;
  let queuedSince = 0;
  let reclaims = 0;
  let capacityCancellations = 0;
  // The attempt in flight as an attempt record would hold it (milliseconds), and the history of the closed ones.
  let record: SpotObservingAttempt | undefined;
  let closed: SpotHistory = NO_SPOT_HISTORY;
  let probeSeenSince: number | undefined;
  let startedAtSeconds = 0;
  const ms = (seconds: number): number => seconds * 1000;
  const history = (nowSeconds: number): SpotHistory =>
    record ? addSpotObservation(closed, record, ms(nowSeconds)) : closed;
  const close = (nowSeconds: number, outcome?: string): void => {
    if (!record) return;
    closed = addSpotObservation(
      closed,
      { ...record, stoppedAt: ms(nowSeconds), ...(outcome ? { outcome: { kind: outcome } } : {}) },
      ms(nowSeconds),
    );
    record = undefined;
  };
  const started = (nowSeconds: number): void => {
    attempt = 'spot-running';
    startedAtSeconds = nowSeconds;
    if (record) record.startedAt = ms(nowSeconds);
  };

  const consult = (
    view: TickView,
    moment: PlacementMoment,
    current: Capacity | 'none',
    spotAvailable: boolean | undefined,
  ): PlacementDecision => {
    const decision = decidePlacement(
      {
        moment,
        nowSeconds: view.nowSeconds,
        deadlineSeconds: job.deadlineSeconds,
        workSeconds: job.workSeconds,
        progressSeconds: view.progressSeconds,
        current,
        ...(spotAvailable === undefined ? {} : { spotAvailable }),
        ...spotAges(view.nowSeconds, moment, current),
        spotHistory: history(view.nowSeconds),
        reclaims,
        capacityCancellations,
        spotAllowed: true,
      },
      policyConfig,
    );
    onDecision?.(moment, decision);
    return decision;
  };
  // How long spot has been seen in its current state, as the lifecycle knows it: a running spot attempt since it
  // started, a queued one since it was queued (a cancelled one for the whole wait), on on-demand the probe's unbroken
  // run of sightings (the lifecycle keeps no record of since when it has missed spot; a reclaim is age 0 by itself).
  const spotAges = (
    nowSeconds: number,
    moment: PlacementMoment,
    current: Capacity | 'none',
  ): { spotAvailableForSeconds?: number; spotUnavailableForSeconds?: number } => {
    if (moment === 'capacity-cancelled') return { spotUnavailableForSeconds: nowSeconds - queuedSince };
    if (current === 'spot') return { spotAvailableForSeconds: nowSeconds - startedAtSeconds };
    if (current === 'none' && moment === 'periodic-check')
      return { spotUnavailableForSeconds: nowSeconds - queuedSince };
    if (current === 'on-demand' && probeSeenSince !== undefined)
      return { spotAvailableForSeconds: nowSeconds - probeSeenSince };
    return {};
  };
  const launch = (capacity: Capacity, view: TickView): void => {
    probeSeenSince = undefined;
    if (capacity === 'on-demand') {
      attempt = 'on-demand-running';
      record = { capacity: 'on-demand', submittedAt: ms(view.nowSeconds) };
      return;
    }
    attempt = 'spot-queued';
    queuedSince = view.nowSeconds;
    record = { capacity: 'spot', submittedAt: ms(view.nowSeconds) };
  };

  return (view): Holding => {
    if (attempt === undefined) launch(consult(view, 'submit', 'none', undefined).capacity, view);
    if (attempt === 'spot-running' && view.reclaimed) {
      reclaims++;
      close(view.nowSeconds, 'reclaimed');
      launch(consult(view, 'attempt-reclaimed', 'spot', false).capacity, view);
    }
    if (attempt === 'spot-queued') {
      // The queue places the attempt as soon as capacity exists; otherwise it cancels it after the wait limit.
      if (view.spotAvailable) started(view.nowSeconds);
      else if (view.nowSeconds - queuedSince >= config.capacityWaitSeconds) {
        capacityCancellations++;
        close(view.nowSeconds, 'capacity-starved');
        launch(consult(view, 'capacity-cancelled', 'none', false).capacity, view);
      }
    }
    if (isCheckTick(view.tick, job.gapSeconds, config.checkIntervalSeconds)) {
      const current: Capacity | 'none' =
        attempt === 'spot-running' ? 'spot' : attempt === 'on-demand-running' ? 'on-demand' : 'none';
      // Observable: a running spot attempt proves capacity; a queued one proves its absence; on on-demand a placement
      // score probe reports it.
      const observed =
        attempt === 'spot-running'
          ? true
          : attempt === 'spot-queued'
            ? false
            : config.spotVisibleOnDemand === false
              ? undefined
              : view.spotAvailable;
      if (attempt === 'on-demand-running') probeSeenSince = observed ? (probeSeenSince ?? view.nowSeconds) : undefined;
      const decision = consult(view, 'periodic-check', current, observed);
      if (decision.move && decision.capacity !== current) {
        if (decision.capacity === 'spot') {
          reclaims = 0;
          capacityCancellations = 0;
        }
        close(view.nowSeconds, 'moved');
        launch(decision.capacity, view);
        if (attempt === 'spot-queued' && view.spotAvailable) started(view.nowSeconds);
      }
    }
    if (attempt === 'spot-queued' && view.spotAvailable) started(view.nowSeconds);
    if (attempt === 'on-demand-running') return 'on-demand';
    return attempt === 'spot-running' ? 'spot' : 'none';
  };
}
