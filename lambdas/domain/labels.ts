/**
 * Job labels: `key=value` pairs a job carries from its submission (`trainyard submit --label lr=3e-4`; a sweep labels
 * each of its jobs `sweep=<its key>`), shown with the job and used to find it again (`GET /jobs?label=…`,
 * `trainyard jobs --label …`). Labels describe; nothing in the lifecycle, the budgets or the placement reads them.
 *
 * A selector is `key=value` (the label has that value) or `key` (the job has the label); selectors in a list are
 * separated by commas and must all hold. Values may not hold ',' or '=', so a selector list reads one way only.
 */
import * as z from 'zod/mini';
import './zod-issues'; // zod's English issue messages

/** Label keys: 1-63 characters of a-z 0-9 . _ -, starting with a letter or digit. */
export const LABEL_KEY_PATTERN = /^[a-z0-9][a-z0-9._-]{0,62}$/;
/** Label values: 1-128 characters of A-Z a-z 0-9 . _ - (a sweep's key, `cli-<uuid>` or yours, fits). */
export const LABEL_VALUE_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
/** Most labels on one job. */
export const MAX_LABELS = 16;
/** Most selectors in one list. */
export const MAX_LABEL_SELECTORS = 8;

const KEY_RULE = "label keys must be 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit";
const VALUE_RULE = "label values must be 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-'";

/** A job's labels, by key. */
export type JobLabels = Readonly<Record<string, string>>;

/** zod schema of a job's labels. */
export const labelsSchema = z
  .record(
    z.string().check(z.regex(LABEL_KEY_PATTERN, KEY_RULE)),
    z.string().check(z.regex(LABEL_VALUE_PATTERN, VALUE_RULE)),
  )
  .check(
    z.refine((labels) => Object.keys(labels).length <= MAX_LABELS, `a job may carry at most ${MAX_LABELS} labels`),
  );

/** One condition on a job's labels: it has `key`, with `value` when one is given. */
export interface LabelSelector {
  readonly key: string;
  readonly value?: string;
}

/** A label or a selector that breaks the rules above; the message says what was wrong and what is allowed. */
export class InvalidLabel extends Error {
  override name = 'InvalidLabel';
}

function checkKey(key: string, text: string): string {
  if (!LABEL_KEY_PATTERN.test(key)) throw new InvalidLabel(`"${text}": ${KEY_RULE}`);
  return key;
}

function checkValue(value: string, text: string): string {
  if (!LABEL_VALUE_PATTERN.test(value)) throw new InvalidLabel(`"${text}": ${VALUE_RULE}`);
  return value;
}

/** Parses one label, `key=value`. */
export function parseLabel(text: string): { key: string; value: string } {
  const eq = text.indexOf('=');
  if (eq < 0) throw new InvalidLabel(`"${text}": a label is key=value, e.g. sweep=lr-grid`);
  return { key: checkKey(text.slice(0, eq), text), value: checkValue(text.slice(eq + 1), text) };
}

/** Labels from `key=value` texts; a key given twice is refused rather than one value silently winning. */
export function labelsFrom(texts: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const text of texts) {
    const { key, value } = parseLabel(text);
    if (Object.hasOwn(labels, key)) {
      throw new InvalidLabel(`label ${key} is given twice (${key}=${labels[key]} and ${text})`);
    }
    labels[key] = value;
  }
  if (Object.keys(labels).length > MAX_LABELS) {
    throw new InvalidLabel(`a job may carry at most ${MAX_LABELS} labels, got ${Object.keys(labels).length}`);
  }
  return labels;
}

/** Parses a selector list, `key=value,key,…` (the form of `GET /jobs?label=`). */
export function parseLabelSelectors(text: string): LabelSelector[] {
  const parts = text.split(',');
  if (parts.some((p) => p === '')) {
    throw new InvalidLabel(
      `"${text}": selectors are key=value or key, separated by single commas (none empty), e.g. sweep=lr-grid,lr`,
    );
  }
  if (parts.length > MAX_LABEL_SELECTORS) {
    throw new InvalidLabel(`at most ${MAX_LABEL_SELECTORS} label selectors, got ${parts.length}`);
  }
  const selectors = parts.map((part): LabelSelector => {
    const eq = part.indexOf('=');
    if (eq < 0) return { key: checkKey(part, part) };
    return { key: checkKey(part.slice(0, eq), part), value: checkValue(part.slice(eq + 1), part) };
  });
  const keys = selectors.map((s) => s.key);
  const repeated = keys.find((k, i) => keys.indexOf(k) !== i);
  if (repeated !== undefined) {
    throw new InvalidLabel(`label ${repeated} is selected twice; a job has one value per label`);
  }
  return selectors;
}

/** Whether labels satisfy every selector (no selector: any job, labelled or not). */
export function matchesLabels(labels: JobLabels | undefined, selectors: readonly LabelSelector[]): boolean {
  return selectors.every(
    (s) => labels !== undefined && Object.hasOwn(labels, s.key) && (s.value === undefined || labels[s.key] === s.value),
  );
}

/**
 * A job's labels as `key=value` pairs in key order, joined by `separator`: with the default `,` the text reads back
 * as a selector list that matches exactly this job's labels. Undefined when the job has none.
 */
export function labelsText(labels: JobLabels | undefined, separator = ','): string | undefined {
  const keys = Object.keys(labels ?? {}).sort();
  return keys.length ? keys.map((k) => `${k}=${labels?.[k]}`).join(separator) : undefined;
}
