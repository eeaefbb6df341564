/**
 * Minimal tar.gz (POSIX ustar, with PAX headers for long paths) writer and reader for code bundles: the CLI packs a
 * project, the API and the analyze step read its text files, and the harness unpacks it with Python's tarfile.
 * Regular files only; no links.
 */
import { createHash } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { compareCodeUnits } from '../domain/code-unit-order';

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
const NAME_BYTES = 100;
const PREFIX_BYTES = 155;
/** The largest size an 11-digit octal size field holds (8 GiB - 1). */
const MAX_ENTRY_BYTES = 0o77777777777;
/** Name of the PAX extended header entry itself, as Python's tarfile writes it; readers that know PAX skip it. */
const PAX_HEADER_NAME = '././@PaxHeader';

function octal(value: number, length: number): string {
  return `${value.toString(8).padStart(length - 1, '0')}\0`;
}

interface UstarName {
  readonly name: string;
  readonly prefix: string;
}

/**
 * Splits a path into ustar name (≤100 bytes) and prefix (≤155 bytes) at a '/', measuring UTF-8 bytes; the longest
 * prefix that fits wins, which is the split earlier versions wrote for every path they wrote correctly. Undefined
 * when no split fits, and the path needs a PAX header.
 */
function ustarName(path: string): UstarName | undefined {
  if (Buffer.byteLength(path) <= NAME_BYTES) return { name: path, prefix: '' };
  for (let cut = path.lastIndexOf('/'); cut > 0; cut = path.lastIndexOf('/', cut - 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(name) > NAME_BYTES) return undefined;
    if (name && Buffer.byteLength(prefix) <= PREFIX_BYTES) return { name, prefix };
  }
  return undefined;
}

/** The ustar name field of an entry whose real path is in a PAX header: ASCII, at most 100 bytes, for old readers. */
function fallbackName(path: string): string {
  return path.replace(/[^\x20-\x7e]/g, '?').slice(0, NAME_BYTES);
}

function header(entry: UstarName, size: number, mode: number, type: '0' | 'x'): Buffer {
  if (size > MAX_ENTRY_BYTES) throw new InvalidBundle(`bundle entry too large for a tar header: ${size} bytes`);
  const block = Buffer.alloc(BLOCK, 0);
  block.write(entry.name, 0, NAME_BYTES, 'utf8');
  block.write(octal(mode, 8), 100, 8, 'ascii');
  block.write(octal(0, 8), 108, 8, 'ascii');
  block.write(octal(0, 8), 116, 8, 'ascii');
  block.write(octal(size, 12), 124, 12, 'ascii');
  block.write(octal(0, 12), 136, 12, 'ascii');
  block.write('        ', 148, 8, 'ascii');
  block.write(type, 156, 1, 'ascii');
  block.write('ustar\u000000', 257, 8, 'ascii');
  block.write(entry.prefix, 345, PREFIX_BYTES, 'utf8');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return block;
}

/** One PAX record, `"<length> <key>=<value>\n"`, whose decimal length counts the whole record, itself included. */
function paxRecord(key: string, value: string): Buffer {
  const rest = Buffer.byteLength(` ${key}=${value}\n`);
  let length = rest + 1;
  while (length !== rest + String(length).length) length = rest + String(length).length;
  return Buffer.from(`${length} ${key}=${value}\n`, 'utf8');
}

function padded(body: Buffer): Buffer[] {
  const padding = (BLOCK - (body.length % BLOCK)) % BLOCK;
  return padding ? [body, Buffer.alloc(padding, 0)] : [body];
}

/** Header blocks for one file: a ustar header, preceded by a PAX header carrying the path when ustar cannot. */
function headersFor(path: string, size: number, mode: number): Buffer[] {
  const name = ustarName(path);
  if (name) return [header(name, size, mode, '0')];
  const pax = paxRecord('path', path);
  return [
    header({ name: PAX_HEADER_NAME, prefix: '' }, pax.length, 0o644, 'x'),
    ...padded(pax),
    header({ name: fallbackName(path), prefix: '' }, size, mode, '0'),
  ];
}

/**
 * Packs files (paths relative, forward slashes) into a gzip-compressed tar. Deterministic for the same input. Paths
 * that fit ustar are written as ustar; longer ones (by UTF-8 bytes) get a PAX `path` record, as tarfile and GNU tar read.
 */
