/**
 * AWS Signature Version 4 for a request whose whole body is in hand (the JSON protocols: DynamoDB). It is what the
 * SDK's signer computes for such a request (test/lambdas/sigv4.test.ts signs the same requests with
 * `@smithy/signature-v4` and compares); it exists so that the DynamoDB client every handler loads at cold start needs
 * no SDK package (see dynamo.ts). Query strings, chunked and unsigned payloads, and presigning are not covered: S3
 * keeps the SDK.
 */
import { createHmac } from 'node:crypto';
import { sha256Hex } from './tarball';

/** Credentials a request is signed with; `sessionToken` for temporary ones (a Lambda's role). */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When temporary credentials stop working; a client refreshes them before then. */
  readonly expiration?: Date;
}

/** The parts of an HTTP request that are signed. */
export interface RequestToSign {
  readonly method: string;
  /** Host header value: the endpoint's host, with its port when it is not the scheme's default. */
  readonly host: string;
  /** The path, already URI-encoded as it goes on the wire (`/` for the JSON protocols). */
  readonly path: string;
  /** Headers to sign besides host, x-amz-date and x-amz-security-token, which the signer adds. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** Where the request goes and when it is signed. */
export interface SigningScope {
  readonly region: string;
  /** The signing name of the service, e.g. `dynamodb`. */
  readonly service: string;
  readonly credentials: AwsCredentials;
  readonly date: Date;
}

/** SigV4's algorithm name, as the Authorization header and a presigned URL's X-Amz-Algorithm carry it. */
export const ALGORITHM = 'AWS4-HMAC-SHA256';

/** The signing key for a day, region and service, kept while the day lasts: derivation is four HMACs. */
const signingKeys = new Map<string, Buffer>();

/**
 * The request's headers, every one signed: the given ones (names lower-cased), host, x-amz-date, the session token
 * when there is one, and authorization.
 */
export function signRequest(request: RequestToSign, scope: SigningScope): Record<string, string> {
  const amzDate = scope.date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) headers[name.toLowerCase()] = value;
  headers.host = request.host;
  headers['x-amz-date'] = amzDate;
  if (scope.credentials.sessionToken !== undefined) headers['x-amz-security-token'] = scope.credentials.sessionToken;

  const names = Object.keys(headers).sort();
  const credentialScope = `${day}/${scope.region}/${scope.service}/aws4_request`;
  const signature = sigV4Signature(
    scope.credentials.secretAccessKey,
    amzDate,
    credentialScope,
    canonicalRequest({
      method: request.method,
      path: request.path,
      query: '',
      headers: names.map((name) => [name, headers[name] ?? '']),
      payloadHash: sha256Hex(request.body),
    }),
  );
  headers.authorization =
    `${ALGORITHM} Credential=${scope.credentials.accessKeyId}/${credentialScope}, ` +
    `SignedHeaders=${names.join(';')}, Signature=${signature}`;
  return headers;
}

/**
 * SigV4's canonical request ("Create a canonical request"): the method, the path and the canonical query as given,
 * the signed headers (lower-case names, in order) with their values canonicalised, their names, and the payload's
 * hash. The signer builds it from what it sends; local mode's check (lib/local/sigv4.ts) from what arrived.
 */
export function canonicalRequest(parts: {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: ReadonlyArray<readonly [name: string, value: string]>;
  readonly payloadHash: string;
}): string {
  return [
    parts.method.toUpperCase(),
    parts.path,
    parts.query,
    ...parts.headers.map(([name, value]) => `${name}:${canonicalHeaderValue(value)}`),
    '',
    parts.headers.map(([name]) => name).join(';'),
    parts.payloadHash,
  ].join('\n');
}

/** A header value as SigV4 canonicalises it: trimmed, runs of spaces folded to one. */
export function canonicalHeaderValue(value: string): string {
  return value.trim().replace(/\s+/g, ' ');
}

/**
 * The hex signature of a canonical request: the string to sign over its hash, signed with the key derived from the
 * secret for the credential scope (`<yyyymmdd>/<region>/<service>/aws4_request`). Local mode's S3 check computes the
 * signature a request should carry with it too (lib/local/sigv4.ts).
 */
export function sigV4Signature(
  secretAccessKey: string,
  amzDate: string,
  credentialScope: string,
  canonicalRequest: string,
): string {
  const stringToSign = [ALGORITHM, amzDate, credentialScope, sha256Hex(canonicalRequest)].join('\n');
  return createHmac('sha256', signingKey(secretAccessKey, credentialScope)).update(stringToSign, 'utf8').digest('hex');
}

function signingKey(secret: string, credentialScope: string): Buffer {
  const cacheKey = `${credentialScope}\u0000${secret}`;
  const cached = signingKeys.get(cacheKey);
  if (cached !== undefined) return cached;
  const key = credentialScope
    .split('/')
    .reduce<Buffer | string>(
      (k, part) => createHmac('sha256', k).update(part, 'utf8').digest(),
      `AWS4${secret}`,
    ) as Buffer;
  // A long-lived process signs across days and rotated credentials; keep only the newest few keys.
  if (signingKeys.size >= 8) signingKeys.clear();
  signingKeys.set(cacheKey, key);
  return key;
}
