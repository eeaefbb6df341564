/**
 * Part 2 of `npm run bench`: the control plane's own speed (issue 7). Each Lambda's bundle is built exactly as
 * lib/function.ts bundles it and measured (size, what dominates it, cold start in a fresh Node process); the API
 * handler is timed warm against dynalite and s3rver; and a happy-path job is run through the synthesized state machine
 * to count its state transitions. Run standalone with `npx tsx bench/control-plane.ts [--quick]`.
 */

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { build, type Metafile } from 'esbuild';
import { type ApiEvent, createApiHandler } from '../lambdas/api/app';
import type { JobRecord, JobState } from '../lambdas/domain/job';
import { DEFAULT_PLACEMENT_CONFIG, SPOT_PLAN_RISK_AVERSION } from '../lambdas/domain/placement';
import { MAX_PLAN_GRID_POINTS, planGridPoints } from '../lambdas/domain/spot-planner';
import type { ControlPlane } from '../lambdas/shared/control-plane';
import { createDocumentClient, type DocumentClient } from '../lambdas/shared/dynamo';
import { marshallItem } from '../lambdas/shared/dynamo-items';
import { JobStore, jobItem, MAX_JOBS_READ_PER_PAGE } from '../lambdas/shared/job-store';
import { logger } from '../lambdas/shared/logger';
import type { FleetFacts, LifecycleControl } from '../lambdas/shared/ports';
import { createTableRequest, JOBS_INDEXES, JOBS_TABLE } from '../lambdas/shared/table-design';
import { MAX_UNPACKED_BYTES, packTarGz, sha256Hex } from '../lambdas/shared/tarball';
import { parseConfig, type TrainyardConfig } from '../lib/config';
import {
  configDefine,
  DEFAULT_TIMEOUT_SECONDS,
  LAMBDA_BUNDLING,
  LAMBDA_MIB_PER_VCPU,
  memoryForEntry,
  PLANNING_HANDLERS,
} from '../lib/function';
import { BUDGET_WATCH_TIMEOUT } from '../lib/lifecycle/event-handlers';
import { ensureLocalTables, lifecycleSteps, localControlPlane } from '../lib/local/control-plane';
import { synthesizeJobStateMachineDefinition } from '../lib/local/definition';
import { type RunningEngine, startDynalite, startS3rver } from '../lib/local/engines';
import type { LocalBatch, SubmitJobInput } from '../lib/local/local-batch';
import { LOCAL_NAMES } from '../lib/local/names';
import { type ExecutionEvent, LocalStateMachine } from '../lib/local/state-machine-runner';
import { P3_PRICES } from './spot/simulator';
import { median, percentile } from './stats';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Bundles live under node_modules so the external `@aws-sdk/*` imports resolve as the Lambda runtime's would. */
const BUILD_DIR = join(ROOT, 'node_modules', '.cache', 'trainyard-bench', 'bundles');
const KIB = 1024;

/** The issue's goals for the control plane. */
export const CONTROL_PLANE_GOALS = {
  bundleKiB: 250,
  coldStartMs: 150,
  warmP99Ms: 50,
  stateTransitions: 30,
  /** Ours: a cold plan solve, scaled to a planning Lambda's CPU share, within this share of its timeout. */
  planSolveTimeoutShare: 1 / 3,
} as const;

/** One input package's share of a bundle. */
export interface BundleShare {
  /** npm package name, or the repository folder for our own code. */
  readonly module: string;
  readonly bytes: number;
}

/** One Lambda's bundle. */
export interface BundleFigure {
  /** The handler's folder under lambdas/ (analyze, api, …). */
  readonly handler: string;
  readonly bytes: number;
  readonly kib: number;
  /** The five largest contributors to the minified output. */
  readonly top: readonly BundleShare[];
  /** External `@aws-sdk/*` packages the bundle imports statically: Node loads them at cold start, before the handler. */
  readonly sdkAtInit: readonly string[];
  /**
   * External `@aws-sdk/*` packages the bundle imports only with `import()`: loaded the first time a code path that
   * needs one runs (the shared wiring reaches every port, so a handler may never load some of these).
   */
  readonly sdkOnFirstUse: readonly string[];
  /** The packages of `sdkAtInit` that the bundle loads with `require` only (cheaper than `import` for CommonJS). */
  readonly sdkRequired: readonly string[];
  /** Whether the defined default config's JSON literal is in the output (esbuild found an expression to replace). */
  readonly configLiteralInBundle: boolean;
  readonly withinGoal: boolean;
}

/** What loading one AWS SDK package costs a fresh process. */
export interface SdkImportFigure {
  readonly module: string;
  /** How the bundles load it, and so how it was timed: `require` (at init, see lambdas/shared/dynamo.ts) or `import()`. */
  readonly loadedWith: 'require' | 'import';
  /** Median over runs of the `require` or `import()` alone. */
  readonly medianMs: number;
  /** Bundles that import it statically (load it at cold start). */
  readonly atInitIn: number;
  /** Bundles that import it only dynamically (load it on first use). */
  readonly onFirstUseIn: number;
}

/** Time for a fresh Node process to load one bundle and hold a ready handler. */
export interface ColdStartFigure {
  readonly handler: string;
  readonly runs: number;
  /** Median of process start (performance.timeOrigin) → handler export ready. */
  readonly medianMs: number;
  readonly maxMs: number;
  /** Median of the `import()` of the bundle alone (process start excluded). */
  readonly medianImportMs: number;
  /**
   * Whether the handler became ready with only the stack's variables (no TRAINYARD_CONFIG). Handlers that read the
   * config at cold start fail here when the `define` is not effective; the timed runs then set the variable.
   */
  readonly startsWithoutConfigVariable: boolean;
  readonly withinGoal: boolean;
}

/** Warm latency of one API route. */
export interface LatencyFigure {
  /** `METHOD /path`. */
  readonly route: string;
  readonly calls: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly meanMs: number;
  readonly withinGoal: boolean;
}

/** The happy-path job's walk through the state machine. */
export interface TransitionFigure {
  /** StateEntered events of the execution. */
  readonly stateEntered: number;
  /** States entered, in order. */
  readonly states: readonly string[];
  /** Final job state in DynamoDB (must be SUCCEEDED for the count to mean anything). */
  readonly jobState: string;
  readonly withinGoal: boolean;
}

/** A planning Lambda's estimated time for one cold plan solve. */
export interface PlanSolveLambdaFigure {
  readonly handler: string;
  readonly memoryMiB: number;
  readonly timeoutSeconds: number;
  /** The measured median scaled by the Lambda's CPU share (LAMBDA_MIB_PER_VCPU ÷ memory, at most one vCPU). */
  readonly estimatedMs: number;
  readonly withinGoal: boolean;
}

/** A cold spot-plan solve (spot-planner.ts spotPlanFor, fleet model) in a fresh Node process. */
export interface PlanSolveFigure {
  readonly label: string;
  readonly timeLeftHours: number;
  readonly workLeftHours: number;
  readonly gridPoints: number;
  readonly runs: number;
  /** Median of the first solve in a fresh process (JIT cold), on one core of the bench machine. */
  readonly medianMs: number;
  readonly maxMs: number;
  /** Median resident set size of the process after the solve. */
  readonly rssMiB: number;
  readonly lambdas: readonly PlanSolveLambdaFigure[];
}

/** The lifecycle's Analyze step on one of the largest bundles the API takes, in a fresh Node process. */
export interface BundleMemoryFigure {
  /** What kind of bundle. */
  readonly label: string;
  readonly archiveMiB: number;
  readonly unpackedMiB: number;
  /** Peak resident set of the process (Linux VmHWM), the runtime and the bundled code included. */
  readonly peakMiB: number;
  /** The memory Analyze and the API are deployed with for the default limits (lib/function.ts bundleMemoryMiB). */
  readonly functionMiB: number;
  readonly withinGoal: boolean;
}

