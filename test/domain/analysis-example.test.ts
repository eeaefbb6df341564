/**
 * The analysis of the repository's own example, examples/nanogpt-shakespeare, read from disk the way the API reads a
 * bundle (every file, the text ones kept by textFilesOf), for the commands its README, the CLI docs and `npm run demo`
 * give. Its train.py sets no vocab_size: it builds the vocabulary from the text (`chars = sorted(set(text))`,
 * `ModelArgs(len(chars), …)`), 65 characters for tinyshakespeare.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { analyzeWorkload } from '../../lambdas/domain/analysis';
import { parseConfig } from '../../lib/config';
import { NANOGPT_DEMO } from '../../lib/local/cli-commands';
import { textFilesUnder } from '../support/projects';

const tiers = parseConfig({}).tiers;
const GiB = 1024 ** 3;
const ROOT = join(import.meta.dirname, '..', '..');

const exampleFiles = (example: string): Record<string, string> => textFilesUnder(join(ROOT, example));

const example = exampleFiles('examples/nanogpt-shakespeare');

/*
 * model.py's CharGPT, by hand: token embedding V·d and position embedding T·d; per block two LayerNorms (weight and
 * bias: 2·2d), qkv Linear (3d² + 3d), out Linear (d² + d), MLP up (4d² + 4d) and down (4d² + d), all with biases:
 * 12d² + 13d; the final LayerNorm 2d; the head shares the token embedding's matrix. That is the analysis's closed form
 * with bias = True, which it assumes when bias is not set (train.py has no bias setting).
 *   P = V·d + T·d + L·(12d² + 13d) + 2d, V = 65.
 */

