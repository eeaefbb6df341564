/**
 * Parsing and validation of CLI option values (tiers, durations, money, env pairs, labels, job ids), each with a message that
 * names the option, what it got and what is allowed. Every failure is a CliError with exit code 2.
 */

import {
  InvalidScope,
  isWholeCents,
  MAX_USD,
  PERIOD_PATTERN,
  PERIOD_RULE,
  parseScope,
} from '../../lambdas/domain/budgets';
import { JOB_ID_PATTERN, JOB_STATES, type JobState } from '../../lambdas/domain/job';
import { InvalidLabel, labelsFrom, parseLabelSelectors } from '../../lambdas/domain/labels';
import { InvalidReportPeriod, parseDay } from '../../lambdas/domain/showback';
import { CONFIG_ID_PATTERN, CONFIG_ID_RULE, parseDuration } from '../../lib/config';
import { CliError, EXIT_CODES } from './exit-codes';

function usage(message: string, code = 'InvalidOption'): CliError {
  return new CliError(message, EXIT_CODES.usage, code);
}

/** A number in [min, max] (`--gpu-memory 12`). */
export function parseNumberIn(option: string, text: string, min: number, max: number, unit = ''): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value) || value < min || value > max) {
    throw usage(`${option} must be a number from ${min} to ${max}${unit && ` ${unit}`}, got "${text}"`);
  }
  return value;
}

/** A non-negative decimal number: `250`, `2.50`, `.5`, `2e3`. */
const DECIMAL_AMOUNT = /^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A non-negative amount of dollars (`--max-cost 2.50`, a leading `$` allowed). */
export function parseUsd(option: string, text: string): number {
  const digits = text.replace(/^\$/, '');
  const value = Number(digits);
  // Decimal only: Number() also reads 0x50, 0b101 and 0o17, which are no way to write an amount of money.
  if (!DECIMAL_AMOUNT.test(digits) || !Number.isFinite(value)) {
    throw usage(`${option} must be an amount of US dollars like 2.50, got "${text}"`);
  }
  return value;
}

/** A budget limit in dollars (`budgets set … 1500`, a leading `$` allowed): 0 to the ledger's largest amount. */
export function parseBudgetLimit(option: string, text: string): number {
  const value = parseUsd(option, text);
  if (value > MAX_USD) throw usage(`${option} must be at most $${MAX_USD.toLocaleString('en-US')}, got "${text}"`);
  if (!isWholeCents(value)) {
    throw usage(`${option} must be whole cents, like 250 or 12.50, got "${text}"`);
  }
  return value;
}

/** A budget scope, `team:<team>`, `user:<team>/<user>` or `project:<team>/<project>` (domain/budgets.ts rules). */
export function parseBudgetScope(text: string): string {
  try {
    return parseScope(text).text;
  } catch (error) {
    if (error instanceof InvalidScope) throw usage(error.message, 'InvalidScope');
    throw error;
  }
}

/** A calendar month, `YYYY-MM` (`--month 2026-03`): a budget period. */
export function parseMonth(option: string, text: string): string {
  if (!PERIOD_PATTERN.test(text)) throw usage(`${option} must be ${PERIOD_RULE}, got "${text}"`);
  return text;
}

/** A calendar day, `YYYY-MM-DD` (UTC), that exists (`--from 2026-02-28`; not 2026-02-30). */
export function parseDayOption(option: string, text: string): string {
  try {
    parseDay(text, option);
  } catch (error) {
    if (error instanceof InvalidReportPeriod) throw usage(error.message);
    throw error;
  }
  return text;
}

/** A team id's shape (whether it is configured is the API's answer). */
export function parseTeamId(option: string, text: string): string {
  if (!CONFIG_ID_PATTERN.test(text)) throw usage(`${option} must be a team id (${CONFIG_ID_RULE}), got "${text}"`);
  return text;
}

/** An integer in [min, max] (`--retries 3`, `--limit 20`). */
export function parseIntegerIn(option: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    throw usage(`${option} must be a whole number from ${min} to ${max}, got "${text}"`);
  }
  return value;
}

