/**
 * The configuration reference in README.md, generated from the zod schema (lib/config.ts) so the table cannot drift
 * from what `parseConfig` accepts: one row per key with its dotted path, type, default and description (from
 * lib/config-descriptions.ts, by path; a schema's own `.describe()` text where the map has none), then the seed tiers
 * that apply when the file lists none.
 *
 * Pure module (zod only): `scripts/config-docs.ts` prints the table or rewrites README's section between the markers,
 * and test/infra/config-docs.test.ts checks that README holds exactly what this module renders.
 */
import * as z from 'zod/mini';
import { configSchema } from './config';
import { CONFIG_DESCRIPTIONS } from './config-descriptions';

/** Raised when README's generated section can't be found or is malformed; names the markers expected. */
export class ConfigDocsError extends Error {
  override name = 'ConfigDocsError';
}

/** The comments that fence the generated section in README.md. */
export const CONFIG_REFERENCE_MARKERS = {
  start: '<!-- config-reference:start -->',
  end: '<!-- config-reference:end -->',
} as const;

/** One row of the reference: a key of `trainyard.config.json`. */
export interface ConfigReferenceRow {
  /** Dotted path; `[]` marks the elements of an array (`tiers[].vcpus`). */
  readonly path: string;
  /** Type and range in words (`integer, 1–20`). */
  readonly type: string;
  /** The default as JSON, `required`, or `—` for an optional key with no default. */
  readonly default: string;
  /** What the key means, with the variant it belongs to when the key lives in one branch of a union. */
  readonly description: string;
}

