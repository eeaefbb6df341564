import { describe, expect, it } from 'vitest';
import {
  analyzeWorkload,
  type CodeBundle,
  InvalidRequirement,
  shellWords,
  UnknownTier,
  WorkloadRefused,
} from '../../lambdas/domain/analysis';
import {
  evaluateLiteral,
  parseLiteral,
  parseOverride,
  topLevelAssignments,
  topLevelIncludes,
} from '../../lambdas/domain/analysis/python-literals';
import { parseConfig } from '../../lib/config';
import { projectFiles } from '../support/projects';

const tiers = parseConfig({}).tiers;
const GiB = 1024 ** 3;

const loadProject = projectFiles;

/** The error a call throws (fails the test when it returns). */
function thrown(call: () => unknown): Error {
  try {
    call();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the call to throw');
}

const nanogpt = loadProject('nanogpt-like');
const nanogptCommand = ['python', 'train.py', 'config/train_small.py', '--n_layer=6', '--max_iters=2000'];

/**
 * Closed-form parameter count of the fixture's GPT (model.py), worked out by hand:
 * token embedding V·d + position embedding T·d; per layer ln_1 (d) + c_attn (d·3d) + attn c_proj (d·d) + ln_2 (d)
 * + c_fc (d·4d) + mlp c_proj (4d·d) = 12d² + 2d without biases (+11d with: ln 2d, qkv 3d, proj d, fc 4d, proj d);
 * ln_f d (+d); lm_head shares wte's matrix. For d=384, T=256, V=65, L=6, bias=False:
 * 24,960 + 98,304 + 6 × 1,770,240 + 384 = 10,745,088 — the same number PyTorch prints for the model:
 * `cd test/fixtures/projects/nanogpt-like && /usr/bin/python3 -c "from model import GPT, GPTConfig;
 *  print(sum(p.numel() for p in GPT(GPTConfig(n_layer=6, n_head=6, n_embd=384, block_size=256, vocab_size=65,
 *  bias=False)).parameters()))"` → 10745088.
 */
function gptParams(L: number, d: number, T: number, V: number, bias: boolean): number {
  return V * d + T * d + L * (12 * d * d + 2 * d + (bias ? 11 * d : 0)) + d + (bias ? d : 0);
}

describe('analyzeWorkload on a nanoGPT-shaped project (script + config file + override)', () => {
  const analysis = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers);

  it('counts parameters within 2 % of the closed form for the architecture', () => {
    const exact = gptParams(6, 384, 256, 65, false);
    expect(exact).toBe(10_745_088);
    const estimate = analysis.parameterCount?.value ?? Number.NaN;
    expect(Math.abs(estimate - exact) / exact).toBeLessThan(0.02);
    expect(analysis.parameterCount?.confidence).toBe('high');
  });

  it('reads each hyper-parameter from the place that sets it last', () => {
    expect(analysis.hyperparameters).toMatchObject({
      n_layer: { value: 6, source: '--n_layer=6' },
      max_iters: { value: 2000, source: '--max_iters=2000' },
      n_embd: { value: 384, source: 'config/train_small.py:14' },
      block_size: { value: 256, source: 'config/train_small.py:9' },
      batch_size: { value: 64, source: 'config/train_small.py:8' },
      vocab_size: { value: 65, source: 'config/train_small.py:10' },
      gradient_accumulation_steps: { value: 1, source: 'config/train_small.py:7' },
      bias: { value: 'False', source: 'train.py:31' },
      device: { value: 'cuda', source: 'train.py:38' },
    });
    expect(analysis.hyperparameters.dtype).toBeUndefined();
    expect(analysis.entryScript).toBe('train.py');
    expect(analysis.configFiles).toEqual(['config/train_small.py']);
  });

  it('detects PyTorch on the GPU from the literal device setting', () => {
    expect(analysis.framework).toBe('torch');
    expect(analysis.usesGpu).toEqual({ value: true, basis: "device='cuda' (train.py:38)", confidence: 'high' });
  });

  it('estimates peak GPU memory as 16 B/param + activations + logits + CUDA context', () => {
    const P = 10_745_088;
    // 16-bit activations (dtype assumed autocast): 34·T·B·d + 5·heads·T²·B per layer; logits B·T·V·(2 + 4) bytes.
    const activations = 6 * (34 * 256 * 64 * 384 + 5 * 6 * 256 * 256 * 64);
    const logits = 64 * 256 * 65 * 6;
    const expected = (16 * P + activations + logits + GiB) / GiB;
    expect(analysis.peakGpuMemoryGiB?.value).toBeCloseTo(expected, 6);
    expect(expected).toBeGreaterThan(3);
    expect(expected).toBeLessThan(3.2);
  });

  it('estimates tokens, FLOPs and runtime per tier with the stated utilisation', () => {
    const tokens = 2000 * 64 * 256 * 1;
    expect(analysis.totalTokens?.value).toBe(tokens);
    // 6N (N without the position embedding) + 12·L·d·T per token; evaluation: (2000/250 + 1) evals × 200 iters × 2
    // splits × 64·256 tokens, forward only (a third of the training FLOPs per token).
    const perToken = 6 * (10_745_088 - 256 * 384) + 12 * 6 * 384 * 256;
    const evalTokens = 9 * 200 * 2 * 64 * 256;
    const flops = perToken * tokens + (perToken / 3) * evalTokens;
    expect(analysis.flops?.value).toBeCloseTo(flops, -3);
    const small = analysis.perTier.find((t) => t.tier === 'gpu-small');
    const seconds = flops / (65e12 * 0.3) + 5;
    expect(small?.runtimeSeconds?.value).toBeCloseTo(seconds, 6);
    expect(small?.onDemandCostUsd).toBeCloseTo((seconds / 3600) * 0.526, 9);
  });

  it('credits a launch, not an import: DDP code run as plain python trains on one GPU of one node', () => {
    const runtimeOn = (tier: string, command: string[], files = nanogpt) =>
      analyzeWorkload({ files, command }, tiers).perTier.find((t) => t.tier === tier)?.runtimeSeconds?.value;
    // nanoGPT's train.py imports DistributedDataParallel and init_process_group whether or not it is launched so.
    const withDdp = {
      ...nanogpt,
      'train.py': `from torch.nn.parallel import DistributedDataParallel as DDP\nfrom torch.distributed import init_process_group\n${nanogpt['train.py']}`,
    };
    const flops = analysis.flops?.value ?? Number.NaN;
    // gpu-multinode: 2 nodes of 4 GPUs, 500 TFLOPS 16-bit per node; utilisation 0.3; 5 s PyTorch startup.
    const oneGpu = flops / (500e12 * 0.25 * 0.3) + 5;
    expect(runtimeOn('gpu-multinode', nanogptCommand, withDdp)).toBeCloseTo(oneGpu, 6);
    expect(runtimeOn('gpu-multinode', nanogptCommand)).toBeCloseTo(oneGpu, 6);
    const args = nanogptCommand.slice(1);
    // A launcher that starts a process per GPU but does not join the nodes: each node trains alone, on all its GPUs.
    expect(runtimeOn('gpu-multinode', ['torchrun', '--nproc_per_node=4', ...args])).toBeCloseTo(
      flops / (500e12 * 0.3) + 5,
      6,
    );
    // Joined across the nodes, in the command itself or in a shell line.
    const bothNodes = flops / (500e12 * 2 * 0.3) + 5;
    expect(
      runtimeOn('gpu-multinode', ['torchrun', '--nnodes', '2', '--rdzv_endpoint=$MAIN:29500', ...args]),
    ).toBeCloseTo(bothNodes, 6);
    // A launcher inside a shell line counts too (though the shell line hides the script's hyper-parameters).
    const shell = ['sh', '-c', `python -m torch.distributed.run --nnodes=2 ${args.join(' ')}`];
    expect(analyzeWorkload({ files: nanogpt, command: shell }, tiers).distributed).toBe(true);
    expect(analyzeWorkload({ files: withDdp, command: nanogptCommand }, tiers).distributed).toBe(false);
    expect(runtimeOn('gpu-multinode', ['torchrun', '--nnodes=1', ...args])).toBeCloseTo(flops / (500e12 * 0.3) + 5, 6);
  });

  it('leaves room in a spot tier’s maximum runtime for the interruptions it may meet, which the maximum counts', () => {
    const reasonOn = (runtimeSeconds: number) =>
      analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers, { runtimeSeconds }).perTier.find(
        (t) => t.tier === 'gpu-small',
      );
    // Defaults: 0.1 interruptions/h, each losing half of a 600 s checkpoint interval plus a 300 s restart (ρ = 1/60).
    // 6600 s: expected wall time 6600 × 60/59 = 6711.9 s, m = 0.18644 interruptions; P(0) = 0.8299 < 0.95,
    // P(≤1) = 0.8299 × 1.18644 = 0.9846 → 1 interruption at the 95th percentile: 6600 + 600 + 300 = 7500 s > 7200 s.
    expect(reasonOn(6600)).toMatchObject({
      fits: false,
      reason:
        "estimated runtime 1.83 h leaves too little of gpu-small's maximum 2 h for spot interruptions (1, the 95th percentile, take it to 2.08 h)",
    });
    // 5000 s: m = 0.1412, P(≤1) = 0.991 → 1 interruption: 5900 s ≤ 7200 s.
    expect(reasonOn(5000)?.fits).toBe(true);
  });

  it('recommends gpu-small, the cheapest tier that fits, and lists the other fitting tiers by cost', () => {
    expect(analysis.recommendedTier).toBe('gpu-small');
    expect(analysis.recommendationReason).toMatch(/^gpu-small is the cheapest tier that fits: ≈3\.1 GiB of 16 GiB/);
    expect(analysis.alternatives).toEqual(['gpu-large', 'gpu-medium', 'gpu-multinode']);
    expect(analysis.perTier.filter((t) => !t.fits).map((t) => [t.tier, t.reason])).toEqual([
      ['cpu-small', 'the code uses a GPU and cpu tiers have none'],
      ['cpu-large', 'the code uses a GPU and cpu tiers have none'],
    ]);
  });

  it('reports the non-literal dtype together with the assumption made for it', () => {
    expect(analysis.unknowns).toEqual([
      "dtype at train.py:39 is not a literal ('bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'); assumed 16-bit autocast (float16/bfloat16), what nanoGPT-style scripts pick on GPUs",
    ]);
    expect(analysis.overridesApplied).toEqual([]);
  });
});

