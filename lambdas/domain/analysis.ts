/**
 * Workload analysis: from a code bundle and its command, what a training job needs (framework, GPU, parameter count,
 * GPU memory, FLOPs, runtime per tier) and the cheapest tier that fits. Pure: no AWS SDK, no process.env, and the
 * submitted Python is read, never run. Every figure carries its basis and a confidence; what cannot be read is listed
 * in `unknowns`. Formulas, constants and their sources: docs/cost-model.md.
 */
import { MAX_RUNTIME_SECONDS, maxRuntimeSeconds, type TierConfig } from '../../lib/config';
import { float32ShareOf16Bit, usableGpuMemoryGiB } from '../../lib/instance-catalog';
import { unreadReason } from '../shared/tarball';
import { formatCount, formatDuration, formatGiB, formatUsd } from './analysis/format';
import {
  type CommandOverride,
  type PythonInclude,
  type PythonType,
  type PythonValue,
  parseOverride,
  stripComment,
  topLevelAssignments,
  topLevelIncludes,
} from './analysis/python-literals';
import { spotRunSeconds } from './estimator';

/** A submitted code bundle: text files by relative path, and the command as argv. */
export interface CodeBundle {
  files: Record<string, string>;
  command: string[];
}

/** What the user states about the job; each field, when given, overrides the analysis. */
export interface JobRequirements {
  tier?: string;
  gpuMemoryGiB?: number;
  runtimeSeconds?: number;
  deadlineSeconds?: number;
  /** The job's training steps in all: `max_iters` for the estimate and the total the harness's progress counts to. */
  totalSteps?: number;
}

/** An estimate with what it was based on and how far to trust it. */
export interface Figure<T> {
  value: T;
  basis: string;
  confidence: 'high' | 'medium' | 'low';
}

/** One tier as seen by the analysis. */
export interface TierAssessment {
  tier: string;
  fits: boolean;
  reason: string;
  runtimeSeconds?: Figure<number>;
  /** On-demand cost of the estimated runtime, all nodes, USD. */
  onDemandCostUsd?: number;
}

/** The analysis of one workload. */
export interface WorkloadAnalysis {
  framework: 'torch' | 'tensorflow' | 'jax' | 'none';
  usesGpu: Figure<boolean>;
  /** Literal hyper-parameters, booleans in Python spelling (`'True'`/`'False'`); source e.g. `config/x.py:12`. */
  hyperparameters: Record<string, { value: number | string; source: string }>;
  parameterCount?: Figure<number>;
  peakGpuMemoryGiB?: Figure<number>;
  /**
   * Training tokens: max_iters × batch_size × block_size × gradient_accumulation_steps; for an evaluation-only run
   * (eval_only = True), the tokens it evaluates: eval_iters × 2 splits × batch_size × block_size.
   */
  totalTokens?: Figure<number>;
  /** Training plus evaluation FLOPs (evaluation only for an eval_only run). */
  flops?: Figure<number>;
  perTier: TierAssessment[];
  recommendedTier?: string;
  recommendationReason: string;
  /** Other tiers that fit, cheapest first. */
  alternatives: string[];
  /** What could not be determined, said plainly. */
  unknowns: string[];
  overridesApplied: string[];
  /** The entry script found in the command, if any. */
  entryScript?: string;
  /** Config files given as positional `.py` arguments, in the order they apply. */
  configFiles: string[];
  /**
   * Whether the command's program is a launcher that starts data-parallel training processes (torchrun, deepspeed,
   * accelerate, horovodrun, mpirun, `python -m torch.distributed.run`): what it is credited with (see `spreadOf`).
   */
  distributed: boolean;
}

/** Nothing fits the workload; the message gives the numbers and each tier's reason. */
export class WorkloadRefused extends Error {
  override name = 'WorkloadRefused';
  /** The analysis that led to the refusal. */
  readonly analysis: WorkloadAnalysis;
  constructor(message: string, analysis: WorkloadAnalysis) {
    super(message);
    this.analysis = analysis;
  }
}

/** A requirement names a tier that is not configured. */
export class UnknownTier extends Error {
  override name = 'UnknownTier';
  /** The ids that are configured. */
  readonly knownTiers: string[];
  constructor(tierId: string, knownTiers: string[]) {
    super(`unknown tier "${tierId}"; defined tiers: ${knownTiers.join(', ')}`);
    this.knownTiers = knownTiers;
  }
}

/** A requirement or a size in the code is out of range (negative, zero, not a number). */
export class InvalidRequirement extends Error {
  override name = 'InvalidRequirement';
}

/**
 * The constants the analysis assumes, in one place so docs/cost-model.md and the tests can name them.
 * Sources and justification: docs/cost-model.md.
 */
export const ANALYSIS_ASSUMPTIONS = {
  /** Fraction of a GPU's peak 16-bit TFLOPS a small single-GPU PyTorch training loop sustains (MFU). */
  gpuUtilisation: 0.3,
  /** Fraction of a CPU's peak fp32 FLOPS sustained by BLAS-bound training. */
  cpuUtilisation: 0.5,
  /**
   * Share of a GPU's 16-bit peak available to float32 training when the catalog does not know the GPU (T4: 8.1 of 65
   * TFLOPS); known GPUs use their own peaks (lib/instance-catalog.ts GPU_PEAK_TFLOPS), with TF32 where the code allows it.
   */
  fp32GpuThroughputFraction: 0.125,
  /** fp32 master weights 4 + fp32 gradients 4 + Adam first and second moments 8, bytes per parameter. */
  trainingBytesPerParameter: 16,
  /** Activation bytes per token per embedding dimension per layer with 16-bit activations (Korthikanti et al.). */
  activationBytesPerTokenPerDim: 34,
  /** Attention-score activation bytes per head per (context position)² per sequence with 16-bit activations. */
  attentionScoreBytes: 5,
  /** fp32 copy of the logits for the cross-entropy loss, bytes per logit (added to the logits' own dtype bytes). */
  lossLogitBytes: 4,
  /** Forward-only evaluation (eval_only, under torch.no_grad): fp32 weights, no gradients or Adam state, B/param. */
  evaluationBytesPerParameter: 4,
  /** 16-bit copies of the fp32 weights that autocast caches for the forward pass, bytes per parameter. */
  autocastWeightCopyBytes: 2,
  /** CUDA context, cuBLAS workspaces and allocator slack on the GPU, GiB. */
  cudaContextGiB: 1,
  /** Resident memory of the interpreter and framework before the model, MiB, for CPU tiers. */
  runtimeMemoryMiB: { torch: 300, tensorflow: 600, jax: 400, none: 64 } as Record<string, number>,
  /** Process start (interpreter, framework import, data open) added to every runtime, seconds. */
  startupSeconds: { torch: 5, tensorflow: 10, jax: 10, none: 1 } as Record<string, number>,
  /** vocab_size assumed when it is not literal and the project looks character-level (tiny Shakespeare). */
  charLevelVocab: 65,
  /** vocab_size assumed otherwise: GPT-2's 50257 padded to a multiple of 64, as nanoGPT does. */
  gpt2Vocab: 50304,
  /** Head dimension assumed when n_head is not literal (GPT-2). */
  headDim: 64,
} as const;

/** The sizes a training run needs at least one of: a literal 0 or below is a mistake, not a missing value. */
const SIZE_KEYS = [
  'n_layer',
  'n_head',
  'n_embd',
  'vocab_size',
  'block_size',
  'batch_size',
  'gradient_accumulation_steps',
  'max_iters',
] as const;

/** Hyper-parameters read from the code; others are ignored. */
export const TRACKED_KEYS = [
  ...SIZE_KEYS,
  'dtype',
  'tf32',
  'bias',
  'dropout',
  'device',
  'eval_interval',
  'eval_iters',
  'eval_only',
  'init_from',
] as const;

/**
 * The GPT-2 checkpoints nanoGPT's `init_from` loads (GPT.from_pretrained, from Hugging Face's gpt2* configs): their
 * layers, heads and width replace the script's; all have GPT-2's 50,257-token vocabulary, 1024 positions and biases.
 */
const PRETRAINED_GPT2: ReadonlyMap<string, { n_layer: number; n_head: number; n_embd: number }> = new Map([
  ['gpt2', { n_layer: 12, n_head: 12, n_embd: 768 }],
  ['gpt2-medium', { n_layer: 24, n_head: 16, n_embd: 1024 }],
  ['gpt2-large', { n_layer: 36, n_head: 20, n_embd: 1280 }],
  ['gpt2-xl', { n_layer: 48, n_head: 25, n_embd: 1600 }],
]);
const PRETRAINED_VOCAB = 50257;
const PRETRAINED_CONTEXT = 1024;

type Confidence = Figure<number>['confidence'];
type Framework = WorkloadAnalysis['framework'];
type Hyper = WorkloadAnalysis['hyperparameters'];

const PYTHON_INTERPRETER = /(^|\/)python[\d.]*$/;
const DISTRIBUTED_LAUNCHERS = /(^|\/)(torchrun|deepspeed|accelerate|horovodrun|mpirun)$/;
const LAUNCHER_MODULES = /^torch\.distributed\.(run|launch)$/;
const SHELLS = /(^|\/)(sh|bash|dash|zsh)$/;

