/**
 * The platform's own events on its EventBridge bus (source `trainyard`): one versioned zod detail schema per
 * detail-type, and a builder that validates a detail and returns the PutEvents entry. docs/events.md documents
 * every field with an example (and test/domain/events.test.ts checks those examples against these schemas).
 *
 * Idempotency: EventBridge delivers at least once and handlers that emit may be retried, so every detail carries a
 * deterministic `eventId` computed from what the event is about (job id + type + attempt, budget scope + period +
 * threshold, …). A consumer that keeps the ids it has seen drops duplicates.
 *
 * Versioning: `version: '1'` is part of every detail. Adding an optional field keeps version 1; removing or
 * changing the meaning of a field makes version 2, emitted alongside version 1 until consumers have moved.
 */
import * as z from 'zod/mini';
import { CONFIG_ID_PATTERN, CONFIG_ID_RULE, type TrainyardConfig } from '../../lib/config';
import { formatDuration, formatUsd } from './analysis/format';
import { PERIOD_PATTERN, PERIOD_RULE, parseScope, type ThresholdName } from './budgets';
import type { AttemptRecord } from './job';
import { type JobLabels, labelsSchema } from './labels';
import { ALL_TEAMS } from './workspace-layout';
import { describeIssues } from './zod-issues';

/** Raised when a detail does not match its detail-type's schema, or the entry would exceed PutEvents' size limit. */
export class InvalidEventDetail extends Error {
  override name = 'InvalidEventDetail';
}

/** The `source` of every Trainyard event. */
export const EVENT_SOURCE = 'trainyard';

/** Current detail schema version. */
export const EVENT_VERSION = '1';

/** PutEvents' limit on one entry (source, detail-type and detail together), bytes. */
export const MAX_ENTRY_BYTES = 256 * 1024;

/** Longest `summary`, characters (a longer one is cut, ending in an ellipsis). */
export const MAX_SUMMARY_CHARS = 600;

const jobId = z
  .string()
  .check(z.regex(/^[A-Za-z0-9_-]{1,80}$/, "must be 1-80 characters of A-Z, a-z, 0-9, '_' and '-'"));
const team = z.string().check(z.regex(CONFIG_ID_PATTERN, `must be a team id: ${CONFIG_ID_RULE}`));
const scopeId = '[a-z0-9][a-z0-9._-]{0,63}';
const scope = z
  .string()
  .check(
    z.regex(
      new RegExp(`^(team:${scopeId}|(user|project):${scopeId}/${scopeId})$`),
      'must be a budget scope: team:<team>, user:<team>/<user> or project:<team>/<project>',
    ),
  );
const period = z.string().check(z.regex(PERIOD_PATTERN, `must be ${PERIOD_RULE}`));
const day = z.iso.date();
const occurredAt = z.iso.datetime({ offset: false });
const usd = z.number().check(z.nonnegative());
const attempt = z.int().check(z.positive());
const capacity = z.enum(['spot', 'on-demand']);
const reason = z.string().check(z.minLength(1), z.maxLength(1024));

