/** Named errors of the lifecycle steps; Step Functions retries them (they are infrastructure, not user, failures). */

/** The job's inputs in the workspace are missing or unreadable. */
export class AnalysisError extends Error {
  override name = 'AnalysisError';
}
