// Code bundle tar.gz: long and non-ASCII paths round-trip through our reader and Python's tarfile (the harness's
// reader) by UTF-8 bytes, short paths are written exactly as before, and hand-built PAX paths are checked on read.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { type BundleFile, InvalidBundle, packTarGz, unpackTarGz } from '../../lambdas/shared/tarball';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const bytes = (text: string) => Buffer.byteLength(text);
const CJK_FOLDER = (char: string) => char.repeat(24); // 24 characters, 72 bytes

/** Paths that earlier versions truncated or refused, and paths exactly at the ustar limits. */
const LONG_PATHS: Record<string, string> = {
  'a 101-byte ASCII file name': `${'n'.repeat(98)}.py`,
  'a 101-byte ASCII file name in a folder': `src/${'n'.repeat(98)}.py`,
  'a deep CJK path over 255 bytes': `${['深', '层', '目', '录'].map(CJK_FOLDER).join('/')}/模型/train.py`,
  'a folder part over 155 bytes but under 155 characters': `${['数', '据', '集'].map(CJK_FOLDER).join('/')}/模型/train.py`,
  'a twin whose folders differ only past byte 155': `${['数', '据', '集'].map(CJK_FOLDER).join('/')}/模板/train.py`,
  'a 100-byte name under a 155-byte prefix': `${'p'.repeat(100)}/${'q'.repeat(54)}/${'n'.repeat(100)}`,
  'a 100-byte CJK name under a 155-byte CJK prefix': `${'模'.repeat(51)}ab/${'型'.repeat(33)}a`,
  'a 100-byte path with no prefix': 'x'.repeat(100),
  'a 156-byte prefix': `${'p'.repeat(156)}/${'n'.repeat(100)}`,
  'a 990-byte path (PAX record length 1001)': `${'d'.repeat(200)}/${'f'.repeat(789)}`,
};

function bundleOf(paths: readonly string[]): BundleFile[] {
  return paths.map((path, index) => ({
    path,
    content: Buffer.from(`print(${JSON.stringify(path)})\n${'#'.repeat(index * 300)}`),
    mode: index % 2 ? 0o755 : 0o644,
  }));
}

interface RawEntry {
  readonly type: string;
  readonly name: string;
  readonly header: Buffer;
  readonly body: Buffer;
}

/** The entries of a tar as written, checking each header's checksum and that bodies are padded to 512 bytes. */
function rawEntries(archive: Buffer): RawEntry[] {
  const tar = gunzipSync(archive);
  expect(tar.length % 512).toBe(0);
  const entries: RawEntry[] = [];
  let offset = 0;
  while (!tar.subarray(offset, offset + 512).every((b) => b === 0)) {
    const header = tar.subarray(offset, offset + 512);
    const unsummed = Buffer.from(header);
    unsummed.fill(0x20, 148, 156);
    expect(Number.parseInt(header.subarray(148, 154).toString('ascii'), 8)).toBe(unsummed.reduce((s, b) => s + b, 0));
    const size = Number.parseInt(header.subarray(124, 135).toString('ascii'), 8);
    const padded = Math.ceil(size / 512) * 512;
    expect(tar.subarray(offset + 512 + size, offset + 512 + padded).every((b) => b === 0)).toBe(true);
    entries.push({
      type: header.toString('latin1', 156, 157),
      name: header.subarray(0, 100).toString('utf8').replace(/\0.*$/s, ''),
      header: Buffer.from(header),
      body: Buffer.from(tar.subarray(offset + 512, offset + 512 + size)),
    });
    offset += 512 + padded;
  }
  expect(tar.subarray(offset).length).toBe(1024);
  expect(tar.subarray(offset).every((b) => b === 0)).toBe(true);
  return entries;
}

/** A ustar header built field by field, independently of the writer under test. */
function ustarHeader(fields: { name: string; size: number; mode?: number; type?: string; prefix?: string }): Buffer {
  const block = Buffer.alloc(512, 0);
  const put = (text: string, at: number) => Buffer.from(text, 'utf8').copy(block, at);
  put(fields.name, 0);
  put(`${(fields.mode ?? 0o644).toString(8).padStart(7, '0')}\0`, 100);
  put('0000000\0', 108);
  put('0000000\0', 116);
  put(`${fields.size.toString(8).padStart(11, '0')}\0`, 124);
  put('00000000000\0', 136);
  put('        ', 148);
  put(fields.type ?? '0', 156);
  put('ustar\u000000', 257);
  put(fields.prefix ?? '', 345);
  const sum = block.reduce((s, b) => s + b, 0);
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return block;
}

function pad(body: Buffer): Buffer {
  return Buffer.concat([body, Buffer.alloc((512 - (body.length % 512)) % 512, 0)]);
}

