/**
 * Part 3 of `npm run bench`: platform overhead. The same example job (examples/hello-cpu, paced by --step_delay so it
 * lasts a fixed time) is run directly with the harness's interpreter and through local mode — submitted over the
 * loopback HTTP API, analysed, cost-gated, run by the local Batch runner under the real harness, finalized — and the
 * wall times are compared: submit → SUCCEEDED over the direct run, median of 3 (quick: one ~20 s run). Local mode's
 * own start-up is not counted: a researcher submits to a platform that is already up. Run standalone with
 * `npx tsx bench/overhead.ts [--quick]`.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { packTarGz } from '../lambdas/shared/tarball';
import { parseConfig } from '../lib/config';
import { startLocalMode } from '../lib/local/local-mode';
import { median } from './stats';

const EXAMPLE = fileURLToPath(new URL('../examples/hello-cpu/', import.meta.url));
const PYTHON = '/usr/bin/python3';
/** The goal: local mode adds at most 10 % to a 3-minute job. */
export const OVERHEAD_GOAL_RATIO = 1.1;

/** How long the job runs and how often it is measured. */
export interface OverheadPlan {
  /** Training iterations; with stepDelaySeconds they set the job's length. */
  readonly iterations: number;
  readonly stepDelaySeconds: number;
  readonly runs: number;
}

/** Full: 1800 iterations × 0.1 s ≈ 3 minutes, three runs. Quick: 200 × 0.1 s ≈ 20 s, one run. */
export const OVERHEAD_PLANS: Record<'full' | 'quick', OverheadPlan> = {
  full: { iterations: 1800, stepDelaySeconds: 0.1, runs: 3 },
  quick: { iterations: 200, stepDelaySeconds: 0.1, runs: 1 },
};

/** One pair of runs. */
export interface OverheadRun {
  readonly directSeconds: number;
  /** POST /jobs sent → job SUCCEEDED (the execution's end). */
  readonly localModeSeconds: number;
  readonly ratio: number;
}

/** Everything part 3's overhead measurement found. */
export interface OverheadBenchResult {
  readonly name: 'platform-overhead';
  readonly quick: boolean;
  readonly plan: OverheadPlan;
  readonly command: readonly string[];
  readonly runs: readonly OverheadRun[];
  readonly medianDirectSeconds: number;
  readonly medianLocalModeSeconds: number;
  /** Median of the per-pair ratios. */
  readonly medianRatio: number;
  readonly goalRatio: number;
  readonly withinGoal: boolean;
}

/** Raised when a run does not end as it must (the direct run fails, or the job does not succeed). */
export class OverheadRunFailed extends Error {
  override name = 'OverheadRunFailed';
}

/** The example's command line for a plan (what both runs execute). */
export function exampleCommand(plan: OverheadPlan): string[] {
  return [
    'python',
    'train.py',
    `--max_iters=${plan.iterations}`,
    `--step_delay=${plan.stepDelaySeconds}`,
    `--checkpoint_interval=${Math.max(50, Math.floor(plan.iterations / 10))}`,
  ];
}

