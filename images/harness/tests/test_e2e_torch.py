"""End to end with torch: the example trainer under the harness survives a spot notice and resumes exactly."""

import gzip
import re
import subprocess

import pytest
from conftest import PYTHON, REPO, base_env, closed_port_endpoint, run_harness

EXAMPLE = REPO / 'examples' / 'nanogpt-shakespeare'
TRAIN = str(EXAMPLE / 'train.py')
# A tiny model and few hundred iterations keep this test to seconds on one CPU thread.
ARGS = [
    'config/cpu_smoke.py',
    '--max_iters=300',
    '--log_interval=1',
    '--eval_interval=100',
    '--checkpoint_interval=100',
    '--lr_decay_iters=300',
]
INSTALL_HINT = (
    'torch is not importable by /usr/bin/python3; the end-to-end tests need it. Install it with: '
    'apt-get install -y python3-torch libopenblas0-pthread python3-numpy'
)


@pytest.fixture(scope='module')
def torch():
    try:
        import torch as module
    except ImportError:
        pytest.fail(INSTALL_HINT, pytrace=False)
    return module


def progress_lines(lines):
    """`iter N: loss X` and `step N: train loss X, val loss Y` by N, without the wall-clock fields."""
    result = {}
    for line in lines:
        match = re.match(r'^(iter (\d+): loss [\d.]+)', line) or re.match(r'^(step (\d+): train loss .*)$', line)
        if match:
            result[(line.split()[0], int(match.group(2)))] = match.group(1)
    return result


def unsafe_values(value, path: str = 'checkpoint') -> list[str]:
    """Paths to values torch 2's weights-only loader refuses (numpy scalars and arrays, other classes): torch 1.13
    here cannot load weights-only itself, so the test reads the types the trainer saved."""
    import torch

    if isinstance(value, torch.Tensor) or type(value) in (int, float, str, bool, bytes, type(None)):
        return []
    if isinstance(value, dict) and type(value).__module__ in ('builtins', 'collections'):
        return [bad for k, v in value.items() for bad in unsafe_values(k, path) + unsafe_values(v, f'{path}[{k!r}]')]
    if type(value) in (list, tuple):
        return [bad for i, v in enumerate(value) for bad in unsafe_values(v, f'{path}[{i}]')]
    return [f'{path}: {type(value).__module__}.{type(value).__qualname__}']


def test_interrupted_and_resumed_run_matches_an_uninterrupted_one(torch, tmp_path, fake_imds):
    reference = subprocess.run(
        [PYTHON, TRAIN, *ARGS, f'--out_dir={tmp_path / "reference"}'],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert reference.returncode == 0, reference.stderr
    expected = progress_lines(reference.stdout.splitlines())

    env = base_env(tmp_path, fake_imds.endpoint)
    first = run_harness([PYTHON, 'train.py', *ARGS], env, cwd=EXAMPLE)
    first.wait_for_stdout(r'^iter 30:')
    fake_imds.serve_notice()
    assert first.finish() == 75, first.output()
    stopped_at = int(first.wait_for_stdout(r'^saved checkpoint at iter (\d+) \(SIGTERM\)').group(1))
    assert 30 <= stopped_at < 300, 'the notice must land mid-run for this test to mean anything'

    env2 = base_env(
        tmp_path, closed_port_endpoint(), TRAINYARD_ATTEMPT='2', TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'ckpt2')
    )
    second = run_harness([PYTHON, 'train.py', *ARGS], env2, cwd=EXAMPLE)
    assert second.finish() == 0, second.output()
    assert second.wait_for_stdout(r'^resuming from iter (\d+)').group(1) == str(stopped_at)
    assert second.events('checkpoint_restored')[0]['resume_args'] == ['--init_from=resume']

    before = {k: v for k, v in progress_lines(first.stdout).items() if k[1] <= stopped_at}
    after = progress_lines(second.stdout)
    assert min(k[1] for k in after) == stopped_at + 1
    assert before == {k: v for k, v in expected.items() if k[1] <= stopped_at}
    assert after == {k: v for k, v in expected.items() if k[1] > stopped_at}

    final_ref = torch.load(tmp_path / 'reference' / 'ckpt.pt')
    final_resumed = torch.load(tmp_path / 'ckpt2' / 'ckpt.pt')
    assert final_resumed['iter_num'] == final_ref['iter_num'] == 300
    assert unsafe_values(final_resumed) == []
    for name, tensor in final_ref['model'].items():
        assert torch.equal(tensor, final_resumed['model'][name]), name


def test_refuses_a_corpus_whose_md5_does_not_match(torch, tmp_path):
    original = gzip.decompress((EXAMPLE / 'data' / 'input.txt.gz').read_bytes())
    tampered = tmp_path / 'input.txt.gz'
    tampered.write_bytes(gzip.compress(original[:-1] + b'?'))
    result = subprocess.run(
        [PYTHON, TRAIN, 'config/cpu_smoke.py', f'--data_path={tampered}', f'--out_dir={tmp_path / "out"}'],
        cwd=EXAMPLE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert 'does not match tinyshakespeare (6fb458f1232090904fb40fe944165e91)' in result.stderr
