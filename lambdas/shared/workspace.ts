/**
 * The workspace bucket adapter: code bundles, progress, checkpoints, summaries and presigned URLs.
 *
 * `@aws-sdk/client-s3` is imported the first time a method runs, not when the module loads: every Lambda bundle
 * includes this module (through the AWS control plane), but the interruption, batch-events, cost-gate and pause
 * handlers never touch the bucket, and importing the S3 client costs a fresh process ~40 ms. Only types are imported
 * statically, so esbuild leaves no static import behind.
 */
import type { GetObjectCommandOutput, S3Client } from '@aws-sdk/client-s3';
import { compareCodeUnits } from '../domain/code-unit-order';
import {
  CHECKPOINT_FOLDER,
  CHECKPOINT_MANIFEST,
  CHECKPOINT_RESUME_FAILED,
  SET_ASIDE_AFTER_RESUME_FAILURES,
} from '../domain/workspace-layout';

/** A value made once, on first use; a failed attempt is forgotten so the next call tries again. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let value: Promise<T> | undefined;
  return () => {
    value ??= make().catch((error: unknown) => {
      value = undefined;
      throw error;
    });
    return value;
  };
}

/** The S3 client module (command classes, NoSuchKey), loaded on first use and shared by every Workspace. */
const s3Sdk = once(() => import('@aws-sdk/client-s3'));

/** The presigner, loaded on first use: only two API routes sign URLs. */
const presigner = once(() => import('@aws-sdk/s3-request-presigner'));

/**
 * Where a Workspace gets its S3 client: a ready client (local mode, tests), or a factory called once, on the first
 * bucket operation (Lambdas: the factory imports the SDK then).
 */
export type S3ClientSource = S3Client | (() => S3Client | Promise<S3Client>);

/** A complete checkpoint (its manifest exists), as listed for GET /jobs/{id}/checkpoints. */
export interface CheckpointSummary {
  readonly name: string;
  readonly step?: number;
  readonly attempt?: number;
  readonly createdAt?: string;
  /** The checkpoint's own files (not its manifest, not the harness's markers), in path order (code units). */
  readonly files: ReadonlyArray<{ readonly path: string; readonly size: number; readonly key: string }>;
  /** Attempts that failed right after restoring it (the harness's RESUME_FAILED markers). */
  readonly resumeFailures: number;
  /** Failed often enough that the harness restores an older checkpoint instead. */
  readonly setAside: boolean;
}

/**
 * The most {@link Workspace.getJson} reads of a document: a manifest of a checkpoint with thousands of shards is a few
 * hundred KiB, progress.json a few hundred bytes.
 */
export const MAX_JSON_DOCUMENT_BYTES = 4 * 1024 * 1024;

/** Raised by {@link Workspace.getAtMost} for an object larger than the caller will hold in memory. */
export class ObjectTooLarge extends Error {
  override name = 'ObjectTooLarge';

  constructor(
    readonly key: string,
    readonly bytes: number,
    readonly limitBytes: number,
  ) {
    super(`object ${key} holds ${bytes} bytes, more than the ${limitBytes} bytes it may be read whole with`);
  }
}

