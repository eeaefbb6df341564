// The stores' DynamoDB client (lambdas/shared/dynamo.ts): against dynalite, where the AWS SDK reads what it wrote and
// writes what it reads; and against a loopback server answering as DynamoDB does when it fails (throttling, 5xx, a
// corrupt or missing answer), to show what is retried and what is not.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { crc32 } from 'node:zlib';
import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  createDocumentClient,
  type DocumentClient,
  DYNAMODB_TRANSIENT_ERRORS,
  DynamoDbError,
  environmentOrChainCredentials,
  isConditionalCheckFailure,
} from '../../lambdas/shared/dynamo';
import { startTestDynamo, type TestDynamo } from '../support/dynamo';

describe('against dynalite', () => {
  let dynamo: TestDynamo;
  let table: string;
  beforeAll(async () => {
    dynamo = await startTestDynamo();
    table = dynamo.tables.jobs;
  });
  afterAll(async () => dynamo?.stop());

  const item = {
    pk: 'JOB#round-trip',
    sk: 'META',
    state: 'RUNNING',
    costMicros: 42_000_000,
    usdPerHour: 0.9731,
    labels: { project: 'gpt' },
    attempts: [{ n: 1, spot: true }],
    stoppedAt: null,
  };

  it('writes an item that the AWS SDK reads back as written', async () => {
    await dynamo.doc.put({ TableName: table, Item: item });

    const read = await dynamo.client.send(
      new GetItemCommand({ TableName: table, Key: marshall({ pk: item.pk, sk: item.sk }), ConsistentRead: true }),
    );
    expect(unmarshall(read.Item ?? {})).toEqual(item);
  });

  it('reads an item that the AWS SDK wrote', async () => {
    const written = { ...item, pk: 'JOB#sdk-wrote', labels: { team: 'nlp', n: 3 } };
    await dynamo.client.send(new PutItemCommand({ TableName: table, Item: marshall(written) }));

    const { Item } = await dynamo.doc.get({
      TableName: table,
      Key: { pk: written.pk, sk: 'META' },
      ConsistentRead: true,
    });

    expect(Item).toEqual(written);
  });

  it('answers a missing item with no Item', async () => {
    expect(await dynamo.doc.get({ TableName: table, Key: { pk: 'JOB#none', sk: 'META' } })).toEqual({});
  });

  it('updates under a condition and returns the new attributes', async () => {
    await dynamo.doc.put({ TableName: table, Item: { pk: 'JOB#u', sk: 'META', state: 'WAITING', n: 1 } });

    const { Attributes } = await dynamo.doc.update({
      TableName: table,
      Key: { pk: 'JOB#u', sk: 'META' },
      UpdateExpression: 'SET #s = :to, n = n + :one',
      ConditionExpression: '#s = :from',
      ExpressionAttributeNames: { '#s': 'state' },
      ExpressionAttributeValues: { ':from': 'WAITING', ':to': 'RUNNING', ':one': 1 },
      ReturnValues: 'ALL_NEW',
    });

    expect(Attributes).toEqual({ pk: 'JOB#u', sk: 'META', state: 'RUNNING', n: 2 });
  });

  it('fails a write whose condition does not hold with DynamoDB’s error, once, and changes nothing', async () => {
    await dynamo.doc.put({ TableName: table, Item: { pk: 'JOB#c', sk: 'META', state: 'SUCCEEDED' } });

    const error = await dynamo.doc
      .put({
        TableName: table,
        Item: { pk: 'JOB#c', sk: 'META', state: 'RUNNING' },
        ConditionExpression: 'attribute_not_exists(pk)',
      })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(DynamoDbError);
    expect(error).toMatchObject({
      name: 'ConditionalCheckFailedException',
      statusCode: 400,
      retryable: false,
      attempts: 1,
    });
    expect(isConditionalCheckFailure(error)).toBe(true);
    expect((await dynamo.doc.get({ TableName: table, Key: { pk: 'JOB#c', sk: 'META' } })).Item?.state).toBe(
      'SUCCEEDED',
    );
  });

  it('names a malformed request’s error with DynamoDB’s type and message', async () => {
    await expect(
      dynamo.doc.update({
        TableName: table,
        Key: { pk: 'JOB#u', sk: 'META' },
        UpdateExpression: 'SET #s = :missing',
        ExpressionAttributeNames: { '#s': 'state' },
      }),
    ).rejects.toMatchObject({
      name: 'ValidationException',
      message: expect.stringContaining('UpdateItem: ValidationException: '),
      retryable: false,
    });
  });

  it('pages a query with Limit and the last key it returned', async () => {
    for (let i = 0; i < 7; i++) await dynamo.doc.put({ TableName: table, Item: { pk: 'PAGED', sk: `S#${i}`, i } });

    const seen: number[] = [];
    let start: Record<string, unknown> | undefined;
    let pages = 0;
    do {
      const page = await dynamo.doc.query({
        TableName: table,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': 'PAGED' },
        ScanIndexForward: false,
        Limit: 3,
        ExclusiveStartKey: start,
      });
      seen.push(...page.Items.map((it) => it.i as number));
      expect(page.Count).toBe(page.Items.length);
      start = page.LastEvaluatedKey;
      pages += 1;
    } while (start);

    expect(seen).toEqual([6, 5, 4, 3, 2, 1, 0]);
    expect(pages).toBe(3);
  });
});

