import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { configSchema } from '../../lib/config';
import { CONFIG_DESCRIPTIONS } from '../../lib/config-descriptions';
import {
  CONFIG_REFERENCE_MARKERS,
  ConfigDocsError,
  configReferenceMarkdown,
  configReferenceRows,
  configReferenceSection,
  markdownTable,
  replaceConfigReference,
} from '../../lib/config-docs';

const README = path.join(import.meta.dirname, '..', '..', 'README.md');
const { start, end } = CONFIG_REFERENCE_MARKERS;

/**
 * Every key of a zod schema with its `z.describe()` text, found by walking zod's own classes (not the JSON Schema the
 * generator uses), so the two walks check each other.
 */
function zodKeys(schema: z.ZodMiniType, prefix = ''): Map<string, string | undefined> {
  const keys = new Map<string, string | undefined>();
  const visit = (node: z.ZodMiniType, at: string) => {
    const inner = wrappedBy(node);
    if (inner) {
      visit(inner, at);
    } else if (node instanceof z.ZodMiniObject) {
      for (const [key, child] of Object.entries(node.def.shape as Record<string, z.ZodMiniType>)) {
        const childPath = at ? `${at}.${key}` : key;
        keys.set(childPath, descriptionOf(child) ?? keys.get(childPath));
        visit(child, childPath);
      }
    } else if (node instanceof z.ZodMiniArray) {
      visit(node.def.element as z.ZodMiniType, `${at}[]`);
    } else if (node instanceof z.ZodMiniDiscriminatedUnion) {
      for (const option of node.def.options as z.ZodMiniType[]) visit(option, at);
    }
  };
  visit(schema, prefix);
  return keys;
}

/** The schema a default, prefault or optional wraps; undefined for any other schema. */
function wrappedBy(node: z.ZodMiniType): z.ZodMiniType | undefined {
  if (node instanceof z.ZodMiniDefault || node instanceof z.ZodMiniPrefault || node instanceof z.ZodMiniOptional) {
    return node.def.innerType as z.ZodMiniType;
  }
  return undefined;
}

/** The description on a schema or any wrapper inside it (described outside or inside its default). */
function descriptionOf(node: z.ZodMiniType): string | undefined {
  const description = z.globalRegistry.get(node)?.description;
  if (description) return description;
  const inner = wrappedBy(node);
  return inner ? descriptionOf(inner) : undefined;
}

/** The trimmed cells of a Markdown table line (`\|` is a pipe inside a cell). */
function cellsOf(line: string): string[] {
  return line
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}

/** The cells of the table line whose first cell is `first`. */
function tableRow(markdown: string, first: string): string[] | undefined {
  return markdown
    .split('\n')
    .filter((line) => line.startsWith('|'))
    .map(cellsOf)
    .find((cells) => cells[0] === first);
}

function rowFor(pathText: string) {
  const row = configReferenceRows().find((r) => r.path === pathText);
  if (!row) throw new Error(`no row for ${pathText}`);
  return row;
}

describe('README config reference', () => {
  it('holds exactly the table generated from the schema (run npx tsx scripts/config-docs.ts --write)', () => {
    const readme = readFileSync(README, 'utf8');
    expect(configReferenceSection(readme)).toBe(configReferenceMarkdown());
  });

  it('has one row for every key of the schema and no row for anything else', () => {
    const fromZod = [...zodKeys(configSchema).keys()].sort();
    const fromTable = configReferenceRows()
      .map((r) => r.path)
      .sort();
    expect(fromTable).toEqual(fromZod);
    expect(fromZod).toEqual(expect.arrayContaining(['tiers[].maxRuntime', 'network.subnetIds', 'limits.maxEnvVars']));
  });

  it('names every key in the README table', () => {
    const section = configReferenceSection(readFileSync(README, 'utf8'));
    for (const key of zodKeys(configSchema).keys()) expect(tableRow(section, `\`${key}\``), key).toBeDefined();
  });

  it('gives every key a description in lib/config-descriptions.ts, and describes no key the schema lacks', () => {
    const keys = [...zodKeys(configSchema).keys()];
    expect(keys.filter((key) => !CONFIG_DESCRIPTIONS[key]?.trim())).toEqual([]);
    expect(Object.keys(CONFIG_DESCRIPTIONS).filter((key) => !keys.includes(key))).toEqual([]);
    for (const row of configReferenceRows()) expect(row.description.length, row.path).toBeGreaterThan(10);
  });

  it('keeps the descriptions out of the schema the Lambdas parse with', () => {
    // The schema carries no description text (it would weigh down every Lambda bundle); only the map does.
    expect([...zodKeys(configSchema).values()].filter((text) => text !== undefined)).toEqual([]);
  });
});

