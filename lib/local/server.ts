/**
 * The loopback HTTP server local mode puts in front of the API handler, playing API Gateway's part: it authenticates
 * the caller (a bearer token instead of SigV4), matches the route, turns the request into the same payload 2.0 event
 * an HTTP API with an IAM authorizer sends (the configured local principal as `authorizer.iam.userArn`), and writes
 * the handler's result back. Local-only control routes (`/_local/...`) go to injected callbacks instead.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  APIGatewayProxyEventV2WithIAMAuthorizer,
  APIGatewayProxyResultV2,
  APIGatewayProxyStructuredResultV2,
} from 'aws-lambda';
import { API_ROUTES } from '../../lambdas/api/route-table';
import { removeLocalState, tokenMatches, writeLocalState } from './token';

/** The API handler's signature (what `createApiHandler(plane)` returns). */
export type ApiHandler = (event: APIGatewayProxyEventV2WithIAMAuthorizer) => Promise<APIGatewayProxyResultV2>;

/** API Gateway HTTP APIs refuse request bodies over 10 MB; local mode refuses them the same way. */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;

/** The API's routes as API Gateway matches them: the same table the handler's router and the CDK construct use. */
export const API_ROUTE_KEYS: readonly string[] = API_ROUTES.map((route) => `${route.method} ${route.path}`);

/** Path prefix of local-only control routes; they never reach the API handler. */
export const LOCAL_CONTROL_PREFIX = '/_local/';

/** A local control request, after authentication and route matching. */
export interface LocalControlRequest {
  readonly pathParameters: Record<string, string>;
  /** The JSON body, or undefined when there was none. */
  readonly body: unknown;
  readonly principalArn: string;
}

/** A local control route's answer; `body` is sent as JSON. */
export interface LocalControlResponse {
  readonly statusCode: number;
  readonly body: unknown;
}

/** Handles one local control route, e.g. `POST /_local/jobs/{id}/interrupt` (the Batch runner's spot simulation). */
export type LocalControlHandler = (request: LocalControlRequest) => Promise<LocalControlResponse>;

/** How to start the local API server. */
export interface LocalApiServerOptions {
  readonly handler: ApiHandler;
  /** The bearer token every request must carry (from lib/local/token.ts). */
  readonly token: string;
  /** IAM principal ARN the handler sees as the caller, e.g. `arn:aws:iam::000000000000:user/local`. */
  readonly principalArn: string;
  /** @default 0 - a free port chosen by the OS */
  readonly port?: number;
  /** Local folder to record `{ apiUrl, pid, startedAt }` in (local.json). @default - no state file is written */
  readonly stateDir?: string;
  /** Route keys API Gateway would match. @default API_ROUTE_KEYS */
  readonly routes?: readonly string[];
  /** Local control routes by route key (`POST /_local/jobs/{id}/interrupt`). @default - none */
  readonly control?: Readonly<Record<string, LocalControlHandler>>;
  /** Where handler failures are reported (the caller only sees a generic 500). @default console.error */
  readonly onError?: (error: unknown) => void;
}

