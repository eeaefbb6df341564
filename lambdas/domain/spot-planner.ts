/**
 * Plans where a deadline job runs by dynamic programming over a semi-Markov model of spot capacity: what the job holds,
 * whether spot is available, how long that has been so, and how much work is left, at each check until the deadline.
 * The model (`SpotLengthModel`) gives, for available stretches and for outages, the chance that a stretch of a given
 * age ends within the next bin; it is fitted from availability traces (bench/spot/spot-model.ts) and shipped as
 * FLEET_SPOT_MODEL. The plan minimises expected cost, or with `riskAversion` the certainty-equivalent cost (the
 * deployed plan's), with a steep price on missing the deadline; decidePlacement (placement.ts) keeps its safety net in
 * front of it. Rationale and measurements:
 * docs/adr/0001-spot-placement-policy.md.
 *
 * The platform's two actions, exactly as the lifecycle can take them at a decision moment:
 * - 'spot': an attempt in the spot queue. It runs while capacity is there, waits (free) while it is not, and a reclaim
 *   puts it back in the queue;
 * - 'on-demand': an attempt on on-demand.
 * Every instance start (from the queue, after a reclaim, on any switch) costs the restart overhead, billed, without
 * progress; progress is never lost.
 */

/** Lengths of spot capacity's available stretches and outages as hazards per age bin. */
export interface SpotLengthModel {
  /** Width of an age bin in seconds (of every bin but the wide ones). */
  binSeconds: number;
  /**
   * How many of the last bins are wide (absent = 0): after the first n − wideBins bins of `binSeconds` (together F
   * seconds), the bins cover ages [F, 2F), [2F, 4F), … doubling, so that the model can tell an outage of a day from one of
   * a week. The last bin always holds for every older stretch. See spotBinStarts.
   */
  wideBins?: number;
  /**
   * availableHazards[k]: probability that an available stretch whose age lies in bin k ends within the next
   * `binSeconds` (a constant hazard within each bin, wide or not). The last entry holds for every older stretch.
   */
  availableHazards: readonly number[];
  /** The same for outages (stretches without capacity). */
  unavailableHazards: readonly number[];
}

/** One observed stretch of spot capacity: available or not, for how long, and whether its end was seen. */
export interface SpotStretch {
  available: boolean;
  seconds: number;
  /** False when observation stopped while the stretch went on (its length is only a lower bound). */
  ended: boolean;
}

/**
 * A life table of one state's stretches over age bins: `atRisk[k]`, the stretches alive at the start of bin k (in a wide
 * bin and the last, open one, their exposure in units of `binSeconds`, so a long stretch counts for every unit it lived
 * through); `ended[k]`, those whose end was seen within it.
 */
export interface SpotLifeTable {
  atRisk: readonly number[];
  ended: readonly number[];
}

/** Life tables of available stretches and of outages, over the bins of a SpotLengthModel with these fields. */
export interface SpotLifeTables {
  binSeconds: number;
  /** As in SpotLengthModel (absent = 0). */
  wideBins?: number;
  available: SpotLifeTable;
  unavailable: SpotLifeTable;
}

/**
 * The age (seconds) at which each of `bins` bins starts: `bins − wideBins` bins of `binSeconds`, then the wide ones
 * doubling from their span F (F, 2F, 4F, …). The last bin is open: it holds for every older age.
 */
export function spotBinStarts(binSeconds: number, bins: number, wideBins = 0): number[] {
  if (!Number.isFinite(binSeconds) || binSeconds <= 0)
    throw new InvalidSpotPlan(`binSeconds must be a finite number > 0, got ${binSeconds}`);
  if (!Number.isInteger(bins) || bins < 1) throw new InvalidSpotPlan(`bins must be a whole number >= 1, got ${bins}`);
  if (!Number.isInteger(wideBins) || wideBins < 0 || wideBins >= bins)
    throw new InvalidSpotPlan(`wideBins must be a whole number in [0, ${bins - 1}] for ${bins} bins, got ${wideBins}`);
  const fine = bins - wideBins;
  return Array.from({ length: bins }, (_, k) => (k < fine ? k * binSeconds : fine * binSeconds * 2 ** (k - fine)));
}

/** Life tables with no stretch yet, over `bins` bins of which the last `wideBins` are wide (spotBinStarts). */
export function emptySpotLifeTables(binSeconds: number, bins: number, wideBins = 0): SpotLifeTables {
  spotBinStarts(binSeconds, bins, wideBins);
  const empty = (): SpotLifeTable => ({ atRisk: new Array(bins).fill(0), ended: new Array(bins).fill(0) });
  return { binSeconds, ...(wideBins > 0 ? { wideBins } : {}), available: empty(), unavailable: empty() };
}

/**
 * Adds one stretch to a table's counts, in place. A bin `binSeconds` wide counts the stretches alive at its start; a
 * wide or open bin counts their exposure in it, in units of `binSeconds` (so its hazard is per `binSeconds` too).
 */
