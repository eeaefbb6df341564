// The local engines started with a key answer only requests signed with it: dynalite as DynamoDB answers an unknown
// key, s3rver as S3 does, for signed requests and presigned URLs alike, and nothing is changed by a refused request.

import { execFile } from 'node:child_process';
import { createCipheriv } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CreateTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  paginateListObjectsV2,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDocumentClient } from '../../lambdas/shared/dynamo';
import { signRequest } from '../../lambdas/shared/sigv4';
import { createTableRequest, JOBS_TABLE } from '../../lambdas/shared/table-design';
import { localS3Client } from '../../lib/local/control-plane';
import {
  type EngineCredentials,
  OPEN_ENGINE_CREDENTIALS,
  type RunningEngine,
  randomEngineCredentials,
  startDynalite,
  startS3rver,
} from '../../lib/local/engines';

const execFileAsync = promisify(execFile);
const BUCKET = 'guarded';
const key = randomEngineCredentials();
const other = randomEngineCredentials();
let dynamo: RunningEngine;
let s3: RunningEngine;
let s3Dir: string;

beforeAll(async () => {
  s3Dir = mkdtempSync(join(tmpdir(), 'trainyard-engines-'));
  dynamo = await startDynalite({ credentials: key });
  s3 = await startS3rver({ directory: s3Dir, buckets: [BUCKET], credentials: key });
});

afterAll(async () => {
  await dynamo.stop();
  await s3.stop();
  rmSync(s3Dir, { recursive: true, force: true });
});

async function tables(credentials: EngineCredentials): Promise<string[]> {
  const client = dynamoClient(credentials);
  try {
    return (await client.send(new ListTablesCommand({}))).TableNames ?? [];
  } finally {
    client.destroy();
  }
}

function dynamoClient(credentials: EngineCredentials) {
  return new DynamoDBClient({ endpoint: dynamo.endpoint, region: 'us-east-1', credentials: { ...credentials } });
}

describe('randomEngineCredentials', () => {
  it('makes a different key at each call, in the shape of an AWS access key', () => {
    expect(key.accessKeyId).toMatch(/^TYLOCAL[0-9A-F]{20}$/);
    expect(key.secretAccessKey).toMatch(/^[A-Za-z0-9_-]{40}$/);
    expect(other.accessKeyId).not.toBe(key.accessKeyId);
  });
});