describe('examples/nanogpt-shakespeare', () => {
  it('sizes config/g4dn_xlarge.py as the ~25M-parameter character model its README describes, on a T4', () => {
    const a = analyzeWorkload({ files: example, command: ['python', 'train.py', 'config/g4dn_xlarge.py'] }, tiers);
    // L=8, d=512, T=256: 65·512 + 256·512 + 8 × (12·262,144 + 13·512) + 2·512
    //   = 33,280 + 131,072 + 8 × 3,152,384 + 1,024 = 33,280 + 131,072 + 25,219,072 + 1,024 = 25,384,448.
    expect(a.parameterCount?.value).toBe(25_384_448);
    expect(a.unknowns).toContainEqual(
      expect.stringMatching(
        /^vocab_size is not set in the code or command; assumed 65 \(character-level, taken as tiny Shakespeare's 65 characters: 'chars = sorted\(set\(text\)\)' at train\.py:\d+\)$/,
      ),
    );
    // float16 (2-byte activations), B=64, 8 heads: 16 B × 25,384,448 = 406,151,168
    //   + 8 layers × (34·256·64·512 + 5·8·256²·64) = 8 × (285,212,672 + 167,772,160) = 3,623,878,656
    //   + logits 64·256·65·(2 + 4) = 6,389,760 + 1 GiB (1,073,741,824) = 5,110,161,408 B ≈ 4.76 GiB.
    expect(a.peakGpuMemoryGiB?.value).toBeCloseTo(5_110_161_408 / GiB, 9);
    expect(a.recommendedTier).toBe('gpu-small');
  });

  it('sizes config/cpu_smoke.py as the tiny CPU model it is, on the smallest CPU tier', () => {
    const a = analyzeWorkload({ files: example, command: ['python', 'train.py', 'config/cpu_smoke.py'] }, tiers);
    // L=2, d=32, T=32: 65·32 + 32·32 + 2 × (12·1,024 + 13·32) + 2·32 = 2,080 + 1,024 + 2 × 12,704 + 64 = 28,576.
    expect(a.parameterCount?.value).toBe(28_576);
    // Host memory, float32: 16 B × 28,576 = 457,216 + 2 layers × (34·32·8·32 + 5·2·32²·8) × 4/2 = 1,441,792
    //   + logits 8·32·65·(4 + 4) = 133,120 → 2,032,128 B = 1.94 MiB, + 300 MiB for PyTorch: ⌈301.94⌉ = 302 MiB.
    expect(a.recommendedTier).toBe('cpu-small');
    expect(a.perTier.find((t) => t.tier === 'cpu-small')?.reason).toMatch(/^≈302 of 512 MiB memory, /);
  });

  it('fits the demo’s job (npm run demo) on cpu-large, its tier, with minutes to spare', () => {
    const files = exampleFiles(NANOGPT_DEMO.example);
    const a = analyzeWorkload({ files, command: [...NANOGPT_DEMO.command] }, tiers, { tier: NANOGPT_DEMO.tier });
    // cpu_smoke.py enlarged: L=4, d=64, T=64: 65·64 + 64·64 + 4 × (12·4,096 + 13·64) + 2·64
    //   = 4,160 + 4,096 + 4 × 49,984 + 128 = 208,320.
    expect(a.parameterCount?.value).toBe(208_320);
    // FLOPs: per token 6 × (208,320 − 64·64) + 12·4·64·64 = 6 × 204,224 + 196,608 = 1,421,952; training
    // 1500 × 16 × 64 = 1,536,000 tokens; evaluation (1500/300 + 1 = 6) × 5 iters × 2 splits × 16·64 = 61,440 tokens at
    // a third: 1,421,952 × 1,536,000 + 473,984 × 61,440 = 2,184,118,272,000 + 29,121,576,960 = 2,213,239,848,960.
    // cpu-large: 0.2 TFLOPS for its 2 vCPUs, of which train.py gives PyTorch one (torch.set_num_threads(threads),
    // threads = 1 in cpu_smoke.py) × 0.5 utilisation, + 5 s PyTorch startup: 44.26 + 5 = 49.26 s (the demo's two
    // attempts train about a minute together), in its 10 min maximum.
    const cpuLarge = a.perTier.find((t) => t.tier === 'cpu-large');
    expect(cpuLarge?.runtimeSeconds?.value).toBeCloseTo(2_213_239_848_960 / (0.2e12 * (1 / 2) * 0.5) + 5, 6);
    expect(cpuLarge?.runtimeSeconds?.basis).toContain(
      '× 1 of 2 vCPUs (torch.set_num_threads(threads) at train.py:193, threads = 1 at config/cpu_smoke.py:5)',
    );
    expect(cpuLarge?.fits).toBe(true);
    expect(a.recommendedTier).toBe('cpu-large');
    expect(a.recommendationReason).toMatch(/^cpu-large was requested \(tier override\); it fits: /);
  });
});

describe('CPU threads: a run that limits PyTorch with torch.set_num_threads takes that share of a CPU tier', () => {
  const smoke = ['python', 'train.py', 'config/cpu_smoke.py'];
  // Runtime less the 5 s PyTorch startup: FLOPs ÷ throughput, so two runs' ratio is their throughputs' inverse ratio.
  const compute = (files: Record<string, string>, command: readonly string[]) =>
    (analyzeWorkload({ files, command: [...command] }, tiers, { tier: 'cpu-large' }).perTier.find(
      (t) => t.tier === 'cpu-large',
    )?.runtimeSeconds?.value ?? Number.NaN) - 5;
  const withCall = (call: string) => ({
    ...example,
    'train.py': (example['train.py'] ?? '').replace('torch.set_num_threads(threads)', call),
  });

  it.each([
    // threads = 1 (cpu_smoke.py) on cpu-large's 2 vCPUs: half its peak, twice the time of a run on both.
    { what: 'the setting the code passes, 1 of 2', command: smoke, files: example, factor: 2 },
    { what: 'the setting overridden to 2', command: [...smoke, '--threads=2'], files: example, factor: 1 },
    // More threads than vCPUs use the tier's vCPUs, no more.
    { what: 'a literal above the vCPUs', command: smoke, files: withCall('torch.set_num_threads(8)'), factor: 1 },
    { what: 'a literal 1', command: smoke, files: withCall('torch.set_num_threads(1)'), factor: 2 },
    // Unreadable (an expression) or absent: every vCPU, the assumption for code that does not say.
    { what: 'an expression', command: smoke, files: withCall('torch.set_num_threads(max(1, threads))'), factor: 1 },
    { what: 'no call', command: smoke, files: withCall('pass'), factor: 1 },
  ])('reads $what', ({ command, files, factor }) => {
    const allVcpus = compute(withCall('pass'), smoke);
    expect(compute(files, command) / allVcpus).toBeCloseTo(factor, 9);
  });
});
