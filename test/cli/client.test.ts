// The CLI's API client against a real HTTP server on loopback that drops connections under chosen requests.

import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, type ApiTarget, processAlive } from '../../lib/cli/client';
import { CliError, EXIT_CODES } from '../../lib/cli/exit-codes';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((done) => (server ? server.close(() => done()) : done()));
  server = undefined;
});

/**
 * A loopback server; `answer` handles its n-th request (1-based). Its target is local mode's (no signing), and
 * `seen()` counts the requests that reached it.
 */
async function loopbackServer(
  answer: (n: number, request: IncomingMessage, response: ServerResponse) => void,
): Promise<{ target: ApiTarget; seen: () => number }> {
  let seen = 0;
  server = createServer((request, response) => {
    seen += 1;
    answer(seen, request, response);
  });
  await new Promise<void>((done) => server?.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    target: { kind: 'local', baseUrl: new URL(`http://127.0.0.1:${port}`), authenticate: async () => ({}) },
    seen: () => seen,
  };
}

/** A server that destroys the socket under its first `drops` requests, as a keep-alive close racing a request does. */
function droppingServer(drops: number): Promise<{ target: ApiTarget; seen: () => number }> {
  return loopbackServer((n, request, response) => {
    if (n <= drops) {
      request.socket.destroy();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ request: n }));
  });
}