const header = {
  version: z.literal(EVENT_VERSION),
  /** Deterministic id for de-duplication. */
  eventId: z.string().check(z.minLength(1)),
  occurredAt,
  /**
   * One line for people (the alert e-mails and Slack messages show it): what happened, to what, and its figures.
   * The builder sets it on every event; optional so that details emitted before it existed still parse.
   */
  summary: z.optional(
    z
      .string()
      .check(
        z.minLength(1),
        z.maxLength(MAX_SUMMARY_CHARS),
        z.regex(/^[^"\\\n\r]*$/, 'must be one line without double quotes or backslashes'),
      ),
  ),
};
const jobHeader = {
  ...header,
  jobId,
  team,
  /** Who submitted the job. */
  user: z.string().check(z.minLength(1), z.maxLength(512)),
  project: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
  /** The job's labels (domain/labels.ts), so a rule can match a sweep: `"detail": { "labels": { "sweep": [...] } }`. */
  labels: z.optional(labelsSchema),
};

/** What identifies a job in every job event, as its record holds it. */
export interface JobIdentity {
  readonly jobId: string;
  readonly team: string;
  readonly user: string;
  readonly project?: string;
  readonly labels?: JobLabels;
}

/** The identity fields of a job event: the job, its team, who submitted it, and its project and labels if any. */
export function jobIdentity(job: JobIdentity): JobIdentity {
  return {
    jobId: job.jobId,
    team: job.team,
    user: job.user,
    ...(job.project !== undefined && { project: job.project }),
    ...(job.labels !== undefined && { labels: job.labels }),
  };
}

/** Detail schemas, by detail-type. */
/**
 * Why an attempt ended that the job goes on from (`Job Interrupted`'s `cause`): the attempt outcomes after which
 * another attempt follows, or a budget pause.
 */
export const INTERRUPTION_CAUSES = [
  'reclaimed',
  'capacity-starved',
  'moved',
  'budget-stopped',
  'app-error',
  'infra-error',
  'resume-failed',
] as const;

export const EVENT_SCHEMAS = {
  'Job Submitted': z.strictObject({
    ...jobHeader,
    tier: z.string().check(z.minLength(1)),
    estimatedCostUsd: usd,
    estimatedRuntimeSeconds: z.number().check(z.nonnegative()),
    deadlineSeconds: z.optional(z.int().check(z.positive())),
  }),
  'Job Started': z.strictObject({
    ...jobHeader,
    attempt,
    capacity,
    queue: z.string().check(z.minLength(1)),
    batchJobId: z.string().check(z.minLength(1)),
    usdPerHour: z.optional(usd),
  }),
  'Job Interrupted': z.strictObject({
    ...jobHeader,
    attempt,
    capacity,
    cause: z.enum(INTERRUPTION_CAUSES),
    instanceId: z.optional(z.string().check(z.regex(/^i-[0-9a-f]+$/))),
    reason,
  }),
  'Job Resumed': z.strictObject({
    ...jobHeader,
    /** The new attempt's number. */
    attempt,
    capacity,
    /** S3 URI of the checkpoint the attempt restores; absent when none was complete (it starts over). */
    checkpointUri: z.optional(z.string().check(z.startsWith('s3://'))),
    reason,
  }),
  'Job FellBackToOnDemand': z.strictObject({
    ...jobHeader,
    /** The new on-demand attempt's number. */
    attempt,
    reclaims: z.int().check(z.nonnegative()),
    capacityCancellations: z.int().check(z.nonnegative()),
    reason,
  }),
  'Job Succeeded': z.strictObject({
    ...jobHeader,
    tier: z.string().check(z.minLength(1)),
    attempts: attempt,
    costUsd: usd,
    runtimeSeconds: z.number().check(z.nonnegative()),
    /** The job's HTML report (`report.html`); the JSON summary sits beside it as `summary.json`. */
    reportUri: z.optional(z.string().check(z.startsWith('s3://'))),
  }),
  'Job Failed': z.strictObject({
    ...jobHeader,
    tier: z.string().check(z.minLength(1)),
    attempts: z.int().check(z.nonnegative()),
    costUsd: usd,
    outcome: z.enum(['app-error', 'infra-error', 'timed-out', 'rejected', 'internal']),
    exitCode: z.optional(z.int()),
    reason,
  }),
  'Job Cancelled': z.strictObject({
    ...jobHeader,
    attempts: z.int().check(z.nonnegative()),
    costUsd: usd,
    reason,
  }),
  'Job Cost Amended': z.strictObject({
    ...jobHeader,
    /** The state the job ended in. */
    state: z.enum(['SUCCEEDED', 'FAILED', 'CANCELLED']),
    /**
     * What was billed late: `orphan`, a Batch job that ran under the attempt's name without being its own; `late-stop`,
     * the attempt's own Batch job, still in Batch when the job ended (its end was recorded after); `unseen-end`, the
     * attempt's own Batch job, billed to its last sign of running when Batch did not report it, whose real end Batch
     * reported later (the difference is added).
     */
    cause: z.enum(['orphan', 'late-stop', 'unseen-end']),
    /** The attempt the Batch job ran under. */
    attempt,
    batchJobId: z.string().check(z.minLength(1)),
    capacity,
    /** What the Batch job cost, added to the job's cost. */
    addedUsd: usd,
    /** The job's cost with it, to the cent: the figure its budget is charged. */
    costUsd: usd,
  }),
  'Job PausedForBudget': z.strictObject({
    ...jobHeader,
    attempt,
    /** Which of the job's pauses this is (1 for its first); the event id's last part. */
    pause: z.int().check(z.positive()),
    /** The scope whose budget is exhausted. */
    scope,
    costSoFarUsd: usd,
    reason,
  }),
  'Budget Threshold Crossed': z.strictObject({
    ...header,
    team,
    scope,
    period,
    /** The threshold crossed, percent of the limit (70 = warn by default). */
    thresholdPercent: z.number().check(z.positive(), z.lte(200)),
    limitUsd: usd,
    spentUsd: usd,
    reservedUsd: usd,
  }),
  'Budget Exhausted': z.strictObject({
    ...header,
    team,
    scope,
    period,
    limitUsd: usd,
    spentUsd: usd,
    reservedUsd: usd,
    /** Running jobs stopped gracefully (PAUSED_BUDGET) because of this. */
    pausedJobIds: z.array(jobId),
  }),
  'Cost Report Ready': z.strictObject({
    ...header,
    report: z.enum(['daily', 'weekly']),
    /** First day covered (UTC), inclusive. */
    periodStart: day,
    /** Last day covered (UTC), inclusive. */
    periodEnd: day,
    /** The team the report covers; absent for the all-teams report. */
    team: z.optional(team),
    uri: z.string().check(z.startsWith('s3://')),
    totalUsd: usd,
    jobs: z.int().check(z.nonnegative()),
  }),
} as const;

/** Every detail-type on the bus. */
export type DetailType = keyof typeof EVENT_SCHEMAS;

/** All detail-types, in documentation order. */
export const DETAIL_TYPES = Object.keys(EVENT_SCHEMAS) as DetailType[];

/** A complete detail of a detail-type. */
export type EventDetail<T extends DetailType> = z.output<(typeof EVENT_SCHEMAS)[T]>;

/** What a caller supplies: the detail without `version`, `eventId` and `summary`, which the builder adds. */
export type EventDetailInput<T extends DetailType> = Omit<EventDetail<T>, 'version' | 'eventId' | 'summary'>;

/** The PutEvents request entry (same field names as the SDK's PutEventsRequestEntry). */
export interface EventEntry<T extends DetailType = DetailType> {
  Source: typeof EVENT_SOURCE;
  DetailType: T;
  /** The detail as a JSON string. */
  Detail: string;
  EventBusName?: string;
}

type AnyInput = Record<string, unknown>;
const str = (value: unknown) => String(value);

/** How each detail-type's eventId is formed; it names exactly what the event is about and nothing time-dependent. */
const EVENT_IDS: Record<DetailType, (d: AnyInput) => string> = {
  'Job Submitted': (d) => `${str(d.jobId)}/submitted`,
  'Job Started': (d) => `${str(d.jobId)}/started/${str(d.attempt)}`,
  'Job Interrupted': (d) => `${str(d.jobId)}/interrupted/${str(d.attempt)}`,
  'Job Resumed': (d) => `${str(d.jobId)}/resumed/${str(d.attempt)}`,
  'Job FellBackToOnDemand': (d) => `${str(d.jobId)}/fell-back-to-on-demand/${str(d.attempt)}`,
  'Job Succeeded': (d) => `${str(d.jobId)}/succeeded`,
  'Job Failed': (d) => `${str(d.jobId)}/failed`,
  'Job Cancelled': (d) => `${str(d.jobId)}/cancelled`,
  'Job Cost Amended': (d) => `${str(d.jobId)}/cost-amended/${str(d.batchJobId)}`,
  // By the job's pause count, not the attempt: a job paused before an attempt and again while it runs, or again
  // after a resume its budget could not hold, pauses twice at one attempt number.
  'Job PausedForBudget': (d) => `${str(d.jobId)}/paused-for-budget/${str(d.pause)}`,
  'Budget Threshold Crossed': (d) => `budget/${str(d.scope)}/${str(d.period)}/threshold/${str(d.thresholdPercent)}`,
  // The limit is part of the id: raising the budget and exhausting it again in the same month is a new event.
  'Budget Exhausted': (d) => `budget/${str(d.scope)}/${str(d.period)}/exhausted/${str(d.limitUsd)}`,
  'Cost Report Ready': (d) =>
    `report/${str(d.report)}/${str(d.periodStart)}/${str(d.periodEnd)}/${d.team === undefined ? ALL_TEAMS : str(d.team)}`,
};

const attemptsText = (n: unknown) => `${str(n)} attempt${n === 1 ? '' : 's'}`;
const usdText = (value: unknown) => formatUsd(Number(value));
const teamText = (d: AnyInput) => `team ${str(d.team)}${d.project === undefined ? '' : `, project ${str(d.project)}`}`;

/** How each detail-type's `summary` reads; {@link oneLine} makes it safe for the alert templates. */
const SUMMARIES: Record<DetailType, (d: AnyInput) => string> = {
  'Job Submitted': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) was submitted on ${str(d.tier)}: about ${formatDuration(Number(d.estimatedRuntimeSeconds))}, ${usdText(d.estimatedCostUsd)} reserved${d.deadlineSeconds === undefined ? '' : `, deadline ${formatDuration(Number(d.deadlineSeconds))}`}.`,
  'Job Started': (d) =>
    `Job ${str(d.jobId)} started attempt ${str(d.attempt)} on ${str(d.capacity)} (${str(d.queue)}).`,
  'Job Interrupted': (d) =>
    `Job ${str(d.jobId)}: attempt ${str(d.attempt)} on ${str(d.capacity)} was interrupted (${str(d.cause)}). ${str(d.reason)}`,
  'Job Resumed': (d) =>
    `Job ${str(d.jobId)} resumes as attempt ${str(d.attempt)} on ${str(d.capacity)}, from ${d.checkpointUri === undefined ? 'the start (no complete checkpoint)' : str(d.checkpointUri)}.`,
  'Job FellBackToOnDemand': (d) =>
    `Job ${str(d.jobId)} falls back to on-demand for attempt ${str(d.attempt)} after ${str(d.reclaims)} spot reclaim(s) and ${str(d.capacityCancellations)} capacity wait(s). ${str(d.reason)}`,
  'Job Succeeded': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) succeeded on ${str(d.tier)} after ${attemptsText(d.attempts)} and ${formatDuration(Number(d.runtimeSeconds))}: ${usdText(d.costUsd)}.`,
  'Job Failed': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) failed on ${str(d.tier)} after ${attemptsText(d.attempts)} (${str(d.outcome)}${d.exitCode === undefined ? '' : `, exit code ${str(d.exitCode)}`}), having cost ${usdText(d.costUsd)}. ${str(d.reason)}`,
  'Job Cancelled': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) was cancelled after ${attemptsText(d.attempts)}, having cost ${usdText(d.costUsd)}. ${str(d.reason)}`,
  'Job Cost Amended': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) cost ${usdText(d.addedUsd)} more after it ended ${str(d.state)}: ${
      d.cause === 'late-stop'
        ? `attempt ${str(d.attempt)}'s Batch job ${str(d.batchJobId)} on ${str(d.capacity)} was still running when the job ended, until Trainyard stopped it`
        : d.cause === 'unseen-end'
          ? `attempt ${str(d.attempt)}'s Batch job ${str(d.batchJobId)} on ${str(d.capacity)}, billed to its last sign of running when Batch did not report it, ran longer by Batch's own record`
          : `orphaned Batch job ${str(d.batchJobId)} of attempt ${str(d.attempt)} ran on ${str(d.capacity)} until Trainyard stopped it`
    }. The job's cost is now ${usdText(d.costUsd)}, charged to its budget.`,
  'Job PausedForBudget': (d) =>
    `Job ${str(d.jobId)} (${teamText(d)}) paused at attempt ${str(d.attempt)}: budget ${str(d.scope)} is exhausted (${usdText(d.costSoFarUsd)} spent on the job so far). ${str(d.reason)}`,
  'Budget Threshold Crossed': (d) =>
    `Budget ${str(d.scope)} for ${str(d.period)} crossed ${str(d.thresholdPercent)} %: ${usdText(d.spentUsd)} spent and ${usdText(d.reservedUsd)} reserved of ${usdText(d.limitUsd)}.`,
  'Budget Exhausted': (d) => {
    const paused = d.pausedJobIds as string[];
    return `Budget ${str(d.scope)} for ${str(d.period)} is exhausted: ${usdText(d.spentUsd)} spent and ${usdText(d.reservedUsd)} reserved of ${usdText(d.limitUsd)}; new jobs are refused${paused.length === 0 ? '' : ` and ${paused.length} running job(s) pause (${paused.join(', ')})`}.`;
  },
  'Cost Report Ready': (d) =>
    `The ${str(d.report)} cost report for ${d.team === undefined ? 'all teams' : `team ${str(d.team)}`}, ${str(d.periodStart)} to ${str(d.periodEnd)}: ${usdText(d.totalUsd)} over ${str(d.jobs)} job(s), at ${str(d.uri)}.`,
};

