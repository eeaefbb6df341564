/**
 * Facts about the EC2 GPU instance types Trainyard can run on, and the Fargate sizes its CPU tiers use.
 * Pure data (no CDK, no SDK) so config validation, workload analysis and the CLI share one source.
 * Sources: EC2 accelerated-computing instance specifications and the AWS Batch Fargate resource table.
 */

/** What one EC2 GPU instance type offers. */
export interface GpuInstanceFacts {
  /** NVIDIA GPUs on the instance. */
  readonly gpus: number;
  /** Memory per GPU, GiB. */
  readonly gpuMemoryGiB: number;
  /** GPU model: names it for humans and keys its usable memory and its peak throughput by precision. */
  readonly gpuModel: string;
  /** vCPUs on the instance. */
  readonly vcpus: number;
  /** Instance memory, GiB. */
  readonly memoryGiB: number;
}

/**
 * NVIDIA GPU instance families that the ECS AL2023 NVIDIA AMI supports (AWS Batch: "ECS_AL2023_NVIDIA doesn't
 * support p3 and g3 instance types"; Amazon Linux 2 reached end of support on 2026-06-30).
 */
export const GPU_INSTANCE_FAMILIES = ['g4dn', 'g5', 'g6', 'g6e', 'gr6', 'p4d', 'p4de', 'p5', 'p5e'] as const;

/**
 * Share of an instance's installed memory a job may ask for. The ECS agent registers less than the installed memory
 * (the kernel and platform keep some: an m4.large registers 7,985 of its 8,192 MiB, 2.5 %, per AWS Batch's "Compute
 * resource memory management"), and Batch's AMI keeps another 32 MiB for the agent. A job asking more than what
 * registers is never placed and waits RUNNABLE (on-demand, with no time limit), so tiers keep 5 % of headroom.
 */
export const JOB_MEMORY_SHARE = 0.95;

/** The most memory, MiB, a tier's job may ask for on an instance with `memoryGiB` installed. */
export function jobMemoryLimitMiB(memoryGiB: number): number {
  return Math.floor(memoryGiB * 1024 * JOB_MEMORY_SHARE);
}

/** Instance sizes Trainyard knows exactly, used to check a tier's GPU count, memory and vCPUs against. */
export const GPU_INSTANCES: Readonly<Record<string, GpuInstanceFacts>> = {
  'g4dn.xlarge': { gpus: 1, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 4, memoryGiB: 16 },
  'g4dn.2xlarge': { gpus: 1, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 8, memoryGiB: 32 },
  'g4dn.4xlarge': { gpus: 1, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 16, memoryGiB: 64 },
  'g4dn.8xlarge': { gpus: 1, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 32, memoryGiB: 128 },
  'g4dn.12xlarge': { gpus: 4, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 48, memoryGiB: 192 },
  'g4dn.16xlarge': { gpus: 1, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 64, memoryGiB: 256 },
  'g4dn.metal': { gpus: 8, gpuMemoryGiB: 16, gpuModel: 'T4', vcpus: 96, memoryGiB: 384 },
  'g5.xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 4, memoryGiB: 16 },
  'g5.2xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 8, memoryGiB: 32 },
  'g5.4xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 16, memoryGiB: 64 },
  'g5.8xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 32, memoryGiB: 128 },
  'g5.12xlarge': { gpus: 4, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 48, memoryGiB: 192 },
  'g5.16xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 64, memoryGiB: 256 },
  'g5.24xlarge': { gpus: 4, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 96, memoryGiB: 384 },
  'g5.48xlarge': { gpus: 8, gpuMemoryGiB: 24, gpuModel: 'A10G', vcpus: 192, memoryGiB: 768 },
  'g6.xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 4, memoryGiB: 16 },
  'g6.2xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 8, memoryGiB: 32 },
  'g6.4xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 16, memoryGiB: 64 },
  'g6.8xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 32, memoryGiB: 128 },
  'g6.12xlarge': { gpus: 4, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 48, memoryGiB: 192 },
  'g6.16xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 64, memoryGiB: 256 },
  'g6.24xlarge': { gpus: 4, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 96, memoryGiB: 384 },
  'g6.48xlarge': { gpus: 8, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 192, memoryGiB: 768 },
  'gr6.4xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 16, memoryGiB: 128 },
  'gr6.8xlarge': { gpus: 1, gpuMemoryGiB: 24, gpuModel: 'L4', vcpus: 32, memoryGiB: 256 },
  'g6e.xlarge': { gpus: 1, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 4, memoryGiB: 32 },
  'g6e.2xlarge': { gpus: 1, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 8, memoryGiB: 64 },
  'g6e.4xlarge': { gpus: 1, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 16, memoryGiB: 128 },
  'g6e.8xlarge': { gpus: 1, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 32, memoryGiB: 256 },
  'g6e.12xlarge': { gpus: 4, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 48, memoryGiB: 384 },
  'g6e.16xlarge': { gpus: 1, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 64, memoryGiB: 512 },
  'g6e.24xlarge': { gpus: 4, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 96, memoryGiB: 768 },
  'g6e.48xlarge': { gpus: 8, gpuMemoryGiB: 48, gpuModel: 'L40S', vcpus: 192, memoryGiB: 1536 },
  'p4d.24xlarge': { gpus: 8, gpuMemoryGiB: 40, gpuModel: 'A100', vcpus: 96, memoryGiB: 1152 },
  'p4de.24xlarge': { gpus: 8, gpuMemoryGiB: 80, gpuModel: 'A100', vcpus: 96, memoryGiB: 1152 },
  'p5.48xlarge': { gpus: 8, gpuMemoryGiB: 80, gpuModel: 'H100', vcpus: 192, memoryGiB: 2048 },
  'p5e.48xlarge': { gpus: 8, gpuMemoryGiB: 141, gpuModel: 'H200', vcpus: 192, memoryGiB: 2048 },
};