describe('ApiClient', () => {
  it('sends a GET again when the connection is reset under it, up to three tries in all', async () => {
    const { target, seen } = await droppingServer(2);

    const response = await new ApiClient(target).send({ method: 'GET', path: '/jobs' });

    expect(response).toEqual({ status: 200, body: { request: 3 } });
    expect(seen()).toBe(3);
  });

  it('gives up after three resets, saying local mode cannot be reached', async () => {
    const { target, seen } = await droppingServer(5);

    const error = await new ApiClient(target).send({ method: 'GET', path: '/jobs' }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toMatch(/^local mode is not running: .* refused: /);
    expect(seen()).toBe(3);
  });

  it('never sends a POST again without an idempotency key (it may have been acted on); with one it does', async () => {
    const once = await droppingServer(1);
    const error = await new ApiClient(once.target)
      .send({ method: 'POST', path: '/jobs/j/cancel', body: {} })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect(once.seen()).toBe(1);
    await new Promise<void>((done) => server?.close(() => done()));

    const keyed = await droppingServer(1);
    const response = await new ApiClient(keyed.target).send({
      method: 'POST',
      path: '/jobs',
      body: {},
      headers: { 'idempotency-key': 'k-1' },
    });
    expect(response.status).toBe(200);
    expect(keyed.seen()).toBe(2);
  });
});

/** A server answering its requests with the given statuses in turn (then 200), each with the given headers. */
function scriptedServer(
  answers: ReadonlyArray<{ status: number; headers?: Record<string, string> }>,
): Promise<{ target: ApiTarget; seen: () => number }> {
  return loopbackServer((n, _request, response) => {
    const answer = answers[n - 1] ?? { status: 200 };
    response.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
    response.end(
      JSON.stringify(
        answer.status === 200
          ? { request: n }
          : { error: { code: answer.status === 429 ? 'TooManyRequests' : 'busy', message: 'not now' } },
      ),
    );
  });
}

describe('ApiClient when the API says "not now" (429, 503)', () => {
  /** Timing that records each wait instead of sleeping; jitter fixed at `random`. */
  function recordedTiming(random = 0.5, now = 1_000_000) {
    const waits: number[] = [];
    return {
      waits,
      timing: { sleep: async (ms: number) => void waits.push(ms), random: () => random, now: () => now },
    };
  }

  it('sends a GET again after a 429 and a 503, waiting a jittered exponential backoff (base 500 ms)', async () => {
    const { target, seen } = await scriptedServer([{ status: 429 }, { status: 503 }]);
    const { waits, timing } = recordedTiming(0.5);

    const response = await new ApiClient(target, fetch, timing).send({ method: 'GET', path: '/jobs' });

    expect(response).toEqual({ status: 200, body: { request: 3 } });
    expect(seen()).toBe(3);
    // 0.5 × 500 ms, then 0.5 × 1,000 ms.
    expect(waits).toEqual([250, 500]);
  });

  it('waits what Retry-After asks, in seconds or as an HTTP date', async () => {
    const now = Date.parse('2026-11-29T10:00:00Z');
    const { target } = await scriptedServer([
      { status: 429, headers: { 'retry-after': '2' } },
      { status: 503, headers: { 'retry-after': 'Sun, 29 Nov 2026 10:00:07 GMT' } },
    ]);
    const { waits, timing } = recordedTiming(0.5, now);

    await new ApiClient(target, fetch, timing).send({ method: 'GET', path: '/jobs' });

    expect(waits).toEqual([2000, 7000]);
  });

  it('gives up after four tries in all, saying the API is throttling, with the status its exit code', async () => {
    const { target, seen } = await scriptedServer(Array.from({ length: 6 }, () => ({ status: 429 })));
    const { waits, timing } = recordedTiming(0.999);

    const error = (await new ApiClient(target, fetch, timing)
      .send({ method: 'GET', path: '/jobs' })
      .catch((e: unknown) => e)) as CliError;

    expect(error).toBeInstanceOf(CliError);
    expect(seen()).toBe(4);
    expect(waits.map(Math.round)).toEqual([500, 999, 1998]);
    expect(error.message).toContain('not now');
    expect(error.message).toContain(
      'the API is throttling requests or briefly unavailable (still 429 after 4 tries); wait a minute and run the command again',
    );
    expect(error.exitCode).toBe(EXIT_CODES.refused);
  });

  it('does not wait out a Retry-After longer than 30 s: it reports it at once', async () => {
    const { target, seen } = await scriptedServer([{ status: 503, headers: { 'retry-after': '120' } }]);
    const { waits, timing } = recordedTiming();

    const error = (await new ApiClient(target, fetch, timing)
      .send({ method: 'GET', path: '/jobs' })
      .catch((e: unknown) => e)) as CliError;

    expect(seen()).toBe(1);
    expect(waits).toEqual([]);
    expect(error.message).toContain('the API asked to retry after 120 s, longer than the 30 s the CLI waits');
  });

  it('never repeats a POST without an idempotency key after a 503 (it may have been acted on); with one it does', async () => {
    const plain = await scriptedServer([{ status: 503 }]);
    const { waits, timing } = recordedTiming();
    const error = await new ApiClient(plain.target, fetch, timing)
      .send({ method: 'POST', path: '/jobs/j/resume', body: {} })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect(plain.seen()).toBe(1);
    expect(waits).toEqual([]);
    await new Promise<void>((done) => server?.close(() => done()));

    const keyed = await scriptedServer([{ status: 503 }]);
    const response = await new ApiClient(keyed.target, fetch, timing).send({
      method: 'POST',
      path: '/jobs',
      body: {},
      headers: { 'idempotency-key': 'k-2' },
    });
    expect(response.status).toBe(200);
    expect(keyed.seen()).toBe(2);
  });

  it('repeats PUT and DELETE (setting a limit, a cancel: the same effect twice)', async () => {
    const { target, seen } = await scriptedServer([{ status: 429 }, { status: 429 }]);
    const { timing } = recordedTiming();
    const client = new ApiClient(target, fetch, timing);

    expect((await client.send({ method: 'PUT', path: '/budgets/nlp', body: { limitUsd: 5 } })).status).toBe(200);
    expect((await client.send({ method: 'DELETE', path: '/jobs/j' })).status).toBe(200);
    expect(seen()).toBe(4);
  });
});

describe('processAlive (is the pid in local.json still local mode?)', () => {
  const started = (argv0: string) => {
    // bash's exec -a names the process as argv[0]: /proc/<pid>/cmdline then starts with it.
    const child = spawn('bash', ['-c', `exec -a ${argv0} sleep 30`], { stdio: 'ignore' });
    return child;
  };

  it('takes a live process whose command line names trainyard for local mode, and this process too', async () => {
    const child = started('node-bin-trainyard.ts-local');
    try {
      await new Promise((done) => setTimeout(done, 100));
      expect(processAlive(child.pid as number)).toBe(true);
      expect(processAlive(process.pid)).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('does not take another process that reuses the pid after a crash, nor one that has exited', async () => {
    const child = started('sleep');
    try {
      await new Promise((done) => setTimeout(done, 100));
      expect(processAlive(child.pid as number)).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((done) => child.once('exit', done));
    expect(processAlive(child.pid as number)).toBe(false);
  });
});