describe('launchers: the share of a tier a command is credited with', () => {
  const flops = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers).flops?.value ?? Number.NaN;
  const args = nanogptCommand.slice(1);
  const onMultinode = (command: string[]) =>
    analyzeWorkload({ files: nanogpt, command }, tiers).perTier.find((t) => t.tier === 'gpu-multinode')?.runtimeSeconds;
  // gpu-multinode: 2 nodes of 4 GPUs, 500 TFLOPS 16-bit per node; utilisation 0.3; 5 s PyTorch startup.
  const seconds = (gpusPerNode: number, nodes: number) => flops / (500e12 * (gpusPerNode / 4) * nodes * 0.3) + 5;

  it.each([
    { launch: ['--nproc_per_node=1'], gpus: 1 },
    { launch: ['--nproc-per-node=2'], gpus: 2 },
    { launch: ['--nproc_per_node', '2'], gpus: 2 },
    { launch: ['--standalone', '--nproc_per_node=3'], gpus: 3 },
    // More processes than GPUs cannot use more GPUs than the node has; `gpu` starts one per GPU, as does no count.
    { launch: ['--nproc_per_node=8'], gpus: 4 },
    { launch: ['--nproc_per_node=gpu'], gpus: 4 },
    { launch: [], gpus: 4 },
  ])('credits torchrun $launch with $gpus of the node’s 4 GPUs', ({ launch, gpus }) => {
    expect(onMultinode(['torchrun', ...launch, ...args])?.value).toBeCloseTo(seconds(gpus, 1), 6);
  });

  // Each launcher names its process count its own way: per node for deepspeed (like torchrun), in all for accelerate
  // (divided among its machines), mpirun and horovodrun (which on one node is the same). The script's arguments follow
  // the entry script and are not the launcher's.
  it.each([
    { launch: ['deepspeed', '--num_gpus=1'], gpus: 1, option: '--num_gpus=1' },
    { launch: ['deepspeed', '--num_gpus', '2'], gpus: 2, option: '--num_gpus=2' },
    { launch: ['deepspeed', '--num_accelerators=3'], gpus: 3, option: '--num_accelerators=3' },
    { launch: ['accelerate', 'launch', '--num_processes=1'], gpus: 1, option: '--num_processes=1' },
    { launch: ['accelerate', 'launch', '--num_processes', '2'], gpus: 2, option: '--num_processes=2' },
    { launch: ['mpirun', '-np', '1', 'python'], gpus: 1, option: '-np 1' },
    { launch: ['mpirun', '-n', '2', 'python'], gpus: 2, option: '-n 2' },
    { launch: ['mpirun', '--np', '3', '-x', 'NCCL_DEBUG=INFO', 'python'], gpus: 3, option: '--np=3' },
    { launch: ['horovodrun', '-np', '2', 'python'], gpus: 2, option: '-np 2' },
    { launch: ['horovodrun', '--num-proc', '3', 'python'], gpus: 3, option: '--num-proc=3' },
  ])('credits $launch with $gpus of the node’s 4 GPUs, naming the option', ({ launch, gpus, option }) => {
    const runtime = onMultinode([...launch, ...args]);
    expect(runtime?.value).toBeCloseTo(seconds(gpus, 1), 6);
    expect(runtime?.basis).toContain(`500 TFLOPS 16-bit peak on ${gpus} of 4 GPUs (${option})`);
  });

  it.each([
    { launch: ['deepspeed'], name: 'deepspeed without --num_gpus' },
    { launch: ['accelerate', 'launch', '--multi_gpu'], name: 'accelerate without --num_processes' },
    { launch: ['mpirun', 'python'], name: 'mpirun without -np' },
  ])('credits $name with every GPU of the node, as before, whatever the script’s own arguments', ({ launch }) => {
    expect(onMultinode([...launch, ...args])?.value).toBeCloseTo(seconds(4, 1), 6);
    expect(onMultinode([...launch, ...args, '--num_gpus=1'])?.value).toBeCloseTo(seconds(4, 1), 6);
  });

  it('credits a launch that joins the nodes with the processes it starts on each, and says how many', () => {
    const runtime = onMultinode([
      'torchrun',
      '--nnodes=2',
      '--nproc_per_node=2',
      '--rdzv_endpoint=$MAIN:29500',
      ...args,
    ]);
    expect(runtime?.value).toBeCloseTo(seconds(2, 2), 6);
    expect(runtime?.basis).toContain('500 TFLOPS 16-bit peak on 2 of 4 GPUs (--nproc_per_node=2) × 2 nodes');
  });

  // Each launcher joins nodes its own way: a node count (other than one), else a host list naming more than one host,
  // else the options that only make sense across nodes. A count of every node's processes (accelerate's over its
  // machines, mpirun's and horovodrun's) is a count of the GPUs of all the nodes it joins. `total` is the GPUs used on
  // the 2 nodes of 4; the basis names the count when it leaves GPUs idle.
  it.each([
    { launch: ['deepspeed', '--num_nodes=2', '--num_gpus=2'], total: 4, named: '(--num_gpus=2) × 2 nodes' },
    { launch: ['deepspeed', '--hostfile', '/job/hostfile'], total: 8, named: undefined },
    { launch: ['deepspeed', '-H', '/job/hostfile', '--num_nodes', '-1'], total: 8, named: undefined },
    { launch: ['deepspeed', '--num_nodes=0', '--hostfile=/job/hostfile'], total: 8, named: undefined },
    { launch: ['deepspeed', '--node_rank=$RANK', '--num_gpus', '4'], total: 8, named: undefined },
    {
      launch: ['accelerate', 'launch', '--num_processes=4', '--num_machines=2'],
      total: 4,
      named: '(--num_processes=4 over --num_machines=2) × 2 nodes',
    },
    { launch: ['accelerate', 'launch', '--main_process_ip', '$MAIN', '--multi_gpu'], total: 8, named: undefined },
    { launch: ['mpirun', '-np', '8', '-H', 'a:4,b:4', 'python'], total: 8, named: undefined },
    {
      launch: ['mpirun', '-np', '4', '-H', 'a:2,b:2', 'python'],
      total: 4,
      named: 'on 4 of the 8 GPUs of 2 nodes (-np 4)',
    },
    {
      launch: ['mpirun', '-np', '3', '--host=a,b', 'python'],
      total: 3,
      named: 'on 3 of the 8 GPUs of 2 nodes (-np 3)',
    },
    { launch: ['mpirun', '--hostfile', 'hosts', 'python'], total: 8, named: undefined },
    { launch: ['horovodrun', '-np', '6', '-H', 'a:3,b:3', 'python'], total: 6, named: '(-np 6)' },
    { launch: ['horovodrun', '--hostfile', 'hosts', 'python'], total: 8, named: undefined },
  ])('credits $launch with $total GPUs across both nodes', ({ launch, total, named }) => {
    const runtime = onMultinode([...launch, ...args]);
    expect(runtime?.value).toBeCloseTo(seconds(total, 1), 6);
    expect(runtime?.basis).toContain(named ?? '500 TFLOPS 16-bit peak × 2 nodes');
  });

  it.each([
    { launch: ['deepspeed', '--num_nodes=1', '--hostfile', '/job/hostfile', '--num_gpus=4'] },
    { launch: ['deepspeed', '--num_nodes', '-1', '--num_gpus=4'] },
    { launch: ['accelerate', 'launch', '--num_machines=1', '--machine_rank=0', '--num_processes=4'] },
    { launch: ['horovodrun', '-np', '4', '-H', 'localhost:4', 'python'] },
    { launch: ['mpirun', '-np', '4', '--host', '127.0.0.1:4,127.0.0.1:4', 'python'] },
  ])('keeps $launch on one node: one node said outright, or no word that joins nodes', ({ launch }) => {
    const runtime = onMultinode([...launch, ...args]);
    expect(runtime?.value).toBeCloseTo(seconds(4, 1), 6);
    expect(runtime?.basis).toContain('on one of 2 nodes (the launcher does not join them)');
  });

  it.each([
    { launch: ['--nnodes=1', '--node_rank=0', '--master_addr=127.0.0.1'] },
    { launch: ['--nnodes', '1', '--rdzv_endpoint=localhost:29500'] },
    { launch: ['--master_addr=127.0.0.1', '--nnodes=1:1'] },
  ])('keeps torchrun $launch on one node: an explicit single node wins over rendezvous words', ({ launch }) => {
    expect(onMultinode(['torchrun', ...launch, '--nproc_per_node=4', ...args])?.value).toBeCloseTo(seconds(4, 1), 6);
  });

  it.each([
    { name: 'an output directory named accelerate', command: ['python', ...args, '--out_dir=runs/accelerate'] },
    { name: 'a path ending in /deepspeed', command: ['python', ...args, '--out_dir=/scratch/deepspeed'] },
    { name: 'a script argument that is a launcher’s name', command: ['python', ...args, 'torchrun'] },
  ])('does not take $name for a launcher: one process, one GPU', ({ command }) => {
    expect(analyzeWorkload({ files: nanogpt, command }, tiers).distributed).toBe(false);
    expect(onMultinode(command)?.value).toBeCloseTo(seconds(1, 1), 6);
  });

  it.each([
    { name: 'a launcher named by its path', command: ['/opt/conda/bin/torchrun', ...args] },
    { name: 'python -m torch.distributed.run', command: ['python3', '-m', 'torch.distributed.run', ...args] },
  ])('recognises $name as the program', ({ command }) => {
    expect(analyzeWorkload({ files: nanogpt, command }, tiers).distributed).toBe(true);
    expect(onMultinode(command)?.value).toBeCloseTo(seconds(4, 1), 6);
  });

  it.each([
    // The script and its settings (the shell's Python command is read for them too), as one shell word each.
    { script: `torchrun --nproc_per_node=4 ${args.join(' ')}`, distributed: true },
    { script: `cd /code && torchrun ${args.join(' ')}`, distributed: true },
    { script: `pip install -q tiktoken; NCCL_DEBUG=INFO exec deepspeed ${args.join(' ')}`, distributed: true },
    { script: `python ${args.join(' ')} --out_dir=runs/accelerate`, distributed: false },
    { script: `echo torchrun && python ${args.join(' ')}`, distributed: false },
  ])('reads the programs of a shell line, not their arguments: $script', ({ script, distributed }) => {
    for (const shell of [
      ['sh', '-c', script],
      ['/bin/bash', '-lc', script],
    ]) {
      expect(analyzeWorkload({ files: nanogpt, command: shell }, tiers).distributed).toBe(distributed);
    }
  });
});