/** What one way of reading budget-watch's live jobs cost. */
export interface LiveJobsReadPath {
  /** `byState` (one Query per live state) or `byTeam` (each team's history, states filtered: before the index). */
  readonly path: 'byState' | 'byTeam';
  /** Items DynamoDB read per tick (ScannedCount: what it bills, kept or filtered out). */
  readonly itemsRead: number;
  /** Read units per tick: items read × item size, in 4 KB units, halved for eventually consistent reads. */
  readonly readUnits: number;
  readonly runs: number;
  readonly medianMs: number;
  /** One team's jobs under way as `GET /jobs?state=RUNNING,WAITING,PAUSED_BUDGET` lists them, every page followed. */
  readonly teamListing: {
    readonly itemsRead: number;
    readonly readUnits: number;
    /** Pages (API calls) until the last: a page reads at most MAX_JOBS_READ_PER_PAGE jobs. */
    readonly pages: number;
    readonly medianMs: number;
  };
}

/** budget-watch's read of the live jobs (JobStore.listJobsInStates) over a history of finished jobs. */
export interface LiveJobsReadFigure {
  readonly teams: number;
  readonly finishedJobs: number;
  readonly liveJobs: number;
  /** The live jobs of the team whose listing was read. */
  readonly teamLiveJobs: number;
  /** About the size of one job item as DynamoDB counts it (attribute names and values), in bytes. */
  readonly itemBytes: number;
  readonly paths: readonly LiveJobsReadPath[];
}

/** Everything part 2 measured. */
export interface ControlPlaneBenchResult {
  readonly name: 'control-plane';
  readonly quick: boolean;
  readonly goals: typeof CONTROL_PLANE_GOALS;
  readonly bundles: readonly BundleFigure[];
  readonly coldStarts: readonly ColdStartFigure[];
  readonly sdkImports: readonly SdkImportFigure[];
  readonly latency: readonly LatencyFigure[];
  readonly transitions: TransitionFigure;
  readonly planSolves: readonly PlanSolveFigure[];
  readonly liveJobsRead: LiveJobsReadFigure;
  /** Empty in a quick run (the bundles take a minute and 2 GiB to build). */
  readonly bundleMemory: readonly BundleMemoryFigure[];
  readonly elapsedSeconds: number;
}

/** Raised when a measurement cannot be taken (a request that should succeed did not). */
export class BenchMeasurementFailed extends Error {
  override name = 'BenchMeasurementFailed';
}

/** Every Lambda entry: lambdas/<name>/handler.ts. */
export function lambdaEntries(root = ROOT): Array<{ handler: string; entry: string }> {
  return readdirSync(join(root, 'lambdas'))
    .filter((name) => statSync(join(root, 'lambdas', name, 'handler.ts'), { throwIfNoEntry: false })?.isFile())
    .sort()
    .map((handler) => ({ handler, entry: join(root, 'lambdas', handler, 'handler.ts') }));
}

/** Groups a metafile output's inputs by npm package (or repository folder) and sorts largest first. */
export function bundleComposition(inputs: Metafile['outputs'][string]['inputs']): BundleShare[] {
  const shares = new Map<string, number>();
  for (const [path, input] of Object.entries(inputs)) {
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1];
    const module = pkg ?? path.split('/').slice(0, 2).join('/');
    shares.set(module, (shares.get(module) ?? 0) + input.bytesInOutput);
  }
  return [...shares.entries()].map(([module, bytes]) => ({ module, bytes })).sort((a, b) => b.bytes - a.bytes);
}

/** One import of a metafile output (path, kind, whether it stayed external). */
type OutputImport = Metafile['outputs'][string]['imports'][number];

/**
 * Splits a bundle's external `@aws-sdk/*` imports by when Node loads them: a static `import` (esbuild kind
 * `import-statement`) or a `require-call` through the banner's `require` loads the package at cold start (our code
 * calls `require` only at module level: esbuild cannot tell a deferred one apart); a package reached only by `import()`
 * (`dynamic-import`) loads on first use. A package loaded both ways counts as at init.
 */
export function sdkImportsByKind(imports: readonly OutputImport[]): {
  atInit: string[];
  onFirstUse: string[];
  required: string[];
} {
  const sdk = imports.filter((i) => i.external && i.path.startsWith('@aws-sdk/'));
  const atInit = new Set(sdk.filter((i) => i.kind !== 'dynamic-import').map((i) => i.path));
  const onFirstUse = new Set(sdk.filter((i) => i.kind === 'dynamic-import' && !atInit.has(i.path)).map((i) => i.path));
  const imported = new Set(sdk.filter((i) => i.kind === 'import-statement').map((i) => i.path));
  const required = [...atInit].filter((path) => !imported.has(path));
  return { atInit: [...atInit].sort(), onFirstUse: [...onFirstUse].sort(), required: required.sort() };
}

/**
 * Bundles one entry with lib/function.ts's options (NodejsFunction's esbuild flags for them: node platform, ESM,
 * node22, minified, `@aws-sdk/*` external, the banner, the config defined in). Source maps are left out: they are a
 * separate file in the asset and do not count towards the code Node loads.
 */
export async function bundleLambda(entry: string, outfile: string, config: TrainyardConfig): Promise<Metafile> {
  const result = await build({
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: LAMBDA_BUNDLING.format,
    target: LAMBDA_BUNDLING.target,
    // NodejsFunction's default main fields for ESM output.
    mainFields: ['module', 'main'],
    minify: LAMBDA_BUNDLING.minify,
    external: [...LAMBDA_BUNDLING.external],
    banner: { js: LAMBDA_BUNDLING.banner },
    define: configDefine(config),
    metafile: true,
    logLevel: 'silent',
  });
  return result.metafile;
}

async function measureBundles(
  config: TrainyardConfig,
  log: (line: string) => void,
): Promise<{ figures: BundleFigure[]; files: Map<string, string> }> {
  rmSync(BUILD_DIR, { recursive: true, force: true });
  mkdirSync(BUILD_DIR, { recursive: true });
  const figures: BundleFigure[] = [];
  const files = new Map<string, string>();
  for (const { handler, entry } of lambdaEntries()) {
    const outfile = join(BUILD_DIR, `${handler}.mjs`);
    const metafile = await bundleLambda(entry, outfile, config);
    const output = metafile.outputs[relative(process.cwd(), outfile)] ?? Object.values(metafile.outputs)[0];
    if (!output) throw new BenchMeasurementFailed(`esbuild wrote no output for ${entry}`);
    const bytes = statSync(outfile).size;
    const top = bundleComposition(output.inputs).slice(0, 5);
    const sdk = sdkImportsByKind(output.imports);
    const configLiteralInBundle = readFileSync(outfile, 'utf8').includes(JSON.stringify(config).slice(0, 80));
    figures.push({
      handler,
      bytes,
      kib: bytes / KIB,
      top,
      sdkAtInit: sdk.atInit,
      sdkOnFirstUse: sdk.onFirstUse,
      sdkRequired: sdk.required,
      configLiteralInBundle,
      withinGoal: bytes / KIB <= CONTROL_PLANE_GOALS.bundleKiB,
    });
    files.set(handler, outfile);
    const share = top.map((t) => `${t.module} ${(t.bytes / KIB).toFixed(0)}`).join(', ');
    log(
      `control-plane: bundle ${handler} ${(bytes / KIB).toFixed(1)} KiB (${share}); SDK at init: ` +
        `${sdk.atInit.join(', ') || 'none'}`,
    );
  }
  return { figures, files };
}

