/**
 * Prints README's configuration reference, generated from the zod schema (lib/config-docs.ts), or with `--write`
 * rewrites README.md between its config-reference markers; `--check` exits 1 when README is out of date.
 *
 *   npx tsx scripts/config-docs.ts [--write | --check]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { ConfigDocsError, configReferenceMarkdown, replaceConfigReference } from '../lib/config-docs';

const README = path.join(import.meta.dirname, '..', 'README.md');
const MODES = ['--write', '--check'] as const;

function main(args: readonly string[]): number {
  const unknown = args.filter((a) => !(MODES as readonly string[]).includes(a));
  if (unknown.length > 0 || args.length > 1) {
    process.stderr.write(`usage: npx tsx scripts/config-docs.ts [--write | --check]; got ${args.join(' ')}\n`);
    return 2;
  }
  const markdown = configReferenceMarkdown();
  if (args.length === 0) {
    process.stdout.write(`${markdown}\n`);
    return 0;
  }
  const current = readFileSync(README, 'utf8');
  const updated = replaceConfigReference(current, markdown);
  if (args[0] === '--check') {
    if (updated === current) return 0;
    process.stderr.write('README.md config reference is out of date: run npx tsx scripts/config-docs.ts --write\n');
    return 1;
  }
  if (updated === current) {
    process.stdout.write('README.md config reference is already up to date\n');
  } else {
    writeFileSync(README, updated);
    process.stdout.write('README.md config reference rewritten from lib/config.ts\n');
  }
  return 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof ConfigDocsError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exitCode = 1;
}
