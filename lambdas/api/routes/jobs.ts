/**
 * Jobs: submit (POST /jobs), list, show, cancel (DELETE) and resume.
 *
 * Submission validates everything before it writes anything, then writes in an order a retry with the same
 * Idempotency-Key can always finish: (1) claim the key → (2) store the bundle → (3) create the job record →
 * (4) StartExecution named by the job id. Every step is idempotent (conditional put, same object bytes, conditional
 * create, execution name), and a replay that finds the job still SUBMITTED repeats (4), so a crash between any two
 * writes is recovered by retrying the request. `Job Submitted` is the cost gate's to publish, once the job has passed
 * analysis and its reservation is made. A
 * replay sent the same way as the request that claimed the key is answered from the claim (the job as it is now,
 * the first answer's analysis and estimate) before its bundle is read: it may have expired since.
 */
import { isDeepStrictEqual } from 'node:util';
import { formatUsd } from '../../domain/analysis/format';
import { TERMINATE_REASONS } from '../../domain/batch-reasons';
import { BudgetExceeded, jobScopes } from '../../domain/budgets';
import { compareCodeUnits } from '../../domain/code-unit-order';
import { isoTimestamp, isTerminal, JOB_ID_PATTERN, type JobRecord } from '../../domain/job';
import { budgetPeriodOf } from '../../domain/watch';
import { jobKeysFor, uploadKey } from '../../domain/workspace-layout';
import { reserveToFinish } from '../../shared/budget-alerts';
import { JobNotFound } from '../../shared/job-store';
import { logger } from '../../shared/logger';
import { decodeOpaqueCursor } from '../../shared/opaque-cursor';
import { jobKeys } from '../../shared/table-design';
import { sha256Hex, textFilesOf } from '../../shared/tarball';
import { resolveBundle } from '../bundle';
import { badRequest, conflict, forbidden } from '../errors';
import { attemptView, costSoFarUsd, currentProgress, forecastView, progressSamples, publicJob } from '../job-view';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, requiredJsonBody, requireTeam } from '../router';
import {
  IDEMPOTENCY_KEY_PATTERN,
  listJobsQuerySchema,
  noQuerySchema,
  parseRequest,
  submitRequestSchema,
} from '../schemas';
import { assessWorkload, estimateSummary } from '../workload';

/** Largest first answer (analysis and estimate, as JSON) an Idempotency-Key's claim keeps for its replays. */
export const MAX_KEPT_ANSWER_BYTES = 64 * 1024;

/** The first answer's parts a claim keeps for replays, as JSON; undefined when over MAX_KEPT_ANSWER_BYTES. */
export function keptAnswer(answer: { analysis: unknown; estimate: unknown }): string | undefined {
  const text = JSON.stringify(answer);
  return Buffer.byteLength(text) <= MAX_KEPT_ANSWER_BYTES ? text : undefined;
}

/** What a resume continues with when a job does not say (nanoGPT's flag). */
export const DEFAULT_RESUME_ARGS = ['--init_from=resume'];

/** Routes of jobs. */
export function jobRoutes(plane: ApiPlane): Route[] {
  return [
    { method: 'POST', path: '/jobs', handler: (r) => submitJob(plane, r) },
    { method: 'GET', path: '/jobs', handler: (r) => listJobs(plane, r) },
    { method: 'GET', path: '/jobs/{id}', handler: (r) => showJob(plane, r) },
    { method: 'DELETE', path: '/jobs/{id}', handler: (r) => cancelJob(plane, r) },
    { method: 'POST', path: '/jobs/{id}/resume', handler: (r) => resumeJob(plane, r) },
  ];
}

/** The caller's team's job, or 404 — the same 404 for another team's job, so its existence is not revealed. */
export async function ownJob(
  plane: Pick<ApiPlane, 'jobs'>,
  team: string,
  jobId: string | undefined,
): Promise<JobRecord> {
  const id = jobId ?? '';
  if (!JOB_ID_PATTERN.test(id)) throw new JobNotFound(id);
  const job = await plane.jobs.getJob(id);
  if (!job || job.team !== team) throw new JobNotFound(id);
  return job;
}

