import { describe, expect, it } from 'vitest';
import { CliError, EXIT_CODES } from '../../lib/cli/exit-codes';
import { expandSweep, MAX_SWEEP_KEY_LENGTH, parseSweepParam, sweepJobKey } from '../../lib/cli/sweep';

describe('sweep parameters', () => {
  it('splits the values at commas and keeps everything after the first "=" as values', () => {
    expect(parseSweepParam('lr=1e-3,3e-4')).toEqual({ name: 'lr', values: ['1e-3', '3e-4'] });
    expect(parseSweepParam('opt=a=b,c')).toEqual({ name: 'opt', values: ['a=b', 'c'] });
    expect(parseSweepParam('_x9=only')).toEqual({ name: '_x9', values: ['only'] });
  });

  it.each([
    ['lr', '--param must be name=value1,value2,…'],
    ['=1,2', '--param must be name=value1,value2,…'],
    ['n-layer=1', '--param must be name=value1,value2,…'],
    ['lr=1,,2', '--param lr: values must not be empty'],
    ['lr=1,2,1', '--param lr: value "1" is given twice'],
    [`lr=${Array.from({ length: 101 }, (_, i) => i).join(',')}`, '--param lr: at most 100 values, got 101'],
  ])('refuses %s with exit 2: %s', (text, message) => {
    let error: unknown;
    try {
      parseSweepParam(text);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).exitCode).toBe(EXIT_CODES.usage);
    expect((error as CliError).message).toContain(message);
  });
});

describe('expanding a sweep', () => {
  it('makes every combination, the first parameter varying slowest, and fills every placeholder', () => {
    const jobs = expandSweep(
      [
        { name: 'a', values: ['1', '2'] },
        { name: 'b', values: ['x', 'y', 'z'] },
      ],
      ['python', 'train.py', '--a={a}', '--out=runs/{a}-{b}', '{}', '{9}'],
      6,
    );

    expect(jobs.map((j) => [j.index, j.params])).toEqual([
      [1, { a: '1', b: 'x' }],
      [2, { a: '1', b: 'y' }],
      [3, { a: '1', b: 'z' }],
      [4, { a: '2', b: 'x' }],
      [5, { a: '2', b: 'y' }],
      [6, { a: '2', b: 'z' }],
    ]);
    // Braces that are not a parameter's placeholder are left as they are.
    expect(jobs[5]?.command).toEqual(['python', 'train.py', '--a=2', '--out=runs/2-z', '{}', '{9}']);
  });

  it('refuses a parameter declared twice, and one more job than --max-jobs', () => {
    expect(() =>
      expandSweep(
        [
          { name: 'a', values: ['1'] },
          { name: 'a', values: ['2'] },
        ],
        ['{a}'],
        10,
      ),
    ).toThrow('--param a is declared twice; give all its values in one --param');
    const params = [{ name: 'a', values: ['1', '2', '3'] }];
    expect(expandSweep(params, ['{a}'], 3)).toHaveLength(3);
    expect(() => expandSweep(params, ['{a}'], 2)).toThrow('the sweep has 3 jobs (3 a), over --max-jobs 2');
  });

  it('keys each job by the sweep’s key and its index, within the 128 characters a key may have', () => {
    expect(sweepJobKey('cli-abc', 7)).toBe('cli-abc-7');
    expect(sweepJobKey('k'.repeat(MAX_SWEEP_KEY_LENGTH), 200)).toHaveLength(128);
  });
});
