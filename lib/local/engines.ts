/**
 * Starts the local engines that speak the AWS APIs: dynalite (DynamoDB) and s3rver (S3), on loopback.
 * Used by local mode and by tests, so both exercise the same adapters against the same wire protocol.
 */

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';
import S3rver from 's3rver';

/** A running engine: its loopback endpoint and how to stop it. */
export interface RunningEngine {
  readonly endpoint: string;
  stop(): Promise<void>;
}

/** Starts dynalite on 127.0.0.1; `path` persists tables in LevelDB, otherwise they live in memory. */
export async function startDynalite(options: { path?: string; port?: number } = {}): Promise<RunningEngine> {
  const server = dynalite({ path: options.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await listen(server, options.port ?? 0);
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: () => closeServer(server),
  };
}

/** Starts s3rver on 127.0.0.1 storing objects under `directory`, creating `buckets` if missing. */
export async function startS3rver(options: {
  directory: string;
  buckets?: string[];
  port?: number;
}): Promise<RunningEngine> {
  const s3rver = new S3rver({
    address: '127.0.0.1',
    port: options.port ?? 0,
    silent: true,
    directory: options.directory,
    allowMismatchedSignatures: true,
    configureBuckets: (options.buckets ?? []).map((name) => ({ name })),
  });
  const address = await s3rver.run();
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    stop: () => s3rver.close(),
  };
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
