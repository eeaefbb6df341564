"""The example trainer on a real CUDA GPU: what CI cannot run.

Four parts, each through the real harness where a harness is involved:
1. throughput of the demo job's own config (`config/g4dn_xlarge.py`) in float16 and bfloat16;
2. precision: the GPU's matrix-product peaks in float32, TF32, bfloat16 and float16, and the trainer's throughput in
   float32 with and without TF32 against bfloat16, for the demo config and a 126M-parameter model (what the
   analysis's float32 share of a tier's 16-bit peak stands for);
3. exact resume after a spot notice: an uninterrupted run against one stopped by a notice from a loopback IMDS and
   resumed as attempt 2, with the trainer run directly and under `torchrun --nproc_per_node=1`;
4. notice to complete checkpoint for a real model whose checkpoint is about 1.5 GB (weights and AdamW state).

CI has no GPU, so this is not part of `npm run bench`. On a machine with one, from the repository root:
    python3 bench/gpu.py --commit "$(git rev-parse HEAD)"
The interpreter that runs it must import torch with CUDA; the harness and the trainer run under the same one.
Writes gpu-<gpu>.json and gpu-<gpu>.md (gpu-h100.md, gpu-h200.md, ...) to --out (default bench/results) and prints
each result as it lands; --parts runs some of the parts only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / 'examples' / 'nanogpt-shakespeare'
# The harness tests' runner and loopback IMDS, under this interpreter.
os.environ['TRAINYARD_TEST_PYTHON'] = sys.executable
sys.path.insert(0, str(REPO / 'images' / 'harness' / 'tests'))
sys.path.insert(0, str(EXAMPLE))

import torch  # noqa: E402
from conftest import HarnessRun, base_env, closed_port_endpoint  # noqa: E402
from fake_imds import FakeImds  # noqa: E402
from test_e2e_torch import progress_lines  # noqa: E402
from model import CharGPT, ModelArgs  # noqa: E402

VOCAB = 65  # tinyshakespeare's characters
# Dense tensor-core peaks (no sparsity) for the MFU column, by the name nvidia-smi reports.
PEAK_FLOPS = {'H100 80GB HBM3': 989e12, 'H200': 989e12, 'A100-SXM4-80GB': 312e12, 'A10G': 125e12, 'Tesla T4': 65e12}
SPOT_WARNING_SECONDS = 120


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace('Z', '+00:00')).timestamp()


def machine(commit: str) -> dict:
    query = subprocess.run(
        ['nvidia-smi', '--query-gpu=name,driver_version,memory.total', '--format=csv,noheader'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    name, driver, memory = (part.strip() for part in query.splitlines()[0].split(','))
    return {
        'gpu': name.removeprefix('NVIDIA '),
        'driver': driver,
        'gpu_memory': memory,
        'torch': torch.__version__,
        'cuda': torch.version.cuda,
        'python': platform.python_version(),
        'cpus': os.cpu_count(),
        'commit': commit,
        'date': datetime.now().strftime('%Y-%m-%d'),
    }


def peak_flops(gpu: str) -> float | None:
    return next((value for key, value in PEAK_FLOPS.items() if key in gpu), None)


def train_command(launcher: str, *args: str) -> list[str]:
    if launcher == 'torchrun':
        return [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node=1', 'train.py', *args]
    return [sys.executable, 'train.py', *args]


# The 126M-parameter shape of the large-checkpoint part, at a batch that fits any GPU the catalog lists.
BIG_SHAPE = {'n_layer': 10, 'n_head': 16, 'n_embd': 1024, 'block_size': 256}
BIG_BATCH = 16


def throughput(
    dtype: str, gpu: str, iters: int, deterministic: bool = False, tf32: bool = False, big: bool = False
) -> dict:
    """Wall time per iteration between two log lines (each log line reads the loss, which waits for the GPU)."""
    out = tempfile.mkdtemp(prefix='trainyard-gpu-')
    warm = iters // 4
    shape = ([f'--{key}={value}' for key, value in BIG_SHAPE.items()] + [f'--batch_size={BIG_BATCH}']) if big else []
    command = train_command(
        'python', 'config/g4dn_xlarge.py', *shape, f'--dtype={dtype}', f'--max_iters={iters}',
        f'--log_interval={warm}', '--eval_interval=0', '--checkpoint_interval=0', f'--deterministic={deterministic}',
        f'--tf32={tf32}', f'--out_dir={out}',
    )  # fmt: skip
    process = subprocess.Popen(command, cwd=EXAMPLE, stdout=subprocess.PIPE, text=True, env=_unbuffered())
    seen: dict[int, float] = {}
    assert process.stdout is not None
    for line in process.stdout:
        match = re.match(r'^iter (\d+): loss ([\d.]+)', line)
        if match:
            seen[int(match.group(1))] = time.monotonic()
            last_loss = float(match.group(2))
    if process.wait() != 0:
        raise RuntimeError(f'{command} exited {process.returncode}')
    shutil.rmtree(out, ignore_errors=True)
    config = {**_config(EXAMPLE / 'config' / 'g4dn_xlarge.py'), **(BIG_SHAPE if big else {})}
    if big:
        config['batch_size'] = BIG_BATCH
    model = CharGPT(ModelArgs(VOCAB, config['block_size'], config['n_layer'], config['n_head'], config['n_embd']))
    tokens = config['batch_size'] * config['gradient_accumulation_steps'] * config['block_size']
    seconds = (seen[iters] - seen[warm]) / (iters - warm)
    peak = peak_flops(gpu)
    return {
        'dtype': dtype,
        'deterministic': deterministic,
        'tf32': tf32,
        'params_m': round(model.num_params() / 1e6, 2),
        'tokens_per_iter': tokens,
        'ms_per_iter': round(seconds * 1000, 2),
        'tokens_per_s': round(tokens / seconds),
        'mfu': round(model.flops_per_iteration(tokens) / seconds / peak, 4) if peak else None,
        'hours_for_config_iters': round(config['max_iters'] * seconds / 3600, 3),
        'last_loss': last_loss,
    }


def matmul_peaks(size: int = 8192, repeats: int = 10) -> list[dict]:
    """Dense n×n×n matrix products on random data: TFLOP/s per precision, the mean of `repeats` after three warm-ups."""
    results = []
    for label, dtype, tf32 in (
        ('float32', torch.float32, False),
        ('tf32', torch.float32, True),
        ('bfloat16', torch.bfloat16, False),
        ('float16', torch.float16, False),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(size, size, device='cuda', dtype=dtype)
        b = torch.randn(size, size, device='cuda', dtype=dtype)
        for _ in range(3):
            torch.matmul(a, b)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1000 / repeats
        results.append({'precision': label, 'size': size, 'tflops': round(2 * size**3 / seconds / 1e12, 1)})
        del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.cuda.empty_cache()
    return results


def precision(gpu: str) -> dict:
    """The trainer in float32 (IEEE, then TF32) against bfloat16, on the demo config and the 126M shape."""
    runs = []
    for big, iters in ((False, 400), (True, 200)):
        for dtype, tf32 in (('bfloat16', False), ('float32', False), ('float32', True)):
            runs.append({'model': '126M' if big else 'demo', **throughput(dtype, gpu, iters, tf32=tf32, big=big)})
    for run in runs:
        reference = next(r for r in runs if r['model'] == run['model'] and r['dtype'] == 'bfloat16')
        run['share_of_bfloat16'] = round(reference['ms_per_iter'] / run['ms_per_iter'], 3)
    return {'matmul': matmul_peaks(), 'trainer': runs}


def stop_if_running(run: HarnessRun | None) -> None:
    """A part that failed mid-run leaves no trainer going: SIGTERM to the harness, which stops the trainer as it would
    at a spot notice, then SIGKILL if it has not ended once its stop grace (110 s here) has passed."""
    if run is None or run.process.poll() is not None:
        return
    run.process.terminate()
    try:
        run.process.wait(timeout=150)
    except subprocess.TimeoutExpired:
        run.process.kill()
        run.process.wait()


def save_uploaded(run: HarnessRun) -> bool:
    """Whether the checkpoint the final sync settled on is in storage: uploaded by the final sync itself, or before
    it by the watcher that uploads a save once it has stayed unchanged for TRAINYARD_SETTLE_SECONDS."""
    sync = (run.events('final_sync') or [{}])[0]
    name = sync.get('checkpoint')
    earlier = any(event.get('checkpoint') == name for event in run.events('checkpoint_uploaded'))
    return bool(sync.get('ok')) and name is not None and (bool(sync.get('uploaded')) or earlier)


def upload_seconds(run: HarnessRun) -> float | None:
    """How long the upload of the final checkpoint took, whichever path uploaded it."""
    name = (run.events('final_sync') or [{}])[0].get('checkpoint')
    durations = [e['duration_s'] for e in run.events('checkpoint_uploaded') if e.get('checkpoint') == name]
    return durations[-1] if durations else None


def resume_check(launcher: str, iters: int, notice_after: int, deterministic: bool) -> dict:
    """Uninterrupted run against a run stopped by a spot notice and resumed: same losses, same final weights?"""
    work = Path(tempfile.mkdtemp(prefix=f'trainyard-gpu-{launcher}-'))
    args = [
        'config/g4dn_xlarge.py', f'--max_iters={iters}', f'--lr_decay_iters={iters}', f'--warmup_iters={iters // 10}',
        '--log_interval=1', f'--eval_interval={iters // 3}', '--eval_iters=10', f'--checkpoint_interval={iters // 3}',
        f'--deterministic={deterministic}',
    ]  # fmt: skip
    first = second = None
    try:
        reference = subprocess.run(
            train_command('python', *args, f'--out_dir={work / "reference"}'),
            cwd=EXAMPLE, capture_output=True, text=True, env=_unbuffered(), check=False,
        )  # fmt: skip
        if reference.returncode != 0:
            raise RuntimeError(f'reference run exited {reference.returncode}:\n{reference.stderr[-3000:]}')
        expected = progress_lines(reference.stdout.splitlines())

        imds = FakeImds()
        try:
            env = base_env(work, imds.endpoint, TRAINYARD_SETTLE_SECONDS='1', TRAINYARD_STOP_GRACE_SECONDS='110')
            first = HarnessRun(train_command(launcher, *args), env, cwd=EXAMPLE)
            first.wait_for_stdout(rf'^iter {notice_after}:')
            imds.serve_notice()
            first_code = first.finish()
        finally:
            imds.close()
        stop = re.search(r'saved checkpoint at iter (\d+) \((SIG\w+)\)', '\n'.join(first.stdout))
        stopped_at = int(stop.group(1)) if stop else None
        env2 = base_env(
            work, closed_port_endpoint(), TRAINYARD_ATTEMPT='2', TRAINYARD_CHECKPOINT_DIR=str(work / 'ckpt2')
        )
        second = HarnessRun(train_command(launcher, *args), env2, cwd=EXAMPLE)
        second_code = second.finish()

        before = {
            k: v for k, v in progress_lines(first.stdout).items() if stopped_at is not None and k[1] <= stopped_at
        }
        after = progress_lines(second.stdout)
        resumed = re.search(r'^resuming from iter (\d+)', '\n'.join(second.stdout), re.MULTILINE)
        final_ref = torch.load(work / 'reference' / 'ckpt.pt', map_location='cpu', weights_only=True)
        final_resumed = (
            torch.load(work / 'ckpt2' / 'ckpt.pt', map_location='cpu', weights_only=True)
            if (work / 'ckpt2' / 'ckpt.pt').exists()
            else None
        )
        differing = (
            [name for name, t in final_ref['model'].items() if not torch.equal(t, final_resumed['model'][name])]
            if final_resumed
            else list(final_ref['model'])
        )
        max_difference = max(
            (float((final_ref['model'][n].float() - final_resumed['model'][n].float()).abs().max()) for n in differing),
            default=0.0,
        ) if final_resumed else None  # fmt: skip
        exits = first.events('user_command_exited')
        notice, finished = first.events('spot_notice'), first.events('harness_exit')
        phases = (first.events('stop_phases') or [{}])[0]
        return {
            'launcher': launcher,
            'deterministic': deterministic,
            'iters': iters,
            'attempt1_exit': first_code,
            'attempt1_command_status': exits[0]['returncode'] if exits else None,
            'stop_signal': stop.group(2) if stop else None,
            'stopped_at_iter': stopped_at,
            'save_uploaded': save_uploaded(first),
            'notice_to_complete_s': round(parse_time(finished[0]['time']) - parse_time(notice[0]['time']), 3)
            if notice and finished
            else None,
            'child_save_s': phases.get('signal_to_exit_s'),
            'attempt2_exit': second_code,
            'resumed_from_iter': int(resumed.group(1)) if resumed else None,
            'losses_before_stop_match': before == {k: v for k, v in expected.items() if k[1] <= (stopped_at or -1)},
            'losses_after_resume_match': bool(after) and after == {
                k: v for k, v in expected.items() if stopped_at is not None and k[1] > stopped_at
            },
            'weights_bitwise_equal': final_resumed is not None and not differing,
            'tensors_differing': len(differing),
            'max_abs_weight_difference': max_difference,
        }
    finally:
        stop_if_running(first)
        stop_if_running(second)
        shutil.rmtree(work, ignore_errors=True)


def big_checkpoint(runs: int, poll_seconds: float) -> dict:
    """A ~126M-parameter model (checkpoint ≈ 1.5 GB): spot notice served until the harness exits 75."""
    shape = BIG_SHAPE
    model = CharGPT(ModelArgs(VOCAB, shape['block_size'], shape['n_layer'], shape['n_head'], shape['n_embd']))
    params = sum(p.numel() for p in model.parameters())
    del model
    results = []
    for _ in range(runs):
        work = Path(tempfile.mkdtemp(prefix='trainyard-gpu-big-'))
        imds = FakeImds()
        run = None
        try:
            env = base_env(
                work, imds.endpoint, TRAINYARD_IMDS_POLL_SECONDS=str(poll_seconds),
                TRAINYARD_SETTLE_SECONDS='1', TRAINYARD_STOP_GRACE_SECONDS='110',
            )  # fmt: skip
            args = [f'--{key}={value}' for key, value in shape.items()]
            run = HarnessRun(
                train_command(
                    'python', 'config/g4dn_xlarge.py', *args, '--dtype=bfloat16', f'--batch_size={BIG_BATCH}',
                    '--max_iters=100000', '--log_interval=10', '--eval_interval=0', '--checkpoint_interval=0',
                ),
                env,
                cwd=EXAMPLE,
            )  # fmt: skip
            run.wait_for_stdout(r'^iter 20:')
            served = time.time()
            imds.serve_notice()
            code = run.finish()
            finished = parse_time(run.events('harness_exit')[0]['time'])
            phases = run.events('stop_phases')[0]
            stored = sum(f.stat().st_size for f in (work / 'store' / 'checkpoints').rglob('*') if f.is_file())
            if code != 75 or not save_uploaded(run):
                raise RuntimeError(f'harness exited {code}, save uploaded: {save_uploaded(run)}:\n{run.output()}')
            results.append({
                'notice_to_complete_s': round(finished - served, 3),
                'detect_s': round(parse_time(run.events('spot_notice')[0]['time']) - served, 3),
                'signal_s': phases['request_to_signal_s'],
                'child_save_s': phases['signal_to_exit_s'],
                'upload_s': upload_seconds(run),
                'stored_bytes': stored,
            })  # fmt: skip
        finally:
            stop_if_running(run)
            imds.close()
            shutil.rmtree(work, ignore_errors=True)
    keys = ('notice_to_complete_s', 'detect_s', 'signal_s', 'child_save_s', 'upload_s')
    return {
        'params_m': round(params / 1e6, 1),
        'checkpoint_bytes': results[0]['stored_bytes'],
        'runs': runs,
        'imds_poll_seconds': poll_seconds,
        **{f'median_{key}': round(statistics.median(r[key] for r in results), 3) for key in keys},
        'max_notice_to_complete_s': max(r['notice_to_complete_s'] for r in results),
        'within_spot_warning': max(r['notice_to_complete_s'] for r in results) < SPOT_WARNING_SECONDS,
    }


def _config(path: Path) -> dict:
    scope: dict = {}
    exec(compile(path.read_text(), str(path), 'exec'), scope)
    return {k: v for k, v in scope.items() if not k.startswith('_')}


def _unbuffered() -> dict:
    return {**os.environ, 'PYTHONUNBUFFERED': '1'}


KERNELS = {False: 'default', True: 'deterministic'}


def _mfu(throughput_row: dict) -> str:
    mfu = throughput_row['mfu']
    return f'{mfu * 100:.1f} %' if mfu is not None else 'n/a'


def _yes(value: bool) -> str:
    return 'yes' if value else 'no'


def markdown(report: dict) -> str:
    m = report['machine']
    lines = [
        '# GPU figures: the example trainer on a real CUDA GPU',
        '',
        f'{m["gpu"]} ({m["gpu_memory"]}, driver {m["driver"]}), torch {m["torch"]} (CUDA {m["cuda"]}), Python '
        f'{m["python"]}, {m["cpus"]} CPUs; commit {m["commit"]}, {m["date"]}. Produced by `python3 bench/gpu.py`.',
        '',
        '## Throughput of `config/g4dn_xlarge.py`',
        '',
        '| dtype | kernels | parameters | ms / iteration | tokens / s | MFU | hours for the config\'s iterations |',
        '|---|---|---|---|---|---|---|',
    ]
    for t in report['throughput']:
        lines.append(
            f'| {t["dtype"]} | {KERNELS[t["deterministic"]]} | {t["params_m"]} M | {t["ms_per_iter"]} | '
            f'{t["tokens_per_s"]:,} | {_mfu(t)} | {t["hours_for_config_iters"]} |'
        )
    p = report.get('precision')
    if p:
        lines += [
            '',
            '## Precision: float32, TF32 and 16-bit',
            '',
            f'Matrix products ({p["matmul"][0]["size"]}³, random data, mean of ten after three warm-ups):',
            '',
            '| precision | TFLOP/s | share of bfloat16 |',
            '|---|---|---|',
        ]
        bf16 = next(m['tflops'] for m in p['matmul'] if m['precision'] == 'bfloat16')
        lines += [f'| {m["precision"]} | {m["tflops"]} | {m["tflops"] / bf16:.3f} |' for m in p['matmul']]
        lines += [
            '',
            'The trainer (`config/g4dn_xlarge.py`; the 126M model is the large-checkpoint part\'s, batch '
            f'{BIG_BATCH} × 256 tokens), float32 with `--tf32=False` and `--tf32=True` against `--dtype=bfloat16`:',
            '',
            '| model | parameters | dtype | TF32 | ms / iteration | tokens / s | MFU (16-bit peak) | share of bfloat16 |',
            '|---|---|---|---|---|---|---|---|',
        ]
        lines += [
            f'| {t["model"]} | {t["params_m"]} M | {t["dtype"]} | {_yes(t["tf32"])} | {t["ms_per_iter"]} | '
            f'{t["tokens_per_s"]:,} | {_mfu(t)} | {t["share_of_bfloat16"]} |'
            for t in p['trainer']
        ]
    lines += [
        '',
        '## Exact resume after a spot notice',
        '',
        'Losses are compared as printed (4 decimals) at every iteration and evaluation; "before the stop" compares '
        'attempt 1 with the uninterrupted run, so a mismatch there is run-to-run variation, not the resume.',
        '',
        '| launcher | kernels | attempt 1 exit (command status) | stopped at | save uploaded | notice → complete '
        '| attempt 2 exit '
        '| resumed from | losses match before the stop / after | weights bitwise equal |',
        '|---|---|---|---|---|---|---|---|---|---|',
    ]
    for r in report['resume']:
        losses = f'{_yes(r["losses_before_stop_match"])} / {_yes(r["losses_after_resume_match"])}'
        lines.append(
            f'| {r["launcher"]} | {KERNELS[r["deterministic"]]} | {r["attempt1_exit"]} '
            f'({r["attempt1_command_status"]}) | iter {r["stopped_at_iter"]} '
            f'({r["stop_signal"]}) | {"yes" if r["save_uploaded"] else "no"} | {r["notice_to_complete_s"]} s | '
            f'{r["attempt2_exit"]} | iter {r["resumed_from_iter"]} | {losses} | '
            f'{"yes" if r["weights_bitwise_equal"] else "no (largest difference " + str(r["max_abs_weight_difference"]) + ")"} |'
        )
    b = report['big_checkpoint']
    if b:
        lines += [
            '',
            '## Notice to complete checkpoint, real model',
            '',
            f'{b["params_m"]} M parameters, bfloat16 autocast; checkpoint {b["checkpoint_bytes"] / 1e9:.2f} GB '
            f'(weights and AdamW state in float32) to `file://` storage on local disk; IMDS polled every '
            f'{b["imds_poll_seconds"]} s as on EC2; median of {b["runs"]} runs.',
            '',
            'Detect: notice served until the harness saw it. Signal: until SIGTERM was sent. Save: SIGTERM until the '
            'trainer, having finished its iteration and written the file, exited. Upload: the copy of the save to '
            'storage, which starts once the file has been unchanged for 1 s (TRAINYARD_SETTLE_SECONDS) and may overlap '
            'the exit.',
            '',
            '| notice → complete | detect | signal | save | upload | worst run | within the 120 s warning |',
            '|---|---|---|---|---|---|---|',
            f'| {b["median_notice_to_complete_s"]} s | {b["median_detect_s"]} s | {b["median_signal_s"]} s | '
            f'{b["median_child_save_s"]} s | {b["median_upload_s"]} s | {b["max_notice_to_complete_s"]} s | '
            f'{"yes" if b["within_spot_warning"] else "no"} |',
        ]
    if report['errors']:
        lines += ['', '## Errors', ''] + [f'- {part}: {error[:600]}' for part, error in report['errors'].items()]
    return '\n'.join(lines) + '\n'


PARTS = ('throughput', 'precision', 'resume', 'big_checkpoint')


def output_name(gpu: str) -> str:
    """`gpu-h200` for 'H200', `gpu-h100` for 'H100 80GB HBM3': one results file per GPU model."""
    model = re.sub(r'[^a-z0-9]+', '-', gpu.lower().split()[0]).strip('-')
    return f'gpu-{model or "unknown"}'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--commit', default='unknown', help='git commit measured (the copy run may have no .git)')
    parser.add_argument('--out', default=str(REPO / 'bench' / 'results'))
    parser.add_argument('--runs', type=int, default=3, help='runs of the large-checkpoint measurement')
    parser.add_argument('--poll-seconds', type=float, default=5.0)
    parser.add_argument(
        '--parts', default=','.join(PARTS), help=f'comma-separated parts to run, of {", ".join(PARTS)} (default: all)'
    )
    args = parser.parse_args()
    chosen = [part.strip() for part in args.parts.split(',') if part.strip()]
    unknown = [part for part in chosen if part not in PARTS]
    if unknown or not chosen:
        print(f'--parts must name some of {", ".join(PARTS)}; got {args.parts!r}', file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print('bench/gpu.py needs a CUDA GPU that torch can use; none was found', file=sys.stderr)
        return 2
    report: dict = {
        'machine': machine(args.commit),
        'throughput': [],
        'precision': None,
        'resume': [],
        'big_checkpoint': None,
    }
    report['errors'] = {}
    print(json.dumps(report['machine']), flush=True)
    gpu = report['machine']['gpu']
    parts = [
        *((f'throughput {d} {KERNELS[k]}', 'throughput', lambda d=d, k=k: throughput(d, gpu, 400, k))
          for d, k in (('float16', False), ('bfloat16', False), ('bfloat16', True))),
        ('precision', 'precision', lambda: precision(gpu)),
        *((f'resume {launcher} {KERNELS[k]}', 'resume',
           lambda launcher=launcher, k=k: resume_check(launcher, 300, 100, k))
          for launcher, k in (('python', False), ('python', True), ('torchrun', True))),
        ('big checkpoint', 'big_checkpoint', lambda: big_checkpoint(args.runs, args.poll_seconds)),
    ]  # fmt: skip
    for label, key, measure in parts:
        if key not in chosen:
            continue
        started = time.monotonic()
        try:
            result = measure()
        except Exception as error:  # one part failing must not lose the others' figures
            report['errors'][label] = f'{type(error).__name__}: {error}'
            print(f'{label}: FAILED {report["errors"][label]}', flush=True)
            continue
        if isinstance(report[key], list):
            report[key].append(result)
        else:
            report[key] = result
        print(f'{label} ({time.monotonic() - started:.0f} s): {json.dumps(result)}', flush=True)
    os.makedirs(args.out, exist_ok=True)
    name = output_name(gpu)
    Path(args.out, f'{name}.json').write_text(json.dumps(report, indent=2) + '\n')
    Path(args.out, f'{name}.md').write_text(markdown(report))
    print(markdown(report))
    return 1 if report['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
