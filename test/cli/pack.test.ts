// Packing a project directory: which files land in the archive (ignore files, always-skipped folders, nested
// rules, negation), what the archive holds byte for byte, and the precise refusals (unreadable, empty, too large).
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { unpackTarGz } from '../../lambdas/shared/tarball';
import { CliError, EXIT_CODES } from '../../lib/cli/exit-codes';
import { packDirectory } from '../../lib/cli/pack';

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** Creates a project from path → content. */
function project(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(tmpdir(), 'trainyard-pack-'));
  roots.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const LIMITS = { maxBundleBytes: 1024 * 1024 };

function archived(root: string): string[] {
  return unpackTarGz(packDirectory(root, LIMITS).archive)
    .map((f) => f.path)
    .sort();
}

function refusal(run: () => unknown): CliError {
  try {
    run();
  } catch (error) {
    if (error instanceof CliError) return error;
    throw error;
  }
  throw new Error('expected a CliError');
}

describe('packDirectory honours ignore rules', () => {
  it('honours the ignore files above a project inside a git work tree, as git status would; its own rules win', () => {
    const repo = project({
      '.git/HEAD': 'ref: refs/heads/main\n',
      '.git/info/exclude': 'scratch.txt\n',
      '.gitignore': '.env\n*.ckpt\nsecrets/\n/proj/anchored.txt\n',
      'experiments/.gitignore': 'outputs/\n',
      'experiments/proj/train.py': 'print(1)\n',
      'experiments/proj/.env': 'AWS_SECRET_ACCESS_KEY=x\n',
      'experiments/proj/model.ckpt': 'weights',
      'experiments/proj/best.ckpt': 'weights',
      'experiments/proj/secrets/key.pem': 'k',
      'experiments/proj/outputs/run.log': 'l',
      'experiments/proj/scratch.txt': 's',
      // Anchored to the repository's root: /proj/ there, not experiments/proj/, so this file stays.
      'experiments/proj/anchored.txt': 'a',
      'experiments/proj/.trainyardignore': '!best.ckpt\n',
    });

    expect(archived(join(repo, 'experiments', 'proj'))).toEqual([
      '.trainyardignore',
      'anchored.txt',
      'best.ckpt',
      'train.py',
    ]);
  });

  it('reads no ignore files above a project that is not in a git work tree', () => {
    const parent = project({ '.gitignore': '*.ckpt\n', 'proj/train.py': 'print(1)\n', 'proj/model.ckpt': 'w' });
    expect(archived(join(parent, 'proj'))).toEqual(['model.ckpt', 'train.py']);
  });

  it('leaves out what .gitignore and .trainyardignore match, and .git, node_modules, .trainyard, __pycache__', () => {
    const root = project({
      'train.py': 'print(1)\n',
      'model.py': 'x = 1\n',
      '.gitignore': '*.pt\n/out/\ndata/\n!data/keep.txt\n',
      '.trainyardignore': 'notes.md\n!important.pt\n',
      'important.pt': 'weights',
      'big.pt': 'weights',
      'notes.md': 'n',
      'README.md': 'r',
      'out/run1.log': 'x',
      'src/out/kept.py': 'y = 2\n',
      'data/keep.txt': 'k',
      'data/raw.bin': 'r',
      '.git/HEAD': 'ref: refs/heads/main\n',
      'node_modules/x/index.js': '',
      '.trainyard/local-token': 't',
      'pkg/__pycache__/m.cpython-311.pyc': 'c',
      'pkg/__init__.py': '',
    });
    // data/ is ignored as a folder, so data/keep.txt cannot be re-included (git does not descend into it either);
    // /out/ is anchored, so src/out stays.
    expect(archived(root)).toEqual(
      [
        '.gitignore',
        '.trainyardignore',
        'README.md',
        'important.pt',
        'model.py',
        'pkg/__init__.py',
        'src/out/kept.py',
        'train.py',
      ].sort(),
    );
  });

  it('applies a nested .gitignore below its own folder only', () => {
    const root = project({
      'a.csv': '1',
      'sub/.gitignore': '*.csv\n',
      'sub/b.csv': '2',
      'sub/c.py': '3',
    });
    expect(archived(root)).toEqual(['a.csv', 'sub/.gitignore', 'sub/c.py']);
  });

  it('stores contents byte for byte and keeps the executable bit', () => {
    const binary = randomBytes(3000);
    const root = project({ 'run.sh': '#!/bin/sh\necho hi\n', 'weights.bin': binary, 'train.py': 'print(1)\n' });
    chmodSync(join(root, 'run.sh'), 0o755);
    const packed = packDirectory(root, LIMITS);
    const files = new Map(unpackTarGz(packed.archive).map((f) => [f.path, f]));
    expect(files.get('weights.bin')?.content.equals(binary)).toBe(true);
    expect(files.get('run.sh')?.mode).toBe(0o755);
    expect(files.get('train.py')?.mode).toBe(0o644);
    expect(packed.bytes).toBe(packed.archive.length);
    expect(packed.textFiles).toEqual({ 'run.sh': '#!/bin/sh\necho hi\n', 'train.py': 'print(1)\n' });
  });

  it('skips symbolic links and reports them', () => {
    const root = project({ 'train.py': 'print(1)\n' });
    symlinkSync('/etc/hostname', join(root, 'outside'));
    const packed = packDirectory(root, LIMITS);
    expect(packed.files.map((f) => f.path)).toEqual(['train.py']);
    expect(packed.skipped).toEqual(['outside']);
  });
});

