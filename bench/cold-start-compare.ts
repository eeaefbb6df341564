/**
 * Compares the Lambdas' cold starts at another commit with the working tree's, on this machine, in one run:
 *
 *   npx tsx bench/cold-start-compare.ts <commit> [--runs 15] [handler …]
 *
 * A cold start moves with the host as much as with the code (README, Performance), so two figures taken an hour apart
 * say little about a change. This bundles each handler from both trees (the commit checked out in a temporary git
 * worktree, both bundled with this tree's bundling options and node_modules) and starts them in fresh processes
 * taken in turn, base then head, run after run, so a slower spell of the host falls on both alike. It prints the
 * median of each, process start → handler ready, as `npm run bench -- --only control-plane` measures it, as a
 * markdown table on stdout (progress on stderr).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseConfig } from '../lib/config';
import { bundleLambda, lambdaEntries, measureColdStarts } from './control-plane';
import { describeMachine, gitState, markdownTable } from './report';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Inside node_modules, so that the bundles' external `@aws-sdk/*` packages resolve from this tree. */
const BUILD_DIR = join(ROOT, 'node_modules', '.cache', 'trainyard-bench', 'cold-start-compare');

/** Raised for a command line this script does not accept. */
export class CompareUsageError extends Error {
  override name = 'CompareUsageError';
}

/** What to compare: the base commit, how many starts of each bundle, and which handlers (none: all). */
export interface CompareArgs {
  readonly base: string;
  readonly runs: number;
  readonly handlers: readonly string[];
}

/** Parses `<commit> [--runs N] [handler …]`. */
export function parseCompareArgs(argv: readonly string[]): CompareArgs {
  let base: string | undefined;
  let runs = 15;
  const handlers: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === '--runs') {
      const value = Number(argv[++i]);
      if (!Number.isInteger(value) || value < 1 || value > 200)
        throw new CompareUsageError(`--runs must be a whole number 1-200, got ${argv[i] ?? 'nothing'}`);
      runs = value;
    } else if (arg.startsWith('--')) {
      throw new CompareUsageError(
        `unknown option ${arg}; usage: cold-start-compare.ts <commit> [--runs N] [handler …]`,
      );
    } else if (base === undefined) {
      base = arg;
    } else {
      handlers.push(arg);
    }
  }
  if (base === undefined)
    throw new CompareUsageError(
      'name the commit to compare with; usage: cold-start-compare.ts <commit> [--runs N] [handler …]',
    );
  return { base, runs, handlers };
}

async function main(): Promise<void> {
  const args = parseCompareArgs(process.argv.slice(2));
  const known = lambdaEntries().map((e) => e.handler);
  const unknown = args.handlers.filter((h) => !known.includes(h));
  if (unknown.length > 0)
    throw new CompareUsageError(`unknown handler ${unknown.join(', ')}; known: ${known.join(', ')}`);
  const handlers = args.handlers.length > 0 ? args.handlers : known;
  const git = (...a: string[]) => execFileSync('git', a, { cwd: ROOT, encoding: 'utf8' }).trim();
  const commit = git('rev-parse', '--verify', `${args.base}^{commit}`);
  const worktree = join(mkdtempSync(join(tmpdir(), 'trainyard-cold-start-')), 'base');
  git('worktree', 'add', '--detach', worktree, commit);
  try {
    symlinkSync(join(ROOT, 'node_modules'), join(worktree, 'node_modules'));
    rmSync(BUILD_DIR, { recursive: true, force: true });
    mkdirSync(BUILD_DIR, { recursive: true });
    const config = parseConfig({}, 'defaults');
    const baseEntries = new Map(lambdaEntries(worktree).map((e) => [e.handler, e.entry]));
    const headEntries = new Map(lambdaEntries().map((e) => [e.handler, e.entry]));
    // Base then head of each handler, in this order: measureColdStarts takes the bundles in turn, run after run.
    const files = new Map<string, string>();
    for (const handler of handlers) {
      const baseEntry = baseEntries.get(handler);
      if (baseEntry === undefined) {
        console.error(`${handler}: not at ${commit.slice(0, 7)}, left out`);
        continue;
      }
      for (const [side, entry] of [
        ['base', baseEntry],
        ['head', headEntries.get(handler) as string],
      ] as const) {
        const file = join(BUILD_DIR, `${side}-${handler}.mjs`);
        await bundleLambda(entry, file, config);
        files.set(`${side} ${handler}`, file);
      }
    }
    const medians = new Map(
      (await measureColdStarts(files, args.runs, config, (line) => console.error(line))).map((f) => [
        f.handler,
        f.medianMs,
      ]),
    );
    const tree = gitState(ROOT, ['bench/results']);
    const machine = describeMachine();
    console.log(
      `Produced by \`npx tsx bench/cold-start-compare.ts ${args.base} --runs ${args.runs}\` at ${new Date().toISOString()}: ` +
        `base ${commit.slice(0, 7)}, head ${tree.commit.slice(0, 7)}${tree.dirty ? ' with uncommitted changes' : ''}; ` +
        `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}.`,
    );
    console.log('');
    console.log(
      `Cold start (fresh process start → handler ready), median of ${args.runs} processes each, base and head alternated:`,
    );
    console.log('');
    const rows = handlers
      .filter((handler) => medians.has(`base ${handler}`))
      .map((handler) => {
        const base = medians.get(`base ${handler}`) as number;
        const head = medians.get(`head ${handler}`) as number;
        return [handler, `${base.toFixed(0)} ms`, `${head.toFixed(0)} ms`, `${(head - base).toFixed(0)} ms`];
      });
    console.log(markdownTable(['Lambda', 'base', 'head', 'change'], rows));
  } finally {
    git('worktree', 'remove', '--force', worktree);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    console.error(error instanceof CompareUsageError ? `cold-start-compare: ${error.message}` : error);
    process.exit(error instanceof CompareUsageError ? 2 : 1);
  });
}