describe('dynalite with a key', () => {
  it('answers requests signed with it', async () => {
    const client = dynamoClient(key);
    await client.send(new CreateTableCommand(createTableRequest('jobs', JOBS_TABLE)));

    expect((await client.send(new ListTablesCommand({}))).TableNames).toEqual(['jobs']);
    client.destroy();
  });

  it.each([
    { what: 'another key', credentials: other },
    { what: 'the key engines without one take', credentials: OPEN_ENGINE_CREDENTIALS },
  ])('refuses $what as DynamoDB refuses an unknown key, and writes nothing', async ({ credentials }) => {
    const doc = createDocumentClient({ endpoint: dynamo.endpoint, credentials });

    await expect(
      doc.put({ TableName: 'jobs', Item: { pk: 'JOB#x', sk: 'META', state: 'RUNNING' } }),
    ).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
      message: 'PutItem: UnrecognizedClientException: The security token included in the request is invalid.',
      statusCode: 400,
      retryable: false,
    });
    doc.destroy();
    const owner = createDocumentClient({ endpoint: dynamo.endpoint, credentials: key });
    expect((await owner.request<{ TableNames: string[] }>('ListTables', {})).TableNames).toEqual(['jobs']);
    const scan = await owner.request<{ Items: unknown[] }>('Scan', { TableName: 'jobs', ConsistentRead: true });
    expect(scan.Items).toEqual([]);
    owner.destroy();
  });

  it('refuses a request with no signature as DynamoDB does', async () => {
    const response = await fetch(dynamo.endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-amz-json-1.0', 'X-Amz-Target': 'DynamoDB_20120810.ListTables' },
      body: '{}',
    });

    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      __type: 'com.amazonaws.dynamodb.v20120810#MissingAuthenticationTokenException',
      message: 'Request is missing Authentication Token',
    });
  });

  /** A PutItem signed with `signedWith`, then sent with `sentBody` (the signed body unless given). */
  async function signedPut(signedWith: EngineCredentials, sentBody?: string, date = new Date()) {
    const signedBody = JSON.stringify({
      TableName: 'jobs',
      Item: { pk: { S: 'JOB#signed' }, sk: { S: 'META' }, state: { S: 'RUNNING' } },
    });
    const url = new URL(dynamo.endpoint);
    const headers = signRequest(
      {
        method: 'POST',
        host: url.host,
        path: '/',
        headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.PutItem' },
        body: Buffer.from(signedBody),
      },
      { region: 'us-east-1', service: 'dynamodb', credentials: signedWith, date },
    );
    delete headers.host;
    const response = await fetch(dynamo.endpoint, { method: 'POST', headers, body: sentBody ?? signedBody });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  async function signedItem(): Promise<unknown> {
    const owner = createDocumentClient({ endpoint: dynamo.endpoint, credentials: key });
    try {
      return (await owner.get({ TableName: 'jobs', Key: { pk: 'JOB#signed', sk: 'META' }, ConsistentRead: true })).Item;
    } finally {
      owner.destroy();
    }
  }

  it.each([
    {
      what: 'a body changed after it was signed',
      send: () =>
        signedPut(
          key,
          '{"TableName":"jobs","Item":{"pk":{"S":"JOB#signed"},"sk":{"S":"META"},"state":{"S":"CANCELLED"}}}',
        ),
      message: 'The request signature we calculated does not match the signature you provided.',
    },
    {
      what: 'the right key with another secret',
      send: () => signedPut({ ...key, secretAccessKey: other.secretAccessKey }),
      message: 'The request signature we calculated does not match the signature you provided.',
    },
    {
      what: 'a signature 20 minutes old',
      send: () => signedPut(key, undefined, new Date(Date.now() - 20 * 60_000)),
      message: 'Signature expired: ',
    },
  ])('refuses $what as DynamoDB does, and writes nothing', async ({ send, message }) => {
    const answer = await send();

    expect(answer.status).toBe(400);
    expect(answer.body.__type).toBe('com.amazonaws.dynamodb.v20120810#InvalidSignatureException');
    expect(String(answer.body.message)).toContain(message);
    expect(await signedItem()).toBeUndefined();
  });

  it('answers the same request, signed and sent as it was', async () => {
    const answer = await signedPut(key);

    expect(answer).toEqual({ status: 200, body: {} });
    expect(await signedItem()).toEqual({ pk: 'JOB#signed', sk: 'META', state: 'RUNNING' });
  });
});