/** The subset of JSON Schema (draft 2020-12, as `z.toJSONSchema` writes it) that the config schema uses. */
interface JsonSchemaNode {
  type?: string;
  description?: string;
  default?: unknown;
  properties?: Record<string, JsonSchemaNode>;
  required?: string[];
  items?: JsonSchemaNode;
  additionalProperties?: JsonSchemaNode | boolean;
  oneOf?: JsonSchemaNode[];
  anyOf?: JsonSchemaNode[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
}

// zod writes Number.MAX_SAFE_INTEGER as the maximum of an unbounded .int(): that is no bound worth printing.
const UNBOUNDED = Number.MAX_SAFE_INTEGER;
// Defaults longer than this are summarised (the seed tiers get their own table).
const MAX_INLINE_DEFAULT = 60;

/** The JSON Schema of the config file as a user writes it (`io: 'input'`: defaults shown, optional keys optional). */
export function configJsonSchema(schema: z.ZodMiniType = configSchema): JsonSchemaNode {
  // Refinements (durations, retention days, cross-references) have no JSON Schema form; the descriptions say them.
  return z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchemaNode;
}

/** What a key means, by its path (lib/config-descriptions.ts). */
type Descriptions = Readonly<Record<string, string>>;

/** Every key of the schema as a reference row, parents before their children, in schema order. */
export function configReferenceRows(
  schema: z.ZodMiniType = configSchema,
  descriptions: Descriptions = CONFIG_DESCRIPTIONS,
): ConfigReferenceRow[] {
  const rows: ConfigReferenceRow[] = [];
  collectRows(configJsonSchema(schema), '', rows, descriptions);
  return rows;
}

function collectRows(
  node: JsonSchemaNode,
  prefix: string,
  rows: ConfigReferenceRow[],
  descriptions: Descriptions,
): void {
  const required = new Set(node.required ?? []);
  for (const [key, child] of Object.entries(node.properties ?? {})) {
    const path = prefix ? `${prefix}.${key}` : key;
    rows.push({
      path,
      type: describeType(child),
      default: describeDefault(child, required.has(key)),
      description: descriptions[path] ?? child.description ?? '',
    });
    descend(child, path, rows, descriptions);
  }
}

function descend(node: JsonSchemaNode, path: string, rows: ConfigReferenceRow[], descriptions: Descriptions): void {
  if (node.properties) collectRows(node, path, rows, descriptions);
  else if (node.items?.properties) collectRows(node.items, `${path}[]`, rows, descriptions);
  else if (node.oneOf ?? node.anyOf) collectVariants(node.oneOf ?? node.anyOf ?? [], path, rows, descriptions);
}

/**
 * A discriminated union (network): keys shared by every variant get one row whose type lists the variants' values;
 * a key of one variant only says which variant in its description.
 */
function collectVariants(
  variants: JsonSchemaNode[],
  path: string,
  rows: ConfigReferenceRow[],
  descriptions: Descriptions,
): void {
  const discriminator = discriminatorOf(variants);
  const seen = new Map<string, { row: ConfigReferenceRow; nodes: JsonSchemaNode[]; tags: string[] }>();
  for (const variant of variants) {
    const tag = discriminator ? JSON.stringify(variant.properties?.[discriminator]?.const) : undefined;
    const required = new Set(variant.required ?? []);
    for (const [key, child] of Object.entries(variant.properties ?? {})) {
      const existing = seen.get(key);
      if (existing) {
        existing.nodes.push(child);
        if (tag) existing.tags.push(tag);
        continue;
      }
      const row = {
        path: `${path}.${key}`,
        type: describeType(child),
        default: describeDefault(child, required.has(key)),
        description: descriptions[`${path}.${key}`] ?? child.description ?? '',
      };
      seen.set(key, { row, nodes: [child], tags: tag ? [tag] : [] });
    }
  }
  for (const [key, { row, nodes, tags }] of seen) {
    if (nodes.length === variants.length) {
      const type = key === discriminator ? nodes.map((n) => JSON.stringify(n.const)).join(' | ') : row.type;
      rows.push({ ...row, type });
    } else if (discriminator) {
      rows.push({ ...row, description: `Only with \`${discriminator}: ${tags.join(' | ')}\`. ${row.description}` });
    } else {
      rows.push(row);
    }
  }
}

function discriminatorOf(variants: JsonSchemaNode[]): string | undefined {
  const first = variants[0];
  if (!first?.properties) return undefined;
  return Object.keys(first.properties).find((key) =>
    variants.every((v) => v.properties?.[key]?.const !== undefined && (v.required ?? []).includes(key)),
  );
}

/** The type of a node in words, with its range. */
export function describeType(node: JsonSchemaNode): string {
  if (node.const !== undefined) return JSON.stringify(node.const);
  if (node.enum) return node.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (node.oneOf ?? node.anyOf) return 'object (one of the variants below)';
  switch (node.type) {
    case 'integer':
    case 'number':
      return withRange(node.type, node);
    case 'string':
      return node.format === 'email' ? 'e-mail address' : 'string';
    case 'boolean':
      return 'boolean';
    case 'array': {
      const items = node.items ? (node.items.properties ? 'objects' : plural(describeType(node.items))) : 'values';
      const count =
        node.minItems !== undefined && node.minItems > 0
          ? `, at least ${node.minItems}`
          : node.maxItems !== undefined
            ? `, at most ${node.maxItems}`
            : '';
      return `array of ${items}${count}`;
    }
    case 'object': {
      if (node.properties) return 'object';
      const values = node.additionalProperties;
      return typeof values === 'object' ? `map of key → ${describeType(values)}` : 'object';
    }
    default:
      return 'any';
  }
}

function plural(type: string): string {
  if (type === 'string') return 'strings';
  if (type === 'e-mail address') return 'e-mail addresses';
  if (type.startsWith('integer')) return type.replace(/^integer/, 'integers');
  if (type.startsWith('number')) return type.replace(/^number/, 'numbers');
  return type;
}

function withRange(type: string, node: JsonSchemaNode): string {
  const max = node.maximum !== undefined && node.maximum < UNBOUNDED ? node.maximum : undefined;
  if (node.minimum !== undefined && max !== undefined) return `${type}, ${node.minimum}–${max}`;
  const bounds: string[] = [];
  if (node.minimum !== undefined) bounds.push(`≥ ${node.minimum}`);
  if (node.exclusiveMinimum !== undefined) bounds.push(`> ${node.exclusiveMinimum}`);
  if (max !== undefined) bounds.push(`≤ ${max}`);
  if (node.exclusiveMaximum !== undefined) bounds.push(`< ${node.exclusiveMaximum}`);
  return bounds.length === 0 ? type : `${type}, ${bounds.join(' and ')}`;
}

/** The default as inline JSON; a long list of objects with ids is summarised by its ids. */
export function describeDefault(node: JsonSchemaNode, required: boolean): string {
  if (node.default === undefined) return required ? 'required' : '—';
  const json = JSON.stringify(node.default);
  if (json.length <= MAX_INLINE_DEFAULT) return `\`${json}\``;
  if (Array.isArray(node.default)) {
    const ids = node.default.map((item) =>
      typeof item === 'object' && item !== null && 'id' in item ? String(item.id) : undefined,
    );
    if (ids.every((id) => id !== undefined)) {
      return `${ids.length} items: ${ids.map((id) => `\`${id}\``).join(', ')}`;
    }
    return `${node.default.length} items`;
  }
  return `\`${json.slice(0, MAX_INLINE_DEFAULT - 1)}…\``;
}

/**
 * A Markdown table with every column padded to its widest cell, as biome formats Markdown, so README stays
 * `biome check` clean and byte-equal to what this module renders.
 */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const width = (text: string) => [...text].length;
  const widths = header.map((h, i) => Math.max(3, width(h), ...rows.map((r) => width(r[i] ?? ''))));
  const line = (cells: readonly string[]) =>
    `| ${widths.map((w, i) => (cells[i] ?? '') + ' '.repeat(w - width(cells[i] ?? ''))).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** Escapes what would break a Markdown table cell. */
function cell(text: string): string {
  return text.replace(/\r?\n/g, ' ').replaceAll('|', '\\|');
}

/** The seed tiers (the `tiers` default) as a table: what `cdk deploy` creates when the file lists no tiers. */
function seedTiersMarkdown(schema: JsonSchemaNode): string {
  const seeds: unknown = schema.properties?.tiers?.default;
  if (!Array.isArray(seeds) || seeds.length === 0) return '';
  const tiers = seeds.filter((t): t is Record<string, unknown> => typeof t === 'object' && t !== null);
  const header = [
    'tier',
    'kind',
    'instance types',
    'GPUs × GiB',
    'vCPU',
    'memory MiB',
    'nodes',
    'max runtime',
    'on-demand $/h',
    'spot $/h (fallback)',
  ];
  const rows = tiers.map((tier) => {
    const types = Array.isArray(tier.instanceTypes) ? tier.instanceTypes.join(', ') : '';
    const gpus = typeof tier.gpus === 'number' && tier.gpus > 0 ? `${tier.gpus} × ${tier.gpuMemoryGiB}` : '—';
    const spot = tier.spotAllowed === false ? 'no spot' : tier.spotUsdPerHour === undefined ? '—' : tier.spotUsdPerHour;
    const cells = [
      `\`${tier.id}\``,
      tier.kind,
      types || 'Fargate',
      gpus,
      tier.vcpus,
      tier.memoryMiB,
      tier.nodes ?? 1,
      tier.maxRuntime,
      tier.onDemandUsdPerHour,
      spot,
    ];
    return cells.map((c) => cell(String(c)));
  });
  return markdownTable(header, rows);
}