/** The environment a bundle starts with in the cold-start runs: a Lambda's own variables and the stack's. */
export const LAMBDA_ENV: Record<string, string> = {
  AWS_REGION: 'us-east-1',
  AWS_DEFAULT_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'AKIDBENCHONLY',
  AWS_SECRET_ACCESS_KEY: 'bench-only',
  AWS_LAMBDA_FUNCTION_NAME: 'trainyard-bench',
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '512',
  POWERTOOLS_SERVICE_NAME: 'trainyard',
  POWERTOOLS_LOG_LEVEL: 'INFO',
  POWERTOOLS_LOGGER_LOG_EVENT: 'false',
  JOBS_TABLE_NAME: 'trainyard-jobs',
  BUDGETS_TABLE_NAME: 'trainyard-budgets',
  WORKSPACE_BUCKET_NAME: 'trainyard-workspace',
  STATE_MACHINE_ARN: 'arn:aws:states:us-east-1:000000000000:stateMachine:trainyard',
  EVENT_BUS_NAME: 'trainyard',
  BATCH_NAME_PREFIX: 'trainyard',
  TRAINING_LOG_GROUP_NAME: 'trainyard-training',
};

/** The child: imports a module, checks the handler export, prints process-start→ready and import-only milliseconds. */
const COLD_START_CHILD = `
const started = performance.now();
const module = process.argv[2] === 'require'
  ? (await import('node:module')).createRequire(process.cwd() + '/')(process.argv[1])
  : await import(process.argv[1]);
if (process.argv[2] === 'handler' && typeof module.handler !== 'function') throw new Error('no handler function export');
const ready = performance.now();
process.stdout.write(JSON.stringify({ readyMs: ready, importMs: ready - started }));
`;

/** A fresh process's timing: process start → ready, and the import alone, in ms. */
export interface ChildTiming {
  readyMs: number;
  importMs: number;
}

/** Imports `specifier` in a fresh Node process with only `env`; resolves its timing or rejects with its stderr. */
export function importInFreshProcess(
  specifier: string,
  env: Record<string, string>,
  check: 'handler' | 'none' | 'require',
): Promise<ChildTiming> {
  return runChild(COLD_START_CHILD, [specifier, check], env, `importing ${specifier}`);
}

/** Runs `node -e code args…` with only PATH and `env`; resolves its stdout parsed as JSON or rejects with its stderr. */
function runChild<T>(code: string, args: readonly string[], env: Record<string, string>, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--no-warnings', '--input-type=module', '-e', code, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (exitCode) => {
      if (exitCode === 0) resolve(JSON.parse(stdout) as T);
      else reject(new BenchMeasurementFailed(`${what} exited ${exitCode}: ${stderr.slice(-1500)}`));
    });
  });
}

/** A bundle ready to be timed: its handler's name, its file URL and the environment it starts with. */
interface ColdStartBundle {
  handler: string;
  url: string;
  env: Record<string, string>;
  /** Whether it started with the stack's variables alone (its config defined in at build). */
  startsWithoutConfigVariable: boolean;
}

/**
 * Each bundle's cold start, median of `runs` fresh processes, the bundles taken in turn run after run (also what
 * bench/cold-start-compare.ts times a commit's bundles against the tree's with).
 */
export async function measureColdStarts(
  files: Map<string, string>,
  runs: number,
  config: TrainyardConfig,
  log: (line: string) => void,
): Promise<ColdStartFigure[]> {
  const bundles: ColdStartBundle[] = [];
  for (const [handler, file] of files) {
    const url = pathToFileURL(file).href;
    // Probe: does the bundle start with only the stack's variables, i.e. is the defined config really baked in?
    const startsWithoutConfigVariable = await importInFreshProcess(url, LAMBDA_ENV, 'handler').then(
      () => true,
      (error: unknown) => {
        if (String(error).includes('TRAINYARD_CONFIG')) return false;
        throw error;
      },
    );
    const env = startsWithoutConfigVariable ? LAMBDA_ENV : { ...LAMBDA_ENV, TRAINYARD_CONFIG: JSON.stringify(config) };
    bundles.push({ handler, url, env, startsWithoutConfigVariable });
  }
  // Runs are sequential: on a small machine parallel processes would measure CPU contention, not cold start. They take
  // the bundles in turn, round after round, so a spell of a slower machine falls on every bundle alike rather than on
  // whichever one was being measured then.
  const samples = bundles.map((): ChildTiming[] => []);
  for (let i = 0; i < runs; i++)
    for (const [index, bundle] of bundles.entries())
      samples[index]?.push(await importInFreshProcess(bundle.url, bundle.env, 'handler'));
  return bundles.map(({ handler, startsWithoutConfigVariable }, index) => {
    const timings = samples[index] ?? [];
    const ready = timings.map((s) => s.readyMs);
    const medianMs = median(ready);
    log(
      `control-plane: cold start ${handler} median ${medianMs.toFixed(0)} ms over ${runs}` +
        (startsWithoutConfigVariable ? '' : ' (needed TRAINYARD_CONFIG in its environment: set for the runs)'),
    );
    return {
      handler,
      runs,
      medianMs,
      maxMs: Math.max(...ready),
      medianImportMs: median(timings.map((s) => s.importMs)),
      startsWithoutConfigVariable,
      withinGoal: medianMs <= CONTROL_PLANE_GOALS.coldStartMs,
    };
  });
}

/**
 * Load cost of each external SDK package the bundles use, loaded the way they load it (`require` when every bundle
 * that has it at init requires it, else `import()`), in a fresh process per run.
 */
async function measureSdkImports(
  bundles: readonly BundleFigure[],
  runs: number,
  log: (line: string) => void,
): Promise<SdkImportFigure[]> {
  const modules = [...new Set(bundles.flatMap((b) => [...b.sdkAtInit, ...b.sdkOnFirstUse]))].sort();
  const figures: SdkImportFigure[] = [];
  for (const module of modules) {
    const loading = bundles.filter((b) => b.sdkAtInit.includes(module));
    const loadedWith =
      loading.length > 0 && loading.every((b) => b.sdkRequired.includes(module)) ? 'require' : 'import';
    const samples: number[] = [];
    for (let i = 0; i < runs; i++) {
      samples.push(
        (await importInFreshProcess(module, LAMBDA_ENV, loadedWith === 'require' ? 'require' : 'none')).importMs,
      );
    }
    const medianMs = median(samples);
    figures.push({
      module,
      loadedWith,
      medianMs,
      atInitIn: bundles.filter((b) => b.sdkAtInit.includes(module)).length,
      onFirstUseIn: bundles.filter((b) => b.sdkOnFirstUse.includes(module)).length,
    });
    log(`control-plane: ${loadedWith} ${module} median ${medianMs.toFixed(0)} ms`);
  }
  return figures.sort((a, b) => b.medianMs - a.medianMs);
}

/** The child: imports the planner bundle, solves one plan cold, prints the solve's milliseconds and the RSS after. */
const PLAN_SOLVE_CHILD = `
const { spotPlanFor, FLEET_SPOT_MODEL } = await import(process.argv[1]);
const [timeLeftSeconds, workLeftSeconds, stepSeconds, restartOverheadSeconds, spotPriceRatio, riskAversion] = process.argv.slice(2).map(Number);
const started = performance.now();
spotPlanFor(
  { timeLeftSeconds, workLeftSeconds, held: 'none', spotAvailable: true, stateAgeSeconds: 0 },
  { stepSeconds, restartOverheadSeconds, spotPriceRatio, model: FLEET_SPOT_MODEL, riskAversion },
);
const solveMs = performance.now() - started;
process.stdout.write(JSON.stringify({ solveMs, rssBytes: process.memoryUsage().rss }));
`;

/** Memory and timeout of each Lambda that solves plans, as the stacks deploy them (lib/function.ts, lib/lifecycle). */
export function planningLambdas(): Array<{ handler: string; memoryMiB: number; timeoutSeconds: number }> {
  return PLANNING_HANDLERS.map((handler) => ({
    handler,
    memoryMiB: memoryForEntry(join('lambdas', handler, 'handler.ts'), benchConfig().limits.maxBundleMiB),
    timeoutSeconds: handler === 'budget-watch' ? BUDGET_WATCH_TIMEOUT.toSeconds() : DEFAULT_TIMEOUT_SECONDS,
  }));
}

