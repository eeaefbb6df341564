/**
 * The issue-7 sweep: every trace × deadline × restart overhead × seeded start offset, five policies each, summarised
 * per setting as mean cost relative to on-demand only, mean and 90th-percentile gap to the optimum, and misses.
 */
import type { PlacementPolicyConfig } from '../../lambdas/domain/placement';
import { seededRandom } from '../../lib/seeded-random';
import { percentile } from '../stats';
import { greedyPolicy, uniformProgressPolicy } from './baselines';
import { OptimumWorkspace, optimalCost } from './optimum';
import { type JobWindow, onDemandOnlyCost, P3_PRICES, type Prices, simulate, type TickPolicy } from './simulator';
import type { SpotTrace } from './traces';
import { TierSpotTimeline, trainyardPolicy } from './trainyard';

/**
 * The policies compared, in report order. `trainyard-no-probe` is the same production policy for a tier whose
 * placement-score probe cannot answer (fewer than three instance types): the check cannot see spot on on-demand.
 */
export const POLICIES = [
  'on-demand',
  'greedy',
  'uniform-progress',
  'trainyard',
  'trainyard-no-probe',
  'optimum',
] as const;
/** One of the compared policies. */
export type PolicyName = (typeof POLICIES)[number];

/** What to sweep. */
export interface SweepOptions {
  /** Job length C in hours. */
  workHours: number;
  /** Deadlines D in hours. */
  deadlineHours: readonly number[];
  /** Restart overheads d in hours. */
  overheadHours: readonly number[];
  /** Start offsets per trace and deadline. */
  offsets: number;
  /** Seed of the offset generator. */
  seed: number;
  /** Prices. */
  prices: Prices;
  /** The lifecycle config Trainyard's policy runs with (restart overhead comes from the setting's d). */
  trainyard: Omit<PlacementPolicyConfig, 'restartOverheadSeconds'>;
}

/** The full sweep: C = 48 h, D = 52..92 h step 4, d ∈ {0.05, 0.1, 0.3} h, 300 offsets. */
export const FULL_SWEEP: SweepOptions = {
  workHours: 48,
  deadlineHours: [52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92],
  overheadHours: [0.05, 0.1, 0.3],
  offsets: 300,
  seed: 20240416,
  prices: P3_PRICES,
  trainyard: { reclaimsBeforeOnDemand: 2, capacityWaitSeconds: 1200, checkIntervalSeconds: 300 },
};

/** Per-policy figures for one setting. */
export interface PolicyStats {
  /** Mean of cost / on-demand-only cost. */
  meanNormalisedCost: number;
  /** Mean of (cost − optimum) / optimum. */
  meanGap: number;
  /** 90th percentile (nearest rank) of the gap. */
  p90Gap: number;
  /** Jobs that missed the deadline. */
  misses: number;
  /** Every job's gap, for figures pooled over settings; kept in memory only (the results' JSON leaves it out). */
  gaps?: readonly number[];
}

/** One (trace, D, d) setting. */
export interface SettingResult {
  /** Trace name. */
  trace: string;
  /** Deadline, hours. */
  deadlineHours: number;
  /** Restart overhead, hours. */
  overheadHours: number;
  /** Jobs simulated (offsets). */
  jobs: number;
  /** Figures per policy. */
  policies: Record<PolicyName, PolicyStats>;
}