/** A GetObject response's body, read whole. */
async function bytesOf(out: GetObjectCommandOutput): Promise<Buffer> {
  const bytes = await (out.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Lets go of a GetObject response whose body will not be read. */
function leaveUnread(out: GetObjectCommandOutput): void {
  (out.Body as { destroy?: () => void } | undefined)?.destroy?.();
}

/** Reads and writes the workspace bucket. */
export class Workspace {
  private readonly client: () => Promise<S3Client>;

  constructor(
    s3: S3ClientSource,
    readonly bucket: string,
  ) {
    this.client = typeof s3 === 'function' ? once(async () => s3()) : () => Promise.resolve(s3);
  }

  /** Stores an object. */
  async put(key: string, body: Buffer | string, contentType = 'application/octet-stream'): Promise<void> {
    const { PutObjectCommand } = await s3Sdk();
    await (await this.client()).send(
      new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }),
    );
  }

  /** An object's bytes, or undefined when it does not exist. */
  async get(key: string): Promise<Buffer | undefined> {
    const out = await this.open(key);
    return out && bytesOf(out);
  }

  /**
   * An object's bytes when it holds at most `maxBytes`, undefined when it does not exist. A larger object throws
   * {@link ObjectTooLarge} as soon as the response's Content-Length says so, its body left unread.
   */
  async getAtMost(key: string, maxBytes: number): Promise<Buffer | undefined> {
    const out = await this.open(key);
    if (!out) return undefined;
    if (out.ContentLength !== undefined && out.ContentLength > maxBytes) {
      leaveUnread(out);
      throw new ObjectTooLarge(key, out.ContentLength, maxBytes);
    }
    const bytes = await bytesOf(out);
    if (bytes.byteLength > maxBytes) throw new ObjectTooLarge(key, bytes.byteLength, maxBytes);
    return bytes;
  }

  /**
   * The last `maxBytes` of an object, from its first complete line on (a text log read from its end), or the whole
   * object when it is no larger; undefined when it does not exist. One GET when it fits (its Content-Length says so);
   * a larger one's body is left unread and its tail asked for from that offset (`bytes=<start>-`, which S3 and
   * s3rver serve alike; s3rver has no suffix ranges). An object that shrank or went between the two reads is read
   * again.
   */
  async getTail(key: string, maxBytes: number): Promise<Buffer | undefined> {
    for (let reads = 1; ; reads++) {
      const whole = await this.open(key);
      if (!whole) return undefined;
      const size = whole.ContentLength ?? 0;
      if (size <= maxBytes) return bytesOf(whole);
      leaveUnread(whole);
      let tail: GetObjectCommandOutput | undefined;
      try {
        tail = await this.open(key, `bytes=${size - maxBytes}-`);
      } catch (error) {
        if ((error as Error).name === 'InvalidRange' && reads < 3) continue;
        throw error;
      }
      if (!tail) {
        if (reads < 3) continue;
        return undefined;
      }
      const bytes = await bytesOf(tail);
      return bytes.subarray(bytes.indexOf(0x0a) + 1);
    }
  }

  /** GetObject (a byte range of it with `range`), or undefined when the object does not exist. */
  private async open(key: string, range?: string): Promise<GetObjectCommandOutput | undefined> {
    const { GetObjectCommand, NoSuchKey } = await s3Sdk();
    const s3 = await this.client();
    try {
      return await s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, ...(range && { Range: range }) }));
    } catch (error) {
      if (error instanceof NoSuchKey || (error as Error).name === 'NoSuchKey') return undefined;
      throw error;
    }
  }

  /**
   * A JSON document, or undefined when it does not exist, does not parse or holds more than `maxBytes`. The documents
   * read so (progress.json, a checkpoint's manifest) are a job's own to write: one as large as its role likes must not
   * take a Lambda's memory with it.
   */
  async getJson(key: string, maxBytes = MAX_JSON_DOCUMENT_BYTES): Promise<unknown> {
    let body: Buffer | undefined;
    try {
      body = await this.getAtMost(key, maxBytes);
    } catch (error) {
      if (error instanceof ObjectTooLarge) return undefined;
      throw error;
    }
    if (!body) return undefined;
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      return undefined;
    }
  }

  /** Deletes an object (missing is fine). */
  async delete(key: string): Promise<void> {
    const { DeleteObjectCommand } = await s3Sdk();
    await (await this.client()).send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }

  /** Every key under a prefix, with sizes. */
  async list(prefix: string): Promise<Array<{ key: string; size: number }>> {
    const { ListObjectsV2Command } = await s3Sdk();
    const s3 = await this.client();
    const out: Array<{ key: string; size: number }> = [];
    let token: string | undefined;
    do {
      const page = await s3.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }),
      );
      for (const o of page.Contents ?? []) if (o.Key) out.push({ key: o.Key, size: o.Size ?? 0 });
      token = page.NextContinuationToken;
    } while (token);
    return out;
  }

  /** Complete checkpoints under a job's checkpoint prefix, newest first (a folder without its manifest is skipped). */
  async listCheckpoints(prefix: string): Promise<CheckpointSummary[]> {
    const folders = new Map<string, Array<{ path: string; size: number; key: string }>>();
    for (const object of await this.list(prefix)) {
      const match = CHECKPOINT_FOLDER.exec(object.key.slice(prefix.length));
      if (!match?.[1] || !match[2]) continue;
      const name = `ckpt-${match[1]}`;
      const files = folders.get(name) ?? [];
      files.push({ path: match[2], size: object.size, key: object.key });
      folders.set(name, files);
    }
    const out: CheckpointSummary[] = [];
    for (const [name, files] of [...folders].sort(([a], [b]) => compareCodeUnits(b, a))) {
      if (!files.some((f) => f.path === CHECKPOINT_MANIFEST)) continue;
      const manifest = (await this.getJson(`${prefix}${name}/${CHECKPOINT_MANIFEST}`)) as
        | { step?: number; attempt?: number; created_at?: string }
        | undefined;
      if (!manifest) continue;
      const resumeFailures = files.filter((f) => CHECKPOINT_RESUME_FAILED.test(f.path)).length;
      out.push({
        name,
        step: typeof manifest.step === 'number' ? manifest.step : undefined,
        attempt: typeof manifest.attempt === 'number' ? manifest.attempt : undefined,
        createdAt: manifest.created_at,
        files: files
          .filter((f) => f.path !== CHECKPOINT_MANIFEST && !CHECKPOINT_RESUME_FAILED.test(f.path))
          .sort((a, b) => compareCodeUnits(a.path, b.path)),
        resumeFailures,
        setAside: resumeFailures >= SET_ASIDE_AFTER_RESUME_FAILURES,
      });
    }
    return out;
  }

  /** A presigned GET URL. */
  async presignDownload(key: string, expiresInSeconds = 900): Promise<string> {
    const [{ GetObjectCommand }, { getSignedUrl }] = await Promise.all([s3Sdk(), presigner()]);
    return getSignedUrl(await this.client(), new GetObjectCommand({ Bucket: this.bucket, Key: key }), {
      expiresIn: expiresInSeconds,
    });
  }

  /** A presigned PUT URL (the client uploads a bundle there, then names it in POST /jobs). */
  async presignUpload(key: string, expiresInSeconds = 900): Promise<string> {
    const [{ PutObjectCommand }, { getSignedUrl }] = await Promise.all([s3Sdk(), presigner()]);
    return getSignedUrl(
      await this.client(),
      new PutObjectCommand({ Bucket: this.bucket, Key: key, ContentType: 'application/gzip' }),
      {
        expiresIn: expiresInSeconds,
      },
    );
  }
}
