/**
 * Packs a project directory into the code bundle the API takes (tar.gz via lambdas/shared/tarball.ts), honouring
 * .gitignore and .trainyardignore (lib/cli/ignore.ts) and skipping VCS data, dependencies, local mode data and
 * bytecode. Refuses an unreadable directory and a bundle over the limit before anything is sent.
 */
import { type Dirent, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { compareCodeUnits } from '../../lambdas/domain/code-unit-order';
import {
  type BundleFile,
  InvalidBundle,
  MAX_UNPACKED_BYTES,
  packTarGz,
  sha256Hex,
  textFilesOf,
} from '../../lambdas/shared/tarball';
import { CliError, EXIT_CODES } from './exit-codes';
import { ALWAYS_SKIPPED, IGNORE_FILES, type IgnoreRule, ignoredBy, parseIgnoreFile } from './ignore';

/** What packing a directory produced. */
export interface PackedProject {
  /** The absolute directory that was packed. */
  readonly root: string;
  readonly archive: Buffer;
  /** Size of the archive, bytes (what the API's bundle limits apply to). */
  readonly bytes: number;
  readonly sha256: string;
  /** Packed files, relative paths, sorted. */
  readonly files: ReadonlyArray<{ readonly path: string; readonly size: number }>;
  /** Python sources and configs by path, for POST /estimate. */
  readonly textFiles: Record<string, string>;
  /** `textFiles` as JSON, in UTF-8 bytes: what sending them would take. */
  readonly textFilesBytes: number;
  /** Entries left out that are not ignore-file matches: symbolic links and special files. */
  readonly skipped: readonly string[];
}

/** Limits applied while packing. */
export interface PackLimits {
  /** Largest archive, bytes (config limits.maxBundleMiB). */
  readonly maxBundleBytes: number;
  /** Largest uncompressed tar, bytes. @default MAX_UNPACKED_BYTES */
  readonly maxUnpackedBytes?: number;
}

const BLOCK = 512;

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}

/** Packs `directory` for submission; throws CliError (exit 2) naming the problem when it cannot. */
export function packDirectory(directory: string, limits: PackLimits): PackedProject {
  const root = resolve(directory);
  let rootStat: ReturnType<typeof statSync>;
  try {
    rootStat = statSync(root);
  } catch (error) {
    throw new CliError(
      `cannot read project directory ${directory}: ${describeFsError(error)}`,
      EXIT_CODES.usage,
      'UnreadableDirectory',
    );
  }
  if (!rootStat.isDirectory()) {
    throw new CliError(`${directory} is not a directory: submit a project folder`, EXIT_CODES.usage, 'NotADirectory');
  }

  const maxUnpacked = limits.maxUnpackedBytes ?? MAX_UNPACKED_BYTES;
  // A project inside a git work tree also honours the ignore files of the folders above it, up to the work tree's
  // root, and the repository's info/exclude, as `git status` would: a root .gitignore's `.env` stays out of a
  // subfolder's bundle. Rules of the project's own folders, deeper, come after them and win.
  const outer = outerIgnoreRules(root, directory);
  const isIgnored = (rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean =>
    ignoredBy(rules, path, isDirectory) ??
    (outer ? ignoredBy(outer.rules, `${outer.prefix}${path}`, isDirectory) : undefined) ??
    false;
  const files: BundleFile[] = [];
  const skipped: string[] = [];
  let tarBytes = 2 * BLOCK;

  const walk = (relativeDir: string, inherited: readonly IgnoreRule[]): void => {
    const absoluteDir = relativeDir === '' ? root : join(root, relativeDir);
    let entries: Dirent[];
    try {
      entries = readdirSync(absoluteDir, { withFileTypes: true });
    } catch (error) {
      throw new CliError(
        `cannot read ${relativeDir === '' ? `project directory ${directory}` : `folder ${relativeDir} in ${directory}`}: ${describeFsError(error)}`,
        EXIT_CODES.usage,
        'UnreadableDirectory',
      );
    }
    const rules = [...inherited];
    for (const name of IGNORE_FILES) {
      if (!entries.some((e) => e.name === name && e.isFile())) continue;
      rules.push(
        ...parseIgnoreFile(readProjectFile(join(absoluteDir, name), relativeDir, name, directory), relativeDir),
      );
    }
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const path = relativeDir === '' ? entry.name : `${relativeDir}/${entry.name}`;
      if (entry.isDirectory()) {
        if ((ALWAYS_SKIPPED as readonly string[]).includes(entry.name)) continue;
        if (isIgnored(rules, path, true)) continue;
        walk(path, rules);
        continue;
      }
      if (!entry.isFile()) {
        // Links could point outside the project and devices/sockets have no content; the bundle is regular files.
        if (!isIgnored(rules, path, false)) skipped.push(path);
        continue;
      }
      if (isIgnored(rules, path, false)) continue;
      const absolute = join(absoluteDir, entry.name);
      const size = statSync(absolute).size;
      tarBytes += BLOCK + Math.ceil(size / BLOCK) * BLOCK;
      if (tarBytes > maxUnpacked) {
        throw new CliError(
          `project ${directory} is over ${mib(maxUnpacked)} unpacked (reached at ${path}); the platform unpacks at most ${mib(maxUnpacked)}: add large data, outputs and checkpoints to .trainyardignore`,
          EXIT_CODES.usage,
          'BundleTooLarge',
          { unpackedBytesAtLeast: tarBytes, maxUnpackedBytes: maxUnpacked },
        );
      }
      const content = readProjectFileBytes(absolute, path, directory);
      // Executable bits survive (scripts like run.sh); everything else is a plain readable file.
      const mode = statSync(absolute).mode & 0o111 ? 0o755 : 0o644;
      files.push({ path, content, mode });
    }
  };
  walk('', []);

  if (files.length === 0) {
    throw new CliError(
      `project directory ${directory} has no files to submit (after .gitignore/.trainyardignore and the always-skipped ${ALWAYS_SKIPPED.join(', ')})`,
      EXIT_CODES.usage,
      'EmptyProject',
    );
  }
  let archive: Buffer;
  try {
    archive = packTarGz(files);
  } catch (error) {
    // A file the archive format cannot hold is the project's to fix, like an unreadable one: a usage error.
    if (!(error instanceof InvalidBundle)) throw error;
    throw new CliError(`cannot pack ${directory}: ${error.message}`, EXIT_CODES.usage, 'UnpackableProject');
  }
  if (archive.length > limits.maxBundleBytes) {
    throw new CliError(
      `code bundle for ${directory} is ${mib(archive.length)} (${archive.length} bytes) compressed; the limit is ${mib(limits.maxBundleBytes)} (${limits.maxBundleBytes} bytes): add large data, outputs and checkpoints to .trainyardignore`,
      EXIT_CODES.usage,
      'BundleTooLarge',
      { bytes: archive.length, maxBundleBytes: limits.maxBundleBytes },
    );
  }
  const textFiles = textFilesOf(files);
  return {
    root,
    archive,
    bytes: archive.length,
    sha256: sha256Hex(archive),
    files: files
      .map((f) => ({ path: f.path, size: f.content.length }))
      .sort((a, b) => compareCodeUnits(a.path, b.path)),
    textFiles,
    textFilesBytes: Buffer.byteLength(JSON.stringify(textFiles), 'utf8'),
    skipped,
  };
}