/** A loopback server that answers each request with the next scripted answer, and records what it was sent. */
interface ScriptedAnswer {
  status?: number;
  body?: string;
  /** Overrides the x-amz-crc32 header (the right one is sent by default). */
  crc?: string;
  /** Never answer (the client's timeout must end the attempt). */
  hang?: boolean;
  /** Move the (faked) clock on by this much before answering. */
  advanceClockMs?: number;
  /** Answer, but a byte at a time, every 20 ms, never finishing in time (the socket is never idle for long). */
  drip?: boolean;
}

describe('against a DynamoDB that fails', () => {
  let server: Server;
  let endpoint: string;
  let script: ScriptedAnswer[] = [];
  let received: Array<{ headers: IncomingMessage['headers']; body: string }> = [];
  const clients: DocumentClient[] = [];

  /** Records the request and answers it with the next scripted answer. */
  const answerScripted = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
      const answer = script.shift() ?? { body: '{}' };
      if (answer.advanceClockMs !== undefined) vi.setSystemTime(Date.now() + answer.advanceClockMs);
      if (answer.hang) return;
      const body = Buffer.from(answer.body ?? '{}');
      res.writeHead(answer.status ?? 200, {
        'content-type': 'application/x-amz-json-1.0',
        'x-amzn-requestid': `req-${received.length}`,
        'x-amz-crc32': answer.crc ?? String(crc32(body)),
        ...(answer.drip ? { 'content-length': '100000' } : {}),
      });
      if (!answer.drip) {
        res.end(body);
        return;
      }
      const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write(' ')), 20);
      res.on('close', () => clearInterval(drip));
    });
  };

  beforeAll(async () => {
    server = createServer(answerScripted);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(() => {
    script = [];
    received = [];
    for (const client of clients.splice(0)) client.destroy();
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  function client(options: Parameters<typeof createDocumentClient>[0] = {}): DocumentClient {
    const made = createDocumentClient({ endpoint, retryBaseDelayMs: 1, ...options });
    clients.push(made);
    return made;
  }
  const error = (type: string, message: string, status = 400): ScriptedAnswer => ({
    status,
    body: JSON.stringify({ __type: `com.amazonaws.dynamodb.v20120810#${type}`, message }),
  });
  const getItem = (c: DocumentClient) => c.get({ TableName: 't', Key: { pk: 'a' } });

  it('retries throttling and a 500, then returns the answer', async () => {
    script = [
      error('ProvisionedThroughputExceededException', 'slow down'),
      error('InternalServerError', 'oops', 500),
      { body: JSON.stringify({ Item: { pk: { S: 'a' }, n: { N: '5' } } }) },
    ];

    expect(await getItem(client())).toEqual({ Item: { pk: 'a', n: 5 } });
    expect(received).toHaveLength(3);
  });

  it('sends the same request on each attempt, signed anew at the time of each', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-11-29T10:00:00Z') });
    // The first answer (throttled) arrives a minute later, so the retry is signed at 10:01.
    script = [{ ...error('ThrottlingException', 'slow down'), advanceClockMs: 60_000 }, { body: '{}' }];
    try {
      await client({ credentials: { accessKeyId: 'AKID', secretAccessKey: 's', sessionToken: 'tok' } }).put({
        TableName: 't',
        Item: { pk: 'a', n: 1 },
      });
    } finally {
      vi.useRealTimers();
    }

    expect(received.map((r) => r.body)).toEqual([
      '{"TableName":"t","Item":{"pk":{"S":"a"},"n":{"N":"1"}}}',
      '{"TableName":"t","Item":{"pk":{"S":"a"},"n":{"N":"1"}}}',
    ]);
    expect(received.map((r) => r.headers['x-amz-date'])).toEqual(['20261129T100000Z', '20261129T100100Z']);
    const signatures = received.map((r) => String(r.headers.authorization).split('Signature=')[1]);
    expect(signatures[0]).not.toBe(signatures[1]);
    for (const { headers } of received) {
      expect(headers['x-amz-target']).toBe('DynamoDB_20120810.PutItem');
      expect(headers['content-type']).toBe('application/x-amz-json-1.0');
      expect(headers['x-amz-security-token']).toBe('tok');
      expect(headers.authorization).toMatch(
        /^AWS4-HMAC-SHA256 Credential=AKID\/20261129\/us-east-1\/dynamodb\/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-date;x-amz-security-token;x-amz-target, Signature=[0-9a-f]{64}$/,
      );
    }
  });

  it('gives up after its attempts with the last error, saying how many it made', async () => {
    script = [error('ThrottlingException', 'a'), error('ThrottlingException', 'b'), error('ThrottlingException', 'c')];

    await expect(getItem(client({ maxAttempts: 2 }))).rejects.toMatchObject({
      name: 'ThrottlingException',
      message: 'GetItem: ThrottlingException: b',
      retryable: true,
      attempts: 2,
      requestId: 'req-2',
    });
    expect(received).toHaveLength(2);
  });

  it('does not retry a request DynamoDB refused as malformed', async () => {
    script = [error('ValidationException', 'One or more parameter values were invalid'), { body: '{}' }];

    await expect(getItem(client())).rejects.toMatchObject({ name: 'ValidationException', attempts: 1 });
    expect(received).toHaveLength(1);
  });

  it('does not trust an answer whose checksum does not match its body, and asks again', async () => {
    script = [
      { body: JSON.stringify({ Item: { pk: { S: 'tampered' } } }), crc: '12345' },
      { body: JSON.stringify({ Item: { pk: { S: 'a' } } }) },
    ];

    expect(await getItem(client())).toEqual({ Item: { pk: 'a' } });
    expect(received).toHaveLength(2);
  });

  it('fails with DynamoDbCorruptResponse when every answer is corrupt', async () => {
    script = [{ crc: '1' }, { crc: '2' }, { crc: '3' }];

    await expect(getItem(client())).rejects.toMatchObject({ name: 'DynamoDbCorruptResponse', attempts: 3 });
  });

  it('abandons an attempt that gets no answer in time and tries again', async () => {
    script = [{ hang: true }, { body: JSON.stringify({ Item: { pk: { S: 'a' } } }) }];

    expect(await getItem(client({ requestTimeoutMs: 100 }))).toEqual({ Item: { pk: 'a' } });
    expect(received).toHaveLength(2);
  });

  it('abandons an attempt whose answer trickles in past the deadline, though bytes keep coming', async () => {
    script = [{ drip: true }, { body: JSON.stringify({ Item: { pk: { S: 'a' } } }) }];

    expect(await getItem(client({ requestTimeoutMs: 150 }))).toEqual({ Item: { pk: 'a' } });
    expect(received).toHaveLength(2);
  });

  it('talks to an IPv6 endpoint', async () => {
    const v6 = createServer(answerScripted);
    await new Promise<void>((resolve) => v6.listen(0, '::1', resolve));
    script = [{ body: JSON.stringify({ Item: { pk: { S: 'a' } } }) }];
    try {
      const c = client({ endpoint: `http://[::1]:${(v6.address() as AddressInfo).port}` });
      expect(await getItem(c)).toEqual({ Item: { pk: 'a' } });
      expect(received[0]?.headers.host).toBe(`[::1]:${(v6.address() as AddressInfo).port}`);
    } finally {
      v6.closeAllConnections();
      await new Promise((resolve) => v6.close(resolve));
    }
  });

  it('retries a 5xx answer without a type, and names it DynamoDbServerError when it lasts', async () => {
    script = [
      { status: 503, body: 'Service Unavailable' },
      { status: 502, body: '' },
      { status: 503, body: 'Service Unavailable' },
    ];

    await expect(getItem(client())).rejects.toMatchObject({
      name: 'DynamoDbServerError',
      message: 'GetItem: DynamoDbServerError (HTTP 503)',
      statusCode: 503,
      retryable: true,
      attempts: 3,
    });
  });

  it('names an error answer without a type by its HTTP status', async () => {
    script = [{ status: 403, body: 'Forbidden' }];

    await expect(getItem(client())).rejects.toMatchObject({
      name: 'DynamoDbHttpError',
      message: 'GetItem: DynamoDbHttpError (HTTP 403)',
      statusCode: 403,
      retryable: false,
    });
  });

  it('names a connection no retry mends DynamoDbConnectionError, tries it once, and leaves it out of the lifecycle’s retries', async () => {
    // TLS to a server that answers plain HTTP: the handshake fails with a protocol error.
    const tls = client({ endpoint: endpoint.replace('http://', 'https://') });
    const error = await getItem(tls).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'DynamoDbConnectionError', retryable: false, attempts: 1 });
    expect(DYNAMODB_TRANSIENT_ERRORS).not.toContain((error as Error).name);
    expect(DYNAMODB_TRANSIENT_ERRORS).toEqual([
      'DynamoDbNetworkError',
      'DynamoDbCorruptResponse',
      'DynamoDbServerError',
    ]);
  });

  it('sends a Lambda invocation’s trace id with each call, outside the signature', async () => {
    vi.stubEnv('AWS_LAMBDA_FUNCTION_NAME', 'trainyard-api');
    try {
      const c = client();
      vi.stubEnv('_X_AMZN_TRACE_ID', 'Root=1-6749b0a0-1;Parent=a;Sampled=1');
      await getItem(c);
      vi.stubEnv('_X_AMZN_TRACE_ID', 'Root=1-6749b0a0-2;Parent=b;Sampled=1');
      await getItem(c);
    } finally {
      vi.unstubAllEnvs();
    }
    await getItem(client());

    expect(received.map((r) => r.headers['x-amzn-trace-id'])).toEqual([
      'Root=1-6749b0a0-1;Parent=a;Sampled=1',
      'Root=1-6749b0a0-2;Parent=b;Sampled=1',
      undefined,
    ]);
    expect(String(received[0]?.headers.authorization)).not.toContain('x-amzn-trace-id');
  });

  it('asks a credentials function again only when what it gave is about to expire', async () => {
    let calls = 0;
    const expiring = async () => {
      calls += 1;
      // The first set expires in 2 minutes (inside the 5-minute refresh window), the next in an hour.
      const expiration = new Date(Date.now() + (calls === 1 ? 2 : 60) * 60_000);
      return { accessKeyId: `KEY${calls}`, secretAccessKey: 's', expiration };
    };
    const c = client({ credentials: expiring });

    for (let i = 0; i < 3; i++) await getItem(c);

    expect(calls).toBe(2);
    expect(received.map((r) => String(r.headers.authorization).split('/')[0])).toEqual([
      'AWS4-HMAC-SHA256 Credential=KEY1',
      'AWS4-HMAC-SHA256 Credential=KEY2',
      'AWS4-HMAC-SHA256 Credential=KEY2',
    ]);
  });

  it('refreshes credentials once for all the calls that find them due', async () => {
    let calls = 0;
    const provider = async () => {
      calls += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      const minutes = calls === 1 ? 2 : 60;
      return { accessKeyId: `KEY${calls}`, secretAccessKey: 's', expiration: new Date(Date.now() + minutes * 60_000) };
    };
    const c = client({ credentials: provider });
    await getItem(c);

    await Promise.all(Array.from({ length: 20 }, () => getItem(c)));

    expect(calls).toBe(2);
    expect(new Set(received.slice(1).map((r) => String(r.headers.authorization).split('/')[0]))).toEqual(
      new Set(['AWS4-HMAC-SHA256 Credential=KEY2']),
    );
  });

  it('keeps credentials that still work when their refresh fails, and fails once they have expired', async () => {
    let calls = 0;
    let expiresInMs = 2 * 60_000;
    const provider = async () => {
      calls += 1;
      if (calls > 1) throw new Error('STS is unreachable');
      return { accessKeyId: 'KEY1', secretAccessKey: 's', expiration: new Date(Date.now() + expiresInMs) };
    };
    const c = client({ credentials: provider });
    await getItem(c);

    await getItem(c);
    expect(calls).toBe(2);
    expect(received).toHaveLength(2);

    expiresInMs = -1;
    const expired = client({ credentials: provider });
    calls = 0;
    await getItem(expired);
    await expect(getItem(expired)).rejects.toThrow('STS is unreachable');
  });
});