/** A measured median scaled to a Lambda's CPU share (one vCPU at LAMBDA_MIB_PER_VCPU, proportionally less below). */
export function lambdaEstimateMs(measuredMs: number, memoryMiB: number): number {
  return measuredMs * Math.max(1, LAMBDA_MIB_PER_VCPU / memoryMiB);
}

/**
 * The plans the bench solves: the spot sweep's largest job, and the largest plan the policy solves at all (a 48 h
 * job as far from its deadline as MAX_PLAN_GRID_POINTS allows; beyond it the reserve rules decide).
 */
export function planSolveCases(
  stepSeconds: number,
): Array<{ label: string; timeLeftSeconds: number; workLeftSeconds: number }> {
  const workLeftSeconds = 48 * 3600;
  let capSteps = Math.floor((92 * 3600) / stepSeconds);
  while (planGridPoints((capSteps + 1) * stepSeconds, workLeftSeconds, stepSeconds) <= MAX_PLAN_GRID_POINTS) capSteps++;
  return [
    { label: 'spot sweep’s largest job', timeLeftSeconds: 92 * 3600, workLeftSeconds },
    { label: 'largest plan solved (MAX_PLAN_GRID_POINTS)', timeLeftSeconds: capSteps * stepSeconds, workLeftSeconds },
  ];
}

/**
 * Bundles `exports` (names by module path from the repository root) as the Lambdas are bundled, default config
 * defined in, into BUILD_DIR/<name>.mjs; resolves its path.
 */
async function bundleExports(name: string, exports: Record<string, readonly string[]>): Promise<string> {
  mkdirSync(BUILD_DIR, { recursive: true });
  const entry = join(BUILD_DIR, `${name}-entry.ts`);
  writeFileSync(
    entry,
    Object.entries(exports)
      .map(([module, names]) => `export { ${names.join(', ')} } from ${JSON.stringify(join(ROOT, module))};\n`)
      .join(''),
  );
  const outfile = join(BUILD_DIR, `${name}.mjs`);
  await bundleLambda(entry, outfile, parseConfig({}, 'defaults'));
  return outfile;
}

/**
 * Cold plan solves: the planner bundled exactly as the Lambdas bundle it (bundleLambda), each solve in a fresh process (runs sequential),
 * at the deployed check interval, restart overhead and risk aversion and the sweep's p3.2xlarge price ratio (solve time
 * does not depend on the ratio or the overhead).
 */
async function measurePlanSolves(runs: number, log: (line: string) => void): Promise<PlanSolveFigure[]> {
  const outfile = await bundleExports('spot-planner', {
    'lambdas/domain/spot-planner.ts': ['spotPlanFor'],
    'lambdas/domain/spot-fleet-model.ts': ['FLEET_SPOT_MODEL'],
  });
  const { checkIntervalSeconds, restartOverheadSeconds } = DEFAULT_PLACEMENT_CONFIG;
  const figures: PlanSolveFigure[] = [];
  for (const c of planSolveCases(checkIntervalSeconds)) {
    const samples: Array<{ solveMs: number; rssBytes: number }> = [];
    const ratio = P3_PRICES.spot / P3_PRICES.onDemand;
    const args = [
      c.timeLeftSeconds,
      c.workLeftSeconds,
      checkIntervalSeconds,
      restartOverheadSeconds,
      ratio,
      SPOT_PLAN_RISK_AVERSION,
    ];
    for (let i = 0; i < runs; i++)
      samples.push(
        await runChild(PLAN_SOLVE_CHILD, [pathToFileURL(outfile).href, ...args.map(String)], {}, 'plan solve'),
      );
    const medianMs = median(samples.map((s) => s.solveMs));
    figures.push({
      label: c.label,
      timeLeftHours: c.timeLeftSeconds / 3600,
      workLeftHours: c.workLeftSeconds / 3600,
      gridPoints: planGridPoints(c.timeLeftSeconds, c.workLeftSeconds, checkIntervalSeconds),
      runs,
      medianMs,
      maxMs: Math.max(...samples.map((s) => s.solveMs)),
      rssMiB: median(samples.map((s) => s.rssBytes / (KIB * KIB))),
      lambdas: planningLambdas().map((l) => {
        const estimatedMs = lambdaEstimateMs(medianMs, l.memoryMiB);
        return {
          ...l,
          estimatedMs,
          withinGoal: estimatedMs <= l.timeoutSeconds * 1000 * CONTROL_PLANE_GOALS.planSolveTimeoutShare,
        };
      }),
    });
    log(`control-plane: cold plan solve, ${c.label}: median ${medianMs.toFixed(0)} ms over ${runs}`);
  }
  return figures;
}

/**
 * The child: runs the lifecycle's real Analyze step (argv: the bundled module's URL, the archive's path, its size and
 * sha256) with the workspace read from disk as S3 would hand it over, and prints the process's peak resident set.
 */
const BUNDLE_MEMORY_CHILD = `
const { readFileSync } = await import('node:fs');
const [url, path, bytes, sha256] = process.argv.slice(1);
const { createAnalyzeHandler, parseConfig } = await import(url);
const job = {
  jobId: 'job-1', team: 'research', state: 'SUBMITTED', command: ['python', 'train.py'], requirements: {},
  bundle: { key: 'teams/research/jobs/job-1/code.tar.gz', bytes: Number(bytes), sha256 },
};
let patched = false;
const plane = {
  config: parseConfig({}, 'defaults'),
  clock: () => new Date(),
  jobs: { requireJob: async () => job, transition: async () => job, patchJob: async () => { patched = true; return job; } },
  workspace: { getAtMost: async () => readFileSync(path) },
  spotQuotes: { quotesFor: async () => [] },
};
await createAnalyzeHandler(plane)({ jobId: 'job-1' });
if (!patched) throw new Error('Analyze did not estimate the job');
const peak = /VmHWM:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
process.stdout.write(JSON.stringify({ peakBytes: Number(peak[1]) * 1024 }));
`;

/**
 * Peak memory of the Analyze step on the two largest kinds of bundle the default limits let through: one that unpacks
 * to MAX_UNPACKED_BYTES from next to nothing, and one of limits.maxBundleMiB that does not compress. The API reads
 * and unpacks the same bundle the same way (lambdas/api/bundle.ts) and is sized alike.
 */
