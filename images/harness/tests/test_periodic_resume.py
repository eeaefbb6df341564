"""A script that ignores SIGTERM and only checkpoints every K steps still resumes, losing at most K steps."""

import re
import signal

from conftest import PYTHON, TESTS, base_env, closed_port_endpoint, run_harness

TRAINER = str(TESTS / 'fixtures' / 'periodic_trainer.py')
K = 10


def last_iter(lines):
    iters = [int(m.group(1)) for m in (re.match(r'^iter (\d+):', line) for line in lines) if m]
    return max(iters)


def test_resumes_from_the_last_periodic_checkpoint_via_injected_resume_args(tmp_path, fake_imds):
    env = base_env(tmp_path, fake_imds.endpoint, TRAINYARD_STOP_GRACE_SECONDS='0.3', TRAINYARD_SETTLE_SECONDS='0.05')
    first = run_harness([PYTHON, TRAINER, f'--checkpoint_interval={K}'], env)
    first.wait_for_stdout(r'^iter 35:')
    fake_imds.serve_notice()
    assert first.finish() == 75, first.output()
    assert first.events('stop_grace_expired'), 'the script ignores SIGTERM, so the harness had to kill it'
    reached = last_iter(first.stdout)

    second_env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_ATTEMPT='2',
        TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'ckpt-attempt2'),
    )
    target = reached + 5
    second = run_harness([PYTHON, TRAINER, f'--checkpoint_interval={K}', f'--max_iters={target}'], second_env)
    assert second.finish() == 0, second.output()

    resumed_at = int(second.wait_for_stdout(r'^resuming from iter (\d+)').group(1))
    assert resumed_at % K == 0 and resumed_at > 0
    assert reached - resumed_at <= K, f'lost {reached - resumed_at} steps (reached {reached}, resumed {resumed_at})'
    assert second.stdout[1].startswith(f'iter {resumed_at + 1}:')
    assert 'training done' in second.stdout
    assert second.events('user_command_started')[0]['command'][-1] == '--init_from=resume'
