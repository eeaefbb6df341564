/**
 * Checks requests' Signature Version 4 for local mode's engines, which check none: DynamoDB's for dynalite
 * (checkDynamoDbSignature, below) and S3's for s3rver.
 *
 * An S3 request's is checked as S3 does: the
 * Authorization header form the SDKs send, and the presigned-URL form (`X-Amz-Signature` in the query) the API hands
 * out. With it, a presigned URL opens one object, for one method, until it expires; it is not the bucket's key.
 *
 * The canonical request is rebuilt from the request as it arrived (AWS's "Create a canonical request"): the method;
 * the path as sent (S3 neither normalises nor re-encodes it); the query's names and values decoded and encoded again
 * per RFC 3986, sorted, without `X-Amz-Signature`; the signed headers, lowercase, trimmed, inner spaces collapsed; and
 * the payload hash the client signed: `x-amz-content-sha256` (S3 requires it with a header signature), or
 * `UNSIGNED-PAYLOAD` for a presigned URL. The body itself is not hashed: it would have to be read before s3rver does,
 * and a signature over a declared hash already binds a request to the key's holder.
 */
import type { IncomingMessage } from 'node:http';
import { compareCodeUnits } from '../../lambdas/domain/code-unit-order';
import { ALGORITHM, canonicalHeaderValue, canonicalRequest, sigV4Signature } from '../../lambdas/shared/sigv4';
import { sha256Hex } from '../../lambdas/shared/tarball';
import { tokenMatches } from './token';

/** How far a header-signed request's X-Amz-Date may be from the clock, as S3 allows (RequestTimeTooSkewed). */
export const MAX_CLOCK_SKEW_SECONDS = 15 * 60;
/** The longest a presigned URL may be valid, as SigV4 allows (7 days). */
const MAX_PRESIGNED_SECONDS = 7 * 24 * 3600;

/** Why a request's signature does not hold, as S3's error code and message; undefined when it holds. */
export interface SignatureRefusal {
  readonly code: 'AccessDenied' | 'InvalidAccessKeyId' | 'SignatureDoesNotMatch' | 'AuthorizationQueryParametersError';
  readonly message: string;
}

/** The parts of a SigV4 signature, from the Authorization header or a presigned URL's query. */
interface SignatureParts {
  readonly accessKeyId: string;
  /** `<yyyymmdd>/<region>/<service>/aws4_request` */
  readonly scope: string;
  readonly signedHeaders: string[];
  readonly signature: string;
  /** `X-Amz-Date`: yyyymmddThhmmssZ. */
  readonly amzDate: string;
  readonly presigned: boolean;
  /** Seconds a presigned URL is valid for. */
  readonly expires?: number;
}

/** Checks the request's SigV4 signature against the one key and secret that may sign; undefined when it holds. */
export function checkS3Signature(
  request: Pick<IncomingMessage, 'method' | 'url' | 'headers'>,
  credentials: { readonly accessKeyId: string; readonly secretAccessKey: string },
  nowMs: number,
): SignatureRefusal | undefined {
  const [path, rawQuery = ''] = splitOnce(request.url ?? '/', '?');
  // SigV4 clients encode a space as %20 and a plus as %2B; s3rver would read a raw + as a space, which the signature
  // (over %2B) would not cover.
  if (rawQuery.includes('+')) {
    return {
      code: 'AuthorizationQueryParametersError',
      message: 'a raw + in the query is ambiguous: encode it as %2B',
    };
  }
  const query = queryPairs(rawQuery);
  const parts = signatureParts(request.headers, query);
  if (parts === undefined) return { code: 'AccessDenied', message: 'Access Denied' };
  if (typeof parts === 'string') return { code: 'AuthorizationQueryParametersError', message: parts };
  if (parts.scope.split('/')[2] !== 's3') {
    return {
      code: 'AuthorizationQueryParametersError',
      message: 'the credential must be <access key>/<date>/<region>/s3/aws4_request',
    };
  }
  if (!tokenMatches(parts.accessKeyId, credentials.accessKeyId)) {
    return { code: 'InvalidAccessKeyId', message: 'The AWS Access Key Id you provided does not exist in our records.' };
  }
  const signedAt = amzDateMs(parts.amzDate);
  if (signedAt === undefined || !parts.scope.startsWith(`${parts.amzDate.slice(0, 8)}/`)) {
    return { code: 'AccessDenied', message: `X-Amz-Date ${parts.amzDate} is not a date of the credential's scope` };
  }
  if (parts.presigned) {
    if ((parts.expires ?? 0) < 1 || (parts.expires ?? 0) > MAX_PRESIGNED_SECONDS) {
      return { code: 'AuthorizationQueryParametersError', message: 'X-Amz-Expires must be 1 to 604800 seconds' };
    }
    if (nowMs > signedAt + (parts.expires ?? 0) * 1000) return { code: 'AccessDenied', message: 'Request has expired' };
    // A URL dated ahead of the clock would outlive its X-Amz-Expires.
    if (signedAt - nowMs > MAX_CLOCK_SKEW_SECONDS * 1000) {
      return { code: 'AccessDenied', message: 'Request is not valid yet: X-Amz-Date is ahead of the clock' };
    }
  } else if (Math.abs(nowMs - signedAt) > MAX_CLOCK_SKEW_SECONDS * 1000) {
    return {
      code: 'AccessDenied',
      message: 'The difference between the request time and the current time is too large.',
    };
  }
  // As S3: the host is always signed, and so is every x-amz-* header sent (an unsigned x-amz-copy-source would turn a
  // presigned upload into a copy of any object).
  if (!parts.signedHeaders.includes('host')) {
    return { code: 'AccessDenied', message: 'The host header must be signed' };
  }
  const unsigned = Object.keys(request.headers).filter(
    (name) => name.startsWith('x-amz-') && !parts.signedHeaders.includes(name),
  );
  if (unsigned.length > 0) {
    return {
      code: 'AccessDenied',
      message: `There were headers present in the request which were not signed: ${unsigned.sort().join(', ')}`,
    };
  }
  const payloadHash = parts.presigned
    ? (query.find(([name]) => name === 'X-Amz-Content-Sha256')?.[1] ?? 'UNSIGNED-PAYLOAD')
    : headerValue(request.headers, 'x-amz-content-sha256');
  if (payloadHash === undefined) {
    return { code: 'AccessDenied', message: 'Missing required header for this request: x-amz-content-sha256' };
  }
  const signedQuery = canonicalQuery(query.filter(([name]) => !(parts.presigned && name === 'X-Amz-Signature')));
  if (!signatureHolds(request, parts, path, signedQuery, payloadHash, credentials.secretAccessKey)) {
    return {
      code: 'SignatureDoesNotMatch',
      message:
        'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
    };
  }
  return undefined;
}

