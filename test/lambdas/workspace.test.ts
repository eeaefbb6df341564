// The workspace adapter against s3rver, built the way the Lambdas build it: from an S3 client factory that is only
// called on the first bucket operation (so handlers that never touch the bucket never load the S3 client module).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKSPACE_S3_CLIENT_CONFIG } from '../../lambdas/shared/aws-control-plane';
import { ObjectTooLarge, Workspace } from '../../lambdas/shared/workspace';
import { localS3Client } from '../../lib/local/control-plane';
import { type RunningEngine, startS3rver } from '../../lib/local/engines';

const BUCKET = 'workspace-test';
let s3rver: RunningEngine;
let directory: string;

beforeAll(async () => {
  directory = mkdtempSync(join(tmpdir(), 'trainyard-workspace-'));
  s3rver = await startS3rver({ directory, buckets: [BUCKET] });
});

afterAll(async () => {
  await s3rver.stop();
  rmSync(directory, { recursive: true, force: true });
});

/** A factory that counts its calls and can be told to fail its next call. */
function countingFactory(): {
  make: () => Promise<S3Client>;
  calls: () => number;
  failNext: (message: string) => void;
} {
  let calls = 0;
  let failure: string | undefined;
  return {
    make: async () => {
      calls += 1;
      if (failure !== undefined) {
        const message = failure;
        failure = undefined;
        throw new Error(message);
      }
      return localS3Client(s3rver.endpoint);
    },
    calls: () => calls,
    failNext: (message) => {
      failure = message;
    },
  };
}

describe('Workspace over an S3 client factory', () => {
  it('does not build the client when constructed, only at the first bucket operation', async () => {
    const factory = countingFactory();

    const workspace = new Workspace(factory.make, BUCKET);
    const beforeUse = factory.calls();
    await workspace.put('lazy/first.txt', 'first');

    expect(beforeUse).toBe(0);
    expect(factory.calls()).toBe(1);
  });

  it('builds the client once for every operation after the first', async () => {
    const factory = countingFactory();
    const workspace = new Workspace(factory.make, BUCKET);

    await workspace.put('once/a.json', JSON.stringify({ step: 3 }), 'application/json');
    await workspace.get('once/a.json');
    await workspace.getJson('once/a.json');
    await workspace.list('once/');
    await workspace.listCheckpoints('once/checkpoints/');
    await workspace.presignDownload('once/a.json');
    await workspace.presignUpload('once/upload.tar.gz');
    await workspace.delete('once/a.json');

    expect(factory.calls()).toBe(1);
  });

  it('reads and writes the bucket exactly as a Workspace over a ready client', async () => {
    const lazy = new Workspace(countingFactory().make, BUCKET);
    const ready = new Workspace(localS3Client(s3rver.endpoint), BUCKET);

    await lazy.put('same/progress.json', '{"step":42}', 'application/json');
    await lazy.put('same/bytes.bin', Buffer.from([0, 1, 2, 255]));

    expect(await ready.getJson('same/progress.json')).toEqual({ step: 42 });
    expect(await lazy.getJson('same/progress.json')).toEqual({ step: 42 });
    expect([...((await lazy.get('same/bytes.bin')) ?? [])]).toEqual([0, 1, 2, 255]);
    expect(await lazy.list('same/')).toEqual(await ready.list('same/'));
    expect((await lazy.list('same/')).map((o) => o.key)).toEqual(['same/bytes.bin', 'same/progress.json']);
  });

  it('answers undefined for a missing key, through the lazily loaded NoSuchKey', async () => {
    const workspace = new Workspace(countingFactory().make, BUCKET);

    expect(await workspace.get('missing/nothing-here.json')).toBeUndefined();
    expect(await workspace.getJson('missing/nothing-here.json')).toBeUndefined();
  });

  it('lists only complete checkpoints, newest first', async () => {
    const workspace = new Workspace(countingFactory().make, BUCKET);
    const prefix = 'ckpt/checkpoints/';
    await workspace.put(`${prefix}ckpt-000010/model.pt`, 'weights-10');
    await workspace.put(`${prefix}ckpt-000010/MANIFEST.json`, JSON.stringify({ step: 10, attempt: 1 }));
    await workspace.put(`${prefix}ckpt-000020/model.pt`, 'weights-20');
    await workspace.put(`${prefix}ckpt-000020/MANIFEST.json`, JSON.stringify({ step: 20, attempt: 2 }));
    // Manifest not written yet: an upload cut off mid-way is not a checkpoint.
    await workspace.put(`${prefix}ckpt-000030/model.pt`, 'weights-30');

    const checkpoints = await workspace.listCheckpoints(prefix);

    expect(checkpoints.map((c) => [c.name, c.step, c.attempt])).toEqual([
      ['ckpt-000020', 20, 2],
      ['ckpt-000010', 10, 1],
    ]);
    expect(checkpoints[0]?.files).toEqual([
      { path: 'model.pt', size: 'weights-20'.length, key: `${prefix}ckpt-000020/model.pt` },
    ]);
  });

  it('passes a factory failure to the caller and tries the factory again on the next operation', async () => {
    const factory = countingFactory();
    const workspace = new Workspace(factory.make, BUCKET);
    factory.failNext('no credentials for S3');

    await expect(workspace.put('retry/a.txt', 'a')).rejects.toThrow('no credentials for S3');
    await workspace.put('retry/a.txt', 'a');

    expect(factory.calls()).toBe(2);
    expect((await workspace.get('retry/a.txt'))?.toString('utf8')).toBe('a');
  });
});