/**
 * nanoGPT's config/finetune_shakespeare.py and config/eval_gpt2*.py as the analysis sees them, over the fixture's
 * train.py (block_size 1024, max_iters 600,000, eval_interval 2000).
 */
const finetuneXl = [
  "init_from = 'gpt2-xl'  # the largest GPT-2",
  "dataset = 'shakespeare'",
  'eval_interval = 5',
  'eval_iters = 40',
  'batch_size = 1',
  'gradient_accumulation_steps = 32',
  'max_iters = 20',
  'learning_rate = 3e-5',
].join('\n');
const evalConfig = (model: string) =>
  [
    'batch_size = 8',
    'eval_iters = 500  # more iterations for a good estimate',
    'eval_only = True',
    `init_from = '${model}'`,
  ].join('\n');

/** The analysis, also when no tier fits (WorkloadRefused carries it). */
function analysed(bundle: CodeBundle, tierList = tiers): ReturnType<typeof analyzeWorkload> {
  try {
    return analyzeWorkload(bundle, tierList);
  } catch (error) {
    if (error instanceof WorkloadRefused) return error.analysis;
    throw error;
  }
}

describe('init_from: a pretrained GPT-2 sets the model’s shape', () => {
  const withConfig = (config: string) => ({ ...nanogpt, 'config/run.py': config });
  const command = ['python', 'train.py', 'config/run.py'];

  // GPT-2's published shapes (Radford et al. 2019; Hugging Face's gpt2* configs): layers, heads, width; all have a
  // 50,257-token vocabulary, 1024 positions and biases. nanoGPT's from_pretrained takes these and ignores the script's.
  it.each([
    { model: 'gpt2', layers: 12, heads: 12, width: 768 },
    { model: 'gpt2-medium', layers: 24, heads: 16, width: 1024 },
    { model: 'gpt2-large', layers: 36, heads: 20, width: 1280 },
    { model: 'gpt2-xl', layers: 48, heads: 25, width: 1600 },
  ])(
    'sizes init_from=$model as $layers layers × $width, whatever n_layer and n_embd say',
    ({ model, layers, heads, width }) => {
      const a = analysed({ files: withConfig(`init_from = '${model}'\nn_layer = 4\nn_embd = 128\n`), command });
      const exact = gptParams(layers, width, 1024, 50257, true);
      const estimate = a.parameterCount?.value ?? Number.NaN;
      expect(Math.abs(estimate - exact) / exact).toBeLessThan(0.02);
      expect(a.parameterCount?.confidence).toBe('high');
      expect(a.hyperparameters).toMatchObject({
        n_layer: { value: layers, source: `${model} (init_from at config/run.py:1)` },
        n_head: { value: heads },
        n_embd: { value: width },
        vocab_size: { value: 50257 },
        bias: { value: 'True' },
        block_size: { value: 1024, source: 'train.py:25' },
      });
    },
  );

  it('refuses GPT-2 XL fine-tuning on the seed tiers, none of whose GPUs holds it', () => {
    const refused = thrown(() => analyzeWorkload({ files: withConfig(finetuneXl), command }, tiers)) as WorkloadRefused;
    expect(refused).toBeInstanceOf(WorkloadRefused);
    // 48 × (12·1600² + 13·1600) + 50257·1600 + 1024·1600 + 2·1600 = 1,557,611,200: GPT-2 XL's 1.56 G.
    const P = gptParams(48, 1600, 1024, 50257, true);
    expect(P).toBe(1_557_611_200);
    expect(refused.analysis.parameterCount?.value).toBe(P);
    // 16 B/param (23.2 GiB before activations) + batch 1 of 1024 tokens: 48 layers × (34·1024·1600 + 5·25·1024²) B
    // + logits 1024·50257·6 B + 1 GiB.
    const peak = (16 * P + 48 * (34 * 1024 * 1600 + 5 * 25 * 1024 ** 2) + 1024 * 50257 * 6 + GiB) / GiB;
    expect(refused.analysis.peakGpuMemoryGiB?.value).toBeCloseTo(peak, 6);
    expect(refused.message).toContain('≈1.56G parameters');
    expect(refused.message).toMatch(/gpu-large: needs ≈32\.\d GiB of GPU memory; gpu-large has 24 GiB per GPU/);
  });

  it('fits GPT-2 XL fine-tuning on a tier with 48 GB GPUs', () => {
    const l40s = parseConfig({
      tiers: [
        {
          id: 'gpu-l40s',
          kind: 'gpu',
          instanceTypes: ['g6e.xlarge', 'g6e.2xlarge'],
          gpus: 1,
          gpuMemoryGiB: 48,
          vcpus: 4,
          memoryMiB: 30000,
          maxRuntime: '24h',
          onDemandUsdPerHour: 1.861,
          spotUsdPerHour: 0.7,
          peakTflops: 362,
        },
      ],
    }).tiers;
    const a = analyzeWorkload({ files: withConfig(finetuneXl), command }, l40s);
    expect(a.recommendedTier).toBe('gpu-l40s');
    expect(a.recommendationReason).toMatch(/^gpu-l40s is the cheapest tier that fits: ≈32\.\d GiB of 48 GiB/);
  });

  it('crops the context to a smaller block_size, as nanoGPT does', () => {
    const a = analysed({ files: withConfig(`init_from = 'gpt2'\nblock_size = 256\n`), command });
    expect(a.parameterCount?.value).toBe(gptParams(12, 768, 256, 50257, true));
    expect(a.hyperparameters.block_size).toEqual({ value: 256, source: 'config/run.py:2' });
  });

  it('refuses a block_size above the pretrained model’s 1024 positions, which nanoGPT cannot extend', () => {
    const error = thrown(() =>
      analyzeWorkload({ files: withConfig(`init_from = 'gpt2'`), command: [...command, '--block_size=2048'] }, tiers),
    );
    expect(error).toEqual(
      new InvalidRequirement(
        "block_size is 2048 (--block_size=2048): init_from='gpt2' (config/run.py:1) loads a model with 1024 positions, which can be cropped, not extended; it must be at most 1024",
      ),
    );
  });

  it.each([
    {
      name: 'a checkpoint it does not know',
      config: "init_from = 'EleutherAI/gpt-neo-125M'",
      unknown:
        "init_from is 'EleutherAI/gpt-neo-125M' (config/run.py:1), not a model the analysis can size (gpt2, gpt2-medium, gpt2-large, gpt2-xl) nor 'scratch' or 'resume'; the parameter count assumes the shape in the code",
    },
    {
      name: 'a value read at run time',
      config: "init_from = os.environ['INIT']",
      unknown:
        "init_from at config/run.py:1 is not a literal (os.environ['INIT']); assumed the shape in the code ('scratch' or 'resume'), though the run may load another model",
    },
  ])('lists an init_from that is $name and lowers the parameter count’s confidence', ({ config, unknown }) => {
    const a = analysed({ files: withConfig(config), command });
    expect(a.unknowns).toContain(unknown);
    expect(a.parameterCount?.value).toBe(gptParams(12, 768, 1024, 50304, false));
    expect(a.parameterCount?.confidence).toBe('low');
  });

  it.each(['scratch', 'resume'])('builds init_from=%s from the shape in the code', (init) => {
    const a = analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, `--init_from=${init}`] }, tiers);
    expect(a.parameterCount).toMatchObject({ value: gptParams(6, 384, 256, 65, false), confidence: 'high' });
  });
});

