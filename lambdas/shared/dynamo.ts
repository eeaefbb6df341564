/**
 * The one DynamoDB client of the control plane: every Lambda, local mode and the tests read and write the jobs and
 * budgets tables through it.
 *
 * It speaks DynamoDB's JSON protocol itself (an HTTPS POST signed with SigV4, sigv4.ts) rather than through
 * `@aws-sdk/client-dynamodb` and `lib-dynamodb`, because every handler needs DynamoDB at cold start and those two
 * packages took 100-120 ms of it to load, more than everything else a handler loads together (`npm run bench --
 * --only control-plane`). The stores use four operations, GetItem, PutItem, UpdateItem and Query, and this client
 * does those, with the SDK's behaviour where it matters:
 * - items are plain values (dynamo-items.ts), marshalled as lib-dynamodb did for the stores;
 * - a failure is an error named for DynamoDB's type (`ConditionalCheckFailedException`, `ValidationException`…);
 * - throttling, 5xx answers, dropped connections and timed-out calls are retried, up to 3 attempts in all, with
 *   full-jitter exponential backoff (the SDK's standard mode); every write the stores make is conditional or
 *   idempotent, so a retried write that had landed fails its condition or repeats itself, as with the SDK;
 * - a response whose `x-amz-crc32` does not match its body is retried, not trusted;
 * - credentials come from the environment (a Lambda's role puts them there), else from the SDK's default chain,
 *   loaded only then, and refreshed before they expire;
 * - in a Lambda, the invocation's X-Ray trace id goes with each call (`X-Amzn-Trace-Id`), as the SDK sends it.
 * `request` sends any other operation as given (local mode creates its tables with it).
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32 } from 'node:zlib';
import { type AttributeValue, marshallItem, unmarshallItem } from './dynamo-items';
import { type AwsCredentials, signRequest } from './sigv4';

export { UnsupportedItemValue } from './dynamo-items';
export type { AwsCredentials } from './sigv4';

/** An item, a key or expression values, as plain values. */
export type Item = Record<string, unknown>;

/** What an expression's `#name` and `:value` tokens stand for. */
interface ExpressionParts {
  readonly ExpressionAttributeNames?: Readonly<Record<string, string>>;
  readonly ExpressionAttributeValues?: Readonly<Item>;
}

/** GetItem's input, with the key as plain values. */
export interface GetInput {
  readonly TableName: string;
  readonly Key: Readonly<Item>;
  readonly ConsistentRead?: boolean;
  readonly ProjectionExpression?: string;
  readonly ExpressionAttributeNames?: Readonly<Record<string, string>>;
}

/** PutItem's input, with the item as plain values. */
export interface PutInput extends ExpressionParts {
  readonly TableName: string;
  readonly Item: Readonly<Item>;
  readonly ConditionExpression?: string;
}

/** UpdateItem's input, with the key and values as plain values. */
export interface UpdateInput extends ExpressionParts {
  readonly TableName: string;
  readonly Key: Readonly<Item>;
  readonly UpdateExpression: string;
  readonly ConditionExpression?: string;
  readonly ReturnValues?: 'NONE' | 'ALL_OLD' | 'UPDATED_OLD' | 'ALL_NEW' | 'UPDATED_NEW';
}

/** Query's input, with values and the start key as plain values. */
export interface QueryInput extends ExpressionParts {
  readonly TableName: string;
  readonly IndexName?: string;
  readonly KeyConditionExpression: string;
  readonly FilterExpression?: string;
  readonly ProjectionExpression?: string;
  readonly ConsistentRead?: boolean;
  readonly ScanIndexForward?: boolean;
  readonly Limit?: number;
  readonly ExclusiveStartKey?: Readonly<Item>;
}

/** A page of a Query. */
export interface QueryOutput {
  readonly Items: Item[];
  readonly Count: number;
  readonly ScannedCount: number;
  readonly LastEvaluatedKey?: Item;
}

/** The document operations the stores use. Tests wrap it to count or reorder calls. */
export interface DocumentClient {
  /** GetItem: the item, or undefined when there is none. */
  get(input: GetInput): Promise<{ Item?: Item }>;
  /** PutItem. */
  put(input: PutInput): Promise<void>;
  /** UpdateItem; `Attributes` as ReturnValues asks. */
  update(input: UpdateInput): Promise<{ Attributes?: Item }>;
  /** One page of a Query. */
  query(input: QueryInput): Promise<QueryOutput>;
  /** Any operation, its input and output as DynamoDB's JSON protocol writes them (attribute values, not plain). */
  request<T = Record<string, unknown>>(operation: string, input: Readonly<Record<string, unknown>>): Promise<T>;
  /** Closes the client's idle connections. */
  destroy(): void;
}

