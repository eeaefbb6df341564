"""Character-level GPT on tinyshakespeare, with atomic checkpoints and exact resume.

Usage:
    python train.py config/cpu_smoke.py [--key=value ...]
    python train.py config/cpu_smoke.py --init_from=resume      # continue from out_dir/ckpt.pt

Configuration works like nanoGPT's: the globals below are the defaults, a config file (a Python file) is executed
over them, then `--key=value` arguments override single values (parsed as Python literals, type checked).

Checkpoints (`out_dir/ckpt.pt`) are written to a temporary file, fsynced and renamed, every `checkpoint_interval`
iterations, at the end, and when SIGTERM/SIGINT arrives (the run stops after the current iteration). A resumed run
restores model, optimizer, iteration, and every random generator, so it continues exactly as if never stopped.
"""

from __future__ import annotations

import ast
import gzip
import hashlib
import math
import os
import random
import signal
import sys
import time
from contextlib import nullcontext

import numpy as np
import torch

from model import CharGPT, ModelArgs

HERE = os.path.dirname(os.path.abspath(__file__))
DATA_MD5 = '6fb458f1232090904fb40fe944165e91'

# ---- defaults (overridden by the config file, then by --key=value) ----
out_dir = os.environ.get('TRAINYARD_CHECKPOINT_DIR', os.path.join(HERE, 'out'))
init_from = 'scratch'  # 'scratch' or 'resume'
data_path = os.path.join(HERE, 'data', 'input.txt.gz')
val_fraction = 0.1
seed = 1337
# model
n_layer = 4
n_head = 4
n_embd = 128
block_size = 64
dropout = 0.0
# training
batch_size = 16
gradient_accumulation_steps = 1
max_iters = 1000
learning_rate = 1e-3
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.99
grad_clip = 1.0
decay_lr = True
warmup_iters = 100
lr_decay_iters = 1000
min_lr = 1e-4
# evaluation, logging, checkpoints
eval_interval = 250
eval_iters = 20
log_interval = 10
checkpoint_interval = 250
# system
device = 'cuda' if torch.cuda.is_available() else 'cpu'
dtype = 'float32'  # 'float32', 'bfloat16' or 'float16' (float16 only on CUDA, with a gradient scaler)
threads = 1  # CPU intra-op threads; one is fastest for small models
# Deterministic kernels only (slower on CUDA): runs repeat bit for bit, so a resumed run ends with the same weights as
# an uninterrupted one. CPU runs do anyway; CUDA's default kernels differ from run to run.
deterministic = False
# TensorFloat-32 for float32 matrix products and convolutions on Ampere and newer GPUs (nanoGPT turns it on): about
# 8x the float32 matrix throughput of an A100 or H100, with a 10-bit mantissa in the products. Off by default, so a
# float32 run computes in float32; bfloat16 and float16 runs are unaffected.
tf32 = False
peak_flops = 65e12  # denominator of the MFU figure (T4 fp16 tensor-core peak)
# ----------------------------------------------------------------------

CONFIG_KEYS = [k for k, v in list(globals().items()) if not k.startswith('_') and isinstance(v, (int, float, bool, str))]
CONFIG_KEYS = [k for k in CONFIG_KEYS if k not in ('HERE', 'DATA_MD5', 'CONFIG_KEYS')]


class ConfigError(Exception):
    """A config file or --key=value argument is invalid."""


def apply_configuration(argv: list[str]) -> None:
    """Executes a config file (first positional argument) then applies --key=value overrides."""
    scope = globals()
    for arg in argv:
        if not arg.startswith('--'):
            path = arg if os.path.isabs(arg) or os.path.exists(arg) else os.path.join(HERE, arg)
            if not os.path.exists(path):
                raise ConfigError(f'config file {arg!r} not found')
            with open(path, encoding='utf-8') as handle:
                exec(compile(handle.read(), path, 'exec'), scope)
            continue
        key, sep, raw = arg[2:].partition('=')
        if not sep:
            raise ConfigError(f'argument {arg!r} must look like --key=value')
        if key not in CONFIG_KEYS:
            raise ConfigError(f'unknown setting {key!r}; known settings: {", ".join(sorted(CONFIG_KEYS))}')
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw  # bare strings such as --init_from=resume
        current = scope[key]
        if isinstance(current, bool) != isinstance(value, bool) or (
            isinstance(current, (int, float)) and not isinstance(value, (int, float))
        ):
            raise ConfigError(f'--{key} expects a {type(current).__name__}, got {raw!r}')
        if isinstance(current, float) and isinstance(value, int):
            value = float(value)
        if isinstance(current, int) and not isinstance(current, bool) and isinstance(value, float):
            raise ConfigError(f'--{key} expects an int, got {raw!r}')
        scope[key] = value


