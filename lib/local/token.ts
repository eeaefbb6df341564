/**
 * Local mode's on-disk handshake: a bearer token (created once, owner-only permissions) that the loopback API server
 * requires, and a state file saying where the running server listens. The CLI reads both to reach local mode.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod/mini';
import { describeIssues } from '../../lambdas/domain/zod-issues';

/** Folder (relative to the project root) that holds local mode's data, token and state. */
export const LOCAL_DIR = '.trainyard';
/** Token file name inside the local folder. */
export const TOKEN_FILE = 'local-token';
/** State file name inside the local folder. */
export const STATE_FILE = 'local.json';

/** Raised when the token or state file exists but cannot be used; the message names the file and what is wrong. */
export class LocalStateError extends Error {
  override name = 'LocalStateError';
}

/** What a running local server records about itself. */
export const localStateSchema = z.strictObject({
  apiUrl: z.url({ protocol: /^http$/, hostname: /^127\.0\.0\.1$/ }),
  pid: z.int().check(z.positive()),
  startedAt: z.iso.datetime(),
});

/** The state file's content. */
export type LocalState = z.output<typeof localStateSchema>;

/** The paths of local mode's files under a local folder (default `<cwd>/.trainyard`). */
export function localPaths(dir: string = join(process.cwd(), LOCAL_DIR)) {
  return { dir, token: join(dir, TOKEN_FILE), state: join(dir, STATE_FILE) } as const;
}

const TOKEN_PATTERN = /^[A-Za-z0-9_-]{32,128}$/;

/**
 * Returns the local token, creating it on first use: 32 random bytes, base64url, in a file only the owner can read.
 * Creation uses an exclusive open, so two processes starting at once agree on one token.
 */
export function ensureLocalToken(dir?: string): string {
  const paths = localPaths(dir);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  try {
    writeFileSync(paths.token, `${randomBytes(32).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  // A token copied in or created by an older version may be group/world readable; the server's trust rests on it.
  if ((statSync(paths.token).mode & 0o077) !== 0) chmodSync(paths.token, 0o600);
  const token = readLocalToken(dir);
  if (token === undefined) throw new LocalStateError(`${paths.token} vanished while it was being created`);
  return token;
}

/** Reads the local token; undefined when the file does not exist. */
export function readLocalToken(dir?: string): string | undefined {
  const paths = localPaths(dir);
  const text = readIfExists(paths.token);
  if (text === undefined) return undefined;
  const token = text.trim();
  if (!TOKEN_PATTERN.test(token)) {
    throw new LocalStateError(
      `${paths.token} does not hold a local token (expected 32-128 characters of A-Z a-z 0-9 _ -); delete it and restart \`trainyard local\``,
    );
  }
  return token;
}

/** Writes the state file atomically (temp file + rename), so a reader never sees half of it. */
export function writeLocalState(state: LocalState, dir?: string): void {
  const paths = localPaths(dir);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  const parsed = localStateSchema.parse(state);
  const temp = `${paths.state}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(parsed, null, 2)}\n`, { mode: 0o600 });
  renameSync(temp, paths.state);
}

/** Reads the state file; undefined when it does not exist. */
export function readLocalState(dir?: string): LocalState | undefined {
  const paths = localPaths(dir);
  const text = readIfExists(paths.state);
  if (text === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new LocalStateError(`${paths.state} is not JSON (${(error as Error).message}); restart \`trainyard local\``);
  }
  const result = localStateSchema.safeParse(json);
  if (!result.success) {
    throw new LocalStateError(
      `${paths.state} is not a local mode state file (${describeIssues(result.error.issues)}); restart \`trainyard local\``,
    );
  }
  return result.data;
}

/** Removes the state file if it still describes this server (a newer server's file is left alone). */
export function removeLocalState(server: Pick<LocalState, 'pid' | 'apiUrl'>, dir?: string): void {
  const paths = localPaths(dir);
  let current: LocalState | undefined;
  try {
    current = readLocalState(dir);
  } catch {
    current = undefined;
  }
  if (current?.pid === server.pid && current.apiUrl === server.apiUrl) rmSync(paths.state, { force: true });
}

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new LocalStateError(`cannot read ${path}: ${(error as Error).message}`);
  }
}

/**
 * Constant-time comparison of a presented secret with the expected one (hashing first equalises lengths): the API's
 * bearer token, the engines' access keys and signatures.
 */
export function tokenMatches(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}
