/**
 * Part 1 of `npm run bench`: Trainyard's production placement policy against on-demand only, Greedy, Uniform Progress
 * and the exact omniscient optimum on the public AWS spot traces (issue 7). bench/run.ts writes the results.
 */
import { DEFAULT_PLACEMENT_CONFIG } from '../lambdas/domain/placement';
import { roundedSpotLengthModel, type SpotLengthModel } from '../lambdas/domain/spot-planner';
import { placementConfigFrom } from '../lambdas/domain/watch';
import { parseConfig } from '../lib/config';
import { OptimumWorkspace } from './spot/optimum';
import { type GoalCheck, goalCheck, markdownReport, type OverallStats, overall, sanitySubset } from './spot/report';
import { fitFleetModel } from './spot/spot-model';
import { FULL_SWEEP, type PolicyName, runSettings, type SettingResult, type SweepOptions } from './spot/sweep';
import { DEFAULT_TRACES_ROOT, loadTraces, type SpotTrace } from './spot/traces';

/** Everything the spot benchmark measured. */
export interface SpotBenchResult {
  /** Whether this was the quick subset. */
  quick: boolean;
  /** The sweep that ran (C, D, d, offsets, seed, prices, Trainyard's lifecycle config). */
  sweep: SweepOptions;
  /** Trace files used. */
  traces: string[];
  /** Per (trace, D, d) setting. */
  settings: SettingResult[];
  /** Overall per policy. */
  overall: Record<PolicyName, OverallStats>;
  /** The sanity subset (2022 traces, D ∈ {52, 60, 70, 92}), overall per policy; null in quick mode. */
  sanity: Record<PolicyName, OverallStats> | null;
  /** Trainyard against the better of Greedy and UP per setting. */
  goal: GoalCheck;
  /** Markdown tables for bench/results. */
  markdown: string;
  /** Wall time of the sweep. */
  elapsedSeconds: number;
}

/** The seed tier a long deadline job runs on: its placement config is what the bench drives the policy with. */
export const BENCH_TIER = 'gpu-large';

/**
 * The placement config the deployed lifecycle builds for a job on the seed BENCH_TIER (placementConfigFrom, the
 * function budget-watch and the lifecycle steps use), less the restart overhead, which each setting supplies.
 */
export function deployedPlacementConfig(): SweepOptions['trainyard'] {
  const seed = parseConfig({}, 'the seed config');
  const tier = seed.tiers.find((t) => t.id === BENCH_TIER);
  if (!tier) throw new Error(`the seed config has no tier ${BENCH_TIER}`);
  const { restartOverheadSeconds: _, ...config } = placementConfigFrom(DEFAULT_PLACEMENT_CONFIG, seed.spotPolicy, tier);
  return config;
}

/** The fleet model fitted on every trace but `held`, rounded as the deployed one is (scripts/fit-spot-model.ts). */
export function heldOutFleetModel(traces: readonly SpotTrace[], held: SpotTrace): SpotLengthModel {
  const others = traces.filter((t) => t !== held);
  if (others.length === traces.length) throw new Error(`trace ${held.name} is not among the traces`);
  return roundedSpotLengthModel(fitFleetModel(others));
}

/** The sweep with Trainyard planning, and its tier record refitting, with `model` as the fleet model. */
function withFleetModel(sweep: SweepOptions, model: SpotLengthModel): SweepOptions {
  const { spotPlanning } = sweep.trainyard;
  return spotPlanning
    ? { ...sweep, trainyard: { ...sweep.trainyard, spotPlanning: { ...spotPlanning, model } } }
    : sweep;
}

/**
 * The quick subset: every trace, 30 offsets, three deadlines and the two ends of the overhead range. Its time goes
 * mostly to solving each model's plan once per overhead, so an overhead costs a third of the part (d = 0.1 h was
 * dropped when the whole quick run took 320 s on a slow day of this 2-core machine, against the 5-minute goal).
 */
export const QUICK_SWEEP: SweepOptions = {
  ...FULL_SWEEP,
  offsets: 30,
  deadlineHours: [52, 72, 92],
  overheadHours: [0.05, 0.3],
};