describe('s3rver with a key', () => {
  it('answers requests and presigned URLs signed with it', async () => {
    const client = localS3Client(s3.endpoint, key);
    await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'a.txt', Body: 'alpha' }));
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: BUCKET, Key: 'a.txt' }), { expiresIn: 60 });

    const response = await fetch(url);

    expect(response.status).toBe(200);
    expect(await response.text()).toBe('alpha');
    client.destroy();
  });

  it.each([
    { what: 'another key', credentials: other },
    { what: 'the key engines without one take', credentials: OPEN_ENGINE_CREDENTIALS },
  ])('refuses $what as S3 refuses an unknown key, and stores nothing', async ({ credentials }) => {
    const client = localS3Client(s3.endpoint, credentials);

    await expect(
      client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'b.txt', Body: 'beta' })),
    ).rejects.toMatchObject({ name: 'InvalidAccessKeyId', $metadata: { httpStatusCode: 403 } });
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: BUCKET, Key: 'a.txt' }), { expiresIn: 60 });
    expect((await fetch(url)).status).toBe(403);
    client.destroy();
    const owner = localS3Client(s3.endpoint, key);
    const listed = await owner.send(new ListObjectsV2Command({ Bucket: BUCKET }));
    expect((listed.Contents ?? []).map((o) => o.Key)).toEqual(['a.txt']);
    owner.destroy();
  });

  it('refuses an unsigned request with AccessDenied', async () => {
    const response = await fetch(`${s3.endpoint}/${BUCKET}/a.txt`);

    expect(response.status).toBe(403);
    expect(await response.text()).toContain('<Code>AccessDenied</Code>');
  });

  it('no longer knows the key once stopped', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trainyard-engines-'));
    const own = randomEngineCredentials();
    const engine = await startS3rver({ directory: dir, buckets: [BUCKET], credentials: own });
    await engine.stop();
    // A later s3rver without a key of its own (as the tests start them) must not answer the stopped engine's key.
    const open = await startS3rver({ directory: dir, buckets: [BUCKET] });
    try {
      const client = localS3Client(open.endpoint, own);
      await expect(client.send(new ListObjectsV2Command({ Bucket: BUCKET }))).rejects.toMatchObject({
        name: 'InvalidAccessKeyId',
      });
      client.destroy();
    } finally {
      await open.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('s3rver’s built-in key', () => {
  it('is refused as an engine’s own key: it would open every s3rver of the process', async () => {
    await expect(
      startS3rver({ directory: s3Dir, buckets: [BUCKET], credentials: OPEN_ENGINE_CREDENTIALS }),
    ).rejects.toThrow(/built-in key S3RVER opens every s3rver: start it without credentials/);
  });
});

describe('s3rver with a key checks the signature, not only the key', () => {
  const secretless = { ...key, secretAccessKey: 'not the secret' };

  it('refuses the right key signed with another secret', async () => {
    const client = localS3Client(s3.endpoint, secretless);

    await expect(client.send(new ListObjectsV2Command({ Bucket: BUCKET }))).rejects.toMatchObject({
      name: 'SignatureDoesNotMatch',
      $metadata: { httpStatusCode: 403 },
    });
    client.destroy();
  });

  it('opens one object for one method with a presigned URL: another object, a PUT or a late use is refused', async () => {
    const client = localS3Client(s3.endpoint, key);
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: BUCKET, Key: 'a.txt' }), { expiresIn: 60 });
    client.destroy();

    expect((await fetch(url)).status).toBe(200);
    const other = await fetch(url.replace('/a.txt?', '/b.txt?'));
    expect(other.status).toBe(403);
    expect(await other.text()).toContain('<Code>SignatureDoesNotMatch</Code>');
    expect((await fetch(url, { method: 'PUT', body: 'overwritten' })).status).toBe(403);
    const owner = localS3Client(s3.endpoint, key);
    const body = await (
      await owner.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'a.txt' }))
    ).Body?.transformToString();
    expect(body).toBe('alpha');
    owner.destroy();
  });

  it('refuses a presigned URL once it has expired, by the clock it was started with', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'trainyard-engines-'));
    let now = Date.now();
    const own = randomEngineCredentials();
    const engine = await startS3rver({ directory: dir, buckets: [BUCKET], credentials: own, now: () => now });
    try {
      const client = localS3Client(engine.endpoint, own);
      await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'c.txt', Body: 'gamma' }));
      const url = await getSignedUrl(client, new GetObjectCommand({ Bucket: BUCKET, Key: 'c.txt' }), {
        expiresIn: 60,
      });
      client.destroy();
      expect((await fetch(url)).status).toBe(200);

      now += 61_000;
      const late = await fetch(url);

      expect(late.status).toBe(403);
      expect(await late.text()).toContain('<Message>Request has expired</Message>');
    } finally {
      await engine.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('answers what the SDK signs for keys that need encoding, listings by prefix and multipart uploads', async () => {
    const client = localS3Client(s3.endpoint, key);
    const keys = ["odd names/a b+c~d*e(f)!g'h.txt", 'odd names/ünï cödé €.txt', 'odd names/100%=&?.txt'];
    for (const name of keys) await client.send(new PutObjectCommand({ Bucket: BUCKET, Key: name, Body: name }));
    const listed = await client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'odd names/' }));
    const upload = await client.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: 'odd names/parts.bin' }));
    const part = await client.send(
      new UploadPartCommand({
        Bucket: BUCKET,
        Key: 'odd names/parts.bin',
        UploadId: upload.UploadId,
        PartNumber: 1,
        Body: 'one part',
      }),
    );
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket: BUCKET,
        Key: 'odd names/parts.bin',
        UploadId: upload.UploadId,
        MultipartUpload: { Parts: [{ ETag: part.ETag, PartNumber: 1 }] },
      }),
    );

    expect((listed.Contents ?? []).map((o) => o.Key).sort()).toEqual([...keys].sort());
    for (const name of keys) {
      const got = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: name }));
      expect(await got.Body?.transformToString()).toBe(name);
    }
    const whole = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'odd names/parts.bin' }));
    expect(await whole.Body?.transformToString()).toBe('one part');
    client.destroy();
  });

  it('answers what boto3 signs (the harness’s S3 client): put, multipart upload, list by prefix, get', async () => {
    // The harness's own client settings (path style, checksums only when required), a multipart threshold of 5 MiB.
    const script = `
import os, sys
sys.path.insert(0, ${JSON.stringify(join(process.cwd(), 'images/harness'))})
import boto3
from boto3.s3.transfer import TransferConfig
from trainyard_harness.storage import s3_client_config
endpoint = os.environ['ENDPOINT']
s3 = boto3.client('s3', endpoint_url=endpoint, region_name='us-east-1', config=s3_client_config(endpoint))
s3.put_object(Bucket='${BUCKET}', Key='py/ünï cödé +1.txt', Body=b'from python')
path = os.path.join(os.environ['DIR'], 'big.bin')
with open(path, 'wb') as f:
    f.write(os.urandom(11 * 1024 * 1024))
s3.upload_file(path, '${BUCKET}', 'py/big.bin', Config=TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024))
keys = sorted(o['Key'] for o in s3.list_objects_v2(Bucket='${BUCKET}', Prefix='py/')['Contents'])
body = s3.get_object(Bucket='${BUCKET}', Key='py/ünï cödé +1.txt')['Body'].read()
size = s3.head_object(Bucket='${BUCKET}', Key='py/big.bin')['ContentLength']
print(keys, body.decode(), size)
`;
    // Not spawnSync: s3rver answers from this process's event loop.
    const run = await execFileAsync('/usr/bin/python3', ['-c', script], {
      env: {
        PATH: process.env.PATH,
        ENDPOINT: s3.endpoint,
        DIR: s3Dir,
        AWS_ACCESS_KEY_ID: key.accessKeyId,
        AWS_SECRET_ACCESS_KEY: key.secretAccessKey,
        AWS_EC2_METADATA_DISABLED: 'true',
      },
      encoding: 'utf8',
      timeout: 60_000,
    });

    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe(`['py/big.bin', 'py/ünï cödé +1.txt'] from python ${11 * 1024 * 1024}`);
  });
});

