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
  ];
  it.each(cases)('%j → %j', (glob, source) => {
    expect(globToRegexSource(glob)).toBe(source);
  });
});
