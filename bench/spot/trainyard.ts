/**
 * Trainyard's production policy (lambdas/domain/placement.ts, imported, never copied) driven the way the deployed
 * lifecycle drives it: consulted only at submission, when a spot attempt is reclaimed, when the spot queue cancels an
 * attempt that waited `capacityWaitSeconds`, and at the periodic check every `checkIntervalSeconds`. Decisions take
 * effect at tick boundaries; a check that falls inside a tick is applied at the next boundary (with 600 s ticks and a
 * 300 s check that is every tick; with 32 s ticks, the boundary at or after each multiple of 300 s).
 *
 * What the policy is told is what the lifecycle can know: the spot history is folded from attempt records with the
 * same `addSpotObservation` the Lambdas use (a spot attempt waited in the queue from submission to start, ran from
 * start to stop); the tier's spot record is kept the way the budget watch keeps it, with the same `nextTierSpot`: the
 * watch probes the tier every check interval from the start of the trace (TierSpotTimeline) and, from submission on,
 * at the job's checks, the probe reporting the trace; a reclaim of the job's spot attempt is folded in with
 * `tierSpotAfterReclaim` as attempt-outcome does; and each decision reads it with `tierSpotAt` as the Lambdas do: the
 * periodic check after the watch's probe of that moment, a submission, reclaim or capacity cancellation as of the
 * watch's previous probe. The record's life table and weekly refits come with it, so every decision plans with the
 * model the tier had learnt by then (`tierSpotModel`, as placementConfigFrom does). Without a probe that can answer
 * (`spotVisibleOnDemand: false`) there is no record.
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
import type { SpotLengthModel } from '../../lambdas/domain/spot-planner';
import {
  nextTierSpot,
  type TierSpotRecord,
  tierSpotAfterReclaim,
  tierSpotAt,
  tierSpotModel,
} from '../../lambdas/domain/tier-spot';
import type { Holding, JobWindow, TickPolicy, TickView } from './simulator';

/** What the lifecycle has in flight for the job. */
type Attempt = 'spot-queued' | 'spot-running' | 'on-demand-running';

/**
 * Whether a time on the check grid (multiples of the interval from submission, before it too) falls in
 * ((tick−1)·gap, tick·gap], i.e. is applied at this tick's boundary; ticks before submission are negative.
 */
export function isWatchTick(tick: number, gapSeconds: number, checkIntervalSeconds: number): boolean {
  return (
    Math.floor((tick * gapSeconds) / checkIntervalSeconds) >
    Math.floor(((tick - 1) * gapSeconds) / checkIntervalSeconds)
  );
}

/** Whether a periodic check of the job is applied at this tick's boundary (the watch's ticks after submission). */
export function isCheckTick(tick: number, gapSeconds: number, checkIntervalSeconds: number): boolean {
  return tick > 0 && isWatchTick(tick, gapSeconds, checkIntervalSeconds);
}

/**
 * The budget watch's record of the tier over a whole trace, kept as the deployed watch keeps it: a probe every
 * `checkIntervalSeconds` from the trace's start (at the first tick boundary at or after each multiple, reading that
 * tick), folded with the watch's own `nextTierSpot`, life table and weekly refits of the tier's model included. Times
 * are milliseconds from the start of the trace, so a stretch that reaches it began with the record, as on a platform
 * deployed then. Built once per trace: `before(tick)` is what the platform holds when a job is submitted at `tick`.
 */
export class TierSpotTimeline {
  /** records[t]: the record after the probes at ticks before t. */
  private readonly records: Array<TierSpotRecord | undefined>;

  /** `prior`: the fleet model the refits blend with (by default the deployed one). */
  constructor(available: Uint8Array, gapSeconds: number, checkIntervalSeconds: number, prior?: SpotLengthModel) {
    this.records = [undefined];
    let record: TierSpotRecord | undefined;
    for (let tick = 0; tick < available.length; tick++) {
      if (isWatchTick(tick, gapSeconds, checkIntervalSeconds)) {
        const atMs = tick * gapSeconds * 1000;
        record = nextTierSpot(record, 'sim', (available[tick] ?? 0) >= 1, atMs, checkIntervalSeconds, prior) ?? record;
      }
      this.records.push(record);
    }
  }

  /** The record as the job submitted at `tick` finds it (the probes at earlier ticks folded in). */
  before(tick: number): TierSpotRecord | undefined {
    if (!Number.isInteger(tick) || tick < 0 || tick >= this.records.length)
      throw new RangeError(`tick must be a whole number in [0, ${this.records.length - 1}], got ${tick}`);
    return this.records[tick];
  }
}

/** What a Trainyard policy run can be given besides the job and the config. */
export interface TrainyardRunOptions {
  /**
   * The tier's record at submission, from the trace's TierSpotTimeline (a sweep builds one per trace); by default
   * the job's `before` is folded on the spot.
   */
  tierSpotAtSubmit?: TierSpotRecord;
  /** Called with every decision the policy makes. */
  onDecision?: (moment: PlacementMoment, decision: PlacementDecision) => void;
}