async function measureBundleMemory(log: (line: string) => void): Promise<BundleMemoryFigure[]> {
  const MiB = KIB * KIB;
  const defaults = parseConfig({}, 'defaults');
  const functionMiB = memoryForEntry(join('lambdas', 'analyze', 'handler.ts'), defaults.limits.maxBundleMiB);
  const outfile = await bundleExports('analyze', {
    'lambdas/lifecycle/analyze.ts': ['createAnalyzeHandler'],
    'lib/config.ts': ['parseConfig'],
  });
  const script = Buffer.from('import torch\nmax_iters = 100\nfor step in range(max_iters):\n    pass\n');
  // A tar holds each file's 512-byte header and rounds it to 512 bytes, and ends with two empty blocks.
  const cases = [
    { label: 'unpacks to the 1 GiB limit from next to nothing', data: () => Buffer.alloc(MAX_UNPACKED_BYTES - MiB) },
    {
      label: `does not compress: the ${defaults.limits.maxBundleMiB} MiB limit on the archive`,
      data: () => randomBytes(defaults.limits.maxBundleMiB * MiB - MiB),
    },
  ];
  const directory = mkdtempSync(join(tmpdir(), 'trainyard-bench-bundle-'));
  const figures: BundleMemoryFigure[] = [];
  try {
    for (const c of cases) {
      const data = c.data();
      const archive = packTarGz([
        { path: 'train.py', content: script },
        { path: 'data/train.bin', content: data },
      ]);
      const path = join(directory, 'code.tar.gz');
      writeFileSync(path, archive);
      const { peakBytes } = await runChild<{ peakBytes: number }>(
        BUNDLE_MEMORY_CHILD,
        [pathToFileURL(outfile).href, path, String(archive.length), sha256Hex(archive)],
        {},
        `Analyze on a bundle that ${c.label}`,
      );
      const peakMiB = peakBytes / MiB;
      figures.push({
        label: c.label,
        archiveMiB: archive.length / MiB,
        unpackedMiB: (data.length + script.length) / MiB,
        peakMiB,
        functionMiB,
        withinGoal: peakMiB <= functionMiB,
      });
      log(`control-plane: Analyze on a bundle that ${c.label}: peak ${peakMiB.toFixed(0)} MiB of ${functionMiB}`);
    }
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
  return figures;
}

const PRINCIPAL = 'arn:aws:iam::123456789012:role/bench-researchers';

/** One team with a budget no benchmark run can exhaust (every submission reserves its estimate). */
export function benchConfig(): TrainyardConfig {
  return parseConfig(
    { teams: [{ id: 'bench', principals: [PRINCIPAL], monthlyBudgetUsd: 10_000_000 }] },
    'control-plane bench config',
  );
}

/** An API Gateway HTTP API payload 2.0 event with an IAM authorizer, as test/lambdas/api/support.ts builds them. */
export function apiGatewayEvent(method: string, path: string, body?: unknown): ApiEvent {
  const now = Date.now();
  return {
    version: '2.0',
    routeKey: `${method} ${path}`,
    rawPath: path,
    rawQueryString: '',
    headers: { 'content-type': 'application/json', host: 'bench.execute-api.us-east-1.amazonaws.com' },
    requestContext: {
      accountId: '123456789012',
      apiId: 'bench',
      domainName: 'bench.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'bench',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.1', userAgent: 'trainyard-bench' },
      requestId: `req-${now}`,
      routeKey: `${method} ${path}`,
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
      authorizer: {
        iam: {
          accessKey: 'ASIAEXAMPLE',
          accountId: '123456789012',
          callerId: 'AROAEXAMPLE:bench',
          cognitoIdentity: null,
          principalOrgId: null,
          userArn: PRINCIPAL,
          userId: 'AROAEXAMPLE:bench',
        },
      },
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
    isBase64Encoded: false,
    // AWS sends null for cognitoIdentity and principalOrgId outside those features; the types say string.
  } as unknown as ApiEvent;
}

/** The example project the API is asked about: examples/hello-cpu, as files and as a tar.gz bundle. */
function exampleProject(): { files: Record<string, string>; bundle: string } {
  const root = join(ROOT, 'examples', 'hello-cpu');
  const entries = readdirSync(root).filter((name) => statSync(join(root, name)).isFile());
  const files = Object.fromEntries(entries.map((name) => [name, readFileSync(join(root, name), 'utf8')]));
  const bundle = packTarGz(entries.map((path) => ({ path, content: readFileSync(join(root, path)) })));
  return { files, bundle: bundle.toString('base64') };
}

/** Fleet facts for the local runs: every instance is a spot g4dn.xlarge at $0.20/h. */
const FLEET: FleetFacts = {
  async instanceFor(arn) {
    return {
      instanceId: arn.split('/').at(-1) ?? 'i-0bench',
      instanceType: 'g4dn.xlarge',
      availabilityZone: 'us-east-1a',
      lifecycle: 'spot',
    };
  },
  async spotPriceAt() {
    return 0.2;
  },
};

/** Engines and the plane parts both measurements share. */
interface Engines {
  readonly dynamo: RunningEngine;
  readonly s3: RunningEngine;
  readonly directory: string;
}

function planeOver(engines: Engines, config: TrainyardConfig, lifecycle: () => LifecycleControl): ControlPlane {
  return localControlPlane({
    config,
    dynamoEndpoint: engines.dynamo.endpoint,
    s3Endpoint: engines.s3.endpoint,
    batch: { terminateJob: async () => undefined },
    events: { publish: async () => undefined },
    metrics: { publish: async () => undefined },
    lifecycle,
    logs: { readLines: async () => ({ lines: [], atEnd: true }) },
    fleet: FLEET,
  });
}

type Handler = (event: ApiEvent) => Promise<APIGatewayProxyStructuredResultV2>;

async function timedCall(
  handler: Handler,
  event: ApiEvent,
  expectStatus: number,
): Promise<{ ms: number; body: Record<string, unknown> }> {
  const started = performance.now();
  const response = await handler(event);
  const ms = performance.now() - started;
  if (response.statusCode !== expectStatus) {
    throw new BenchMeasurementFailed(
      `${event.routeKey} answered ${response.statusCode}, expected ${expectStatus}: ${response.body ?? ''}`,
    );
  }
  return { ms, body: JSON.parse(response.body ?? '{}') as Record<string, unknown> };
}

function latencyFigure(route: string, samples: readonly number[]): LatencyFigure {
  const p99Ms = percentile(samples, 99);
  return {
    route,
    calls: samples.length,
    p50Ms: median(samples),
    p99Ms,
    meanMs: samples.reduce((s, v) => s + v, 0) / samples.length,
    withinGoal: p99Ms <= CONTROL_PLANE_GOALS.warmP99Ms,
  };
}

async function measureWarmLatency(
  engines: Engines,
  config: TrainyardConfig,
  calls: number,
  log: (line: string) => void,
): Promise<LatencyFigure[]> {
  // The lifecycle port records StartExecution so no execution runs: only the API handler's own work is timed.
  const started = new Set<string>();
  const recorder: LifecycleControl = {
    async startExecution(name) {
      const alreadyStarted = started.has(name);
      started.add(name);
      return { alreadyStarted };
    },
    async sendTaskSuccess() {},
  };
  const handler = createApiHandler(planeOver(engines, config, () => recorder));
  const project = exampleProject();
  const command = ['python', 'train.py', '--max_iters=500'];
  const estimate = () => apiGatewayEvent('POST', '/estimate', { files: project.files, command });
  const submit = () => apiGatewayEvent('POST', '/jobs', { bundle: project.bundle, command });
  const warmup = Math.min(20, calls);
  const jobIds: string[] = [];
  const run = async (
    event: () => ApiEvent,
    status: number,
    count: number,
    onBody?: (b: Record<string, unknown>) => void,
  ) => {
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const { ms, body } = await timedCall(handler, event(), status);
      samples.push(ms);
      onBody?.(body);
    }
    return samples;
  };
  const collectJob = (body: Record<string, unknown>) => {
    const jobId = (body.job as { jobId?: unknown } | undefined)?.jobId;
    if (typeof jobId !== 'string')
      throw new BenchMeasurementFailed(`POST /jobs returned no job id: ${JSON.stringify(body)}`);
    jobIds.push(jobId);
  };
  // Warm-up calls (not timed) load code paths and connections, as a warm Lambda has.
  await run(estimate, 200, warmup);
  await run(submit, 202, warmup, collectJob);
  const figures: LatencyFigure[] = [];
  figures.push(latencyFigure('POST /estimate', await run(estimate, 200, calls)));
  log(`control-plane: POST /estimate ×${calls} done`);
  figures.push(latencyFigure('POST /jobs', await run(submit, 202, calls, collectJob)));
  log(`control-plane: POST /jobs ×${calls} done`);
  let next = 0;
  const getJob = () => apiGatewayEvent('GET', `/jobs/${jobIds[next++ % jobIds.length] ?? ''}`);
  await run(getJob, 200, warmup);
  figures.push(latencyFigure('GET /jobs/{id}', await run(getJob, 200, calls)));
  log(`control-plane: GET /jobs/{id} ×${calls} done`);
  return figures;
}

