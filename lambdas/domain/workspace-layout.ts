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