function countStretch(
  atRisk: number[],
  ended: number[],
  stretch: SpotStretch,
  binSeconds: number,
  starts: readonly number[],
): void {
  if (!Number.isFinite(stretch.seconds) || stretch.seconds <= 0)
    throw new InvalidSpotPlan(`stretch lengths must be finite and > 0, got ${stretch.seconds}`);
  const last = starts.length - 1;
  const lastStep = Math.ceil(stretch.seconds / binSeconds) - 1;
  let bin = 0;
  // Step k covers ages [k·binSeconds, (k+1)·binSeconds): the stretch lived through all of it but the last.
  for (let k = 0; k <= lastStep; k++) {
    while (bin < last && k * binSeconds >= (starts[bin + 1] as number)) bin++;
    const single = bin < last && (starts[bin + 1] as number) - (starts[bin] as number) === binSeconds;
    atRisk[bin] = (atRisk[bin] as number) + (single ? 1 : Math.min(1, stretch.seconds / binSeconds - k));
  }
  if (stretch.ended) ended[bin] = (ended[bin] as number) + 1;
}

/** The tables with more stretches counted in (a new value; the given tables are left as they are). */
export function withSpotStretches(tables: SpotLifeTables, stretches: readonly SpotStretch[]): SpotLifeTables {
  const copy = (table: SpotLifeTable) => ({ atRisk: [...table.atRisk], ended: [...table.ended] });
  const available = copy(tables.available);
  const unavailable = copy(tables.unavailable);
  const starts = spotBinStarts(tables.binSeconds, available.atRisk.length, tables.wideBins ?? 0);
  for (const stretch of stretches) {
    const table = stretch.available ? available : unavailable;
    countStretch(table.atRisk, table.ended, stretch, tables.binSeconds, starts);
  }
  return { ...tables, available, unavailable };
}

/**
 * Fits a SpotLengthModel: for each age bin, the share of stretches alive at its start that ended within it (a
 * life-table estimate; stretches whose end was not seen count as alive while observed); in a wide or open bin, the
 * stretches that ended in it per `binSeconds` of exposure. A bin no stretch reached borrows the one before it; with
 * no data at all the hazard is 1/2.
 */
export function fitSpotLengthModel(
  stretches: readonly SpotStretch[],
  binSeconds: number,
  bins: number,
  wideBins = 0,
): SpotLengthModel {
  const tables = withSpotStretches(emptySpotLifeTables(binSeconds, bins, wideBins), stretches);
  const hazardsOf = ({ atRisk, ended }: SpotLifeTable): number[] => {
    const hazards: number[] = [];
    for (let k = 0; k < bins; k++)
      hazards.push(
        (atRisk[k] as number) > 0 ? Math.min(1, (ended[k] as number) / (atRisk[k] as number)) : (hazards[k - 1] ?? 0.5),
      );
    return hazards;
  };
  return {
    binSeconds,
    ...(wideBins > 0 ? { wideBins } : {}),
    availableHazards: hazardsOf(tables.available),
    unavailableHazards: hazardsOf(tables.unavailable),
  };
}

/**
 * A model learnt from a life table on top of a prior model (the fleet's): each bin's hazard is (ended + w · prior) ÷
 * (at risk + w), as if the prior had been seen for `weight` stretches in every bin. A table that has seen little keeps
 * the prior; one that has seen many stretches of an age speaks for itself there. The table's bins must be the prior's.
 */
export function blendSpotLengthModel(prior: SpotLengthModel, tables: SpotLifeTables, weight: number): SpotLengthModel {
  if (!Number.isFinite(weight) || weight <= 0)
    throw new InvalidSpotPlan(`weight must be a finite number > 0, got ${weight}`);
  const wideBins = prior.wideBins ?? 0;
  const blend = (hazards: readonly number[], table: SpotLifeTable, name: string): number[] => {
    if (
      tables.binSeconds !== prior.binSeconds ||
      table.atRisk.length !== hazards.length ||
      (tables.wideBins ?? 0) !== wideBins
    )
      throw new InvalidSpotPlan(
        `the ${name} life table has ${table.atRisk.length} bins of ${tables.binSeconds} s (${tables.wideBins ?? 0} wide); the prior has ${hazards.length} of ${prior.binSeconds} s (${wideBins} wide)`,
      );
    return hazards.map((h, k) =>
      Math.min(1, ((table.ended[k] as number) + weight * h) / ((table.atRisk[k] as number) + weight)),
    );
  };
  return {
    binSeconds: prior.binSeconds,
    ...(wideBins > 0 ? { wideBins } : {}),
    availableHazards: blend(prior.availableHazards, tables.available, 'available'),
    unavailableHazards: blend(prior.unavailableHazards, tables.unavailable, 'unavailable'),
  };
}

