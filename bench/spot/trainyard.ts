/**
 * Trainyard's production policy (lambdas/domain/placement.ts, imported, never copied) driven the way the deployed
 * lifecycle drives it: consulted only at submission, when a spot attempt is reclaimed, when the spot queue cancels an
 * attempt that waited `capacityWaitSeconds`, and at the periodic check every `checkIntervalSeconds`. Decisions take
 * effect at tick boundaries; a check that falls inside a tick is applied at the next boundary (with 600 s ticks and a
 * 300 s check that is every tick; with 32 s ticks, the boundary at or after each multiple of 300 s).
 */
import {
  type Capacity,
  decidePlacement,
  type PlacementDecision,
  type PlacementMoment,
  type PlacementPolicyConfig,
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
  const policyConfig: PlacementPolicyConfig = { ...config, restartOverheadSeconds: job.overheadSeconds };
  let attempt: Attempt | undefined;
  let queuedSince = 0;
  let reclaims = 0;
  let capacityCancellations = 0;

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
        reclaims,
        capacityCancellations,
        spotAllowed: true,
      },
      policyConfig,
    );
    onDecision?.(moment, decision);
    return decision;
  };
  const launch = (capacity: Capacity, view: TickView): void => {
    if (capacity === 'on-demand') {
      attempt = 'on-demand-running';
      return;
    }
    attempt = 'spot-queued';
    queuedSince = view.nowSeconds;
  };

  return (view): Holding => {
    if (attempt === undefined) launch(consult(view, 'submit', 'none', undefined).capacity, view);
    if (attempt === 'spot-running' && view.reclaimed) {
      reclaims++;
      launch(consult(view, 'attempt-reclaimed', 'spot', false).capacity, view);
    }
    if (attempt === 'spot-queued') {
      // The queue places the attempt as soon as capacity exists; otherwise it cancels it after the wait limit.
      if (view.spotAvailable) attempt = 'spot-running';
      else if (view.nowSeconds - queuedSince >= config.capacityWaitSeconds) {
        capacityCancellations++;
        launch(consult(view, 'capacity-cancelled', 'none', false).capacity, view);
      }
    }
    if (isCheckTick(view.tick, job.gapSeconds, config.checkIntervalSeconds)) {
      const current: Capacity | 'none' =
        attempt === 'spot-running' ? 'spot' : attempt === 'on-demand-running' ? 'on-demand' : 'none';
      // Observable: a running spot attempt proves capacity; a queued one proves its absence; on on-demand a placement
      // score probe reports it.
      const observed = attempt === 'spot-running' ? true : attempt === 'spot-queued' ? false : view.spotAvailable;
      const decision = consult(view, 'periodic-check', current, observed);
      if (decision.move && decision.capacity !== current) {
        if (decision.capacity === 'spot') {
          reclaims = 0;
          capacityCancellations = 0;
        }
        launch(decision.capacity, view);
        if (attempt === 'spot-queued' && view.spotAvailable) attempt = 'spot-running';
      }
    }
    if (attempt === 'spot-queued' && view.spotAvailable) attempt = 'spot-running';
    if (attempt === 'on-demand-running') return 'on-demand';
    return attempt === 'spot-running' ? 'spot' : 'none';
  };
}
