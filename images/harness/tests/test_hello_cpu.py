"""The torch-free example resumes exactly: interrupted + resumed ends with the same weights as one straight run."""

import re
import subprocess

from conftest import PYTHON, REPO, base_env, closed_port_endpoint, run_harness

HELLO = str(REPO / 'examples' / 'hello-cpu' / 'train.py')
ARGS = ['--max_iters=400', '--log_interval=1', '--step_delay=0.002']


def test_interrupted_hello_cpu_resumes_to_the_same_result(tmp_path, fake_imds):
    straight = subprocess.run(
        [PYTHON, HELLO, *ARGS, f'--out_dir={tmp_path / "straight"}'], capture_output=True, text=True, timeout=120
    )
    assert straight.returncode == 0
    expected = re.search(r'^done: .*$', straight.stdout, re.M).group(0)

    first = run_harness([PYTHON, HELLO, *ARGS], base_env(tmp_path, fake_imds.endpoint))
    first.wait_for_stdout(r'^iter 50:')
    fake_imds.serve_notice()
    assert first.finish() == 75
    env2 = base_env(
        tmp_path, closed_port_endpoint(), TRAINYARD_ATTEMPT='2', TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'c2')
    )
    second = run_harness([PYTHON, HELLO, *ARGS], env2)
    assert second.finish() == 0

    resumed = int(second.wait_for_stdout(r'^resuming from iter (\d+)').group(1))
    assert 50 <= resumed < 400
    assert second.stdout[-1] == expected
    straight_lines = [l for l in straight.stdout.splitlines() if re.match(rf'^iter {resumed + 1}:', l)]
    assert straight_lines and straight_lines[0].split(', time')[0] == second.stdout[1].split(', time')[0]
