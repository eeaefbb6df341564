/**
 * `npm run bench`: runs every benchmark part (issue 7) and writes one combined report, markdown and JSON, with the
 * machine and the commit, to bench/results/. Options:
 *   --quick            CI-sized runs (under 5 minutes in all); writes bench/results/quick.{md,json}
 *   --only a,b         only these parts (spot, control-plane, checkpoint, overhead); writes <name>-only-a+b.{md,json}
 *   --name NAME        the file name stem instead
 *   --strict           exit 2 when a goal is not met (a part that fails always exits 1)
 * Progress goes to stderr as it happens; the file paths go to stdout at the end.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  type CheckpointBenchResult,
  caseName,
  checkpointBenchTable,
  runCheckpointBench,
  SPOT_WARNING_SECONDS,
} from './checkpoint';
import { type ControlPlaneBenchResult, controlPlaneTables, runControlPlaneBench } from './control-plane';
import { type OverheadBenchResult, overheadTable, runOverheadBench } from './overhead';
import { type BenchReport, type BenchSection, describeMachine, type GoalRow, gitState, writeReport } from './report';
import { runSpotBench, type SpotBenchResult } from './spot';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Where reports are written. */
export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

/** Raised for a command line this script does not accept. */
export class BenchUsageError extends Error {
  override name = 'BenchUsageError';
}

/** What one part hands the report. */
export interface PartOutcome {
  readonly markdown: string;
  readonly goals: readonly GoalRow[];
  readonly result: unknown;
}

/** A benchmark part. */
export interface BenchPart {
  readonly id: string;
  readonly title: string;
  run(options: { quick: boolean; log: (line: string) => void }): Promise<PartOutcome>;
}

const fmt = (value: number, digits = 1): string => value.toFixed(digits);

/** Goal rows of the spot part. */
export function spotGoals(result: SpotBenchResult): GoalRow[] {
  const g = result.goal;
  return [
    {
      part: 'spot',
      metric: "Trainyard's mean and p90 gap to the optimum ≤ the better of Greedy and UP, per (trace, D, d)",
      value: `mean ${g.meanMet}/${g.settings}, p90 ${g.p90Met}/${g.settings}, both ${g.bothMet}/${g.settings} settings`,
      goal: `${g.settings}/${g.settings}`,
      met: g.bothMet === g.settings,
    },
    { part: 'spot', metric: 'Trainyard deadline misses', value: String(g.misses), goal: '0', met: g.misses === 0 },
  ];
}

/** Goal rows of the control-plane part: the worst figure of each kind against its goal. */
export function controlPlaneGoals(result: ControlPlaneBenchResult): GoalRow[] {
  const goals = result.goals;
  const rows: GoalRow[] = [];
  const largest = [...result.bundles].sort((a, b) => b.bytes - a.bytes)[0];
  if (largest) {
    rows.push({
      part: 'control-plane',
      metric: `largest Lambda bundle (${largest.handler})`,
      value: `${fmt(largest.kib)} KiB`,
      goal: `≤ ${goals.bundleKiB} KiB`,
      met: result.bundles.every((b) => b.withinGoal),
    });
  }
  const slowest = [...result.coldStarts].sort((a, b) => b.medianMs - a.medianMs)[0];
  if (slowest) {
    rows.push({
      part: 'control-plane',
      metric: `slowest cold start, median of ${slowest.runs} (${slowest.handler})`,
      value: `${fmt(slowest.medianMs, 0)} ms`,
      goal: `≤ ${goals.coldStartMs} ms`,
      met: result.coldStarts.every((c) => c.withinGoal),
    });
  }
  for (const route of result.latency) {
    rows.push({
      part: 'control-plane',
      metric: `warm ${route.route} p99 (p50 ${fmt(route.p50Ms)} ms, ${route.calls} calls)`,
      value: `${fmt(route.p99Ms)} ms`,
      goal: `≤ ${goals.warmP99Ms} ms`,
      met: route.withinGoal,
    });
  }
  const cap = result.planSolves.at(-1);
  const slowestLambda = cap
    ? [...cap.lambdas].sort((a, b) => b.estimatedMs / b.timeoutSeconds - a.estimatedMs / a.timeoutSeconds)[0]
    : undefined;
  if (cap && slowestLambda) {
    rows.push({
      part: 'control-plane',
      metric: `cold plan solve, ${cap.label}, in ${slowestLambda.handler} (${slowestLambda.memoryMiB} MiB; ${fmt(cap.medianMs / 1000)} s here)`,
      value: `${fmt(slowestLambda.estimatedMs / 1000)} s`,
      goal: `≤ ${fmt(slowestLambda.timeoutSeconds * goals.planSolveTimeoutShare)} s`,
      met: result.planSolves.every((p) => p.lambdas.every((l) => l.withinGoal)),
    });
  }
  const heaviest = [...result.bundleMemory].sort((a, b) => b.peakMiB - a.peakMiB)[0];
  if (heaviest) {
    rows.push({
      part: 'control-plane',
      metric: `peak memory of Analyze on the largest bundles (one that ${heaviest.label})`,
      value: `${fmt(heaviest.peakMiB, 0)} MiB`,
      goal: `≤ ${heaviest.functionMiB} MiB (its memory)`,
      met: result.bundleMemory.every((m) => m.withinGoal),
    });
  }
  rows.push({
    part: 'control-plane',
    metric: 'state transitions of a happy-path job',
    value: String(result.transitions.stateEntered),
    goal: `≤ ${goals.stateTransitions}`,
    met: result.transitions.withinGoal,
  });
  return rows;
}

