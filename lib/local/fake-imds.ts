/**
 * A loopback stand-in for the EC2 instance metadata service (IMDSv2 only), one per local attempt, so the harness
 * reads spot interruption notices exactly as it does on EC2: PUT a session token, then GET with it.
 *
 * Behaviour follows AWS's documentation
 * (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html and
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html):
 * - `PUT /latest/api/token` needs `X-aws-ec2-metadata-token-ttl-seconds` (1–21600), else 400; answers the token;
 * - every `GET` needs a valid, unexpired `X-aws-ec2-metadata-token`, else 401 (IMDSv1 is off, as on Trainyard's hosts);
 * - `GET /latest/meta-data/spot/instance-action` answers 404 until a notice is set, then 200 with
 *   `{"action":"terminate","time":"2026-11-20T14:04:11Z"}`;
 * - `GET /latest/meta-data/instance-id` answers the instance id.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** IMDSv2 path that issues session tokens. */
export const IMDS_TOKEN_PATH = '/latest/api/token';
/** IMDS path of the spot interruption notice. */
export const IMDS_INSTANCE_ACTION_PATH = '/latest/meta-data/spot/instance-action';
/** IMDS path of the instance id. */
export const IMDS_INSTANCE_ID_PATH = '/latest/meta-data/instance-id';
/** Longest token lifetime IMDS grants (6 hours). */
export const IMDS_MAX_TOKEN_TTL_SECONDS = 21_600;

/** Actions a spot notice can announce (the instance's interruption behaviour). */
export type SpotInstanceAction = 'terminate' | 'stop' | 'hibernate';

/** Raised when a notice is served with an action or time IMDS would never publish. */
export class InvalidSpotNotice extends Error {
  override name = 'InvalidSpotNotice';
}

/** Options of {@link FakeImds}. */
export interface FakeImdsOptions {
  /** The instance id served at `meta-data/instance-id`. */
  readonly instanceId: string;
  /** Clock for token expiry. @default - Date.now */
  readonly now?: () => number;
}

/** Formats a time the way IMDS and EventBridge write it: ISO 8601 UTC to the second (`2026-11-20T14:04:11Z`). */
export function awsTimestamp(atMs: number): string {
  return `${new Date(atMs).toISOString().slice(0, 19)}Z`;
}

/** A fake IMDSv2 endpoint on 127.0.0.1 with a random port. */
export class FakeImds {
  readonly instanceId: string;
  private readonly now: () => number;
  private readonly server: Server;
  private readonly tokens = new Map<string, number>();
  private notice: { action: SpotInstanceAction; time: string } | undefined;
  private port: number | undefined;

  constructor(options: FakeImdsOptions) {
    this.instanceId = options.instanceId;
    this.now = options.now ?? Date.now;
    this.server = createServer((request, response) => this.handle(request, response));
  }

  /** Starts listening; resolves with the base URL (`http://127.0.0.1:<port>`), the harness's TRAINYARD_IMDS_ENDPOINT. */
  async start(): Promise<string> {
    if (this.port === undefined) {
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen(0, '127.0.0.1', () => resolve());
      });
      this.port = (this.server.address() as AddressInfo).port;
    }
    return this.endpoint;
  }

  /** The base URL; throws before {@link start}. */
  get endpoint(): string {
    if (this.port === undefined) throw new Error('FakeImds is not started: call start() first');
    return `http://127.0.0.1:${this.port}`;
  }

  /** The notice being served, if any. */
  get servedNotice(): { action: SpotInstanceAction; time: string } | undefined {
    return this.notice;
  }

  /** Publishes a spot interruption notice: `spot/instance-action` answers 200 with it from now on. */
  serveNotice(action: SpotInstanceAction, time: string): void {
    if (!['terminate', 'stop', 'hibernate'].includes(action)) {
      throw new InvalidSpotNotice(`spot instance-action must be terminate, stop or hibernate, got ${String(action)}`);
    }
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/.test(time)) {
      throw new InvalidSpotNotice(
        `spot instance-action time must be ISO 8601 UTC like 2026-11-20T14:04:11Z, got ${time}`,
      );
    }
    this.notice = { action, time };
  }

  /** Stops listening and drops open connections. */
  async stop(): Promise<void> {
    if (this.port === undefined) return;
    this.port = undefined;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const answer = this.answer(request);
    for (const [name, value] of Object.entries(answer.headers ?? {})) response.setHeader(name, value);
    response.writeHead(answer.status, {
      'Content-Type': answer.contentType ?? 'text/plain',
      'Content-Length': Buffer.byteLength(answer.body),
    });
    response.end(answer.body);
  }

  private answer(request: IncomingMessage): Answer {
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    if (path === IMDS_TOKEN_PATH) {
      return request.method === 'PUT' ? this.issueToken(request) : { status: 405, body: 'Method Not Allowed' };
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') return { status: 405, body: 'Method Not Allowed' };
    if (!this.validToken(request.headers['x-aws-ec2-metadata-token'])) return { status: 401, body: 'Unauthorized' };
    if (path === IMDS_INSTANCE_ID_PATH) return { status: 200, body: this.instanceId };
    if (path === IMDS_INSTANCE_ACTION_PATH && this.notice) {
      return { status: 200, body: JSON.stringify(this.notice), contentType: 'application/json' };
    }
    return NOT_FOUND;
  }

  private issueToken(request: IncomingMessage): Answer {
    const raw = request.headers['x-aws-ec2-metadata-token-ttl-seconds'];
    const ttl = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(ttl >= 1 && ttl <= IMDS_MAX_TOKEN_TTL_SECONDS)) return { status: 400, body: 'Bad Request' };
    const token = randomBytes(32).toString('base64url');
    this.tokens.set(token, this.now() + ttl * 1000);
    return { status: 200, body: token, headers: { 'X-aws-ec2-metadata-token-ttl-seconds': String(ttl) } };
  }

  private validToken(header: string | string[] | undefined): boolean {
    if (typeof header !== 'string') return false;
    const expiresAt = this.tokens.get(header);
    if (expiresAt === undefined) return false;
    if (expiresAt <= this.now()) {
      this.tokens.delete(header);
      return false;
    }
    return true;
  }
}

interface Answer {
  readonly status: number;
  readonly body: string;
  readonly contentType?: string;
  readonly headers?: Record<string, string>;
}

// IMDS answers unknown paths and an absent notice with an HTML 404 page; the harness only reads the status.
const NOT_FOUND: Answer = {
  status: 404,
  contentType: 'text/html',
  body: '<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head><title>404 - Not Found</title></head><body><h1>404 - Not Found</h1></body></html>\n',
};