/** Why DynamoDB refuses a request's signature: its error type and message (HTTP 400, JSON 1.0 protocol). */
export interface DynamoDbSignatureRefusal {
  readonly type:
    | 'MissingAuthenticationTokenException'
    | 'IncompleteSignatureException'
    | 'UnrecognizedClientException'
    | 'InvalidSignatureException';
  readonly message: string;
}

/**
 * Checks a DynamoDB request's SigV4 signature as DynamoDB does, for local mode's dynalite (which checks none): the
 * Authorization header only (DynamoDB has no presigned form), over the path `/` with no query, the signed headers,
 * and the SHA-256 of the body as it arrived, so a request whose body or signed headers were changed on the way, or
 * that was signed with another secret, is refused. Undefined when the signature holds.
 */
export function checkDynamoDbSignature(
  request: Pick<IncomingMessage, 'method' | 'url' | 'headers'>,
  body: Buffer,
  credentials: { readonly accessKeyId: string; readonly secretAccessKey: string },
  nowMs: number,
): DynamoDbSignatureRefusal | undefined {
  if (typeof request.headers.authorization !== 'string')
    return { type: 'MissingAuthenticationTokenException', message: 'Request is missing Authentication Token' };
  const parts = signatureParts(request.headers, []);
  if (parts === undefined || typeof parts === 'string')
    return { type: 'IncompleteSignatureException', message: parts ?? 'Authorization header requires AWS4-HMAC-SHA256' };
  if (!tokenMatches(parts.accessKeyId, credentials.accessKeyId))
    return { type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' };
  if (parts.scope.split('/')[2] !== 'dynamodb')
    return {
      type: 'InvalidSignatureException',
      message: "Credential should be scoped to correct service: 'dynamodb'.",
    };
  const signedAt = amzDateMs(parts.amzDate);
  if (signedAt === undefined || !parts.scope.startsWith(`${parts.amzDate.slice(0, 8)}/`))
    return {
      type: 'InvalidSignatureException',
      message: `X-Amz-Date ${parts.amzDate} is not a date of the credential's scope`,
    };
  if (Math.abs(nowMs - signedAt) > MAX_CLOCK_SKEW_SECONDS * 1000)
    return {
      type: 'InvalidSignatureException',
      message: `Signature expired: ${parts.amzDate} is more than ${MAX_CLOCK_SKEW_SECONDS / 60} minutes from the server's time`,
    };
  if (!parts.signedHeaders.includes('host'))
    return {
      type: 'InvalidSignatureException',
      message: "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
    };
  const path = splitOnce(request.url ?? '/', '?')[0];
  if (!signatureHolds(request, parts, path, '', sha256Hex(body), credentials.secretAccessKey))
    return {
      type: 'InvalidSignatureException',
      message:
        'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
    };
  return undefined;
}

/** Whether the signature is the one the secret gives the canonical request rebuilt from the request as it arrived. */
function signatureHolds(
  request: Pick<IncomingMessage, 'method' | 'headers'>,
  parts: SignatureParts,
  path: string,
  signedQuery: string,
  payloadHash: string,
  secretAccessKey: string,
): boolean {
  const canonical = canonicalRequest({
    method: request.method ?? 'GET',
    path,
    query: signedQuery,
    headers: parts.signedHeaders.map((name) => [name, headerValue(request.headers, name) ?? '']),
    payloadHash,
  });
  return tokenMatches(parts.signature, sigV4Signature(secretAccessKey, parts.amzDate, parts.scope, canonical));
}

/** A SigV4 signature's fields as the request gives them, unchecked: from the Authorization header, else the query. */
interface SignatureFields {
  readonly credential?: string;
  readonly signedHeaders?: string;
  readonly signature?: string;
  readonly amzDate?: string;
  readonly presigned: boolean;
  /** X-Amz-Algorithm of a presigned URL. */
  readonly algorithm?: string;
  readonly expires?: string;
}

/** The SigV4 fields of a request; undefined with no SigV4 signature at all (none, or another scheme's header). */
function signatureFields(
  headers: IncomingMessage['headers'],
  query: ReadonlyArray<readonly [string, string]>,
): SignatureFields | undefined {
  const authorization = headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^AWS4-HMAC-SHA256 (.*)$/.exec(authorization.trim());
    if (!match?.[1]) return undefined;
    const fields = Object.fromEntries(
      match[1].split(',').map((field) => splitOnce(field.trim(), '=') as [string, string | undefined]),
    );
    return {
      credential: fields.Credential,
      signedHeaders: fields.SignedHeaders,
      signature: fields.Signature,
      amzDate: headerValue(headers, 'x-amz-date'),
      presigned: false,
    };
  }
  const param = (name: string) => query.find(([n]) => n === name)?.[1];
  if (param('X-Amz-Algorithm') === undefined) return undefined;
  return {
    credential: param('X-Amz-Credential'),
    signedHeaders: param('X-Amz-SignedHeaders'),
    signature: param('X-Amz-Signature'),
    amzDate: param('X-Amz-Date'),
    presigned: true,
    algorithm: param('X-Amz-Algorithm'),
    expires: param('X-Amz-Expires'),
  };
}