describe('eval_only: one evaluation, not max_iters of training', () => {
  const command = ['python', 'train.py', 'config/eval.py'];
  const evaluate = (model: string) => analysed({ files: { ...nanogpt, 'config/eval.py': evalConfig(model) }, command });

  it('runs GPT-2 XL’s evaluation (nanoGPT’s eval_gpt2_xl.py) as eval_iters forward passes over both splits', () => {
    const a = evaluate('gpt2-xl');
    const P = gptParams(48, 1600, 1024, 50257, true);
    // One estimate_loss: 500 batches of 8 × 1024 tokens for each of the train and val splits.
    const tokens = 500 * 2 * 8 * 1024;
    expect(a.totalTokens?.value).toBe(tokens);
    // Forward only: 2 FLOPs per matmul parameter (position embedding excluded) + 4·L·d·T for attention, per token.
    const flops = (2 * (P - 1024 * 1600) + 4 * 48 * 1600 * 1024) * tokens;
    expect(a.flops?.value).toBeCloseTo(flops, -3);
    expect(a.flops?.basis).toContain('eval_only=True (config/eval.py:3): one evaluation');
    // Under torch.no_grad: fp32 weights 4 B + autocast's 16-bit copies 2 B per parameter, no gradients or Adam state;
    // one layer's activations at a time; logits of this batch and the last (2 B each) + fp32 copy and log-softmax
    // (4 B each); 1 GiB CUDA context. 15.7 GiB: more than a T4's 15 usable, less than an A10G's or L4's 22.5.
    const peak = (6 * P + (34 * 1024 * 8 * 1600 + 5 * 25 * 1024 ** 2 * 8) + 8 * 1024 * 50257 * 12 + GiB) / GiB;
    expect(a.peakGpuMemoryGiB?.value).toBeCloseTo(peak, 6);
    expect(a.recommendedTier).toBe('gpu-large');
    // gpu-large: 121 TFLOPS 16-bit peak, utilisation 0.3, 5 s PyTorch startup: ≈13 min, not 600,000 iterations.
    expect(a.perTier.find((t) => t.tier === 'gpu-large')?.runtimeSeconds?.value).toBeCloseTo(
      flops / (121e12 * 0.3) + 5,
      6,
    );
  });

  it('drops the script’s max_iters, which an evaluation does not run, from the steps the job counts to', () => {
    const a = evaluate('gpt2');
    expect(a.recommendedTier).toBe('gpu-small');
    expect(a.hyperparameters.max_iters).toBeUndefined();
    expect(a.hyperparameters.eval_only).toEqual({ value: 'True', source: 'config/eval.py:3' });
    expect(a.flops?.basis).toContain('max_iters=600000 (train.py:35) is not run');
  });

  it('analyses an evaluation run with --max_iters=0, which it never runs, instead of refusing it for no steps', () => {
    const a = analysed({
      files: { ...nanogpt, 'config/eval.py': evalConfig('gpt2') },
      command: [...command, '--max_iters=0'],
    });
    expect(a.hyperparameters.max_iters).toBeUndefined();
    expect(a.flops?.value).toBeGreaterThan(0);
  });

  it('estimates an evaluation whose eval_iters is not literal as unknown, and says which value is missing', () => {
    const files = { ...nanogpt, 'config/eval.py': 'eval_only = True\neval_iters = int(os.environ["N"])\n' };
    const a = analyzeWorkload({ files, command }, tiers);
    expect(a.flops).toBeUndefined();
    expect(a.unknowns).toContain(
      "runtime: eval_iters not literal, so tokens, FLOPs and runtime are unknown (give runtimeSeconds, the CLI's --runtime)",
    );
  });
});

describe('hyper-parameter precedence', () => {
  const extra = { ...nanogpt, 'config/deeper.py': 'n_layer = 8\nn_embd = 512\n' };
  it.each([
    {
      name: 'entry script alone',
      command: ['python', 'train.py'],
      n_layer: [12, 'train.py:27'],
      n_embd: [768, 'train.py:29'],
    },
    {
      name: 'config file over script',
      command: ['python', 'train.py', 'config/train_small.py'],
      n_layer: [4, 'config/train_small.py:12'],
      n_embd: [384, 'config/train_small.py:14'],
    },
    {
      name: 'override over config file',
      command: ['python', 'train.py', 'config/train_small.py', '--n_layer=6'],
      n_layer: [6, '--n_layer=6'],
      n_embd: [384, 'config/train_small.py:14'],
    },
    {
      name: 'second config file over the first',
      command: ['python', 'train.py', 'config/train_small.py', 'config/deeper.py'],
      n_layer: [8, 'config/deeper.py:1'],
      n_embd: [512, 'config/deeper.py:2'],
    },
    {
      name: 'later override over earlier override',
      command: ['python3', './train.py', '--n_layer=2', '--n_layer=3'],
      n_layer: [3, '--n_layer=3'],
      n_embd: [768, 'train.py:29'],
    },
  ])('$name', ({ command, n_layer, n_embd }) => {
    const a = analyzeWorkload({ files: extra, command }, tiers, { runtimeSeconds: 60 });
    expect(a.hyperparameters.n_layer).toEqual({ value: n_layer[0], source: n_layer[1] });
    expect(a.hyperparameters.n_embd).toEqual({ value: n_embd[0], source: n_embd[1] });
  });

  it('keeps a string override that is not a Python literal as the raw string', () => {
    const a = analyzeWorkload(
      { files: nanogpt, command: [...nanogptCommand, '--dtype=float32', '--compile=False'] },
      tiers,
    );
    expect(a.hyperparameters.dtype).toEqual({ value: 'float32', source: '--dtype=float32' });
    expect(a.unknowns).toEqual([]);
    // float32 on a T4 runs at 8.1 of its 65 16-bit TFLOPS (1/8), and activations take 4 bytes.
    const small = a.perTier.find((t) => t.tier === 'gpu-small');
    expect(small?.runtimeSeconds?.basis).toContain('× 0.125 (float32 (TF32 not allowed): T4 8.1 of 65 TFLOPS');
  });
});

describe('files that include others: read in place, as Python runs them', () => {
  // nanoGPT-style derived configs (its config/short_char.py pattern): the base's settings at the include's line, the
  // includer's later lines over them. The base is the fixture's config/train_small.py: L=4, d=384, T=256, V=65, no
  // biases: 65·384 + 256·384 + 4 × (12·384² + 2·384) + 384 = 24,960 + 98,304 + 4 × 1,770,240 + 384 = 7,204,608.
  it.each([
    { include: "exec(open('config/train_small.py').read())" },
    { include: 'exec(open("./config/train_small.py", encoding="utf-8").read())' },
    { include: 'from config.train_small import *' },
  ])('reads the base a config includes with $include', ({ include }) => {
    const files = { ...nanogpt, 'config/short.py': `${include}  # the base\nmax_iters = 2000\n` };
    const a = analyzeWorkload({ files, command: ['python', 'train.py', 'config/short.py'] }, tiers);
    expect(a.hyperparameters).toMatchObject({
      n_layer: { value: 4, source: 'config/train_small.py:12' },
      n_embd: { value: 384, source: 'config/train_small.py:14' },
      vocab_size: { value: 65, source: 'config/train_small.py:10' },
      batch_size: { value: 64, source: 'config/train_small.py:8' },
      max_iters: { value: 2000, source: 'config/short.py:2' },
    });
    expect(a.parameterCount).toMatchObject({ value: 7_204_608, confidence: 'high' });
    // 2000 iterations × 64 sequences × 256 tokens.
    expect(a.totalTokens?.value).toBe(32_768_000);
    expect(a.unknowns.filter((u) => u.includes('bundle'))).toEqual([]);
  });

  it('reads included files at most 500 times in all, and says from where it stopped', () => {
    // Nine files, each including the next six times: 6^8 ≈ 1.7 million reads if each were followed.
    const files: Record<string, string> = { ...nanogpt, 'config/c0.py': "exec(open('config/c1.py').read())\n" };
    for (let i = 1; i < 8; i++) files[`config/c${i}.py`] = `exec(open('config/c${i + 1}.py').read())\n`.repeat(6);
    files['config/c8.py'] = 'n_embd = 256\n';
    const a = analyzeWorkload({ files, command: ['python', 'train.py', 'config/c0.py', '--max_iters=2000'] }, tiers);
    // Read down to c8 before the reads ran out: its setting stands, and the stop is reported once.
    expect(a.hyperparameters.n_embd).toEqual({ value: 256, source: 'config/c8.py:1' });
    const stops = a.unknowns.filter((u) => u.includes('more than 500 times'));
    expect(stops).toHaveLength(1);
    expect(stops[0]).toMatch(
      /^the bundle's files include others more than 500 times in all; from exec\(open\('config\/c\d\.py'\)\.read\(\)\) at config\/c\d\.py:\d on, included files are not read, so the settings they make are unknown$/,
    );
  });

  it('applies an include at its line: what the includer set before it is replaced, what it sets after wins', () => {
    const files = {
      ...nanogpt,
      'config/mixed.py': 'n_layer = 9\nn_embd = 128\nfrom config.train_small import *\nn_embd = 256\n',
    };
    const a = analyzeWorkload({ files, command: ['python', 'train.py', 'config/mixed.py'] }, tiers);
    expect(a.hyperparameters.n_layer).toEqual({ value: 4, source: 'config/train_small.py:12' });
    expect(a.hyperparameters.n_embd).toEqual({ value: 256, source: 'config/mixed.py:4' });
  });

  it('reads a module the entry script imports with *, found from the entry script’s directory as Python does', () => {
    const script = (nanogpt['train.py'] ?? '').replace('n_layer = 12\n', 'from settings import *\n');
    const files = { 'src/train.py': script, 'src/settings.py': 'n_layer = 3\n', 'settings.py': 'n_layer = 7\n' };
    const a = analysed({ files, command: ['python', 'src/train.py'] });
    expect(a.hyperparameters.n_layer).toEqual({ value: 3, source: 'src/settings.py:1' });
  });

  it.each([{ include: "exec(open('config/base.py').read())" }, { include: 'from config.base import *' }])(
    'lists a base missing from the bundle ($include) and lowers the parameter count’s confidence',
    ({ include }) => {
      const files = { ...nanogpt, 'config/short.py': `${include}\nmax_iters = 2000\n` };
      const a = analyzeWorkload({ files, command: ['python', 'train.py', 'config/short.py'] }, tiers);
      expect(a.unknowns).toContain(
        `config/base.py is not in the bundle (${include} at config/short.py:1): the settings it makes are unknown; read as if it made none`,
      );
      expect(a.parameterCount?.confidence).toBe('low');
    },
  );

  it('takes `from <module> import *` of a module outside the bundle for an installed library: nothing to report', () => {
    const files = { ...nanogpt, 'config/short.py': 'from math import *\nfrom torch.nn import *\nmax_iters = 2000\n' };
    const a = analyzeWorkload(
      { files, command: ['python', 'train.py', 'config/train_small.py', 'config/short.py'] },
      tiers,
    );
    expect(a.unknowns.filter((u) => u.includes('bundle'))).toEqual([]);
    expect(a.parameterCount?.confidence).toBe('high');
  });

  it('reads a cycle of includes once and says so', () => {
    const files = {
      ...nanogpt,
      'config/a.py': "exec(open('config/b.py').read())\nn_layer = 5\n",
      'config/b.py': "exec(open('config/a.py').read())\nn_embd = 256\n",
    };
    const a = analysed({ files, command: ['python', 'train.py', 'config/a.py'] });
    expect(a.hyperparameters.n_layer).toEqual({ value: 5, source: 'config/a.py:2' });
    expect(a.hyperparameters.n_embd).toEqual({ value: 256, source: 'config/b.py:2' });
    expect(a.unknowns).toContain(
      "exec(open('config/a.py').read()) at config/b.py:1 includes config/a.py, which is already being read: the cycle is read once",
    );
  });

  it('stops following includes nested more than 8 deep, and says the settings there are unknown', () => {
    // config/c0.py (from the command) includes c1, which includes c2, … c8 includes c9: c9 is 9 includes deep.
    const chain: Record<string, string> = {};
    for (let i = 0; i < 9; i++) chain[`config/c${i}.py`] = `exec(open('config/c${i + 1}.py').read())\n`;
    chain['config/c8.py'] += 'n_layer = 8\n';
    chain['config/c9.py'] = 'n_embd = 64\n';
    const a = analysed({ files: { ...nanogpt, ...chain }, command: ['python', 'train.py', 'config/c0.py'] });
    expect(a.hyperparameters.n_layer).toEqual({ value: 8, source: 'config/c8.py:2' });
    expect(a.hyperparameters.n_embd).toEqual({ value: 768, source: 'train.py:29' });
    expect(a.unknowns).toContain(
      "config/c9.py (exec(open('config/c9.py').read()) at config/c8.py:1) is nested more than 8 includes deep: not read, so the settings it makes are unknown",
    );
    expect(a.parameterCount?.confidence).toBe('low');
  });
});

