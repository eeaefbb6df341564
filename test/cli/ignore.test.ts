// The gitignore subset the packer honours, rule by rule: each row is a pattern, a path, whether it is a folder, and
// what git itself would say (checked by hand against gitignore(5)).
import { describe, expect, it } from 'vitest';
import { globToRegexSource, isIgnored, parseIgnoreFile } from '../../lib/cli/ignore';

describe('isIgnored follows gitignore(5)', () => {
  const cases: Array<[string, string, boolean, boolean]> = [
    // [ignore file text, path, is a folder, ignored?]
    ['*.pt', 'model.pt', false, true],
    ['*.pt', 'out/ckpt/model.pt', false, true],
    ['*.pt', 'model.pth', false, false],
    ['data', 'data', true, true],
    ['data', 'src/data', true, true],
    ['data', 'data', false, true],
    ['data/', 'data', true, true],
    ['data/', 'data', false, false],
    ['data/', 'src/data', true, true],
    ['/data', 'data', true, true],
    ['/data', 'src/data', true, false],
    ['out/logs', 'out/logs', true, true],
    ['out/logs', 'src/out/logs', true, false],
    ['**/logs', 'logs', true, true],
    ['**/logs', 'a/b/logs', true, true],
    ['logs/**', 'logs', true, false],
    ['logs/**', 'logs/run1.txt', false, true],
    ['logs/**', 'logs/a/b.txt', false, true],
    ['a/**/b', 'a/b', true, true],
    ['a/**/b', 'a/x/y/b', true, true],
    ['a/**/b', 'c/a/b', true, false],
    ['ckpt-?', 'ckpt-1', true, true],
    ['ckpt-?', 'ckpt-12', true, false],
    ['*.py[cod]', 'x.pyc', false, true],
    ['*.py[cod]', 'x.py', false, false],
    ['run[!0-9]', 'runA', false, true],
    ['run[!0-9]', 'run7', false, false],
    ['*.log\n!keep.log', 'keep.log', false, false],
    ['*.log\n!keep.log', 'other.log', false, true],
    ['!keep.log\n*.log', 'keep.log', false, true],
    ['# a comment\n\n*.tmp', '# a comment', false, false],
    ['\\#hash', '#hash', false, true],
    ['\\!bang', '!bang', false, true],
    ['trailing   ', 'trailing', false, true],
    ['foo*bar', 'foo/bar', false, false],
    ['foo**bar', 'fooXbar', false, true],
    ['*', 'anything', false, true],
    ['src/*.txt', 'src/a.txt', false, true],
    ['src/*.txt', 'src/sub/a.txt', false, false],
    // A byte-order mark at the start of the file is not part of its first pattern (git strips it).
    ['\uFEFF*.log', 'train.log', false, true],
    // Rows below were each checked against real git 2.39 (`git check-ignore --no-index` and
    // `git ls-files -o -i --exclude-standard --directory` in a scratch repo holding that .gitignore and path);
    // the expectations are hard-coded so the tests never need the git binary.
    // POSIX classes inside brackets, ASCII only as git's ctype tables define them.
    ['[[:digit:]]x', '1x', false, true],
    ['[[:digit:]]x', 'ax', false, false],
    ['[![:digit:]]x', 'ax', false, true],
    ['[[:alpha:]]x', 'ax', false, true],
    ['[[:alpha:]]x', '1x', false, false],
    ['[[:space:]]x', ' x', false, true],
    ['[[:upper:][:digit:]]', 'A', false, true],
    // An unknown class name makes the whole pattern match nothing; `[:` without `:]` is just two members.
    ['[[:bogus:]]', 'b', false, false],
    ['[[:alpha]', ':', false, true],
    // A `]` right after `[` or `[!` is a member, and may start a range.
    ['[]]x', ']x', false, true],
    ['[]]x', 'x', false, false],
    ['[!]]x', 'ax', false, true],
    ['[!]]x', ']x', false, false],
    ['[]-a]x', '^x', false, true],
    // Backslash escapes inside brackets; an inverted range is empty; an unclosed bracket matches nothing.
    ['[\\]]x', ']x', false, true],
    ['[\\]]x', '\\]x', false, false],
    ['[a\\-z]', '-', false, true],
    ['[a\\-z]', 'b', false, false],
    ['[z-a]', 'm', false, false],
    ['[!z-a]x', 'qx', false, true],
    ['foo[', 'foo[', false, false],
    // A bracket in a pattern with a slash never matches the `/` between folders, even negated.
    ['x/a[!y]b', 'x/a/b', false, false],
    ['x/a[!y]b', 'x/azb', false, true],
    // Three or more stars: `**` where a `**` would be (start or after `/`, end or before `/`), else a `*`.
    ['***/x', 'x', false, true],
    ['***/x', 'a/b/x', false, true],
    ['a/***/b', 'a/b', false, true],
    ['a/***/b', 'a/x/y/b', false, true],
    ['a/***', 'a/b/c', false, true],
    ['a***b', 'axb', false, true],
    ['x/a***b', 'x/a/b', false, false],
    // git matches the literal text before the first wildcard apart, so a `**` right after it acts as leading.
    ['ab**/c', 'abc', false, true],
    ['ab**/c', 'abx/y/c', false, true],
    // A trailing unescaped backslash makes the pattern match nothing; before other characters it escapes them.
    ['foo\\', 'foo\\', false, false],
    ['foo\\', 'foo', false, false],
    ['foo\\/', 'foo\\', true, false],
    ['\\a', 'a', false, true],
    ['\\*', 'x', false, false],
    ['\\*', '*', false, true],
    // Only trailing spaces are dropped (not tabs), and `\\` before a space escapes the backslash, not the space.
    ['foo\t', 'foo\t', false, true],
    ['foo\t', 'foo', false, false],
    ['foo\\\\ ', 'foo\\', false, true],
    ['foo\\ ', 'foo ', false, true],
    // Only one trailing slash is stripped; what remains ends in `/` and matches nothing.
    ['foo//', 'foo', true, false],
    // wildmatch compares bytes: `?`, a bracket and a negated bracket each take one byte of a name's UTF-8.
    ['?.txt', 'é.txt', false, false],
    ['??.txt', 'é.txt', false, true],
    ['[é].txt', 'é.txt', false, false],
    ['[é][é].txt', 'é.txt', false, true],
    ['[!a][!a].txt', 'é.txt', false, true],
    ['a???b', 'a€b', false, true],
    ['a?b', 'a€b', false, false],
    ['[a-é]', 'b', false, true],
    ['[à-é]x', 'èx', false, false],
    ['é.txt', 'é.txt', false, true],
    ['*.txt', 'é.txt', false, true],
    ['a/**', 'a/line\nbreak', false, true],
  ];
  it.each(cases)('pattern %j, path %j (folder %s) → ignored %s', (text, path, isDirectory, expected) => {
    expect(isIgnored(parseIgnoreFile(text), path, isDirectory)).toBe(expected);
  });

  it('applies a nested ignore file only below its folder, relative to it', () => {
    const rules = [...parseIgnoreFile('*.csv'), ...parseIgnoreFile('/raw\n!keep.csv', 'data')];
    expect(isIgnored(rules, 'data/raw', true)).toBe(true);
    expect(isIgnored(rules, 'raw', true)).toBe(false);
    expect(isIgnored(rules, 'data/keep.csv', false)).toBe(false);
    expect(isIgnored(rules, 'keep.csv', false)).toBe(true);
    expect(isIgnored(rules, 'data/other.csv', false)).toBe(true);
  });
});

describe('globToRegexSource', () => {
  const cases: Array<[string, string]> = [
    ['*.py', '[^/]*\\.py'],
    ['**/x', '(?:.*/)?x'],
    ['a/**', 'a/.*'],
    ['a/**/b', 'a/(?:.*/)?b'],
    ['?', '[^/]'],
    ['[abc]', '[abc]'],
    ['[!abc]', '[^abc]'],
    ['a+b(c)', 'a\\+b\\(c\\)'],
    ['[]]', '[\\]]'],
    ['[[:digit:]]', '[0-9]'],
    ['***/x', '(?:.*/)?x'],
    ['foo\\', '(?!)'],
  ];
  it.each(cases)('%j → %j', (glob, source) => {
    expect(globToRegexSource(glob)).toBe(source);
  });
});
