/**
 * The CLI's API client: picks the target (a deployed stack's URL, signed with SigV4, or local mode's loopback server
 * with its bearer token), sends JSON requests, and turns failures into CliErrors with the documented exit codes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { NOT_A_MEMBER } from '../../lambdas/api/caller';
import {
  LOCAL_DIR,
  type LocalState,
  LocalStateError,
  localPaths,
  readLocalState,
  readLocalToken,
} from '../local/token';
import { CliError, EXIT_CODES, exitCodeForStatus } from './exit-codes';
import { type CredentialProvider, defaultCredentials, regionFromApiUrl, signRequest } from './sigv4';

/** The fetch function the client uses (global fetch; tests may pass their own). */
export type FetchLike = (input: string | URL, init?: RequestInit) => Promise<Response>;

/** Where requests go and how they are authenticated. */
export interface ApiTarget {
  readonly kind: 'local' | 'remote';
  readonly baseUrl: URL;
  /** Headers that authenticate one request (bearer token, or the SigV4 set). */
  authenticate(request: {
    method: string;
    url: URL;
    headers: Record<string, string>;
    body?: string;
  }): Promise<Record<string, string>>;
}

/** The message (and exit code 6) when local mode cannot be reached. */
export const LOCAL_NOT_RUNNING = 'local mode is not running: start it with `trainyard local`';

/** How to choose the target. */
export interface TargetOptions {
  /** `--api`; falls back to TRAINYARD_API_URL, then local mode. */
  readonly api?: string;
  /** `--region`; falls back to the execute-api host's region, then AWS_REGION / AWS_DEFAULT_REGION. */
  readonly region?: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly cwd: string;
  /** @default - the default AWS credential provider chain */
  readonly credentials?: CredentialProvider;
  /** Whether a process id is alive. @default process.kill(pid, 0) */
  readonly isAlive?: (pid: number) => boolean;
}

/**
 * Whether the process named in local.json is still a live local mode: it exists (EPERM: it belongs to someone else,
 * but exists) and, where /proc tells, its command line names trainyard. After a crash the pid may be reused by
 * another process; `trainyard local stop` would signal it, and `trainyard local` refuse to start.
 */
export function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  let commandLine: string;
  try {
    commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return true; // no /proc (macOS), or not readable: the pid is all there is to go on
  }
  return commandLine.includes('trainyard');
}

/**
 * The local folder of the nearest enclosing directory that has a running local mode (`.trainyard/local.json`), so
 * the CLI works from a project's subfolders; `<cwd>/.trainyard` when there is none.
 */
export function findLocalDir(cwd: string): string {
  let current = resolve(cwd);
  for (;;) {
    const candidate = join(current, LOCAL_DIR);
    if (existsSync(localPaths(candidate).state)) return candidate;
    const parent = dirname(current);
    if (parent === current) return join(resolve(cwd), LOCAL_DIR);
    current = parent;
  }
}

/** Resolves the API target from options and environment; throws CliError when neither works. */
export function resolveTarget(options: TargetOptions): ApiTarget {
  const api = options.api ?? options.env.TRAINYARD_API_URL;
  if (api !== undefined && api !== '') {
    let url: URL;
    try {
      url = new URL(api);
    } catch {
      throw new CliError(
        `--api must be an http(s) URL like https://abc123.execute-api.us-east-1.amazonaws.com, got "${api}"`,
        EXIT_CODES.usage,
        'InvalidApiUrl',
      );
    }
    if (url.protocol !== 'https:' && url.protocol !== 'http:') {
      throw new CliError(`--api must use https:// (or http://), got "${api}"`, EXIT_CODES.usage, 'InvalidApiUrl');
    }
    const region = options.region ?? regionFromApiUrl(url) ?? options.env.AWS_REGION ?? options.env.AWS_DEFAULT_REGION;
    if (!region) {
      throw new CliError(
        `cannot tell the AWS region of ${url.host}: pass --region or set AWS_REGION`,
        EXIT_CODES.usage,
        'MissingRegion',
      );
    }
    const credentials = options.credentials ?? defaultCredentials();
    return {
      kind: 'remote',
      baseUrl: url,
      authenticate: async (request) => {
        try {
          return await signRequest(request, { region, credentials });
        } catch (error) {
          throw new CliError(
            `no usable AWS credentials to sign the request (${(error as Error).message}): configure a profile, SSO or environment credentials`,
            EXIT_CODES.auth,
            'NoCredentials',
          );
        }
      },
    };
  }

  const dir = options.env.TRAINYARD_LOCAL_DIR ?? findLocalDir(options.cwd);
  const paths = localPaths(dir);
  const state = runningLocalState(dir, options.isAlive);
  const token = localStateRead(() => readLocalToken(dir));
  if (token === undefined) {
    throw new CliError(`${LOCAL_NOT_RUNNING} (no ${paths.token})`, EXIT_CODES.unreachable, 'LocalNotRunning');
  }
  const bearer = token;
  return {
    kind: 'local',
    baseUrl: new URL(state.apiUrl),
    authenticate: async () => ({ authorization: `Bearer ${bearer}` }),
  };
}