describe('packDirectory refuses what it cannot send', () => {
  it('refuses a directory that does not exist', () => {
    const error = refusal(() => packDirectory('/nonexistent/trainyard-project', LIMITS));
    expect(error.exitCode).toBe(EXIT_CODES.usage);
    expect(error.message).toBe(
      'cannot read project directory /nonexistent/trainyard-project: no such file or directory',
    );
  });

  it('refuses a file given as the project', () => {
    const root = project({ 'train.py': 'print(1)\n' });
    const file = join(root, 'train.py');
    const error = refusal(() => packDirectory(file, LIMITS));
    expect(error.exitCode).toBe(EXIT_CODES.usage);
    expect(error.message).toBe(`${file} is not a directory: submit a project folder`);
  });

  it('refuses a project whose files are all ignored', () => {
    const root = project({ '.trainyardignore': '*\n' });
    const error = refusal(() => packDirectory(root, LIMITS));
    expect(error.code).toBe('EmptyProject');
    expect(error.exitCode).toBe(EXIT_CODES.usage);
  });

  it('refuses a bundle over the compressed limit, naming both sizes', () => {
    // Random bytes do not compress: 200 KiB of them make an archive just over 200 KiB.
    const root = project({ 'data.bin': randomBytes(200 * 1024), 'train.py': 'print(1)\n' });
    const limit = 100 * 1024;
    const error = refusal(() => packDirectory(root, { maxBundleBytes: limit }));
    expect(error.exitCode).toBe(EXIT_CODES.usage);
    expect(error.code).toBe('BundleTooLarge');
    const bytes = error.details?.bytes as number;
    expect(bytes).toBeGreaterThan(200 * 1024);
    expect(error.message).toBe(
      `code bundle for ${root} is ${(bytes / 1048576).toFixed(1)} MiB (${bytes} bytes) compressed; the limit is 0.1 MiB (102400 bytes): add large data, outputs and checkpoints to .trainyardignore`,
    );
  });

  it('refuses a project over the unpacked limit before reading it all', () => {
    const root = project({ 'a.bin': Buffer.alloc(4096), 'b.bin': Buffer.alloc(4096) });
    // Tar size after a.bin: 1024 (end blocks) + 512 + 4096 = 5632; after b.bin: 10240.
    const error = refusal(() => packDirectory(root, { maxBundleBytes: LIMITS.maxBundleBytes, maxUnpackedBytes: 8000 }));
    expect(error.code).toBe('BundleTooLarge');
    expect(error.details).toEqual({ unpackedBytesAtLeast: 10240, maxUnpackedBytes: 8000 });
    expect(error.message).toContain('(reached at b.bin)');
  });
});