/** A duration in whole seconds: `90`, `90s`, `10m`, `2h`, `1d` (`--runtime`, `--deadline`, `--backoff`). */
export function parseSeconds(option: string, text: string, min = 1, max = 14 * 86400): number {
  const trimmed = text.trim();
  const seconds = /^\d+$/.test(trimmed) ? Number(trimmed) : parseDuration(trimmed);
  if (seconds === undefined || !Number.isFinite(seconds)) {
    throw usage(`${option} must be a duration like 90s, 10m, 2h or 1d (or plain seconds), got "${text}"`);
  }
  const whole = Math.round(seconds);
  if (whole < min || whole > max) {
    throw usage(`${option} must be between ${min} s and ${max} s, got "${text}" (${whole} s)`);
  }
  return whole;
}

/** A tier id's shape (whether it exists is the API's answer: it knows the configured tiers). */
export function parseTierId(text: string): string {
  if (!CONFIG_ID_PATTERN.test(text)) throw usage(`--tier must be a tier id (${CONFIG_ID_RULE}), got "${text}"`);
  return text;
}

/** Names a job's environment may set (POST /jobs rules). */
const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

/** `--env K=V` pairs into a record; names follow the API's rules (upper case, not TRAINYARD_* or AWS_*). */
export function parseEnvPairs(pairs: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const name = eq === -1 ? pair : pair.slice(0, eq);
    if (eq === -1) throw usage(`--env takes NAME=VALUE, got "${pair}"`);
    if (!ENV_NAME.test(name)) {
      throw usage(`--env name "${name}" must match ^[A-Z_][A-Z0-9_]*$ (upper case letters, digits, '_')`);
    }
    if (name.startsWith('TRAINYARD_') || name.startsWith('AWS_')) {
      throw usage(`--env name "${name}" is reserved: names starting with TRAINYARD_ or AWS_ are set by the platform`);
    }
    if (name in env) throw usage(`--env sets ${name} twice`);
    env[name] = pair.slice(eq + 1);
  }
  return env;
}

function asUsage<T>(parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof InvalidLabel) throw usage(`--label ${error.message}`, 'InvalidLabel');
    throw error;
  }
}

/** A job's labels from repeated `--label key=value`. */
export function parseLabelOptions(texts: readonly string[]): Record<string, string> {
  return asUsage(() => labelsFrom(texts));
}

/** The `GET /jobs?label=` selector list from repeated `--label key=value` or `--label key` (all must hold). */
export function parseLabelFilter(texts: readonly string[]): string | undefined {
  if (texts.length === 0) return undefined;
  const text = texts.join(',');
  asUsage(() => parseLabelSelectors(text));
  return text;
}

/**
 * `--state` options (each a state or a comma-separated list, in any case: `--state running,waiting`) as the API's
 * `state` parameter, `RUNNING,WAITING`; undefined when none was given.
 */
export function parseStateFilter(texts: readonly string[]): string | undefined {
  if (texts.length === 0) return undefined;
  const states = texts.flatMap((text) => text.split(',')).map((state) => state.trim().toUpperCase());
  const unknown = states.filter((state) => !(JOB_STATES as readonly string[]).includes(state));
  if (unknown.length > 0) {
    throw usage(
      `--state ${unknown.map((s) => `"${s.toLowerCase()}"`).join(', ')}: not a job state; states: ${JOB_STATES.map((s) => s.toLowerCase()).join(', ')}`,
      'InvalidState',
    );
  }
  return [...new Set(states as JobState[])].join(',');
}

/** A job id as the API issues them (it also names the Step Functions execution). */
export function parseJobId(text: string): string {
  if (!JOB_ID_PATTERN.test(text)) {
    throw usage(`job id must be 1-80 characters of A-Z, a-z, 0-9, '_' and '-', got "${text}"`, 'InvalidJobId');
  }
  return text;
}

/** An Idempotency-Key header value (≤ 128 characters of A-Z a-z 0-9 _ -). */
export function parseIdempotencyKey(text: string): string {
  if (!/^[A-Za-z0-9_-]{1,128}$/.test(text)) {
    throw usage(`--idempotency-key must be 1-128 characters of A-Z, a-z, 0-9, '_' and '-', got "${text}"`);
  }
  return text;
}
