/**
 * The gitignore subset the CLI honours when it packs a project: comments, blank lines, `*`, `?`, `[…]` (with
 * ranges and `[:digit:]`-style classes), `**` (leading, trailing and middle), anchoring by a slash, directory-only
 * patterns (trailing `/`), negation (`!`) and backslash escapes, with later rules overriding earlier ones and nested
 * ignore files applying below their folder. Globs follow git's wildmatch, edge cases included (checked against git),
 * and match bytes as git does: `?` is one byte of a name's UTF-8, so `é` takes `??`.
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

function escapeClassMember(char: string): string {
  return /[\\\]^[-]/.test(char) ? `\\${char}` : char;
}

/** A regex source that matches nothing: what git makes of a pattern wildmatch rejects as malformed. */
const NEVER_MATCHES = '(?!)';

/** git's `[:name:]` classes, ASCII only as in git's own ctype tables (checked against git 2.39 char by char). */
const POSIX_CLASSES: Readonly<Record<string, string>> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  blank: '\\t ',
  cntrl: '\\x00-\\x1f\\x7f',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-/:-@\\[-`{-~',
  space: '\\t\\n\\r ',
  upper: 'A-Z',
  xdigit: '0-9A-Fa-f',
};

/**
 * Translates the bracket expression opening at `glob[open]` the way git's wildmatch reads it: a `]` right after
 * `[` or `[!` is a member, `\` escapes the next character, `a-z` is a range (an inverted one is empty), and
 * `[:name:]` is a POSIX class. Returns undefined when git finds the bracket malformed (never closed, or an unknown
 * class name), which makes the whole pattern match nothing.
 */
function bracketToRegex(glob: string, open: number, pathname: boolean): { source: string; next: number } | undefined {
  let i = open + 1;
  const negated = glob[i] === '!' || glob[i] === '^';
  if (negated) i += 1;
  let members = '';
  // The last single character seen, which a following `-` turns into a range start; none after a range or class.
  let previous: string | undefined;
  do {
    let char = glob[i];
    if (char === undefined) return undefined;
    if (char === '\\') {
      i += 1;
      char = glob[i];
      if (char === undefined) return undefined;
      members += escapeClassMember(char);
      previous = char;
    } else if (char === '-' && previous !== undefined && i + 1 < glob.length && glob[i + 1] !== ']') {
      i += 1;
      let last = glob[i] ?? '';
      if (last === '\\') {
        i += 1;
        last = glob[i] ?? '';
        if (last === '') return undefined;
      }
      if (previous <= last) members += `${escapeClassMember(previous)}-${escapeClassMember(last)}`;
      previous = undefined;
    } else if (char === '[' && glob[i + 1] === ':') {
      const close = glob.indexOf(']', i + 2);
      if (close === -1) return undefined;
      if (close - (i + 2) >= 1 && glob[close - 1] === ':') {
        const posix = POSIX_CLASSES[glob.slice(i + 2, close - 1)];
        if (posix === undefined) return undefined;
        members += posix;
        previous = undefined;
        i = close;
      } else {
        // No `:]` before the next `]`: this `[` is an ordinary member.
        members += '\\[';
        previous = '[';
      }
    } else {
      members += escapeClassMember(char);
      previous = char;
    }
    i += 1;
  } while (glob[i] !== ']');
  const next = i + 1;
  // git never lets a bracket match the `/` between folders when it matches a whole path.
  if (negated) return { source: `[^${members}${pathname ? '/' : ''}]`, next };
  if (members === '') return { source: NEVER_MATCHES, next };
  const source = `[${members}]`;
  return { source: pathname && new RegExp(source).test('/') ? `(?!/)${source}` : source, next };
}

/**
 * Translates a gitignore glob (no leading `!`, no trailing `/`) into a regex source matching a whole path, with
 * git's wildmatch semantics: a pattern git finds malformed (an unclosed bracket, an unknown `[:class:]`, a trailing
 * `\`) becomes a regex that matches nothing. `pathname` is set for patterns that contain a slash and are matched
 * against the whole relative path (git's WM_PATHNAME); it keeps brackets from matching `/`.
 */
export function globToRegexSource(glob: string, pathname = false): string {
  // git compares the text before the first wildcard separately and hands only the rest to wildmatch, so a `**`
  // right after that literal prefix counts as starting the pattern (git 2.39: `ab**/c` matches `abc` and `abx/y/c`).
  const prefixEnd = glob.search(/[*?[\\]/);
  let out = '';
  let i = 0;
  while (i < glob.length) {
    const char = glob[i] ?? '';
    if (char === '\\') {
      // A trailing backslash escapes nothing; wildmatch then never matches.
      if (i + 1 === glob.length) return NEVER_MATCHES;
      out += escapeRegex(glob[i + 1] ?? '');
      i += 2;
      continue;
    }
    if (char === '*') {
      let end = i;
      while (glob[end] === '*') end += 1;
      // A run of two or more stars that starts the pattern or follows a slash, and ends it or precedes a slash,
      // is git's `**`, however many stars it has; any other run is a single `*`.
      const starts = i === 0 || i === prefixEnd || glob[i - 1] === '/';
      if (end - i >= 2 && starts) {
        if (end === glob.length) {
          // Trailing `**` (after a slash, or the whole pattern): everything inside.
          out += '.*';
          i = end;
          continue;
        }
        if (glob[end] === '/') {
          // `**/`: zero or more folders.
          out += '(?:.*/)?';
          i = end + 1;
          continue;
        }
        if (glob[end] === '\\' && glob[end + 1] === '/') {
          // `**\/`: git skips its zero-folder shortcut here, so at least one folder.
          out += '.*';
          i = end;
          continue;
        }
      }
      out += '[^/]*';
      i = end;
      continue;
    }
    if (char === '?') {
      out += '[^/]';
      i += 1;
      continue;
    }
    if (char === '[') {
      const bracket = bracketToRegex(glob, i, pathname);
      if (bracket === undefined) return NEVER_MATCHES;
      out += bracket.source;
      i = bracket.next;
      continue;
    }
    out += escapeRegex(char);
    i += 1;
  }
  return out;
}

/** Drops trailing spaces (only spaces, as git does) unless the last one is escaped with a backslash. */
function trimTrailingSpaces(line: string): string {
  let firstTrailingSpace = -1;
  for (let i = 0; i < line.length; i += 1) {
    const char = line[i];
    if (char === ' ') {
      if (firstTrailingSpace === -1) firstTrailingSpace = i;
      continue;
    }
    if (char === '\\') {
      i += 1;
      if (i === line.length) return line;
    }
    firstTrailingSpace = -1;
  }
  return firstTrailingSpace === -1 ? line : line.slice(0, firstTrailingSpace);
}

/**
 * A string's UTF-8 bytes, one character each (U+0000–U+00FF): patterns and paths are compared in this form, so that
 * wildmatch's byte-wise `?`, `*` and brackets apply to the bytes git compares.
 */
function utf8Bytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/** Parses the text of one ignore file found in folder `base` ('' for the project root). */
export function parseIgnoreFile(text: string, base = ''): IgnoreRule[] {
  const rules: IgnoreRule[] = [];
  // A byte-order mark (some editors write one) is not part of the first pattern, as git reads it.
  for (const rawLine of text.replace(/^\uFEFF/, '').split('\n')) {
    // git drops one carriage return before the line break, then trailing spaces unless escaped with a backslash.
    let line = trimTrailingSpaces(rawLine.replace(/\r$/, ''));
    if (line === '' || line.startsWith('#')) continue;
    // `\!` and `\#` stay escaped: the glob reads them as literal characters, as git's wildmatch does.
    let negated = false;
    if (line.startsWith('!')) {
      negated = true;
      line = line.slice(1);
    }
    // git strips exactly one trailing slash; a pattern still ending in `/` can then match nothing.
    let directoryOnly = false;
    if (line.endsWith('/')) {
      directoryOnly = true;
      line = line.slice(0, -1);
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
      // `s`: a `**` matches every byte of a name, a newline in it too, as in git.
      regex: new RegExp(`^${globToRegexSource(utf8Bytes(line), anchored)}$`, 's'),
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
    if (rule.regex.test(utf8Bytes(subject))) ignored = !rule.negated;
  }
  return ignored;
}

/** Folder names never packed, whatever the ignore files say: VCS data, dependencies, local mode data, bytecode. */
export const ALWAYS_SKIPPED = ['.git', 'node_modules', '.trainyard', '__pycache__'] as const;

/** Ignore files read in every folder, in this order (so `.trainyardignore` can override `.gitignore`). */
export const IGNORE_FILES = ['.gitignore', '.trainyardignore'] as const;