/** Decimals a model's hazards are kept to when shipped or stored (a fit's sampling error is far larger). */
const MODEL_DECIMALS = 4;

/** The model with its hazards rounded as shipped and stored. */
export function roundedSpotLengthModel(model: SpotLengthModel): SpotLengthModel {
  const round = (hazards: readonly number[]): number[] => hazards.map((h) => Number(h.toFixed(MODEL_DECIMALS)));
  return {
    binSeconds: model.binSeconds,
    ...(model.wideBins ? { wideBins: model.wideBins } : {}),
    availableHazards: round(model.availableHazards),
    unavailableHazards: round(model.unavailableHazards),
  };
}

/** Thrown when a plan is asked for with impossible parameters. */
export class InvalidSpotPlan extends Error {
  override name = 'InvalidSpotPlan';
}

/** What a plan is solved for; two jobs with equal parameters share a plan. */
export interface SpotPlanParameters {
  /** The decision interval (the periodic check) in seconds; the plan's time step. */
  stepSeconds: number;
  /** Steps from the planning moment to the deadline: the plan answers for any moment with at most this many left. */
  horizonSteps: number;
  /** The most work left (seconds of compute, overhead not included) the plan must answer for. */
  maxWorkSeconds: number;
  /** Time an instance start spends before progress (seconds). */
  restartOverheadSeconds: number;
  /** Spot price as a fraction of the on-demand price (0 < ratio ≤ 1). */
  spotPriceRatio: number;
  /** The spot capacity model. */
  model: SpotLengthModel;
  /**
   * Risk aversion per on-demand hour of cost (≥ 0; 0 or absent: risk-neutral). The plan takes the action of least
   * certainty-equivalent cost, (1/a)·ln E[e^(a·cost)] with costs in on-demand hours, rather than of least expected
   * cost: it gives up a little on average to narrow the spread of what a job can end up costing (ADR 0001). The
   * product of `riskAversion` and the plan's largest cost in on-demand hours must be at most 500 (MAX_RISK_EXPONENT).
   */
  riskAversion?: number;
}

/** What the job holds when a decision is made. */
export type PlanHolding = 'none' | 'spot' | 'on-demand';

/** The planning state at a decision moment. */
export interface PlanState {
  /** Seconds until the deadline. */
  timeLeftSeconds: number;
  /** Seconds of compute still to do. */
  workLeftSeconds: number;
  /** What the job holds: 'none' while waiting in the spot queue or just reclaimed. */
  held: PlanHolding;
  /** Whether spot capacity is available now. */
  spotAvailable: boolean;
  /**
   * How long spot has been in its current state (available or not), in seconds; Infinity = older than any age the
   * plan tells apart.
   */
  stateAgeSeconds: number;
}

/**
 * Ages the plan tells apart step by step (the first PLAN_AGE_STEPS steps); older ones fall into age phases that double
 * in length, as far as the model's bins tell ages apart (planAgeStarts).
 */
export const PLAN_AGE_STEPS = 24;
/**
 * Work-grid cells per time step: progress is tracked in steps of stepSeconds / WORK_CELLS_PER_STEP, restarts between
 * grid points by interpolation. Two cells per step measured no better than one on the traces (ADR 0001) at twice
 * the cost.
 */
const WORK_CELLS_PER_STEP = 1;
/**
 * Restarts' worth of work cells solved above the most work a plan answers for. A restart adds its overhead to the work
 * left, and a grid clamps what lies beyond its top; without headroom a state near the top would be valued as if its
 * restarts cost less, so a plan solved for exactly one job could decide its first moments otherwise than a larger plan
 * would. With it, the decision in a state does not depend on the size of the plan that answers it.
 */
const WORK_HEADROOM_RESTARTS = 4;
/** Cost of work still missing at the deadline, per second of it, in seconds of on-demand: far above anything else. */
const MISS_PENALTY = 1e6;
/**
 * The largest risk aversion × cost a risk-averse plan weighs (its values are e^(a·cost)): far below where a double
 * overflows (709), so that a sum of a few such values stays finite.
 */
const MAX_RISK_EXPONENT = 500;
/** A risk-averse plan's value of a missed deadline: above every cost it weighs (e^MAX_RISK_EXPONENT), still finite. */
const RISK_MISS_VALUE = Math.exp(MAX_RISK_EXPONENT + 100);

/** Holding × availability combinations that can be observed at a decision moment (spot held implies available). */
const COMBOS = [
  { held: 'none', available: false },
  { held: 'none', available: true },
  { held: 'spot', available: true },
  { held: 'on-demand', available: false },
  { held: 'on-demand', available: true },
] as const;
const comboIndex = (held: PlanHolding, available: boolean): number => {
  if (held === 'spot') return 2;
  return (held === 'none' ? 0 : 3) + (available ? 1 : 0);
};

