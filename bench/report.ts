/**
 * The combined benchmark report: which machine and which commit produced the figures, a goal summary, and each
 * part's tables. bench/run.ts fills it; this module only describes the machine, reads git, renders and writes.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { arch, cpus, release, totalmem, type } from 'node:os';
import { join } from 'node:path';

/** The machine the figures were measured on. */
export interface MachineDescription {
  readonly cpuModel: string;
  /** Logical cores Node sees. */
  readonly cores: number;
  readonly memoryGiB: number;
  /** Kernel name, release and architecture (`Linux 6.1.0 x64`). */
  readonly os: string;
  readonly node: string;
  /** `Python 3.11.2` from the interpreter the harness runs on, or why it could not be asked. */
  readonly python: string;
}

/** The commit the figures belong to. */
export interface GitState {
  /** `git rev-parse HEAD`, or `unknown` outside a repository. */
  readonly commit: string;
  /** Whether tracked files differ from the commit (the figures may not be reproducible from it alone). */
  readonly dirty: boolean;
}

/** One goal and where the run stands against it. */
export interface GoalRow {
  readonly part: string;
  readonly metric: string;
  readonly value: string;
  readonly goal: string;
  readonly met: boolean;
}

/** One part's outcome: its tables and raw result, or the error that stopped it. */
export interface BenchSection {
  /** Part id as `--only` names it (spot, control-plane, checkpoint, overhead). */
  readonly id: string;
  readonly title: string;
  readonly elapsedSeconds: number;
  /** Markdown tables, or the error message when it failed. */
  readonly markdown: string;
  readonly goals: readonly GoalRow[];
  /** The part's full result for the JSON file (null when it failed). */
  readonly result: unknown;
  readonly error?: string;
}

/** A whole `npm run bench` run. */
export interface BenchReport {
  /** File name stem under bench/results (`latest`, `quick`). */
  readonly name: string;
  readonly quick: boolean;
  /** The command that produced it, as a reader would type it. */
  readonly command: string;
  readonly startedAt: string;
  readonly elapsedSeconds: number;
  readonly machine: MachineDescription;
  readonly git: GitState;
  readonly sections: readonly BenchSection[];
}

const PYTHON = '/usr/bin/python3';

/** Describes this machine (CPU, cores, memory, OS, Node, the harness's Python). */
export function describeMachine(python = PYTHON): MachineDescription {
  const list = cpus();
  let pythonVersion: string;
  try {
    pythonVersion = execFileSync(python, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (error) {
    pythonVersion = `unavailable (${python}: ${(error as Error).message.split('\n')[0] ?? 'failed'})`;
  }
  return {
    cpuModel: list[0]?.model.trim() ?? 'unknown',
    cores: list.length,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    os: `${type()} ${release()} ${arch()}`,
    node: process.version,
    python: pythonVersion,
  };
}

/** The commit checked out in `cwd` and whether tracked files (outside `ignore` paths) are modified. */
export function gitState(cwd: string, ignore: readonly string[] = []): GitState {
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  try {
    const commit = git('rev-parse', 'HEAD');
    // Untracked files (other work in progress, build output) do not change what the commit measures.
    const pathspec = ignore.length > 0 ? ['--', '.', ...ignore.map((path) => `:(exclude)${path}`)] : [];
    const dirty = git('status', '--porcelain', '--untracked-files=no', ...pathspec) !== '';
    return { commit, dirty };
  } catch {
    return { commit: 'unknown', dirty: true };
  }
}

/** Escapes a value for a markdown table cell. */
export function cell(value: string | number): string {
  return String(value).replaceAll('|', '\\|').replaceAll('\n', ' ');
}

/** A markdown table from a header and rows (each row as many cells as the header). */
export function markdownTable(header: readonly string[], rows: ReadonlyArray<readonly (string | number)[]>): string {
  for (const row of rows) {
    if (row.length !== header.length) {
      throw new RangeError(`table row has ${row.length} cells, header has ${header.length}: ${row.join(' | ')}`);
    }
  }
  return [
    `| ${header.map(cell).join(' | ')} |`,
    `|${header.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.map(cell).join(' | ')} |`),
  ].join('\n');
}

/** The whole report as markdown: provenance, machine, goal summary, then each part. */
export function renderMarkdown(report: BenchReport): string {
  const m = report.machine;
  const failed = report.sections.filter((s) => s.error !== undefined);
  const lines = [
    `# Trainyard benchmarks${report.quick ? ' (quick)' : ''}`,
    '',
    `Produced by \`${report.command}\` at ${report.startedAt} in ${report.elapsedSeconds.toFixed(0)} s, ` +
      `commit \`${report.git.commit}\`${report.git.dirty ? ' (with uncommitted changes)' : ''}.`,
    '',
    markdownTable(
      ['machine', 'value'],
      [
        ['CPU', m.cpuModel],
        ['cores', m.cores],
        ['memory', `${m.memoryGiB} GiB`],
        ['OS', m.os],
        ['Node', m.node],
        ['Python', m.python],
      ],
    ),
    '',
    '## Goals',
    '',
    markdownTable(
      ['part', 'metric', 'measured', 'goal', 'met'],
      report.sections.flatMap((s) => s.goals.map((g) => [g.part, g.metric, g.value, g.goal, g.met ? 'yes' : '**no**'])),
    ),
  ];
  if (failed.length > 0) lines.push('', `Parts that failed: ${failed.map((s) => s.id).join(', ')}.`);
  for (const section of report.sections) {
    lines.push('', `## ${section.title}`, '', `_${section.elapsedSeconds.toFixed(0)} s_`, '', section.markdown);
  }
  return `${lines.join('\n')}\n`;
}

/** The report as JSON (machine, commit, goals and every part's full result). */
export function renderJson(report: BenchReport): string {
  const { sections, ...rest } = report;
  return `${JSON.stringify(
    { ...rest, sections: sections.map(({ markdown: _markdown, ...section }) => section) },
    null,
    1,
  )}\n`;
}

/** Writes `<name>.md` and `<name>.json` under `directory`, each through a temporary file and a rename. */
export function writeReport(report: BenchReport, directory: string): { markdown: string; json: string } {
  mkdirSync(directory, { recursive: true });
  const paths = { markdown: join(directory, `${report.name}.md`), json: join(directory, `${report.name}.json`) };
  for (const [path, text] of [
    [paths.markdown, renderMarkdown(report)],
    [paths.json, renderJson(report)],
  ] as const) {
    writeFileSync(`${path}.tmp`, text);
    renameSync(`${path}.tmp`, path);
  }
  return paths;
}