describe('requirements.totalSteps: the steps a job runs, for its progress and its estimate', () => {
  const literal = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers);
  // The same project with max_iters read from the environment: no literal the analysis can see.
  const script = (nanogpt['train.py'] ?? '').replace('max_iters = 600_000', "max_iters = int(os.environ['STEPS'])");
  const config = (nanogpt['config/train_small.py'] ?? '').replace('max_iters = 5000', '');
  const unread = { ...nanogpt, 'train.py': script, 'config/train_small.py': config };
  const withoutIters = ['python', 'train.py', 'config/train_small.py', '--n_layer=6'];

  it('takes totalSteps as max_iters over a literal one, and says it did', () => {
    const a = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers, { totalSteps: 4000 });

    expect(a.hyperparameters.max_iters).toEqual({ value: 4000, source: 'requirements.totalSteps' });
    expect(a.overridesApplied).toContain('totalSteps=4000 (code: max_iters=2000 at --max_iters=2000)');
    // Twice the command's 2000 iterations: twice the training tokens.
    expect((a.totalTokens?.value ?? 0) / (literal.totalTokens?.value ?? 1)).toBe(2);
  });

  it('tells a deadline job without a literal max_iters that its progress is unknown, unless totalSteps says it', () => {
    const blind = analyzeWorkload({ files: unread, command: withoutIters }, tiers, { deadlineSeconds: 36_000 });
    expect(blind.unknowns.filter((u) => u.startsWith('progress:'))).toEqual([
      "progress: the job's total steps are unknown (no literal max_iters), so its deadline rules count it as not started until it ends and may move it to on-demand early; pass totalSteps (trainyard --total-steps) to track it",
    ]);

    const told = analyzeWorkload({ files: unread, command: withoutIters }, tiers, {
      deadlineSeconds: 36_000,
      totalSteps: 3000,
    });
    expect(told.unknowns.filter((u) => u.startsWith('progress:'))).toEqual([]);
    expect(told.overridesApplied).toContain('totalSteps=3000 (max_iters is not a literal in the code)');
    // Without a deadline nothing depends on it: no line.
    const undated = analyzeWorkload({ files: unread, command: withoutIters }, tiers, { runtimeSeconds: 3600 });
    expect(undated.unknowns.filter((u) => u.startsWith('progress:'))).toEqual([]);
  });

  it.each([0, -3, 2.5])('refuses totalSteps %d, changing nothing', (totalSteps) => {
    expect(
      thrown(() => analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers, { totalSteps })),
    ).toBeInstanceOf(InvalidRequirement);
  });
});

describe('a command run through a shell (sh -c "…")', () => {
  const direct = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers);

  it.each([
    ['one command', 'python train.py config/train_small.py --n_layer=6 --max_iters=2000'],
    [
      'after other commands',
      'set -e; nvidia-smi || true && python train.py config/train_small.py --n_layer=6 "--max_iters=2000"',
    ],
    ['with quoted and escaped words', "python train.py 'config/train_small.py' --n_layer=\\6 --max_iters='2000'"],
  ])('reads the Python command %s as if it were given alone', (_what, script) => {
    const viaShell = analyzeWorkload({ files: nanogpt, command: ['bash', '-c', script] }, tiers);
    expect(viaShell.parameterCount?.value).toBe(direct.parameterCount?.value);
    expect(viaShell.flops?.value).toBe(direct.flops?.value);
    expect(viaShell.unknowns.filter((u) => u.includes('no Python entry script'))).toEqual([]);
  });

  it('splits words as a POSIX shell does, expansions left as written', () => {
    expect(shellWords(`python train.py --a='x y' --b="q \\"r\\" \\$s" c\\ d  e $HOME`)).toEqual([
      'python',
      'train.py',
      '--a=x y',
      '--b=q "r" $s',
      'c d',
      'e',
      '$HOME',
    ]);
  });
});

describe('float32 training: each GPU at its own float32 or TF32 peak', () => {
  const float32 = (extra: string[], files: Record<string, string> = nanogpt) =>
    analyzeWorkload({ files, command: [...nanogptCommand, '--dtype=float32', ...extra] }, tiers);
  const sixteenBit = analyzeWorkload({ files: nanogpt, command: nanogptCommand }, tiers);
  // Runtime minus the 5 s torch startup: FLOPs ÷ throughput, so the ratio of two is the ratio of their throughputs.
  const compute = (a: ReturnType<typeof analyzeWorkload>, tier: string) =>
    (a.perTier.find((t) => t.tier === tier)?.runtimeSeconds?.value ?? Number.NaN) - 5;

  it.each([
    // gpu-large may land on an A10G (31.2 float32, 62.5 TF32 of 125 TFLOPS) or an L4 (30.3, 60 of 121): the least share
    // counts, the A10G's 31.2/125 in float32 and the L4's 60/121 in TF32.
    { name: 'gpu-large in float32', tier: 'gpu-large', extra: [], share: 31.2 / 125 },
    { name: 'gpu-large with --tf32=True', tier: 'gpu-large', extra: ['--tf32=True'], share: 60 / 121 },
    { name: 'gpu-large with --tf32=False', tier: 'gpu-large', extra: ['--tf32=False'], share: 31.2 / 125 },
    // gpu-small may land on a T4, which has no TF32: 8.1 of 65 TFLOPS either way.
    { name: 'gpu-small in float32', tier: 'gpu-small', extra: [], share: 8.1 / 65 },
    { name: 'gpu-small with --tf32=True', tier: 'gpu-small', extra: ['--tf32=True'], share: 8.1 / 65 },
  ])('$name runs at its GPU’s share of the 16-bit estimate', ({ tier, extra, share }) => {
    const ratio = compute(sixteenBit, tier) / compute(float32(extra), tier);
    expect(ratio).toBeCloseTo(Number(share.toPrecision(3)), 6);
  });

  it('names the GPU and the peaks behind the share, and what allowed TF32', () => {
    const large = float32(['--tf32=True']).perTier.find((t) => t.tier === 'gpu-large');
    expect(large?.runtimeSeconds?.basis).toContain(
      "× 0.496 (float32 as TF32 (tf32=True (--tf32=True)): L4 60 of 121 TFLOPS, the least of the tier's GPUs)",
    );
    const small = float32(['--tf32=True']).perTier.find((t) => t.tier === 'gpu-small');
    expect(small?.runtimeSeconds?.basis).toContain('× 0.125 (float32 (this GPU has no TF32): T4 8.1 of 65 TFLOPS');
  });

  it.each([
    { name: 'matmul.allow_tf32 = True', line: 'torch.backends.cuda.matmul.allow_tf32 = True', tf32: true },
    { name: "set_float32_matmul_precision('high')", line: "torch.set_float32_matmul_precision('high')", tf32: true },
    {
      name: "set_float32_matmul_precision('medium')",
      line: 'torch.set_float32_matmul_precision("medium")',
      tf32: true,
    },
    { name: "fp32_precision = 'tf32'", line: "torch.backends.cuda.matmul.fp32_precision = 'tf32'", tf32: true },
    {
      name: "set_float32_matmul_precision('highest')",
      line: "torch.set_float32_matmul_precision('highest')",
      tf32: false,
    },
    { name: 'allow_tf32 = False', line: 'torch.backends.cuda.matmul.allow_tf32 = False', tf32: false },
    { name: 'a commented-out allow_tf32 = True', line: '# torch.backends.cuda.matmul.allow_tf32 = True', tf32: false },
    {
      name: 'cudnn.allow_tf32 = True (convolutions only)',
      line: 'torch.backends.cudnn.allow_tf32 = True',
      tf32: false,
    },
  ])('reads TF32 from code: $name', ({ line, tf32 }) => {
    const script = nanogpt['train.py'] ?? '';
    const a = float32([], { ...nanogpt, 'train.py': `${script}\n${line}\n` });
    const basis = a.perTier.find((t) => t.tier === 'gpu-large')?.runtimeSeconds?.basis ?? '';
    expect(basis.includes('float32 as TF32')).toBe(tf32);
    if (tf32) expect(basis).toContain(`at train.py:${script.split('\n').length + 1}`);
  });

  it('leaves 16-bit training at the full 16-bit peak whatever TF32 says', () => {
    const a = analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, '--tf32=True'] }, tiers);
    expect(compute(a, 'gpu-large')).toBeCloseTo(compute(sixteenBit, 'gpu-large'), 9);
    expect(a.hyperparameters.tf32).toEqual({ value: 'True', source: '--tf32=True' });
  });
});

