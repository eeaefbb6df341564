/**
 * Minimal tar.gz (POSIX ustar) writer and reader for code bundles: the CLI packs a project, the API and the analyze
 * step read its text files, and the harness unpacks it with Python's tarfile. Regular files only; no links.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';

/** Raised for a bundle that is not a readable tar.gz or breaks a limit. */
export class InvalidBundle extends Error {
  override name = 'InvalidBundle';
}

/** Raised for a bundle that unpacks to more than the reader allows (the API answers 413, not 400). */
export class BundleTooLarge extends InvalidBundle {
  override name = 'BundleTooLarge';
  constructor(readonly maxBytes: number) {
    super(
      `bundle unpacks to more than ${maxBytes} bytes, the most a bundle may hold: leave data, checkpoints and outputs out of it (.gitignore or .trainyardignore) and have the job download what it needs`,
    );
  }
}

/** One file in a bundle. */
export interface BundleFile {
  readonly path: string;
  readonly content: Buffer;
  readonly mode?: number;
}

const BLOCK = 512;

function octal(value: number, length: number): string {
  return `${value.toString(8).padStart(length - 1, '0')}\0`;
}

function header(path: string, size: number, mode: number): Buffer {
  const block = Buffer.alloc(BLOCK, 0);
  let name = path;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    const cut = path.lastIndexOf('/', 155);
    if (cut <= 0 || Buffer.byteLength(path.slice(cut + 1)) > 100)
      throw new InvalidBundle(`path too long for a bundle: ${path}`);
    prefix = path.slice(0, cut);
    name = path.slice(cut + 1);
  }
  block.write(name, 0, 100, 'utf8');
  block.write(octal(mode, 8), 100, 8, 'ascii');
  block.write(octal(0, 8), 108, 8, 'ascii');
  block.write(octal(0, 8), 116, 8, 'ascii');
  block.write(octal(size, 12), 124, 12, 'ascii');
  block.write(octal(0, 12), 136, 12, 'ascii');
  block.write('        ', 148, 8, 'ascii');
  block.write('0', 156, 1, 'ascii');
  block.write('ustar\u000000', 257, 8, 'ascii');
  block.write(prefix, 345, 155, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return block;
}

/** Packs files (paths relative, forward slashes) into a gzip-compressed tar. Deterministic for the same input. */
export function packTarGz(files: readonly BundleFile[]): Buffer {
  const parts: Buffer[] = [];
  for (const file of [...files].sort((a, b) => a.path.localeCompare(b.path))) {
    if (file.path.startsWith('/') || file.path.split('/').includes('..')) {
      throw new InvalidBundle(`bundle paths must be relative and stay inside the project: ${file.path}`);
    }
    parts.push(header(file.path, file.content.length, file.mode ?? 0o644), file.content);
    const padding = (BLOCK - (file.content.length % BLOCK)) % BLOCK;
    if (padding) parts.push(Buffer.alloc(padding, 0));
  }
  parts.push(Buffer.alloc(BLOCK * 2, 0));
  return gzipSync(Buffer.concat(parts), { level: 6, mtime: 0 } as never);
}

/** Reads the regular files of a tar.gz; refuses absolute paths, `..`, and more than `maxBytes` uncompressed. */
export function unpackTarGz(archive: Buffer, maxBytes = 1024 * 1024 * 1024): BundleFile[] {
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new BundleTooLarge(maxBytes);
    throw new InvalidBundle(`bundle is not a gzip-compressed tar: ${(error as Error).message}`);
  }
  const files: BundleFile[] = [];
  let offset = 0;
  let longName: string | undefined;
  while (offset + BLOCK <= tar.length) {
    const block = tar.subarray(offset, offset + BLOCK);
    if (block.every((b) => b === 0)) break;
    const field = (start: number, length: number) =>
      block
        .subarray(start, start + length)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const size = Number.parseInt(field(124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0)
      throw new InvalidBundle(`bundle has a corrupt tar header at byte ${offset}`);
    const type = field(156, 1) || '0';
    const prefix = field(345, 155);
    let path = longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    longName = undefined;
    const body = tar.subarray(offset + BLOCK, offset + BLOCK + size);
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    if (type === 'L') {
      longName = body.toString('utf8').replace(/\0.*$/s, '');
      continue;
    }
    if (type !== '0' && type !== '\0') continue;
    path = path.replace(/^\.\//, '');
    if (path.startsWith('/') || path.split('/').includes('..'))
      throw new InvalidBundle(`bundle path escapes the project: ${path}`);
    files.push({ path, content: Buffer.from(body), mode: Number.parseInt(field(100, 8).trim() || '644', 8) });
  }
  return files;
}

/** Hex sha256 of bytes, or of a string's UTF-8. */
export function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Text files a workload analysis reads (Python sources and configs), by path; binaries are left out. */
export function textFilesOf(files: readonly BundleFile[], maxFileBytes = 512 * 1024): Record<string, string> {
  const out: Record<string, string> = {};
  for (const file of files) {
    if (!/\.(py|json|ya?ml|toml|cfg|txt|sh)$/i.test(file.path) || file.content.length > maxFileBytes) continue;
    if (file.content.includes(0)) continue;
    out[file.path] = file.content.toString('utf8');
  }
  return out;
}