function hashString(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

/**
 * Start offsets (ticks) for one trace and deadline: uniform over the offsets whose window [offset, offset + D) lies
 * inside the trace, so no window wraps around.
 */
export function startOffsets(trace: SpotTrace, deadlineTicks: number, count: number, seed: number): number[] {
  const last = trace.available.length - deadlineTicks;
  if (last < 0)
    throw new RangeError(`${trace.name} has ${trace.available.length} ticks, shorter than ${deadlineTicks}`);
  const random = seededRandom(seed ^ hashString(`${trace.name}:${deadlineTicks}`));
  return Array.from({ length: count }, () => Math.floor(random() * (last + 1)));
}

const mean = (values: readonly number[]): number => values.reduce((s, v) => s + v, 0) / values.length;

/** One policy's figures in one setting, job by job. */
interface Samples {
  /** Cost ÷ on-demand-only cost. */
  cost: number[];
  /** (Cost − optimum) ÷ optimum. */
  gap: number[];
  misses: number;
}

/**
 * Runs the settings (trace, D, d) for every D in `deadlineHours`, each over its offsets. Trainyard's jobs share one
 * tier record per trace (TierSpotTimeline) and are run in the order that lets them share solved plans: by the model
 * their tier had learnt at submission, the latest first (a job that sees its tier refitted while it runs then finds
 * the new model's plan solved for the jobs submitted under it), then longest deadline first (a plan answers every
 * smaller job); the figures do not depend on the order.
 */
export function runSettings(
  trace: SpotTrace,
  deadlineHours: readonly number[],
  overheadHours: number,
  options: SweepOptions,
  workspace: OptimumWorkspace = new OptimumWorkspace(),
): SettingResult[] {
  const timeline = new TierSpotTimeline(
    trace.available,
    trace.gapSeconds,
    options.trainyard.checkIntervalSeconds,
    options.trainyard.spotPlanning?.model,
  );
  const jobs = deadlineHours.flatMap((hours, setting) => {
    const deadlineSeconds = Math.round(hours * 3600);
    const ticks = deadlineSeconds / trace.gapSeconds;
    return startOffsets(trace, ticks, options.offsets, options.seed).map((offset, index) => ({
      setting,
      index,
      offset,
      ticks,
      deadlineSeconds,
      tierSpot: timeline.before(offset),
    }));
  });
  const fittedAt = (job: (typeof jobs)[number]): number => job.tierSpot?.modelFittedMs ?? -1;
  jobs.sort((a, b) => fittedAt(b) - fittedAt(a) || b.deadlineSeconds - a.deadlineSeconds || a.offset - b.offset);

  // Per setting and policy, each job's figures at its offset's index.
  const samples = deadlineHours.map(
    () =>
      Object.fromEntries(
        POLICIES.map((name) => [
          name,
          { cost: new Array<number>(options.offsets), gap: new Array<number>(options.offsets), misses: 0 },
        ]),
      ) as Record<PolicyName, Samples>,
  );
  for (const { setting, index, offset, ticks, deadlineSeconds, tierSpot } of jobs) {
    const job: JobWindow = {
      gapSeconds: trace.gapSeconds,
      workSeconds: Math.round(options.workHours * 3600),
      deadlineSeconds,
      overheadSeconds: Math.round(overheadHours * 3600),
      prices: options.prices,
      available: trace.available.subarray(offset, offset + ticks),
      before: trace.available.subarray(0, offset),
    };
    const onDemand = onDemandOnlyCost(job);
    const optimum = optimalCost(job, workspace);
    const record = (name: PolicyName, cost: number, finished: boolean): void => {
      const sample = (samples[setting] as Record<PolicyName, Samples>)[name];
      sample.cost[index] = cost / onDemand;
      sample.gap[index] = (cost - optimum) / optimum;
      if (!finished) sample.misses++;
    };
    record('on-demand', onDemand, true);
    record('optimum', optimum, Number.isFinite(optimum));
    const run = (name: PolicyName, policy: TickPolicy): void => {
      const result = simulate(job, policy);
      record(name, result.cost, result.finished);
    };
    run('greedy', greedyPolicy(job));
    run('uniform-progress', uniformProgressPolicy(job));
    run('trainyard', trainyardPolicy(job, options.trainyard, { tierSpotAtSubmit: tierSpot }));
    run('trainyard-no-probe', trainyardPolicy(job, { ...options.trainyard, spotVisibleOnDemand: false }));
  }
  return deadlineHours.map((hours, setting) => {
    const policies = Object.fromEntries(
      POLICIES.map((name): [PolicyName, PolicyStats] => {
        const s = (samples[setting] as Record<PolicyName, Samples>)[name];
        return [
          name,
          {
            meanNormalisedCost: mean(s.cost),
            meanGap: mean(s.gap),
            p90Gap: percentile(s.gap, 90),
            misses: s.misses,
            gaps: s.gap,
          },
        ];
      }),
    ) as Record<PolicyName, PolicyStats>;
    return { trace: trace.name, deadlineHours: hours, overheadHours, jobs: options.offsets, policies };
  });
}

/** Runs one (trace, D, d) setting over its offsets. */
export function runSetting(
  trace: SpotTrace,
  deadlineHours: number,
  overheadHours: number,
  options: SweepOptions,
  workspace: OptimumWorkspace = new OptimumWorkspace(),
): SettingResult {
  return runSettings(trace, [deadlineHours], overheadHours, options, workspace)[0] as SettingResult;
}