/**
 * A summary made safe for the alert rules' input templates, which place it in JSON unescaped: one line (whitespace
 * runs and other control characters become one space), double quotes as single ones and no backslashes, at most
 * {@link MAX_SUMMARY_CHARS} characters, never cut inside a character (half a surrogate pair is written as `\uD83D`).
 */
export function oneLine(text: string): string {
  const flat = text
    .replace(/[^\x20-\x7e\u0080-\uffff]+/g, ' ') // control characters: below space, and DEL
    .replace(/\s+/g, ' ')
    .replaceAll('"', "'")
    .replaceAll('\\', '/')
    .trim();
  if (flat.length <= MAX_SUMMARY_CHARS) return flat;
  let cut = MAX_SUMMARY_CHARS - 1;
  const last = flat.charCodeAt(cut - 1);
  if (last >= 0xd800 && last <= 0xdbff) cut -= 1; // a high surrogate whose low half would be cut off
  return `${flat.slice(0, cut).trimEnd()}…`;
}

function isDetailType(value: string): value is DetailType {
  return Object.hasOwn(EVENT_SCHEMAS, value);
}

function requireDetailType(detailType: string): DetailType {
  if (!isDetailType(detailType)) {
    throw new InvalidEventDetail(
      `unknown detail-type ${JSON.stringify(detailType)}; Trainyard emits ${DETAIL_TYPES.map((t) => JSON.stringify(t)).join(', ')}`,
    );
  }
  return detailType;
}