/** A tar.gz of hand-built entries: each a header and its body. */
function handBuilt(entries: readonly { header: Buffer; body: Buffer }[]): Buffer {
  return gzipSync(Buffer.concat([...entries.flatMap((e) => [e.header, pad(e.body)]), Buffer.alloc(1024, 0)]));
}

function paxEntry(type: 'x' | 'g', records: string): { header: Buffer; body: Buffer } {
  const body = Buffer.from(records, 'utf8');
  return { header: ustarHeader({ name: '././@PaxHeader', size: body.length, type }), body };
}

function fileEntry(name: string, content: string): { header: Buffer; body: Buffer } {
  const body = Buffer.from(content);
  return { header: ustarHeader({ name, size: body.length }), body };
}

/** `"<length> path=<path>\n"` with the length found by hand, for paths short enough to take 2 or 3 digits. */
function paxPathRecord(path: string): string {
  const rest = bytes(` path=${path}\n`);
  const length = rest + 2 <= 99 ? rest + 2 : rest + 3;
  return `${length} path=${path}\n`;
}

/** What Python's tarfile (the harness's reader) makes of an archive: name, mode, type and sha256 of each member. */
function readWithPythonTarfile(archive: Buffer): [string, number, string, string][] {
  const dir = mkdtempSync(join(tmpdir(), 'trainyard-tarball-'));
  dirs.push(dir);
  const file = join(dir, 'code.tar.gz');
  writeFileSync(file, archive);
  const script = [
    'import hashlib, json, sys, tarfile',
    "with tarfile.open(sys.argv[1], 'r:gz') as tar:",
    '    print(json.dumps([[m.name, m.mode, m.type.decode(), hashlib.sha256(tar.extractfile(m).read()).hexdigest()]',
    '                      for m in tar.getmembers()]))',
  ].join('\n');
  const run = spawnSync('/usr/bin/python3', ['-c', script, file], { encoding: 'utf8' });
  expect(run.stderr).toBe('');
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout) as [string, number, string, string][];
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');
const byPath = (a: { path: string }, b: { path: string }) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);

describe('packTarGz writes long and non-ASCII paths by UTF-8 bytes', () => {
  it.each(Object.entries(LONG_PATHS))('round-trips %s through unpackTarGz', (_, path) => {
    const files = bundleOf([path, 'train.py']);

    const unpacked = unpackTarGz(packTarGz(files));

    expect([...unpacked].sort(byPath)).toEqual([...files].sort(byPath));
  });

  it('round-trips every long path together, byte-identical, with no two collapsing onto one path', () => {
    const files = bundleOf(Object.values(LONG_PATHS));

    const unpacked = unpackTarGz(packTarGz(files));

    expect(new Set(unpacked.map((f) => f.path)).size).toBe(files.length);
    expect([...unpacked].sort(byPath)).toEqual([...files].sort(byPath));
  });

  it("writes paths that Python's tarfile reads back exactly, with the same modes and contents", () => {
    const files = bundleOf([...Object.values(LONG_PATHS), 'train.py']);

    const members = readWithPythonTarfile(packTarGz(files));

    expect(members.sort((a, b) => (a[0] < b[0] ? -1 : 1))).toEqual(
      [...files].sort(byPath).map((f) => [f.path, f.mode, '0', sha256(f.content)]),
    );
  });

  it('splits a folder part over 155 bytes but under 155 characters by bytes, with no PAX header', () => {
    const path = LONG_PATHS['a folder part over 155 bytes but under 155 characters'] ?? '';

    const entries = rawEntries(packTarGz(bundleOf([path])));

    expect(entries.map((e) => e.type)).toEqual(['0']);
    const prefix = entries[0]?.header.subarray(345, 500).toString('utf8').replace(/\0.*$/s, '') ?? '';
    expect(bytes(prefix)).toBeLessThanOrEqual(155);
    expect(`${prefix}/${entries[0]?.name}`).toBe(path);
  });

  it('writes paths exactly at the ustar limits as plain ustar entries', () => {
    const atLimits = [
      LONG_PATHS['a 100-byte name under a 155-byte prefix'] ?? '',
      LONG_PATHS['a 100-byte CJK name under a 155-byte CJK prefix'] ?? '',
      LONG_PATHS['a 100-byte path with no prefix'] ?? '',
    ];

    const entries = rawEntries(packTarGz(bundleOf(atLimits)));

    expect(entries.map((e) => e.type)).toEqual(['0', '0', '0']);
    expect(entries.map((e) => bytes(e.name))).toEqual([100, 100, 100]);
  });

  it('precedes a path ustar cannot hold with a PAX header whose record length counts itself', () => {
    const path = LONG_PATHS['a 990-byte path (PAX record length 1001)'] ?? '';

    const entries = rawEntries(packTarGz(bundleOf([path])));

    expect(entries.map((e) => e.type)).toEqual(['x', '0']);
    expect(entries[0]?.body.toString('utf8')).toBe(`1001 path=${path}\n`);
    expect(entries[0]?.body.length).toBe(1001);
  });

  it('writes a PAX record for a non-ASCII path with its length in UTF-8 bytes', () => {
    const path = LONG_PATHS['a deep CJK path over 255 bytes'] ?? '';

    const entries = rawEntries(packTarGz(bundleOf([path])));

    expect(entries.map((e) => e.type)).toEqual(['x', '0']);
    expect(entries[0]?.body.toString('utf8')).toBe(paxPathRecord(path));
  });
});