/** Batch for the happy path: every attempt SUCCEEDS at once, answered in Step Functions' PascalCase job shape. */
class SucceedingBatch implements LocalBatch {
  private sequence = 0;

  async runJob(input: SubmitJobInput): Promise<Record<string, unknown>> {
    this.sequence += 1;
    const batchJobId = `00000000-0000-4000-8000-${String(this.sequence).padStart(12, '0')}`;
    const startedAt = Date.now();
    const container = {
      ContainerInstanceArn: `arn:aws:ecs:us-east-1:123456789012:container-instance/trainyard/i-0bench${this.sequence}`,
      TaskArn: `arn:aws:ecs:us-east-1:123456789012:task/trainyard/${batchJobId}`,
      LogStreamName: `trainyard/default/${batchJobId.slice(0, 8)}`,
      ExitCode: 0,
    };
    return {
      JobArn: `arn:aws:batch:us-east-1:123456789012:job/${batchJobId}`,
      JobName: input.JobName,
      JobId: batchJobId,
      JobQueue: `arn:aws:batch:us-east-1:123456789012:job-queue/${input.JobQueue}`,
      JobDefinition: `arn:aws:batch:us-east-1:123456789012:job-definition/${input.JobDefinition}:1`,
      Status: 'SUCCEEDED',
      StatusReason: 'Essential container in task exited',
      CreatedAt: startedAt,
      StartedAt: startedAt,
      StoppedAt: startedAt + 1000,
      Container: container,
      Attempts: [
        {
          Container: container,
          StartedAt: startedAt,
          StoppedAt: startedAt + 1000,
          StatusReason: 'Essential container in task exited',
        },
      ],
      Tags: input.Tags ?? {},
    };
  }
}

async function measureTransitions(engines: Engines, config: TrainyardConfig): Promise<TransitionFigure> {
  let machine: LocalStateMachine | undefined;
  const plane = planeOver(engines, config, () => {
    if (!machine) throw new BenchMeasurementFailed('state machine not built before the first submission');
    return machine;
  });
  const events: ExecutionEvent[] = [];
  machine = new LocalStateMachine({
    definition: synthesizeJobStateMachineDefinition(),
    steps: lifecycleSteps(plane),
    batch: new SucceedingBatch(),
    backoffWaitMs: 0,
    retryIntervalMs: 0,
    onEvent: (_name, event) => events.push(event),
  });
  const project = exampleProject();
  const handler = createApiHandler(plane);
  const { body } = await timedCall(
    handler,
    apiGatewayEvent('POST', '/jobs', { bundle: project.bundle, command: ['python', 'train.py'] }),
    202,
  );
  const jobId = (body.job as { jobId?: unknown } | undefined)?.jobId;
  if (typeof jobId !== 'string')
    throw new BenchMeasurementFailed(`POST /jobs returned no job id: ${JSON.stringify(body)}`);
  const execution = await machine.waitFor(jobId);
  const job = await plane.jobs.requireJob(jobId);
  if (execution.status !== 'SUCCEEDED' || job.state !== 'SUCCEEDED') {
    throw new BenchMeasurementFailed(
      `happy-path job ${jobId} ended ${execution.status}/${job.state}: ${execution.error ?? job.reason ?? 'no reason'}`,
    );
  }
  const entered = execution.events.filter((e) => e.type === 'StateEntered');
  return {
    stateEntered: entered.length,
    states: entered.map((e) => e.state?.name ?? '?'),
    jobState: job.state,
    withinGoal: entered.length <= CONTROL_PLANE_GOALS.stateTransitions,
  };
}

/**
 * budget-watch's read of the running, waiting and paused jobs (JobStore.listJobsInStates, as each tick makes it),
 * through the byState index and the way it read them before it (each team's history through byTeam, the states
 * filtered by DynamoDB), over the same records in two tables: `finished` finished jobs and `live` live ones, spread
 * over four teams, each a copy of a job the API submitted. What each read costs is counted from the items DynamoDB
 * reads (ScannedCount), which is what it bills.
 */
async function measureLiveJobsRead(
  engines: Engines,
  config: TrainyardConfig,
  options: { finished: number; live: number; runs: number; log: (line: string) => void },
): Promise<LiveJobsReadFigure> {
  const doc = createDocumentClient({ endpoint: engines.dynamo.endpoint });
  try {
    const team = config.teams[0]?.id ?? 'bench';
    const template = (await new JobStore(doc, LOCAL_NAMES.jobsTable).listJobsByTeam(team, { limit: 1 })).jobs[0];
    if (!template) throw new BenchMeasurementFailed('live-jobs read: the API submitted no job to copy');
    const teams = ['t0', 't1', 't2', 't3'];
    const liveStates: JobState[] = ['RUNNING', 'WAITING', 'PAUSED_BUDGET'];
    const total = options.finished + options.live;
    // The live jobs spread through the history, as long-running jobs are among the finished ones.
    const liveEvery = Math.floor(total / options.live);
    const items = Array.from({ length: total }, (_, i) => {
      const live = i % liveEvery === 0 && i / liveEvery < options.live;
      const record: JobRecord = {
        ...template,
        jobId: `live-bench-${String(i).padStart(6, '0')}`,
        team: teams[i % teams.length] as string,
        state: live ? (liveStates[(i / liveEvery) % liveStates.length] as JobState) : 'SUCCEEDED',
        createdAt: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
      };
      return jobItem(record);
    });
    const tables = {
      byState: 'live-bench-jobs',
      byTeam: 'live-bench-jobs-without-by-state',
    } as const;
    await doc.request('CreateTable', createTableRequest(tables.byState, JOBS_TABLE));
    await doc.request(
      'CreateTable',
      createTableRequest(tables.byTeam, {
        ...JOBS_TABLE,
        indexes: JOBS_TABLE.indexes.filter((index) => index.name !== JOBS_INDEXES.byState.name),
      }),
    );
    for (const table of Object.values(tables)) {
      for (let i = 0; i < items.length; i += 25) {
        const batch = items.slice(i, i + 25).map((item) => ({ PutRequest: { Item: marshallItem(item) } }));
        let unprocessed: Record<string, unknown[]> | undefined = { [table]: batch };
        while (unprocessed && Object.keys(unprocessed).length > 0) {
          const out: { UnprocessedItems?: Record<string, unknown[]> } = await doc.request('BatchWriteItem', {
            RequestItems: unprocessed,
          });
          unprocessed = out.UnprocessedItems;
        }
      }
      options.log(`control-plane: live-jobs read: ${items.length} jobs written to ${table}`);
    }
    const itemBytes = dynamoItemBytes(items[1] as Record<string, unknown>);
    const listedTeam = teams[0] as string;
    // The listed team's live jobs, newest first (their ids sort as they were created).
    const teamLive = items
      .filter((item) => item.team === listedTeam && item.state !== 'SUCCEEDED')
      .map((item) => item.jobId)
      .reverse();
    const paths: LiveJobsReadPath[] = [];
    let expected: string | undefined;
    for (const [path, table] of Object.entries(tables) as Array<[LiveJobsReadPath['path'], string]>) {
      let scanned = 0;
      const counting: DocumentClient = {
        ...doc,
        query: async (input) => {
          const out = await doc.query(input);
          scanned += out.ScannedCount;
          return out;
        },
      };
      const store = new JobStore(counting, table);
      /** Times `read` over the runs (each checked), with the items DynamoDB read in the last: the same every run. */
      const timed = async <T>(read: () => Promise<T>, check: (result: T) => void) => {
        const samples: number[] = [];
        let result: T | undefined;
        for (let run = 0; run < options.runs; run++) {
          scanned = 0;
          const started = performance.now();
          result = await read();
          samples.push(performance.now() - started);
          check(result);
        }
        const itemsRead = scanned;
        return {
          itemsRead,
          readUnits: Math.ceil((itemsRead * itemBytes) / 4096) / 2,
          medianMs: median(samples),
          result: result as T,
        };
      };
      const tick = await timed(
        () => store.listJobsInStates(teams, liveStates),
        (jobs) => {
          const ids = jobs.map((j) => j.jobId).join(',');
          if (jobs.length !== options.live || (expected !== undefined && ids !== expected)) {
            throw new BenchMeasurementFailed(
              `live-jobs read through ${path} found ${jobs.length} jobs, expected the ${options.live} live ones`,
            );
          }
          expected = ids;
        },
      );
      // The team's own listing of what is under way, as the API pages it, every cursor followed.
      const listing = await timed(
        async () => {
          const found: string[] = [];
          let cursor: string | undefined;
          let pages = 0;
          do {
            const page = await store.listJobsByTeam(listedTeam, { states: liveStates, limit: 20, cursor });
            found.push(...page.jobs.map((j) => j.jobId));
            cursor = page.nextCursor;
            pages++;
          } while (cursor);
          return { found, pages };
        },
        ({ found }) => {
          if (found.join(',') !== teamLive.join(',')) {
            throw new BenchMeasurementFailed(
              `GET /jobs through ${path} listed ${found.length} jobs, expected ${listedTeam}'s ${teamLive.length} live ones`,
            );
          }
        },
      );
      const { itemsRead, readUnits, medianMs } = tick;
      const { pages } = listing.result;
      paths.push({
        path,
        itemsRead,
        readUnits,
        runs: options.runs,
        medianMs,
        teamListing: { itemsRead: listing.itemsRead, readUnits: listing.readUnits, pages, medianMs: listing.medianMs },
      });
      options.log(
        `control-plane: live-jobs read through ${path}: ${itemsRead} items, ${medianMs.toFixed(1)} ms; ` +
          `${listedTeam}'s listing: ${listing.itemsRead} items in ${pages} pages, ${listing.medianMs.toFixed(1)} ms`,
      );
    }
    return {
      teams: teams.length,
      finishedJobs: options.finished,
      liveJobs: options.live,
      teamLiveJobs: teamLive.length,
      itemBytes,
      paths,
    };
  } finally {
    doc.destroy();
  }
}

