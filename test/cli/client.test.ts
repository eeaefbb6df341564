// The CLI's API client against a real HTTP server on loopback that drops connections under chosen requests.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiClient, type ApiTarget } from '../../lib/cli/client';
import { CliError } from '../../lib/cli/exit-codes';

let server: Server | undefined;

afterEach(async () => {
  await new Promise<void>((done) => (server ? server.close(() => done()) : done()));
  server = undefined;
});

/** A server that destroys the socket under its first `drops` requests, as a keep-alive close racing a request does. */
async function droppingServer(drops: number): Promise<{ target: ApiTarget; seen: () => number }> {
  let seen = 0;
  server = createServer((request, response) => {
    seen += 1;
    if (seen <= drops) {
      request.socket.destroy();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ request: seen }));
  });
  await new Promise<void>((done) => server?.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    target: { kind: 'local', baseUrl: new URL(`http://127.0.0.1:${port}`), authenticate: async () => ({}) },
    seen: () => seen,
  };
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