/** The deterministic eventId of a detail (validated first, so the id is built from checked fields). */
export function eventIdFor<T extends DetailType>(detailType: T, detail: EventDetailInput<T>): string {
  return EVENT_IDS[detailType](validateInput(detailType, detail));
}

/** Validates a caller's detail with the builder's own fields stubbed in; returns the validated fields. */
function validateInput(detailType: DetailType, detail: unknown): AnyInput {
  const type = requireDetailType(detailType);
  if (
    typeof detail === 'object' &&
    detail !== null &&
    ('version' in detail || 'eventId' in detail || 'summary' in detail)
  ) {
    throw new InvalidEventDetail(
      `invalid "${type}" detail: version, eventId and summary are set by buildEvent, not by callers`,
    );
  }
  const stubbed = { ...(detail as AnyInput), version: EVENT_VERSION, eventId: 'pending' };
  return parseEventDetail(type, stubbed) as AnyInput;
}

/**
 * Validates a detail against its detail-type's schema, adds `version` and the deterministic `eventId`, and returns
 * the PutEvents entry. Throws {@link InvalidEventDetail} naming every offending field, or when the entry is larger
 * than PutEvents accepts.
 */
export function buildEvent<T extends DetailType>(
  detailType: T,
  detail: EventDetailInput<T>,
  options: { eventBusName?: string } = {},
): EventEntry<T> {
  // The id and the summary are built from the checked fields.
  const checked = validateInput(detailType, detail);
  const eventId = EVENT_IDS[detailType](checked);
  const summary = oneLine(SUMMARIES[detailType](checked));
  const full = parseEventDetail(detailType, { version: EVENT_VERSION, eventId, ...detail, summary });
  const json = JSON.stringify(full);
  const bytes = new TextEncoder().encode(`${EVENT_SOURCE}${detailType}${json}`).byteLength;
  if (bytes > MAX_ENTRY_BYTES) {
    throw new InvalidEventDetail(
      `"${detailType}" event ${eventId} is ${bytes} bytes; PutEvents accepts at most ${MAX_ENTRY_BYTES} bytes per entry`,
    );
  }
  const entry: EventEntry<T> = { Source: EVENT_SOURCE, DetailType: detailType, Detail: json };
  if (options.eventBusName !== undefined) entry.EventBusName = options.eventBusName;
  return entry;
}