/** About an item's size as DynamoDB counts it: each attribute's name and value (strings in UTF-8, numbers by digits). */
function dynamoItemBytes(item: unknown): number {
  if (typeof item === 'string') return Buffer.byteLength(item);
  if (typeof item === 'number') return Math.ceil(String(item).length / 2) + 1;
  if (typeof item === 'boolean' || item === null || item === undefined) return 1;
  if (Array.isArray(item)) return 3 + item.reduce((sum: number, v) => sum + 1 + dynamoItemBytes(v), 0);
  return (
    3 +
    Object.entries(item as Record<string, unknown>).reduce(
      (sum, [name, value]) => sum + Buffer.byteLength(name) + 1 + dynamoItemBytes(value),
      0,
    )
  );
}

/** Runs part 2: bundles, cold starts, warm API latency, state transitions. */
export async function runControlPlaneBench(options: {
  quick: boolean;
  log: (line: string) => void;
}): Promise<ControlPlaneBenchResult> {
  const started = performance.now();
  const { figures: bundles, files } = await measureBundles(parseConfig({}, 'defaults'), options.log);
  const defaults = parseConfig({}, 'defaults');
  const coldStarts = await measureColdStarts(files, options.quick ? 5 : 20, defaults, options.log);
  const sdkImports = await measureSdkImports(bundles, options.quick ? 3 : 9, options.log);
  const planSolves = await measurePlanSolves(options.quick ? 3 : 9, options.log);
  const bundleMemory = options.quick ? [] : await measureBundleMemory(options.log);
  const directory = mkdtempSync(join(tmpdir(), 'trainyard-bench-cp-'));
  // A request log line per call would bury the progress lines; its cost (microseconds) is far below what is timed.
  const logLevel = logger.getLevelName();
  logger.setLogLevel('SILENT');
  const engines: Engines = {
    dynamo: await startDynalite(),
    s3: await startS3rver({ directory, buckets: [LOCAL_NAMES.bucket] }),
    directory,
  };
  try {
    await ensureLocalTables(engines.dynamo.endpoint);
    const config = benchConfig();
    const latency = await measureWarmLatency(engines, config, options.quick ? 200 : 1000, options.log);
    const transitions = await measureTransitions(engines, config);
    options.log(`control-plane: happy path entered ${transitions.stateEntered} states`);
    const liveJobsRead = await measureLiveJobsRead(engines, config, {
      finished: options.quick ? 2_000 : 20_000,
      live: 20,
      runs: options.quick ? 3 : 9,
      log: options.log,
    });
    return {
      name: 'control-plane',
      quick: options.quick,
      goals: CONTROL_PLANE_GOALS,
      bundles,
      coldStarts,
      sdkImports,
      latency,
      transitions,
      planSolves,
      liveJobsRead,
      bundleMemory,
      elapsedSeconds: (performance.now() - started) / 1000,
    };
  } finally {
    logger.setLogLevel(logLevel);
    await engines.s3.stop();
    await engines.dynamo.stop();
    rmSync(directory, { recursive: true, force: true });
  }
}

const yesNo = (ok: boolean): string => (ok ? 'yes' : 'no');
const fmtShare = (share: number): string =>
  Math.abs(share - 1 / 3) < 1e-9 ? 'a third' : `${(share * 100).toFixed(0)} %`;

