// From bundle to reservation: the runtime the estimate uses and the most the reservation asks for.
import { describe, expect, it } from 'vitest';
import { assessWorkload, maxComputeSecondsOf, priceAssessment } from '../../lambdas/domain/assessment';
import { parseConfig } from '../../lib/config';
import { projectFiles } from '../support/projects';

const tiers = parseConfig({}).tiers;
const nanogpt = projectFiles('nanogpt-like');
// max_iters is an expression here, not a literal, so the analysis cannot tell the runtime.
const unknownRuntime = {
  files: nanogpt,
  command: ['python', 'train.py', 'config/train_small.py', "--max_iters=int(os.environ['STEPS'])"],
};

describe('assessWorkload and priceAssessment', () => {
  it('assumes a job of unknown runtime runs until its deadline, not for its tier’s whole maximum', () => {
    const withDeadline = assessWorkload(unknownRuntime, tiers, { deadlineSeconds: 3600 });
    expect(withDeadline.tier.id).toBe('gpu-small');
    expect(withDeadline.runtime).toMatchObject({ value: 3600, confidence: 'low' });
    expect(withDeadline.runtime.basis).toMatch(/until its deadline, 60 min/);
    // gpu-small: $0.526/h on-demand is the dearest price it pays (spot $0.19): 1 h → $0.53 at most.
    const priced = priceAssessment(withDeadline, undefined, { deadlineSeconds: 3600 });
    expect(priced.estimate.reservationUsd).toBeLessThanOrEqual(0.53);

    const without = assessWorkload(unknownRuntime, tiers);
    expect(without.runtime.value).toBe(7200); // gpu-small's maxRuntime, 2 h
  });

  it('reserves no more than the tier’s maximum runtime allows, whatever runtime the user gives', () => {
    const req = { tier: 'gpu-small', runtimeSeconds: 36_000 };
    const assessed = assessWorkload(unknownRuntime, tiers, req);
    expect(maxComputeSecondsOf(assessed.tier, req)).toBe(7200);
    // 2 h × $0.526/h = $1.052 → $1.06, where 10 h would ask for $5.26.
    expect(priceAssessment(assessed, undefined, req).estimate.reservationUsd).toBe(1.06);
  });
});

describe('a workload read as running for more than a year', () => {
  it.each([
    {
      what: 'max_iters = 10**200',
      config: 'max_iters = 10**200\n',
      runs: /would run about \S+ d on gpu-small/,
    },
    { what: 'n_embd = 1e200', config: 'n_embd = 10**200\nmax_iters = 2000\n', runs: /would run for ever on gpu-small/ },
  ])('is refused naming what to check ($what), even on a tier the user names', ({ config, runs }) => {
    const bundle = {
      files: { ...nanogpt, 'config/odd.py': config },
      command: ['python', 'train.py', 'config/train_small.py', 'config/odd.py'],
    };
    const refusal = (() => {
      try {
        assessWorkload(bundle, tiers, { tier: 'gpu-small' });
      } catch (error) {
        return error as Error;
      }
      throw new Error('expected a refusal');
    })();
    expect(refusal.name).toBe('InvalidRequirement');
    expect(refusal.message).toMatch(runs);
    expect(refusal.message).toContain(
      "over a year, where no tier runs a job longer than 14 days: check max_iters and the model's sizes, or give runtimeSeconds",
    );
    // A runtime the user gives is taken as it is.
    expect(assessWorkload(bundle, tiers, { tier: 'gpu-small', runtimeSeconds: 3600 }).runtime.value).toBe(3600);
  });

  it.each([
    {
      what: 'max_iters = 10**200',
      config: 'max_iters = 10**200\n',
      runs: /^the workload as read would run about \S+ d on gpu-/,
    },
    {
      what: 'n_embd = 1e200',
      config: 'n_embd = 10**200\nmax_iters = 2000\n',
      runs: /^the workload as read would run for ever on /,
    },
  ])('is refused the same way when no tier is named, not as a workload no tier fits ($what)', ({ config, runs }) => {
    const bundle = {
      files: { ...nanogpt, 'config/odd.py': config },
      command: ['python', 'train.py', 'config/train_small.py', 'config/odd.py'],
    };
    let refusal: Error | undefined;
    try {
      assessWorkload(bundle, tiers);
    } catch (error) {
      refusal = error as Error;
    }
    expect(refusal?.name).toBe('InvalidRequirement');
    expect(refusal?.message).toMatch(runs);
    expect(refusal?.message).not.toMatch(/Infinity|NaN/);
  });
});