/** Builds the simulator policy for Trainyard with the job's restart overhead and the given lifecycle config. */
export function trainyardPolicy(
  job: JobWindow,
  config: Omit<PlacementPolicyConfig, 'restartOverheadSeconds'>,
  options: TrainyardRunOptions = {},
): TickPolicy {
  const { onDecision } = options;
  // The setting supplies the restart overhead and the prices (the plan weighs spot against on-demand at their ratio);
  // the tier's record, the model it has learnt (placementConfigFrom's `tierModel`, or the config's fleet model).
  let planned: { model: SpotLengthModel | undefined; config: PlacementPolicyConfig } | undefined;
  const policyConfig = (): PlacementPolicyConfig => {
    const model = tierSpotModel(tierSpot);
    if (planned === undefined || planned.model !== model)
      planned = {
        model,
        config: {
          ...config,
          restartOverheadSeconds: job.overheadSeconds,
          ...(config.spotPlanning
            ? {
                spotPlanning: {
                  ...config.spotPlanning,
                  model: model ?? config.spotPlanning.model,
                  spotPriceRatio: job.prices.spot / job.prices.onDemand,
                },
              }
            : {}),
        },
      };
    return planned.config;
  };
  let attempt: Attempt | undefined;
  let queuedSince = 0;
  let reclaims = 0;
  let capacityCancellations = 0;
  // The attempt in flight as an attempt record would hold it (milliseconds), and the history of the closed ones.
  let record: SpotObservingAttempt | undefined;
  let closed: SpotHistory = NO_SPOT_HISTORY;
  let startedAtSeconds = 0;
  // The budget watch's record of the tier (only a probe that can answer keeps one), in milliseconds from the start
  // of the trace.
  const watched = config.spotVisibleOnDemand !== false;
  // The tier's refits blend with the fleet model the config plans with before it has learnt its own.
  const prior = config.spotPlanning?.model;
  const before = job.before ?? new Uint8Array();
  const traceMs = (nowSeconds: number): number => (before.length * job.gapSeconds + nowSeconds) * 1000;
  let tierSpot = watched
    ? 'tierSpotAtSubmit' in options
      ? options.tierSpotAtSubmit
      : new TierSpotTimeline(before, job.gapSeconds, config.checkIntervalSeconds, prior).before(before.length)
    : undefined;
  const watch = (view: TickView): void => {
    if (!watched || !isWatchTick(view.tick, job.gapSeconds, config.checkIntervalSeconds)) return;
    tierSpot =
      nextTierSpot(tierSpot, 'sim', view.spotAvailable, traceMs(view.nowSeconds), config.checkIntervalSeconds, prior) ??
      tierSpot;
  };
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
        ...tierSpotNow(view.nowSeconds),
        reclaims,
        capacityCancellations,
        spotAllowed: true,
      },
      policyConfig(),
    );
    onDecision?.(moment, decision);
    return decision;
  };
  const tierSpotNow = (nowSeconds: number) => {
    const seen = tierSpotAt(tierSpot, traceMs(nowSeconds), config.checkIntervalSeconds);
    return seen ? { tierSpot: seen } : {};
  };
  // How long the job itself has seen spot in its current state: a running spot attempt since it started, a queued
  // one since it was queued (a cancelled one for the whole wait); on on-demand it sees nothing (the tier's record
  // does); a reclaim is age 0 by itself.
  const spotAges = (
    nowSeconds: number,
    moment: PlacementMoment,
    current: Capacity | 'none',
  ): { spotAvailableForSeconds?: number; spotUnavailableForSeconds?: number } => {
    if (moment === 'capacity-cancelled') return { spotUnavailableForSeconds: nowSeconds - queuedSince };
    if (current === 'spot') return { spotAvailableForSeconds: nowSeconds - startedAtSeconds };
    if (current === 'none' && moment === 'periodic-check')
      return { spotUnavailableForSeconds: nowSeconds - queuedSince };
    return {};
  };
  const launch = (capacity: Capacity, view: TickView): void => {
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
      // attempt-outcome folds the reclaim into the tier's record before it decides.
      if (watched)
        tierSpot =
          tierSpotAfterReclaim(tierSpot, 'sim', traceMs(view.nowSeconds), config.checkIntervalSeconds, prior) ??
          tierSpot;
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
    watch(view);
    if (isCheckTick(view.tick, job.gapSeconds, config.checkIntervalSeconds)) {
      const current: Capacity | 'none' =
        attempt === 'spot-running' ? 'spot' : attempt === 'on-demand-running' ? 'on-demand' : 'none';
      // The job's own sighting: a running spot attempt proves capacity, a queued one its absence; on on-demand it
      // sees nothing itself (the tier's record says).
      const observed = attempt === 'spot-running' ? true : attempt === 'spot-queued' ? false : undefined;
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
