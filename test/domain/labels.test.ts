// Job labels: what a label and a selector list may hold, and the exact message for each way to get one wrong.
import { describe, expect, it } from 'vitest';
import {
  InvalidLabel,
  labelsFrom,
  labelsSchema,
  labelsText,
  MAX_LABELS,
  matchesLabels,
  parseLabel,
  parseLabelSelectors,
} from '../../lambdas/domain/labels';

const KEY_RULE = "label keys must be 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit";
const VALUE_RULE = "label values must be 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-'";

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidLabel);
    return (error as Error).message;
  }
  throw new Error('expected InvalidLabel');
}

describe('parseLabel', () => {
  it('splits at the first = and keeps the value as written', () => {
    expect(parseLabel('lr=3e-4')).toEqual({ key: 'lr', value: '3e-4' });
    expect(parseLabel('sweep=cli-0f8c9d1e-aa')).toEqual({ key: 'sweep', value: 'cli-0f8c9d1e-aa' });
    expect(parseLabel('model.size=GPT2_Medium')).toEqual({ key: 'model.size', value: 'GPT2_Medium' });
  });

  it.each([
    ['lr', '"lr": a label is key=value, e.g. sweep=lr-grid'],
    ['=3', `"=3": ${KEY_RULE}`],
    ['LR=3', `"LR=3": ${KEY_RULE}`],
    ['-lr=3', `"-lr=3": ${KEY_RULE}`],
    [`${'k'.repeat(64)}=1`, `"${'k'.repeat(64)}=1": ${KEY_RULE}`],
    ['lr=', `"lr=": ${VALUE_RULE}`],
    ['lr=a b', `"lr=a b": ${VALUE_RULE}`],
    ['lr=1,2', `"lr=1,2": ${VALUE_RULE}`],
    ['lr=a=b', `"lr=a=b": ${VALUE_RULE}`],
    [`lr=${'v'.repeat(129)}`, `"lr=${'v'.repeat(129)}": ${VALUE_RULE}`],
  ])('refuses %j', (text, message) => {
    expect(messageOf(() => parseLabel(text))).toBe(message);
  });

  it('takes the longest key and value the rules allow', () => {
    const text = `${'k'.repeat(63)}=${'v'.repeat(128)}`;
    expect(parseLabel(text)).toEqual({ key: 'k'.repeat(63), value: 'v'.repeat(128) });
  });
});

describe('labelsFrom', () => {
  it('collects the labels by key', () => {
    expect(labelsFrom(['team-goal=q3', 'lr=0.1'])).toEqual({ 'team-goal': 'q3', lr: '0.1' });
    expect(labelsFrom([])).toEqual({});
    // A key that names an Object.prototype member is a label like any other, not "given twice".
    expect(labelsFrom(['constructor=x'])).toEqual({ constructor: 'x' });
  });

  it('refuses a key given twice, naming both values', () => {
    expect(messageOf(() => labelsFrom(['lr=0.1', 'lr=0.2']))).toBe('label lr is given twice (lr=0.1 and lr=0.2)');
  });

  it(`refuses more than ${MAX_LABELS} labels`, () => {
    const texts = Array.from({ length: 17 }, (_, i) => `k${i}=v`);
    expect(Object.keys(labelsFrom(texts.slice(0, 16)))).toHaveLength(16);
    expect(messageOf(() => labelsFrom(texts))).toBe('a job may carry at most 16 labels, got 17');
  });
});

describe('labelsSchema (what the API stores)', () => {
  it('accepts 16 valid labels and refuses a 17th, a bad key and a bad value', () => {
    const sixteen = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, 'v']));
    expect(labelsSchema.safeParse(sixteen).success).toBe(true);
    const tooMany = labelsSchema.safeParse({ ...sixteen, k16: 'v' });
    expect(tooMany.error?.issues.map((i) => i.message)).toEqual(['a job may carry at most 16 labels']);
    // zod nests a record key's failure under an invalid_key issue (the API's error message unwraps it).
    const badKey = labelsSchema.safeParse({ Key: 'v' }).error?.issues[0];
    expect(badKey?.code === 'invalid_key' && badKey.issues.map((i) => i.message)).toEqual([KEY_RULE]);
    expect(labelsSchema.safeParse({ key: 'a/b' }).error?.issues.map((i) => i.message)).toEqual([VALUE_RULE]);
  });
});

describe('parseLabelSelectors', () => {
  it('reads key=value and bare keys, in order', () => {
    expect(parseLabelSelectors('sweep=cli-1,lr')).toEqual([{ key: 'sweep', value: 'cli-1' }, { key: 'lr' }]);
    expect(parseLabelSelectors('done')).toEqual([{ key: 'done' }]);
  });

  it.each([
    ['', '"": selectors are key=value or key, separated by single commas (none empty), e.g. sweep=lr-grid,lr'],
    [
      'a=1,,b',
      '"a=1,,b": selectors are key=value or key, separated by single commas (none empty), e.g. sweep=lr-grid,lr',
    ],
    ['a=1,', '"a=1,": selectors are key=value or key, separated by single commas (none empty), e.g. sweep=lr-grid,lr'],
    ['a,b,c,d,e,f,g,h,i', 'at most 8 label selectors, got 9'],
    ['Sweep=x', `"Sweep=x": ${KEY_RULE}`],
    ['sweep=', `"sweep=": ${VALUE_RULE}`],
    ['sweep=a=b', `"sweep=a=b": ${VALUE_RULE}`],
    ['lr=1,lr=2', 'label lr is selected twice; a job has one value per label'],
    ['lr,lr=2', 'label lr is selected twice; a job has one value per label'],
  ])('refuses %j', (text, message) => {
    expect(messageOf(() => parseLabelSelectors(text))).toBe(message);
  });
});

describe('matchesLabels', () => {
  const labels = { sweep: 's1', lr: '0.1' };
  it.each([
    [[{ key: 'sweep', value: 's1' }], true],
    [[{ key: 'sweep' }], true],
    [
      [
        { key: 'sweep', value: 's1' },
        { key: 'lr', value: '0.1' },
      ],
      true,
    ],
    [[{ key: 'sweep', value: 's2' }], false],
    [
      [
        { key: 'sweep', value: 's1' },
        { key: 'lr', value: '0.2' },
      ],
      false,
    ],
    [[{ key: 'owner' }], false],
    [[{ key: 'constructor' }], false],
    [[], true],
  ])('labels sweep=s1,lr=0.1 against %j: %s', (selectors, expected) => {
    expect(matchesLabels(labels, selectors)).toBe(expected);
  });

  it('matches a job without labels only when nothing is selected', () => {
    expect(matchesLabels(undefined, [])).toBe(true);
    expect(matchesLabels(undefined, [{ key: 'sweep' }])).toBe(false);
  });
});

describe('labelsText', () => {
  it('writes the labels in key order as a selector list that matches exactly them', () => {
    const labels = { sweep: 's1', lr: '0.1', arch: 'gpt2' };
    const text = labelsText(labels);

    expect(text).toBe('arch=gpt2,lr=0.1,sweep=s1');
    const selectors = parseLabelSelectors(text ?? '');
    expect(matchesLabels(labels, selectors)).toBe(true);
    expect(matchesLabels({ ...labels, lr: '0.2' }, selectors)).toBe(false);
  });

  it('takes another separator, and has no text for a job without labels', () => {
    expect(labelsText({ b: '2', a: '1' }, ' ')).toBe('a=1 b=2');
    expect(labelsText(undefined)).toBeUndefined();
    expect(labelsText({})).toBeUndefined();
  });
});