/**
 * The age (seconds) at which each of the plan's age states starts: one state per step for the first `fineSteps` steps,
 * then phases that double in length ([S, 2S), [2S, 4S), … from the fine span S) while they end at or before
 * `openFromSeconds` (the model's last, open bin), then one open state for every older age. A model without wide bins
 * opens at the fine span, as the plan always did.
 */
export function planAgeStarts(stepSeconds: number, fineSteps: number, openFromSeconds: number): number[] {
  const starts = Array.from({ length: fineSteps }, (_, age) => age * stepSeconds);
  let start = fineSteps * stepSeconds;
  while (start > 0 && 2 * start <= openFromSeconds) {
    starts.push(start);
    start *= 2;
  }
  starts.push(start);
  return starts;
}

/**
 * Per-step hazards of each age state (planAgeStarts) under the model's bins: in a state [a, b), the constant chance per
 * step that gives the model's survival from a to b; in the open state, the constant hazard with the same mean
 * remaining length (a stretch older than the plan tells apart is expected to last as long as the model says such
 * stretches last, not as long as the one bin at its start says).
 */
export function stepHazards(
  hazards: readonly number[],
  binSeconds: number,
  wideBins: number,
  stepSeconds: number,
  ageStarts: readonly number[],
): number[] {
  const binStarts = spotBinStarts(binSeconds, hazards.length, wideBins);
  const last = hazards.length - 1;
  // Log-survival from age 0 to the start of each bin, then within a bin by its constant hazard per binSeconds.
  const logRate = hazards.map((h) => Math.log1p(-h) / binSeconds);
  const logAtBin = [0];
  for (let bin = 0; bin < last; bin++)
    logAtBin.push(
      (logAtBin[bin] as number) +
        ((binStarts[bin + 1] as number) - (binStarts[bin] as number)) * (logRate[bin] as number),
    );
  const binAt = (t: number): number => {
    let bin = last;
    while (bin > 0 && t < (binStarts[bin] as number)) bin--;
    return bin;
  };
  const logSurvival = (t: number): number => {
    const bin = binAt(t);
    return (logAtBin[bin] as number) + (t - (binStarts[bin] as number)) * (logRate[bin] as number);
  };
  const open = ageStarts.length - 1;
  const perStep = ageStarts.slice(0, open).map((from, state) => {
    const to = ageStarts[state + 1] as number;
    const atFrom = logSurvival(from);
    if (atFrom === Number.NEGATIVE_INFINITY) return 1;
    const survival = Math.exp(((logSurvival(to) - atFrom) * stepSeconds) / (to - from));
    return Math.min(1, Math.max(0, 1 - survival));
  });
  // Mean remaining length of a stretch that has reached the open state: the integral of its survival, bin by bin,
  // then the last bin's exponential tail.
  const cap = ageStarts[open] as number;
  const atCap = logSurvival(cap);
  let remaining = 0;
  if (atCap !== Number.NEGATIVE_INFINITY) {
    const tailStart = Math.max(cap, binStarts[last] as number);
    for (let t = cap; t < tailStart; ) {
      const bin = binAt(t);
      const end = Math.min(tailStart, binStarts[bin + 1] as number);
      const rate = -(logRate[bin] as number);
      const startSurvival = Math.exp(logSurvival(t) - atCap);
      remaining += rate > 0 ? (startSurvival * (1 - Math.exp(-rate * (end - t)))) / rate : startSurvival * (end - t);
      t = end;
    }
    const tailRate = -(logRate[last] as number);
    remaining += tailRate > 0 ? Math.exp(logSurvival(tailStart) - atCap) / tailRate : Number.POSITIVE_INFINITY;
  }
  perStep.push(remaining === 0 ? 1 : 1 - Math.exp(-stepSeconds / remaining));
  return perStep;
}

/** The age states of a plan for this model and step (planAgeStarts over the model's open bin). */
function planAgeStartsFor(model: SpotLengthModel, stepSeconds: number): number[] {
  const openFrom = Math.max(
    ...[model.availableHazards, model.unavailableHazards].map(
      (hazards) => spotBinStarts(model.binSeconds, hazards.length, model.wideBins ?? 0).at(-1) as number,
    ),
  );
  return planAgeStarts(stepSeconds, PLAN_AGE_STEPS, openFrom);
}

