// The loopback API server local mode puts in front of the API handler: bearer-token authentication (nothing reaches
// the handler otherwise), the payload 2.0 event it builds, the 10 MB body limit, unmatched routes, local control
// routes, the state file; and the token file it trusts.
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2WithIAMAuthorizer, APIGatewayProxyResultV2 } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { API_ROUTES } from '../../lambdas/api/route-table';
import {
  API_ROUTE_KEYS,
  type LocalApiServer,
  MAX_BODY_BYTES,
  matchRoute,
  startLocalApiServer,
} from '../../lib/local/server';
import { ensureLocalToken, LocalStateError, readLocalState, readLocalToken } from '../../lib/local/token';

const TOKEN = 'a'.repeat(43);
const PRINCIPAL = 'arn:aws:iam::000000000000:user/local';

let dir: string;
let server: LocalApiServer | undefined;
let events: APIGatewayProxyEventV2WithIAMAuthorizer[];
let reply: APIGatewayProxyResultV2;
let controlCalls: Array<{ pathParameters: Record<string, string>; body: unknown }>;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'trainyard-local-'));
  events = [];
  controlCalls = [];
  reply = { statusCode: 200, headers: { 'content-type': 'application/json' }, body: '{"ok":true}' };
  server = await startLocalApiServer({
    // Stand-in for createApiHandler(plane): records the event and answers with `reply`.
    handler: async (event) => {
      events.push(event);
      return reply;
    },
    token: TOKEN,
    principalArn: PRINCIPAL,
    stateDir: dir,
    control: {
      'POST /_local/jobs/{id}/interrupt': async (request) => {
        controlCalls.push({ pathParameters: request.pathParameters, body: request.body });
        return { statusCode: 202, body: { interrupted: request.pathParameters.id } };
      },
    },
    onError: () => {},
  });
});

afterEach(async () => {
  await server?.close();
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

function url(path: string): string {
  return `${server?.url}${path}`;
}

const auth = { authorization: `Bearer ${TOKEN}` };

describe('authentication', () => {
  it.each([
    [
      'no Authorization header',
      {},
      'missing Authorization header: local mode expects "Authorization: Bearer <token>" with the token from .trainyard/local-token',
    ],
    [
      'another scheme',
      { authorization: 'AWS4-HMAC-SHA256 Credential=x' },
      'Authorization header must be "Bearer <token>" (local mode does not accept SigV4 or other schemes)',
    ],
    [
      'a wrong token',
      { authorization: `Bearer ${'b'.repeat(43)}` },
      'bearer token does not match this local server’s token (.trainyard/local-token of the running `trainyard local`)',
    ],
    [
      'a prefix of the token',
      { authorization: `Bearer ${TOKEN.slice(0, 10)}` },
      'bearer token does not match this local server’s token (.trainyard/local-token of the running `trainyard local`)',
    ],
  ])('answers 401 for %s and calls nothing', async (_name, headers, message) => {
    const response = await fetch(url('/jobs'), { method: 'POST', headers, body: '{"command":["x"]}' });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: { code: 'Unauthorized', message } });
    const control = await fetch(url('/_local/jobs/j1/interrupt'), { method: 'POST', headers });
    expect(control.status).toBe(401);
    expect(events).toEqual([]);
    expect(controlCalls).toEqual([]);
  });
});

