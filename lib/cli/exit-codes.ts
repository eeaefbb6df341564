/**
 * The CLI's exit codes (docs/cli.md) and the error type that carries one. Scripts branch on these numbers, so they
 * are part of the CLI's interface: never renumber them.
 */

/** Exit codes of `trainyard`, as documented in docs/cli.md. */
export const EXIT_CODES = {
  /** The command did what was asked. */
  ok: 0,
  /** Something unexpected: a bug, a 5xx from the API, an unreadable response. */
  unexpected: 1,
  /** Bad usage or input caught by the CLI itself (options, directory, bundle size, confirmation missing). */
  usage: 2,
  /** The platform refused the request (a 4xx other than 401/403/404: validation, conflict, refused workload). */
  refused: 3,
  /** Authentication or authorization failed (401/403: wrong token, unknown principal, no credentials). */
  auth: 4,
  /** The job (or other resource) does not exist for the caller (404). */
  notFound: 5,
  /** Local mode is not running or the API cannot be reached. */
  unreachable: 6,
  /** The job finished FAILED, CANCELLED or REJECTED (`watch`, `submit --wait`). */
  jobUnsuccessful: 7,
  /** `watch` / `submit --wait --timeout`: the job had not ended when the timeout ran out (it keeps running). */
  watchTimedOut: 8,
  /** `demo`: stopped by Ctrl-C (or a closed terminal) before its job ended; local mode and its attempts stopped too. */
  interrupted: 130,
} as const;

/** One of the documented exit codes. */
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** An error the CLI reports with a precise message and a documented exit code. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(
    message: string,
    readonly exitCode: ExitCode,
    /** Machine-readable code for `--json` output (the API's error code when the API refused). */
    readonly code: string = 'CliError',
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/** The exit code for an HTTP error status from the API. */
export function exitCodeForStatus(status: number): ExitCode {
  if (status === 401 || status === 403) return EXIT_CODES.auth;
  if (status === 404) return EXIT_CODES.notFound;
  if (status >= 400 && status < 500) return EXIT_CODES.refused;
  return EXIT_CODES.unexpected;
}

/** The exit code for a job that reached `state` (0 for SUCCEEDED, 7 for the other terminal states). */
export function exitCodeForJobState(state: string): ExitCode {
  return state === 'SUCCEEDED' ? EXIT_CODES.ok : EXIT_CODES.jobUnsuccessful;
}
