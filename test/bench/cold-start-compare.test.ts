// The command line of bench/cold-start-compare.ts: what it accepts and how it refuses the rest.

import { describe, expect, it } from 'vitest';
import { CompareUsageError, parseCompareArgs } from '../../bench/cold-start-compare';

describe('parseCompareArgs', () => {
  it('takes the commit, then handlers, with 15 runs unless told', () => {
    expect(parseCompareArgs(['c95ed33'])).toEqual({ base: 'c95ed33', runs: 15, handlers: [] });
    expect(parseCompareArgs(['HEAD~3', '--runs', '5', 'api', 'finalize'])).toEqual({
      base: 'HEAD~3',
      runs: 5,
      handlers: ['api', 'finalize'],
    });
  });

  it.each([
    { what: 'no commit', argv: [], message: 'name the commit to compare with' },
    {
      what: 'runs that are not a whole number',
      argv: ['x', '--runs', '2.5'],
      message: '--runs must be a whole number 1-200, got 2.5',
    },
    { what: 'no value for --runs', argv: ['x', '--runs'], message: '--runs must be a whole number 1-200, got nothing' },
    { what: 'an unknown option', argv: ['x', '--quick'], message: 'unknown option --quick' },
  ])('refuses $what', ({ argv, message }) => {
    expect(() => parseCompareArgs(argv)).toThrow(CompareUsageError);
    expect(() => parseCompareArgs(argv)).toThrow(message);
  });
});
