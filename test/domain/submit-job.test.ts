// The SubmitJob request's helpers. shellJoin is checked against Python's own shlex.split, which is how the harness
// reads TRAINYARD_RESUME_ARGS, so a word that would come back split or refused shows here.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { containerOverridesOf, type SubmitJobInput, shellJoin } from '../../lambdas/domain/submit-job';

/** What the harness's `shlex.split` makes of a string. */
function pythonSplit(text: string): string[] {
  const script = 'import json, shlex, sys; print(json.dumps(shlex.split(sys.argv[1])))';
  return JSON.parse(execFileSync('/usr/bin/python3', ['-c', script, text], { encoding: 'utf8' }));
}

describe('shellJoin', () => {
  it('leaves plain words bare and quotes the others', () => {
    expect(shellJoin(['--init_from=resume', '--out_dir=/tmp/a,b'])).toBe('--init_from=resume --out_dir=/tmp/a,b');
    expect(shellJoin(["--note=it's", '--name=a b', ''])).toBe(`'--note=it'\\''s' '--name=a b' ''`);
  });

  it.each([
    [['--init_from=resume']],
    [["--note=it's fine", '--glob=*.pt', '$HOME', 'a"b', 'back\\slash', 'tab\there', '', 'ünïcode']],
    [['--resume', "''", "'", '"']],
  ])('comes back from shlex.split as the same words: %j', (words) => {
    expect(pythonSplit(shellJoin(words))).toEqual(words);
  });
});

describe('containerOverridesOf', () => {
  const overrides = { Command: ['python', 'train.py'], Environment: [{ Name: 'A', Value: '1' }] };
  const base = { JobName: 'j-a1', JobQueue: 'q', JobDefinition: 'd' };

  it('reads a single-node request’s ContainerOverrides and a multi-node request’s node overrides', () => {
    const multi: SubmitJobInput = {
      ...base,
      NodeOverrides: { NodePropertyOverrides: [{ TargetNodes: '0:', ContainerOverrides: overrides }] },
    };
    expect(containerOverridesOf({ ...base, ContainerOverrides: overrides })).toEqual(overrides);
    expect(containerOverridesOf(multi)).toEqual(overrides);
    expect(containerOverridesOf(base)).toEqual({});
  });
});
