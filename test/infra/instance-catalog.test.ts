import { describe, expect, it } from 'vitest';
import { float32ShareOf16Bit, usableGpuMemoryGiB } from '../../lib/instance-catalog';

describe('GPU memory CUDA can use', () => {
  it.each([
    // nvidia-smi totals: a T4 15,360 MiB; an H200 143,771 MiB (bench/results/gpu-h200.md), under its nominal 141 GiB.
    { type: 'g4dn.xlarge', mib: 15_360 },
    { type: 'p5e.48xlarge', mib: 143_771 },
  ])('$type: $mib MiB', ({ type, mib }) => {
    expect(usableGpuMemoryGiB(type)).toBeCloseTo(mib / 1024, 9);
  });

  it('knows nothing of an instance type outside the catalog', () => {
    expect(usableGpuMemoryGiB('p3.2xlarge')).toBeUndefined();
  });
});

describe('float32 share of a GPU’s 16-bit peak', () => {
  it.each([
    // NVIDIA datasheets, dense TFLOPS: H100/H200 SXM 67 float32, 494 TF32, 989 16-bit; T4 8.1 float32, 65 16-bit.
    { type: 'p5e.48xlarge', tf32: false, share: 67 / 989, asTf32: false },
    { type: 'p5e.48xlarge', tf32: true, share: 494 / 989, asTf32: true },
    { type: 'g4dn.xlarge', tf32: false, share: 8.1 / 65, asTf32: false },
    // A T4 has no TF32: allowed or not, float32 runs on its CUDA cores.
    { type: 'g4dn.xlarge', tf32: true, share: 8.1 / 65, asTf32: false },
  ])('$type with TF32 allowed: $tf32', ({ type, tf32, share, asTf32 }) => {
    expect(float32ShareOf16Bit(type, tf32)).toMatchObject({ tf32: asTf32 });
    expect(float32ShareOf16Bit(type, tf32)?.share).toBeCloseTo(share, 9);
  });

  it('agrees with what an H200 measured for matrix products (0.065 float32, 0.52 TF32 of bfloat16) within 10 %', () => {
    // bench/results/gpu-h200.md: 8192³ products at 51.3 (float32), 408.8 (TF32) and 788.6 (bfloat16) TFLOP/s.
    const off = (type: string, tf32: boolean, measured: number) =>
      Math.abs((float32ShareOf16Bit(type, tf32)?.share ?? 0) / measured - 1);
    expect(off('p5e.48xlarge', false, 51.3 / 788.6)).toBeLessThan(0.1);
    expect(off('p5e.48xlarge', true, 408.8 / 788.6)).toBeLessThan(0.1);
  });

  it('knows nothing of an instance type outside the catalog', () => {
    expect(float32ShareOf16Bit('p3.2xlarge', true)).toBeUndefined();
  });
});