async function runDirect(command: readonly string[]): Promise<number> {
  const workDir = mkdtempSync(join(tmpdir(), 'trainyard-bench-direct-'));
  try {
    cpSync(EXAMPLE, workDir, { recursive: true });
    const [, ...args] = command;
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      // Same interpreter that `python` means under local mode's harness.
      const child = spawn(PYTHON, args, {
        cwd: workDir,
        env: { PATH: process.env.PATH ?? '', TRAINYARD_CHECKPOINT_DIR: join(workDir, 'out') },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.on('error', reject);
      child.on('close', (code) =>
        code === 0 ? resolve() : reject(new OverheadRunFailed(`direct run exited ${code}: ${stderr.slice(-1000)}`)),
      );
    });
    return (performance.now() - started) / 1000;
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

function exampleBundle(): string {
  const files = readdirSync(EXAMPLE)
    .filter((name) => statSync(join(EXAMPLE, name)).isFile())
    .map((path) => ({ path, content: readFileSync(join(EXAMPLE, path)) }));
  return packTarGz(files).toString('base64');
}

async function runThroughLocalMode(
  command: readonly string[],
  expectedSeconds: number,
  log: (line: string) => void,
): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'trainyard-bench-local-'));
  const mode = await startLocalMode({
    dir,
    config: parseConfig({ teams: [{ id: 'bench', monthlyBudgetUsd: 1000 }] }, 'overhead bench config'),
    logLevel: 'SILENT',
    console: (line) => {
      if (/failed/i.test(line)) log(`overhead: local mode: ${line}`);
    },
  });
  try {
    const body = {
      bundle: exampleBundle(),
      command,
      // cpu-small's 30 s limit is shorter than the job; the analysis cannot know the pacing, so say it.
      requirements: { tier: 'cpu-large', runtimeSeconds: Math.ceil(expectedSeconds * 1.5) },
    };
    const started = performance.now();
    const response = await fetch(`${mode.apiUrl}/jobs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${mode.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as { job?: { jobId?: string } };
    const jobId = answer.job?.jobId;
    if (response.status !== 202 || jobId === undefined) {
      throw new OverheadRunFailed(`POST /jobs answered ${response.status}: ${JSON.stringify(answer)}`);
    }
    // The execution's end is when the job is final (Finalize has run); waiting on it adds no polling delay.
    const execution = await mode.machine.waitFor(jobId);
    const seconds = (performance.now() - started) / 1000;
    const job = await mode.plane.jobs.requireJob(jobId);
    if (execution.status !== 'SUCCEEDED' || job.state !== 'SUCCEEDED') {
      throw new OverheadRunFailed(
        `job ${jobId} ended ${execution.status}/${job.state}: ${execution.error ?? job.reason ?? 'no reason recorded'}`,
      );
    }
    return seconds;
  } finally {
    await mode.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Runs the overhead measurement: pairs of direct and local-mode runs of the example job. */
export async function runOverheadBench(options: {
  quick: boolean;
  log: (line: string) => void;
}): Promise<OverheadBenchResult> {
  const plan = options.quick ? OVERHEAD_PLANS.quick : OVERHEAD_PLANS.full;
  const command = exampleCommand(plan);
  const expected = plan.iterations * plan.stepDelaySeconds;
  options.log(`overhead: ${command.join(' ')} (≈ ${expected.toFixed(0)} s), ${plan.runs} pair(s)`);
  const runs: OverheadRun[] = [];
  for (let i = 0; i < plan.runs; i++) {
    const directSeconds = await runDirect(command);
    options.log(`overhead: run ${i + 1} direct ${directSeconds.toFixed(1)} s`);
    const localModeSeconds = await runThroughLocalMode(command, expected, options.log);
    const ratio = localModeSeconds / directSeconds;
    options.log(`overhead: run ${i + 1} local mode ${localModeSeconds.toFixed(1)} s (× ${ratio.toFixed(3)})`);
    runs.push({ directSeconds, localModeSeconds, ratio });
  }
  const medianRatio = median(runs.map((r) => r.ratio));
  return {
    name: 'platform-overhead',
    quick: options.quick,
    plan,
    command,
    runs,
    medianDirectSeconds: median(runs.map((r) => r.directSeconds)),
    medianLocalModeSeconds: median(runs.map((r) => r.localModeSeconds)),
    medianRatio,
    goalRatio: OVERHEAD_GOAL_RATIO,
    withinGoal: medianRatio <= OVERHEAD_GOAL_RATIO,
  };
}

/** Markdown table of a result. */
export function overheadTable(result: OverheadBenchResult): string {
  const lines = [
    `Job: examples/hello-cpu \`${result.command.join(' ')}\`, run directly with ${PYTHON} and through local mode ` +
      '(POST /jobs over the loopback API → Analyze → CostGate → local Batch under the real harness → Finalize, job ' +
      'SUCCEEDED); local mode already running.',
    '',
    '| run | direct | local mode (submit → SUCCEEDED) | ratio |',
    '|---|---|---|---|',
    ...result.runs.map(
      (r, i) =>
        `| ${i + 1} | ${r.directSeconds.toFixed(1)} s | ${r.localModeSeconds.toFixed(1)} s | ${r.ratio.toFixed(3)} |`,
    ),
    '',
    `Median ratio **${result.medianRatio.toFixed(3)}** (goal ≤ ${result.goalRatio.toFixed(2)}: ${result.withinGoal ? 'met' : 'NOT met'}).`,
  ];
  return lines.join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  runOverheadBench({ quick, log: (line) => console.error(line) })
    .then((result) => {
      console.log(overheadTable(result));
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