function validateParameters(p: SpotPlanParameters): void {
  const positive = (name: string, value: number): void => {
    if (!Number.isFinite(value) || value <= 0)
      throw new InvalidSpotPlan(`${name} must be a finite number > 0, got ${value}`);
  };
  positive('stepSeconds', p.stepSeconds);
  positive('spotPriceRatio', p.spotPriceRatio);
  if (p.spotPriceRatio > 1) throw new InvalidSpotPlan(`spotPriceRatio must be at most 1, got ${p.spotPriceRatio}`);
  if (!Number.isInteger(p.horizonSteps) || p.horizonSteps < 0)
    throw new InvalidSpotPlan(`horizonSteps must be a whole number >= 0, got ${p.horizonSteps}`);
  for (const [name, value] of [
    ['maxWorkSeconds', p.maxWorkSeconds],
    ['restartOverheadSeconds', p.restartOverheadSeconds],
  ] as const)
    if (!Number.isFinite(value) || value < 0)
      throw new InvalidSpotPlan(`${name} must be a finite number >= 0, got ${value}`);
  const riskAversion = p.riskAversion ?? 0;
  if (!Number.isFinite(riskAversion) || riskAversion < 0)
    throw new InvalidSpotPlan(`riskAversion must be a finite number >= 0, got ${p.riskAversion}`);
  // The most a state's best action can cost: its work and headroom on on-demand, one restart, one step.
  const largestCostHours =
    (p.maxWorkSeconds + p.restartOverheadSeconds * (WORK_HEADROOM_RESTARTS + 2) + p.stepSeconds * 2) / 3600;
  if (riskAversion * largestCostHours > MAX_RISK_EXPONENT)
    throw new InvalidSpotPlan(
      `riskAversion ${riskAversion} per on-demand hour is too large for a plan whose costs reach ${largestCostHours.toFixed(1)} on-demand hours: their product must be at most ${MAX_RISK_EXPONENT}`,
    );
  positive('model.binSeconds', p.model.binSeconds);
  for (const [name, hazards] of [
    ['model.availableHazards', p.model.availableHazards],
    ['model.unavailableHazards', p.model.unavailableHazards],
  ] as const) {
    if (hazards.length === 0) throw new InvalidSpotPlan(`${name} must hold at least one hazard`);
    const wideBins = p.model.wideBins ?? 0;
    if (!Number.isInteger(wideBins) || wideBins < 0 || wideBins >= hazards.length)
      throw new InvalidSpotPlan(
        `model.wideBins must be a whole number in [0, ${hazards.length - 1}] for the ${hazards.length} bins of ${name}, got ${wideBins}`,
      );
    for (const h of hazards)
      if (!Number.isFinite(h) || h < 0 || h > 1)
        throw new InvalidSpotPlan(`${name} entries must lie in [0, 1], got ${h}`);
  }
}

/** One action from one state: its price per cell, restart, and where spot's next step leads. */
interface ActionTransition {
  /** Whether the action holds an instance (and so pays and progresses); false = waiting in the spot queue. */
  progresses: boolean;
  /** Price per work cell of time, in on-demand cells. */
  price: number;
  /** A risk-averse plan's factor for one step's price, e^(a·price·cells per step) (1 for a risk-neutral one). */
  stepFactor: number;
  /** Work cells the action's instance start adds (0 when it keeps what the job holds). */
  restartCells: number;
  /**
   * Where spot's next step leads, with its probability: it stays as it is and its age state stays (an age phase not
   * yet left) or moves on to the next, or it changes (age 0).
   */
  stay: number;
  older: number;
  flip: number;
  pStay: number;
  pOlder: number;
  pFlip: number;
}

/** Both actions' transitions for every (holding, availability, age state) state, in state-index order. */
function planTransitions(
  p: SpotPlanParameters,
  restartCells: number,
  ageStarts: readonly number[],
  riskPerCell: number,
): { spot: ActionTransition; onDemand: ActionTransition }[] {
  const ages = ageStarts.length;
  const open = ages - 1;
  const index = (held: PlanHolding, available: boolean, age: number): number =>
    comboIndex(held, available) * ages + age;
  const wideBins = p.model.wideBins ?? 0;
  const hazards = [
    stepHazards(p.model.unavailableHazards, p.model.binSeconds, wideBins, p.stepSeconds, ageStarts),
    stepHazards(p.model.availableHazards, p.model.binSeconds, wideBins, p.stepSeconds, ageStarts),
  ];
  return COMBOS.flatMap(({ held, available }) =>
    Array.from({ length: ages }, (_, age) => {
      const change = (hazards[available ? 1 : 0] as number[])[age] as number;
      // A state one step wide is always left after a step; a phase n steps wide, by chance 1/n (its mean stay); the
      // open state never.
      const advance =
        age === open ? 0 : Math.min(1, p.stepSeconds / ((ageStarts[age + 1] as number) - (ageStarts[age] as number)));
      // Every transition is built with the same fields in the same order (one object shape for the solver's loop).
      const transition = (
        progresses: boolean,
        price: number,
        restart: number,
        to: PlanHolding,
        flip: PlanHolding,
      ): ActionTransition => ({
        progresses,
        price,
        stepFactor: riskPerCell > 0 ? Math.exp(riskPerCell * price * WORK_CELLS_PER_STEP) : 1,
        restartCells: restart,
        stay: index(to, available, age),
        older: index(to, available, Math.min(open, age + 1)),
        flip: index(flip, !available, 0),
        pStay: (1 - change) * (1 - advance),
        pOlder: (1 - change) * advance,
        pFlip: change,
      });
      const onDemand = transition(true, 1, held === 'on-demand' ? 0 : restartCells, 'on-demand', 'on-demand');
      // Spot queue: runs on spot while capacity is there (a reclaim leaves it waiting), waits while it is not.
      const spot = available
        ? transition(true, p.spotPriceRatio, held === 'spot' ? 0 : restartCells, 'spot', 'none')
        : transition(false, 0, 0, 'none', 'none');
      return { spot, onDemand };
    }),
  );
}