function localStateRead<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof LocalStateError) {
      throw new CliError(`${LOCAL_NOT_RUNNING} (${error.message})`, EXIT_CODES.unreachable, 'LocalNotRunning');
    }
    throw error;
  }
}

/**
 * The state of the local mode running for `dir`, or a CliError (exit code "unreachable") saying why there is none:
 * no state file, an unreadable one, or one naming a process that has exited.
 */
export function runningLocalState(dir: string, isAlive: (pid: number) => boolean = processAlive): LocalState {
  const paths = localPaths(dir);
  const state = localStateRead(() => readLocalState(dir));
  if (!state) {
    throw new CliError(
      `${LOCAL_NOT_RUNNING} (no ${paths.state}; or pass --api for a deployed stack)`,
      EXIT_CODES.unreachable,
      'LocalNotRunning',
    );
  }
  if (!isAlive(state.pid)) {
    throw new CliError(
      `${LOCAL_NOT_RUNNING} (${paths.state} names process ${state.pid}, which has exited)`,
      EXIT_CODES.unreachable,
      'LocalNotRunning',
    );
  }
  return state;
}

/** A successful API response. */
export interface ApiResponse {
  readonly status: number;
  readonly body: unknown;
}

/** One API call. */
export interface ApiRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path below the API's base URL, e.g. `/jobs/abc`. */
  readonly path: string;
  readonly query?: Record<string, string | number | undefined>;
  /** Sent as JSON. */
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

/** The error shape the API returns (and API Gateway's own `{ message }`). */
interface ErrorBody {
  error?: { code?: unknown; message?: unknown; details?: unknown };
  message?: unknown;
}

/**
 * Connection errors a request may be sent again after: the socket was reset or closed under it, as when the server
 * closes an idle keep-alive connection just as the next request goes out on it. Only requests that are safe to
 * repeat are (see isRepeatable), at most CONNECTION_RESET_TRIES times in all.
 */
const CONNECTION_RESETS: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);
const CONNECTION_RESET_TRIES = 3;

/**
 * Statuses that say "not now" rather than "no": API Gateway's throttling (429, the stage's 50 requests/s, burst 100)
 * and a service that is briefly unavailable (503, also the API's `busy`). A repeatable request is sent again after a
 * backoff, at most THROTTLED_TRIES times in all.
 */
const THROTTLED_STATUSES: ReadonlySet<number> = new Set([429, 503]);
/** Tries in all for a throttled request (the first and three more). */
export const THROTTLED_TRIES = 4;
/** Backoff before the n-th retry: a random wait up to min(BACKOFF_CAP_MS, BACKOFF_BASE_MS · 2^(n-1)) ("full jitter"). */
export const BACKOFF_BASE_MS = 500;
export const BACKOFF_CAP_MS = 8000;
/** The longest Retry-After the client waits out; a longer one is reported rather than waited for. */
export const MAX_RETRY_AFTER_MS = 30_000;

function connectionErrorCode(error: unknown): string | undefined {
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code ?? (error as { code?: string }).code;
}

/**
 * Whether a request may be sent twice with the effect of once: GET, PUT (it sets a value: a budget's limit) and
 * DELETE (a repeated cancel is answered like the first), and a POST only with an Idempotency-Key (the API answers its
 * repeat with the first answer); any other POST may have been acted on.
 */
export function isRepeatable(method: ApiRequest['method'], headers: Readonly<Record<string, string>>): boolean {
  return method !== 'POST' || headers['idempotency-key'] !== undefined;
}

