/**
 * A finished job's files in the workspace: `summary.json` (the job, its attempts, decisions and cost) and
 * `report.html` (lambdas/domain/job-report.ts, with the harness's metric samples). Finalize writes them when the job
 * ends; batch-events writes them again when it bills an orphaned Batch job to a job that has ended, so that what the
 * files say the job cost is what the job and its budget were charged.
 *
 * The two writers race: Finalize can render from attempts read just before an orphan's cost was recorded and write
 * after batch-events rewrote the files with it. So each writer reads the attempts again after writing, and writes
 * again while they changed in between ({@link writeJobFiles}). The last write is then never stale: its writer's read
 * after it saw every change made before that read, and a change made after it has a writer of its own, whose writes
 * come later. The job's `costSoFarUsd` is kept the same way, since both writers set it from the attempts they read.
 * Each write replaces a whole object, so a replay writes the same files again.
 */
import { isDeepStrictEqual } from 'node:util';
import type { AttemptRecord, JobRecord } from '../domain/job';
import { renderJobReport } from '../domain/job-report';
import { recordedCost } from '../domain/watch';
import { jobKeysFor, s3Uri } from '../domain/workspace-layout';
import type { ControlPlane } from './control-plane';
import { logger } from './logger';
import { MAX_JSON_DOCUMENT_BYTES, ObjectTooLarge, type Workspace } from './workspace';

/**
 * The largest metrics.jsonl the report reads: about 440,000 samples of the harness's usual 150 bytes. The object is
 * held whole (twice while the SDK assembles it) and its series take about as much again, in a 512 MiB function; a
 * larger log leaves the sample plots out of the report, saying why, rather than run out of memory on every retry.
 */
export const MAX_REPORT_METRICS_BYTES = 64 * 1024 * 1024;

/**
 * Writes in one call, at most: every round but the first follows a change to the attempts made while the previous
 * one wrote, and each such change (an orphan's cost) has a writer of its own that writes after it, so stopping here
 * leaves the files to that writer rather than to a loop that an endless stream of changes would keep going.
 */
export const MAX_JOB_FILE_WRITES = 5;

/** What the files were last written from. */
export interface WrittenJobFiles {
  /** The job as stored, its cost so far set to `costUsd`. */
  readonly job: JobRecord;
  readonly attempts: AttemptRecord[];
  /** The job's recorded cost (ended attempts and their orphans, rounded to the cent). */
  readonly costUsd: number;
  readonly summaryUri: string;
  readonly reportUri: string;
}

/** The harness's metrics log for the report: its bytes, nothing when there is none, or why it is left out. */
async function metricsForReport(
  workspace: Pick<Workspace, 'getAtMost'>,
  key: string,
): Promise<{ metricsLog?: Uint8Array; metricsOmitted?: string }> {
  try {
    const log = await workspace.getAtMost(key, MAX_REPORT_METRICS_BYTES);
    return log === undefined ? {} : { metricsLog: log };
  } catch (error) {
    if (!(error instanceof ObjectTooLarge)) throw error;
    const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
    return {
      metricsOmitted: `it holds ${error.bytes} bytes (${mib(error.bytes)} MiB), more than the ${mib(error.limitBytes)} MiB a report reads`,
    };
  }
}

/**
 * Writes the job's summary and report from `attempts` (read after the job reached its final state), with
 * `finishedAt` as the time the job finished, then reads the attempts again and writes anew while they changed (see
 * the module comment). Sets the job's `costSoFarUsd` to the recorded cost before each write when it differs.
 */
export async function writeJobFiles(
  plane: Pick<ControlPlane, 'jobs' | 'workspace'>,
  job: JobRecord,
  attempts: AttemptRecord[],
  finishedAt: string,
): Promise<WrittenJobFiles> {
  const keys = jobKeysFor(job.team, job.jobId);
  const summaryUri = s3Uri(plane.workspace.bucket, keys.summary);
  const reportUri = s3Uri(plane.workspace.bucket, keys.report);
  let written = { job, attempts };
  for (let round = 1; ; round++) {
    const costUsd = recordedCost(written.attempts);
    let current = written.job;
    if (costUsd !== current.costSoFarUsd) current = await plane.jobs.patchJob(current.jobId, { costSoFarUsd: costUsd });
    const decisions = await plane.jobs.listDecisions(current.jobId);
    const summary = {
      job: { ...current, pauseToken: undefined },
      attempts: written.attempts,
      decisions,
      costUsd,
      finishedAt,
    };
    await plane.workspace.put(keys.summary, JSON.stringify(summary, null, 2), 'application/json');
    const metrics = await metricsForReport(plane.workspace, keys.metricsLog);
    const report = renderJobReport({
      job: current,
      attempts: written.attempts,
      decisions,
      costUsd,
      finishedAt,
      ...metrics,
    });
    await plane.workspace.put(keys.report, report, 'text/html; charset=utf-8');

    const again = await plane.jobs.listAttempts(current.jobId);
    if (isDeepStrictEqual(again, written.attempts) || round === MAX_JOB_FILE_WRITES) {
      if (round === MAX_JOB_FILE_WRITES && !isDeepStrictEqual(again, written.attempts)) {
        logger.warn(
          'the job’s attempts kept changing while its files were written; the last change’s writer rewrites them',
          {
            jobId: current.jobId,
            writes: round,
          },
        );
      }
      return { job: current, attempts: written.attempts, costUsd, summaryUri, reportUri };
    }
    written = { job: await plane.jobs.requireJob(current.jobId), attempts: again };
  }
}

/**
 * Writes a finished job's files again, after an orphan's cost was recorded on it: from the records as they are now,
 * keeping the `finishedAt` of the summary Finalize wrote. Writes nothing when there is no summary yet: Finalize has not
 * written its files, and when it does, its read after writing sees the orphan.
 */
export async function rewriteJobFiles(
  plane: Pick<ControlPlane, 'jobs' | 'workspace'>,
  jobId: string,
): Promise<WrittenJobFiles | undefined> {
  const job = await plane.jobs.requireJob(jobId);
  // The summary lies in the team's folder, which the team's jobs can write: read it bounded, and one too large to be
  // the summary Finalize wrote keeps no finishedAt.
  let stored: Buffer | undefined;
  try {
    stored = await plane.workspace.getAtMost(jobKeysFor(job.team, jobId).summary, MAX_JSON_DOCUMENT_BYTES);
  } catch (error) {
    if (!(error instanceof ObjectTooLarge)) throw error;
    stored = Buffer.alloc(0);
  }
  if (stored === undefined) return undefined;
  return writeJobFiles(plane, job, await plane.jobs.listAttempts(jobId), finishedAtOf(stored, job));
}

/** The `finishedAt` of a stored summary; the job's last update when the summary does not hold a valid one. */
function finishedAtOf(summary: Buffer, job: JobRecord): string {
  try {
    const { finishedAt } = JSON.parse(summary.toString('utf8')) as { finishedAt?: unknown };
    if (typeof finishedAt === 'string' && !Number.isNaN(Date.parse(finishedAt))) return finishedAt;
  } catch {
    // Not JSON: fall through to the job's own time.
  }
  const fallback = job.updatedAt ?? job.createdAt;
  logger.warn('the job’s summary.json holds no valid finishedAt; the rewrite uses the job’s last update', {
    jobId: job.jobId,
    finishedAt: fallback,
  });
  return fallback;
}
