/**
 * The API's tar reader (lambdas/shared/tarball.ts, which the API and the analysis use) and the harness's unpacker
 * (images/harness/trainyard_harness/bundle.py, Python's tarfile) on bundles the two could read differently: a bundle
 * the API accepts runs with the very files the analysis read; one the harness would refuse, the API refuses at
 * submission (else every attempt fails at its start). Each case builds a raw tar by hand.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { textFilesOf, unpackTarGz } from '../../lambdas/shared/tarball';

const HARNESS = resolve(import.meta.dirname, '../../images/harness');

function header(name: string, size: number, type = '0', opts: { badChecksum?: boolean; link?: string } = {}): Buffer {
  const b = Buffer.alloc(512, 0);
  b.write(name, 0, 100, 'utf8');
  b.write('0000644\0', 100, 'ascii');
  b.write('0000000\0', 108, 'ascii');
  b.write('0000000\0', 116, 'ascii');
  b.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 'ascii');
  b.write('00000000000\0', 136, 'ascii');
  b.write('        ', 148, 'ascii');
  b.write(type, 156, 'ascii');
  if (opts.link) b.write(opts.link, 157, 100, 'utf8');
  b.write('ustar\u000000', 257, 'ascii');
  let sum = 0;
  for (const byte of b) sum += byte;
  if (opts.badChecksum) sum += 1;
  b.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return b;
}
const pad = (d: Buffer) => Buffer.concat([d, Buffer.alloc((512 - (d.length % 512)) % 512)]);
const file = (name: string, text: string, type = '0', opts = {}) =>
  Buffer.concat([header(name, Buffer.byteLength(text), type, opts), pad(Buffer.from(text))]);
function record(key: string, value: string): string {
  const rest = Buffer.byteLength(` ${key}=${value}\n`);
  let n = rest + 1;
  while (n !== rest + String(n).length) n = rest + String(n).length;
  return `${n} ${key}=${value}\n`;
}
const pax = (records: [string, string][], type = 'x') => {
  const body = Buffer.from(records.map(([k, v]) => record(k, v)).join(''));
  return Buffer.concat([header('././@PaxHeader', body.length, type), pad(body)]);
};
const tgz = (...parts: Buffer[]) => gzipSync(Buffer.concat([...parts, Buffer.alloc(1024)]));

type Seen = { refused: string } | { files: Record<string, string> };

function api(archive: Buffer): Seen {
  try {
    // What the analysis reads (textFilesOf keeps the last of a repeated path), of the files the API accepted.
    const files = unpackTarGz(archive);
    const out: Record<string, string> = {};
    for (const [path, text] of Object.entries(textFilesOf(files))) out[path] = text;
    return { files: out };
  } catch (error) {
    return { refused: (error as Error).message };
  }
}

const PY = `
import json, os, sys
sys.path.insert(0, sys.argv[1])
from trainyard_harness import bundle
root = os.path.realpath(sys.argv[3])
try:
    bundle._unpack(sys.argv[2], root, 'bundle')
except bundle.BundleError as e:
    print(json.dumps({'refused': str(e)})); sys.exit(0)
out = {}
for d, _, names in os.walk(root):
    for n in names:
        p = os.path.join(d, n)
        if n.endswith('.py') and os.path.isfile(p):
            out[os.path.relpath(p, root)] = open(p, encoding='utf-8').read()
print(json.dumps({'files': out}))
`;

function harness(archive: Buffer): Seen {
  const dir = mkdtempSync(join(tmpdir(), 'tarball-parity-'));
  const path = join(dir, 'b.tar.gz');
  writeFileSync(path, archive);
  const root = mkdtempSync(join(tmpdir(), 'tarball-parity-root-'));
  const run = spawnSync('/usr/bin/python3', ['-c', PY, HARNESS, path, root], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(run.stderr);
  return JSON.parse(run.stdout) as Seen;
}

/** Only .py files are compared (the analysis reads more, but a .py is what runs). */
function pyOnly(seen: Seen): Seen {
  if ('refused' in seen) return { refused: 'refused' };
  return { files: Object.fromEntries(Object.entries(seen.files).filter(([p]) => p.endsWith('.py'))) };
}

describe('the API reader and the harness see the same bundle', () => {
  const cases: [string, Buffer][] = [
    [
      'two PAX path headers before one entry',
      tgz(pax([['path', 'train.py']]), pax([['path', 'other.py']]), file('x.bin', 'print("ran")')),
    ],
    ['a PAX GNU.sparse.name record', tgz(pax([['GNU.sparse.name', 'train.py']]), file('notes.bin', 'print("ran")'))],
    [
      'a header with a bad checksum ends the archive for tarfile only',
      tgz(
        file('train.py', 'print("ran")'),
        file('junk', '', '0', { badChecksum: true }),
        file('train.py', 'print("analysed")'),
      ),
    ],
    ['a contiguous-file (type 7) entry', tgz(file('train.py', 'print("ran")', '7'))],
    ['an entry of an unknown type', tgz(file('train.py', 'print("ran")', 'Z'))],
    [
      'a GNU long name and a PAX path for one entry',
      tgz(
        Buffer.concat([header('././@LongLink', 9, 'L'), pad(Buffer.from('train.py\0'))]),
        pax([['path', 'other.py']]),
        file('x.bin', 'print("ran")'),
      ),
    ],
    ['a global PAX path header', tgz(pax([['path', 'train.py']], 'g'), file('x.bin', 'print("ran")'))],
  ];
  it.each(cases)('%s: refused by the API, or read by both alike', (_name, archive) => {
    const read = api(archive);
    if ('refused' in read) return;
    expect(pyOnly(read)).toEqual(pyOnly(harness(archive)));
  });

  it('reads an ordinary bundle alike, so the refusals above are not all the API does', () => {
    const archive = tgz(pax([['path', 'src/train.py']]), file('x.bin', 'print("ran")'), file('config/a.py', 'n = 1'));
    expect(api(archive)).toEqual({ files: { 'src/train.py': 'print("ran")', 'config/a.py': 'n = 1' } });
    expect(pyOnly(api(archive))).toEqual(pyOnly(harness(archive)));
  });

  const refusedByHarness: [string, Buffer][] = [
    ['one path named twice', tgz(file('train.py', 'print(1)'), file('train.py', 'print(2)'))],
    ['a symbolic link leading outside', tgz(file('train.py', 'print(1)'), file('etc', '', '2', { link: '/etc' }))],
    ['a fifo', tgz(file('train.py', 'print(1)'), file('pipe', '', '6'))],
  ];
  it.each(refusedByHarness)('%s: refused by both', (_name, archive) => {
    expect(api(archive)).toHaveProperty('refused');
    expect(harness(archive)).toHaveProperty('refused');
  });
});