describe('the event the handler receives', () => {
  it('is an HTTP API payload 2.0 event with the local principal, route key and path parameters', async () => {
    const response = await fetch(url('/jobs/j%2D1/logs?attempt=2&limit=5&limit=6'), {
      headers: { ...auth, 'x-custom': 'v' },
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    expect(events).toHaveLength(1);
    const event = events[0] as APIGatewayProxyEventV2WithIAMAuthorizer;
    expect(event.version).toBe('2.0');
    expect(event.routeKey).toBe('GET /jobs/{id}/logs');
    expect(event.requestContext.routeKey).toBe('GET /jobs/{id}/logs');
    expect(event.rawPath).toBe('/jobs/j%2D1/logs');
    expect(event.rawQueryString).toBe('attempt=2&limit=5&limit=6');
    expect(event.queryStringParameters).toEqual({ attempt: '2', limit: '5,6' });
    expect(event.pathParameters).toEqual({ id: 'j-1' });
    expect(event.requestContext.http.method).toBe('GET');
    expect(event.requestContext.authorizer.iam.userArn).toBe(PRINCIPAL);
    expect(event.requestContext.accountId).toBe('000000000000');
    expect(event.headers['x-custom']).toBe('v');
    // The token is local mode's credential: it is not handed on.
    expect(event.headers.authorization).toBeUndefined();
    expect(event.body).toBeUndefined();
    expect(event.isBase64Encoded).toBe(false);
  });

  it('passes a JSON body as text and a binary body base64-encoded', async () => {
    await fetch(url('/jobs'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"command":["python","train.py"]}',
    });
    const binary = Buffer.from([0, 1, 2, 250, 255]);
    await fetch(url('/jobs'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/gzip' },
      body: binary,
    });
    expect(events.map((e) => [e.isBase64Encoded, e.body])).toEqual([
      [false, '{"command":["python","train.py"]}'],
      [true, binary.toString('base64')],
    ]);
  });

  it('writes the handler result back: status, headers, body; a bare value as 200 JSON', async () => {
    reply = { statusCode: 409, headers: { 'X-Thing': 'y', 'content-type': 'application/json' }, body: '{"error":{}}' };
    const refused = await fetch(url('/jobs/j1'), { method: 'DELETE', headers: auth });
    expect([refused.status, refused.headers.get('x-thing'), await refused.text()]).toEqual([409, 'y', '{"error":{}}']);
    reply = 'plain';
    const bare = await fetch(url('/tiers'), { headers: auth });
    expect([bare.status, bare.headers.get('content-type'), await bare.text()]).toEqual([
      200,
      'application/json',
      'plain',
    ]);
  });

  it('answers 500 with a generic message when the handler throws', async () => {
    const failing = await startLocalApiServer({
      handler: async () => {
        throw new Error('secret stack detail');
      },
      token: TOKEN,
      principalArn: PRINCIPAL,
      onError: () => {},
    });
    try {
      const response = await fetch(`${failing.url}/tiers`, { headers: auth });
      expect(response.status).toBe(500);
      expect(await response.json()).toEqual({
        error: { code: 'InternalError', message: 'internal error in the local API server' },
      });
    } finally {
      await failing.close();
    }
  });
});

describe('route matching', () => {
  it('uses the API’s own route table', () => {
    expect(API_ROUTE_KEYS).toEqual(API_ROUTES.map((r) => `${r.method} ${r.path}`));
  });

  it.each([
    ['GET', '/jobs', { routeKey: 'GET /jobs', pathParameters: {} }],
    ['GET', '/jobs/abc', { routeKey: 'GET /jobs/{id}', pathParameters: { id: 'abc' } }],
    ['DELETE', '/jobs/abc', { routeKey: 'DELETE /jobs/{id}', pathParameters: { id: 'abc' } }],
    ['POST', '/jobs/abc/resume', { routeKey: 'POST /jobs/{id}/resume', pathParameters: { id: 'abc' } }],
    [
      'PUT',
      '/budgets/user:nlp:alice',
      { routeKey: 'PUT /budgets/{scope+}', pathParameters: { scope: 'user:nlp:alice' } },
    ],
    ['PUT', '/budgets/a/b%20c', { routeKey: 'PUT /budgets/{scope+}', pathParameters: { scope: 'a/b c' } }],
    ['PUT', '/budgets', undefined],
    ['PUT', '/budgets/', undefined],
    ['PATCH', '/jobs/abc', undefined],
    ['GET', '/jobs/abc/extra', undefined],
    ['GET', '/jobs//logs', undefined],
  ])('%s %s', (method, path, expected) => {
    expect(matchRoute(API_ROUTE_KEYS, method, path)).toEqual(expected);
  });

  it('sends a greedy parameter to the handler', async () => {
    await fetch(url('/budgets/project:nlp:bert'), {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"limitUsd":5}',
    });
    expect(events.map((e) => [e.routeKey, e.pathParameters])).toEqual([
      ['PUT /budgets/{scope+}', { scope: 'project:nlp:bert' }],
    ]);
  });
});

