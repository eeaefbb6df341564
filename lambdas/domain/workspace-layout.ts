/**
 * Where a job's objects live in the workspace bucket. Everything of a team sits under `teams/<team>/`, the only
 * prefix its job role can touch; the harness writes checkpoints and metrics under the same job folder.
 */

/** The job's folder. */
export function jobPrefix(team: string, jobId: string): string {
  return `teams/${team}/jobs/${jobId}/`;
}

/** Object keys of one job. */
export function jobKeysFor(team: string, jobId: string) {
  const base = jobPrefix(team, jobId);
  return {
    bundle: `${base}code.tar.gz`,
    checkpoints: `${base}checkpoints/`,
    metrics: `${base}metrics/`,
    progress: `${base}metrics/progress.json`,
    metricsLog: `${base}metrics/metrics.jsonl`,
    summary: `${base}summary.json`,
    report: `${base}report.html`,
  } as const;
}

/**
 * Where the scheduled showback reports are written: `reports/<kind>/<first day>/teams/<team>.json` (and `.csv`), and
 * `reports/<kind>/<first day>/all-teams.json`. Outside `teams/`, so no team's job role can reach them.
 */
export function teamReportKeys(kind: string, periodStart: string, team: string) {
  const base = `reports/${kind}/${periodStart}/teams/${team}`;
  return { json: `${base}.json`, csv: `${base}.csv` } as const;
}

/** What names the report of all teams together (its key, its event id): no team may take it as its id. */
export const ALL_TEAMS = 'all-teams';

/** The all-teams showback of a report kind and period (see {@link teamReportKeys}). */
export function allTeamsReportKey(kind: string, periodStart: string): string {
  return `reports/${kind}/${periodStart}/${ALL_TEAMS}.json`;
}

/** A presigned upload lands here until POST /jobs claims it (scratch/ expires after 30 days). */
export function uploadKey(team: string, uploadId: string): string {
  return `scratch/uploads/${team}/${uploadId}.tar.gz`;
}

/** `s3://bucket/key`. */
export function s3Uri(bucket: string, key: string): string {
  return `s3://${bucket}/${key}`;
}

/** Checkpoint folder names the harness writes: `ckpt-000001`. */
export const CHECKPOINT_FOLDER = /^ckpt-(\d{6,})\/(.+)$/;

/** Name of the manifest the harness writes last in a checkpoint folder. */
export const CHECKPOINT_MANIFEST = 'MANIFEST.json';

/** The marker an attempt leaves beside a checkpoint it failed right after restoring: `RESUME_FAILED-000003.json`. */
export const CHECKPOINT_RESUME_FAILED = /^RESUME_FAILED-\d+\.json$/;

/** Failed resumes after which the harness sets a checkpoint aside and restores the one before it. */
export const SET_ASIDE_AFTER_RESUME_FAILURES = 2;

/**
 * The checkpoint the harness restores, of complete ones listed newest first: the newest not set aside, else (every
 * one set aside) the newest, since a job never starts over while saved state exists (images/harness/README.md).
 */
export function checkpointToRestore<T extends { readonly setAside: boolean }>(
  newestFirst: readonly T[],
): T | undefined {
  return newestFirst.find((c) => !c.setAside) ?? newestFirst[0];
}