/** The signature's parts; undefined with no SigV4 signature at all; a message when one is there but malformed. */
function signatureParts(
  headers: IncomingMessage['headers'],
  query: ReadonlyArray<readonly [string, string]>,
): SignatureParts | string | undefined {
  const fields = signatureFields(headers, query);
  if (fields === undefined) return undefined;
  if (fields.presigned && fields.algorithm !== ALGORITHM) return `X-Amz-Algorithm must be ${ALGORITHM}`;
  const { credential, signedHeaders, signature, amzDate, presigned } = fields;
  const [accessKeyId, ...scope] = (credential ?? '').split('/');
  if (!accessKeyId || scope.length !== 4 || scope[3] !== 'aws4_request') {
    return 'the credential must be <access key>/<date>/<region>/<service>/aws4_request';
  }
  if (!signedHeaders || !signature || !amzDate) return 'the signature, its signed headers and X-Amz-Date are required';
  const expires = Number(fields.expires);
  return {
    accessKeyId,
    scope: scope.join('/'),
    signedHeaders: signedHeaders.split(';').map((name) => name.toLowerCase()),
    signature,
    amzDate,
    presigned,
    ...(presigned && { expires: Number.isInteger(expires) ? expires : 0 }),
  };
}

/** The query's name/value pairs, decoded (a raw `+` was refused before: SigV4 clients encode a space as %20). */
function queryPairs(rawQuery: string): Array<[string, string]> {
  if (rawQuery === '') return [];
  return rawQuery.split('&').map((pair) => {
    const [name, value = ''] = splitOnce(pair, '=');
    return [decode(name), decode(value)];
  });
}

/** SigV4's canonical query: names and values encoded per RFC 3986, sorted by name, then value. */
function canonicalQuery(pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs
    .map(([name, value]) => [uriEncode(name), uriEncode(value)] as const)
    .sort(([a, x], [b, y]) => compareCodeUnits(a, b) || compareCodeUnits(x, y))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
}

/**
 * A header's value as SigV4 canonicalises it: trimmed, inner runs of spaces collapsed. Only the request's own headers
 * count (a signed header named `constructor` is not the object's). Node joins a repeated header's values with ", "
 * (SigV4 with ","): such a request is refused, never let through.
 */
function headerValue(headers: IncomingMessage['headers'], name: string): string | undefined {
  if (!Object.hasOwn(headers, name)) return undefined;
  const value = headers[name];
  if (typeof value !== 'string' && !Array.isArray(value)) return undefined;
  return canonicalHeaderValue(Array.isArray(value) ? value.join(',') : value);
}

/** RFC 3986 encoding, every byte but the unreserved characters (A–Z a–z 0–9 - _ . ~). */
function uriEncode(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function amzDateMs(amzDate: string): number | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number) as number[];
  return Date.UTC(y as number, (mo as number) - 1, d, h, mi, s);
}

function splitOnce(text: string, separator: string): [string, string | undefined] {
  const at = text.indexOf(separator);
  return at < 0 ? [text, undefined] : [text.slice(0, at), text.slice(at + separator.length)];
}