function readProjectFileBytes(absolute: string, path: string, directory: string): Buffer {
  try {
    return readFileSync(absolute);
  } catch (error) {
    throw new CliError(
      `cannot read ${path} in ${directory}: ${describeFsError(error)} (ignore it in .trainyardignore or fix its permissions)`,
      EXIT_CODES.usage,
      'UnreadableFile',
    );
  }
}

/**
 * The ignore rules that apply to `root` from outside it: those of the git work tree it is in (found by the nearest
 * `.git` above it), from the tree's root down to `root`'s parent, with `.git/info/exclude` first; paths tested
 * against them are `prefix` + the project-relative path. Undefined outside a work tree, or at its root (whose
 * own ignore files the walk reads; only info/exclude is added then).
 */
function outerIgnoreRules(root: string, directory: string): { prefix: string; rules: IgnoreRule[] } | undefined {
  let top = root;
  while (!existsSync(join(top, '.git'))) {
    const up = dirname(top);
    if (up === top) return undefined;
    top = up;
  }
  const rules: IgnoreRule[] = [];
  const exclude = join(top, '.git', 'info', 'exclude');
  if (existsSync(exclude)) rules.push(...parseIgnoreFile(readOuterFile(exclude, directory), ''));
  const inside = relative(top, root)
    .split(sep)
    .filter((part) => part !== '');
  for (let depth = 0; depth < inside.length; depth++) {
    const base = inside.slice(0, depth).join('/');
    for (const name of IGNORE_FILES) {
      const file = join(top, ...inside.slice(0, depth), name);
      if (existsSync(file) && statSync(file).isFile())
        rules.push(...parseIgnoreFile(readOuterFile(file, directory), base));
    }
  }
  if (rules.length === 0) return undefined;
  return { prefix: inside.length === 0 ? '' : `${inside.join('/')}/`, rules };
}

function readOuterFile(absolute: string, directory: string): string {
  try {
    return readFileSync(absolute, 'utf8');
  } catch (error) {
    throw new CliError(
      `cannot read ${absolute}, an ignore file of the git work tree ${directory} is in: ${describeFsError(error)}`,
      EXIT_CODES.usage,
      'UnreadableFile',
    );
  }
}

function readProjectFile(absolute: string, relativeDir: string, name: string, directory: string): string {
  return readProjectFileBytes(absolute, relativeDir === '' ? name : `${relativeDir}/${name}`, directory).toString(
    'utf8',
  );
}

function describeFsError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file or directory';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  if (code === 'ENOTDIR') return 'not a directory';
  return (error as Error).message;
}
