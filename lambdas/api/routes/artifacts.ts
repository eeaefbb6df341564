/**
 * A job's artifacts: complete checkpoints with presigned download URLs, and recent container log lines.
 *
 * Log streams: an attempt's stream name is Batch's `logStreamName` (`<job definition>/default/<ECS task id>`). The
 * batch-events handler records it on the attempt when the attempt starts; when a record carries only the ECS task ARN
 * the name is derived from Batch's convention with the job definition name (batch-names.ts); with neither, the
 * attempt has not started a container yet and there are no lines.
 */
import { jobDefinitionName } from '../../domain/batch-names';
import type { AttemptRecord, JobRecord } from '../../domain/job';
import { jobKeysFor } from '../../domain/workspace-layout';
import { notFound } from '../errors';
import type { ApiPlane } from '../plane';
import { type ApiRequest, type ApiResponse, type Route, requireTeam } from '../router';
import { logsQuerySchema, noQuerySchema, parseRequest } from '../schemas';
import { ownJob } from './jobs';

/** How long checkpoint download URLs stay valid, seconds. */
export const DOWNLOAD_URL_SECONDS = 900;

/** Lines GET /jobs/{id}/logs returns when the query does not say. */
export const DEFAULT_LOG_LINES = 100;

/** Routes of checkpoints and logs. */
export function artifactRoutes(plane: ApiPlane): Route[] {
  return [
    { method: 'GET', path: '/jobs/{id}/checkpoints', handler: (r) => listCheckpoints(plane, r) },
    { method: 'GET', path: '/jobs/{id}/logs', handler: (r) => recentLogs(plane, r) },
  ];
}

async function listCheckpoints(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  parseRequest(noQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  const complete = await plane.workspace.listCheckpoints(jobKeysFor(job.team, job.jobId).checkpoints);
  const checkpoints = await Promise.all(
    complete.map(async (c) => ({
      name: c.name,
      ...(c.step !== undefined && { step: c.step }),
      ...(c.attempt !== undefined && { attempt: c.attempt }),
      ...(c.createdAt !== undefined && { createdAt: c.createdAt }),
      resumeFailures: c.resumeFailures,
      setAside: c.setAside,
      files: await Promise.all(
        c.files.map(async (f) => ({
          path: f.path,
          size: f.size,
          url: await plane.workspace.presignDownload(f.key, DOWNLOAD_URL_SECONDS),
        })),
      ),
    })),
  );
  const expiresAt = new Date(plane.clock().getTime() + DOWNLOAD_URL_SECONDS * 1000).toISOString();
  return { status: 200, body: { jobId: job.jobId, checkpoints, expiresAt } };
}

/** The log stream of an attempt (see the module comment), or undefined when it has none yet. */
export function logStreamOf(attempt: AttemptRecord, job: JobRecord, batchPrefix: string): string | undefined {
  // Read loosely: the stream name and task ARN are recorded by the batch-events handler as Batch reports them.
  const fields = attempt as unknown as Record<string, unknown>;
  if (typeof fields.logStreamName === 'string' && fields.logStreamName.length > 0) return fields.logStreamName;
  const taskId = typeof fields.taskArn === 'string' ? /\/([^/]+)$/.exec(fields.taskArn)?.[1] : undefined;
  if (taskId) return `${jobDefinitionName(batchPrefix, job.team, job.tier)}/default/${taskId}`;
  return undefined;
}

async function recentLogs(plane: ApiPlane, request: ApiRequest): Promise<ApiResponse> {
  const query = parseRequest(logsQuerySchema, request.query, 'query');
  const team = requireTeam(request.caller);
  const job = await ownJob(plane, team.id, request.params.id);
  const attempts = await plane.jobs.listAttempts(job.jobId);
  const attempt = query.attempt !== undefined ? attempts.find((a) => a.attempt === query.attempt) : attempts.at(-1);
  if (query.attempt !== undefined && !attempt) {
    throw notFound(
      `job ${job.jobId} has no attempt ${query.attempt}; it has ${attempts.length === 0 ? 'none yet' : `attempts 1-${attempts.length}`}`,
    );
  }
  const stream = attempt ? logStreamOf(attempt, job, plane.batchPrefix) : undefined;
  const lines = stream ? await plane.logs.recentLines(stream, query.limit ?? DEFAULT_LOG_LINES) : [];
  return {
    status: 200,
    body: {
      jobId: job.jobId,
      attempt: attempt?.attempt ?? null,
      logStreamName: stream ?? null,
      lines,
    },
  };
}
