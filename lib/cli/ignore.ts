/**
 * The gitignore subset the CLI honours when it packs a project: comments, blank lines, `*`, `?`, `[…]`, `**`
 * (leading, trailing and middle), anchoring by a slash, directory-only patterns (trailing `/`), negation (`!`) and
 * backslash escapes, with later rules overriding earlier ones and nested ignore files applying below their folder.
 * As in git, a file inside an ignored folder cannot be re-included: the packer never descends into that folder.
 */

/** One compiled ignore rule. */
export interface IgnoreRule {
  /** Folder (relative to the project root, '' for the root) whose ignore file held the rule. */
  readonly base: string;
  readonly pattern: string;
  readonly negated: boolean;
  readonly directoryOnly: boolean;
  /** Matches the path relative to `base` (anchored patterns) or the entry's name (unanchored ones). */
  readonly regex: RegExp;
  readonly anchored: boolean;
}

function escapeRegex(char: string): string {
  return /[\\^$.*+?()[\]{}|]/.test(char) ? `\\${char}` : char;
}

/** Translates a gitignore glob (no leading `!`, no trailing `/`) into a regex source matching a whole path. */
export function globToRegexSource(glob: string): string {
  let out = '';
  let i = 0;
  while (i < glob.length) {
    const char = glob[i] ?? '';
    if (char === '\\' && i + 1 < glob.length) {
      out += escapeRegex(glob[i + 1] ?? '');
      i += 2;
      continue;
    }
    if (char === '*') {
      if (glob[i + 1] === '*') {
        const atStart = i === 0 || glob[i - 1] === '/';
        const atEnd = i + 2 === glob.length || glob[i + 2] === '/';
        if (atStart && atEnd) {
          if (i + 2 === glob.length) {
            // Trailing `**` (after a slash, or the whole pattern): everything inside.
            out += '.*';
            i += 2;
          } else {
            // `**/`: zero or more folders.
            out += '(?:.*/)?';
            i += 3;
          }
          continue;
        }
        // `**` glued to other characters is an ordinary `*`, as git treats it.
        out += '[^/]*';
        i += 2;
        continue;
      }
      out += '[^/]*';
      i += 1;
      continue;
    }
    if (char === '?') {
      out += '[^/]';
      i += 1;
      continue;
    }
    if (char === '[') {
      const close = glob.indexOf(']', i + 2);
      if (close !== -1) {
        let body = glob.slice(i + 1, close);
        const negate = body.startsWith('!') || body.startsWith('^');
        if (negate) body = body.slice(1);
        out += `[${negate ? '^' : ''}${body.replace(/\\/g, '\\\\').replace(/\//g, '')}]`;
        i = close + 1;
        continue;
      }
    }
    out += escapeRegex(char);
    i += 1;
  }
  return out;
}

/** Parses the text of one ignore file found in folder `base` ('' for the project root). */
export function parseIgnoreFile(text: string, base = ''): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  // A byte-order mark (some editors write one) is not part of the first pattern, as git reads it.
  for (const rawLine of text.replace(/^\uFEFF/, '').split(/\r?\n/)) {
    // Trailing spaces are dropped unless escaped with a backslash.
    let line = rawLine.replace(/(?<!\\)\s+$/, '');
    if (line === '' || line.startsWith('#')) continue;
    let negated = false;
    if (line.startsWith('!')) {
      negated = true;
      line = line.slice(1);
    } else if (line.startsWith('\\!') || line.startsWith('\\#')) {
      line = line.slice(1);
    }
    let directoryOnly = false;
    if (line.endsWith('/')) {
      directoryOnly = true;
      line = line.replace(/\/+$/, '');
    }
    if (line === '') continue;
    // A slash at the start or in the middle anchors the pattern to its ignore file's folder.
    const anchored = line.includes('/');
    if (line.startsWith('/')) line = line.slice(1);
    rules.push({
      base,
      pattern: rawLine.trim(),
      negated,
      directoryOnly,
      anchored,
      regex: new RegExp(`^${globToRegexSource(line)}$`),
    });
  }
  return rules;
}

/**
 * Whether `path` (relative to the project root, forward slashes) is ignored by `rules`, git's way: the last rule
 * that matches decides. Callers check folders before descending, so a path's parents are already known not ignored.
 */
export function isIgnored(rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean {
  return ignoredBy(rules, path, isDirectory) ?? false;
}

/** What the last of `rules` that matches `path` says (true: ignored, false: re-included); undefined when none does. */
export function ignoredBy(rules: readonly IgnoreRule[], path: string, isDirectory: boolean): boolean | undefined {
  let ignored: boolean | undefined;
  for (const rule of rules) {
    if (rule.directoryOnly && !isDirectory) continue;
    let relative: string;
    if (rule.base === '') relative = path;
    else if (path.startsWith(`${rule.base}/`)) relative = path.slice(rule.base.length + 1);
    else continue;
    const subject = rule.anchored ? relative : relative.slice(relative.lastIndexOf('/') + 1);
    if (rule.regex.test(subject)) ignored = !rule.negated;
  }
  return ignored;
}

/** Folder names never packed, whatever the ignore files say: VCS data, dependencies, local mode data, bytecode. */
export const ALWAYS_SKIPPED = ['.git', 'node_modules', '.trainyard', '__pycache__'] as const;

/** Ignore files read in every folder, in this order (so `.trainyardignore` can override `.gitignore`). */
export const IGNORE_FILES = ['.gitignore', '.trainyardignore'] as const;