describe('configReferenceRows', () => {
  // Expected values read off lib/config.ts by hand.
  it.each([
    ['budgets.warnThreshold', 'number, > 0 and < 1', '`0.7`'],
    ['budgets.blockThreshold', 'number, > 0 and ≤ 2', '`1`'],
    ['spotPolicy.capacityWaitMinutes', 'integer, 10–1440', '`20`'],
    ['spotPolicy.reclaimsBeforeOnDemand', 'integer, 1–20', '`2`'],
    ['tiers[].vcpus', 'number, > 0 and ≤ 192', 'required'],
    ['tiers[].memoryMiB', 'integer, ≥ 128', 'required'],
    ['tiers[].spotUsdPerHour', 'number, > 0', '—'],
    ['tiers[].kind', '"cpu" | "gpu"', 'required'],
    ['teams[].principals', 'array of strings', '`[]`'],
    ['teams', 'array of objects, at least 1', '`[{"id":"research","monthlyBudgetUsd":500}]`'],
    ['network.mode', '"new" | "existing"', 'required'],
    ['network.natGateways', 'integer, 0–3', '`1`'],
    ['network.subnetIds', 'array of strings, at least 1', 'required'],
    ['alerts.emails', 'array of e-mail addresses', '`[]`'],
    ['limits.maxBundleMiB', 'integer, 1–1024', '`500`'],
  ])('%s is %s with default %s', (key, type, defaultText) => {
    const row = rowFor(key);
    expect(row.type).toBe(type);
    expect(row.default).toBe(defaultText);
  });

  it('summarises the seed tiers default by tier id', () => {
    expect(rowFor('tiers').default).toBe(
      '6 items: `cpu-small`, `cpu-large`, `gpu-small`, `gpu-medium`, `gpu-large`, `gpu-multinode`',
    );
  });

  it('says which network mode a mode-specific key belongs to', () => {
    expect(rowFor('network.maxAzs').description).toMatch(/^Only with `mode: "new"`\. /);
    expect(rowFor('network.vpcId').description).toMatch(/^Only with `mode: "existing"`\. /);
    expect(rowFor('network.mode').description).not.toMatch(/^Only with/);
  });

  it('walks nested objects, arrays of objects and records of a small schema', () => {
    const schema = z.object({
      a: z
        .object({ b: z._default(z.int().check(z.gte(1), z.lte(3)), 2).check(z.describe('b text')) })
        .check(z.describe('a text')),
      list: z.array(z.object({ id: z.string().check(z.describe('id text')) })).check(z.describe('list text')),
      map: z.optional(z.record(z.string(), z.boolean())).check(z.describe('map text')),
    });
    expect(configReferenceRows(schema)).toEqual([
      { path: 'a', type: 'object', default: 'required', description: 'a text' },
      { path: 'a.b', type: 'integer, 1–3', default: '`2`', description: 'b text' },
      { path: 'list', type: 'array of objects', default: 'required', description: 'list text' },
      { path: 'list[].id', type: 'string', default: 'required', description: 'id text' },
      { path: 'map', type: 'map of key → boolean', default: '—', description: 'map text' },
    ]);
  });
});

describe('configReferenceMarkdown', () => {
  it('escapes pipes and newlines so a description stays in its cell', () => {
    const schema = z.object({ k: z.enum(['x', 'y']).check(z.describe('either x | y\nnothing else')) });
    const line = configReferenceMarkdown(schema)
      .split('\n')
      .find((l) => l.startsWith('| `k`'));
    expect(line).toBe('| `k` | "x" \\| "y" | required | either x \\| y nothing else |');
    expect(tableRow(configReferenceMarkdown(schema), '`k`')).toEqual([
      '`k`',
      '"x" \\| "y"',
      'required',
      'either x \\| y nothing else',
    ]);
  });

  it('lists every seed tier with its prices', () => {
    const markdown = configReferenceMarkdown();
    const row = (tier: string) => tableRow(markdown, `\`${tier}\``)?.join(' | ');
    expect(row('gpu-small')).toBe(
      '`gpu-small` | gpu | g4dn.xlarge, g6.xlarge, g5.xlarge | 1 × 16 | 4 | 15000 | 1 | 2h | 0.526 | 0.19',
    );
    expect(row('gpu-multinode')).toBe(
      '`gpu-multinode` | gpu | g5.12xlarge | 4 × 24 | 46 | 180000 | 2 | 24h | 5.672 | no spot',
    );
    expect(row('cpu-small')).toBe('`cpu-small` | cpu | Fargate | — | 0.5 | 512 | 1 | 30s | 0.025 | 0.008');
  });

  it('pads every column to its widest cell, as biome formats Markdown tables', () => {
    expect(
      markdownTable(
        ['a', 'long header'],
        [
          ['wider cell', 'x'],
          ['≥ 1', ''],
        ],
      ),
    ).toBe(
      [
        '| a          | long header |',
        '| ---------- | ----------- |',
        '| wider cell | x           |',
        '| ≥ 1        |             |',
      ].join('\n'),
    );
  });

  it('renders the same text every time', () => {
    expect(configReferenceMarkdown()).toBe(configReferenceMarkdown());
  });
});

describe('replaceConfigReference', () => {
  const readme = `# Title\n\nintro\n\n${start}\nold table\n${end}\n\n## Next\n`;

  it('replaces only the text between the markers', () => {
    expect(replaceConfigReference(readme, '| new |')).toBe(
      `# Title\n\nintro\n\n${start}\n\n| new |\n\n${end}\n\n## Next\n`,
    );
  });

  it('changes nothing when run again', () => {
    const once = replaceConfigReference(readme, '| new |');
    expect(replaceConfigReference(once, '| new |')).toBe(once);
    expect(configReferenceSection(once)).toBe('| new |');
  });

  it.each([
    ['no markers', '# Title\n', 'found 0 and 0'],
    ['the end marker missing', `${start}\ntext\n`, 'found 1 and 0'],
    ['a duplicated start marker', `${start}\n${start}\n${end}\n`, 'found 2 and 1'],
  ])('refuses a README with %s', (_, text, detail) => {
    expect(() => replaceConfigReference(text, 'x')).toThrow(ConfigDocsError);
    expect(() => replaceConfigReference(text, 'x')).toThrow(
      `README must contain ${start} and ${end} exactly once each; ${detail}`,
    );
  });

  it('refuses markers in the wrong order', () => {
    expect(() => configReferenceSection(`${end}\n${start}\n`)).toThrow(
      `README has ${end} before ${start}; the start marker must come first`,
    );
  });
});