/** JSON with object keys sorted at every level, so equal requests hash equally whatever the key order. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => compareCodeUnits(a, b));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function idempotencyKeyOf(request: ApiRequest): string | undefined {
  const key = request.headers['idempotency-key'];
  if (key === undefined) return undefined;
  if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
    throw badRequest(
      `Idempotency-Key must be 1-128 characters of A-Z, a-z, 0-9, '_' and '-', got ${JSON.stringify(key.slice(0, 140))}`,
    );
  }
  return key;
}

async function submitJob(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  // 1. Validate everything; nothing is written before this block has passed.
  const team = requireTeam(request.caller);
  const key = idempotencyKeyOf(request);
  parseRequest(noQuerySchema, request.query, 'query');
  const body = parseRequest(submitRequestSchema(plane.config.limits.maxEnvVars), requiredJsonBody(request), 'body');
  // The user is a budget scope: charging another user's budget (or an unbudgeted name, to get round one's own) is an
  // admin's call only.
  if (body.user !== undefined && body.user !== request.caller.userName && !request.caller.admin) {
    throw forbidden(
      `body.user: "${body.user}" is not the caller (${request.caller.userName}); only an admin may submit a job for another user, since it is charged to that user's budget`,
    );
  }
  // A replay is answered from what the first try recorded, without reading its bundle or assessing it again: an
  // upload may have expired since, or the tiers changed, and the job exists whatever they say now.
  // The user the job is charged to is part of the request: a key two users share never answers one with the other's job.
  const user = body.user ?? request.caller.userName;
  const bodyHash = sha256Hex(canonicalJson({ team: team.id, user, body }));
  if (key !== undefined) {
    const replay = await replayOf(plane, team.id, key, bodyHash, body.uploadId);
    if (replay) return replay;
  }
  const bundle = await resolveBundle(plane, team.id, { bundle: body.bundle, uploadId: body.uploadId });
  const assessment = await assessWorkload(plane, team, {
    files: textFilesOf(bundle.files),
    command: body.command,
    ...(body.requirements && { requirements: body.requirements }),
  });
  const { bundle: _inline, uploadId: _upload, ...rest } = body;
  // The bundle counts by content, not by how it travelled (inline or upload).
  const requestHash = sha256Hex(canonicalJson({ team: team.id, user, body: rest, bundleSha256: bundle.sha256 }));
  const answer = { analysis: assessment.analysis, estimate: assessment.estimate };
  const respond = (status: number, job: JobRecord, replayed: boolean): ApiResponse => ({
    status,
    body: { job: publicJob(job), ...answer, replayed },
  });

  // 2. Claim the key. A replay of the same request returns that job (finishing its submission if a crash cut it).
  let jobId = plane.newId();
  if (key !== undefined) {
    const claim = await plane.jobs.claimIdempotencyKey(team.id, key, { jobId, requestHash, bodyHash });
    if (!claim.claimed) {
      if (!claim.sameRequest) {
        throw conflict(
          'idempotency_key_reused',
          `Idempotency-Key "${key}" was already used for a different request (job ${claim.jobId}); send the same body to get that job, or use a new key for a new job`,
          { jobId: claim.jobId },
        );
      }
      const existing = await plane.jobs.getJob(claim.jobId);
      if (existing) {
        if (existing.state === 'SUBMITTED') await startLifecycle(plane, existing);
        // The try that created it may have stopped before keeping its answer: this one, of the same request, is kept
        // instead (never over one already kept), so a replay still finds the job once the upload is gone.
        const kept = keptAnswer(answer);
        if (kept !== undefined) await plane.jobs.keepIdempotencyAnswer(team.id, key, existing.jobId, kept);
        return respond(200, existing, true);
      }
      // Claimed by an earlier try that stopped before creating the job: finish it under the claimed id.
      jobId = claim.jobId;
    }
  }

  // 3. The bundle, then the record that points at it.
  const keys = jobKeysFor(team.id, jobId);
  await plane.workspace.put(keys.bundle, bundle.bytes, 'application/gzip');
  const record: JobRecord = {
    jobId,
    team: team.id,
    user,
    ...(body.project !== undefined && { project: body.project }),
    ...(body.labels !== undefined && Object.keys(body.labels).length > 0 && { labels: body.labels }),
    tier: assessment.tier.id,
    state: 'SUBMITTED',
    createdAt: plane.clock().toISOString(),
    command: body.command,
    requirements: body.requirements ?? {},
    retries: body.retries ?? { maxAppRetries: 0, backoffSeconds: 60 },
    resumeArgs: body.resumeArgs ?? DEFAULT_RESUME_ARGS,
    ...(body.checkpointDoneFile !== undefined && { checkpointDoneFile: body.checkpointDoneFile }),
    estimate: estimateSummary(assessment),
    counters: { attempts: 0, reclaims: 0, capacityCancellations: 0, appErrors: 0, infraErrors: 0, resumeFailures: 0 },
    costSoFarUsd: 0,
    bundle: { key: keys.bundle, bytes: bundle.bytes.length, sha256: bundle.sha256 },
    env: body.env ?? {},
  };
  // false when a concurrent try with the same key created it first: either way the stored record is the job.
  const created = await plane.jobs.createJob(record);
  const job = await plane.jobs.requireJob(jobId);
  // The answer replays repeat is the first kept: the try that created the job, unless it stopped before keeping it
  // (then a retry's). Never the answer of a try that claimed the key and stopped before creating the job.
  const kept = key !== undefined ? keptAnswer(answer) : undefined;
  if (key !== undefined && kept !== undefined) await plane.jobs.keepIdempotencyAnswer(team.id, key, jobId, kept);

  // 4-5. Announce and start; both are safe to repeat.
  await startLifecycle(plane, job);
  logger.info('job submitted', { jobId, team: team.id, tier: job.tier });
  // A concurrent try with the same key created it: to this caller it is a replay, answered as one.
  return created ? respond(202, job, false) : respond(200, job, true);
}

/**
 * The answer to a replay of a request an Idempotency-Key has already taken, sent the same way (same body, same
 * inline bundle, or the same upload id once that upload has gone): the job as it is now, with the analysis and
 * estimate the answer that created it gave. Undefined when the full path must run: the key is new, the body differs
 * (a different request, or the same bundle sent another way), the upload is still there (its content is compared:
 * it may have been replaced), the claim kept no answer, or the try that claimed it stopped before creating the job.
 */
