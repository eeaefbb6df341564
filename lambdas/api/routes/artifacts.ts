/**
 * A job's artifacts: complete checkpoints with presigned download URLs, and recent container log lines.
 *
 * Log streams: an attempt's stream name is Batch's `logStreamName` (`<team>/default/<ECS task id>`: the job
 * definitions log under the team's stream prefix). The batch-events handler records it on the attempt when the attempt
 * starts; when a record carries only the ECS task ARN the name is derived from it (batch-names.ts); with neither, the
 * attempt has not started a container yet and there are no lines.
 *
 * Following a log: every answer carries `nextCursor`, the position after its last line (job, attempt, and the log
 * reader's position in that attempt's stream); `after=<cursor>` answers the lines that came after it, so a follower
 * gets each line once, however many arrive between two polls. Without `attempt`, a cursor goes on into the job's next
 * attempt (from its first line) once its own attempt has nothing more to read.
 */
import { containerLogStream } from '../../domain/batch-names';
import { compareCodeUnits } from '../../domain/code-unit-order';
import type { AttemptRecord, JobRecord } from '../../domain/job';
import { jobKeysFor } from '../../domain/workspace-layout';
import { decodeOpaqueCursor, encodeOpaqueCursor } from '../../shared/opaque-cursor';
import { InvalidLogPosition, type LogPage, type LogReadStart } from '../../shared/ports';
import type { CheckpointSummary } from '../../shared/workspace';
import { badRequest, notFound } from '../errors';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, requireTeam } from '../router';
import { checkpointsQuerySchema, DEFAULT_LOG_LINES, logsQuerySchema, parseRequest } from '../schemas';
import { ownJob } from './jobs';

/** How long checkpoint download URLs stay valid, seconds. */
export const DOWNLOAD_URL_SECONDS = 900;

/** Routes of checkpoints and logs. */
export function artifactRoutes(plane: ApiPlane): Route[] {
  return [
    { method: 'GET', path: '/jobs/{id}/checkpoints', handler: (r) => listCheckpoints(plane, r) },
    { method: 'GET', path: '/jobs/{id}/logs', handler: (r) => recentLogs(plane, r) },
  ];
}

/**
 * The most download URLs one answer carries. A URL presigned with a Lambda's session credentials is about 1.5 KB, so
 * 1,000 keep an answer near 1.5 MB, well inside Lambda's 6 MB response limit, however many checkpoints a job keeps.
 */
export const MAX_CHECKPOINT_URLS = 1000;

/**
 * A job's complete checkpoints, newest first. The listing presigns the files of the newest checkpoints whose files
 * together fit {@link MAX_CHECKPOINT_URLS}; the older ones are listed with `filesOmitted: true`, their files fetched
 * with `checkpoint=<name>`. One named checkpoint comes with its files in path order, a page of at most that many,
 * `nextFilesAfter` leading to the next.
 */
async function listCheckpoints(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(checkpointsQuerySchema, request.query, 'query');
  if (query.filesAfter !== undefined && query.checkpoint === undefined) {
    throw badRequest(
      'query.filesAfter: pages the files of one checkpoint; name it with checkpoint=<name> (the answer that gave nextFilesAfter did)',
    );
  }
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  const complete = await plane.workspace.listCheckpoints(jobKeysFor(job.team, job.jobId).checkpoints);
  const expiresAt = new Date(plane.clock().getTime() + DOWNLOAD_URL_SECONDS * 1000).toISOString();
  const withUrls = (files: CheckpointSummary['files']) =>
    Promise.all(
      files.map(async (f) => ({
        path: f.path,
        size: f.size,
        url: await plane.workspace.presignDownload(f.key, DOWNLOAD_URL_SECONDS),
      })),
    );
  const answer = (checkpoints: unknown[], nextFilesAfter?: string): ApiResponse => ({
    status: 200,
    body: { jobId: job.jobId, checkpoints, expiresAt, ...(nextFilesAfter !== undefined && { nextFilesAfter }) },
  });

  if (query.checkpoint !== undefined) {
    const named = complete.find((c) => c.name === query.checkpoint);
    if (!named) {
      throw notFound(
        `job ${job.jobId} has no complete checkpoint ${query.checkpoint}; it has ${complete.length === 0 ? 'none yet' : complete.map((c) => c.name).join(', ')}`,
      );
    }
    const after = query.filesAfter;
    const rest = after === undefined ? named.files : named.files.filter((f) => compareCodeUnits(f.path, after) > 0);
    const page = rest.slice(0, MAX_CHECKPOINT_URLS);
    const next = rest.length > page.length ? page.at(-1)?.path : undefined;
    return answer([{ ...checkpointSummary(named), files: await withUrls(page) }], next);
  }

  let urlsLeft = MAX_CHECKPOINT_URLS;
  const checkpoints: unknown[] = [];
  for (const c of complete) {
    if (c.files.length > urlsLeft) urlsLeft = 0;
    if (urlsLeft === 0) {
      checkpoints.push({ ...checkpointSummary(c), filesOmitted: true });
      continue;
    }
    urlsLeft -= c.files.length;
    checkpoints.push({ ...checkpointSummary(c), files: await withUrls(c.files) });
  }
  return answer(checkpoints);
}

/** What the answer says of a checkpoint besides its files. */
function checkpointSummary(c: CheckpointSummary) {
  return {
    name: c.name,
    ...(c.step !== undefined && { step: c.step }),
    ...(c.attempt !== undefined && { attempt: c.attempt }),
    ...(c.createdAt !== undefined && { createdAt: c.createdAt }),
    resumeFailures: c.resumeFailures,
    setAside: c.setAside,
    fileCount: c.files.length,
    bytes: c.files.reduce((sum, f) => sum + f.size, 0),
  };
}