/** Runs the spot sweep (quick or full) and returns the figures and a markdown report. */
export async function runSpotBench(options: { quick: boolean; log: (line: string) => void }): Promise<SpotBenchResult> {
  const base = options.quick ? QUICK_SWEEP : FULL_SWEEP;
  // The sanity check needs D = 70 h, which the 52..92 step-4 grid does not contain: add it to the full sweep.
  const sweep: SweepOptions = {
    ...base,
    deadlineHours: options.quick ? base.deadlineHours : [...base.deadlineHours, 70].sort((a, b) => a - b),
    trainyard: deployedPlacementConfig(),
  };
  const started = performance.now();
  const traces = loadTraces(DEFAULT_TRACES_ROOT);
  const workspace = new OptimumWorkspace();
  const settings: SettingResult[] = [];
  for (const trace of traces) {
    // The deployed fleet model is fitted on every public trace, this one included: its jobs plan with one fitted on
    // the others, so no job is planned with a model that has seen its own future.
    const heldOut = withFleetModel(sweep, heldOutFleetModel(traces, trace));
    // Run by overhead (the deadlines of one overhead share plans), report by deadline then overhead.
    const byOverhead: SettingResult[][] = [];
    for (const overheadHours of sweep.overheadHours) {
      byOverhead.push(runSettings(trace, sweep.deadlineHours, overheadHours, heldOut, workspace));
      // Yield so a caller's timers and logs keep running during a long sweep.
      await new Promise((resolve) => setImmediate(resolve));
      options.log(
        `spot: ${trace.name} d=${overheadHours} h done (${((performance.now() - started) / 1000).toFixed(0)} s)`,
      );
    }
    sweep.deadlineHours.forEach((_, deadline) => {
      for (const results of byOverhead) settings.push(results[deadline] as SettingResult);
    });
  }
  // D = 70 h is only for the sanity check; the grid (52..92 step 4) is what the goal and tables cover.
  const grid = settings.filter((s) => base.deadlineHours.includes(s.deadlineHours));
  const sanity = options.quick ? null : overall(sanitySubset(settings));
  const title = options.quick ? 'Spot policy on AWS traces (quick subset)' : 'Spot policy on AWS traces (full sweep)';
  let markdown = markdownReport(grid, title);
  markdown +=
    "\n\nTrainyard's fleet model (what a tier plans with until its record has learnt one, and the prior of every refit) " +
    'is, for the jobs of each trace, fitted on the other traces; the deployed one is fitted on all of them.';
  if (sanity) {
    markdown += `\n\nSanity subset (2022 traces, D ∈ {52, 60, 70, 92} h, d ∈ {0.05, 0.1, 0.3} h; issue: ≈ 0.62 Greedy, 0.59 UP, 0.53 optimum; gap ≈ 20 % Greedy, ≈ 13 % UP): `;
    markdown += `Greedy ${sanity.greedy.meanNormalisedCost.toFixed(3)} (gap ${(sanity.greedy.meanGap * 100).toFixed(1)} %), `;
    markdown += `UP ${sanity['uniform-progress'].meanNormalisedCost.toFixed(3)} (gap ${(sanity['uniform-progress'].meanGap * 100).toFixed(1)} %), `;
    markdown += `Trainyard ${sanity.trainyard.meanNormalisedCost.toFixed(3)} (gap ${(sanity.trainyard.meanGap * 100).toFixed(1)} %), `;
    markdown += `optimum ${sanity.optimum.meanNormalisedCost.toFixed(3)}.`;
  }
  return {
    quick: options.quick,
    sweep,
    traces: traces.map((t) => t.name),
    // Every job's gap stays out of the JSON (its figures are in overall); the settings keep their own.
    settings: grid.map((s) => ({
      ...s,
      policies: Object.fromEntries(
        Object.entries(s.policies).map(([name, { gaps: _, ...stats }]) => [name, stats]),
      ) as SettingResult['policies'],
    })),
    overall: overall(grid),
    sanity,
    goal: goalCheck(grid),
    markdown,
    elapsedSeconds: (performance.now() - started) / 1000,
  };
}
