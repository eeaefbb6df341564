/**
 * Request and response schemas of the HTTP API (zod), and the one helper that turns a zod failure into a 400 whose
 * message names every offending field and its rule. docs/api.md documents the same shapes with examples.
 */
import * as z from 'zod/mini';
import { CONFIG_ID_PATTERN, CONFIG_ID_RULE } from '../../lib/config';
import { isWholeCents, MAX_USD, PERIOD_PATTERN, PERIOD_RULE } from '../domain/budgets';
import {
  CHECKPOINT_DONE_FILE_RULE,
  isCheckpointDoneFile,
  JOB_STATES,
  type JobState,
  requirementsSchema,
  retriesSchema,
} from '../domain/job';
import { InvalidLabel, labelsSchema, parseLabelSelectors } from '../domain/labels';
import { shellJoin } from '../domain/submit-job';
import '../domain/zod-issues'; // zod's English issue messages
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
const NO_DOTS_RULE = "must not contain '..' (a budget scope never may)";

/** What is wrong with a user or project id (the API's rules, which the CLI checks before sending); undefined if none. */
export function scopeIdProblem(id: string): string | undefined {
  if (!SCOPE_ID_PATTERN.test(id)) return SCOPE_ID_RULE;
  return id.includes('..') ? NO_DOTS_RULE : undefined;
}

/** A user or project id: what a budget scope can name (domain/budgets.ts parseScope also refuses '..'). */
const scopeId = z.string().check(
  z.superRefine((id, ctx) => {
    const problem = scopeIdProblem(id);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  }),
);

/** Longest command: arguments and characters per argument (Batch container overrides are size-limited). */
export const MAX_COMMAND_ARGS = 256;
/** Longest single argument or environment value, characters. */
export const MAX_ARG_CHARS = 4096;
/**
 * Most bytes a job's command, environment and resume arguments may take together, as JSON (UTF-8), the resume
 * arguments as the one shell-quoted string an attempt sends (TRAINYARD_RESUME_ARGS; quoting a `'` takes 4 characters):
 * every attempt sends them to AWS Batch, whose SubmitJob takes at most 30 KiB, and the platform's own environment
 * variables, tags and names need the rest. Checked before anything is written: a larger job could be stored but never
 * run.
 */
const MAX_SUBMIT_OVERRIDE_BYTES = 24 * 1024;

/** Refuses a body whose command, env and resume arguments would not fit a Batch SubmitJob (as JSON, UTF-8). */
function fitsSubmitJob(
  { command, env, resumeArgs }: { command: string[]; env?: Record<string, string>; resumeArgs?: string[] },
  ctx: z.core.$RefinementCtx,
): void {
  const json = JSON.stringify({ command, env: env ?? {}, resumeArgs: shellJoin(resumeArgs ?? []) });
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes <= MAX_SUBMIT_OVERRIDE_BYTES) return;
  ctx.addIssue({
    code: 'custom',
    path: [],
    message: `command, env and resumeArgs take ${bytes} bytes together (as JSON), more than the ${MAX_SUBMIT_OVERRIDE_BYTES} allowed: AWS Batch takes at most 30 KiB per job submission and the platform's own settings need the rest; put large values in a file in the bundle instead`,
  });
}

const base64Text = z
  .string()
  .check(
    z.minLength(1, 'must be a non-empty base64 string (a gzip-compressed tar)'),
    z.regex(
      /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/,
      'must be standard padded base64 (A-Z, a-z, 0-9, +, /, with = padding to a multiple of 4 characters)',
    ),
  );

const uploadId = z
  .string()
  .check(
    z.regex(UPLOAD_ID_PATTERN, "must be an upload id returned by POST /uploads (1-80 of A-Z, a-z, 0-9, '_', '-')"),
  );

/** A program argument or environment value: what an attempt's process can be given (no NUL, which ends a C string). */
const processText = z.string().check(
  z.maxLength(MAX_ARG_CHARS, `must be at most ${MAX_ARG_CHARS} characters`),
  z.refine((text) => !text.includes('\0'), 'must not contain a NUL character: no process argument or variable can'),
);

