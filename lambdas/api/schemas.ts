/**
 * Request and response schemas of the HTTP API (zod), and the one helper that turns a zod failure into a 400 whose
 * message names every offending field and its rule. docs/api.md documents the same shapes with examples.
 */
import * as z from 'zod';
import { MAX_USD } from '../domain/budgets';
import { requirementsSchema, retriesSchema } from '../domain/job';
import { InvalidLabel, labelsSchema, parseLabelSelectors } from '../domain/labels';
import { badRequest } from './errors';

/** Idempotency-Key header: 1-128 characters of A-Z a-z 0-9 _ -. */
export const IDEMPOTENCY_KEY_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** Upload ids are ids this API issued (POST /uploads), so the same rule as job ids. */
export const UPLOAD_ID_PATTERN = /^[A-Za-z0-9_-]{1,80}$/;

/** Environment variable names a job may set. */
export const ENV_NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/;

/** Prefixes reserved for the platform and the AWS runtime; a job may not override them. */
export const RESERVED_ENV_PREFIXES = ['TRAINYARD_', 'AWS_'] as const;

/** User and project ids are budget scope ids (domain/budgets.ts), so budgets can name them. */
export const SCOPE_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;
const SCOPE_ID_RULE = "must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit";

/** Longest command: arguments and characters per argument (Batch container overrides are size-limited). */
export const MAX_COMMAND_ARGS = 256;
/** Longest single argument or environment value, characters. */
export const MAX_ARG_CHARS = 4096;

const base64Text = z
  .string()
  .min(1, 'must be a non-empty base64 string (a gzip-compressed tar)')
  .regex(
    /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/,
    'must be standard padded base64 (A-Z, a-z, 0-9, +, /, with = padding to a multiple of 4 characters)',
  );

const uploadId = z
  .string()
  .regex(UPLOAD_ID_PATTERN, "must be an upload id returned by POST /uploads (1-80 of A-Z, a-z, 0-9, '_', '-')");

const command = z
  .array(z.string().max(MAX_ARG_CHARS, `must be at most ${MAX_ARG_CHARS} characters`))
  .min(1, 'must hold the program and its arguments, e.g. ["python", "train.py"]')
  .max(MAX_COMMAND_ARGS, `may hold at most ${MAX_COMMAND_ARGS} arguments`)
  // An empty array already failed min(1); this names the other way to have no program.
  .refine((argv) => argv.length === 0 || (argv[0] ?? '').trim().length > 0, 'must start with a non-empty program name');

/** Exactly one of the listed keys must be present. */
function exactlyOne<T extends Record<string, unknown>>(keys: ReadonlyArray<keyof T & string>) {
  return (value: T, ctx: z.RefinementCtx) => {
    const present = keys.filter((k) => value[k] !== undefined);
    if (present.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        path: [],
        message:
          present.length === 0
            ? `one of ${keys.join(', ')} is required`
            : `give exactly one of ${keys.join(', ')}; got ${present.join(' and ')}`,
      });
    }
  };
}

/** POST /estimate body. */
export const estimateRequestSchema = z
  .strictObject({
    bundle: base64Text.optional(),
    uploadId: uploadId.optional(),
    /** Text files by relative path: what the CLI sends when it only wants an estimate. */
    files: z.record(z.string().min(1).max(1024), z.string()).optional(),
    command,
    requirements: requirementsSchema.optional(),
  })
  .superRefine(exactlyOne(['bundle', 'uploadId', 'files']));

/** POST /estimate body, parsed. */
export type EstimateRequest = z.output<typeof estimateRequestSchema>;

/** Builds the POST /jobs body schema for a configuration's limit on environment variables. */
export function submitRequestSchema(maxEnvVars: number) {
  const env = z
    .record(
      z
        .string()
        .regex(ENV_NAME_PATTERN, 'environment variable names must match ^[A-Z_][A-Z0-9_]*$')
        .refine(
          (name) => !RESERVED_ENV_PREFIXES.some((p) => name.startsWith(p)),
          `environment variable names may not start with ${RESERVED_ENV_PREFIXES.join(' or ')} (reserved)`,
        ),
      z.string().max(MAX_ARG_CHARS, `must be at most ${MAX_ARG_CHARS} characters`),
    )
    .refine((record) => Object.keys(record).length <= maxEnvVars, {
      message: `at most ${maxEnvVars} environment variables are allowed`,
    });
  return z
    .strictObject({
      bundle: base64Text.optional(),
      uploadId: uploadId.optional(),
      command,
      requirements: requirementsSchema.optional(),
      retries: retriesSchema.optional(),
      resumeArgs: z
        .array(z.string().max(MAX_ARG_CHARS, `must be at most ${MAX_ARG_CHARS} characters`))
        .max(32, 'may hold at most 32 arguments')
        .optional(),
      env: env.optional(),
      project: z.string().regex(SCOPE_ID_PATTERN, SCOPE_ID_RULE).optional(),
      labels: labelsSchema.optional(),
      user: z.string().regex(SCOPE_ID_PATTERN, SCOPE_ID_RULE).optional(),
    })
    .superRefine(exactlyOne(['bundle', 'uploadId']));
}