describe('GPU detection', () => {
  const script = (body: string): CodeBundle => ({ files: { 'main.py': body }, command: ['python', 'main.py'] });
  it.each([
    {
      name: '.cuda()',
      code: 'import torch\nmodel = Net()\nmodel.cuda()\n',
      gpu: true,
      confidence: 'high',
      basis: '.cuda() at main.py:3',
    },
    {
      name: ".to('cuda')",
      code: 'import torch\nx = x.to("cuda")\n',
      gpu: true,
      confidence: 'high',
      basis: ".to('cuda') at main.py:2",
    },
    {
      name: "device='cuda' argument",
      code: 'import torch\nx = torch.zeros(3, device="cuda:0")\n',
      gpu: true,
      confidence: 'high',
      basis: "device='cuda' at main.py:2",
    },
    {
      name: 'torch.cuda calls only',
      code: 'import torch\nprint(torch.cuda.device_count())\n',
      gpu: true,
      confidence: 'medium',
      basis: 'torch.cuda calls at main.py:2: the code queries for a GPU and likely uses one',
    },
    {
      name: 'commented-out CUDA',
      code: 'import torch\n# model.cuda()\n',
      gpu: false,
      confidence: 'high',
      basis: 'PyTorch code with no CUDA placement (PyTorch defaults to the CPU)',
    },
    { name: 'plain Python', code: 'print(1)\n', gpu: false, confidence: 'high', basis: 'no GPU framework imported' },
    {
      name: 'literal device cpu beats CUDA hints',
      code: "import torch\ndevice = 'cpu'\nok = torch.cuda.is_available()\n",
      gpu: false,
      confidence: 'high',
      basis: "device='cpu' (main.py:2)",
    },
  ])('$name', ({ code, gpu, confidence, basis }) => {
    const a = analyzeWorkload(script(code), tiers, { runtimeSeconds: 10 });
    expect(a.usesGpu).toEqual({ value: gpu, basis, confidence });
  });

  it('says plainly when TensorFlow code names no device', () => {
    const a = analyzeWorkload(script('import tensorflow as tf\nmodel = tf.keras.Sequential()\n'), tiers, {
      runtimeSeconds: 10,
    });
    expect(a.framework).toBe('tensorflow');
    expect(a.usesGpu.confidence).toBe('low');
    expect(a.unknowns).toContain(
      'GPU use: tensorflow places work on a GPU automatically when one is present and the code names no device; assumed CPU (pass a tier or gpuMemoryGiB to run on a GPU)',
    );
  });

  it.each([
    { code: 'import jax.numpy as jnp\n', framework: 'jax' },
    { code: 'from tensorflow import keras\n', framework: 'tensorflow' },
    { code: 'import torch.nn as nn\n', framework: 'torch' },
    { code: 'import numpy as np\n', framework: 'none' },
  ])('detects framework $framework', ({ code, framework }) => {
    expect(analyzeWorkload(script(code), tiers, { runtimeSeconds: 10 }).framework).toBe(framework);
  });
});

describe('tier choice for CPU code and refusals', () => {
  it('gives a project with no GPU use a CPU tier', () => {
    const a = analyzeWorkload({ files: loadProject('cpu-tiny'), command: ['python', 'train.py'] }, tiers);
    expect(a.usesGpu).toEqual({ value: false, basis: "device='cpu' (train.py:16)", confidence: 'high' });
    expect(a.recommendedTier).toBe('cpu-small');
    expect(a.alternatives).toEqual(['cpu-large']);
    // 104,832 parameters (2 layers, d=64, T=32, V=65, no bias) × 16 B + fp32 activations + 300 MiB for torch.
    const P = gptParams(2, 64, 32, 65, false);
    expect(P).toBe(104_832);
    expect(a.parameterCount?.value).toBe(P);
    const activationsFp32 = 2 * (34 * 32 * 8 * 64 + 5 * 2 * 32 * 32 * 8) * 2 + 8 * 32 * 65 * 8;
    const needMiB = Math.ceil((16 * P + activationsFp32) / 1024 ** 2 + 300);
    expect(a.perTier.find((t) => t.tier === 'cpu-small')?.reason).toMatch(
      new RegExp(`^≈${needMiB} of 512 MiB memory, ≈[\\d.]+ s of 30 s max runtime`),
    );
    for (const t of a.perTier.filter((x) => x.tier.startsWith('gpu'))) {
      expect(t).toMatchObject({
        fits: false,
        reason: 'the code runs on the CPU; a gpu tier would bill for an idle GPU',
      });
    }
  });

  it('refuses a model too big for every GPU tier, with the numbers', () => {
    const refused = thrown(() =>
      analyzeWorkload({ files: nanogpt, command: ['python', 'train.py', '--n_layer=48', '--n_embd=6400'] }, tiers),
    ) as WorkloadRefused;
    expect(refused).toBeInstanceOf(WorkloadRefused);
    // 48 layers × 12 × 6400² ≈ 23.9 G parameters (vocab assumed GPT-2’s 50304); 16 B each alone is ≈ 356 GiB.
    expect(refused.analysis.parameterCount?.value).toBe(gptParams(48, 6400, 1024, 50304, false));
    expect(refused.message).toMatch(
      /^no tier fits this workload: code uses a GPU \(device='cuda' \(train\.py:38\)\), ≈23\.9G parameters, ≈\d+ GiB peak GPU memory/,
    );
    expect(refused.message).toMatch(/gpu-large: needs ≈\d+ GiB of GPU memory; gpu-large has 24 GiB per GPU/);
    expect(refused.message).toMatch(/gpu-small: needs ≈\d+ GiB of GPU memory; gpu-small has 16 GiB per GPU/);
    expect(refused.analysis.recommendedTier).toBeUndefined();
  });

  it('refuses CPU code that no CPU tier can finish within its maximum runtime', () => {
    expect(() =>
      analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, '--device=cpu', '--batch_size=8'] }, tiers),
    ).toThrow(/cpu-large: estimated runtime [\d.]+ (min|h) exceeds cpu-large's maximum 10 min/);
  });
});