describe('a request target `new URL` cannot read', () => {
  it.each(['dynalite', 's3rver'])('is answered by %s, which goes on answering', async (which) => {
    const engine = which === 'dynalite' ? dynamo : s3;
    const { port } = new URL(engine.endpoint);
    // fetch would normalise the target; a raw request sends it as written.
    const status = await new Promise<number>((resolve, reject) => {
      const socket = connect(Number(port), '127.0.0.1', () =>
        socket.write('GET //[?X-Amz-Credential=%E0 HTTP/1.1\r\nHost: x\r\n\r\n'),
      );
      socket.once('data', (data) => {
        resolve(Number(data.toString('latin1').split(' ')[1]));
        socket.destroy();
      });
      socket.once('error', reject);
    });

    expect(status).toBeGreaterThanOrEqual(400);
    if (which === 'dynalite') expect(await tables(key)).toEqual(['jobs']);
    else
      expect(
        (await localS3Client(s3.endpoint, key).send(new ListObjectsV2Command({ Bucket: BUCKET }))).$metadata
          .httpStatusCode,
      ).toBe(200);
  });
});

describe('s3rver’s ListObjectsV2 past one page, without the legacy provider', () => {
  const PAGED = 'paged';
  const keys = Array.from({ length: 1005 }, (_, i) => `k/${String(i).padStart(4, '0')}`);
  let engine: RunningEngine;
  let dir: string;
  let client: ReturnType<typeof localS3Client>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'trainyard-engines-'));
    engine = await startS3rver({ directory: dir, buckets: [PAGED] });
    client = localS3Client(engine.endpoint);
    for (let i = 0; i < keys.length; i += 50) {
      await Promise.all(
        keys.slice(i, i + 50).map((Key) => client.send(new PutObjectCommand({ Bucket: PAGED, Key, Body: 'x' }))),
      );
    }
    await client.send(new PutObjectCommand({ Bucket: PAGED, Key: 'top.txt', Body: 'y' }));
  });

  afterAll(async () => {
    client?.destroy();
    await engine?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs where DES is unavailable, as in every process local mode starts', () => {
    // s3rver's own continuation tokens are DES: this is what made its second page an InternalError.
    expect(() => createCipheriv('des', Buffer.alloc(8), Buffer.alloc(8))).toThrow();
  });

  it('pages every key once, in order, with V2’s fields', async () => {
    const first = await client.send(new ListObjectsV2Command({ Bucket: PAGED }));
    expect(first).toMatchObject({ IsTruncated: true, KeyCount: 1000 });
    expect(first.ContinuationToken).toBeUndefined();
    expect(first.Contents?.[0]).not.toHaveProperty('Owner');
    const token = first.NextContinuationToken as string;
    const second = await client.send(new ListObjectsV2Command({ Bucket: PAGED, ContinuationToken: token }));
    expect(second).toMatchObject({ IsTruncated: false, KeyCount: 6, ContinuationToken: token });
    expect(second.NextContinuationToken).toBeUndefined();

    const listed: string[] = [];
    for await (const page of paginateListObjectsV2({ client }, { Bucket: PAGED })) {
      listed.push(...(page.Contents ?? []).map((o) => o.Key as string));
    }
    expect(listed).toEqual([...keys, 'top.txt']);
  });

  it('keeps StartAfter, MaxKeys, Delimiter and FetchOwner', async () => {
    const after = await client.send(
      new ListObjectsV2Command({ Bucket: PAGED, StartAfter: 'k/0001', MaxKeys: 2, FetchOwner: true }),
    );
    expect(after).toMatchObject({ StartAfter: 'k/0001', IsTruncated: true, KeyCount: 2 });
    expect(after.Contents?.map((o) => o.Key)).toEqual(['k/0002', 'k/0003']);
    expect(after.Contents?.[0]?.Owner).toBeDefined();
    const next = await client.send(
      new ListObjectsV2Command({ Bucket: PAGED, MaxKeys: 2, ContinuationToken: after.NextContinuationToken }),
    );
    expect(next.Contents?.map((o) => o.Key)).toEqual(['k/0004', 'k/0005']);

    const folders = await client.send(new ListObjectsV2Command({ Bucket: PAGED, Delimiter: '/' }));
    expect(folders.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['k/']);
    expect(folders.Contents?.map((o) => o.Key)).toEqual(['top.txt']);
  });

  it.each([
    { what: 'a token it did not make', token: 'not-a-token' },
    {
      what: 'a token for another bucket',
      token: Buffer.from('{"bucket":"other","after":"k/0001"}').toString('base64url'),
    },
  ])('refuses $what as S3 does', async ({ token }) => {
    await expect(
      client.send(new ListObjectsV2Command({ Bucket: PAGED, ContinuationToken: token })),
    ).rejects.toMatchObject({
      name: 'InvalidArgument',
      message: 'The continuation token provided is incorrect',
      $metadata: { httpStatusCode: 400 },
    });
  });

  it('leaves ListObjects (V1) as s3rver answers it', async () => {
    const v1 = await client.send(new ListObjectsCommand({ Bucket: PAGED, Marker: 'k/1003' }));
    expect(v1.Contents?.map((o) => o.Key)).toEqual(['k/1004', 'top.txt']);
    expect(v1.Marker).toBe('k/1003');
  });
});