describe('packTarGz writes short paths exactly as before', () => {
  it('writes a short path as one ustar header, byte for byte, followed by its padded content', () => {
    const content = Buffer.from('print(1)\n');

    const tar = gunzipSync(packTarGz([{ path: 'src/train.py', content, mode: 0o755 }]));

    expect(tar).toEqual(
      Buffer.concat([
        ustarHeader({ name: 'src/train.py', size: content.length, mode: 0o755 }),
        pad(content),
        Buffer.alloc(1024, 0),
      ]),
    );
  });

  it('splits a long ASCII path at the last slash that leaves at most 155 bytes of prefix, with no PAX header', () => {
    const path = `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(30)}/x.py`;
    const content = Buffer.from('x');

    const tar = gunzipSync(packTarGz([{ path, content }]));

    expect(tar.subarray(0, 512)).toEqual(
      ustarHeader({ name: 'x.py', prefix: `${'d'.repeat(60)}/${'e'.repeat(60)}/${'f'.repeat(30)}`, size: 1 }),
    );
  });
});

describe('unpackTarGz reads PAX headers', () => {
  it('applies a PAX path to the next entry only', () => {
    const archive = handBuilt([
      paxEntry('x', paxPathRecord('deep/模型/train.py')),
      fileEntry('fallback', 'a'),
      fileEntry('b.py', 'b'),
    ]);

    const paths = unpackTarGz(archive).map((f) => f.path);

    expect(paths).toEqual(['deep/模型/train.py', 'b.py']);
  });

  it('refuses a global PAX header that names paths (tarfile would rename every later entry with it)', () => {
    const archive = handBuilt([paxEntry('g', paxPathRecord('global/name.py')), fileEntry('train.py', 'a')]);

    expect(() => unpackTarGz(archive)).toThrow(new InvalidBundle('bundle has a global PAX path record at byte 0'));
  });

  it.each([
    ['a parent folder', '../outside.py'],
    ['a parent folder inside the path', 'src/../../outside.py'],
    ['an absolute path', '/etc/cron.d/job'],
  ])('refuses a PAX path with %s', (_, path) => {
    const archive = handBuilt([paxEntry('x', paxPathRecord(path)), fileEntry('innocent.py', 'a')]);

    expect(() => unpackTarGz(archive)).toThrow(new InvalidBundle(`bundle path escapes the project: ${path}`));
  });

  it.each([
    ['a length that overruns the header', '99 path=a.py\n'],
    ['a length that is not a number', 'x path=a.py\n'],
    ['a record with no key', '8 =a.py\n'],
  ])('refuses a PAX header with %s', (_, records) => {
    const archive = handBuilt([paxEntry('x', records), fileEntry('a.py', 'a')]);

    expect(() => unpackTarGz(archive)).toThrow(new InvalidBundle('bundle has a corrupt PAX header at byte 0'));
  });

  it('refuses a PAX size record, which would let tarfile read a different body', () => {
    const archive = handBuilt([paxEntry('x', '12 size=100\n'), fileEntry('a.py', 'a')]);

    expect(() => unpackTarGz(archive)).toThrow(new InvalidBundle('bundle has a PAX size record at byte 0'));
  });
});

describe('packTarGz orders its entries the same on every machine', () => {
  it('writes them in code-unit order, which no locale changes (the bundle’s sha256 keys idempotent submits)', () => {
    // Collation would put `a.py` before `B.py` (English), `hello.py` before `chart.py` (Czech), `aa.py` last (Danish).
    const names = ['hello.py', 'a.py', 'chart.py', 'B.py', 'aa.py', 'zeta.py'];
    const archive = packTarGz(names.map((path) => ({ path, content: Buffer.from(path) })));
    expect(unpackTarGz(archive).map((f) => f.path)).toEqual([
      'B.py',
      'a.py',
      'aa.py',
      'chart.py',
      'hello.py',
      'zeta.py',
    ]);
  });
});