describe('user requirements override the analysis', () => {
  const bundle = { files: nanogpt, command: nanogptCommand };

  it.each([
    {
      name: 'tier',
      req: { tier: 'gpu-large' },
      tier: 'gpu-large',
      applied: ['tier=gpu-large (analysis would pick gpu-small)'],
    },
    {
      name: 'GPU memory above a 16 GiB card',
      req: { gpuMemoryGiB: 20 },
      tier: 'gpu-large',
      applied: ['gpuMemoryGiB=20 (analysis: 3.1 GiB)'],
    },
    {
      // 3 h is past gpu-small's 2 h limit; gpu-medium costs 3 × $0.752 < 3 × $1.212 on gpu-large.
      name: 'runtime beyond gpu-small’s maximum',
      req: { runtimeSeconds: 3 * 3600 },
      tier: 'gpu-medium',
      applied: ['runtimeSeconds=10800'],
    },
    {
      // gpu-small needs ≈196 s, gpu-large ≈104 s: only the faster card meets 150 s.
      name: 'deadline only the faster tier meets',
      req: { deadlineSeconds: 150 },
      tier: 'gpu-large',
      applied: ['deadlineSeconds=150'],
    },
  ])('$name', ({ req, tier, applied }) => {
    const a = analyzeWorkload(bundle, tiers, req);
    expect(a.recommendedTier).toBe(tier);
    expect(a.overridesApplied).toEqual(applied);
  });

  it('keeps a requested tier that does not fit, and says so', () => {
    const a = analyzeWorkload(bundle, tiers, { tier: 'gpu-small', gpuMemoryGiB: 20 });
    expect(a.recommendedTier).toBe('gpu-small');
    expect(a.recommendationReason).toBe(
      'gpu-small was requested (tier override) although the analysis says it does not fit: needs ≈20 GiB of GPU memory; gpu-small has 16 GiB per GPU (15 GiB usable by CUDA)',
    );
    expect(a.overridesApplied[0]).toBe('tier=gpu-small (analysis would pick gpu-large)');
  });

  it('counts the GPU memory CUDA can use, not the nominal figure: a 16 GB T4 reports 15,360 MiB', () => {
    const small = (gpuMemoryGiB: number) =>
      analyzeWorkload(bundle, tiers, { gpuMemoryGiB }).perTier.find((t) => t.tier === 'gpu-small');
    expect(small(15.5)).toMatchObject({
      fits: false,
      reason: 'needs ≈15.5 GiB of GPU memory; gpu-small has 16 GiB per GPU (15 GiB usable by CUDA)',
    });
    expect(small(14.9)?.fits).toBe(true);
    // gpu-large may land on an A10G (23,028 MiB) or an L4 (23,034 MiB): the smaller counts, 22.49 GiB, and no tier
    // of the seed configuration holds 22.6 GiB.
    expect(thrown(() => analyzeWorkload(bundle, tiers, { gpuMemoryGiB: 22.6 })).message).toContain(
      'gpu-large: needs ≈22.6 GiB of GPU memory; gpu-large has 24 GiB per GPU (22.5 GiB usable by CUDA)',
    );
  });

  it('turns CPU code into GPU code when GPU memory is required', () => {
    const a = analyzeWorkload({ files: loadProject('cpu-tiny'), command: ['python', 'train.py'] }, tiers, {
      gpuMemoryGiB: 4,
    });
    expect(a.usesGpu).toEqual({ value: true, basis: 'user requires 4 GiB of GPU memory', confidence: 'high' });
    expect(a.recommendedTier).toBe('gpu-small');
  });

  it('names the unknown tier and every defined one', () => {
    const caught = thrown(() => analyzeWorkload(bundle, tiers, { tier: 'gpu-huge' }));
    expect(caught).toBeInstanceOf(UnknownTier);
    expect(caught.message).toBe(
      'unknown tier "gpu-huge"; defined tiers: cpu-small, cpu-large, gpu-small, gpu-medium, gpu-large, gpu-multinode',
    );
  });

  it.each([
    [
      '--max_iters=0',
      'max_iters is 0 (--max_iters=0): it must be at least 1 (a job with no training steps has nothing to run)',
    ],
    ['--batch_size=0', 'batch_size is 0 (--batch_size=0): it must be at least 1'],
    ['--n_layer=-2', 'n_layer is -2 (--n_layer=-2): it must be at least 1'],
  ])('refuses %s in the command, naming where it came from', (override, message) => {
    const error = thrown(() => analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, override] }, tiers));
    expect(error).toEqual(new InvalidRequirement(message));
  });

  it.each([
    {
      where: 'in the command',
      arg: '--max_iters=5k',
      config: '',
      message: "max_iters is '5k' (--max_iters=5k): it must be a number",
    },
    {
      where: 'in the command',
      arg: '--batch_size=sixty',
      config: '',
      message: "batch_size is 'sixty' (--batch_size=sixty): it must be a number",
    },
    {
      where: 'in a config file',
      arg: '',
      config: "n_layer = 'six'\n",
      message: "n_layer is 'six' (config/bad.py:1): it must be a number",
    },
  ])(
    'refuses a size that is a string $where, naming the key, the value and where it came from',
    ({ arg, config, message }) => {
      const files = { ...nanogpt, 'config/bad.py': config };
      const command = [...nanogptCommand, 'config/bad.py', ...(arg ? [arg] : [])];
      expect(thrown(() => analyzeWorkload({ files, command }, tiers))).toEqual(new InvalidRequirement(message));
    },
  );

  // ast.literal_eval reads every Python spelling of an int, as the configurators do: 0x40 = 64, 0o3720 = 3·512 +
  // 7·64 + 2·8 = 2000, 0b110 = 6: the same run as the decimal command (6 layers, 2000 iterations of 64 × 256 tokens).
  it('reads hexadecimal, octal and binary sizes as the numbers Python makes of them', () => {
    const a = analyzeWorkload(
      {
        files: nanogpt,
        command: [
          'python',
          'train.py',
          'config/train_small.py',
          '--n_layer=0b110',
          '--max_iters=0o3720',
          '--batch_size=0x40',
        ],
      },
      tiers,
    );
    expect(a.hyperparameters).toMatchObject({
      n_layer: { value: 6, source: '--n_layer=0b110' },
      max_iters: { value: 2000, source: '--max_iters=0o3720' },
      batch_size: { value: 64, source: '--batch_size=0x40' },
    });
    // 2000 iterations × 64 sequences × 256 tokens = 32,768,000.
    expect(a.totalTokens?.value).toBe(32_768_000);
  });

  // nanoGPT's configurator asserts type(attempt) == type(globals()[key]); the example trainer raises "--max_iters
  // expects an int" for a float given to an int setting. Both stop the job after its machine started.
  it.each([
    [
      '--max_iters=5e3',
      "max_iters is 5e3, a float (--max_iters=5e3): it must be an int (write 5000); the script's configurator refuses a float for an int setting, so the job would stop after its machine started",
    ],
    [
      '--batch_size=12.5',
      "batch_size is 12.5, a float (--batch_size=12.5): it must be an int; the script's configurator refuses a float for an int setting, so the job would stop after its machine started",
    ],
    [
      '--n_layer=6.',
      "n_layer is 6., a float (--n_layer=6.): it must be an int (write 6); the script's configurator refuses a float for an int setting, so the job would stop after its machine started",
    ],
  ])('refuses the float override %s of an int size, naming the key, the value and what is allowed', (arg, message) => {
    const error = thrown(() => analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, arg] }, tiers));
    expect(error).toEqual(new InvalidRequirement(message));
  });

  it('takes a float override of a size the code sets to a float, as the configurators do, and floats in files', () => {
    // A Python file is not type checked: `max_iters = 5e3` makes max_iters the float 5000.0, and a float override of
    // it keeps the type. 6e3 = 6000 iterations × 64 × 256 = 98,304,000 tokens.
    const files = { ...nanogpt, 'config/float.py': 'max_iters = 5e3\n' };
    const command = ['python', 'train.py', 'config/train_small.py', 'config/float.py'];
    expect(analyzeWorkload({ files, command }, tiers).hyperparameters.max_iters).toEqual({
      value: 5000,
      source: 'config/float.py:1',
    });
    const a = analyzeWorkload({ files, command: [...command, '--max_iters=6e3'] }, tiers);
    expect(a.hyperparameters.max_iters).toEqual({ value: 6000, source: '--max_iters=6e3' });
    expect(a.totalTokens?.value).toBe(98_304_000);
    // A float for a setting that is not a size is the script's business (learning_rate, dropout are floats anyway).
    expect(() =>
      analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, '--dropout=0.1'] }, tiers),
    ).not.toThrow();
  });

  it('leaves a size given as an expression it cannot evaluate as not literal, for the script to decide', () => {
    const a = analyzeWorkload({ files: nanogpt, command: [...nanogptCommand, '--max_iters=int(5e3)'] }, tiers);
    expect(a.hyperparameters.max_iters).toBeUndefined();
    expect(a.unknowns).toContain('max_iters at --max_iters=int(5e3) is not a literal (--max_iters=int(5e3))');
  });

  it.each([
    { req: { runtimeSeconds: -5 }, message: 'runtimeSeconds must be a finite number > 0, got -5' },
    { req: { deadlineSeconds: 0 }, message: 'deadlineSeconds must be a finite number > 0, got 0' },
    {
      req: { runtimeSeconds: 1e13 },
      message:
        'runtimeSeconds must be at most 1209600 (14 days, the longest maxRuntime a tier may have), got 10000000000000',
    },
    { req: { gpuMemoryGiB: Number.NaN }, message: 'gpuMemoryGiB must be a finite number >= 0, got NaN' },
  ])('rejects $message', ({ req, message }) => {
    expect(() => analyzeWorkload(bundle, tiers, req)).toThrow(new InvalidRequirement(message));
  });
});

