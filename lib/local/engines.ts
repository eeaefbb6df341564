/**
 * Starts the local engines that speak the AWS APIs: dynalite (DynamoDB) and s3rver (S3), on loopback.
 * Used by local mode and by tests, so both exercise the same adapters against the same wire protocol.
 *
 * Loopback is reachable by every user of the machine, and neither engine checks who calls it. Given credentials, an
 * engine answers only requests signed with them, as AWS answers any other: local mode makes a random key for each
 * engine at each start.
 * - s3rver checks the whole SigV4 signature (sigv4.ts), in the Authorization header or a presigned URL, and answers
 *   as S3 does (InvalidAccessKeyId, SignatureDoesNotMatch, AccessDenied). Its key goes to the attempts local mode runs;
 *   a presigned URL the API hands out opens one object, for one method, until it expires.
 * - dynalite checks the whole SigV4 signature too (sigv4.ts), over the body as it arrived, and answers as DynamoDB
 *   does (MissingAuthenticationTokenException, UnrecognizedClientException, InvalidSignatureException). The body is
 *   read whole first (at most dynalite's own 16 MiB) and handed to dynalite as it came. Its key never leaves local
 *   mode's process.
 */

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import dynalite from 'dynalite';
import S3rver from 's3rver';
import {
  checkDynamoDbSignature,
  checkS3Signature,
  type DynamoDbSignatureRefusal,
  type SignatureRefusal,
} from './sigv4';

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
 * only requests whose SigV4 signature by them holds are answered.
 */
export async function startDynalite(
  options: {
    path?: string;
    port?: number;
    credentials?: EngineCredentials;
    /** The clock signatures are checked against (their skew). @default Date.now */
    now?: () => number;
  } = {},
): Promise<RunningEngine> {
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  if (options.credentials)
    guardServerWithBody(server, dynamoSignatureCheck(options.credentials, options.now ?? Date.now), DYNALITE_MAX_BYTES);
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
  /** The clock signatures are checked against (presigned URLs' expiry, header signatures' skew). @default Date.now */
  now?: () => number;
}): Promise<RunningEngine> {
  listObjectsV2WithoutDes();
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
    koa.callback = () => guardListener(serve(), s3SignatureCheck(credentials, options.now ?? Date.now));
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

/** What answers a request the guard refuses; undefined lets the request through to the engine. */
type Check = (request: IncomingMessage) => ((response: ServerResponse) => void) | undefined;

/** What a check answers; a check that cannot read the request refuses it (a throw in a listener would stop the engine). */
function refusalOf(check: () => ReturnType<Check>): ReturnType<Check> {
  try {
    return check();
  } catch {
    return (answer) => {
      answer.writeHead(400, { Connection: 'close' });
      answer.end();
    };
  }
}

/** The engine's listener behind `check`: a refused request is drained and answered; any other goes through. */
function guardListener(listener: RequestListener, check: Check): RequestListener {
  return (request, response) => {
    const refuse = refusalOf(() => check(request));
    if (refuse === undefined) {
      listener(request, response);
      return;
    }
    // The body is not read: drain it so the client sees the answer rather than a reset connection.
    request.resume();
    refuse(response);
  };
}

/** The largest request dynalite reads (its MAX_REQUEST_BYTES); a larger one gets its 413. */
const DYNALITE_MAX_BYTES = 16 * 1024 * 1024;

/** A check that needs the request's body as well. */
type BodyCheck = (request: IncomingMessage, body: Buffer) => ((response: ServerResponse) => void) | undefined;

/**
 * Puts a check that reads the whole body in front of every request listener a not-yet-listening server has: the body
 * is read first, checked, then handed to the listener as it arrived, in a stream of its own.
 */
function guardServerWithBody(server: Server, check: BodyCheck, maxBytes: number): void {
  const listeners = server.listeners('request') as RequestListener[];
  server.removeAllListeners('request');
  for (const listener of listeners) {
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      const chunks: Buffer[] = [];
      let size = 0;
      request.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= maxBytes) chunks.push(chunk);
      });
      request.on('error', () => response.destroy());
      request.on('end', () => {
        if (size > maxBytes) {
          response.writeHead(413, { Connection: 'close' });
          response.end();
          return;
        }
        const body = Buffer.concat(chunks);
        const refuse = refusalOf(() => check(request, body));
        if (refuse !== undefined) refuse(response);
        else listener(replayOf(request, body), response);
      });
    });
  }
}

/** The request with its body to read again: its method, URL and headers, and the body as one chunk. */
function replayOf(request: IncomingMessage, body: Buffer): IncomingMessage {
  const replay = Readable.from(body.length > 0 ? [body] : [], { objectMode: false });
  return Object.assign(replay, {
    headers: request.headers,
    method: request.method,
    url: request.url,
    httpVersion: request.httpVersion,
    socket: request.socket,
  }) as unknown as IncomingMessage;
}

/** dynalite's check: a valid SigV4 signature by its key (sigv4.ts), over the body as it arrived. */
function dynamoSignatureCheck(credentials: EngineCredentials, now: () => number): BodyCheck {
  return (request, body) => {
    const refusal = checkDynamoDbSignature(request, body, credentials, now());
    return refusal && ((response) => refuseDynamoDb(response, refusal));
  };
}

/** s3rver's check: a valid SigV4 signature by its key (sigv4.ts), in the header or a presigned URL. */
function s3SignatureCheck(credentials: EngineCredentials, now: () => number): Check {
  return (request) => {
    const refusal = checkS3Signature(request, credentials, now());
    return refusal && ((response) => refuseS3(response, refusal));
  };
}

