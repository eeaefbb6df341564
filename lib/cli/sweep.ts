/**
 * Sweeps: one project submitted as a job per combination of parameter values (`trainyard sweep`). Parameters are
 * declared with `--param name=v1,v2,…` and used in the command as `{name}`; the jobs are the cartesian product, the
 * first parameter varying slowest, numbered from 1. Everything here is checked before anything is sent.
 */
import { CliError, EXIT_CODES } from './exit-codes';

/** One parameter and its values, in the order given. */
export interface SweepParam {
  readonly name: string;
  readonly values: readonly string[];
}

/** One job of a sweep. */
export interface SweepJob {
  /** 1-based position in the sweep. */
  readonly index: number;
  /** The value of each parameter, by name. */
  readonly params: Readonly<Record<string, string>>;
  /** The command with every `{name}` replaced by its value. */
  readonly command: readonly string[];
}

/** Most jobs one sweep may submit. */
export const MAX_SWEEP_JOBS = 200;
/** Jobs a sweep may submit unless `--max-jobs` says otherwise. */
export const DEFAULT_MAX_SWEEP_JOBS = 50;
/** Most values of one parameter. */
export const MAX_SWEEP_VALUES = 100;
/** Longest base Idempotency-Key: each job's key adds `-<index>` to it, and keys may be 128 characters. */
export const MAX_SWEEP_KEY_LENGTH = 128 - `-${MAX_SWEEP_JOBS}`.length;

const NAME = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;
const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

function usage(message: string, code = 'InvalidSweep'): CliError {
  return new CliError(message, EXIT_CODES.usage, code);
}

/** Parses one `--param name=v1,v2,…`. */
export function parseSweepParam(text: string): SweepParam {
  const eq = text.indexOf('=');
  const name = eq < 0 ? text : text.slice(0, eq);
  if (eq < 0 || !NAME.test(name)) {
    throw usage(
      `--param must be name=value1,value2,… with a name of 1-32 letters, digits and '_' (not starting with a digit), got "${text}"`,
    );
  }
  const values = text.slice(eq + 1).split(',');
  if (values.some((v) => v === '')) {
    throw usage(`--param ${name}: values must not be empty (a comma at the start, the end or twice), got "${text}"`);
  }
  if (values.length > MAX_SWEEP_VALUES) {
    throw usage(`--param ${name}: at most ${MAX_SWEEP_VALUES} values, got ${values.length}`);
  }
  const repeated = values.find((v, i) => values.indexOf(v) !== i);
  if (repeated !== undefined) throw usage(`--param ${name}: value "${repeated}" is given twice`);
  return { name, values };
}

/**
 * The jobs of a sweep: every combination of the parameters' values, each with its command. Refused: no parameter, a
 * parameter declared twice, a `{name}` in the command that no parameter declares (a typo would submit the same job
 * over and over), a parameter the command never uses (its jobs would be identical), or more than `maxJobs` jobs.
 */
export function expandSweep(params: readonly SweepParam[], command: readonly string[], maxJobs: number): SweepJob[] {
  if (params.length === 0) {
    throw usage('a sweep needs at least one --param name=value1,value2,… used in the command as {name}');
  }
  const declared = new Set<string>();
  for (const p of params) {
    if (declared.has(p.name)) throw usage(`--param ${p.name} is declared twice; give all its values in one --param`);
    declared.add(p.name);
  }
  const used = new Set([...command.join('\n').matchAll(PLACEHOLDER)].map((m) => m[1] as string));
  const unknown = [...used].filter((name) => !declared.has(name));
  if (unknown.length > 0) {
    throw usage(
      `the command uses ${unknown.map((n) => `{${n}}`).join(', ')}, which no --param declares; declared: ${[...declared].join(', ')}`,
    );
  }
  const unused = [...declared].filter((name) => !used.has(name));
  if (unused.length > 0) {
    throw usage(
      `--param ${unused.join(', ')} ${unused.length === 1 ? 'is' : 'are'} not used in the command: put {${unused[0]}} where its value goes, e.g. -- python train.py --${unused[0]}={${unused[0]}}`,
    );
  }
  const count = params.reduce((n, p) => n * p.values.length, 1);
  if (count > maxJobs) {
    throw usage(
      `the sweep has ${count} jobs (${params.map((p) => `${p.values.length} ${p.name}`).join(' × ')}), over --max-jobs ${maxJobs}; raise --max-jobs (at most ${MAX_SWEEP_JOBS}) or sweep fewer values`,
      'TooManyJobs',
    );
  }
  const jobs: SweepJob[] = [];
  for (let i = 0; i < count; i++) {
    const values: Record<string, string> = {};
    let rest = i;
    for (let p = params.length - 1; p >= 0; p--) {
      const param = params[p] as SweepParam;
      values[param.name] = param.values[rest % param.values.length] as string;
      rest = Math.floor(rest / param.values.length);
    }
    const ordered = Object.fromEntries(params.map((p) => [p.name, values[p.name] as string]));
    jobs.push({
      index: i + 1,
      params: ordered,
      command: command.map((part) => part.replace(PLACEHOLDER, (_, name: string) => ordered[name] as string)),
    });
  }
  return jobs;
}

/** The Idempotency-Key of a sweep's job: the sweep's key and the job's index, so a re-run submits only what is missing. */
export function sweepJobKey(sweepKey: string, index: number): string {
  return `${sweepKey}-${index}`;
}