export function packTarGz(files: readonly BundleFile[]): Buffer {
  const parts: Buffer[] = [];
  for (const file of [...files].sort((a, b) => compareCodeUnits(a.path, b.path))) {
    if (file.path.startsWith('/') || file.path.split('/').includes('..')) {
      throw new InvalidBundle(`bundle paths must be relative and stay inside the project: ${file.path}`);
    }
    if (file.path.includes('\0')) throw new InvalidBundle(`bundle paths cannot hold a NUL character: ${file.path}`);
    parts.push(...headersFor(file.path, file.content.length, file.mode ?? 0o644), ...padded(file.content));
  }
  parts.push(Buffer.alloc(BLOCK * 2, 0));
  return gzipSync(Buffer.concat(parts), { level: 6, mtime: 0 } as never);
}

/** Parses the records of a PAX extended header; `at` is the header's offset, for the error message. */
function paxRecords(body: Buffer, at: number): Map<string, string> {
  const corrupt = () => new InvalidBundle(`bundle has a corrupt PAX header at byte ${at}`);
  const records = new Map<string, string>();
  let start = 0;
  while (start < body.length) {
    if (body[start] === 0) break;
    const space = body.indexOf(0x20, start);
    const digits = space < 0 ? '' : body.subarray(start, space).toString('ascii');
    if (!/^[0-9]+$/.test(digits)) throw corrupt();
    const end = start + Number(digits);
    if (end <= space + 1 || end > body.length || body[end - 1] !== 0x0a) throw corrupt();
    const record = body.subarray(space + 1, end - 1).toString('utf8');
    const equals = record.indexOf('=');
    if (equals <= 0) throw corrupt();
    records.set(record.slice(0, equals), record.slice(equals + 1));
    start = end;
  }
  return records;
}

/** Largest tar a bundle may unpack to, bytes: bounds the memory of whatever unpacks it, whatever it compresses to. */
export const MAX_UNPACKED_BYTES = 1024 * 1024 * 1024;

/** Whether a header block's checksum is right: as tarfile takes it, its bytes summed unsigned or signed. */
function checksumHolds(block: Buffer): boolean {
  const stored = Number.parseInt(block.subarray(148, 156).toString('ascii').replace(/\0.*$/s, '').trim(), 8);
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : (block[i] as number);
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  return stored === unsigned || stored === signed;
}

/** Whether a path, relative to the bundle's root, stays inside it (after `..` steps are taken). */
function staysInside(path: string): boolean {
  if (path.startsWith('/')) return false;
  let depth = 0;
  for (const part of path.split('/')) {
    if (part === '..') depth -= 1;
    else if (part !== '' && part !== '.') depth += 1;
    if (depth < 0) return false;
  }
  return true;
}

/**
 * Reads the regular files of a tar.gz (ustar, GNU long names, PAX `path` records); refuses absolute paths, `..`,
 * and more than `maxBytes` uncompressed. Each file's content is a view of the unpacked tar, not a copy.
 *
 * The harness unpacks the same bytes with Python's tarfile (images/harness/trainyard_harness/bundle.py), and the
 * analysis must read what will run: a bundle the two could read differently is refused, not read one way. So a header
 * whose checksum is wrong (tarfile ends the archive there), an entry of any kind but a regular file, a folder or a
 * link (devices, fifos, contiguous files, unknown types), a sparse entry, two names for one entry (two PAX headers,
 * two long names, or both), a global PAX header that names paths, a path named twice, and a link leading outside.
 */
