/**
 * Starts the local engines that speak the AWS APIs: dynalite (DynamoDB) and s3rver (S3), on loopback.
 * Used by local mode and by tests, so both exercise the same adapters against the same wire protocol.
 *
 * Loopback is reachable by every user of the machine, and neither engine checks who calls it. Given an access key,
 * an engine answers only requests signed with it (the SigV4 `Credential` of the Authorization header, or of a presigned
 * URL's `X-Amz-Credential`), as AWS answers a key it does not know: DynamoDB's UnrecognizedClientException, S3's
 * InvalidAccessKeyId. The key is checked, not the signature: it travels only over loopback, which other users cannot
 * read, as the API's bearer token does. Local mode makes a random key for each engine at each start: dynalite's stays
 * in its own process; s3rver's also goes to the attempts it runs and, inside presigned URLs, to the CLI, so a
 * presigned URL handed to someone else opens the local bucket (never the tables) until local mode restarts.
 */

import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';
import S3rver from 's3rver';

/** A running engine: its loopback endpoint and how to stop it. */
export interface RunningEngine {
  readonly endpoint: string;
  stop(): Promise<void>;
}

/** Credentials an engine's clients sign with. */
export interface EngineCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** What clients of an engine started without credentials sign with: s3rver's built-in key (dynalite takes any). */
export const OPEN_ENGINE_CREDENTIALS: EngineCredentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** Fresh random credentials for an engine that must answer no one else (local mode makes one per engine per start). */
export function randomEngineCredentials(): EngineCredentials {
  return {
    accessKeyId: `TYLOCAL${randomBytes(10).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(30).toString('base64url'),
  };
}

/**
 * Starts dynalite on 127.0.0.1; `path` persists tables in LevelDB, otherwise they live in memory. With `credentials`,
 * only requests signed with its access key are answered.
 */
export async function startDynalite(
  options: { path?: string; port?: number; credentials?: EngineCredentials } = {},
): Promise<RunningEngine> {
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (options.credentials) guardServer(server, options.credentials.accessKeyId, refuseDynamoDb);
  await listen(server, options.port ?? 0);
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => closeServer(server),
  };
}

/**
 * Starts s3rver on 127.0.0.1 storing objects under `directory`, creating `buckets` if missing. With `credentials`,
 * only requests signed (or presigned) with its access key are answered.
 */
export async function startS3rver(options: {
  directory: string;
  buckets?: string[];
  port?: number;
  credentials?: EngineCredentials;
}): Promise<RunningEngine> {
  const s3rver = new S3rver({
    address: '127.0.0.1',
    port: options.port ?? 0,
    silent: true,
    directory: options.directory,
    allowMismatchedSignatures: true,
    configureBuckets: (options.buckets ?? []).map((name) => ({ name })),
  });
  const credentials = options.credentials;
  if (credentials?.accessKeyId === OPEN_ENGINE_CREDENTIALS.accessKeyId) {
    throw new Error(
      `s3rver's built-in key ${credentials.accessKeyId} opens every s3rver: start it without credentials`,
    );
  }
  if (credentials) {
    // s3rver refuses an access key it has no record of; its only record is this account (it checks no V4 signature).
    s3rverAccount().createKeyPair(credentials.accessKeyId, credentials.secretAccessKey);
    // The server s3rver creates in run() serves this callback: guarded before it can take a request.
    const koa = s3rver as unknown as { callback(): RequestListener };
    const serve = koa.callback.bind(s3rver);
    koa.callback = () => guardListener(serve(), credentials.accessKeyId, refuseS3);
  }
  const forget = () => {
    if (credentials) s3rverAccount().revokeAccessKey(credentials.accessKeyId);
  };
  let address: AddressInfo;
  try {
    address = await s3rver.run();
  } catch (error) {
    forget();
    throw error;
  }
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    stop: async () => {
      try {
        await s3rver.close();
      } finally {
        forget();
      }
    },
  };
}

/** The access key a request is signed with: SigV4's `Credential=<key>/…`, in the Authorization header or the URL. */
export function signingAccessKey(request: Pick<IncomingMessage, 'headers' | 'url'>): string | undefined {
  const authorization = request.headers.authorization;
  if (typeof authorization === 'string') {
    return /^AWS4-HMAC-SHA256 .*\bCredential=([^/,\s]+)\//.exec(authorization)?.[1];
  }
  const query = new URL(request.url ?? '/', 'http://loopback').searchParams;
  return query.get('X-Amz-Credential')?.split('/')[0];
}

type Refusal = (response: ServerResponse, accessKey: string | undefined) => void;

/** Puts the access-key check in front of every request listener a not-yet-listening server has. */
function guardServer(server: Server, accessKeyId: string, refuse: Refusal): void {
  const listeners = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  for (const listener of listeners) server.on('request', guardListener(listener, accessKeyId, refuse));
}

function guardListener(listener: RequestListener, accessKeyId: string, refuse: Refusal): RequestListener {
  const expected = Buffer.from(accessKeyId);
  return (request, response) => {
    const given = signingAccessKey(request);
    const presented = Buffer.from(given ?? '');
    if (presented.length === expected.length && timingSafeEqual(presented, expected)) {
      listener(request, response);
      return;
    }
    // The body is not read: drain it so the client sees the answer rather than a reset connection.
    request.resume();
    refuse(response, given);
  };
}

/** DynamoDB's answer to a key it does not know (HTTP 400, JSON 1.0 protocol). */
function refuseDynamoDb(response: ServerResponse): void {
  response.writeHead(400, { 'Content-Type': 'application/x-amz-json-1.0', Connection: 'close' });
  response.end(
    JSON.stringify({
      __type: 'com.amazonaws.dynamodb.v20120810#UnrecognizedClientException',
      message: 'The security token included in the request is invalid.',
    }),
  );
}

/** S3's answer to a key it does not know (HTTP 403, XML). */
function refuseS3(response: ServerResponse, accessKey: string | undefined): void {
  response.writeHead(403, { 'Content-Type': 'application/xml', Connection: 'close' });
  const [code, message] =
    accessKey === undefined
      ? ['AccessDenied', 'Access Denied']
      : ['InvalidAccessKeyId', 'The AWS Access Key Id you provided does not exist in our records.'];
  response.end(
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${message}</Message></Error>`,
  );
}

interface S3rverAccount {
  createKeyPair(accessKeyId: string, secretAccessKey: string): void;
  revokeAccessKey(accessKeyId: string): void;
}

/** s3rver's one account (lib/models/account.js): its registry of access keys is the only one s3rver consults. */
function s3rverAccount(): S3rverAccount {
  return (createRequire(import.meta.url)('s3rver/lib/models/account') as { DUMMY_ACCOUNT: S3rverAccount })
    .DUMMY_ACCOUNT;
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
}