describe('createDocumentClient', () => {
  it.each([
    {
      what: 'no region anywhere',
      options: {},
      env: { AWS_REGION: undefined, AWS_DEFAULT_REGION: undefined },
      message: 'DynamoDB client: no AWS region; set AWS_REGION (a Lambda has it) or pass a region',
    },
    {
      what: 'an endpoint that is not http',
      options: { endpoint: 'ftp://127.0.0.1:1' },
      env: {},
      message: 'DynamoDB client: endpoint ftp://127.0.0.1:1 must be http:// or https://',
    },
    {
      what: 'no attempts',
      options: { endpoint: 'http://127.0.0.1:1', maxAttempts: 0 },
      env: {},
      message: 'DynamoDB client: maxAttempts must be a whole number ≥ 1, got 0',
    },
  ])('refuses $what', ({ options, env, message }) => {
    for (const [name, value] of Object.entries(env)) vi.stubEnv(name, value);
    try {
      expect(() => createDocumentClient(options)).toThrow(message);
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('takes a Lambda’s credentials from its environment', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', 'ASIAROLE');
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', 'secret');
    vi.stubEnv('AWS_SESSION_TOKEN', 'session');
    try {
      expect(await environmentOrChainCredentials()()).toEqual({
        accessKeyId: 'ASIAROLE',
        secretAccessKey: 'secret',
        sessionToken: 'session',
      });
    } finally {
      vi.unstubAllEnvs();
    }
  });
});