/**
 * The `Job Started` of an attempt, as of its start. Whoever records an attempt's `startedAt` publishes it just after,
 * from the stored record (lambdas/shared/start-announcement.ts): batch-events on Batch's RUNNING, or, when that comes
 * late (EventBridge does not order deliveries) or an attempt is too short to be seen running, batch-events or
 * AttemptOutcome recording the stop. So every attempt that started is announced at least once, and none that did not.
 */
export function jobStartedEvent(
  job: JobIdentity,
  attempt: Pick<AttemptRecord, 'attempt' | 'capacity' | 'queue'>,
  start: { batchJobId: string; startedAt: number; usdPerHour: number },
): EventEntry<'Job Started'> {
  return buildEvent('Job Started', {
    ...jobIdentity(job),
    occurredAt: new Date(start.startedAt).toISOString(),
    attempt: attempt.attempt,
    capacity: attempt.capacity,
    queue: attempt.queue,
    batchJobId: start.batchJobId,
    usdPerHour: start.usdPerHour,
  });
}

/** A threshold a ledger write crossed, as the ledger reports it (shared/ledger.ts `ThresholdCrossing`). */
export interface CrossedThreshold {
  readonly scope: string;
  readonly period: string;
  readonly threshold: ThresholdName;
  readonly limitUsd: number;
  readonly spentUsd: number;
  readonly reservedUsd: number;
}