describe('unknowns are reported, assumptions stated', () => {
  const withoutVocab = (files: Record<string, string>) => ({
    ...files,
    'config/train_small.py': (files['config/train_small.py'] ?? '').replace(/^vocab_size = .*$/m, ''),
  });

  it('assumes the character-level vocabulary for a tiny-Shakespeare project and says where vocab_size was set', () => {
    const a = analyzeWorkload({ files: withoutVocab(nanogpt), command: nanogptCommand }, tiers);
    expect(a.unknowns).toContain(
      "vocab_size at train.py:32 is None (decided at run time); assumed 65 (character-level, taken as tiny Shakespeare's 65 characters: dataset 'shakespeare_char' (config/train_small.py:5))",
    );
    expect(a.parameterCount?.value).toBe(gptParams(6, 384, 256, 65, false));
    expect(a.parameterCount?.confidence).toBe('medium');
  });

  it('assumes the GPT-2 vocabulary when nothing says character-level', () => {
    const files = withoutVocab(nanogpt);
    files['config/train_small.py'] = (files['config/train_small.py'] ?? '').replace(/shakespeare_char/g, 'owt');
    const a = analyzeWorkload({ files, command: nanogptCommand }, tiers);
    expect(a.parameterCount?.value).toBe(gptParams(6, 384, 256, 50304, false));
    expect(a.unknowns.some((u) => u.endsWith('assumed 50304 (GPT-2 vocabulary padded to 64)'))).toBe(true);
  });

  // A script that sets no vocab_size: what it says about its vocabulary decides the assumption. With L=2, d=64, T=32
  // and biases (assumed): V·64 + 32·64 + 2 × (12·64² + 13·64) + 2·64 = V·64 + 2,048 + 2 × 49,984 + 128
  // = 106,304 for V = 65 (4,160 + 102,144) and 3,321,600 for V = 50,304 (3,219,456 + 102,144).
  const charScript = (lines: string[]) => ({
    'train.py': [
      ...lines,
      'import torch',
      'n_layer = 2',
      'n_embd = 64',
      'block_size = 32',
      'batch_size = 8',
      'max_iters = 100',
      "device = 'cuda'",
    ].join('\n'),
  });
  it.each([
    {
      name: 'a docstring saying Character-level',
      lines: ['"""Character-level GPT on tinyshakespeare."""'],
      evidence: "'Character-level' at train.py:1",
    },
    {
      name: 'a vocabulary of the text’s characters',
      lines: ['text = open("input.txt").read()', 'chars = sorted(list(set(text)))'],
      evidence: "'chars = sorted(list(set(text)))' at train.py:2",
    },
    {
      name: 'a vocabulary size counted from the characters',
      lines: ['vocab = len(chars)  # distinct characters'],
      evidence: "'vocab = len(chars)  # distinct characters' at train.py:1",
    },
  ])('assumes 65 characters for $name', ({ lines, evidence }) => {
    const a = analyzeWorkload({ files: charScript(lines), command: ['python', 'train.py'] }, tiers);
    expect(a.parameterCount?.value).toBe(106_304);
    expect(a.unknowns).toContain(
      `vocab_size is not set in the code or command; assumed 65 (character-level, taken as tiny Shakespeare's 65 characters: ${evidence})`,
    );
  });

  it.each([
    // nanoGPT's data/shakespeare encodes tinyshakespeare with GPT-2's BPE: a corpus's name is not a vocabulary.
    { name: 'the corpus’s name alone', lines: ['"""GPT on tinyshakespeare."""'] },
    { name: 'a sorted set of words', lines: ['words = sorted(set(text.split()))'] },
    // nanoGPT reads the vocabulary from data/<dataset>/meta.pkl: a literal dataset outranks the words.
    {
      name: 'a BPE dataset, whatever the words',
      lines: ['"""A character-level trainer."""', "dataset = 'openwebtext'"],
    },
  ])('assumes the GPT-2 vocabulary for $name', ({ lines }) => {
    const a = analyzeWorkload({ files: charScript(lines), command: ['python', 'train.py'] }, tiers);
    expect(a.parameterCount?.value).toBe(3_321_600);
  });

  it('leaves model figures undefined when the size is not literal, and still picks the cheapest GPU tier', () => {
    const a = analyzeWorkload(
      { files: { 'run.py': 'import torch\nmodel = build(cfg).cuda()\n' }, command: ['python', 'run.py'] },
      tiers,
    );
    expect(a.parameterCount).toBeUndefined();
    expect(a.peakGpuMemoryGiB).toBeUndefined();
    expect(a.flops).toBeUndefined();
    expect(a.unknowns).toEqual([
      "model size: n_layer, n_embd, block_size not found as literals, so parameter count, GPU memory and runtime are unknown (give gpuMemoryGiB and runtimeSeconds, the CLI's --gpu-memory and --runtime, to size the job)",
    ]);
    expect(a.recommendedTier).toBe('gpu-small');
    expect(a.perTier.find((t) => t.tier === 'gpu-small')?.reason).toBe(
      'GPU memory not estimated, runtime not estimated (max 2 h)',
    );
  });

  it('reports a command without an entry script and files missing from the bundle', () => {
    const a = analyzeWorkload({ files: {}, command: ['python', 'train.py', 'config/x.py'] }, tiers, {
      runtimeSeconds: 10,
    });
    expect(a.unknowns.slice(0, 2)).toEqual([
      'entry script train.py is not in the bundle',
      'config file config/x.py (from the command) is not in the bundle',
    ]);
    const b = analyzeWorkload({ files: {}, command: ['bash', 'run.sh'] }, tiers, { runtimeSeconds: 10 });
    expect(b.unknowns[0]).toBe(
      'no Python entry script in the command (["bash","run.sh"]): hyper-parameters read from no file',
    );
  });
});

describe('python literal reading', () => {
  it.each([
    ['5 * 8', 40],
    ['600_000', 600000],
    ['6e-4', 6e-4],
    ['1e-1', 0.1],
    ['-3', -3],
    ['-2 ** 2', -4],
    ['2 ** 10', 1024],
    ['(1 + 2) * 3', 9],
    ['7 // 2', 3],
    ['7 % 4', 3],
    ["'owt'", 'owt'],
    ['"a#b"', 'a#b'],
    ["'ab' 'cd'", 'abcd'],
    ['True', true],
    ['False', false],
    ['None', null],
    ['1 / 0', undefined],
    ['torch.float16', undefined],
    ["'bf16' if ok else 'fp16'", undefined],
    ['f"{x}"', undefined],
    ['[1, 2]', undefined],
  ])('%s → %s', (text, value) => {
    expect(evaluateLiteral(text)).toBe(value);
  });

  // Python's numeric literals (Language Reference 2.4.5-2.4.6), as ast.literal_eval reads them: 0x40 = 4·16 = 64,
  // 0o17 = 1·8 + 7 = 15, 0b101 = 4 + 1 = 5; an underscore may sit between digits, in an exponent too (1e1_0 = 1e10).
  // A decimal int with a leading zero, a doubled or trailing underscore, a bare 0x and an imaginary number are not
  // numbers (literal_eval raises, so a configurator keeps the text).
  it.each([
    ['0x40', 64],
    ['0X4_0', 64],
    ['0o17', 15],
    ['0b101', 5],
    ['0b_101', 5],
    ['1e1_0', 1e10],
    ['1_000.5', 1000.5],
    ['1.e2', 100],
    ['012.5', 12.5],
    ['00', 0],
    ['2 * 0x10', 32],
    ['012', undefined],
    ['1__0', undefined],
    ['1_', undefined],
    ['0x', undefined],
    ['0b2', undefined],
    ['3j', undefined],
    ['5k', undefined],
  ])('reads the number %s as %s', (text, value) => {
    expect(evaluateLiteral(text)).toBe(value);
  });

  // The type Python gives: int op int is an int, except true division and a negative power; a float anywhere makes a
  // float; 5e3 and 5. are floats although whole.
  it.each([
    ['5000', 5000, 'int'],
    ['5_000', 5000, 'int'],
    ['0x40', 64, 'int'],
    ['5e3', 5000, 'float'],
    ['5.', 5, 'float'],
    ['-2', -2, 'int'],
    ['-2.0', -2, 'float'],
    ['7 // 2', 3, 'int'],
    ['7 % 4', 3, 'int'],
    ['6 / 3', 2, 'float'],
    ['2 ** 3', 8, 'int'],
    ['2 ** -1', 0.5, 'float'],
    ['1.0 * 3', 3, 'float'],
    ['7.0 // 2', 3, 'float'],
    ["'ab'", 'ab', 'str'],
    ['True', true, 'bool'],
    ['None', null, 'NoneType'],
  ])('types %s as %s (%s)', (text, value, type) => {
    expect(parseLiteral(text)).toEqual({ value, type });
  });

  // `import config.base` runs the module but binds only the name `config`: its settings do not become the importer's.
  it('finds the top-level statements that pull another file’s settings in', () => {
    const source = [
      "exec(open('config/base.py').read())  # the base",
      'from config.common import *',
      'if fast:',
      "    exec(open('config/fast.py').read())",
      'exec(open(config_file).read())',
      'from . import *',
      'from config import base',
      'import config.base',
    ].join('\n');
    expect(topLevelIncludes(source)).toEqual([
      { line: 1, kind: 'exec', target: 'config/base.py', text: "exec(open('config/base.py').read())" },
      { line: 2, kind: 'import', target: 'config.common', text: 'from config.common import *' },
    ]);
  });

  it('reads only unindented assignments and strips comments outside strings', () => {
    const source = [
      "name = 'x#y'  # the comment",
      'n_layer: int = 6',
      'if True:',
      '    n_layer = 99',
      'ok = a == b',
      'flag == 3',
    ].join('\n');
    expect(topLevelAssignments(source).map((a) => [a.name, a.line, a.value])).toEqual([
      ['name', 1, 'x#y'],
      ['n_layer', 2, 6],
      ['ok', 5, undefined],
    ]);
  });

  it('reads an augmented assignment as a value that is not a literal, and nothing inside a triple-quoted string', () => {
    const source = [
      'max_iters = 5000',
      'max_iters *= 2',
      'NOTES = """for the record:',
      'max_iters = 10',
      "exec(open('config/other.py').read())",
      '"""',
      "doc = '''one line'''",
      'n_layer = 4',
      `note = 1${' '.repeat(100_000)}x   `,
    ].join('\n');
    expect(topLevelAssignments(source).map((a) => [a.name, a.line, a.value, a.text])).toEqual([
      ['max_iters', 1, 5000, '5000'],
      ['max_iters', 2, undefined, 'max_iters *= 2'],
      ['NOTES', 3, undefined, '"""for the record:'],
      ['doc', 7, 'one line', "'''one line'''"],
      ['n_layer', 8, 4, '4'],
      ['note', 9, undefined, `1${' '.repeat(100_000)}x`],
    ]);
    expect(topLevelIncludes(source)).toEqual([]);
    // In a workload: max_iters is reported, not kept at the 5000 it held before it was doubled.
    const files = { ...nanogpt, 'config/double.py': 'max_iters = 5000\nmax_iters *= 2\n' };
    const a = analyzeWorkload({ files, command: ['python', 'train.py', 'config/double.py'] }, tiers, {
      runtimeSeconds: 600,
    });
    expect(a.hyperparameters.max_iters).toBeUndefined();
    expect(
      a.unknowns.some((u) => u.startsWith('max_iters at config/double.py:2 is not a literal (max_iters *= 2)')),
    ).toBe(true);
  });

  it.each([
    ['--n_layer=6', { key: 'n_layer', value: 6, constant: true, type: 'int', arg: '--n_layer=6' }],
    ['--device=cpu', { key: 'device', value: 'cpu', constant: false, type: 'str', arg: '--device=cpu' }],
    ['--compile=False', { key: 'compile', value: false, constant: true, type: 'bool', arg: '--compile=False' }],
    [
      '--max_iters=int(5e3)',
      { key: 'max_iters', value: 'int(5e3)', constant: false, type: 'str', arg: '--max_iters=int(5e3)' },
    ],
    ['--batch_size=0x40', { key: 'batch_size', value: 64, constant: true, type: 'int', arg: '--batch_size=0x40' }],
    ['--max_iters=5e3', { key: 'max_iters', value: 5000, constant: true, type: 'float', arg: '--max_iters=5e3' }],
    ['--n_layer', undefined],
    ['n_layer=6', undefined],
  ])('parses override %s', (arg, expected) => {
    expect(parseOverride(arg)).toEqual(expected);
  });
});