async function replayOf(
  plane: ApiPlane,
  team: string,
  key: string,
  bodyHash: string,
  uploadId: string | undefined,
): Promise<ApiResponse | undefined> {
  const claim = await plane.jobs.findIdempotencyKey(team, key);
  if (claim?.bodyHash !== bodyHash || claim.answer === undefined) return undefined;
  if (uploadId !== undefined) {
    const upload = uploadKey(team, uploadId);
    if ((await plane.workspace.list(upload)).some((o) => o.key === upload)) return undefined;
  }
  const job = await plane.jobs.getJob(claim.jobId);
  if (!job || job.team !== team) return undefined;
  if (job.state === 'SUBMITTED') await startLifecycle(plane, job);
  return { status: 200, body: { job: publicJob(job), ...JSON.parse(claim.answer), replayed: true } };
}

/** Starts the job's execution; named by the job id, so a replay that finds it started changes nothing. */
async function startLifecycle(plane: ApiPlane, job: JobRecord): Promise<void> {
  await plane.lifecycle.startExecution(job.jobId, { jobId: job.jobId });
}

function checkCursor(cursor: string, team: string): void {
  const decoded = decodeOpaqueCursor(cursor);
  if (!isTeamCursor(decoded, team)) {
    throw badRequest('query.cursor: is not a cursor GET /jobs returned to this team; start again without it');
  }
}

/**
 * Whether a decoded cursor is keys GET /jobs could have handed out to this team: a job item's table keys and its byTeam
 * index keys, for a job id and creation time of the shapes the records hold, and nothing else. Anything else would
 * reach DynamoDB as a start key and fail there as a server error (a key of another item kind, or over the 1 KiB a sort
 * key may have).
 */
function isTeamCursor(decoded: unknown, team: string): boolean {
  if (typeof decoded !== 'object' || decoded === null || Array.isArray(decoded)) return false;
  const { pk, gsi1sk } = decoded as Record<string, unknown>;
  if (typeof pk !== 'string' || typeof gsi1sk !== 'string') return false;
  const jobId = pk.slice('JOB#'.length);
  const createdAt = gsi1sk.slice(0, Math.max(0, gsi1sk.length - jobId.length - 1));
  if (!JOB_ID_PATTERN.test(jobId) || !isoTimestamp.safeParse(createdAt).success) return false;
  return isDeepStrictEqual(decoded, { ...jobKeys.job(jobId), ...jobKeys.teamIndex(team, createdAt, jobId) });
}