/** Goal rows of the checkpoint part: each size's median notice → complete checkpoint inside the spot warning. */
export function checkpointGoals(result: CheckpointBenchResult): GoalRow[] {
  return result.sizes.map((size) => ({
    part: 'checkpoint',
    metric: `notice → complete checkpoint, ${caseName(size.bytes, size.unchangedBytes)} (median of ${size.runs})`,
    value: `${fmt(size.noticeToCompleteSeconds, 2)} s`,
    goal: `≤ ${SPOT_WARNING_SECONDS} s`,
    met: size.withinWindow,
  }));
}

/** Goal row of the overhead part. */
export function overheadGoals(result: OverheadBenchResult): GoalRow[] {
  const minutes = (result.plan.iterations * result.plan.stepDelaySeconds) / 60;
  return [
    {
      part: 'overhead',
      metric: `local mode ÷ direct wall time, ${minutes.toFixed(minutes < 1 ? 1 : 0)}-minute job (median of ${result.runs.length})`,
      value: result.medianRatio.toFixed(3),
      goal: `≤ ${result.goalRatio.toFixed(2)}`,
      met: result.withinGoal,
    },
  ];
}

/** Every part, in report order. */
export const PARTS: readonly BenchPart[] = [
  {
    id: 'spot',
    title: 'Part 1 — spot policy on real AWS spot traces',
    async run(options) {
      const result = await runSpotBench(options);
      return { markdown: result.markdown, goals: spotGoals(result), result };
    },
  },
  {
    id: 'control-plane',
    title: 'Part 2 — control plane',
    async run(options) {
      const result = await runControlPlaneBench(options);
      return { markdown: controlPlaneTables(result), goals: controlPlaneGoals(result), result };
    },
  },
  {
    id: 'checkpoint',
    title: 'Part 3 — checkpoint on interruption (notice → complete checkpoint in S3)',
    async run(options) {
      const result = await runCheckpointBench(options);
      const intro =
        `Through the real harness against s3rver; IMDS polled every ${result.imdsPollSeconds} s, so detection ` +
        `alone can take up to that long. Window: the ${result.windowSeconds} s spot warning.\n\n`;
      return { markdown: intro + checkpointBenchTable(result), goals: checkpointGoals(result), result };
    },
  },
  {
    id: 'overhead',
    title: 'Part 3 — platform overhead (example job direct vs through local mode)',
    async run(options) {
      const result = await runOverheadBench(options);
      return { markdown: overheadTable(result), goals: overheadGoals(result), result };
    },
  },
];

/** Parsed command line. */
export interface BenchArgs {
  readonly quick: boolean;
  readonly only: readonly string[];
  readonly name: string;
  readonly strict: boolean;
}