/** The wait a Retry-After header asks for (delta-seconds or an HTTP date), ms; undefined when absent or unreadable. */
export function retryAfterMs(header: string | null, nowMs: number): number | undefined {
  if (header === null || header.trim() === '') return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** How the client waits before sending a throttled request again (tests pass their own). */
export interface RetryTiming {
  /** @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
  /** A number in [0, 1) for the jitter. @default Math.random */
  readonly random?: () => number;
  /** Epoch ms, for a Retry-After given as a date. @default Date.now */
  readonly now?: () => number;
}

/** Sends API requests to a target and maps failures to CliErrors. */
export class ApiClient {
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly now: () => number;

  constructor(
    readonly target: ApiTarget,
    private readonly fetchImpl: FetchLike = fetch,
    timing: RetryTiming = {},
  ) {
    this.sleep = timing.sleep ?? ((ms) => new Promise<void>((done) => setTimeout(done, ms)));
    this.random = timing.random ?? Math.random;
    this.now = timing.now ?? Date.now;
  }

  /** The absolute URL of an API path. */
  urlFor(path: string, query?: ApiRequest['query']): URL {
    const base = this.target.baseUrl.href.replace(/\/+$/, '');
    const url = new URL(`${base}${path}`);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url;
  }

  /**
   * Sends a request; resolves with a 2xx response, throws CliError otherwise. A repeatable request is sent again after
   * a connection reset, and after a 429 or 503 (waiting what Retry-After asks, else a capped exponential backoff with
   * jitter).
   */
  async send(request: ApiRequest): Promise<ApiResponse> {
    const url = this.urlFor(request.path, request.query);
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    const headers: Record<string, string> = { accept: 'application/json', ...(request.headers ?? {}) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const repeatable = isRepeatable(request.method, headers);
    for (let tries = 1; ; tries++) {
      const response = await this.fetchOnce(request.method, url, headers, body, repeatable);
      const text = await response.text();
      let parsed: unknown;
      if (text !== '') {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
      }
      if (response.ok) {
        if (text !== '' && parsed === undefined) {
          throw new CliError(
            `the API answered ${request.method} ${request.path} with ${response.status} but a body that is not JSON: ${text.slice(0, 200)}`,
            EXIT_CODES.unexpected,
            'InvalidResponse',
          );
        }
        return { status: response.status, body: parsed };
      }
      if (!THROTTLED_STATUSES.has(response.status) || !repeatable) {
        throw this.failure(request, response.status, parsed as ErrorBody | undefined, text);
      }
      const asked = retryAfterMs(response.headers.get('retry-after'), this.now());
      if (tries >= THROTTLED_TRIES || (asked !== undefined && asked > MAX_RETRY_AFTER_MS)) {
        const why =
          tries >= THROTTLED_TRIES
            ? `still ${response.status} after ${tries} tries`
            : `the API asked to retry after ${Math.ceil((asked as number) / 1000)} s, longer than the ${MAX_RETRY_AFTER_MS / 1000} s the CLI waits`;
        throw this.failure(request, response.status, parsed as ErrorBody | undefined, text, why);
      }
      const backoff = this.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (tries - 1));
      await this.sleep(asked ?? backoff);
    }
  }

  /** One fetch, signed afresh (a SigV4 signature holds for minutes), sent again after a connection reset. */
  private async fetchOnce(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: string | undefined,
    repeatable: boolean,
  ): Promise<Response> {
    const auth = await this.target.authenticate({ method, url, headers, body });
    for (let tries = 1; ; tries++) {
      try {
        return await this.fetchImpl(url, { method, headers: { ...headers, ...auth }, body });
      } catch (error) {
        const reset = CONNECTION_RESETS.has(connectionErrorCode(error) ?? '');
        if (!repeatable || !reset || tries >= CONNECTION_RESET_TRIES) throw this.unreachable(error);
      }
    }
  }

  private unreachable(error: unknown): CliError {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    if (this.target.kind === 'local') {
      return new CliError(
        `${LOCAL_NOT_RUNNING} (${this.target.baseUrl.host} refused: ${why})`,
        EXIT_CODES.unreachable,
        'LocalNotRunning',
      );
    }
    return new CliError(
      `cannot reach the API at ${this.target.baseUrl.href} (${why})`,
      EXIT_CODES.unreachable,
      'Unreachable',
    );
  }

  private failure(
    request: ApiRequest,
    status: number,
    body: ErrorBody | undefined,
    text: string,
    throttled?: string,
  ): CliError {
    const apiMessage = body?.error?.message ?? body?.message;
    const code = typeof body?.error?.code === 'string' ? body.error.code : `Http${status}`;
    const details =
      body?.error?.details && typeof body.error.details === 'object'
        ? (body.error.details as Record<string, unknown>)
        : undefined;
    const message =
      typeof apiMessage === 'string' && apiMessage !== ''
        ? apiMessage
        : `${request.method} ${request.path} failed with HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`;
    // The IAM hint is for a 403 about who is calling: API Gateway's own (no Trainyard error body) or the API's "not a
    // member of any team". A 403 about what the caller asked (a tier, another team's budget) says so itself.
    const aboutCaller =
      body?.error === undefined || (typeof apiMessage === 'string' && apiMessage.includes(NOT_A_MEMBER));
    const hint =
      status === 401 && this.target.kind === 'local'
        ? ' — the token in .trainyard/local-token is not the running server’s; restart `trainyard local`'
        : status === 403 && this.target.kind === 'remote' && aboutCaller
          ? ' — your AWS principal is not mapped to a team (trainyard.config.json teams[].principals) or lacks execute-api:Invoke'
          : throttled !== undefined
            ? ` — the API is throttling requests or briefly unavailable (${throttled}); wait a minute and run the command again`
            : '';
    return new CliError(`${message}${hint}`, exitCodeForStatus(status), code, { status, ...(details ?? {}) });
  }
}
