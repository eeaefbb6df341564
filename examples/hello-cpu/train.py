"""A torch-free example job: fits y = 3x - 2 (plus fixed noise) by SGD, with nanoGPT-style checkpoints and logs.

It exists so Trainyard's local mode can run a real job (checkpoint, interrupt, resume) on machines without torch:

    python train.py --max_iters=500                 # fresh run
    python train.py --max_iters=500 --init_from=resume

Checkpoints go to `--out_dir` (default $TRAINYARD_CHECKPOINT_DIR, else ./out) as ckpt.json, written atomically
every `--checkpoint_interval` iterations, at the end, and on SIGTERM/SIGINT (then the run exits 0 early). The state
includes the sampler's random state, so a resumed run continues exactly like an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

DEFAULTS = {
    'out_dir': os.environ.get('TRAINYARD_CHECKPOINT_DIR', 'out'),
    'init_from': 'scratch',
    'max_iters': 300,
    'batch_size': 16,
    'learning_rate': 0.05,
    'log_interval': 10,
    'eval_interval': 100,
    'checkpoint_interval': 50,
    'seed': 1337,
    'step_delay': 0.0,  # seconds of simulated compute per iteration, so interruptions can land mid-run
}

stop_signal: str | None = None


def _on_signal(signum: int, _frame: object) -> None:
    global stop_signal
    stop_signal = signal.Signals(signum).name


def parse_args(argv: list[str]) -> dict:
    """`--key=value` overrides of DEFAULTS, converted to the default's type."""
    config = dict(DEFAULTS)
    for arg in argv:
        key, sep, raw = arg.removeprefix('--').partition('=')
        if not arg.startswith('--') or not sep or key not in config:
            raise SystemExit(f'bad argument {arg!r}: expected --key=value with key in {", ".join(sorted(config))}')
        kind = type(DEFAULTS[key])
        try:
            config[key] = kind(raw)
        except ValueError:
            raise SystemExit(f'--{key} expects a {kind.__name__}, got {raw!r}') from None
    if config['init_from'] not in ('scratch', 'resume'):
        raise SystemExit(f"--init_from must be 'scratch' or 'resume', got {config['init_from']!r}")
    return config


def make_dataset(seed: int, size: int = 512) -> list[tuple[float, float]]:
    """Deterministic points near y = 3x - 2."""
    rng = random.Random(seed)
    points = []
    for _ in range(size):
        x = rng.uniform(-1.0, 1.0)
        points.append((x, 3.0 * x - 2.0 + rng.gauss(0.0, 0.1)))
    return points


def mse(w: float, b: float, points: list[tuple[float, float]]) -> float:
    return sum((w * x + b - y) ** 2 for x, y in points) / len(points)


def atomic_write_json(path: str, document: dict) -> None:
    """tmp file, fsync, rename: a reader never sees a partial checkpoint."""
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as handle:
        json.dump(document, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    config = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    os.makedirs(config['out_dir'], exist_ok=True)
    ckpt_path = os.path.join(config['out_dir'], 'ckpt.json')
    data = make_dataset(config['seed'])
    train, val = data[:448], data[448:]
    sampler = random.Random(config['seed'] + 1)
    w = b = 0.0
    iter_num = 0
    if config['init_from'] == 'resume':
        with open(ckpt_path, encoding='utf-8') as handle:
            state = json.load(handle)
        w, b, iter_num = state['w'], state['b'], state['iter_num']
        version, internal, gauss = state['sampler']
        sampler.setstate((version, tuple(internal), gauss))
        print(f'resuming from iter {iter_num} ({ckpt_path})')

    def save(reason: str) -> None:
        atomic_write_json(ckpt_path, {'w': w, 'b': b, 'iter_num': iter_num, 'sampler': sampler.getstate()})
        print(f'saved checkpoint at iter {iter_num} ({reason}) to {ckpt_path}')

    while iter_num < config['max_iters']:
        started = time.time()
        batch = [train[sampler.randrange(len(train))] for _ in range(config['batch_size'])]
        grad_w = sum(2 * (w * x + b - y) * x for x, y in batch) / len(batch)
        grad_b = sum(2 * (w * x + b - y) for x, y in batch) / len(batch)
        w -= config['learning_rate'] * grad_w
        b -= config['learning_rate'] * grad_b
        if config['step_delay'] > 0:
            time.sleep(config['step_delay'])
        iter_num += 1
        if iter_num % config['log_interval'] == 0 or iter_num == config['max_iters']:
            elapsed_ms = (time.time() - started) * 1000
            print(f'iter {iter_num}: loss {mse(w, b, batch):.6f}, time {elapsed_ms:.2f}ms, mfu 0.00%')
        if iter_num % config['eval_interval'] == 0 or iter_num == config['max_iters']:
            print(f'step {iter_num}: train loss {mse(w, b, train):.6f}, val loss {mse(w, b, val):.6f}')
        if iter_num == config['max_iters']:
            save('final')
        elif iter_num % config['checkpoint_interval'] == 0:
            save('periodic')
        if stop_signal is not None and iter_num < config['max_iters']:
            save(stop_signal)
            print(f'stopping early on {stop_signal} at iter {iter_num}')
            return 0
    print(f'done: w={w:.4f} b={b:.4f}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