/** Markdown tables of a result. */
export function controlPlaneTables(result: ControlPlaneBenchResult): string {
  const g = result.goals;
  const cold = new Map(result.coldStarts.map((c) => [c.handler, c]));
  const lines = [
    `Bundles: esbuild as lib/function.ts (ESM, node22, minified, \`@aws-sdk/*\` external, default config defined in); ` +
      `cold start = fresh \`node\` process start → handler export ready, median of ${result.coldStarts[0]?.runs ?? 0} ` +
      '(the bundles taken in turn, round after round). ' +
      '`@aws-sdk/` packages: _at init_ = static `import` or module-level `require`, loaded before the handler is ready ' +
      '(inside the cold start); ' +
      '_on first use_ = only `import()`ed, loaded when a code path needs one (outside the cold start; the shared ' +
      'wiring reaches every port, so a handler may never load some of them).',
    '',
    `| Lambda | bundle KiB | ≤ ${g.bundleKiB} | largest inputs (KiB) | cold start median | import only | ≤ ${g.coldStartMs} ms | SDK at init | SDK on first use |`,
    '|---|---|---|---|---|---|---|---|---|',
  ];
  const sdkList = (packages: readonly string[]): string =>
    packages.map((p) => p.replace(/^@aws-sdk\//, '')).join(', ') || 'none';
  for (const b of result.bundles) {
    const c = cold.get(b.handler);
    const top = b.top
      .slice(0, 3)
      .map((t) => `${t.module} ${(t.bytes / KIB).toFixed(0)}`)
      .join(', ');
    lines.push(
      `| ${b.handler} | ${b.kib.toFixed(1)} | ${yesNo(b.withinGoal)} | ${top} | ${c ? `${c.medianMs.toFixed(0)} ms` : '–'} | ` +
        `${c ? `${c.medianImportMs.toFixed(0)} ms` : '–'} | ${c ? yesNo(c.withinGoal) : '–'} | ` +
        `${sdkList(b.sdkAtInit)} | ${sdkList(b.sdkOnFirstUse)} |`,
    );
  }
  const missingLiteral = result.bundles.filter((b) => !b.configLiteralInBundle).map((b) => b.handler);
  const failedStart = result.coldStarts.filter((c) => !c.startsWithoutConfigVariable).map((c) => c.handler);
  if (missingLiteral.length > 0 || failedStart.length > 0) {
    lines.push(
      '',
      `**Config not baked in:** the default config's JSON is absent from ${missingLiteral.length}/${result.bundles.length} ` +
        'bundles — the `define` of `process.env.TRAINYARD_CONFIG` has no `process.env.TRAINYARD_CONFIG` expression to ' +
        'replace (the config is read through `process.env[name]`). ' +
        (failedStart.length > 0
          ? `${failedStart.join(', ')} failed at cold start without the variable (MissingEnvironment TRAINYARD_CONFIG); the others read it on first use. `
          : '') +
        'The cold-start runs set the variable to the default config.',
    );
  }
  if (result.sdkImports.length > 0) {
    lines.push(
      '',
      'External AWS SDK packages the bundles use, what each costs a fresh process to load on its own, the way the ' +
        'bundles load it (median; packages share dependencies, so costs overlap), and how many bundles load it at ' +
        'init or only on first use:',
      '',
      '| package | loaded with | load | at init | on first use |',
      '|---|---|---|---|---|',
    );
    const of = `/${result.bundles.length}`;
    for (const sdk of result.sdkImports) {
      const how = sdk.loadedWith === 'require' ? '`require`' : '`import()`';
      lines.push(
        `| ${sdk.module} | ${how} | ${sdk.medianMs.toFixed(0)} ms | ${sdk.atInitIn}${of} | ${sdk.onFirstUseIn}${of} |`,
      );
    }
  }
  lines.push(
    '',
    `Warm API handler against dynalite + s3rver (createApiHandler, API Gateway v2 events, ${result.latency[0]?.calls ?? 0} calls each):`,
    '',
    `| route | calls | p50 | p99 | mean | p99 ≤ ${g.warmP99Ms} ms |`,
    '|---|---|---|---|---|---|',
  );
  for (const l of result.latency) {
    lines.push(
      `| ${l.route} | ${l.calls} | ${l.p50Ms.toFixed(1)} ms | ${l.p99Ms.toFixed(1)} ms | ${l.meanMs.toFixed(1)} ms | ${yesNo(l.withinGoal)} |`,
    );
  }
  if (result.planSolves.length > 0) {
    const lambdas = result.planSolves[0]?.lambdas ?? [];
    lines.push(
      '',
      `Cold spot-plan solves (spot-planner.ts with the fleet model, bundled as the Lambdas bundle it; the first solve in ` +
        `a fresh process, median of ${result.planSolves[0]?.runs ?? 0} on one core here). In a Lambda = median × ` +
        `${LAMBDA_MIB_PER_VCPU} ÷ its memory (Lambda's CPU share, at most one vCPU); goal: within ` +
        `${fmtShare(g.planSolveTimeoutShare)} of its timeout.`,
      '',
      `| plan | to deadline / work | grid points | median | max | RSS | ${lambdas.map((l) => `${l.handler} (${l.memoryMiB} MiB, ${l.timeoutSeconds} s)`).join(' | ')} |`,
      `|---|---|---|---|---|---|${lambdas.map(() => '---|').join('')}`,
    );
    for (const p of result.planSolves) {
      lines.push(
        `| ${p.label} | ${Number(p.timeLeftHours.toFixed(1))} h / ${Number(p.workLeftHours.toFixed(1))} h | ${p.gridPoints.toLocaleString('en-US')} | ` +
          `${p.medianMs.toFixed(0)} ms | ${p.maxMs.toFixed(0)} ms | ${p.rssMiB.toFixed(0)} MiB | ` +
          `${p.lambdas.map((l) => `${(l.estimatedMs / 1000).toFixed(1)} s (${yesNo(l.withinGoal)})`).join(' | ')} |`,
      );
    }
  }
  if (result.bundleMemory.length > 0) {
    lines.push(
      '',
      'Peak memory of the lifecycle’s Analyze step (its real handler, bundled as the Lambdas are, in a fresh Node ' +
        'process; the bundle read from disk as S3 hands it over) on the largest bundles the default limits take; the ' +
        'API reads and unpacks a bundle the same way and is deployed with the same memory. Goal: the function’s memory.',
      '',
      '| bundle | archive | unpacked | peak resident | function memory | within |',
      '|---|---|---|---|---|---|',
    );
    for (const m of result.bundleMemory) {
      lines.push(
        `| ${m.label} | ${m.archiveMiB.toFixed(1)} MiB | ${m.unpackedMiB.toFixed(0)} MiB | ${m.peakMiB.toFixed(0)} MiB | ` +
          `${m.functionMiB} MiB | ${yesNo(m.withinGoal)} |`,
      );
    }
  }
  const t = result.transitions;
  lines.push(
    '',
    `State transitions of a happy-path job (synthesized state machine, local runner): **${t.stateEntered}** StateEntered ` +
      `(goal ≤ ${g.stateTransitions}: ${yesNo(t.withinGoal)}); job ended ${t.jobState}; ${t.states.join(' → ')}.`,
  );
  const r = result.liveJobsRead;
  lines.push(
    '',
    `budget-watch's read of the live jobs each tick (JobStore.listJobsInStates over ${r.teams} teams: ` +
      `${r.finishedJobs.toLocaleString('en-US')} finished jobs and ${r.liveJobs} running, waiting or paused; ` +
      `items of ${r.itemBytes.toLocaleString('en-US')} bytes; read units as DynamoDB bills them, a month = 8,640 ticks ` +
      `at $${DYNAMODB_USD_PER_MILLION_READ_UNITS} per million):`,
    '',
    '| read | items read a tick | read units a tick | a month | median |',
    '|---|---|---|---|---|',
  );
  for (const path of r.paths) {
    const name = path.path === 'byState' ? 'byState, a Query per live state' : 'byTeam, each team’s history (before)';
    const monthly = (path.readUnits * TICKS_A_MONTH * DYNAMODB_USD_PER_MILLION_READ_UNITS) / 1e6;
    lines.push(
      `| ${name} | ${path.itemsRead.toLocaleString('en-US')} | ${path.readUnits.toLocaleString('en-US')} | ` +
        `$${monthly.toFixed(2)} | ${path.medianMs.toFixed(1)} ms |`,
    );
  }
  lines.push(
    '',
    `A team's jobs under way as \`GET /jobs?state=RUNNING,WAITING,PAUSED_BUDGET&limit=20\` lists them, every ` +
      `cursor followed (one team of the ${r.teams}: ${r.teamLiveJobs} live jobs among its ` +
      `${Math.round((r.finishedJobs + r.liveJobs) / r.teams).toLocaleString('en-US')}; a page reads at most ` +
      `${MAX_JOBS_READ_PER_PAGE.toLocaleString('en-US')} jobs):`,
    '',
    '| read | items read | read units | pages | median, all pages |',
    '|---|---|---|---|---|',
  );
  for (const path of r.paths) {
    const name =
      path.path === 'byState' ? 'byState, the states’ partitions merged' : 'byTeam, the team’s history (before)';
    const l = path.teamListing;
    lines.push(
      `| ${name} | ${l.itemsRead.toLocaleString('en-US')} | ${l.readUnits.toLocaleString('en-US')} | ${l.pages} | ` +
        `${l.medianMs.toFixed(1)} ms |`,
    );
  }
  return lines.join('\n');
}

/** budget-watch runs every 5 minutes: ticks in a 30-day month. */
const TICKS_A_MONTH = 8_640;
/** DynamoDB on-demand read request units, us-east-1 (the README's Costs section). */
const DYNAMODB_USD_PER_MILLION_READ_UNITS = 0.125;

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  runControlPlaneBench({ quick, log: (line) => console.error(line) })
    .then((result) => {
      console.log(controlPlaneTables(result));
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