/**
 * Memory per GPU that CUDA can use, MiB: the total `nvidia-smi` reports, by GPU model and nominal size. It is less
 * than the nominal figure AWS lists (a T4 sold as 16 GB reports 15,360 MiB, 15 GiB), so a model that fits the nominal
 * memory can still run out of it. Values as reported in modal-labs/modal-client#2797, the H200's as nvidia-smi reported
 * it to bench/gpu.py (bench/results/gpu-h200.md); a GPU not listed is taken at its nominal size.
 */
const USABLE_GPU_MEMORY_MIB: Readonly<Record<string, number>> = {
  'T4/16': 15_360,
  'A10G/24': 23_028,
  'L4/24': 23_034,
  'L40S/48': 46_068,
  'A100/40': 40_960,
  'A100/80': 81_920,
  'H100/80': 81_559,
  'H200/141': 143_771,
};

/** GiB per GPU that CUDA can use on an instance type (its nominal memory when not known); undefined if unknown. */
export function usableGpuMemoryGiB(instanceType: string): number | undefined {
  const facts = GPU_INSTANCES[instanceType];
  if (!facts) return undefined;
  const mib = USABLE_GPU_MEMORY_MIB[`${facts.gpuModel}/${facts.gpuMemoryGiB}`];
  return mib === undefined ? facts.gpuMemoryGiB : mib / 1024;
}

/**
 * Dense peak TFLOPS of one GPU by precision (no structured sparsity), from NVIDIA's datasheets: `tensor16` is the
 * float16/bfloat16 tensor-core peak (a GPU tier's `peakTflops` per GPU), `tf32` the TensorFloat-32 tensor-core peak
 * (absent: the GPU has none, so float32 runs on its CUDA cores whatever the code allows), `fp32` the CUDA cores'.
 */
export interface GpuPeakTflops {
  /** float16/bfloat16 on tensor cores. */
  readonly tensor16: number;
  /** TensorFloat-32 on tensor cores; undefined on GPUs without it (Turing). */
  readonly tf32?: number;
  /** float32 on CUDA cores. */
  readonly fp32: number;
}

/**
 * Peaks by GPU model. NVIDIA publishes no A10G datasheet: the A10's figures (the same GA102 chip) stand for it; of the
 * two readings of the A10G in circulation they give float32 the smaller share of the 16-bit peak, so an estimate made
 * with them errs long. The H200's compute is the H100 SXM's; bench/gpu.py measured its matrix products at 0.065
 * (float32) and 0.52 (TF32) of bfloat16, the datasheet's 0.068 and 0.5 (bench/results/gpu-h200.md).
 */