def load_text(path: str) -> str:
    """The corpus, checked against the published md5 so a truncated or altered copy is refused."""
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rb') as handle:
        raw = handle.read()
    digest = hashlib.md5(raw).hexdigest()
    if os.path.basename(path).startswith('input.txt') and digest != DATA_MD5:
        raise ValueError(f'{path}: md5 {digest} does not match tinyshakespeare ({DATA_MD5})')
    return raw.decode('utf-8')


def atomic_save(state: dict, path: str) -> None:
    """Writes `path` via a temporary file, fsync and rename, so a reader (or a crash) never sees half a file."""
    tmp = path + '.tmp'
    with open(tmp, 'wb') as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(os.path.dirname(path) or '.', os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# The checkpoint holds tensors and plain Python values only, so torch 2 loads it weights_only (no pickled code runs;
# the default from torch 2.6). torch 1.13's weights-only loader rejects floats, so there it loads as it always did.
WEIGHTS_ONLY_LOAD = int(torch.__version__.split('.')[0]) >= 2


def numpy_rng_state() -> tuple:
    """numpy's global RNG state with its key array as a list, so the checkpoint loads with weights_only."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    return (kind, keys.tolist(), position, has_gauss, cached_gaussian)


def gradient_scaler(enabled: bool):
    """The float16 loss scaler: torch.amp's from torch 2.3 (torch.cuda.amp's is deprecated there), else torch 1.13's."""
    if hasattr(torch.amp, 'GradScaler'):
        return torch.amp.GradScaler('cuda', enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


stop_signal_name: str | None = None


def _request_stop(signum: int, _frame: object) -> None:
    global stop_signal_name
    stop_signal_name = signal.Signals(signum).name


def main(argv: list[str]) -> int:
    try:
        apply_configuration(argv)
    except ConfigError as error:
        print(f'configuration error: {error}', file=sys.stderr)
        return 2
    if init_from not in ('scratch', 'resume'):
        print(f"configuration error: init_from must be 'scratch' or 'resume', got {init_from!r}", file=sys.stderr)
        return 2
    if dtype not in ('float32', 'bfloat16', 'float16'):
        print(f'configuration error: dtype must be float32, bfloat16 or float16, got {dtype!r}', file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _request_stop)
    signal.signal(signal.SIGINT, _request_stop)

    device_type = 'cuda' if device.startswith('cuda') else 'cpu'
    if deterministic:
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')  # cuBLAS's reproducible mode; read at its first use
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
    if device_type == 'cpu':
        torch.set_num_threads(threads)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    if dtype == 'float16' and device_type != 'cuda':
        print('configuration error: dtype float16 needs a CUDA device', file=sys.stderr)
        return 2
    ptdtype = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
    autocast = nullcontext() if dtype == 'float32' else torch.autocast(device_type=device_type, dtype=ptdtype)
    os.makedirs(out_dir, exist_ok=True)
    ckpt_path = os.path.join(out_dir, 'ckpt.pt')

    text = load_text(data_path)
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    encoded = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    split = int(len(encoded) * (1 - val_fraction))
    splits = {'train': encoded[:split], 'val': encoded[split:]}

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    sampler = torch.Generator().manual_seed(seed)  # data sampling has its own generator so resume can restore it

    def get_batch(name: str) -> tuple[torch.Tensor, torch.Tensor]:
        data = splits[name]
        starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=sampler)
        x = torch.stack([data[i : i + block_size] for i in starts])
        y = torch.stack([data[i + 1 : i + 1 + block_size] for i in starts])
        return x.to(device), y.to(device)

    iter_num = 0
    best_val_loss = float('inf')
    checkpoint = None
    if init_from == 'resume':
        if not os.path.exists(ckpt_path):
            print(f'cannot resume: {ckpt_path} does not exist', file=sys.stderr)
            return 2
        checkpoint = torch.load(ckpt_path, map_location='cpu', weights_only=WEIGHTS_ONLY_LOAD)
        args = ModelArgs(**checkpoint['model_args'])
    else:
        args = ModelArgs(len(chars), block_size, n_layer, n_head, n_embd, dropout)
    model = CharGPT(args).to(device)
    optimizer = model.optimizer(weight_decay, learning_rate, (beta1, beta2))
    scaler = gradient_scaler(dtype == 'float16')
    if checkpoint is not None:
        model.load_state_dict(checkpoint['model'])
        optimizer.load_state_dict(checkpoint['optimizer'])
        scaler.load_state_dict(checkpoint['scaler'])
        iter_num = checkpoint['iter_num']
        best_val_loss = checkpoint['best_val_loss']
        rng = checkpoint['rng']
        torch.set_rng_state(rng['torch'])
        if rng.get('cuda') is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng['cuda'])
        random.setstate(rng['python'])
        kind, keys, position, has_gauss, cached_gaussian = rng['numpy']
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), position, has_gauss, cached_gaussian))
        sampler.set_state(rng['sampler'])
        print(f'resuming from iter {iter_num} ({ckpt_path})')
        checkpoint = None
    print(f'model: {model.num_params() / 1e6:.2f}M parameters, vocab {args.vocab_size}, device {device}, dtype {dtype}')

    def save(reason: str) -> None:
        state = {
            'model': model.state_dict(),
            'optimizer': optimizer.state_dict(),
            'scaler': scaler.state_dict(),
            'model_args': vars(args),
            'iter_num': iter_num,
            'best_val_loss': best_val_loss,
            'config': {k: globals()[k] for k in CONFIG_KEYS},
            'rng': {
                'torch': torch.get_rng_state(),
                'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
                'python': random.getstate(),
                'numpy': numpy_rng_state(),
                'sampler': sampler.get_state(),
            },
        }
        atomic_save(state, ckpt_path)
        print(f'saved checkpoint at iter {iter_num} ({reason}) to {ckpt_path}')

    @torch.no_grad()
    def estimate_loss() -> dict[str, float]:
        model.eval()
        result = {}
        for name in ('train', 'val'):
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                x, y = get_batch(name)
                with autocast:
                    _, loss = model(x, y)
                losses[k] = loss.item()
            result[name] = losses.mean().item()
        model.train()
        return result

    def lr_at(it: int) -> float:
        if not decay_lr:
            return learning_rate
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        ratio = (it - warmup_iters) / max(1, lr_decay_iters - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)

    def evaluate() -> None:
        nonlocal best_val_loss
        losses = estimate_loss()
        best_val_loss = min(best_val_loss, losses['val'])
        print(f'step {iter_num}: train loss {losses["train"]:.4f}, val loss {losses["val"]:.4f}')

    tokens_per_iter = batch_size * gradient_accumulation_steps * block_size
    flops_per_iter = model.flops_per_iteration(tokens_per_iter)
    if iter_num == 0 and eval_interval > 0:
        evaluate()
    last = time.time()
    while iter_num < max_iters:
        lr = lr_at(iter_num)
        for group in optimizer.param_groups:
            group['lr'] = lr
        for _ in range(gradient_accumulation_steps):
            x, y = get_batch('train')
            with autocast:
                _, loss = model(x, y)
                loss = loss / gradient_accumulation_steps
            scaler.scale(loss).backward()
        if grad_clip > 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1

        now = time.time()
        elapsed, last = now - last, now
        if iter_num % log_interval == 0 or iter_num == max_iters:
            loss_value = loss.item() * gradient_accumulation_steps
            mfu = flops_per_iter / elapsed / peak_flops if elapsed > 0 else 0.0
            print(f'iter {iter_num}: loss {loss_value:.4f}, time {elapsed * 1000:.2f}ms, mfu {mfu * 100:.2f}%')
        if eval_interval > 0 and (iter_num % eval_interval == 0 or iter_num == max_iters):
            evaluate()
        if iter_num == max_iters:
            save('final')
        elif checkpoint_interval > 0 and iter_num % checkpoint_interval == 0:
            save('periodic')
        if stop_signal_name is not None and iter_num < max_iters:
            save(stop_signal_name)
            print(f'stopping early on {stop_signal_name} at iter {iter_num}; resume with --init_from=resume')
            return 0
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