/** A solved plan: the best action for every (steps left, work left, holding, availability, age) it covers. */
export class SpotPlan {
  private constructor(
    readonly parameters: SpotPlanParameters,
    /** Work cells the plan answers for. */
    private readonly workCells: number,
    /** Work cells solved: those answered for, and the headroom above them (WORK_HEADROOM_RESTARTS). */
    private readonly gridCells: number,
    private readonly cellSeconds: number,
    /** The age (seconds) at which each age state starts (planAgeStarts); the last is open. */
    private readonly ageStarts: readonly number[],
    /** Bit set where on-demand is the better action, indexed [step][work cell][combo][age state]. */
    private readonly onDemand: Uint8Array,
  ) {}

  /**
   * Solves the plan by backward induction from the deadline. A risk-neutral plan's values are expected costs in
   * on-demand cell-prices (one cell of time on on-demand costs 1); a risk-averse one's are E[e^(a·cost)] with `a` per
   * cell-price, which compare alike (the exponential is increasing) and compose by products: a step's price
   * multiplies what follows by its e^(a·price) where a risk-neutral plan adds it.
   */
  static solve(parameters: SpotPlanParameters): SpotPlan {
    validateParameters(parameters);
    const { stepSeconds, horizonSteps, restartOverheadSeconds } = parameters;
    const cellSeconds = stepSeconds / WORK_CELLS_PER_STEP;
    const restartCells = restartOverheadSeconds / cellSeconds;
    const workCells = Math.ceil(parameters.maxWorkSeconds / cellSeconds - 1e-9) + 1;
    const gridCells = workCells + Math.ceil(restartCells) * WORK_HEADROOM_RESTARTS;
    const width = gridCells + 1;
    const ageStarts = planAgeStartsFor(parameters.model, stepSeconds);
    const riskPerCell = ((parameters.riskAversion ?? 0) * cellSeconds) / 3600;
    const averse = riskPerCell > 0;
    const transitions = planTransitions(parameters, restartCells, ageStarts, riskPerCell);
    const states = transitions.length;
    let next = new Float64Array(width * states);
    let current = new Float64Array(width * states);
    // At the deadline: nothing left costs nothing; work left is a miss.
    next.fill(averse ? 1 : 0, 0, states);
    for (let w = 1; w < width; w++)
      next.fill(averse ? RISK_MISS_VALUE : w * MISS_PENALTY, w * states, (w + 1) * states);
    const onDemand = new Uint8Array(Math.ceil(((horizonSteps + 1) * width * states) / 8));
    const R = WORK_CELLS_PER_STEP;

    // The value of taking action `a` in state s with w cells of work left, against `next` (one step later): waiting for
    // spot costs nothing and makes no progress; holding an instance pays a step's price for a step's progress (what is
    // left of the work on the last one), its restart included.
    const waitValue = (a: ActionTransition, w: number): number => {
      const base = w * states;
      const value = a.pOlder * (next[base + a.older] as number) + a.pFlip * (next[base + a.flip] as number);
      return a.pStay === 0 ? value : value + a.pStay * (next[base + a.stay] as number);
    };
    const neutralValue = (a: ActionTransition, w: number): number => {
      if (!a.progresses) return waitValue(a, w);
      const cells = w + a.restartCells;
      if (cells <= R) return a.price * cells;
      const left = Math.min(gridCells - 1e-9, cells - R);
      const low = Math.floor(left);
      const frac = left - low;
      const lowBase = low * states;
      const highBase = lowBase + states;
      const older = (1 - frac) * (next[lowBase + a.older] as number) + frac * (next[highBase + a.older] as number);
      const flip = (1 - frac) * (next[lowBase + a.flip] as number) + frac * (next[highBase + a.flip] as number);
      const value = a.price * R + a.pOlder * older + a.pFlip * flip;
      if (a.pStay === 0) return value;
      const stay = (1 - frac) * (next[lowBase + a.stay] as number) + frac * (next[highBase + a.stay] as number);
      return value + a.pStay * stay;
    };
    const averseValue = (a: ActionTransition, w: number): number => {
      if (!a.progresses) return waitValue(a, w);
      const cells = w + a.restartCells;
      if (cells <= R) return Math.exp(riskPerCell * a.price * cells);
      const left = Math.min(gridCells - 1e-9, cells - R);
      const low = Math.floor(left);
      const frac = left - low;
      const lowBase = low * states;
      const highBase = lowBase + states;
      const older = (1 - frac) * (next[lowBase + a.older] as number) + frac * (next[highBase + a.older] as number);
      const flip = (1 - frac) * (next[lowBase + a.flip] as number) + frac * (next[highBase + a.flip] as number);
      let later = a.pOlder * older + a.pFlip * flip;
      if (a.pStay !== 0)
        later +=
          a.pStay * ((1 - frac) * (next[lowBase + a.stay] as number) + frac * (next[highBase + a.stay] as number));
      // A value that leads to a miss stays at the miss's value rather than grow past what a double holds.
      const value = a.stepFactor * later;
      return value < RISK_MISS_VALUE ? value : RISK_MISS_VALUE;
    };
    // Two functions rather than one that branches on `averse` (measured 20 % slower in both modes), each with its own
    // copy of the interpolation (a helper both call measured 1.5 times slower): this loop is the whole solve.
    const actionValue = averse ? averseValue : neutralValue;

    for (let step = 1; step <= horizonSteps; step++) {
      current.fill(averse ? 1 : 0, 0, states);
      for (let w = 1; w < width; w++) {
        const base = w * states;
        for (let s = 0; s < states; s++) {
          const t = transitions[s] as { spot: ActionTransition; onDemand: ActionTransition };
          const od = actionValue(t.onDemand, w);
          const spot = actionValue(t.spot, w);
          if (od < spot) {
            current[base + s] = od;
            const bit = (step * width + w) * states + s;
            onDemand[bit >> 3] = (onDemand[bit >> 3] as number) | (1 << (bit & 7));
          } else current[base + s] = spot;
        }
      }
      [next, current] = [current, next];
    }
    return new SpotPlan(parameters, workCells, gridCells, cellSeconds, ageStarts, onDemand);
  }

