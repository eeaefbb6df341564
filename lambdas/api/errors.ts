/**
 * Errors at the API edge: one class that carries an HTTP status and a stable code, and the mapping from the domain's
 * named errors to statuses. Domain modules never know about HTTP; only this file does (STYLE 12).
 */
import { InvalidRequirement, UnknownTier, WorkloadRefused } from '../domain/analysis';
import { ConcurrentUpdate, InvalidBudgetInput, InvalidScope } from '../domain/budgets';
import { InvalidEstimateInput } from '../domain/estimator';
import { InvalidReportPeriod } from '../domain/showback';
import { JobNotFound, JobStateConflict } from '../shared/job-store';
import { logger } from '../shared/logger';
import { BundleTooLarge, InvalidBundle } from '../shared/tarball';

/** Error body shape returned on every failure: `{ "error": { code, message, details? } }`. */
export interface ErrorBody {
  readonly error: { readonly code: string; readonly message: string; readonly details?: Record<string, unknown> };
}

/** An error that already knows its HTTP status and code; its message is shown to the caller as is. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** 400: the request is malformed or breaks a rule; the message names the field and the rule. */
export const badRequest = (message: string, details?: Record<string, unknown>) =>
  new ApiError(400, 'invalid_request', message, details);
/** 403: the caller may not do this. */
export const forbidden = (message: string) => new ApiError(403, 'forbidden', message);
/** 404: unknown, or not the caller's to see (the two are indistinguishable on purpose). */
export const notFound = (message: string) => new ApiError(404, 'not_found', message);
/** 409: the resource is in a state that does not allow the request. */
export const conflict = (code: string, message: string, details?: Record<string, unknown>) =>
  new ApiError(409, code, message, details);
/** 413: a body or bundle over a configured limit. */
export const tooLarge = (message: string, details?: Record<string, unknown>) =>
  new ApiError(413, 'payload_too_large', message, details);

/** The message every unexpected failure gets: never a stack trace or an internal detail. */
export const INTERNAL_MESSAGE =
  'internal error; the request may be retried (with the same Idempotency-Key for POST /jobs)';

/** Maps any thrown value to a status and error body; unexpected errors are logged and answered with 500. */
export function toErrorResponse(error: unknown): { status: number; body: ErrorBody } {
  const body = (code: string, message: string, details?: Record<string, unknown>): ErrorBody => ({
    error: { code, message, ...(details && { details }) },
  });
  if (error instanceof ApiError) return { status: error.status, body: body(error.code, error.message, error.details) };
  if (error instanceof WorkloadRefused) {
    return { status: 422, body: body('workload_refused', error.message, { analysis: error.analysis }) };
  }
  if (error instanceof UnknownTier) {
    return { status: 400, body: body('unknown_tier', error.message, { knownTiers: error.knownTiers }) };
  }
  if (error instanceof InvalidScope) return { status: 400, body: body('invalid_scope', error.message) };
  if (error instanceof BundleTooLarge) {
    return { status: 413, body: body('payload_too_large', error.message, { maxUnpackedBytes: error.maxBytes }) };
  }
  if (error instanceof InvalidBundle) return { status: 400, body: body('invalid_bundle', error.message) };
  if (
    error instanceof InvalidRequirement ||
    error instanceof InvalidBudgetInput ||
    error instanceof InvalidEstimateInput ||
    error instanceof InvalidReportPeriod
  ) {
    return { status: 400, body: body('invalid_request', error.message) };
  }
  if (error instanceof JobNotFound) return { status: 404, body: body('not_found', error.message) };
  if (error instanceof JobStateConflict) return { status: 409, body: body('job_state_conflict', error.message) };
  if (error instanceof ConcurrentUpdate) return { status: 503, body: body('busy', `${error.message}; retry it`) };
  logger.error('unhandled API error', { error: error instanceof Error ? error : String(error) });
  return { status: 500, body: body('internal', INTERNAL_MESSAGE) };
}
