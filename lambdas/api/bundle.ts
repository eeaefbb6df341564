/**
 * Code bundles as requests carry them: inline base64 (up to limits.maxInlineBundleKiB after decoding) or a presigned
 * upload (up to limits.maxBundleMiB). Sizes are checked before anything is decoded or downloaded, and the bundle must
 * unpack as a tar.gz before a job can be created from it.
 */
import type { TrainyardConfig } from '../../lib/config';
import { uploadKey } from '../domain/workspace-layout';
import { type BundleFile, MAX_UNPACKED_BYTES, sha256Hex, unpackTarGz } from '../shared/tarball';
import { ObjectTooLarge, type Workspace } from '../shared/workspace';
import { badRequest, tooLarge } from './errors';

/** A bundle read from a request, checked and unpacked. */
export interface ResolvedBundle {
  readonly bytes: Buffer;
  readonly sha256: string;
  readonly files: BundleFile[];
  readonly source: 'inline' | 'upload';
}

/** Bytes a padded base64 string decodes to, computed without decoding it. */
export function base64DecodedLength(text: string): number {
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0;
  return (text.length / 4) * 3 - padding;
}

/** Reads the bundle a request names (exactly one of `bundle`, `uploadId`), enforcing the configured limits. */
export async function resolveBundle(
  deps: { config: TrainyardConfig; workspace: Workspace },
  team: string,
  input: { bundle?: string; uploadId?: string },
): Promise<ResolvedBundle> {
  const { limits } = deps.config;
  if (input.bundle !== undefined) {
    const maxBytes = limits.maxInlineBundleKiB * 1024;
    const size = base64DecodedLength(input.bundle);
    if (size > maxBytes) {
      throw tooLarge(
        `bundle is ${size} bytes after base64 decoding; inline bundles may be at most ${limits.maxInlineBundleKiB} KiB (${maxBytes} bytes): upload larger ones with POST /uploads (up to ${limits.maxBundleMiB} MiB)`,
        { bytes: size, maxBytes },
      );
    }
    const bytes = Buffer.from(input.bundle, 'base64');
    return { bytes, sha256: sha256Hex(bytes), files: unpackTarGz(bytes, MAX_UNPACKED_BYTES), source: 'inline' };
  }
  const uploadId = input.uploadId as string;
  const key = uploadKey(team, uploadId);
  const listed = (await deps.workspace.list(key)).find((o) => o.key === key);
  if (!listed) {
    throw badRequest(
      `upload ${uploadId} has no bundle: PUT the tar.gz to the URL POST /uploads returned (before it expires), then submit`,
    );
  }
  const maxBytes = limits.maxBundleMiB * 1024 * 1024;
  const overLimit = (size: number) =>
    tooLarge(
      `uploaded bundle ${uploadId} is ${size} bytes; bundles may be at most ${limits.maxBundleMiB} MiB (${maxBytes} bytes)`,
      { bytes: size, maxBytes },
    );
  if (listed.size > maxBytes) throw overLimit(listed.size);
  // Read bounded as well: the upload URL can PUT again until it expires, so the object read may not be the one listed.
  let bytes: Buffer | undefined;
  try {
    bytes = await deps.workspace.getAtMost(key, maxBytes);
  } catch (error) {
    if (error instanceof ObjectTooLarge) throw overLimit(error.bytes);
    throw error;
  }
  if (!bytes) throw badRequest(`upload ${uploadId} has no bundle: it was removed while this request ran`);
  return { bytes, sha256: sha256Hex(bytes), files: unpackTarGz(bytes, MAX_UNPACKED_BYTES), source: 'upload' };
}
