// The aggregator's report writer and command line: provenance (machine, commit) in both files, table shape, and the
// options `npm run bench` accepts. Fast: parts are small stand-ins, git runs in a temporary repository.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type BenchReport,
  describeMachine,
  gitState,
  markdownTable,
  renderMarkdown,
  writeReport,
} from '../../bench/report';
import { type BenchPart, BenchUsageError, parseBenchArgs, runBench } from '../../bench/run';

const temporary: string[] = [];
afterEach(() => {
  for (const dir of temporary.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temporary.push(dir);
  return dir;
};

const MACHINE = {
  cpuModel: 'Example CPU @ 2.00GHz',
  cores: 2,
  memoryGiB: 23.4,
  os: 'Linux 6.1.0 x64',
  node: 'v20.20.2',
  python: 'Python 3.11.2',
};
const COMMIT = '0123456789abcdef0123456789abcdef01234567';

function sampleReport(overrides: Partial<BenchReport> = {}): BenchReport {
  return {
    name: 'sample',
    quick: true,
    command: 'npm run bench -- --quick',
    startedAt: '2026-11-21T09:00:00.000Z',
    elapsedSeconds: 42,
    machine: MACHINE,
    git: { commit: COMMIT, dirty: false },
    sections: [
      {
        id: 'control-plane',
        title: 'Part 2 — control plane',
        elapsedSeconds: 30,
        markdown: '| a | b |\n|---|---|\n| 1 | 2 |',
        goals: [
          { part: 'control-plane', metric: 'largest bundle (api)', value: '573.0 KiB', goal: '≤ 250 KiB', met: false },
          { part: 'control-plane', metric: 'state transitions', value: '11', goal: '≤ 30', met: true },
        ],
        result: { transitions: 11 },
      },
    ],
    ...overrides,
  };
}

/** Rows of the markdown table that follows `heading` (header, separator, body), split into cells. */
function tableAfter(markdown: string, heading: string): string[][] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('|'))
      rows.push(
        line
          .slice(1, -1)
          .split(' | ')
          .map((c) => c.trim()),
      );
    else if (rows.length > 0) break;
  }
  return rows;
}

describe('the report writer', () => {
  it('puts the machine description and the commit in the markdown', () => {
    const markdown = renderMarkdown(sampleReport());
    expect(markdown).toContain(`commit \`${COMMIT}\``);
    expect(markdown).not.toContain('uncommitted');
    for (const value of [
      'Example CPU @ 2.00GHz',
      '| cores | 2 |',
      '23.4 GiB',
      'Linux 6.1.0 x64',
      'v20.20.2',
      'Python 3.11.2',
    ]) {
      expect(markdown).toContain(value);
    }
    expect(markdown).toContain('`npm run bench -- --quick`');
  });

  it('says when the tree had uncommitted changes', () => {
    const markdown = renderMarkdown(sampleReport({ git: { commit: COMMIT, dirty: true } }));
    expect(markdown).toContain(`commit \`${COMMIT}\` (with uncommitted changes)`);
  });

  it('renders the goal summary as a five-column table, one row per goal, unmet goals marked', () => {
    const rows = tableAfter(renderMarkdown(sampleReport()), '## Goals').filter((_, i) => i !== 1);
    expect(rows).toEqual([
      ['part', 'metric', 'measured', 'goal', 'met'],
      ['control-plane', 'largest bundle (api)', '573.0 KiB', '≤ 250 KiB', '**no**'],
      ['control-plane', 'state transitions', '11', '≤ 30', 'yes'],
    ]);
  });

  it('includes each part under its title and names parts that failed', () => {
    const failed = {
      id: 'checkpoint',
      title: 'Part 3 — checkpoint',
      elapsedSeconds: 1,
      markdown: '**Failed:** Error: s3rver did not start',
      goals: [],
      result: null,
      error: 'Error: s3rver did not start',
    };
    const report = sampleReport();
    const markdown = renderMarkdown({ ...report, sections: [...report.sections, failed] });
    expect(markdown).toContain('## Part 2 — control plane\n\n_30 s_\n\n| a | b |');
    expect(markdown).toContain('## Part 3 — checkpoint');
    expect(markdown).toContain('Parts that failed: checkpoint.');
  });

  it('writes <name>.md and <name>.json with machine, commit and each part’s result, and no temporary files', () => {
    const dir = tempDir('bench-report-');
    const paths = writeReport(sampleReport(), dir);
    expect(paths).toEqual({ markdown: join(dir, 'sample.md'), json: join(dir, 'sample.json') });
    const json = JSON.parse(readFileSync(paths.json, 'utf8'));
    expect(json.machine).toEqual(MACHINE);
    expect(json.git).toEqual({ commit: COMMIT, dirty: false });
    expect(json.sections[0]).toMatchObject({ id: 'control-plane', result: { transitions: 11 } });
    expect(json.sections[0].markdown).toBeUndefined();
    expect(readFileSync(paths.markdown, 'utf8')).toContain(COMMIT);
    expect(execFileSync('ls', [dir], { encoding: 'utf8' }).trim().split('\n').sort()).toEqual([
      'sample.json',
      'sample.md',
    ]);
  });

  it.each([
    [['x', 'y'], [['1', '2']], '| x | y |\n|---|---|\n| 1 | 2 |'],
    [['a|b'], [['c\nd']], '| a\\|b |\n|---|\n| c d |'],
  ])('renders table %j with escaped cells', (header, rows, expected) => {
    expect(markdownTable(header, rows)).toBe(expected);
  });

  it('refuses a row whose cell count differs from the header', () => {
    expect(() => markdownTable(['a', 'b'], [['1']])).toThrow('table row has 1 cells, header has 2: 1');
  });
});