  /** Whether the plan covers this state (its steps left and work left are within what it was solved for). */
  covers(state: PlanState): boolean {
    return (
      this.stepsLeft(state) <= this.parameters.horizonSteps &&
      Math.ceil(state.workLeftSeconds / this.cellSeconds) <= this.workCells
    );
  }

  /** The planned action in this state: 'spot' (run on spot or wait for it in the queue) or 'on-demand'. */
  decide(state: PlanState): 'spot' | 'on-demand' {
    if (!this.covers(state))
      throw new InvalidSpotPlan(
        `state (${state.timeLeftSeconds} s left, ${state.workLeftSeconds} s of work) is outside the plan (${this.parameters.horizonSteps} steps, ${this.parameters.maxWorkSeconds} s of work)`,
      );
    const step = this.stepsLeft(state);
    if (step === 0) return 'on-demand';
    const ages = this.ageStarts.length;
    const states = COMBOS.length * ages;
    const width = this.gridCells + 1;
    const cell = Math.min(this.workCells, Math.ceil(state.workLeftSeconds / this.cellSeconds - 1e-9));
    // The age state: by whole steps while they are told apart, then the phase the age lies in.
    let age = Math.min(PLAN_AGE_STEPS, Math.floor(state.stateAgeSeconds / this.parameters.stepSeconds));
    while (age < ages - 1 && state.stateAgeSeconds >= (this.ageStarts[age + 1] as number)) age++;
    const s = comboIndex(state.held, state.held === 'spot' ? true : state.spotAvailable) * ages + age;
    const bit = (step * width + cell) * states + s;
    return ((this.onDemand[bit >> 3] as number) >> (bit & 7)) & 1 ? 'on-demand' : 'spot';
  }

  private stepsLeft(state: PlanState): number {
    return Math.max(0, Math.floor(state.timeLeftSeconds / this.parameters.stepSeconds + 1e-9));
  }
}

/**
 * The largest plan solved, in grid points ((steps + 1) × (work cells + 2)): with the fleet model's age phases and the
 * deployed risk aversion, a cold solve takes 4.0 s and 60 MiB of process memory on one core here, about 6.8 s in the
 * 1,024 MiB Lambdas that decide placement (lib/function.ts PLANNING_MEMORY_MIB), well inside their 30 s
 * (`npm run bench -- --only control-plane`). The sweep's largest job (92 h to the deadline, 48 h of work) is 640 000
 * points (2.3 s); a job beyond the limit (a week to its deadline with 3 days of work is 1.7 M) keeps the reserve rules.
 */
export const MAX_PLAN_GRID_POINTS = 1_000_000;

/** Grid points of a plan for this much time and work left at this step. */
function gridPoints(horizonSteps: number, maxWorkSeconds: number, stepSeconds: number): number {
  const cellSeconds = stepSeconds / WORK_CELLS_PER_STEP;
  return (horizonSteps + 1) * (Math.ceil(maxWorkSeconds / cellSeconds - 1e-9) + 2);
}