/** A running local API server. */
export interface LocalApiServer {
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

/** A route key split into method and path segments, `{name}` segments capturing. */
interface CompiledRoute {
  readonly key: string;
  readonly method: string;
  readonly segments: readonly string[];
}

/** Raised for a route key that is not `METHOD /path`. */
export class InvalidRouteKey extends Error {
  override name = 'InvalidRouteKey';
}

function compileRoute(key: string): CompiledRoute {
  const match = /^(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\/[^\s]*)$/.exec(key);
  if (!match?.[1] || !match[2]) {
    throw new InvalidRouteKey(`route key must be "METHOD /path" (e.g. "GET /jobs/{id}"), got "${key}"`);
  }
  return { key, method: match[1], segments: match[2].split('/').slice(1) };
}

/**
 * Finds the route a method and path match, with its path parameters (decoded), as API Gateway does: `{name}` takes
 * one segment, a last `{name+}` takes the rest of the path (one segment or more).
 */
export function matchRoute(
  routes: readonly string[],
  method: string,
  path: string,
): { routeKey: string; pathParameters: Record<string, string> } | undefined {
  const parts = path.split('/').slice(1);
  for (const route of routes.map(compileRoute)) {
    if (route.method !== method) continue;
    const greedy = /^\{(\w+)\+\}$/.exec(route.segments.at(-1) ?? '')?.[1];
    const fixed = greedy === undefined ? route.segments : route.segments.slice(0, -1);
    if (greedy === undefined ? parts.length !== fixed.length : parts.length <= fixed.length) continue;
    const params: Record<string, string> = {};
    let ok = true;
    fixed.forEach((segment, i) => {
      const part = parts[i] ?? '';
      const name = /^\{(\w+)\}$/.exec(segment)?.[1];
      if (name !== undefined) {
        if (part === '') ok = false;
        else params[name] = safeDecode(part);
      } else if (segment !== part) ok = false;
    });
    if (greedy !== undefined) {
      const rest = parts.slice(fixed.length).join('/');
      if (rest === '') ok = false;
      else params[greedy] = safeDecode(rest);
    }
    if (ok) return { routeKey: route.key, pathParameters: params };
  }
  return undefined;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Content types API Gateway passes as text; anything else arrives base64-encoded with `isBase64Encoded: true`. */
export function isTextContentType(contentType: string | undefined): boolean {
  if (!contentType) return true;
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  return (
    type.startsWith('text/') ||
    type === 'application/json' ||
    type.endsWith('+json') ||
    type === 'application/xml' ||
    type.endsWith('+xml') ||
    type === 'application/javascript' ||
    type === 'application/x-www-form-urlencoded'
  );
}

/** Why a request is not authenticated, or undefined when it is. */
export function authenticationFailure(authorization: string | undefined, token: string): string | undefined {
  if (authorization === undefined || authorization === '') {
    return 'missing Authorization header: local mode expects "Authorization: Bearer <token>" with the token from .trainyard/local-token';
  }
  const match = /^Bearer ([^\s]+)$/.exec(authorization.trim());
  if (!match?.[1]) {
    return 'Authorization header must be "Bearer <token>" (local mode does not accept SigV4 or other schemes)';
  }
  if (!tokenMatches(match[1], token)) {
    return 'bearer token does not match this local server’s token (.trainyard/local-token of the running `trainyard local`)';
  }
  return undefined;
}

/** Reads a request body, refusing more than `limit` bytes; undefined when it went over. */
async function readBody(request: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const declared = Number(request.headers['content-length'] ?? '0');
  if (Number.isFinite(declared) && declared > limit) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limit) return undefined;
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

function headersOf(request: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    // The token is local mode's stand-in for SigV4; the handler never needs it and must not log it.
    if (value === undefined || name === 'authorization' || name === 'cookie') continue;
    headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  return headers;
}

function queryOf(rawQueryString: string): Record<string, string> | undefined {
  if (rawQueryString === '') return undefined;
  const out: Record<string, string> = {};
  for (const [key, value] of new URLSearchParams(rawQueryString)) {
    // Payload 2.0 joins repeated parameters with commas.
    out[key] = out[key] === undefined ? value : `${out[key]},${value}`;
  }
  return out;
}

/** Builds the payload 2.0 event API Gateway would send for this request. */
export function toApiGatewayEvent(input: {
  method: string;
  rawPath: string;
  rawQueryString: string;
  headers: Record<string, string>;
  cookies: string[];
  body: Buffer;
  routeKey: string;
  pathParameters: Record<string, string>;
  principalArn: string;
  sourceIp: string;
  now: Date;
  requestId: string;
  domainName: string;
}): APIGatewayProxyEventV2WithIAMAuthorizer {
  const accountId = /^arn:[^:]+:(?:iam|sts)::(\d{12}):/.exec(input.principalArn)?.[1] ?? '000000000000';
  const text = isTextContentType(input.headers['content-type']);
  const event: APIGatewayProxyEventV2WithIAMAuthorizer = {
    version: '2.0',
    routeKey: input.routeKey,
    rawPath: input.rawPath,
    rawQueryString: input.rawQueryString,
    headers: input.headers,
    requestContext: {
      accountId,
      apiId: 'local',
      authorizer: {
        iam: {
          accessKey: 'LOCAL',
          accountId,
          callerId: 'LOCAL',
          cognitoIdentity: null,
          principalOrgId: '',
          userArn: input.principalArn,
          userId: 'LOCAL',
        },
      },
      domainName: input.domainName,
      domainPrefix: input.domainName.split('.')[0] ?? input.domainName,
      http: {
        method: input.method,
        path: input.rawPath,
        protocol: 'HTTP/1.1',
        sourceIp: input.sourceIp,
        userAgent: input.headers['user-agent'] ?? '',
      },
      requestId: input.requestId,
      routeKey: input.routeKey,
      stage: '$default',
      time: input.now.toISOString(),
      timeEpoch: input.now.getTime(),
    },
    isBase64Encoded: input.body.length > 0 && !text,
  };
  if (input.cookies.length > 0) event.cookies = input.cookies;
  const query = queryOf(input.rawQueryString);
  if (query) event.queryStringParameters = query;
  if (Object.keys(input.pathParameters).length > 0) event.pathParameters = input.pathParameters;
  if (input.body.length > 0) event.body = text ? input.body.toString('utf8') : input.body.toString('base64');
  return event;
}

function sendJson(response: ServerResponse, statusCode: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(statusCode, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

function errorBody(code: string, message: string, details?: Record<string, unknown>) {
  return { error: details ? { code, message, details } : { code, message } };
}

/** Writes a handler result as API Gateway does for payload 2.0 (a bare value means 200 with that value as JSON). */
export function writeResult(response: ServerResponse, result: APIGatewayProxyResultV2): void {
  if (typeof result === 'object' && result !== null && 'statusCode' in result) {
    const structured = result as APIGatewayProxyStructuredResultV2;
    const body =
      structured.body === undefined
        ? Buffer.alloc(0)
        : Buffer.from(structured.body, structured.isBase64Encoded ? 'base64' : 'utf8');
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(structured.headers ?? {})) headers[name.toLowerCase()] = String(value);
    if (structured.cookies?.length) headers['set-cookie'] = structured.cookies;
    if (headers['content-type'] === undefined && body.length > 0) headers['content-type'] = 'application/json';
    headers['content-length'] = String(body.length);
    response.writeHead(structured.statusCode ?? 200, headers);
    response.end(body);
    return;
  }
  const text = typeof result === 'string' ? result : JSON.stringify(result);
  response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  response.end(text);
}

/** Starts the local API server on 127.0.0.1 and, when `stateDir` is given, records where it listens. */
export async function startLocalApiServer(options: LocalApiServerOptions): Promise<LocalApiServer> {
  const routes = options.routes ?? API_ROUTE_KEYS;
  routes.forEach(compileRoute);
  const controlRoutes = Object.keys(options.control ?? {});
  for (const key of controlRoutes) {
    const route = compileRoute(key);
    if (!`/${route.segments.join('/')}`.startsWith(LOCAL_CONTROL_PREFIX)) {
      throw new InvalidRouteKey(`local control route "${key}" must be under ${LOCAL_CONTROL_PREFIX}`);
    }
  }
  const onError = options.onError ?? ((error: unknown) => console.error('local API handler failed:', error));
  let domainName = '127.0.0.1';

  const serve = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const failure = authenticationFailure(request.headers.authorization, options.token);
    if (failure !== undefined) {
      // Refused before the body is read or anything is routed: an unauthenticated request has no effect.
      response.setHeader('connection', 'close');
      sendJson(response, 401, errorBody('Unauthorized', failure));
      request.resume();
      return;
    }
    const method = (request.method ?? 'GET').toUpperCase();
    const url = request.url ?? '/';
    const queryAt = url.indexOf('?');
    const rawPath = queryAt === -1 ? url : url.slice(0, queryAt);
    const rawQueryString = queryAt === -1 ? '' : url.slice(queryAt + 1);

    const body = await readBody(request, MAX_BODY_BYTES);
    if (body === undefined) {
      response.setHeader('connection', 'close');
      sendJson(
        response,
        413,
        errorBody('PayloadTooLarge', `request body exceeds ${MAX_BODY_BYTES} bytes (10 MB, the HTTP API limit)`),
      );
      request.resume();
      return;
    }

    if (rawPath.startsWith(LOCAL_CONTROL_PREFIX)) {
      const matched = matchRoute(controlRoutes, method, rawPath);
      const handler = matched ? options.control?.[matched.routeKey] : undefined;
      if (!matched || !handler) {
        sendJson(
          response,
          404,
          errorBody('NotFound', `no local control route for ${method} ${rawPath}`, { routes: controlRoutes }),
        );
        return;
      }
      let parsed: unknown;
      if (body.length > 0) {
        try {
          parsed = JSON.parse(body.toString('utf8'));
        } catch (error) {
          sendJson(response, 400, errorBody('BadRequest', `body is not JSON: ${(error as Error).message}`));
          return;
        }
      }
      const result = await handler({
        pathParameters: matched.pathParameters,
        body: parsed,
        principalArn: options.principalArn,
      });
      sendJson(response, result.statusCode, result.body);
      return;
    }

    const matched = matchRoute(routes, method, rawPath);
    if (!matched) {
      sendJson(response, 404, errorBody('NotFound', `no route for ${method} ${rawPath}`, { routes: [...routes] }));
      return;
    }
    const cookieHeader = request.headers.cookie;
    const event = toApiGatewayEvent({
      method,
      rawPath,
      rawQueryString,
      headers: headersOf(request),
      cookies: cookieHeader ? cookieHeader.split(/;\s*/).filter(Boolean) : [],
      body,
      routeKey: matched.routeKey,
      pathParameters: matched.pathParameters,
      principalArn: options.principalArn,
      sourceIp: request.socket.remoteAddress ?? '127.0.0.1',
      now: new Date(),
      requestId: randomUUID(),
      domainName,
    });
    writeResult(response, await options.handler(event));
  };

  const server: Server = createServer((request, response) => {
    serve(request, response).catch((error: unknown) => {
      onError(error);
      if (response.headersSent) response.destroy();
      else sendJson(response, 500, errorBody('InternalError', 'internal error in the local API server'));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  domainName = `127.0.0.1:${port}`;
  const url = `http://127.0.0.1:${port}`;
  const state = { apiUrl: url, pid: process.pid, startedAt: new Date().toISOString() };
  if (options.stateDir !== undefined) writeLocalState(state, options.stateDir);

  return {
    url,
    port,
    close: async () => {
      if (options.stateDir !== undefined) removeLocalState(state, options.stateDir);
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