/**
 * One `Budget Threshold Crossed` event per threshold a ledger write crossed. The ledger reports each scope, month and
 * threshold once, to the write that crossed it, so every writer that can cross one (a reservation, an accrual, a
 * settlement, an admin's new limit) must publish what it was told (shared/budget-alerts.ts `publishCrossings`).
 */
export function thresholdCrossedEvents(
  crossings: readonly CrossedThreshold[],
  budgets: Pick<TrainyardConfig['budgets'], 'warnThreshold' | 'blockThreshold'>,
  occurredAt: string,
): EventEntry<'Budget Threshold Crossed'>[] {
  return crossings.map((crossing) =>
    buildEvent('Budget Threshold Crossed', {
      team: parseScope(crossing.scope).team,
      scope: crossing.scope,
      period: crossing.period,
      // A percent with two decimals: 0.7 → 70, 0.875 → 87.5.
      thresholdPercent:
        Math.round((crossing.threshold === 'warn' ? budgets.warnThreshold : budgets.blockThreshold) * 10_000) / 100,
      limitUsd: crossing.limitUsd,
      spentUsd: crossing.spentUsd,
      reservedUsd: crossing.reservedUsd,
      occurredAt,
    }),
  );
}

/** Validates a received detail (a consumer, a test, local mode's event log) against its detail-type's schema. */
export function parseEventDetail<T extends DetailType>(detailType: T, detail: unknown): EventDetail<T> {
  const type = requireDetailType(detailType);
  const result = EVENT_SCHEMAS[type].safeParse(detail);
  if (!result.success) {
    throw new InvalidEventDetail(`invalid "${type}" detail: ${describeIssues(result.error.issues)}`);
  }
  return result.data as EventDetail<T>;
}