describe('Workspace.getAtMost', () => {
  it('returns an object of exactly the limit, byte for byte', async () => {
    const workspace = new Workspace(localS3Client(s3rver.endpoint), BUCKET);
    await workspace.put('capped/at-limit.jsonl', Buffer.from('{"step":1}\n'));

    const body = await workspace.getAtMost('capped/at-limit.jsonl', 11);

    expect(body?.toString('utf8')).toBe('{"step":1}\n');
  });

  it('refuses an object one byte over the limit, naming its size and the limit', async () => {
    const workspace = new Workspace(localS3Client(s3rver.endpoint), BUCKET);
    await workspace.put('capped/over.jsonl', 'x'.repeat(12));

    const read = workspace.getAtMost('capped/over.jsonl', 11);

    await expect(read).rejects.toBeInstanceOf(ObjectTooLarge);
    await expect(read).rejects.toThrow(
      'object capped/over.jsonl holds 12 bytes, more than the 11 bytes it may be read whole with',
    );
    // The unread body leaves the client usable.
    expect((await workspace.get('capped/over.jsonl'))?.length).toBe(12);
  });

  it('answers undefined for a missing key', async () => {
    const workspace = new Workspace(countingFactory().make, BUCKET);

    expect(await workspace.getAtMost('capped/missing.jsonl', 1024)).toBeUndefined();
  });
});

describe('Workspace.getTail', () => {
  it('returns an object no larger than the limit whole', async () => {
    const workspace = new Workspace(localS3Client(s3rver.endpoint), BUCKET);
    await workspace.put('tail/small.jsonl', '{"step":1}\n{"step":2}\n');

    const tail = await workspace.getTail('tail/small.jsonl', 22);

    expect(tail).toEqual(Buffer.from('{"step":1}\n{"step":2}\n'));
  });

  it('returns the end of a larger object from its first complete line', async () => {
    const workspace = new Workspace(localS3Client(s3rver.endpoint), BUCKET);
    // 1,000 lines of 13 bytes ("{"step":NNN}\n"): the last 30 bytes hold the end of line 997 and lines 998 and 999.
    const lines = Array.from({ length: 1000 }, (_, i) => `{"step":${String(i).padStart(3, '0')}}\n`);
    await workspace.put('tail/large.jsonl', lines.join(''));

    const tail = await workspace.getTail('tail/large.jsonl', 30);

    expect(tail?.toString('utf8')).toBe('{"step":998}\n{"step":999}\n');
  });

  it('answers undefined for a missing key', async () => {
    const workspace = new Workspace(localS3Client(s3rver.endpoint), BUCKET);

    expect(await workspace.getTail('tail/missing.jsonl', 1024)).toBeUndefined();
  });
});

describe('JSON documents a job writes', () => {
  it('reads one of at most the limit, and none larger, whatever it holds', async () => {
    const workspace = new Workspace(async () => localS3Client(s3rver.endpoint), BUCKET);
    const document = JSON.stringify({ step: 1, pad: 'x'.repeat(100) });
    await workspace.put('json/progress.json', document);

    expect(await workspace.getJson('json/progress.json', document.length)).toEqual(JSON.parse(document));
    // One byte over: not read (ObjectTooLarge from its Content-Length), as if there were none.
    expect(await workspace.getJson('json/progress.json', document.length - 1)).toBeUndefined();
  });
});

describe('presigned upload URLs on AWS', () => {
  const awsLike = (config: Record<string, unknown>) =>
    new Workspace(
      async () =>
        new S3Client({
          ...config,
          region: 'us-east-1',
          credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'example' },
        }),
      'trainyard-workspace',
    );
  const checksumParameters = (url: string) =>
    [...new URL(url).searchParams.keys()].filter((k) => /^x-amz-(checksum-|sdk-checksum)/i.test(k));

  it('carry no checksum: the bundle PUT there has none the URL could have signed', async () => {
    // The SDK's default signs the CRC32 of an empty body into the URL; the Lambdas' client must not.
    expect(checksumParameters(await awsLike({}).presignUpload('teams/t/uploads/u.tar.gz'))).not.toEqual([]);
    expect(
      checksumParameters(await awsLike(WORKSPACE_S3_CLIENT_CONFIG).presignUpload('teams/t/uploads/u.tar.gz')),
    ).toEqual([]);
  });
});