/** Analyses a bundle against the configured tiers; throws UnknownTier, InvalidRequirement or WorkloadRefused. */
export function analyzeWorkload(
  bundle: CodeBundle,
  tiers: readonly TierConfig[],
  req: JobRequirements = {},
): WorkloadAnalysis {
  checkRequirements(req, tiers);
  const unknowns: string[] = [];
  const files = normaliseFiles(bundle.files);
  const { entryScript, configFiles, steps } = readCommand(bundle.command, files, unknowns);
  const threadsCall = cpuThreadsCall(files, entryScript);
  const { hyper, nonLiteral, filesRead, incomplete, dataset } = readHyperparameters(
    files,
    entryScript,
    steps,
    unknowns,
    threadsCall?.name === undefined ? [] : [threadsCall.name],
  );
  refuseNonNumericSizes(hyper);
  const overridesApplied: string[] = [];
  if (req.totalSteps !== undefined) {
    // A user override wins: the steps the job runs, whatever the code says (or when it says nothing literal).
    const code = hyper.max_iters;
    overridesApplied.push(
      `totalSteps=${req.totalSteps}${code ? ` (code: max_iters=${code.value} at ${code.source})` : ' (max_iters is not a literal in the code)'}`,
    );
    hyper.max_iters = { value: req.totalSteps, source: 'requirements.totalSteps' };
    nonLiteral.delete('max_iters');
  }
  // Assumptions made for missing hyper-parameters, by key; reported together with why the key was missing.
  const assumed = new Map<string, string>();
  const run = readRun(hyper, nonLiteral, unknowns, assumed);
  // After readRun: an evaluation-only run drops the max_iters it never runs (`--max_iters=0` included).
  refuseNonPositiveSizes(hyper);
  // A file the code includes but the bundle lacks may set any size: the shape read without it is a guess.
  if (incomplete) run.shapeConfidence = 'low';
  const framework = detectFramework(files, entryScript);
  const cpuThreads = threadsCall && cpuThreadsOf(threadsCall, hyper);
  const spread = spreadOf(bundle.command);
  const distributed = spread.launched;
  const usesGpu = detectGpu(files, framework, hyper, unknowns);
  if (req.gpuMemoryGiB !== undefined && req.gpuMemoryGiB > 0 && !usesGpu.value) {
    overridesApplied.push(`gpuMemoryGiB=${req.gpuMemoryGiB} implies GPU use (analysis: ${usesGpu.basis})`);
    usesGpu.value = true;
    usesGpu.basis = `user requires ${req.gpuMemoryGiB} GiB of GPU memory`;
    usesGpu.confidence = 'high';
  }

  const tf32 = detectTf32(files, hyper);
  const vocabulary = { files, readFrom: filesRead, command: bundle.command, ...(dataset && { dataset }) };
  const model = estimateModel(vocabulary, hyper, run, framework, usesGpu.value, unknowns, assumed);
  for (const [key, reason] of nonLiteral) {
    const assumption = assumed.get(key);
    unknowns.push(assumption ? `${reason}; ${assumption}` : reason);
  }
  for (const [key, assumption] of assumed) {
    if (!nonLiteral.has(key)) unknowns.push(`${key} is not set in the code or command; ${assumption}`);
  }
  if (req.deadlineSeconds !== undefined && typeof hyper.max_iters?.value !== 'number') {
    unknowns.push(
      "progress: the job's total steps are unknown (no literal max_iters), so its deadline rules count it as not started until it ends and may move it to on-demand early; pass totalSteps (trainyard --total-steps) to track it",
    );
  }
  let peakGpuMemoryGiB = usesGpu.value ? model?.peakGpuMemoryGiB : undefined;
  if (req.gpuMemoryGiB !== undefined) {
    overridesApplied.push(
      `gpuMemoryGiB=${req.gpuMemoryGiB} (analysis: ${model ? formatGiB(model.peakGpuMemoryGiB.value) : 'unknown'})`,
    );
    peakGpuMemoryGiB = { value: req.gpuMemoryGiB, basis: 'user override', confidence: 'high' };
  }
  if (req.runtimeSeconds !== undefined) overridesApplied.push(`runtimeSeconds=${req.runtimeSeconds}`);
  if (req.deadlineSeconds !== undefined) overridesApplied.push(`deadlineSeconds=${req.deadlineSeconds}`);

  const perTier = tiers.map((tier) =>
    assessTier(tier, {
      usesGpu: usesGpu.value,
      tf32,
      framework,
      spread,
      model,
      peakGpuMemoryGiB,
      hyper,
      req,
      ...(cpuThreads && { cpuThreads }),
    }),
  );
  const fitting = perTier.filter((t) => t.fits).sort((a, b) => costOrder(a, b, tiers));

  const analysis: WorkloadAnalysis = {
    framework,
    usesGpu,
    hyperparameters: hyper,
    ...(model && { parameterCount: model.parameterCount, totalTokens: model.totalTokens, flops: model.flops }),
    ...(peakGpuMemoryGiB && { peakGpuMemoryGiB }),
    perTier,
    recommendationReason: '',
    alternatives: [],
    unknowns,
    overridesApplied,
    ...(entryScript !== undefined && { entryScript }),
    configFiles,
    distributed,
  };

  const best = fitting[0];
  if (req.tier !== undefined) {
    const chosen = perTier.find((t) => t.tier === req.tier) as TierAssessment;
    overridesApplied.unshift(`tier=${req.tier} (analysis would pick ${best ? best.tier : 'no tier: none fits'})`);
    analysis.recommendedTier = req.tier;
    analysis.recommendationReason = chosen.fits
      ? `${req.tier} was requested (tier override); it fits: ${chosen.reason}`
      : `${req.tier} was requested (tier override) although the analysis says it does not fit: ${chosen.reason}`;
    analysis.alternatives = fitting.filter((t) => t.tier !== req.tier).map((t) => t.tier);
    return analysis;
  }
  if (!best) {
    analysis.recommendationReason = 'no tier fits';
    throw new WorkloadRefused(refusalMessage(analysis), analysis);
  }
  analysis.recommendedTier = best.tier;
  analysis.recommendationReason = `${best.tier} is the cheapest tier that fits: ${best.reason}`;
  analysis.alternatives = fitting.slice(1).map((t) => t.tier);
  return analysis;
}

function checkRequirements(req: JobRequirements, tiers: readonly TierConfig[]): void {
  if (req.tier !== undefined && !tiers.some((t) => t.id === req.tier)) {
    throw new UnknownTier(
      req.tier,
      tiers.map((t) => t.id),
    );
  }
  const positive = (key: keyof JobRequirements, value: number | undefined, allowZero: boolean) => {
    if (value === undefined) return;
    if (!Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
      throw new InvalidRequirement(
        `${key} must be a finite number ${allowZero ? '>= 0' : '> 0'}, got ${String(value)}`,
      );
    }
  };
  positive('gpuMemoryGiB', req.gpuMemoryGiB, true);
  positive('runtimeSeconds', req.runtimeSeconds, false);
  positive('deadlineSeconds', req.deadlineSeconds, false);
  positive('totalSteps', req.totalSteps, false);
  if (req.totalSteps !== undefined && !Number.isInteger(req.totalSteps)) {
    throw new InvalidRequirement(`totalSteps must be a whole number of steps, got ${req.totalSteps}`);
  }
  if (req.runtimeSeconds !== undefined && req.runtimeSeconds > MAX_RUNTIME_SECONDS) {
    throw new InvalidRequirement(
      `runtimeSeconds must be at most ${MAX_RUNTIME_SECONDS} (14 days, the longest maxRuntime a tier may have), got ${req.runtimeSeconds}`,
    );
  }
}

function normaliseFiles(files: Record<string, string>): Map<string, string> {
  return new Map(Object.entries(files).map(([path, text]) => [normalisePath(path), text]));
}

function normalisePath(path: string): string {
  return path.replace(/^(\.\/)+/, '');
}

/** A config file or a `--key=value` override, in command order. */
type ConfigStep = { file: string } | { override: CommandOverride };

interface CommandParts {
  entryScript?: string;
  configFiles: string[];
  steps: ConfigStep[];
}

/** Finds the entry script (first `.py` argument), the config files after it and the `--key=value` overrides. */
function readCommand(given: readonly string[], files: Map<string, string>, unknowns: string[]): CommandParts {
  // `sh -c "cd src && python train.py …"`: the shell's command that runs a Python script is the one to read.
  const isEntry = (arg: string) => !arg.startsWith('-') && arg.endsWith('.py');
  const command =
    shellScript(given) === undefined ? given : (programsOf(given).find((words) => words.some(isEntry)) ?? given);
  const entryIndex = command.findIndex(isEntry);
  if (entryIndex < 0) {
    unknowns.push(
      `no Python entry script in the command (${JSON.stringify(command)}): hyper-parameters read from no file`,
    );
    return { configFiles: [], steps: [] };
  }
  const entryScript = normalisePath(command[entryIndex] as string);
  if (!files.has(entryScript)) unknowns.push(`entry script ${entryScript} is not in the bundle`);
  const configFiles: string[] = [];
  const steps: ConfigStep[] = [];
  for (const arg of command.slice(entryIndex + 1)) {
    if (arg.startsWith('--')) {
      const override = parseOverride(arg);
      if (override) steps.push({ override });
    } else if (arg.endsWith('.py')) {
      const path = normalisePath(arg);
      configFiles.push(path);
      steps.push({ file: path });
      if (!files.has(path)) unknowns.push(`config file ${path} (from the command) is not in the bundle`);
    }
  }
  return { entryScript, configFiles, steps };
}

