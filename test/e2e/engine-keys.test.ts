/**
 * Local mode's engines answer only the keys it made at its start, one per engine: the bucket's key (which the attempts
 * and presigned URLs carry) cannot reach the tables, s3rver's built-in key reaches neither, and a restart makes new
 * keys, so an old one is refused.
 */
import { rmSync } from 'node:fs';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import { createDocumentClient } from '../../lambdas/shared/dynamo';
import { parseConfig } from '../../lib/config';
import { localS3Client } from '../../lib/local/control-plane';
import { type EngineCredentials, OPEN_ENGINE_CREDENTIALS } from '../../lib/local/engines';
import { type LocalMode, startLocalMode } from '../../lib/local/local-mode';
import { LOCAL_NAMES } from '../../lib/local/names';
import { E2E_CONFIG, tempDir } from './support';

const dir = tempDir('engine-keys');
let mode: LocalMode | undefined;

afterAll(async () => {
  await mode?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function tables(endpoint: string, credentials: EngineCredentials): Promise<string[]> {
  const doc = createDocumentClient({ endpoint, credentials });
  try {
    return (await doc.request<{ TableNames?: string[] }>('ListTables', {})).TableNames ?? [];
  } finally {
    doc.destroy();
  }
}

async function objects(endpoint: string, credentials: EngineCredentials): Promise<number> {
  const s3 = localS3Client(endpoint, credentials);
  try {
    return (await s3.send(new ListObjectsV2Command({ Bucket: LOCAL_NAMES.bucket }))).KeyCount ?? 0;
  } finally {
    s3.destroy();
  }
}

describe('local mode’s engine keys', () => {
  it('are one per engine: each engine answers its own and refuses the other’s and s3rver’s built-in one', async () => {
    mode = await startLocalMode({ dir, config: parseConfig(E2E_CONFIG) });
    const { dynamo, s3 } = mode.engineCredentials;

    expect(dynamo.accessKeyId).not.toBe(s3.accessKeyId);
    expect(await tables(mode.dynamoEndpoint, dynamo)).toEqual(
      expect.arrayContaining([LOCAL_NAMES.jobsTable, LOCAL_NAMES.budgetsTable]),
    );
    expect(await objects(mode.s3Endpoint, s3)).toBe(0);
    for (const other of [s3, OPEN_ENGINE_CREDENTIALS]) {
      await expect(tables(mode.dynamoEndpoint, other)).rejects.toMatchObject({ name: 'UnrecognizedClientException' });
    }
    for (const other of [dynamo, OPEN_ENGINE_CREDENTIALS]) {
      await expect(objects(mode.s3Endpoint, other)).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
    }
  });

  it('are made afresh at each start: the last start’s keys are refused', async () => {
    const before = mode?.engineCredentials;
    await mode?.stop();
    mode = await startLocalMode({ dir, config: parseConfig(E2E_CONFIG) });

    if (!before) throw new Error('the first test did not start local mode');
    expect(mode.engineCredentials.dynamo.accessKeyId).not.toBe(before.dynamo.accessKeyId);
    await expect(tables(mode.dynamoEndpoint, before.dynamo)).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
    });
    await expect(objects(mode.s3Endpoint, before.s3)).rejects.toMatchObject({ name: 'InvalidAccessKeyId' });
    expect(await tables(mode.dynamoEndpoint, mode.engineCredentials.dynamo)).toContain(LOCAL_NAMES.jobsTable);
  });
});