export const GPU_PEAK_TFLOPS: Readonly<Record<string, GpuPeakTflops>> = {
  T4: { tensor16: 65, fp32: 8.1 },
  A10G: { tensor16: 125, tf32: 62.5, fp32: 31.2 },
  L4: { tensor16: 121, tf32: 60, fp32: 30.3 },
  L40S: { tensor16: 362, tf32: 183, fp32: 91.6 },
  A100: { tensor16: 312, tf32: 156, fp32: 19.5 },
  H100: { tensor16: 989, tf32: 494, fp32: 67 },
  H200: { tensor16: 989, tf32: 494, fp32: 67 },
};

/** What float32 training gets of a GPU's 16-bit peak, and why. */
export interface Float32Share {
  /** float32 throughput ÷ 16-bit tensor-core throughput. */
  readonly share: number;
  /** Whether the float32 matrix products run as TF32 on tensor cores (allowed, and the GPU has TF32). */
  readonly tf32: boolean;
  /** The GPU model and the two peaks compared, for an estimate's basis: `A10G 62.5 of 125 TFLOPS`. */
  readonly basis: string;
}

/**
 * The share of its 16-bit peak an instance type's GPU gives float32 training: its TF32 peak when the code allows TF32
 * and the GPU has it, else its float32 peak, over its 16-bit peak. Undefined when the type or its GPU is not known.
 */
export function float32ShareOf16Bit(instanceType: string, tf32Allowed: boolean): Float32Share | undefined {
  const model = GPU_INSTANCES[instanceType]?.gpuModel;
  const peaks = model === undefined ? undefined : GPU_PEAK_TFLOPS[model];
  if (model === undefined || peaks === undefined) return undefined;
  const tf32 = tf32Allowed ? peaks.tf32 : undefined;
  const float32 = tf32 ?? peaks.fp32;
  return {
    share: float32 / peaks.tensor16,
    tf32: tf32 !== undefined,
    basis: `${model} ${float32} of ${peaks.tensor16} TFLOPS`,
  };
}

/** The family part of an instance type (`g4dn.xlarge` → `g4dn`). */
export function instanceFamily(instanceType: string): string {
  return instanceType.split('.')[0] ?? instanceType;
}

/** Fargate vCPU values and the memory (MiB) each allows, per the AWS Batch Fargate resource table. */
export const FARGATE_SIZES: ReadonlyArray<{ readonly vcpus: number; readonly memoryMiB: readonly number[] }> = [
  { vcpus: 0.25, memoryMiB: [512, 1024, 2048] },
  { vcpus: 0.5, memoryMiB: [1024, 2048, 3072, 4096] },
  { vcpus: 1, memoryMiB: range(2048, 8192, 1024) },
  { vcpus: 2, memoryMiB: range(4096, 16384, 1024) },
  { vcpus: 4, memoryMiB: range(8192, 30720, 1024) },
  { vcpus: 8, memoryMiB: range(16384, 61440, 4096) },
  { vcpus: 16, memoryMiB: range(32768, 122880, 8192) },
];

function range(from: number, to: number, step: number): number[] {
  const out: number[] = [];
  for (let v = from; v <= to; v += step) out.push(v);
  return out;
}

/**
 * The smallest Fargate size that gives at least the requested vCPUs and memory.
 * Fargate only sells fixed combinations, so a tier's figures are minimums and are rounded up here
 * (0.5 vCPU with 512 MiB becomes 0.5 vCPU with 1024 MiB). Returns undefined when no size fits.
 */
export function fargateSizeFor(vcpus: number, memoryMiB: number): { vcpus: number; memoryMiB: number } | undefined {
  for (const size of FARGATE_SIZES) {
    if (size.vcpus < vcpus) continue;
    const memory = size.memoryMiB.find((m) => m >= memoryMiB);
    if (memory !== undefined) return { vcpus: size.vcpus, memoryMiB: memory };
  }
  return undefined;
}