/** DynamoDB's answer to a request whose signature does not hold (HTTP 400, JSON 1.0 protocol). */
function refuseDynamoDb(response: ServerResponse, refusal: DynamoDbSignatureRefusal): void {
  response.writeHead(400, { 'Content-Type': 'application/x-amz-json-1.0', Connection: 'close' });
  response.end(
    JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${refusal.type}`, message: refusal.message }),
  );
}

/** S3's answer to a request whose signature does not hold (HTTP 403, XML). */
function refuseS3(response: ServerResponse, refusal: SignatureRefusal): void {
  response.writeHead(refusal.code === 'AuthorizationQueryParametersError' ? 400 : 403, {
    'Content-Type': 'application/xml',
    Connection: 'close',
  });
  response.end(
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${refusal.code}</Code><Message>${escapeXml(refusal.message)}</Message></Error>`,
  );
}

function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** s3rver's own modules (its package exports none but the server), which local mode extends or consults. */
const requireS3rverPart = createRequire(import.meta.url);

interface S3rverAccount {
  createKeyPair(accessKeyId: string, secretAccessKey: string): void;
  revokeAccessKey(accessKeyId: string): void;
}

/** s3rver's one account (lib/models/account.js): its registry of access keys is the only one s3rver consults. */
function s3rverAccount(): S3rverAccount {
  return (requireS3rverPart('s3rver/lib/models/account') as { DUMMY_ACCOUNT: S3rverAccount }).DUMMY_ACCOUNT;
}

/** What a ListObjectsV2 continuation token from {@link listObjectsV2WithoutDes} holds. */
interface ListingToken {
  readonly bucket: string;
  readonly after: string;
}

/** The bits of a request context (Koa's) that s3rver's bucket listing reads and writes. */
interface ListingContext {
  params: { bucket: string };
  query: Record<string, string | undefined>;
  body: { ListBucketResult?: Record<string, unknown> } | undefined;
}

let listObjectsV2Bridged = false;

/**
 * s3rver 3.7 makes ListObjectsV2's continuation tokens with DES, which Node's OpenSSL 3 offers only under
 * `--openssl-legacy-provider`: without it, every listing of more than one page (1,000 keys) fails as InternalError, so a
 * checkpoint of over 1,000 files could neither be restored nor listed. Rather than weaken the whole process's crypto,
 * s3rver's bucket listing answers ListObjectsV2 through its ListObjects (V1) listing, which pages by marker and needs
 * no cipher, and gives the V1 answer V2's fields: the next token is the last key listed, with its bucket, base64url'd
 * (S3 says only that a token is opaque). Pages hold what s3rver's own V2 pages hold. Done once per process.
 */
function listObjectsV2WithoutDes(): void {
  if (listObjectsV2Bridged) return;
  const bucketController = requireS3rverPart('s3rver/lib/controllers/bucket') as {
    getBucket(ctx: ListingContext): Promise<void>;
  };
  const listV1 = bucketController.getBucket;
  bucketController.getBucket = async (ctx) => {
    const query = ctx.query;
    if (query['list-type'] !== '2') return listV1(ctx);
    const {
      'list-type': _,
      'continuation-token': given,
      'start-after': startAfter,
      'fetch-owner': owner,
      ...rest
    } = query;
    if ('marker' in query)
      throw s3rverError('InvalidArgument', 'Marker unsupported with REST.GET.BUCKET in list-type=2', 'marker');
    const token = given || undefined; // s3rver takes an empty token as none
    const after = token !== undefined ? readListingToken(token, ctx.params.bucket) : startAfter;
    ctx.query = { ...rest, ...(after !== undefined && { marker: after }) };
    await listV1(ctx);
    const listing = ctx.body?.ListBucketResult;
    if (!listing) return;
    const { Marker: _marker, NextMarker: _next, Contents, IsTruncated, ...kept } = listing;
    const objects = Contents as { Key: string; Owner?: unknown }[];
    const last = objects.at(-1)?.Key;
    const truncated = IsTruncated === true;
    ctx.body = {
      ListBucketResult: {
        ...kept,
        ...(token === undefined && startAfter !== undefined && { StartAfter: startAfter }),
        ...(token !== undefined && { ContinuationToken: token }),
        ...(truncated && last !== undefined && { NextContinuationToken: listingToken(ctx.params.bucket, last) }),
        KeyCount: objects.length,
        IsTruncated: truncated,
        Contents: owner === 'true' ? objects : objects.map(({ Owner: _owner, ...object }) => object),
      },
    };
  };
  listObjectsV2Bridged = true;
}

function listingToken(bucket: string, after: string): string {
  return Buffer.from(JSON.stringify({ bucket, after } satisfies ListingToken)).toString('base64url');
}

/** The key a token continues after; a token this bridge did not make for this bucket is S3's InvalidArgument. */
function readListingToken(token: string, bucket: string): string {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as Partial<ListingToken>;
    if (parsed.bucket === bucket && typeof parsed.after === 'string') return parsed.after;
  } catch {
    // not JSON: refused below
  }
  throw s3rverError('InvalidArgument', 'The continuation token provided is incorrect', 'continuation-token');
}

/** An error s3rver answers in S3's shape (its own S3Error), naming the query argument at fault. */
function s3rverError(code: string, message: string, argument: string): Error {
  const S3Error = requireS3rverPart('s3rver/lib/models/error') as new (
    code: string,
    message: string,
    details?: Record<string, unknown>,
  ) => Error;
  return new S3Error(code, message, { ArgumentName: argument });
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