/** The log stream of an attempt (see the module comment), or undefined when it has none yet. */
export function logStreamOf(attempt: AttemptRecord, job: JobRecord): string | undefined {
  // Read loosely: the stream name and task ARN are recorded by the batch-events handler as Batch reports them.
  const fields = attempt as unknown as Record<string, unknown>;
  if (typeof fields.logStreamName === 'string' && fields.logStreamName.length > 0) return fields.logStreamName;
  const taskId = typeof fields.taskArn === 'string' ? /\/([^/]+)$/.exec(fields.taskArn)?.[1] : undefined;
  if (taskId) return containerLogStream(job.team, taskId);
  return undefined;
}

/** Where a follower of a job's log stands: an attempt (0: the job had none yet) and a position in its stream. */
export interface LogCursor {
  readonly jobId: string;
  readonly attempt: number;
  /** The log reader's position (LogPage.next); none: the attempt's first line. */
  readonly position?: string;
}

/** A cursor as the API hands it out: base64url JSON, opaque to callers. */
export function encodeLogCursor(cursor: LogCursor): string {
  const { jobId, attempt, position } = cursor;
  return encodeOpaqueCursor({ j: jobId, a: attempt, ...(position !== undefined && { p: position }) });
}

/** The cursor `after` holds, or a 400 saying it is not one this job's logs handed out. */
function decodeLogCursor(after: string, jobId: string): LogCursor {
  const decoded = decodeOpaqueCursor(after);
  const fields = (decoded ?? {}) as Record<string, unknown>;
  const valid =
    typeof decoded === 'object' &&
    typeof fields.j === 'string' &&
    Number.isInteger(fields.a) &&
    (fields.a as number) >= 0 &&
    (fields.p === undefined || typeof fields.p === 'string');
  if (!valid || fields.j !== jobId) {
    throw badRequest(
      `query.after: is not a nextCursor GET /jobs/${jobId}/logs returned; leave it out to start from the newest lines`,
    );
  }
  return { jobId, attempt: fields.a as number, ...(fields.p !== undefined && { position: fields.p as string }) };
}

async function recentLogs(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(logsQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  const limit = query.limit ?? DEFAULT_LOG_LINES;
  const attempts = await plane.jobs.listAttempts(job.jobId);
  const answer = (
    attempt: AttemptRecord | undefined,
    stream: string | undefined,
    page: LogPage | undefined,
    at?: LogCursor,
  ) => ({
    status: 200,
    body: {
      jobId: job.jobId,
      attempt: attempt?.attempt ?? null,
      logStreamName: stream ?? null,
      lines: page?.lines ?? [],
      ...(at && { nextCursor: encodeLogCursor(at) }),
    },
  });
  const read = async (stream: string, start: LogReadStart): Promise<LogPage> => {
    try {
      return await plane.logs.readLines(stream, start, limit);
    } catch (error) {
      if (!(error instanceof InvalidLogPosition)) throw error;
      throw badRequest(
        `query.after: the log position it holds cannot be read from (${error.message}); CloudWatch's positions last 24 hours: leave after out to start from the newest lines`,
      );
    }
  };

  if (query.after === undefined) {
    const attempt = query.attempt !== undefined ? attempts.find((a) => a.attempt === query.attempt) : attempts.at(-1);
    if (query.attempt !== undefined && !attempt) {
      throw notFound(
        `job ${job.jobId} has no attempt ${query.attempt}; it has ${attempts.length === 0 ? 'none yet' : `attempts 1-${attempts.length}`}`,
      );
    }
    const stream = attempt ? logStreamOf(attempt, job) : undefined;
    const page = stream ? await read(stream, 'tail') : undefined;
    const position = page?.next;
    return answer(attempt, stream, page, {
      jobId: job.jobId,
      attempt: attempt?.attempt ?? 0,
      ...(position !== undefined && { position }),
    });
  }

  const cursor = decodeLogCursor(query.after, job.jobId);
  if (query.attempt !== undefined && query.attempt !== cursor.attempt) {
    throw badRequest(
      `query.after: is a cursor into attempt ${cursor.attempt}, but attempt=${query.attempt} was asked for; pass that attempt's cursor, or leave attempt out`,
    );
  }
  // Without `attempt` the cursor follows the job: an attempt with nothing more to read hands over to the next one.
  const followsJob = query.attempt === undefined;
  let at: LogCursor = cursor;
  for (;;) {
    const attempt = attempts.find((a) => a.attempt === at.attempt);
    if (at.attempt !== 0 && !attempt) {
      throw badRequest(
        `query.after: is a cursor into attempt ${at.attempt}, which job ${job.jobId} does not have; leave after out to start from the newest lines`,
      );
    }
    const stream = attempt ? logStreamOf(attempt, job) : undefined;
    const page = stream
      ? await read(stream, at.position === undefined ? 'head' : { after: at.position })
      : { lines: [], atEnd: true };
    const later = followsJob ? attempts.find((a) => a.attempt > at.attempt) : undefined;
    if (page.lines.length > 0 || !page.atEnd || !later) {
      const position = page.next ?? at.position;
      return answer(attempt, stream, page, {
        jobId: job.jobId,
        attempt: at.attempt,
        ...(position !== undefined && { position }),
      });
    }
    at = { jobId: job.jobId, attempt: later.attempt };
  }
}