export function unpackTarGz(archive: Buffer, maxBytes = MAX_UNPACKED_BYTES): BundleFile[] {
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: maxBytes });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw new BundleTooLarge(maxBytes);
    throw new InvalidBundle(`bundle is not a gzip-compressed tar: ${(error as Error).message}`);
  }
  const files: BundleFile[] = [];
  const seen = new Set<string>();
  let offset = 0;
  // A GNU 'L' (or 'K', a link's target) entry or a PAX 'x' header names the next entry only.
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax: Map<string, string> | undefined;
  while (offset + BLOCK <= tar.length) {
    const at = offset;
    const block = tar.subarray(offset, offset + BLOCK);
    if (block.every((b) => b === 0)) break;
    if (!checksumHolds(block)) throw new InvalidBundle(`bundle has a tar header with a wrong checksum at byte ${at}`);
    const field = (start: number, length: number) =>
      block
        .subarray(start, start + length)
        .toString('utf8')
        .replace(/\0.*$/s, '');
    const size = Number.parseInt(field(124, 12).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) throw new InvalidBundle(`bundle has a corrupt tar header at byte ${at}`);
    if (at + BLOCK + size > tar.length) throw new InvalidBundle(`bundle is truncated inside the entry at byte ${at}`);
    const type = field(156, 1) || '0';
    const body = tar.subarray(at + BLOCK, at + BLOCK + size);
    offset += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
    const twice = () => new InvalidBundle(`bundle names the entry at byte ${offset} twice over (at byte ${at})`);
    if (type === 'L' || type === 'K') {
      const name = body.toString('utf8').replace(/\0.*$/s, '');
      if ((type === 'L' ? longName : longLink) !== undefined) throw twice();
      if (type === 'L') longName = name;
      else longLink = name;
      continue;
    }
    if (type === 'x' || type === 'g') {
      const records = paxRecords(body, at);
      for (const key of records.keys()) {
        // Bundles never need these, and honouring them would let this reader and tarfile see different files.
        if (key === 'size' || key.startsWith('GNU.sparse.'))
          throw new InvalidBundle(`bundle has a PAX ${key} record at byte ${at}`);
        if (type === 'g' && (key === 'path' || key === 'linkpath'))
          throw new InvalidBundle(`bundle has a global PAX ${key} record at byte ${at}`);
      }
      if (type === 'g') continue;
      if (pax !== undefined) throw twice();
      pax = records;
      continue;
    }
    const prefix = field(345, 155);
    const paxPath = pax?.get('path') || undefined;
    if (paxPath !== undefined && longName !== undefined) throw twice();
    let path = paxPath ?? longName ?? (prefix ? `${prefix}/${field(0, 100)}` : field(0, 100));
    const linkTarget = pax?.get('linkpath') || longLink || field(157, 100);
    longName = undefined;
    longLink = undefined;
    pax = undefined;
    path = path.replace(/^\.\//, '');
    if (path.startsWith('/') || path.split('/').includes('..'))
      throw new InvalidBundle(`bundle path escapes the project: ${path}`);
    if (path.includes('\0')) throw new InvalidBundle(`bundle path holds a NUL character: ${JSON.stringify(path)}`);
    const key = path
      .split('/')
      .filter((part) => part !== '' && part !== '.')
      .join('/');
    if (seen.has(key)) throw new InvalidBundle(`bundle names ${path} twice; each path may appear once`);
    seen.add(key);
    if (type === '5') continue;
    if (type === '1' || type === '2') {
      // A symbolic link's target is relative to its folder; a hard link's names another entry, from the root.
      const from = type === '2' ? path.split('/').slice(0, -1).join('/') : '';
      if (linkTarget.startsWith('/') || !staysInside(from ? `${from}/${linkTarget}` : linkTarget))
        throw new InvalidBundle(`bundle link ${path} -> ${linkTarget} leads outside the project`);
      continue;
    }
    if (type !== '0' && type !== '\0')
      throw new InvalidBundle(
        `bundle entry ${path} is of tar type ${JSON.stringify(type)}: a bundle holds regular files, folders and links only`,
      );
    files.push({ path, content: body, mode: Number.parseInt(field(100, 8).trim() || '644', 8) });
  }
  return files;
}

/** Hex sha256 of bytes, or of a string's UTF-8. */
export function sha256Hex(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** The largest file, in bytes, a workload analysis reads. */
export const MAX_ANALYSED_FILE_BYTES = 512 * 1024;

/**
 * What textFilesOf gives a source file too large to read: a NUL, which no text it keeps holds (a file with one is
 * binary, and Python refuses to run it), then why. The analysis then knows the file is there and unread, so the
 * settings it may make are unknown, where leaving it out would read as "not in the bundle".
 */
const UNREAD_MARK = '\0unread: ';

/** Why a file's text was not read, when `text` is textFilesOf's stand-in for it; else undefined. */
export function unreadReason(text: string): string | undefined {
  return text.startsWith(UNREAD_MARK) ? text.slice(UNREAD_MARK.length) : undefined;
}

/**
 * Text files a workload analysis reads (Python sources and configs), by path; binaries are left out. A file over
 * `maxFileBytes` is kept as a stand-in saying so (see unreadReason); a leading UTF-8 byte order mark is dropped, as
 * Python drops it when it runs or imports the file.
 */
export function textFilesOf(
  files: readonly BundleFile[],
  maxFileBytes = MAX_ANALYSED_FILE_BYTES,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const file of files) {
    if (!/\.(py|json|ya?ml|toml|cfg|txt|sh)$/i.test(file.path)) continue;
    if (file.content.length > maxFileBytes) {
      out[file.path] =
        `${UNREAD_MARK}${file.content.length} bytes, over the ${maxFileBytes / 1024} KiB the analysis reads`;
      continue;
    }
    if (file.content.includes(0)) continue;
    out[file.path] = file.content.toString('utf8').replace(/^\uFEFF/, '');
  }
  return out;
}