/** Parses `--quick`, `--only a,b`, `--name X`, `--strict`. */
export function parseBenchArgs(argv: readonly string[], parts: readonly BenchPart[] = PARTS): BenchArgs {
  let quick = false;
  let strict = false;
  let only: string[] = [];
  let name: string | undefined;
  const known = parts.map((p) => p.id);
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const [flag, inline] = arg.includes('=')
      ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]
      : [arg];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new BenchUsageError(`${flag} needs a value`);
      return v;
    };
    if (flag === '--quick') quick = true;
    else if (flag === '--strict') strict = true;
    else if (flag === '--only') {
      only = value()
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      const unknown = only.filter((id) => !known.includes(id));
      if (unknown.length > 0) {
        throw new BenchUsageError(`--only: unknown part ${unknown.join(', ')}; parts are ${known.join(', ')}`);
      }
    } else if (flag === '--name') {
      name = value();
      if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new BenchUsageError(`--name must be a file name stem, got ${name}`);
    } else throw new BenchUsageError(`unknown option ${arg}; options are --quick, --only a,b, --name NAME, --strict`);
  }
  const base = quick ? 'quick' : 'latest';
  return { quick, strict, only, name: name ?? (only.length > 0 ? `${base}-only-${only.join('+')}` : base) };
}

/** Runs the selected parts and writes the report; returns it and the paths written. */
export async function runBench(
  args: BenchArgs,
  options: { parts?: readonly BenchPart[]; resultsDir?: string; log?: (line: string) => void } = {},
): Promise<{ report: BenchReport; paths: { markdown: string; json: string } }> {
  const started = performance.now();
  const startedAt = new Date().toISOString();
  const stamp = () => `[${fmt((performance.now() - started) / 1000).padStart(6)} s]`;
  const log = options.log ?? ((line: string) => console.error(`${stamp()} ${line}`));
  const selected = (options.parts ?? PARTS).filter((p) => args.only.length === 0 || args.only.includes(p.id));
  const machine = describeMachine();
  // Read before the parts run: other work may commit while a long run goes on, and the figures belong to this commit.
  const git = gitState(ROOT, ['bench/results']);
  log(
    `machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, ${machine.os}, Node ${machine.node}`,
  );
  const sections: BenchSection[] = [];
  for (const part of selected) {
    log(`${part.id}: starting${args.quick ? ' (quick)' : ''}`);
    const partStarted = performance.now();
    try {
      const outcome = await part.run({ quick: args.quick, log });
      const elapsedSeconds = (performance.now() - partStarted) / 1000;
      sections.push({ id: part.id, title: part.title, elapsedSeconds, ...outcome });
      const unmet = outcome.goals.filter((g) => !g.met).length;
      log(
        `${part.id}: done in ${fmt(elapsedSeconds, 0)} s, ${outcome.goals.length - unmet}/${outcome.goals.length} goals met`,
      );
    } catch (error) {
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      const elapsedSeconds = (performance.now() - partStarted) / 1000;
      sections.push({
        id: part.id,
        title: part.title,
        elapsedSeconds,
        markdown: `**Failed:** ${message}`,
        goals: [],
        result: null,
        error: message,
      });
      log(`${part.id}: FAILED — ${message}`);
    }
  }
  const flags = [args.quick ? '--quick' : '', args.only.length > 0 ? `--only ${args.only.join(',')}` : '']
    .filter(Boolean)
    .join(' ');
  const report: BenchReport = {
    name: args.name,
    quick: args.quick,
    command: flags ? `npm run bench -- ${flags}` : 'npm run bench',
    startedAt,
    elapsedSeconds: (performance.now() - started) / 1000,
    machine,
    git,
    sections,
  };
  const paths = writeReport(report, options.resultsDir ?? RESULTS_DIR);
  return { report, paths };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  (async () => {
    const args = parseBenchArgs(process.argv.slice(2));
    const { report, paths } = await runBench(args);
    console.log(paths.markdown);
    console.log(paths.json);
    if (report.sections.some((s) => s.error !== undefined)) process.exitCode = 1;
    else if (args.strict && report.sections.some((s) => s.goals.some((g) => !g.met))) process.exitCode = 2;
  })().catch((error: unknown) => {
    console.error(error instanceof BenchUsageError ? error.message : error);
    process.exitCode = 1;
  });
}