/** Where the client talks to, and how hard it tries. */
export interface DocumentClientOptions {
  /** A local engine's URL, e.g. http://127.0.0.1:4567. @default - https://dynamodb.<region>.amazonaws.com */
  readonly endpoint?: string;
  /** @default - AWS_REGION, else AWS_DEFAULT_REGION; us-east-1 when an endpoint is given without either */
  readonly region?: string;
  /**
   * Credentials, or a function that resolves them (called again before temporary ones expire).
   * @default - against an endpoint, fixed dummy ones (a local engine started without a key answers any); else
   * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the AWS SDK's default provider chain
   */
  readonly credentials?: AwsCredentials | (() => Promise<AwsCredentials>);
  /** Attempts per call, the first included. @default 3 */
  readonly maxAttempts?: number;
  /** Base of the backoff between attempts; throttling waits five times as long. @default 100 ms */
  readonly retryBaseDelayMs?: number;
  /**
   * How long one attempt may take, connecting included, before it is abandoned (and retried); three attempts and
   * their backoff fit in a Lambda's 30 s. @default 5,000 ms
   */
  readonly requestTimeoutMs?: number;
}

/** An error DynamoDB answered with, or the last failure of a call that ran out of attempts. */
export class DynamoDbError extends Error {
  /**
   * DynamoDB's error type (`ConditionalCheckFailedException`); for an answer without one, `DynamoDbServerError` (a
   * 5xx, retried) or `DynamoDbHttpError` (any other status).
   */
  override readonly name: string;
  /** The HTTP status, when DynamoDB answered. */
  readonly statusCode?: number;
  /** Whether another attempt could succeed (throttling, 5xx, a dropped connection). */
  readonly retryable: boolean;
  /** DynamoDB's request id, for AWS support. */
  readonly requestId?: string;
  /** How many attempts the call made. */
  attempts = 1;

  constructor(
    name: string,
    message: string,
    details: { statusCode?: number; retryable: boolean; requestId?: string; cause?: unknown },
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = name;
    this.statusCode = details.statusCode;
    this.retryable = details.retryable;
    this.requestId = details.requestId;
  }
}

/** DynamoDB's throttling errors, retried with the longer backoff. */
const THROTTLING_ERRORS = new Set([
  'ThrottlingException',
  'ProvisionedThroughputExceededException',
  'RequestLimitExceeded',
]);
/** Network failures that another attempt may get past. */
/**
 * The client's own error names for failures that may pass (DynamoDB out of reach, a corrupt or untyped 5xx answer),
 * after its own attempts: what a caller that retries for longer retries on.
 */
export const DYNAMODB_TRANSIENT_ERRORS = [
  'DynamoDbNetworkError',
  'DynamoDbCorruptResponse',
  'DynamoDbServerError',
] as const;
const TRANSIENT_NETWORK_CODES = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNREFUSED', 'EAI_AGAIN', 'ENOTFOUND']);
/** Refresh temporary credentials this long before they expire. */
const CREDENTIAL_REFRESH_MS = 5 * 60_000;
const MAX_BACKOFF_MS = 20_000;
const DUMMY_CREDENTIALS: AwsCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