/** Grid points of the plan for a decision with this much time and work left at this step. */
export function planGridPoints(timeLeftSeconds: number, workLeftSeconds: number, stepSeconds: number): number {
  return gridPoints(Math.max(0, Math.floor(timeLeftSeconds / stepSeconds + 1e-9)), workLeftSeconds, stepSeconds);
}

/** Whether a plan for a decision with this much time and work left stays within MAX_PLAN_GRID_POINTS. */
export function planFits(timeLeftSeconds: number, workLeftSeconds: number, stepSeconds: number): boolean {
  return planGridPoints(timeLeftSeconds, workLeftSeconds, stepSeconds) <= MAX_PLAN_GRID_POINTS;
}

/**
 * Plans kept per process, least recently used first: for each (model, step, overhead, price ratio, risk aversion) in
 * use, the plan grown to cover the jobs seen, and beside it a plan for each job that no plan of the key could grow to
 * cover within MAX_PLAN_GRID_POINTS (a long deadline with little work and a short one with much), so that a tick
 * deciding such jobs in turn does not re-solve each one's plan for the other.
 */
const PLAN_CACHE_SIZE = 8;
/**
 * How much a cached plan grows when a state needs more steps or work than it covers: the first factor whose plan
 * stays within MAX_PLAN_GRID_POINTS (1 = just what the state needs).
 */
const PLAN_GROWTH = [1.5, 1.25, 1.1, 1];
const plans: Array<{ key: string; plan: SpotPlan }> = [];

/** Each model's content as a key, kept per model object (a decision asks for its plan at every check). */
const modelKeys = new WeakMap<SpotLengthModel, string>();

/**
 * Plans are shared by content: a tier's model is read afresh from its record at every decision, so two equal models
 * must find the same plan.
 */
function cacheKey(parameters: Omit<SpotPlanParameters, 'horizonSteps' | 'maxWorkSeconds'>): string {
  const { model } = parameters;
  let modelKey = modelKeys.get(model);
  if (modelKey === undefined) {
    modelKey = `${model.binSeconds}:${model.wideBins ?? 0}:${model.availableHazards.join(',')}:${model.unavailableHazards.join(',')}`;
    modelKeys.set(model, modelKey);
  }
  return `${modelKey}/${parameters.stepSeconds}/${parameters.restartOverheadSeconds}/${parameters.spotPriceRatio}/${parameters.riskAversion ?? 0}`;
}

/**
 * The plan for a decision in `state`. A plan answers for every state with no more steps and work left than it was
 * solved for, so one plan per (model, step, overhead, price ratio, risk aversion) serves a job's later decisions and
 * every smaller job; a state no plan of its key covers grows the most recently used one that can grow to cover it
 * within the limit, or else gets a plan of its own beside them, so a warm process solves each key a few times.
 */
export function spotPlanFor(
  state: PlanState,
  parameters: Omit<SpotPlanParameters, 'horizonSteps' | 'maxWorkSeconds'>,
): SpotPlan {
  const key = cacheKey(parameters);
  const touch = (index: number, plan: SpotPlan): SpotPlan => {
    // Least recently used goes first: a plan in use stays while others come and go.
    if (index >= 0) plans.splice(index, 1);
    plans.push({ key, plan });
    if (plans.length > PLAN_CACHE_SIZE) plans.shift();
    return plan;
  };
  const hit = plans.findLastIndex((c) => c.key === key && c.plan.covers(state));
  if (hit >= 0) return touch(hit, (plans[hit] as { plan: SpotPlan }).plan);
  const horizonSteps = Math.max(0, Math.floor(state.timeLeftSeconds / parameters.stepSeconds + 1e-9));
  // A cached plan too small grows to cover both: in each dimension it falls short in, by the largest of PLAN_GROWTH
  // that stays within the limit (so jobs that each need a little more than the last do not each solve again).
  const grown = (needed: number, had: number, factor: number): number =>
    needed > had ? Math.max(needed, had * factor) : had;
  for (let index = plans.length - 1; index >= 0; index--) {
    const cached = plans[index] as { key: string; plan: SpotPlan };
    if (cached.key !== key) continue;
    const size = PLAN_GROWTH.map((factor) => ({
      horizonSteps: Math.ceil(grown(horizonSteps, cached.plan.parameters.horizonSteps, factor)),
      maxWorkSeconds: grown(state.workLeftSeconds, cached.plan.parameters.maxWorkSeconds, factor),
    })).find((s) => gridPoints(s.horizonSteps, s.maxWorkSeconds, parameters.stepSeconds) <= MAX_PLAN_GRID_POINTS);
    if (size) return touch(index, SpotPlan.solve({ ...parameters, ...size }));
  }
  return touch(-1, SpotPlan.solve({ ...parameters, horizonSteps, maxWorkSeconds: state.workLeftSeconds }));
}