/** How deep included files may nest (a config including a base that includes another…) before the rest is unread. */
const MAX_INCLUDE_DEPTH = 8;

/**
 * How many times in all included files may be read, a file included again read again (Python runs it again). Files
 * that each include the next several times multiply the reads with every level: a few kilobytes of bundle would take
 * the analysis minutes. Real projects include a handful of files a handful of times.
 */
const MAX_INCLUDE_READS = 500;

interface HyperparameterReading {
  hyper: Hyper;
  nonLiteral: Map<string, string>;
  /** The bundle files whose assignments were read, each once, in the order first read. */
  filesRead: string[];
  /** Whether a file the code includes was not read (not in the bundle, or nested too deep). */
  incomplete: boolean;
  /** The last `dataset` setting when it is a literal string (nanoGPT's data/<dataset>, which decides the vocabulary). */
  dataset?: Hyper[string];
}

/**
 * Literal hyper-parameters: the entry script's, then each config file and `--key=value` override in command order,
 * later winning, as nanoGPT's configurator applies them (usually: script < config files < overrides). A file that
 * includes another (`exec(open('config/base.py').read())`, `from config.base import *`) gets that file's settings at
 * that line, so its own later lines win, as in Python.
 */
function readHyperparameters(
  files: Map<string, string>,
  entryScript: string | undefined,
  steps: readonly ConfigStep[],
  unknowns: string[],
  extraKeys: readonly string[] = [],
): HyperparameterReading {
  const tracked = new Set<string>([...TRACKED_KEYS, ...extraKeys]);
  const sizes = new Set<string>(SIZE_KEYS);
  const hyper: Hyper = {};
  const nonLiteral = new Map<string, string>();
  // Keys whose value is now a float literal: the configurators take a float override only for a float setting.
  const floats = new Set<string>();
  const filesRead: string[] = [];
  let incomplete = false;
  let dataset: Hyper[string] | undefined;
  const set = (
    key: string,
    value: PythonValue | undefined,
    type: PythonType | undefined,
    source: string,
    text: string,
  ) => {
    if (key === 'dataset') dataset = typeof value === 'string' ? { value, source } : undefined;
    if (!tracked.has(key)) return;
    if (type === 'float') floats.add(key);
    else floats.delete(key);
    if (value === undefined || value === null) {
      delete hyper[key];
      const what = value === null ? 'None (decided at run time)' : `not a literal (${text})`;
      nonLiteral.set(key, `${key} at ${source} is ${what}`);
      return;
    }
    nonLiteral.delete(key);
    hyper[key] = { value: typeof value === 'boolean' ? (value ? 'True' : 'False') : value, source };
  };
  // sys.path[0] is the entry script's directory: where `from config.base import *` looks.
  const entryDir = entryScript?.includes('/') ? entryScript.slice(0, entryScript.lastIndexOf('/') + 1) : '';
  // Each file's statements, parsed once however often it is included.
  const parsed = new Map<string, ReturnType<typeof statementsOf>>();
  let includeReads = 0;
  let incompleteByReads = false;
  const readFile = (path: string, including: readonly string[]) => {
    const text = files.get(path);
    if (text === undefined) return;
    const unread = unreadReason(text);
    if (unread !== undefined) {
      // In the bundle, so the job runs it, but too large to read here: what it sets is unknown.
      unknowns.push(`${path} is in the bundle but was not read (${unread}): the settings it makes are unknown`);
      incomplete = true;
      return;
    }
    if (!filesRead.includes(path)) filesRead.push(path);
    const statements = parsed.get(path) ?? statementsOf(text);
    parsed.set(path, statements);
    for (const statement of statements) {
      if ('assignment' in statement) {
        const a = statement.assignment;
        set(a.name, a.value, a.type, `${path}:${a.line}`, a.text);
        continue;
      }
      const include = statement.include;
      const where = `${include.text} at ${path}:${include.line}`;
      const target = resolveInclude(include, files, entryDir);
      if (target === undefined) continue;
      if (!files.has(target)) {
        unknowns.push(
          `${target} is not in the bundle (${where}): the settings it makes are unknown; read as if it made none`,
        );
        incomplete = true;
      } else if (target === path || including.includes(target)) {
        unknowns.push(`${where} includes ${target}, which is already being read: the cycle is read once`);
      } else if (including.length + 1 > MAX_INCLUDE_DEPTH) {
        unknowns.push(
          `${target} (${where}) is nested more than ${MAX_INCLUDE_DEPTH} includes deep: not read, so the settings it makes are unknown`,
        );
        incomplete = true;
      } else if (includeReads >= MAX_INCLUDE_READS) {
        if (!incompleteByReads) {
          unknowns.push(
            `the bundle's files include others more than ${MAX_INCLUDE_READS} times in all; from ${where} on, included files are not read, so the settings they make are unknown`,
          );
        }
        incompleteByReads = true;
        incomplete = true;
      } else {
        includeReads += 1;
        readFile(target, [...including, path]);
      }
    }
  };
  if (entryScript !== undefined) readFile(entryScript, []);
  for (const step of steps) {
    if ('file' in step) {
      readFile(step.file, []);
      continue;
    }
    const { key, value, constant, type, arg } = step.override;
    if (constant && type === 'float' && sizes.has(key) && !floats.has(key)) {
      throw new InvalidRequirement(floatSizeMessage(key, value as number, arg));
    }
    // A call, subscript or display (`int(5e3)`, `[8][0]`) is an expression some configurators evaluate: not a literal.
    // Other text stays the string nanoGPT's configurator makes of it.
    const expression = !constant && /[([{]/.test(String(value));
    set(key, expression ? undefined : value, expression ? undefined : type, arg, arg);
  }
  return { hyper, nonLiteral, filesRead, incomplete, ...(dataset && { dataset }) };
}

/** A file's top-level assignments and includes, in the order they run. */
function statementsOf(text: string) {
  return [
    ...topLevelAssignments(text).map((assignment) => ({ line: assignment.line, assignment })),
    ...topLevelIncludes(text).map((include) => ({ line: include.line, include })),
  ].sort((a, b) => a.line - b.line);
}

/**
 * The bundle path an include reads: exec's path from the working directory (the bundle's root); a module through
 * the entry script's directory, as `<module path>.py` or its package's `__init__.py`. Undefined for a module that is
 * not the bundle's (an installed library, or a namespace package, which `import *` takes nothing from). A missing
 * file under a directory of the bundle (`config.base` with `config/` there) is returned, to be reported as missing.
 */
function resolveInclude(include: PythonInclude, files: Map<string, string>, entryDir: string): string | undefined {
  if (include.kind === 'exec') return normalisePath(include.target);
  const base = `${entryDir}${include.target.replaceAll('.', '/')}`;
  const found = [`${base}.py`, `${base}/__init__.py`].find((path) => files.has(path));
  if (found) return found;
  const under = (dir: string) => [...files.keys()].some((path) => path.startsWith(`${dir}/`));
  if (under(base)) return undefined;
  const top = `${entryDir}${include.target.split('.')[0]}`;
  return include.target.includes('.') && under(top) ? `${base}.py` : undefined;
}

/**
 * A float override of an integer size: nanoGPT's configurator asserts an override keeps the default's type, and the
 * example trainer refuses a float for an int setting, so the job would stop after its machine started.
 */
function floatSizeMessage(key: string, value: number, arg: string): string {
  const text = arg.slice(arg.indexOf('=') + 1).trim();
  const whole = Number.isInteger(value) ? ` (write ${value})` : '';
  return `${key} is ${text}, a float (${arg}): it must be an int${whole}; the script's configurator refuses a float for an int setting, so the job would stop after its machine started`;
}

const IMPORT_PATTERN = /^\s*(?:import|from)\s+(torch|tensorflow|jax)\b/m;

/** The framework the entry script imports; else the one most files import; else none. */
function detectFramework(files: Map<string, string>, entryScript: string | undefined): Framework {
  const importsOf = (text: string): Framework[] => {
    const found = new Set<Framework>();
    for (const line of text.split('\n')) {
      const m = IMPORT_PATTERN.exec(line);
      if (m?.[1]) found.add(m[1] as Framework);
    }
    return [...found];
  };
  const entry = entryScript !== undefined ? files.get(entryScript) : undefined;
  const order: Framework[] = ['torch', 'jax', 'tensorflow'];
  const fromEntry = entry !== undefined ? importsOf(entry) : [];
  const first = order.find((f) => fromEntry.includes(f));
  if (first) return first;
  const counts = new Map<Framework, number>();
  for (const [path, text] of files) {
    if (!path.endsWith('.py')) continue;
    for (const f of importsOf(text)) counts.set(f, (counts.get(f) ?? 0) + 1);
  }
  let best: Framework = 'none';
  let bestCount = 0;
  for (const f of order) {
    const c = counts.get(f) ?? 0;
    if (c > bestCount) {
      best = f;
      bestCount = c;
    }
  }
  return best;
}

/**
 * How much of a tier the command trains on: one GPU, unless its program is a launcher that starts a process per GPU
 * (torchrun, deepspeed, accelerate, horovodrun, mpirun, `python -m torch.distributed.run|launch`; as argv[0] or as the
 * first word of a command in an `sh -c "…"` line, never in a script's arguments), then as many GPUs of each node as
 * its process count says (PROCESS_OPTIONS; all of them without a number); every node of a multi-node tier only when it
 * also joins the nodes (NODE_OPTIONS: a node count other than 1, else a rendezvous endpoint, a main-node address, a
 * node rank or a host list), since
 * Batch runs the same command on each node and unjoined copies each train alone. DistributedDataParallel in the code
 * is not enough: nanoGPT's train.py imports it and trains on one GPU unless a launcher sets RANK.
 */
interface Spread {
  /** Whether a launcher starts the training processes; without one, one process trains on one GPU. */
  launched: boolean;
  /** Processes the launcher starts on each node, when its options give a number; else one per GPU. */
  processesPerNode?: number;
  /** The options that gave processesPerNode, as the basis quotes them (`--nproc_per_node=2`, `-np 1`). */
  processesOption?: string;
  /**
   * Whether processesPerNode counts the processes of every node (mpirun's `-np`, horovodrun's, accelerate's
   * `--num_processes` without `--num_machines`): across joined nodes each node runs its share of them.
   */
  processesInAll?: boolean;
  /** Whether the launcher joins the nodes of a multi-node tier. */
  joinsNodes: boolean;
}

type Launcher = 'torchrun' | 'deepspeed' | 'accelerate' | 'horovodrun' | 'mpirun';

/**
 * Each launcher's option for the number of training processes it starts: on each node for torchrun and
 * `torch.distributed.launch` (`--nproc_per_node`) and deepspeed (`--num_gpus`, alias `--num_accelerators`); in all for
 * accelerate (`--num_processes`, divided among `--num_machines`), Open MPI's mpirun (`-np`, `-n`, `-c`, also with two
 * dashes) and horovodrun (`-np`, `--num-proc`), which on one node is the same.
 */
const PROCESS_OPTIONS: Readonly<Record<Launcher, RegExp>> = {
  torchrun: /^--nproc[-_]per[-_]node$/,
  deepspeed: /^--num_(?:gpus|accelerators)$/,
  accelerate: /^--num[-_]processes$/,
  mpirun: /^--?(?:np|n|c)$/,
  horovodrun: /^(?:-np|--num-proc)$/,
};

function spreadOf(command: readonly string[]): Spread {
  const launcher = programsOf(command)
    .map(launcherOptions)
    .find((found) => found !== undefined);
  if (!launcher) return { launched: false, joinsNodes: false };
  const { name, options } = launcher;
  const processes = processesPerNode(name, options);
  return { launched: true, ...processes, joinsNodes: joinsNodes(name, options) };
}

/**
 * How each launcher is told to join nodes: an option giving the number of nodes (torchrun's `--nnodes`, where `1` and
 * `1:1` mean one and an elastic range such as `1:4` more; deepspeed's `--num_nodes`, where -1, its default, and 0 mean
 * "every host in the hostfile"; accelerate's `--num_machines`), else a host list naming more than one host (mpirun's
 * `-H a:4,b:4`; `-H localhost:4` is one node), else options that only make sense across nodes (a rendezvous endpoint,
 * a main-node address, a node rank, a hostfile, whose hosts the analysis cannot read). torchrun's words are read for
 * every launcher, as they always were.
 */
const NODE_OPTIONS: Readonly<Record<Launcher, { count?: RegExp; hosts?: RegExp; joins: RegExp }>> = {
  torchrun: { count: /^--nnodes$/, joins: /^--(?:rdzv[-_]endpoint|master[-_]addr|node[-_]rank)$/ },
  deepspeed: { count: /^--num[-_]nodes$/, joins: /^(?:-H|--hostfile|--master[-_]addr|--node[-_]rank)$/ },
  accelerate: { count: /^--num[-_]machines$/, joins: /^--(?:main[-_]process[-_]ip|machine[-_]rank)$/ },
  mpirun: { hosts: /^--?(?:H|host)$/, joins: /^--?(?:hostfile|machinefile|default-hostfile)$/ },
  horovodrun: { hosts: /^(?:-H|--hosts)$/, joins: /^(?:--hostfile|--host-discovery-script)$/ },
};

/** Whether a launcher's options join the nodes of a multi-node tier (NODE_OPTIONS); a node count says it outright. */
function joinsNodes(name: Launcher, options: readonly string[]): boolean {
  const { count, hosts, joins } = NODE_OPTIONS[name];
  const nodes = count && optionValue(options, count);
  if (nodes !== undefined && nodes !== '-1' && nodes !== '0') return !/^1(:1)?$/.test(nodes);
  const list = hosts && optionValue(options, hosts);
  if (list !== undefined) return new Set(list.split(',').map((host) => host.split(':')[0])).size > 1;
  const named = (word: string) => word.split('=')[0] as string;
  return options.some((word) => joins.test(named(word)) || NODE_OPTIONS.torchrun.joins.test(named(word)));
}

/** The processes a launcher's options start on each node, with the options quoted; nothing without a number. */
function processesPerNode(
  name: Launcher,
  options: readonly string[],
): Pick<Spread, 'processesPerNode' | 'processesOption' | 'processesInAll'> {
  // `--nproc_per_node` stays read for every launcher, as it always was; the launcher's own option comes first.
  const own = optionOf(options, PROCESS_OPTIONS[name]);
  const option = own ?? optionOf(options, PROCESS_OPTIONS.torchrun);
  const count = Number(option?.value);
  if (!option || !Number.isInteger(count) || count < 1) return {};
  if (name === 'accelerate') {
    const machines = optionOf(options, /^--num[-_]machines$/);
    const perMachine = Number(machines?.value);
    if (machines && Number.isInteger(perMachine) && perMachine > 1) {
      return {
        processesPerNode: Math.ceil(count / perMachine),
        processesOption: `${option.text} over ${machines.text}`,
      };
    }
  }
  const inAll = own !== undefined && name !== 'torchrun' && name !== 'deepspeed';
  return { processesPerNode: count, processesOption: option.text, ...(inAll && { processesInAll: true }) };
}

/** The words of each program the command runs: the command itself, or each command of an `sh -c` line. */
function programsOf(command: readonly string[]): string[][] {
  const script = shellScript(command);
  if (script !== undefined) return script.split(/&&|\|\||[;|\n]/).map(shellWords);
  return [command.flatMap((text) => text.split(/\s+/).filter((w) => w.length > 0))];
}

/** The script of an `sh -c "…"` command (any of SHELLS, `-c` among its options); undefined for any other command. */
function shellScript(command: readonly string[]): string | undefined {
  if (!SHELLS.test(command[0] ?? '')) return undefined;
  const options = command.slice(1).findIndex((arg) => !arg.startsWith('-'));
  const script = options < 0 ? undefined : command[options + 1];
  const reads = command.slice(1, options + 1).some((arg) => /^-[a-zA-Z]*c[a-zA-Z]*$/.test(arg));
  return reads ? script : undefined;
}

/**
 * The words a POSIX shell splits a simple command into: blanks outside quotes separate them; '…' is literal; "…" is
 * literal but for \ before " \ $ or `; outside quotes \ takes the next character as it is. Expansions ($VAR, globs)
 * stay as written: the analysis reads only what the text says.
 */
export function shellWords(text: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (/\s/.test(char)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (char === "'") {
      const end = text.indexOf("'", i + 1);
      const close = end < 0 ? text.length : end;
      word = (word ?? '') + text.slice(i + 1, close);
      i = close;
    } else if (char === '"') {
      word ??= '';
      for (i += 1; i < text.length && text[i] !== '"'; i++) {
        if (text[i] === '\\' && /["\\$`]/.test(text[i + 1] ?? '')) i += 1;
        word += text[i] ?? '';
      }
    } else if (char === '\\') {
      i += 1;
      word = (word ?? '') + (text[i] ?? '');
    } else word = (word ?? '') + char;
  }
  if (word !== undefined) words.push(word);
  return words;
}

/**
 * A launcher's own options (the words between it and the entry script) when the program is one; undefined otherwise.
 * Variable assignments, `env` and `exec` before the program are skipped, as a shell runs past them.
 */
function launcherOptions(words: readonly string[]): { name: Launcher; options: string[] } | undefined {
  let i = 0;
  while (i < words.length && /^([A-Za-z_]\w*=.*|env|exec)$/.test(words[i] as string)) i++;
  const program = words[i] ?? '';
  const launcher = DISTRIBUTED_LAUNCHERS.exec(program)?.[2] as Launcher | undefined;
  let name: Launcher;
  let first: number;
  if (launcher) {
    name = launcher;
    first = i + 1;
  } else if (PYTHON_INTERPRETER.test(program) && words[i + 1] === '-m' && LAUNCHER_MODULES.test(words[i + 2] ?? '')) {
    name = 'torchrun';
    first = i + 3;
  } else return undefined;
  const rest = words.slice(first);
  const script = rest.findIndex((w) => !w.startsWith('-') && w.endsWith('.py'));
  return { name, options: script < 0 ? rest : rest.slice(0, script) };
}

/**
 * The last `--name=value`, `--name value` or `-name value` among a launcher's options whose name matches, with the
 * text the basis quotes for it.
 */
function optionOf(options: readonly string[], name: RegExp): { value: string; text: string } | undefined {
  let found: { value: string; text: string } | undefined;
  options.forEach((word, i) => {
    const match = /^(--?[\w-]+)(?:=(.*))?$/.exec(word);
    const value = match?.[2] ?? options[i + 1];
    if (match?.[1] && name.test(match[1]) && value !== undefined) {
      found = { value, text: match[1].startsWith('--') ? `${match[1]}=${value}` : `${match[1]} ${value}` };
    }
  });
  return found;
}

/** The value of the last matching option among a launcher's options (see optionOf). */
function optionValue(options: readonly string[], name: RegExp): string | undefined {
  return optionOf(options, name)?.value;
}

const EXPLICIT_GPU_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\.cuda\(/, '.cuda()'],
  [/\.to\(\s*['"]cuda/, ".to('cuda')"],
  [/\bdevice\s*=\s*['"]cuda/, "device='cuda'"],
  [/torch\.device\(\s*['"]cuda/, "torch.device('cuda')"],
  [/['"]\/(?:device:)?GPU:\d/i, "tf.device('/GPU:0')"],
];
const WEAK_GPU_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\btorch\.cuda\./, 'torch.cuda calls'],
  [/list_physical_devices\(\s*['"]GPU/, "tf.config.list_physical_devices('GPU')"],
  [/jax\.devices\(\s*['"]gpu/, "jax.devices('gpu')"],
];

/** Finds where in the Python files a pattern first occurs, as `path:line`. */
function findPattern(files: Map<string, string>, pattern: RegExp): string | undefined {
  for (const [path, text] of files) {
    if (!path.endsWith('.py')) continue;
    const lines = text.split('\n');
    const index = lines.findIndex((line) => pattern.test(line) && !/^\s*#/.test(line));
    if (index >= 0) return `${path}:${index + 1}`;
  }
  return undefined;
}

/** GPU use: a literal `device` setting decides; else explicit CUDA placement; else weaker hints. */
function detectGpu(files: Map<string, string>, framework: Framework, hyper: Hyper, unknowns: string[]) {
  const device = hyper.device;
  if (device && typeof device.value === 'string') {
    const onGpu = device.value.startsWith('cuda');
    return figure(onGpu, `device='${device.value}' (${device.source})`, 'high');
  }
  for (const [pattern, label] of EXPLICIT_GPU_PATTERNS) {
    const where = findPattern(files, pattern);
    if (where) return figure(true, `${label} at ${where}`, 'high');
  }
  for (const [pattern, label] of WEAK_GPU_PATTERNS) {
    const where = findPattern(files, pattern);
    if (where) return figure(true, `${label} at ${where}: the code queries for a GPU and likely uses one`, 'medium');
  }
  if (framework === 'tensorflow' || framework === 'jax') {
    unknowns.push(
      `GPU use: ${framework} places work on a GPU automatically when one is present and the code names no device; assumed CPU (pass a tier or gpuMemoryGiB to run on a GPU)`,
    );
    return figure(false, `${framework} code with no explicit device placement`, 'low');
  }
  const why =
    framework === 'torch'
      ? 'PyTorch code with no CUDA placement (PyTorch defaults to the CPU)'
      : 'no GPU framework imported';
  return figure(false, why, 'high');
}

/** Code that lets PyTorch run float32 matrix products as TF32 (off by default since PyTorch 1.12). */
const TF32_PATTERNS: ReadonlyArray<[RegExp, string]> = [
  [/\bmatmul\.allow_tf32\s*=\s*True\b/, 'torch.backends.cuda.matmul.allow_tf32 = True'],
  [/set_float32_matmul_precision\(\s*['"](?:high|medium)['"]/, "torch.set_float32_matmul_precision('high')"],
  [/\bfp32_precision\s*=\s*['"]tf32['"]/, "fp32_precision = 'tf32'"],
];

/**
 * Whether float32 matrix products may run as TF32 on tensor cores: code that allows it unconditionally decides; else a
 * literal `tf32` setting (the example trainer's); else no, PyTorch's default.
 */
function detectTf32(files: Map<string, string>, hyper: Hyper): Figure<boolean> {
  for (const [pattern, label] of TF32_PATTERNS) {
    const where = findPattern(files, pattern);
    if (where) return figure(true, `${label} at ${where}`, 'high');
  }
  const setting = hyper.tf32;
  if (setting?.value === 'True' || setting?.value === 'False')
    return figure(setting.value === 'True', `tf32=${setting.value} (${setting.source})`, 'high');
  return figure(false, 'the code does not allow TF32 (PyTorch computes float32 matrix products in float32)', 'medium');
}

/**
 * The share of a GPU tier's 16-bit peak that float32 training gets: the least over the tier's instance types (an
 * attempt may land on any), each GPU's own float32 or TF32 peak; a GPU the catalog does not know counts at the
 * analysis's fallback share.
 */
function float32ShareOfTier(tier: TierConfig, tf32: Figure<boolean>): { share: number; basis: string } {
  const fallback = {
    share: ANALYSIS_ASSUMPTIONS.fp32GpuThroughputFraction,
    basis: 'float32 on a GPU not in the catalog',
  };
  const shares = tier.instanceTypes.map((type) => {
    const known = float32ShareOf16Bit(type, tf32.value);
    if (!known) return fallback;
    const how = known.tf32
      ? ` as TF32 (${tf32.basis})`
      : tf32.value
        ? ' (this GPU has no TF32)'
        : ' (TF32 not allowed)';
    return { share: known.share, basis: `float32${how}: ${known.basis}` };
  });
  const least = shares.reduce((a, b) => (b.share < a.share ? b : a), shares[0] ?? fallback);
  const several = new Set(shares.map((s) => s.basis)).size > 1;
  return {
    share: Number(least.share.toPrecision(3)),
    basis: `${least.basis}${several ? ", the least of the tier's GPUs" : ''}`,
  };
}

function figure<T>(value: T, basis: string, confidence: Confidence): Figure<T> {
  return { value, basis, confidence };
}

interface ModelEstimate {
  parameterCount: Figure<number>;
  /** Parameters that take part in matmuls (all but the position embedding), for FLOPs. */
  matmulParameters: number;
  peakGpuMemoryGiB: Figure<number>;
  /** Host memory a CPU run needs, MiB. */
  cpuMemoryMiB: number;
  totalTokens?: Figure<number>;
  flops?: Figure<number>;
  /** Whether training runs in fp32 (slow path on GPU tensor cores). */
  fp32: boolean;
  /** Lowest confidence among the inputs. */
  confidence: Confidence;
}

function refuseNonPositiveSizes(hyper: Hyper): void {
  for (const key of SIZE_KEYS) {
    const found = hyper[key];
    if (typeof found?.value === 'number' && found.value <= 0) {
      throw new InvalidRequirement(
        `${key} is ${found.value} (${found.source}): it must be at least 1${key === 'max_iters' ? ' (a job with no training steps has nothing to run)' : ''}`,
      );
    }
  }
}

/**
 * A size that is a string (`--max_iters=5k`, `batch_size = 'sixty'`) stops the script at its first use (nanoGPT's
 * configurator asserts an override keeps the default's type) after a machine has started: refused, as a bad
 * requirement is. Expressions the analysis cannot evaluate are not strings here: they are reported as not literal.
 */
function refuseNonNumericSizes(hyper: Hyper): void {
  for (const key of SIZE_KEYS) {
    const found = hyper[key];
    if (typeof found?.value === 'string') {
      throw new InvalidRequirement(`${key} is '${found.value}' (${found.source}): it must be a number`);
    }
  }
}

/** How the run starts and what it does, from nanoGPT's `init_from` and `eval_only` (see readRun). */
interface RunKind {
  /** The highest confidence the parameter count can have: low when init_from may load a model of another shape. */
  shapeConfidence: Confidence;
  /** The pretrained model whose shape the run takes, with where init_from names it. */
  pretrained?: string;
  /** Whether the run restores a checkpoint with its optimizer state (init_from = 'resume'). */
  resumes: boolean;
  /** For a run that only evaluates (eval_only = True): where that is set, and the max_iters it does not run. */
  evalOnly?: { source: string; skipped?: string };
}

/**
 * Reads `init_from` and `eval_only` the way nanoGPT's train.py acts on them. A GPT-2 checkpoint's shape replaces the
 * script's (from_pretrained overrides all but dropout; a smaller block_size crops the 1024 positions, a larger one is
 * refused, since the model cannot take it); any other value but 'scratch' and 'resume' leaves the shape in doubt.
 * `eval_only = True` runs one evaluation and exits, so max_iters is no longer the job's step total.
 */
function readRun(
  hyper: Hyper,
  nonLiteral: Map<string, string>,
  unknowns: string[],
  assumed: Map<string, string>,
): RunKind {
  const init = hyper.init_from;
  const run: RunKind = { shapeConfidence: 'high', resumes: init?.value === 'resume' };
  const shape = typeof init?.value === 'string' ? PRETRAINED_GPT2.get(init.value) : undefined;
  if (nonLiteral.has('init_from')) {
    assumed.set(
      'init_from',
      "assumed the shape in the code ('scratch' or 'resume'), though the run may load another model",
    );
    run.shapeConfidence = 'low';
  } else if (init && shape) {
    const name = init.value;
    run.pretrained = `${name} (init_from at ${init.source})`;
    const fromCheckpoint: Array<[string, number | string]> = [
      ['n_layer', shape.n_layer],
      ['n_head', shape.n_head],
      ['n_embd', shape.n_embd],
      ['vocab_size', PRETRAINED_VOCAB],
      ['bias', 'True'],
    ];
    for (const [key, value] of fromCheckpoint) {
      hyper[key] = { value, source: run.pretrained };
      nonLiteral.delete(key);
    }
    const block = hyper.block_size;
    if (typeof block?.value === 'number' && block.value > PRETRAINED_CONTEXT) {
      throw new InvalidRequirement(
        `block_size is ${block.value} (${block.source}): init_from='${name}' (${init.source}) loads a model with ${PRETRAINED_CONTEXT} positions, which can be cropped, not extended; it must be at most ${PRETRAINED_CONTEXT}`,
      );
    }
    if (block === undefined) {
      hyper.block_size = { value: PRETRAINED_CONTEXT, source: run.pretrained };
      if (nonLiteral.has('block_size')) {
        assumed.set(
          'block_size',
          `assumed ${PRETRAINED_CONTEXT}, the context of ${name} (the script can only crop it)`,
        );
      }
    }
  } else if (init !== undefined && init.value !== 'scratch' && init.value !== 'resume') {
    unknowns.push(
      `init_from is '${init.value}' (${init.source}), not a model the analysis can size (${[...PRETRAINED_GPT2.keys()].join(', ')}) nor 'scratch' or 'resume'; the parameter count assumes the shape in the code`,
    );
    run.shapeConfidence = 'low';
  }

  const evalOnly = hyper.eval_only;
  if (evalOnly?.value === 'True') {
    const iters = hyper.max_iters;
    // A totalSteps requirement stays: the user's word on the steps the job counts to.
    const skipped = iters && iters.source !== 'requirements.totalSteps' ? iters : undefined;
    run.evalOnly = {
      source: evalOnly.source,
      ...(skipped && { skipped: `max_iters=${skipped.value} (${skipped.source})` }),
    };
    if (skipped) delete hyper.max_iters;
    nonLiteral.delete('max_iters');
  } else if (nonLiteral.has('eval_only')) {
    assumed.set('eval_only', 'assumed False (the run trains)');
  }
  return run;
}

const numeric = (hyper: Hyper, key: string): number | undefined => {
  const v = hyper[key]?.value;
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : undefined;
};

/**
 * What says a run's vocabulary is the corpus's characters (65 for tiny Shakespeare, as nanoGPT's shakespeare_char and
 * the example trainer build it), strongest first: code that builds such a vocabulary (`chars = sorted(list(set(text)))`,
 * `len(chars)`); else the literal `dataset` nanoGPT reads data/<dataset>/meta.pkl for (a character dataset such as
 * `shakespeare_char`, or another, which is GPT-2's BPE); else, with no literal dataset, the words `shakespeare_char`,
 * "character-level" or "char-level" in the files or the command. A corpus's name alone is not enough (nanoGPT's
 * data/shakespeare encodes tinyshakespeare with GPT-2's BPE), nor is any `sorted(set(…))`, which may collect words.
 */
const CHAR_VOCABULARY_CODE: readonly RegExp[] = [
  /\bchars\s*=\s*sorted\(\s*(?:list\(\s*)?set\(/,
  /\blen\(\s*chars\s*\)/,
];
const CHAR_LEVEL_WORDS: readonly RegExp[] = [/shakespeare_char/i, /char(?:acter)?[-_ ]level/i];

/** Where the run says what its vocabulary is. */
interface VocabularySources {
  files: Map<string, string>;
  /** The files that set hyper-parameters, in the order read: only they speak for this run (other configs may not). */
  readFrom: readonly string[];
  command: readonly string[];
  /** The last literal `dataset` setting, if any. */
  dataset?: Hyper[string];
}

/** The sign of a character-level vocabulary the run gives (see CHAR_VOCABULARY_CODE), as `'…' at f:n`; else none. */
function charLevelEvidence({ files, readFrom, command, dataset }: VocabularySources): string | undefined {
  const first = (patterns: readonly RegExp[], text: string) => {
    for (const pattern of patterns) {
      const match = pattern.exec(text);
      if (match) return match[0];
    }
    return undefined;
  };
  // Code is quoted by its line (`chars = sorted(set(text))`), words by themselves.
  const inFiles = (patterns: readonly RegExp[], quoteLine: boolean) => {
    for (const path of readFrom) {
      for (const [index, line] of (files.get(path) ?? '').split('\n').entries()) {
        const found = first(patterns, line);
        if (found) return `'${quoteLine ? line.trim() : found}' at ${path}:${index + 1}`;
      }
    }
    return undefined;
  };
  const code = inFiles(CHAR_VOCABULARY_CODE, true);
  if (code) return code;
  if (dataset)
    return /char/i.test(String(dataset.value)) ? `dataset '${dataset.value}' (${dataset.source})` : undefined;
  const words = inFiles(CHAR_LEVEL_WORDS, false);
  if (words) return words;
  const said = first(CHAR_LEVEL_WORDS, command.join(' '));
  return said ? `'${said}' in the command` : undefined;
}

/** Parameter count, memory, tokens and FLOPs of a GPT-shaped model; undefined when its size is not literal. */
function estimateModel(
  vocabulary: VocabularySources,
  hyper: Hyper,
  run: RunKind,
  framework: Framework,
  usesGpu: boolean,
  unknowns: string[],
  assumed: Map<string, string>,
): ModelEstimate | undefined {
  const L = numeric(hyper, 'n_layer');
  const d = numeric(hyper, 'n_embd');
  const T = numeric(hyper, 'block_size');
  const missing = [['n_layer', L] as const, ['n_embd', d] as const, ['block_size', T] as const]
    .filter(([, v]) => v === undefined)
    .map(([k]) => k);
  if (L === undefined || d === undefined || T === undefined) {
    unknowns.push(
      `model size: ${missing.join(', ')} not found as literals, so parameter count, GPU memory and runtime are unknown (give gpuMemoryGiB and runtimeSeconds, the CLI's --gpu-memory and --runtime, to size the job)`,
    );
    return undefined;
  }
  const paramAssumptions: string[] = [];
  let confidence: Confidence = run.shapeConfidence;
  const lower = (to: Confidence) => {
    const rank = { high: 2, medium: 1, low: 0 };
    if (rank[to] < rank[confidence]) confidence = to;
  };

  let V = numeric(hyper, 'vocab_size');
  if (V === undefined) {
    const evidence = charLevelEvidence(vocabulary);
    V = evidence ? ANALYSIS_ASSUMPTIONS.charLevelVocab : ANALYSIS_ASSUMPTIONS.gpt2Vocab;
    const why = evidence
      ? `assumed ${V} (character-level, taken as tiny Shakespeare's ${V} characters: ${evidence})`
      : `assumed ${V} (GPT-2 vocabulary padded to 64)`;
    assumed.set('vocab_size', why);
    paramAssumptions.push(`vocab_size ${why}`);
    lower('medium');
  }
  const biasValue = hyper.bias?.value;
  const bias = biasValue === undefined ? true : biasValue === 'True';
  if (biasValue === undefined) {
    const why = 'assumed True (the larger count: 11 more parameters per layer per n_embd)';
    assumed.set('bias', why);
    paramAssumptions.push(`bias ${why}`);
  }
  let heads = numeric(hyper, 'n_head');
  if (heads === undefined) {
    heads = Math.max(1, Math.round(d / ANALYSIS_ASSUMPTIONS.headDim));
    assumed.set(
      'n_head',
      `assumed ${heads} (head size ${ANALYSIS_ASSUMPTIONS.headDim}); affects attention memory only`,
    );
    lower('medium');
  }
  const dtype = hyper.dtype?.value;
  const fp32 = dtype === 'float32';
  const activationBytes = fp32 ? 4 : 2;
  if (dtype === undefined) {
    assumed.set('dtype', 'assumed 16-bit autocast (float16/bfloat16), what nanoGPT-style scripts pick on GPUs');
  }

  // GPT with tied lm_head: token + position embeddings; per layer qkv (3d²) + proj (d²) + MLP (8d²) and two
  // LayerNorm weights (2d), plus 11d of biases when bias is on; the final LayerNorm (d, + d bias).
  const perLayer = 12 * d * d + 2 * d + (bias ? 11 * d : 0);
  const params = V * d + T * d + L * perLayer + d + (bias ? d : 0);
  const matmulParameters = params - T * d;
  const paramBasis = `GPT closed form: ${formatCount(V)}×${d} token + ${T}×${d} position embeddings + ${L} layers × (12·${d}² + ${bias ? 13 : 2}·${d}) + final LayerNorm, lm_head tied${run.pretrained ? `; the shape of ${run.pretrained}` : ''}${paramAssumptions.length ? `; ${paramAssumptions.join('; ')}` : ''}`;
  const parameterCount = figure(params, paramBasis, confidence);

  // Memory: weights + grads + Adam states, activations (Korthikanti et al. 2022, no recomputation), logits. An
  // evaluation-only run (torch.no_grad) keeps the fp32 weights and autocast's 16-bit copies of them, one layer's
  // activations at a time, and the logits of this batch and the last (the caller holds them until the next returns)
  // with the loss's fp32 copy and log-softmax; a restored checkpoint brings its Adam state to the GPU as well.
  const evalOnly = run.evalOnly;
  const B = numeric(hyper, 'batch_size');
  const bytesPerParameter =
    evalOnly && !run.resumes
      ? ANALYSIS_ASSUMPTIONS.evaluationBytesPerParameter + (fp32 ? 0 : ANALYSIS_ASSUMPTIONS.autocastWeightCopyBytes)
      : ANALYSIS_ASSUMPTIONS.trainingBytesPerParameter;
  const staticBytes = bytesPerParameter * params;
  const staticBasis = !evalOnly
    ? 'fp32 weights, grads, Adam m+v'
    : run.resumes
      ? "forward only, but init_from='resume' restores the checkpoint's weights and Adam m+v beside the model's"
      : `forward only: fp32 weights${fp32 ? '' : ' + 16-bit autocast copies'}, no grads or Adam state`;
  let activationTotal = 0;
  let activationBasis = 'activations unknown (batch_size not literal)';
  if (B !== undefined) {
    const scale = activationBytes / 2;
    const perLayerAct =
      (ANALYSIS_ASSUMPTIONS.activationBytesPerTokenPerDim * T * B * d +
        ANALYSIS_ASSUMPTIONS.attentionScoreBytes * heads * T * T * B) *
      scale;
    const layerText = `(34·${T}·${B}·${d} + 5·${heads}·${T}²·${B}) × ${scale} B`;
    if (evalOnly) {
      const logitBytes = 2 * (activationBytes + ANALYSIS_ASSUMPTIONS.lossLogitBytes);
      activationTotal = perLayerAct + B * T * V * logitBytes;
      activationBasis = `one layer's activations ${layerText} + logits ${B}·${T}·${V}·${logitBytes} B (this batch's and the last, fp32 copy and log-softmax)`;
    } else {
      const logits = B * T * V * (activationBytes + ANALYSIS_ASSUMPTIONS.lossLogitBytes);
      activationTotal = L * perLayerAct + logits;
      activationBasis = `activations ${L} × ${layerText} + logits ${B}·${T}·${V}·${activationBytes + 4} B`;
    }
  } else {
    unknowns.push('batch_size is not a literal: activation memory and tokens are unknown');
    lower('low');
  }
  const GiB = 1024 ** 3;
  const peakBytes = staticBytes + activationTotal + ANALYSIS_ASSUMPTIONS.cudaContextGiB * GiB;
  const memoryConfidence: Confidence = B === undefined ? 'low' : confidence === 'high' ? 'medium' : 'low';
  const peakGpuMemoryGiB = figure(
    peakBytes / GiB,
    `${bytesPerParameter} B/param × ${formatCount(params)} (${staticBasis}) + ${activationBasis} + ${ANALYSIS_ASSUMPTIONS.cudaContextGiB} GiB CUDA context`,
    memoryConfidence,
  );
  const runtimeMiB = ANALYSIS_ASSUMPTIONS.runtimeMemoryMiB[framework] ?? 64;
  // On a CPU, activations are fp32 whatever dtype says (autocast to 16-bit is a GPU path in these scripts), and there
  // are no 16-bit copies of the weights.
  const cpuActivation = usesGpu ? activationTotal : (activationTotal * 4) / activationBytes;
  const cpuStaticBytes =
    evalOnly && !run.resumes ? ANALYSIS_ASSUMPTIONS.evaluationBytesPerParameter * params : staticBytes;
  const cpuMemoryMiB = (cpuStaticBytes + cpuActivation) / 1024 ** 2 + runtimeMiB;
  // Sizes whose products overflow a double (a literal of 155 digits squared) give figures no record can hold; they
  // are a misread or a typo, which is what to say, whichever tier the user names.
  if (!Number.isFinite(params) || !Number.isFinite(peakBytes) || !Number.isFinite(cpuMemoryMiB))
    throw new InvalidRequirement(
      `the model as read is too large for its parameter count and memory to be figured (n_layer ${L}, n_embd ${d}, block_size ${T}, vocab_size ${V}${B === undefined ? '' : `, batch_size ${B}`}): check those sizes in the code`,
    );

  // PaLM (Chowdhery et al. 2022, app. B): 6N per token plus 12·L·d·T for attention scores, fwd+bwd; a third of it for
  // a forward pass alone.
  const perToken = 6 * matmulParameters + 12 * L * d * T;
  const evalIters = numeric(hyper, 'eval_iters');
  let totalTokens: Figure<number> | undefined;
  let flops: Figure<number> | undefined;
  if (evalOnly) {
    // nanoGPT's estimate_loss: eval_iters batches of each of the train and val splits, then the script exits.
    if (evalIters !== undefined && B !== undefined) {
      const tokens = evalIters * 2 * B * T;
      totalTokens = figure(
        tokens,
        `evaluation only: eval_iters ${evalIters} × 2 splits × batch_size ${B} × block_size ${T}`,
        'high',
      );
      flops = figure(
        (perToken / 3) * tokens,
        `eval_only=True (${evalOnly.source}): one evaluation, forward only: (2 × ${formatCount(matmulParameters)} params + 4·${L}·${d}·${T} attention) × ${formatCount(tokens)} tokens${evalOnly.skipped ? `; ${evalOnly.skipped} is not run` : ''}`,
        confidence === 'high' ? 'high' : 'medium',
      );
    } else {
      unknowns.push(
        `runtime: ${[evalIters === undefined ? 'eval_iters' : '', B === undefined ? 'batch_size' : ''].filter(Boolean).join(' and ')} not literal, so tokens, FLOPs and runtime are unknown (give runtimeSeconds, the CLI's --runtime)`,
      );
    }
  } else {
    const iters = numeric(hyper, 'max_iters');
    let gas = numeric(hyper, 'gradient_accumulation_steps');
    if (gas === undefined) {
      gas = 1;
      assumed.set('gradient_accumulation_steps', 'assumed 1');
    }
    if (iters !== undefined && B !== undefined) {
      const tokens = iters * B * T * gas;
      totalTokens = figure(
        tokens,
        `max_iters ${iters} × batch_size ${B} × block_size ${T} × grad accum ${gas}`,
        'high',
      );
      let total = perToken * tokens;
      let basis = `(6 × ${formatCount(matmulParameters)} params + 12·${L}·${d}·${T} attention) × ${formatCount(tokens)} tokens`;
      const evalInterval = numeric(hyper, 'eval_interval');
      if (evalInterval !== undefined && evalIters !== undefined) {
        const evals = Math.floor(iters / evalInterval) + 1;
        const evalTokens = evals * evalIters * 2 * B * T;
        total += (perToken / 3) * evalTokens;
        basis += ` + evaluation (forward only) ${evals} × ${evalIters} iters × 2 splits × ${B}·${T} tokens`;
      }
      flops = figure(total, basis, confidence === 'high' ? 'high' : 'medium');
    } else {
      unknowns.push(
        `runtime: ${[iters === undefined ? 'max_iters' : '', B === undefined ? 'batch_size' : ''].filter(Boolean).join(' and ')} not literal, so tokens, FLOPs and runtime are unknown (give runtimeSeconds, the CLI's --runtime)`,
      );
    }
  }
  return {
    parameterCount,
    matmulParameters,
    peakGpuMemoryGiB,
    cpuMemoryMiB,
    ...(totalTokens && { totalTokens }),
    ...(flops && { flops }),
    fp32,
    confidence,
  };
}

interface TierContext {
  usesGpu: boolean;
  /** Whether float32 matrix products may run as TF32 (read only for float32 training). */
  tf32: Figure<boolean>;
  framework: Framework;
  spread: Spread;
  model: ModelEstimate | undefined;
  peakGpuMemoryGiB: Figure<number> | undefined;
  hyper: Hyper;
  req: JobRequirements;
  /** The CPU threads the code limits PyTorch to (`torch.set_num_threads`), when it says how many. */
  cpuThreads?: Figure<number>;
}

/**
 * A `torch.set_num_threads(…)` call in the entry script: its argument as an int literal or as a name the code sets
 * (nanoGPT-style `threads = 1`, overridable like any setting). The call may sit in a block (`if device_type ==
 * 'cpu':`): it limits the CPU run wherever it is.
 */
interface ThreadsCall {
  readonly where: string;
  readonly literal?: number;
  readonly name?: string;
}

function cpuThreadsCall(files: Map<string, string>, entryScript: string | undefined): ThreadsCall | undefined {
  const text = entryScript === undefined ? undefined : files.get(entryScript);
  if (text === undefined) return undefined;
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const match = /\btorch\.set_num_threads\(\s*(?:(\d+)|([A-Za-z_]\w*))\s*\)/.exec(stripComment(raw));
    if (!match) continue;
    const where = `torch.set_num_threads(${match[1] ?? match[2]}) at ${entryScript}:${index + 1}`;
    return match[1] !== undefined ? { where, literal: Number(match[1]) } : { where, name: match[2] as string };
  }
  return undefined;
}

/** How many CPU threads the call gives PyTorch, when its argument is a whole number the analysis can read. */
function cpuThreadsOf(call: ThreadsCall, hyper: Hyper): Figure<number> | undefined {
  if (call.literal !== undefined) return call.literal >= 1 ? figure(call.literal, call.where, 'high') : undefined;
  const setting = call.name === undefined ? undefined : hyper[call.name];
  const value = setting?.value;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) return undefined;
  return figure(value, `${call.where}, ${call.name} = ${value} at ${setting?.source}`, 'high');
}

/** Runtime on a tier: startup + FLOPs ÷ (peak × share of the tier the code uses × utilisation). */
function runtimeOn(tier: TierConfig, ctx: TierContext): Figure<number> | undefined {
  if (ctx.req.runtimeSeconds !== undefined) return figure(ctx.req.runtimeSeconds, 'user override', 'high');
  const flops = ctx.model?.flops;
  if (!flops || !ctx.model) return undefined;
  const startup = ANALYSIS_ASSUMPTIONS.startupSeconds[ctx.framework] ?? 1;
  let tflops: number;
  let basis: string;
  if (tier.kind === 'cpu') {
    // PyTorch uses every vCPU unless the code says fewer; the tier's peak is for all of them.
    const threads = ctx.cpuThreads;
    const share = threads === undefined ? 1 : Math.min(1, threads.value / tier.vcpus);
    const shareText = share < 1 ? ` × ${threads?.value} of ${tier.vcpus} vCPUs (${threads?.basis})` : '';
    tflops = tier.peakTflops * share * ANALYSIS_ASSUMPTIONS.cpuUtilisation;
    basis = `${tier.peakTflops} TFLOPS fp32${shareText} × ${ANALYSIS_ASSUMPTIONS.cpuUtilisation} utilisation`;
  } else {
    const { launched, processesPerNode, processesOption, processesInAll, joinsNodes } = ctx.spread;
    const gpus = Math.max(1, tier.gpus);
    const nodesUsed = launched && joinsNodes ? tier.nodes : 1;
    // A count of every node's processes, across joined nodes, is a count of the GPUs of all of them.
    const shared = processesInAll === true && nodesUsed > 1;
    const gpusUsed = launched ? Math.min(processesPerNode ?? gpus, shared ? gpus * nodesUsed : gpus) : 1;
    const share = shared ? gpusUsed / gpus : (gpusUsed / gpus) * nodesUsed;
    const float32 = ctx.model.fp32 ? float32ShareOfTier(tier, ctx.tf32) : undefined;
    const precision = float32?.share ?? 1;
    tflops = tier.peakTflops * share * precision * ANALYSIS_ASSUMPTIONS.gpuUtilisation;
    const gpuText = !launched
      ? tier.gpus > 1
        ? ` ÷ ${tier.gpus} GPUs (no launcher: one process, one GPU)`
        : ''
      : shared
        ? gpusUsed < gpus * nodesUsed
          ? ` on ${gpusUsed} of the ${gpus * nodesUsed} GPUs of ${nodesUsed} nodes (${processesOption})`
          : ''
        : gpusUsed < gpus
          ? ` on ${gpusUsed} of ${gpus} GPUs (${processesOption})`
          : '';
    const nodeText =
      !launched || tier.nodes <= 1 || (shared && gpusUsed < gpus * nodesUsed)
        ? ''
        : joinsNodes
          ? ` × ${tier.nodes} nodes`
          : ` on one of ${tier.nodes} nodes (the launcher does not join them)`;
    const shareText = `${gpuText}${nodeText}`;
    const precisionText = float32 ? ` × ${float32.share} (${float32.basis})` : '';
    basis = `${tier.peakTflops} TFLOPS 16-bit peak${shareText}${precisionText} × ${ANALYSIS_ASSUMPTIONS.gpuUtilisation} utilisation`;
  }
  const seconds = startup + flops.value / (tflops * 1e12);
  const confidence: Confidence = flops.confidence === 'high' ? 'medium' : 'low';
  return figure(seconds, `${formatCount(flops.value)}FLOP ÷ (${basis}) + ${startup} s startup`, confidence);
}

/**
 * GPU memory per GPU a job can count on in a tier: the least that CUDA can use on any of its instance types (an attempt
 * may land on any of them), at most what the tier states.
 */
function usableGpuMemoryOf(tier: TierConfig): number {
  return Math.min(tier.gpuMemoryGiB, ...tier.instanceTypes.map((t) => usableGpuMemoryGiB(t) ?? tier.gpuMemoryGiB));
}

function assessTier(tier: TierConfig, ctx: TierContext): TierAssessment {
  const runtime = runtimeOn(tier, ctx);
  const cost = runtime ? (runtime.value / 3600) * tier.onDemandUsdPerHour * tier.nodes : undefined;
  const base: TierAssessment = {
    tier: tier.id,
    fits: false,
    reason: '',
    ...(runtime && { runtimeSeconds: runtime }),
    ...(cost !== undefined && { onDemandCostUsd: cost }),
  };
  const no = (reason: string): TierAssessment => ({ ...base, fits: false, reason });
  if (ctx.usesGpu && tier.kind === 'cpu') return no('the code uses a GPU and cpu tiers have none');
  if (!ctx.usesGpu && tier.kind === 'gpu') return no('the code runs on the CPU; a gpu tier would bill for an idle GPU');

  const parts: string[] = [];
  if (tier.kind === 'gpu') {
    const need = ctx.peakGpuMemoryGiB;
    if (need) {
      const usable = usableGpuMemoryOf(tier);
      const usableText = usable < tier.gpuMemoryGiB ? ` (${formatGiB(usable)} usable by CUDA)` : '';
      if (need.value > usable) {
        return no(
          `needs ≈${formatGiB(need.value)} of GPU memory; ${tier.id} has ${formatGiB(tier.gpuMemoryGiB)} per GPU${usableText}`,
        );
      }
      parts.push(`≈${formatGiB(need.value)} of ${formatGiB(tier.gpuMemoryGiB)} GPU memory${usableText}`);
    } else {
      parts.push('GPU memory not estimated');
    }
  } else if (ctx.model) {
    const needMiB = ctx.model.cpuMemoryMiB;
    if (needMiB > tier.memoryMiB) {
      return no(`needs ≈${Math.ceil(needMiB)} MiB of memory; ${tier.id} has ${tier.memoryMiB} MiB`);
    }
    parts.push(`≈${Math.ceil(needMiB)} of ${tier.memoryMiB} MiB memory`);
  }
  const limit = maxRuntimeSeconds(tier);
  if (runtime) {
    if (runtime.value > limit) {
      return no(
        `estimated runtime ${formatDuration(runtime.value)} exceeds ${tier.id}'s maximum ${formatDuration(limit)}`,
      );
    }
    // The maximum counts every attempt's run, so on spot the work a reclaim redoes and the restarts count too.
    const onSpot = tier.spotAllowed ? spotRunSeconds(runtime.value, tier.nodes) : undefined;
    if (onSpot && onSpot.highSeconds > limit) {
      return no(
        `estimated runtime ${formatDuration(runtime.value)} leaves too little of ${tier.id}'s maximum ${formatDuration(limit)} for spot interruptions (${onSpot.highCount}, the 95th percentile, take it to ${formatDuration(onSpot.highSeconds)})`,
      );
    }
    const deadline = ctx.req.deadlineSeconds;
    if (deadline !== undefined && runtime.value > deadline) {
      return no(
        `estimated runtime ${formatDuration(runtime.value)} misses the deadline of ${formatDuration(deadline)}`,
      );
    }
    parts.push(`≈${formatDuration(runtime.value)} of ${formatDuration(limit)} max runtime`);
  } else {
    parts.push(`runtime not estimated (max ${formatDuration(limit)})`);
  }
  if (cost !== undefined) parts.push(`≈${formatUsd(cost)} on-demand`);
  return { ...base, fits: true, reason: parts.join(', ') };
}

/** Cheapest estimated on-demand cost first; without runtimes, cheapest per hour (all nodes). */
function costOrder(a: TierAssessment, b: TierAssessment, tiers: readonly TierConfig[]): number {
  const hourly = (t: TierAssessment) => {
    const tier = tiers.find((x) => x.id === t.tier);
    return tier ? tier.onDemandUsdPerHour * tier.nodes : Number.POSITIVE_INFINITY;
  };
  const ca = a.onDemandCostUsd ?? Number.POSITIVE_INFINITY;
  const cb = b.onDemandCostUsd ?? Number.POSITIVE_INFINITY;
  if (ca !== cb) return ca - cb;
  return hourly(a) - hourly(b);
}

function refusalMessage(a: WorkloadAnalysis): string {
  const facts: string[] = [`code ${a.usesGpu.value ? 'uses a GPU' : 'runs on the CPU'} (${a.usesGpu.basis})`];
  if (a.parameterCount) facts.push(`≈${formatCount(a.parameterCount.value)} parameters`);
  if (a.usesGpu.value && a.peakGpuMemoryGiB) facts.push(`≈${formatGiB(a.peakGpuMemoryGiB.value)} peak GPU memory`);
  if (a.flops) facts.push(`≈${formatCount(a.flops.value)}FLOP`);
  const reasons = a.perTier.map((t) => `${t.tier}: ${t.reason}`).join('; ');
  return `no tier fits this workload: ${facts.join(', ')}. ${reasons}`;
}