describe('refusals before the handler', () => {
  it('answers 413 for a body over 10 MB', async () => {
    const response = await fetch(url('/jobs'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: Buffer.alloc(MAX_BODY_BYTES + 1, 0x20),
    });
    expect(response.status).toBe(413);
    expect(await response.json()).toEqual({
      error: { code: 'PayloadTooLarge', message: 'request body exceeds 10485760 bytes (10 MB, the HTTP API limit)' },
    });
    expect(events).toEqual([]);
  });

  it('accepts a body of exactly 10 MB', async () => {
    const response = await fetch(url('/jobs'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/octet-stream' },
      body: Buffer.alloc(MAX_BODY_BYTES, 1),
    });
    expect(response.status).toBe(200);
    expect(Buffer.from(events[0]?.body ?? '', 'base64').length).toBe(MAX_BODY_BYTES);
  });

  it('answers 404 for a route the API does not have', async () => {
    const response = await fetch(url('/reports/weekly'), { headers: auth });
    expect(response.status).toBe(404);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('NotFound');
    expect(body.error.message).toBe('no route for GET /reports/weekly');
    expect(events).toEqual([]);
  });
});

describe('local control routes', () => {
  it('go to the injected callback with path parameters and the JSON body, never to the API handler', async () => {
    const response = await fetch(url('/_local/jobs/j7/interrupt'), {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: '{"afterSeconds":0}',
    });
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ interrupted: 'j7' });
    expect(controlCalls).toEqual([{ pathParameters: { id: 'j7' }, body: { afterSeconds: 0 } }]);
    expect(events).toEqual([]);
  });

  it('answer 404 for an unknown control route', async () => {
    const response = await fetch(url('/_local/nothing'), { method: 'POST', headers: auth });
    expect(response.status).toBe(404);
    expect(controlCalls).toEqual([]);
  });

  it('must live under /_local/', async () => {
    await expect(
      startLocalApiServer({
        handler: async () => '',
        token: TOKEN,
        principalArn: PRINCIPAL,
        control: { 'POST /jobs/{id}/interrupt': async () => ({ statusCode: 200, body: {} }) },
      }),
    ).rejects.toThrow('local control route "POST /jobs/{id}/interrupt" must be under /_local/');
  });
});

describe('state file', () => {
  it('records the URL and process while running and is removed on close', async () => {
    const state = readLocalState(dir);
    expect(state?.apiUrl).toBe(server?.url);
    expect(state?.pid).toBe(process.pid);
    expect(Date.parse(state?.startedAt ?? '')).not.toBeNaN();
    expect(server?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await server?.close();
    server = undefined;
    expect(readLocalState(dir)).toBeUndefined();
  });
});

describe('local token', () => {
  it('is created once with owner-only permissions and read back unchanged', () => {
    const tokenDir = join(dir, 'fresh');
    const first = ensureLocalToken(tokenDir);
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(tokenDir, 'local-token')).mode & 0o777).toBe(0o600);
    expect(ensureLocalToken(tokenDir)).toBe(first);
    expect(readLocalToken(tokenDir)).toBe(first);
    expect(readFileSync(join(tokenDir, 'local-token'), 'utf8')).toBe(`${first}\n`);
  });

  it('is undefined before it exists, and a corrupt one is refused with the file named', () => {
    const tokenDir = join(dir, 'other');
    expect(readLocalToken(tokenDir)).toBeUndefined();
    ensureLocalToken(tokenDir);
    writeFileSync(join(tokenDir, 'local-token'), 'short');
    expect(() => readLocalToken(tokenDir)).toThrow(LocalStateError);
    expect(() => readLocalToken(tokenDir)).toThrow(`${join(tokenDir, 'local-token')} does not hold a local token`);
  });
});
