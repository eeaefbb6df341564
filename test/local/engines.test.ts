// The local engines started with a key answer only requests signed with it: dynalite as DynamoDB answers an unknown
// key, s3rver as S3 does, for signed requests and presigned URLs alike, and nothing is changed by a refused request.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { PutCommand, ScanCommand } from '@aws-sdk/lib-dynamodb';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDocumentClient } from '../../lambdas/shared/dynamo';
import { createTableRequest, JOBS_TABLE } from '../../lambdas/shared/table-design';
import { localS3Client } from '../../lib/local/control-plane';
import {
  type EngineCredentials,
  OPEN_ENGINE_CREDENTIALS,
  type RunningEngine,
  randomEngineCredentials,
  signingAccessKey,
  startDynalite,
  startS3rver,
} from '../../lib/local/engines';

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

describe('signingAccessKey', () => {
  it.each([
    {
      what: 'a SigV4 Authorization header',
      headers: {
        authorization:
          'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261129/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=ab',
      },
      url: '/b/k',
      key: 'AKIDEXAMPLE',
    },
    {
      what: 'a presigned URL',
      headers: {},
      url: '/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20261129%2Fus-east-1%2Fs3%2Faws4_request',
      key: 'AKIDEXAMPLE',
    },
    { what: 'no signature', headers: {}, url: '/b/k', key: undefined },
    {
      what: 'a SigV2 header (not accepted)',
      headers: { authorization: 'AWS AKIDEXAMPLE:c2ln' },
      url: '/',
      key: undefined,
    },
  ])('reads the key of $what', ({ headers, url, key: expected }) => {
    expect(signingAccessKey({ headers, url })).toBe(expected);
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
      doc.send(new PutCommand({ TableName: 'jobs', Item: { pk: 'JOB#x', sk: 'META', state: 'RUNNING' } })),
    ).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
      message: 'The security token included in the request is invalid.',
      $metadata: { httpStatusCode: 400 },
    });
    doc.destroy();
    const owner = createDocumentClient({ endpoint: dynamo.endpoint, credentials: key });
    expect((await owner.send(new ListTablesCommand({}))).TableNames).toEqual(['jobs']);
    const scan = await owner.send(new ScanCommand({ TableName: 'jobs', ConsistentRead: true }));
    expect(scan.Items).toEqual([]);
    owner.destroy();
  });

  it('refuses a request with no signature', async () => {
    const response = await fetch(dynamo.endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-amz-json-1.0', 'X-Amz-Target': 'DynamoDB_20120810.ListTables' },
      body: '{}',
    });

    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      __type: 'com.amazonaws.dynamodb.v20120810#UnrecognizedClientException',
      message: 'The security token included in the request is invalid.',
    });
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