/** A document client for DynamoDB at AWS, or at a local engine when `endpoint` is given. */
export function createDocumentClient(options: DocumentClientOptions = {}): DocumentClient {
  const local = options.endpoint !== undefined;
  const region =
    options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? (local ? 'us-east-1' : undefined);
  if (region === undefined || region === '')
    throw new Error('DynamoDB client: no AWS region; set AWS_REGION (a Lambda has it) or pass a region');
  const url = new URL(options.endpoint ?? `https://dynamodb.${region}.${dnsSuffix(region)}`);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new Error(`DynamoDB client: endpoint ${options.endpoint} must be http:// or https://`);
  const maxAttempts = options.maxAttempts ?? 3;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1)
    throw new Error(`DynamoDB client: maxAttempts must be a whole number ≥ 1, got ${maxAttempts}`);
  const baseDelayMs = options.retryBaseDelayMs ?? 100;
  const timeoutMs = options.requestTimeoutMs ?? 5_000;
  const credentials = credentialSource(options.credentials ?? (local ? DUMMY_CREDENTIALS : undefined));
  const secure = url.protocol === 'https:';
  // A URL keeps an IPv6 literal's brackets ([::1]); a request wants the address alone.
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  const send = secure ? httpsRequest : httpRequest;

  /** One attempt: sign, send, read, check the checksum; resolves the parsed body or rejects with a DynamoDbError. */
  async function attempt(operation: string, body: Buffer): Promise<unknown> {
    const headers = signRequest(
      {
        method: 'POST',
        host: url.host,
        path: '/',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': `DynamoDB_20120810.${operation}`,
          'content-length': String(body.length),
        },
        body,
      },
      { region: region as string, service: 'dynamodb', credentials: await credentials(), date: new Date() },
    );
    // In a Lambda with active tracing, the invocation's trace id goes along, unsigned, as the SDK sends it, so the
    // trace shows the DynamoDB calls. It changes with every invocation: read it at each call.
    const traceId = process.env.AWS_LAMBDA_FUNCTION_NAME ? process.env._X_AMZN_TRACE_ID : undefined;
    if (traceId) headers['x-amzn-trace-id'] = traceId;
    const response = await new Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }>(
      (resolve, reject) => {
        // One deadline for the whole attempt, from the DNS lookup to the last byte: a socket's own timeout starts
        // only once it has connected and restarts with every byte.
        const timer = setTimeout(() => {
          const error = Object.assign(new Error(`no complete answer in ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
          fail(error);
          req.destroy(error);
        }, timeoutMs);
        const fail = (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        };
        const req = send(
          { protocol: url.protocol, hostname, port: url.port, path: '/', method: 'POST', headers, agent },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (chunk: Buffer) => chunks.push(chunk));
            res.on('end', () => {
              clearTimeout(timer);
              resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
            });
            res.on('error', fail);
          },
        );
        req.on('error', fail);
        req.end(body);
      },
    ).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException).code;
      const retryable = code === undefined || TRANSIENT_NETWORK_CODES.has(code);
      // A failure no retry mends (a certificate, a protocol error) is named apart, so callers that retry by name
      // (the lifecycle's TRANSIENT_RETRY) do not wait on it.
      throw new DynamoDbError(
        retryable ? 'DynamoDbNetworkError' : 'DynamoDbConnectionError',
        `${operation} to ${url.host} failed: ${(error as Error).message}`,
        { retryable, cause: error },
      );
    });
    const requestId = headerText(response.headers['x-amzn-requestid']);
    const expectedCrc = headerText(response.headers['x-amz-crc32']);
    if (expectedCrc !== undefined && Number(expectedCrc) !== crc32(response.body))
      throw new DynamoDbError(
        'DynamoDbCorruptResponse',
        `${operation}: the answer's body does not match its x-amz-crc32`,
        {
          statusCode: response.status,
          retryable: true,
          requestId,
        },
      );
    const parsed = parseJson(response.body);
    if (response.status >= 200 && response.status < 300 && parsed !== undefined) return parsed;
    throw errorFromAnswer(
      operation,
      response.status,
      parsed,
      headerText(response.headers['x-amzn-errortype']),
      requestId,
    );
  }

  async function request<T>(operation: string, input: Readonly<Record<string, unknown>>): Promise<T> {
    const body = Buffer.from(JSON.stringify(input), 'utf8');
    for (let attemptNumber = 1; ; attemptNumber++) {
      try {
        return (await attempt(operation, body)) as T;
      } catch (error) {
        if (!(error instanceof DynamoDbError)) throw error;
        error.attempts = attemptNumber;
        if (!error.retryable || attemptNumber >= maxAttempts) throw error;
        const base = THROTTLING_ERRORS.has(error.name) ? baseDelayMs * 5 : baseDelayMs;
        await sleep(Math.random() * Math.min(MAX_BACKOFF_MS, base * 2 ** (attemptNumber - 1)));
      }
    }
  }

  return {
    request,
    async get(input) {
      const out = await request<{ Item?: Record<string, AttributeValue> }>('GetItem', {
        ...input,
        Key: marshallItem(input.Key),
      });
      return out.Item === undefined ? {} : { Item: unmarshallItem(out.Item) };
    },
    async put(input) {
      await request('PutItem', { ...input, Item: marshallItem(input.Item), ...marshalledValues(input) });
    },
    async update(input) {
      const out = await request<{ Attributes?: Record<string, AttributeValue> }>('UpdateItem', {
        ...input,
        Key: marshallItem(input.Key),
        ...marshalledValues(input),
      });
      return out.Attributes === undefined ? {} : { Attributes: unmarshallItem(out.Attributes) };
    },
    async query(input) {
      const out = await request<{
        Items?: Record<string, AttributeValue>[];
        Count?: number;
        ScannedCount?: number;
        LastEvaluatedKey?: Record<string, AttributeValue>;
      }>('Query', {
        ...input,
        ...(input.ExclusiveStartKey === undefined ? {} : { ExclusiveStartKey: marshallItem(input.ExclusiveStartKey) }),
        ...marshalledValues(input),
      });
      return {
        Items: (out.Items ?? []).map(unmarshallItem),
        Count: out.Count ?? 0,
        ScannedCount: out.ScannedCount ?? 0,
        ...(out.LastEvaluatedKey === undefined ? {} : { LastEvaluatedKey: unmarshallItem(out.LastEvaluatedKey) }),
      };
    },
    destroy() {
      agent.destroy();
    },
  };
}

/** Whether an error is DynamoDB's answer that a write's condition did not hold. */
export function isConditionalCheckFailure(error: unknown): boolean {
  return error instanceof Error && error.name === 'ConditionalCheckFailedException';
}

function marshalledValues(input: ExpressionParts): { ExpressionAttributeValues?: Record<string, AttributeValue> } {
  return input.ExpressionAttributeValues === undefined
    ? {}
    : { ExpressionAttributeValues: marshallItem(input.ExpressionAttributeValues) };
}

/** The DNS suffix of a region's partition: China's regions have their own. */
function dnsSuffix(region: string): string {
  return region.startsWith('cn-') ? 'amazonaws.com.cn' : 'amazonaws.com';
}

/** A credentials getter that caches, and refreshes temporary credentials before they expire. */
function credentialSource(
  given: AwsCredentials | (() => Promise<AwsCredentials>) | undefined,
): () => Promise<AwsCredentials> {
  if (given !== undefined && typeof given !== 'function') return async () => given;
  const resolve = given ?? environmentOrChainCredentials();
  let current: AwsCredentials | undefined;
  // Calls that find the credentials due for refresh wait on one refresh together, rather than each starting its own.
  let refreshing: Promise<AwsCredentials> | undefined;
  return async () => {
    if (
      current !== undefined &&
      (current.expiration === undefined || current.expiration.getTime() - Date.now() > CREDENTIAL_REFRESH_MS)
    )
      return current;
    refreshing ??= resolve()
      .then(
        (fresh) => {
          current = fresh;
          return fresh;
        },
        (error: unknown) => {
          // A refresh that fails while the old credentials still work is tried again at the next call.
          if (current?.expiration !== undefined && current.expiration.getTime() > Date.now()) return current;
          throw error;
        },
      )
      .finally(() => {
        refreshing = undefined;
      });
    return refreshing;
  };
}

/**
 * The client's default credentials: the environment's (a Lambda's role puts them there), else the AWS SDK's default
 * chain (profiles, SSO, container and instance roles), loaded only when the environment has none.
 */
export function environmentOrChainCredentials(): () => Promise<AwsCredentials> {
  let chain: (() => Promise<AwsCredentials>) | undefined;
  return async () => {
    const {
      AWS_ACCESS_KEY_ID: accessKeyId,
      AWS_SECRET_ACCESS_KEY: secretAccessKey,
      AWS_SESSION_TOKEN: sessionToken,
    } = process.env;
    if (accessKeyId && secretAccessKey)
      return { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) };
    chain ??= (await import('@aws-sdk/credential-provider-node')).defaultProvider();
    return chain();
  };
}

function errorFromAnswer(
  operation: string,
  status: number,
  body: unknown,
  errorTypeHeader: string | undefined,
  requestId: string | undefined,
): DynamoDbError {
  const fields = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  const rawType = typeof fields.__type === 'string' ? fields.__type : errorTypeHeader;
  const type = rawType?.split('#').pop()?.split(':')[0];
  const message =
    typeof fields.message === 'string'
      ? fields.message
      : typeof fields.Message === 'string'
        ? fields.Message
        : undefined;
  const name = type !== undefined && type !== '' ? type : status >= 500 ? 'DynamoDbServerError' : 'DynamoDbHttpError';
  return new DynamoDbError(
    name,
    `${operation}: ${name}${message === undefined ? ` (HTTP ${status})` : `: ${message}`}`,
    {
      statusCode: status,
      retryable: status >= 500 || THROTTLING_ERRORS.has(name),
      requestId,
    },
  );
}

function parseJson(body: Buffer): unknown {
  if (body.length === 0) return undefined;
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