/** POST /jobs body, parsed. */
export type SubmitRequest = z.output<ReturnType<typeof submitRequestSchema>>;

/** PUT /budgets/{scope} body. */
export const setBudgetRequestSchema = z.strictObject({
  limitUsd: z
    .number({ error: 'must be a number of USD' })
    .finite('must be a finite number of USD')
    .min(0, 'must not be negative')
    .max(MAX_USD, `must be at most ${MAX_USD}`),
  period: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'must be a calendar month like 2026-01 (YYYY-MM)')
    .optional(),
});

/** POST /uploads body (optional). */
export const uploadRequestSchema = z.strictObject({}).prefault({});

const intParam = (name: string, min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, `${name} must be a whole number from ${min} to ${max}`)
    .transform(Number)
    .refine((n) => n >= min && n <= max, `${name} must be a whole number from ${min} to ${max}`);

/** A `label` query parameter: its text as given and the selectors it holds (domain/labels.ts). */
const labelSelectorsParam = z
  .string()
  .max(2048)
  .transform((text, ctx) => {
    try {
      return { text, selectors: parseLabelSelectors(text) };
    } catch (error) {
      if (!(error instanceof InvalidLabel)) throw error;
      ctx.addIssue({ code: 'custom', message: error.message });
      return z.NEVER;
    }
  });

/** GET /jobs query. */
export const listJobsQuerySchema = z.strictObject({
  limit: intParam('limit', 1, 100).optional(),
  cursor: z.string().min(1).max(2048).optional(),
  /** Label selectors, `key=value,key` (domain/labels.ts): only jobs that match all of them. */
  label: labelSelectorsParam.optional(),
});

/** GET /jobs/{id}/logs query. */
export const logsQuerySchema = z.strictObject({
  attempt: intParam('attempt', 1, 10_000).optional(),
  limit: intParam('limit', 1, 1000).optional(),
});

/**
 * GET /reports/showback query: the period's first and last day (YYYY-MM-DD, checked by customPeriod), a team, and
 * label selectors keeping only the jobs that match.
 */
export const showbackQuerySchema = z.strictObject({
  from: z.string().max(10, 'from must be a date as YYYY-MM-DD (UTC)').optional(),
  to: z.string().max(10, 'to must be a date as YYYY-MM-DD (UTC)').optional(),
  team: z
    .string()
    .regex(/^[a-z][a-z0-9-]{0,30}[a-z0-9]$/, "must be a team id: 2-32 characters of a-z, 0-9 and '-'")
    .optional(),
  label: labelSelectorsParam.optional(),
});

/** An empty query (routes that take none): unknown parameters are refused, not ignored. */
export const noQuerySchema = z.strictObject({});

function describePath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((out, key) => {
    if (typeof key === 'number') return `${out}[${key}]`;
    return out ? `${out}.${String(key)}` : String(key);
  }, '');
}

/**
 * Parses `value` with `schema`; on failure throws a 400 whose message lists `where.path: rule` for every issue
 * (`where` is `body` or `query`), and whose details carry the same issues as data.
 */
export function parseRequest<T extends z.ZodType>(schema: T, value: unknown, where: 'body' | 'query'): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => {
    const path = describePath(issue.path);
    let message = issue.message;
    if (issue.code === 'unrecognized_keys') message = `unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    // zod reports a record key that fails its schema as "Invalid key in record" with the real reasons nested.
    if (issue.code === 'invalid_key') message = issue.issues.map((inner) => inner.message).join('; ');
    return { path: path ? `${where}.${path}` : where, message };
  });
  throw badRequest(issues.map((i) => `${i.path}: ${i.message}`).join('; '), { issues });
}