async function listJobs(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const team = requireTeam(request.caller);
  const query = parseRequest(listJobsQuerySchema, request.query, 'query');
  if (query.cursor !== undefined) checkCursor(query.cursor, team.id);
  const page = await plane.jobs.listJobsByTeam(team.id, {
    limit: query.limit ?? 20,
    ...(query.cursor !== undefined && { cursor: query.cursor }),
    ...(query.label !== undefined && { labels: query.label.selectors }),
    ...(query.state !== undefined && { states: query.state }),
  });
  return {
    status: 200,
    body: { jobs: page.jobs.map(publicJob), ...(page.nextCursor !== undefined && { nextCursor: page.nextCursor }) },
  };
}

async function showJob(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  parseRequest(noQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  const [attempts, decisions] = await Promise.all([
    plane.jobs.listAttempts(job.jobId),
    plane.jobs.listDecisions(job.jobId),
  ]);
  const nowMs = plane.clock().getTime();
  const views = attempts.map((a) => attemptView(a, nowMs));
  const spentUsd = costSoFarUsd(views);
  const terminal = isTerminal(job.state);
  const keys = jobKeysFor(job.team, job.jobId);
  let harnessProgress: Record<string, unknown> | undefined;
  let samplesText = '';
  if (!terminal && attempts.length > 0) {
    const [progress, metrics] = await Promise.all([
      plane.workspace.getJson(keys.progress),
      // The forecast takes its rate from the newest samples: the log's end is all it needs, whatever the log's size
      // (the harness keeps it to 20,000 samples; a job's own role could write more).
      plane.workspace.getTail(keys.metricsLog, FORECAST_METRICS_BYTES),
    ]);
    if (progress && typeof progress === 'object') harnessProgress = progress as Record<string, unknown>;
    samplesText = metrics?.toString('utf8') ?? '';
  }
  // progress.json is the job's own to write: only a whole, positive step count is one the forecast can take.
  const harnessTotal = harnessProgress?.total_steps;
  const totalSteps =
    job.progress?.totalSteps ??
    (typeof harnessTotal === 'number' && Number.isSafeInteger(harnessTotal) && harnessTotal > 0
      ? harnessTotal
      : undefined);
  return {
    status: 200,
    body: {
      job: publicJob(job),
      attempts: views,
      // What a decision's step keeps for AttemptOutcome's retries is not part of the view.
      decisions: decisions.map(({ step: _step, ...decision }) => decision),
      progress: currentProgress(job, harnessProgress),
      forecast: forecastView({
        job,
        attempts: views,
        samples: progressSamples(samplesText, attempts),
        ...(totalSteps !== undefined && { totalSteps }),
        nowMs,
        terminal,
      }),
      costSoFarUsd: spentUsd,
    },
  };
}

/**
 * How much of the end of a job's metrics.jsonl GET /jobs/{id} reads for its forecast: about 5,000 samples of the
 * harness's usual 200 bytes, many times the last intervals the forecast takes its rate from (FORECAST_WINDOW_INTERVALS).
 */
export const FORECAST_METRICS_BYTES = 1024 * 1024;

/** Errors Step Functions gives for a task token that is no longer waiting (already resumed, cancelled or timed out). */
const SPENT_TOKEN_ERRORS = new Set(['TaskTimedOut', 'TaskDoesNotExist', 'InvalidToken']);

async function sendToPausedTask(plane: ApiPlane, token: string, action: 'resume' | 'cancel'): Promise<boolean> {
  try {
    await plane.lifecycle.sendTaskSuccess(token, { action });
    return true;
  } catch (error) {
    if (SPENT_TOKEN_ERRORS.has((error as Error).name)) return false;
    throw error;
  }
}

/** Whether a job ended because a cancel was acted on: CANCELLED with its cancel flag set. */
function cancelActedOn(job: JobRecord): boolean {
  return job.state === 'CANCELLED' && job.cancelRequested === true;
}

async function cancelJob(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  parseRequest(noQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  // A cancel repeated after the first was acted on is answered as that one was: there is nothing left to do.
  const repeated = (cancelled: JobRecord): ApiResponse => {
    logger.info('job cancel repeated', { jobId: job.jobId, team: team.id, state: cancelled.state });
    return { status: 202, body: { job: publicJob(cancelled), terminatedBatchJob: false, releasedPause: false } };
  };
  if (isTerminal(job.state)) {
    if (cancelActedOn(job)) return repeated(job);
    throw conflict('job_finished', `job ${job.jobId} is ${job.state}; a finished job cannot be cancelled`, {
      state: job.state,
    });
  }
  // The flag first: every lifecycle step honours it, so the cancel holds even if the calls below fail.
  const flagged = await plane.jobs.requestCancel(job.jobId);
  // It finished between the read and the flag: nothing is left to cancel, and nothing was written.
  if (isTerminal(flagged.state)) {
    if (cancelActedOn(flagged)) return repeated(flagged);
    throw conflict('job_finished', `job ${job.jobId} is ${flagged.state}; a finished job cannot be cancelled`, {
      state: flagged.state,
    });
  }
  const newest = (await plane.jobs.listAttempts(job.jobId)).at(-1);
  const terminated = newest?.batchJobId !== undefined && newest.stoppedAt === undefined;
  if (terminated && newest?.batchJobId) await plane.batch.terminateJob(newest.batchJobId, TERMINATE_REASONS.cancel);
  // The job as flagged, not as first read: a pause or a backoff recorded in between has its token here (and one
  // recorded after the flag sees the flag and cancels itself). Sent, it ends the wait (for budget, or before a retry)
  // now; a token already spent is refused, and the job's next step honours the flag.
  const resumedToCancel =
    flagged.pauseToken !== undefined ? await sendToPausedTask(plane, flagged.pauseToken, 'cancel') : false;
  // Still SUBMITTED: its execution may never have started (StartExecution failed and the submission was not retried).
  // Nothing would act on the flag then; started now (by name: a running one is left as it is), Analyze finds the
  // flag and the job ends CANCELLED with nothing reserved.
  if (flagged.state === 'SUBMITTED') await startLifecycle(plane, flagged);
  logger.info('job cancel requested', { jobId: job.jobId, team: team.id, state: job.state });
  return {
    status: 202,
    body: { job: publicJob(flagged), terminatedBatchJob: terminated, releasedPause: resumedToCancel },
  };
}

async function resumeJob(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  parseRequest(noQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  if (job.state !== 'PAUSED_BUDGET') {
    throw conflict('job_not_paused', `job ${job.jobId} is ${job.state}; only a job in PAUSED_BUDGET can be resumed`, {
      state: job.state,
    });
  }
  if (job.cancelRequested) {
    throw conflict('job_cancelling', `job ${job.jobId} is being cancelled; it cannot be resumed`, { state: job.state });
  }
  if (job.pauseToken === undefined) {
    throw conflict(
      'job_pausing',
      `job ${job.jobId} is PAUSED_BUDGET but its pause has not been recorded yet; retry in a few seconds`,
      { state: job.state },
    );
  }
  // As budget-watch resumes it: only once no budget the job is charged to is blocked any more.
  const period = budgetPeriodOf(job);
  const blocked = await plane.ledger.firstBlockedScope(jobScopes(job), period);
  if (blocked !== undefined) {
    throw conflict(
      'budget_blocked',
      `job ${job.jobId} cannot resume: budget ${blocked} for ${period} is still at or over its limit; an admin raises it with PUT /budgets/{scope}, then resume (budget-watch also resumes it within 5 minutes of the raise)`,
      { state: job.state, scope: blocked, period },
    );
  }
  // The money it is about to spend is held from other jobs again, as its cost gate held the estimate.
  try {
    await reserveToFinish(plane, job, plane.clock().toISOString());
  } catch (error) {
    if (!(error instanceof BudgetExceeded)) throw error;
    const { scope, requestedUsd, availableUsd } = error.details;
    throw conflict(
      'budget_insufficient',
      `job ${job.jobId} cannot resume: it is forecast to cost ${formatUsd(requestedUsd)} more than it holds, and budget ${scope} for ${period} has ${formatUsd(availableUsd)} available; an admin raises it with PUT /budgets/{scope}, then resume`,
      { state: job.state, scope, period, requestedUsd, availableUsd },
    );
  }
  const sent = await sendToPausedTask(plane, job.pauseToken, 'resume');
  if (!sent) {
    throw conflict('job_not_paused', `job ${job.jobId} is no longer waiting to be resumed (its pause already ended)`, {
      state: job.state,
    });
  }
  return { status: 202, body: { job: publicJob(job) } };
}