/**
 * The Markdown README carries between its config-reference markers: the key table, then the seed tiers.
 * Deterministic (schema order, no timestamps), so a test can compare it with README byte for byte.
 */
export function configReferenceMarkdown(schema: z.ZodMiniType = configSchema): string {
  const rows = configReferenceRows(schema);
  const table = markdownTable(
    ['key', 'type', 'default', 'description'],
    rows.map((r) => [`\`${r.path}\``, cell(r.type), cell(r.default), cell(r.description)]),
  );
  const seeds = seedTiersMarkdown(configJsonSchema(schema));
  const intro =
    'Generated from the zod schema in `lib/config.ts` and the descriptions in `lib/config-descriptions.ts` by `npx tsx scripts/config-docs.ts --write`; ' +
    '`test/infra/config-docs.test.ts` fails when this table and the schema disagree. `[]` marks the elements of an array.';
  const parts = [intro, table];
  if (seeds) {
    parts.push('Seed tiers (the `tiers` default; spot $/h is used only when EC2 spot price history is unavailable):');
    parts.push(seeds);
  }
  return parts.join('\n\n');
}

function markerPositions(readme: string): { start: number; end: number } {
  const { start, end } = CONFIG_REFERENCE_MARKERS;
  const count = (marker: string) => readme.split(marker).length - 1;
  if (count(start) !== 1 || count(end) !== 1) {
    throw new ConfigDocsError(
      `README must contain ${start} and ${end} exactly once each; found ${count(start)} and ${count(end)}`,
    );
  }
  const startAt = readme.indexOf(start);
  const endAt = readme.indexOf(end);
  if (endAt < startAt) throw new ConfigDocsError(`README has ${end} before ${start}; the start marker must come first`);
  return { start: startAt + start.length, end: endAt };
}

/** The text between README's markers, without the blank lines that separate it from them. */
export function configReferenceSection(readme: string): string {
  const { start, end } = markerPositions(readme);
  return readme.slice(start, end).trim();
}

/** README with the text between its markers replaced by `markdown` (idempotent: a second call changes nothing). */
export function replaceConfigReference(readme: string, markdown: string): string {
  const { start, end } = markerPositions(readme);
  return `${readme.slice(0, start)}\n\n${markdown.trim()}\n\n${readme.slice(end)}`;
}