const command = z.array(processText).check(
  z.minLength(1, 'must hold the program and its arguments, e.g. ["python", "train.py"]'),
  z.maxLength(MAX_COMMAND_ARGS, `may hold at most ${MAX_COMMAND_ARGS} arguments`),
  // An empty array already failed min(1); this names the other way to have no program.
  z.refine(
    (argv) => argv.length === 0 || (argv[0] ?? '').trim().length > 0,
    'must start with a non-empty program name',
  ),
);

/** Exactly one of the listed keys must be present. */
function exactlyOne<T extends Record<string, unknown>>(keys: ReadonlyArray<keyof T & string>) {
  return (value: T, ctx: z.core.$RefinementCtx) => {
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
    bundle: z.optional(base64Text),
    uploadId: z.optional(uploadId),
    /** Text files by relative path: what the CLI sends when it only wants an estimate. */
    files: z.optional(z.record(z.string().check(z.minLength(1), z.maxLength(1024)), z.string())),
    command,
    requirements: z.optional(requirementsSchema),
    /** The project the job would be charged to, so its budget is checked too. */
    project: z.optional(scopeId),
  })
  .check(z.superRefine(exactlyOne(['bundle', 'uploadId', 'files'])));

/** POST /estimate body, parsed. */
export type EstimateRequest = z.output<typeof estimateRequestSchema>;

/** Builds the POST /jobs body schema for a configuration's limit on environment variables. */
export function submitRequestSchema(maxEnvVars: number) {
  const env = z
    .record(
      z.string().check(
        z.regex(ENV_NAME_PATTERN, 'environment variable names must match ^[A-Z_][A-Z0-9_]*$'),
        z.refine(
          (name) => !RESERVED_ENV_PREFIXES.some((p) => name.startsWith(p)),
          `environment variable names may not start with ${RESERVED_ENV_PREFIXES.join(' or ')} (reserved)`,
        ),
      ),
      processText,
    )
    .check(
      z.refine((record) => Object.keys(record).length <= maxEnvVars, {
        message: `at most ${maxEnvVars} environment variables are allowed`,
      }),
    );
  return z
    .strictObject({
      bundle: z.optional(base64Text),
      uploadId: z.optional(uploadId),
      command,
      requirements: z.optional(requirementsSchema),
      retries: z.optional(retriesSchema),
      resumeArgs: z.optional(z.array(processText).check(z.maxLength(32, 'may hold at most 32 arguments'))),
      checkpointDoneFile: z.optional(z.string().check(z.refine(isCheckpointDoneFile, CHECKPOINT_DONE_FILE_RULE))),
      env: z.optional(env),
      project: z.optional(scopeId),
      labels: z.optional(labelsSchema),
      user: z.optional(scopeId),
    })
    .check(z.superRefine(exactlyOne(['bundle', 'uploadId'])), z.superRefine(fitsSubmitJob));
}

/** POST /jobs body, parsed. */
export type SubmitRequest = z.output<ReturnType<typeof submitRequestSchema>>;

/** A budget period: a calendar month, `YYYY-MM` (domain/budgets.ts `parsePeriod`). */
const periodParam = z.string().check(z.regex(PERIOD_PATTERN, `must be ${PERIOD_RULE}`));

/** A team id as the config defines them. */
const teamParam = z.string().check(z.regex(CONFIG_ID_PATTERN, `must be a team id: ${CONFIG_ID_RULE}`));

/** PUT /budgets/{scope} body. */
export const setBudgetRequestSchema = z.strictObject({
  limitUsd: z.number({ error: 'must be a number of USD' }).check(
    z.gte(0, 'must not be negative'),
    z.lte(MAX_USD, `must be at most ${MAX_USD}`),
    // A limit is money people set: whole cents (a sub-cent limit would be stored rounded, $0 for 1e-7).
    z.refine(isWholeCents, 'must be whole cents, e.g. 250 or 12.5'),
  ),
  period: z.optional(periodParam),
});

/** GET /budgets query: another team (admins only) and another month (default: the current one). */
export const budgetsQuerySchema = z.strictObject({
  team: z.optional(teamParam),
  period: z.optional(periodParam),
});

/** POST /uploads body (optional). */
export const uploadRequestSchema = z.prefault(z.strictObject({}), {});

