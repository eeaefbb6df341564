// From bundle to reservation: the runtime the estimate uses and the most the reservation asks for.
import { describe, expect, it } from 'vitest';
import { assessWorkload, estimateSummary, maxComputeSecondsOf, priceAssessment } from '../../lambdas/domain/assessment';
import { parseJobChange } from '../../lambdas/domain/job';
import { packTarGz, textFilesOf, unpackTarGz } from '../../lambdas/shared/tarball';
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
    { what: 'max_iters = 10**300', config: 'max_iters = 10**300\n', runs: /would run for ever on gpu-small/ },
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
      "over a year, where no tier runs a job longer than 14 days: check max_iters and the model's sizes, or give runtimeSeconds (the CLI's --runtime)",
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
      what: 'max_iters = 10**300',
      config: 'max_iters = 10**300\n',
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

describe('a model whose sizes are past what a number holds', () => {
  it.each([
    { what: 'no tier named', req: {} },
    { what: 'a tier named', req: { tier: 'gpu-small' } },
    { what: 'a tier, runtime and GPU memory given', req: { tier: 'gpu-small', runtimeSeconds: 3600, gpuMemoryGiB: 8 } },
  ])('is refused naming the sizes to check, never estimated as Infinity ($what)', ({ req }) => {
    // n_embd² overflows a double: parameter count and memory would be Infinity, which no job record holds.
    const bundle = {
      files: { ...nanogpt, 'config/odd.py': `n_embd = 1${'0'.repeat(200)}\n` },
      command: ['python', 'train.py', 'config/train_small.py', 'config/odd.py'],
    };
    expect(() => assessWorkload(bundle, tiers, req)).toThrow(
      expect.objectContaining({
        name: 'InvalidRequirement',
        message: expect.stringMatching(
          /^the model as read is too large for its parameter count and memory to be figured \(n_layer \d+, n_embd 1e\+200, block_size \d+, vocab_size \d+, batch_size \d+\): check those sizes in the code$/,
        ),
      }),
    );
  });

  it('is estimated when large but finite, and the estimate is one a job record holds', () => {
    const bundle = {
      files: { ...nanogpt, 'config/odd.py': 'n_embd = 10**100\n' },
      command: ['python', 'train.py', 'config/train_small.py', 'config/odd.py'],
    };
    const req = { tier: 'gpu-small', runtimeSeconds: 3600 };
    const summary = estimateSummary(priceAssessment(assessWorkload(bundle, tiers, req), undefined, req));
    expect(summary.gpuMemoryGiB).toBeGreaterThan(1e190);
    expect(() => parseJobChange({ estimate: summary })).not.toThrow();
  });
});

describe('the analysis reads the files the job runs, as the Analyze step unpacks them', () => {
  /** A bundle's text files as the Analyze step reads them: packed, unpacked, then textFilesOf. */
  const analysed = (extra: Record<string, string>): Record<string, string> =>
    textFilesOf(
      unpackTarGz(
        packTarGz(
          Object.entries({ ...nanogpt, ...extra }).map(([path, text]) => ({
            path,
            content: Buffer.from(text, 'utf8'),
          })),
        ),
      ),
    );

  it('reads a setting on a line after a UTF-8 byte order mark, as Python does', () => {
    const files = analysed({ 'config/big.py': '\uFEFFmax_iters = 600000\n' });
    const { analysis } = assessWorkload(
      { files, command: ['python', 'train.py', 'config/train_small.py', 'config/big.py'] },
      tiers,
    );
    expect(analysis.hyperparameters.max_iters).toEqual({ value: 600000, source: 'config/big.py:1' });
  });

  it('says a config file too large to read is unread, not absent, and rates what it may set as a guess', () => {
    // 600 KiB: over the 512 KiB the analysis reads. The job runs it, so its 600000 steps are what the job trains.
    const files = analysed({ 'config/big.py': `max_iters = 600000\n${'# padding\n'.repeat(60_000)}` });
    const command = ['python', 'train.py', 'config/train_small.py', 'config/big.py'];
    const { analysis, runtime } = assessWorkload({ files, command }, tiers);
    expect(analysis.unknowns).toContain(
      'config/big.py is in the bundle but was not read (600019 bytes, over the 512 KiB the analysis reads): the settings it makes are unknown',
    );
    expect(analysis.unknowns.join('\n')).not.toContain('not in the bundle');
    expect(runtime.confidence).toBe('low');
    // The same file under the limit is read, and its figure has the confidence a read file gives.
    const read = assessWorkload({ files: analysed({ 'config/big.py': 'max_iters = 600000\n' }), command }, tiers);
    expect(read.analysis.hyperparameters.max_iters?.value).toBe(600000);
    expect(read.runtime.confidence).not.toBe('low');
  });
});