describe('machine and commit', () => {
  it('describes this machine with what the OS reports', () => {
    const machine = describeMachine();
    expect(machine.cores).toBe(cpus().length);
    expect(machine.memoryGiB).toBeCloseTo(totalmem() / 1024 ** 3, 1);
    expect(machine.node).toBe(process.version);
    expect(machine.cpuModel.length).toBeGreaterThan(0);
  });

  it('reports an interpreter that cannot be run instead of failing', () => {
    expect(describeMachine('/nonexistent/python3').python).toMatch(/^unavailable \(\/nonexistent\/python3: /);
  });

  it('reads the commit and whether tracked files changed, ignoring the given paths', () => {
    const repo = tempDir('bench-git-');
    const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' }).trim();
    git('init', '-q');
    writeFileSync(join(repo, 'code.ts'), 'one\n');
    writeFileSync(join(repo, 'out.md'), 'old\n');
    git('add', '.');
    git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'init');
    const head = git('rev-parse', 'HEAD');
    writeFileSync(join(repo, 'untracked.txt'), 'new\n');
    expect(gitState(repo)).toEqual({ commit: head, dirty: false });
    writeFileSync(join(repo, 'out.md'), 'new results\n');
    expect(gitState(repo, ['out.md'])).toEqual({ commit: head, dirty: false });
    writeFileSync(join(repo, 'code.ts'), 'two\n');
    expect(gitState(repo, ['out.md'])).toEqual({ commit: head, dirty: true });
  });

  it('says unknown outside a repository', () => {
    expect(gitState(tempDir('bench-nogit-'))).toEqual({ commit: 'unknown', dirty: true });
  });
});

describe('the command line', () => {
  it.each([
    [[], { quick: false, strict: false, only: [], name: 'latest' }],
    [['--quick'], { quick: true, strict: false, only: [], name: 'quick' }],
    [
      ['--quick', '--only', 'spot,checkpoint'],
      { quick: true, strict: false, only: ['spot', 'checkpoint'], name: 'quick-only-spot+checkpoint' },
    ],
    [
      ['--only=control-plane', '--name', 'ci', '--strict'],
      { quick: false, strict: true, only: ['control-plane'], name: 'ci' },
    ],
  ])('parses %j', (argv, expected) => {
    expect(parseBenchArgs(argv)).toEqual(expected);
  });

  it.each([
    [['--only', 'spot,gpu'], '--only: unknown part gpu; parts are spot, control-plane, checkpoint, overhead'],
    [['--only'], '--only needs a value'],
    [['--name', '../x'], '--name must be a file name stem, got ../x'],
    [['--fast'], 'unknown option --fast; options are --quick, --only a,b, --name NAME, --strict'],
  ])('refuses %j', (argv, message) => {
    expect(() => parseBenchArgs(argv)).toThrow(new BenchUsageError(message));
  });
});

describe('runBench', () => {
  const part = (id: string, outcome: () => Promise<{ markdown: string; goals: []; result: unknown }>): BenchPart => ({
    id,
    title: `Part ${id}`,
    run: outcome,
  });

  it('runs only the selected parts, keeps going after one fails, and writes both files', async () => {
    const dir = tempDir('bench-run-');
    const ran: string[] = [];
    const parts = [
      part('a', async () => {
        ran.push('a');
        return { markdown: 'A table', goals: [], result: { a: 1 } };
      }),
      part('b', async () => {
        ran.push('b');
        throw new RangeError('b broke');
      }),
      part('c', async () => {
        ran.push('c');
        return { markdown: 'C table', goals: [], result: { c: 3 } };
      }),
    ];
    const { report, paths } = await runBench(
      { quick: true, strict: false, only: ['b', 'c'], name: 'unit' },
      { parts, resultsDir: dir, log: () => undefined },
    );
    expect(ran).toEqual(['b', 'c']);
    expect(report.sections.map((s) => [s.id, s.error])).toEqual([
      ['b', 'RangeError: b broke'],
      ['c', undefined],
    ]);
    expect(report.command).toBe('npm run bench -- --quick --only b,c');
    expect(report.git.commit).toMatch(/^([0-9a-f]{40}|unknown)$/);
    const markdown = readFileSync(paths.markdown, 'utf8');
    expect(markdown).toContain('**Failed:** RangeError: b broke');
    expect(markdown).toContain('C table');
    expect(JSON.parse(readFileSync(paths.json, 'utf8')).sections[1].result).toEqual({ c: 3 });
  });
});