const intParam = (name: string, min: number, max: number) =>
  z
    .pipe(
      z.string().check(z.regex(/^\d+$/, `${name} must be a whole number from ${min} to ${max}`)),
      z.transform(Number),
    )
    .check(z.refine((n) => n >= min && n <= max, `${name} must be a whole number from ${min} to ${max}`));

/** A `label` query parameter: its text as given and the selectors it holds (domain/labels.ts). */
const labelSelectorsParam = z.pipe(
  z.string().check(z.maxLength(2048)),
  z.transform((text, ctx) => {
    try {
      return { text, selectors: parseLabelSelectors(text) };
    } catch (error) {
      if (!(error instanceof InvalidLabel)) throw error;
      // zod/mini's transform context has no addIssue; this is the issue classic's addIssue recorded.
      ctx.issues.push({ code: 'custom', message: error.message, input: text });
      return z.NEVER;
    }
  }),
);

/** A `state` query parameter: job states, comma-separated (`RUNNING,WAITING`); a job in any of them is kept. */
const jobStatesParam = z.pipe(
  z.string().check(
    z.maxLength(256),
    z.superRefine((text, ctx) => {
      const unknown = text.split(',').filter((state) => !(JOB_STATES as readonly string[]).includes(state));
      if (unknown.length === 0) return;
      ctx.addIssue({
        code: 'custom',
        message: `${unknown.map((s) => `"${s}"`).join(', ')} ${unknown.length === 1 ? 'is not a job state' : 'are not job states'}; states: ${JOB_STATES.join(', ')} (comma-separated for several)`,
      });
    }),
  ),
  z.transform((text) => [...new Set(text.split(','))] as JobState[]),
);

/** Most jobs one page of GET /jobs returns. */
export const MAX_JOBS_PAGE = 100;

/** GET /jobs query. */
export const listJobsQuerySchema = z.strictObject({
  limit: z.optional(intParam('limit', 1, MAX_JOBS_PAGE)),
  cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(2048))),
  /** Label selectors, `key=value,key` (domain/labels.ts): only jobs that match all of them. */
  label: z.optional(labelSelectorsParam),
  /** Job states, `RUNNING,WAITING`: only jobs in one of them. */
  state: z.optional(jobStatesParam),
});

/** GET /jobs/{id}/logs query. */
export const logsQuerySchema = z.strictObject({
  attempt: z.optional(intParam('attempt', 1, 10_000)),
  limit: z.optional(intParam('limit', 1, 1000)),
  after: z.optional(
    z
      .string()
      .check(
        z.minLength(1, 'must be a nextCursor an earlier answer returned'),
        z.maxLength(2048, 'is too long to be a nextCursor'),
      ),
  ),
});

/** GET /jobs/{id}/checkpoints query: one checkpoint by name, and where in its files (by path) a page goes on. */
export const checkpointsQuerySchema = z.strictObject({
  checkpoint: z.optional(
    z
      .string()
      .check(
        z.maxLength(64, 'is too long to be a checkpoint name'),
        z.regex(/^ckpt-\d{6,}$/, 'must be a checkpoint name as the listing gives it, e.g. ckpt-000120'),
      ),
  ),
  filesAfter: z.optional(
    z
      .string()
      .check(
        z.minLength(1, 'must be a nextFilesAfter an earlier answer returned'),
        z.maxLength(1024, 'is too long to be a nextFilesAfter'),
      ),
  ),
});

/** Lines GET /jobs/{id}/logs returns when the query does not say. */
export const DEFAULT_LOG_LINES = 100;

/**
 * GET /reports/showback query: the period's first and last day (YYYY-MM-DD, checked by customPeriod), a team, and
 * label selectors keeping only the jobs that match.
 */
export const showbackQuerySchema = z.strictObject({
  from: z.optional(z.string().check(z.maxLength(10, 'from must be a date as YYYY-MM-DD (UTC)'))),
  to: z.optional(z.string().check(z.maxLength(10, 'to must be a date as YYYY-MM-DD (UTC)'))),
  team: z.optional(teamParam),
  label: z.optional(labelSelectorsParam),
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
export function parseRequest<T extends z.ZodMiniType>(schema: T, value: unknown, where: 'body' | 'query'): z.output<T> {
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
