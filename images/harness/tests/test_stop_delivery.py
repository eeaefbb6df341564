"""Where the stop signal goes, and how long the harness waits: data-loader workers, shells, launchers."""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import HARNESS_SRC, PYTHON, base_env, closed_port_endpoint, run_harness

from trainyard_harness.checkpoints import CheckpointStore
from trainyard_harness.logs import Logger
from trainyard_harness.main import Harness
from trainyard_harness.processes import live_group_pids, stop_targets
from trainyard_harness.settings import load_settings
from trainyard_harness.storage import FileStorage

# Saves on SIGTERM, slowly (half a second, as a real save takes a while), then says so; `train_until_stopped` steps
# until the signal and returns the step.
SAVE_ON_STOP = """
    import os, signal, sys, time
    folder = os.environ['TRAINYARD_CHECKPOINT_DIR']
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))

    def say(line):
        os.write(1, (line + '\\n').encode())  # one write: other processes of the command share its stdout

    def save(step):
        time.sleep(0.5)
        with open(os.path.join(folder, 'model.pt'), 'w') as f:
            f.write(f'stopped at {step}')
        with open(os.path.join(folder, 'SAVED'), 'w') as f:
            f.write(str(step))
        say(f'saved at {step}')

    def train_until_stopped():
        say(f'trainer {os.getpid()} ready')
        step = 0
        while not stopping:
            time.sleep(0.01)
            step += 1
        return step
"""


def script(tmp_path, body: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def trainer(tmp_path) -> str:
    return script(
        tmp_path,
        SAVE_ON_STOP
        + """
    save(train_until_stopped())
    """,
        'trainer.py',
    )


def newest_saved_model(tmp_path) -> str:
    store = CheckpointStore(FileStorage(f'file://{tmp_path}/store/checkpoints'), 3, Logger(io.StringIO()))
    assert store.restore_newest(str(tmp_path / 'restored')) is not None
    return (tmp_path / 'restored' / 'model.pt').read_text()


def assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path) -> None:
    saved = run.wait_for_stdout(r'^saved at (\d+)$')
    assert newest_saved_model(tmp_path) == f'stopped at {saved.group(1)}'


def test_data_loader_workers_do_not_get_the_signal_so_the_trainer_saves(tmp_path):
    """Signalled too, the workers die and the trainer's next batch raises before it can save (exit 1, no save)."""
    job = script(
        tmp_path,
        SAVE_ON_STOP
        + """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 10**6

        def __getitem__(self, index):
            time.sleep(0.005)
            return torch.tensor([index])

    torch.set_num_threads(1)
    for step, batch in enumerate(DataLoader(Slow(), batch_size=4, num_workers=2)):
        if step == 5:
            print('ready', flush=True)
        if stopping:
            break
    save(step)
    """,
        'loader.py',
    )
    run = run_harness([PYTHON, job], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)
    assert not run.events('stopped_command_failed'), run.output()
    assert len(run.events('stop_signal_sent')[0]['pids']) == 1


def test_a_shell_and_its_command_both_get_the_signal_and_nothing_after_it_runs(tmp_path):
    """bash passes nothing on; signalled as a group, it died at once and the harness killed the trainer mid-save."""
    second = script(tmp_path, "print('second ran', flush=True)", 'second.py')
    command = ['bash', '-c', f'{PYTHON} {trainer(tmp_path)} && {PYTHON} {second}']
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness(command, env)
    pid = int(run.wait_for_stdout(r'^trainer (\d+) ready$').group(1))
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    shell = run.events('user_command_started')[0]['pid']
    assert run.events('stop_signal_sent')[0]['pids'] == sorted([shell, pid])
    assert run.events('user_command_exited')[0]['returncode'] == -signal.SIGTERM
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)
    assert 'second ran' not in run.stdout


def test_a_shell_loop_starts_no_new_command_after_the_stop(tmp_path):
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness(['bash', '-c', f'while true; do {PYTHON} {trainer(tmp_path)}; done'], env)
    run.wait_for_stdout(r'^trainer \d+ ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert len([line for line in run.stdout if line.startswith('trainer ')]) == 1, run.output()
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)


def test_the_children_a_trainer_leaves_when_it_exits_after_saving_do_not_get_the_signal(tmp_path):
    """Orphans get it only from a leader that died of it: a helper left by a clean exit cannot void the save."""
    job = script(
        tmp_path,
        SAVE_ON_STOP
        + """
    import subprocess
    helper = subprocess.Popen(['sleep', '300'])
    say(f'helper {helper.pid}')
    train_until_stopped()
    save(9)
    """,
        'leaves_a_helper.py',
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_SETTLE_SECONDS='2')
    run = run_harness([PYTHON, job], env)
    helper = int(run.wait_for_stdout(r'^helper (\d+)$').group(1))
    run.wait_for_stdout(r'^trainer \d+ ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert not run.events('stop_signal_passed_on'), run.output()
    assert not run.events('final_sync_skipped'), run.output()
    assert newest_saved_model(tmp_path) == 'stopped at 9'
    assert helper not in live_group_pids(run.events('user_command_started')[0]['pid'])  # killed with the group


def test_the_orphans_of_a_launcher_that_dies_of_the_signal_get_it_and_are_waited_for(tmp_path):
    """The launcher dies without passing the signal on; the harness then signals its orphaned trainer and waits."""
    launcher = script(
        tmp_path,
        f"""
        import subprocess, sys
        sys.exit(subprocess.call([sys.executable, {trainer(tmp_path)!r}]))
        """,
        'launcher.py',
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness([PYTHON, launcher], env)
    pid = int(run.wait_for_stdout(r'^trainer (\d+) ready$').group(1))
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert pid not in run.events('stop_signal_sent')[0]['pids']
    assert pid in run.events('stop_signal_passed_on')[0]['pids']
    assert run.events('user_command_exited')[0]['returncode'] == -signal.SIGTERM
    saved = run.wait_for_stdout(r'^saved at (\d+)$')
    # The launcher died of the signal within the settle window of the save: only the done file vouches for it.
    assert newest_saved_model(tmp_path) == f'stopped at {saved.group(1)}'


def test_a_launcher_that_passes_the_signal_on_and_exits_1_still_means_resume(tmp_path):
    """torchrun shuts its workers down with the signal it got, then raises: exit 1 after a good save."""
    launcher = script(
        tmp_path,
        f"""
        import signal, subprocess, sys, time
        worker = subprocess.Popen([sys.executable, {trainer(tmp_path)!r}])
        stopping = []
        signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
        while worker.poll() is None:
            if stopping and len(stopping) == 1:
                worker.send_signal(signal.SIGTERM)
                stopping.append(2)
            time.sleep(0.02)
        sys.exit(1 if stopping else worker.returncode)
        """,
        'torchrun_like.py',
    )
    run = run_harness([PYTHON, launcher], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout(r'^trainer (\d+) ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert run.events('stopped_command_failed')[0]['returncode'] == 1
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)


def test_a_shell_whose_command_died_of_the_signal_right_after_a_write_has_nothing_uploaded_at_the_end(tmp_path):
    """bash reports its command's death by SIGTERM as 143: the write may be torn, as if the command were the leader."""
    writer = script(
        tmp_path,
        """
        import os, signal, time
        folder = os.environ['TRAINYARD_CHECKPOINT_DIR']
        with open(os.path.join(folder, 'ckpt.pt'), 'w') as f:
            f.write('first')
        print('ready', flush=True)
        signal.pause()
        """,
        'writer.py',
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_SETTLE_SECONDS='30', TRAINYARD_SYNC_INTERVAL_SECONDS='60')
    # The trap makes bash wait for the writer and go on; without one it would die of the signal itself.
    run = run_harness(['bash', '-c', f'trap : TERM; {PYTHON} {writer}; exit $?'], env)
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert run.events('user_command_exited')[0]['returncode'] == 128 + signal.SIGTERM
    assert run.events('final_sync_skipped')[0]['returncode'] == 128 + signal.SIGTERM
    assert not (tmp_path / 'store' / 'checkpoints').exists() or not any((tmp_path / 'store' / 'checkpoints').iterdir())


def wait_until(condition, what: str, limit: float = 10.0):
    deadline = time.monotonic() + limit
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'{what} not within {limit}s')
        time.sleep(0.01)


def test_stop_targets_are_the_leader_and_after_its_death_by_signal_the_orphans_past_any_shell():
    forker = textwrap.dedent(
        """
        import os, subprocess, sys, time
        for _ in range(2):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        shell = subprocess.Popen(['bash', '-c', 'sleep 60; :'])
        print(shell.pid, flush=True)
        time.sleep(60)
        """
    )
    leader = subprocess.Popen([sys.executable, '-c', forker], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        shell = int(leader.stdout.readline())
        wait_until(lambda: len(live_group_pids(leader.pid)) == 5, 'leader, 2 forks, bash and sleep')
        # The leader only: its forked workers and the shell it runs are its own business.
        assert stop_targets(leader.pid, orphans=True) == [leader.pid]
        os.kill(leader.pid, signal.SIGKILL)
        leader.wait()
        # Left behind by a leader that exited on its own, they are nobody's to stop.
        assert stop_targets(leader.pid, orphans=False) == []
        # Left by one that died of the signal, every orphan gets it, and the shell's command too.
        orphans = live_group_pids(leader.pid)
        assert len(orphans) == 4 and shell in orphans
        assert stop_targets(leader.pid, orphans=True) == orphans
    finally:
        os.killpg(leader.pid, signal.SIGKILL)


# Rewrites its checkpoint in place without pause (as nanoGPT's torch.save does) and has no SIGTERM handler.
REWRITER = """
    import os
    path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt.pt')
    print('ready', flush=True)
    while True:
        with open(path, 'w') as f:
            f.write('TORN')
            f.flush()
            f.write('.' * 100000)
"""


def uploaded_checkpoints(tmp_path) -> list[str]:
    folder = tmp_path / 'store' / 'checkpoints'
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize('trap', [False, True])
def test_a_command_a_shell_ran_that_died_mid_write_is_not_uploaded_whatever_the_shell_says(tmp_path, trap):
    """With a trap the shell waits for the command, runs `echo` and exits 0: how the command ended cannot be seen.
    Without one the shell dies of the signal and the command, re-parented to the harness, is seen dying of it, unless
    it died first and the dying shell reaped it (both get the signal at once): unseen then, and skipped the same."""
    writer = script(tmp_path, REWRITER, 'rewriter.py')
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_SETTLE_SECONDS='30', TRAINYARD_SYNC_INTERVAL_SECONDS='60')
    run = run_harness(['bash', '-c', f'{"trap : TERM; " if trap else ""}{PYTHON} {writer}; echo the shell goes on'], env)
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    shell = run.events('user_command_started')[0]['pid']
    writer_pid = [pid for pid in run.events('stop_signal_sent')[0]['pids'] if pid != shell]
    skipped = run.events('final_sync_skipped')[0]
    assert run.events('user_command_exited')[0]['returncode'] == (0 if trap else -signal.SIGTERM)
    if trap:
        assert (skipped['unseen_pids'], skipped['died_of_signal_pids']) == (writer_pid, [])
    else:
        assert sorted(skipped['unseen_pids'] + skipped['died_of_signal_pids']) == writer_pid
    assert uploaded_checkpoints(tmp_path) == []


@pytest.mark.parametrize('levels', [1, 2])
def test_a_wrapper_script_without_exec_has_its_trainers_save_uploaded(tmp_path, levels):
    """The shells die of the signal at once; the trainer, re-parented to the harness, saves and exits 0, which the
    harness sees: no done file is needed to trust the save. A wrapper calling another (`bash inner.sh`) must not void
    it: the inner shell dies as fast as it is signalled, and the outer one may reap it."""
    command = f'{PYTHON} {trainer(tmp_path)} "$@"'
    for level in range(levels):
        wrapper = tmp_path / f'run{level}.sh'
        wrapper.write_text(f'#!/bin/bash\n{command}\necho the wrapper goes on\n')
        wrapper.chmod(0o755)
        command = f'bash {wrapper}'
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_SETTLE_SECONDS='30', TRAINYARD_SYNC_INTERVAL_SECONDS='60')
    run = run_harness([str(wrapper)], env)
    pid = int(run.wait_for_stdout(r'^trainer (\d+) ready$').group(1))
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    started = run.events('user_command_started')[0]
    assert len(run.events('stop_signal_sent')[0]['pids']) == levels + 1
    assert {started['pid'], pid} <= set(run.events('stop_signal_sent')[0]['pids'])
    assert run.events('user_command_exited')[0]['returncode'] == -signal.SIGTERM
    assert not run.events('final_sync_skipped'), run.output()
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)
    assert 'the wrapper goes on' not in run.stdout
    assert started['subreaper'] is True


def children_of(parent: int) -> dict[int, tuple[str, str]]:
    """{pid: (state, command name)} of the processes whose parent is `parent`."""
    found = {}
    for name in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{name}/stat') as stat:
                text = stat.read()
        except OSError:
            continue  # exited while we looked
        fields = text.rpartition(')')[2].split()
        if int(fields[1]) == parent:
            found[int(name)] = (fields[0], text[text.index('(') + 1 : text.rindex(')')])
    return found


def test_the_orphans_a_command_leaves_while_it_trains_come_to_the_harness_and_are_reaped(tmp_path):
    """Re-parented to the harness, each would stay a zombie (a pid taken) until the harness exits if not reaped."""
    command = ['bash', '-c', 'for i in $(seq 20); do (sleep 2 &); done; echo spawned; exec sleep 60']
    run = run_harness(command, base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout('^spawned$')
    harness = run.process.pid
    wait_until(lambda: sum(name == 'sleep' for _state, name in children_of(harness).values()) == 21, '20 orphans adopted')
    # They exit after 2 s; reaped within a second or so, none is left a zombie.
    leader = run.events('user_command_started')[0]['pid']
    wait_until(lambda: list(children_of(harness)) == [leader], 'the orphans reaped', limit=15)
    run.signal(signal.SIGTERM)
    assert run.finish() == 75, run.output()


@pytest.mark.parametrize('through_bash', [False, True])
def test_a_trainer_that_saves_and_exits_143_itself_has_its_save_uploaded(tmp_path, through_bash):
    """128 + N means death by signal N only from a shell; a trainer may choose that status after a good save.

    `bash -c` with one command execs it: the process the harness started is a shell no longer when the stop comes.
    """
    job = script(
        tmp_path,
        SAVE_ON_STOP
        + """
    train_until_stopped()
    save(7)
    sys.exit(143)
    """,
        'exits_143.py',
    )
    command = ['bash', '-c', f'{PYTHON} {job}'] if through_bash else [PYTHON, job]
    run = run_harness(command, base_env(tmp_path, closed_port_endpoint()))
    pid = int(run.wait_for_stdout(r'^trainer (\d+) ready$').group(1))
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert run.events('user_command_started')[0]['pid'] == pid
    assert not run.events('final_sync_skipped'), run.output()
    assert newest_saved_model(tmp_path) == 'stopped at 7'


def test_a_process_that_ignores_the_stop_signal_is_not_waited_for(tmp_path):
    """A monitor started with SIG_IGN for SIGTERM would hold the stop for the whole grace period (30 s here)."""
    monitor = script(
        tmp_path,
        """
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(1, b'monitor ready\\n')
        while True:
            time.sleep(1)
        """,
        'monitor.py',
    )
    command = ['bash', '-c', f'{PYTHON} {monitor} & {PYTHON} {trainer(tmp_path)}']
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness(command, env)
    run.wait_for_stdout('^monitor ready$')
    run.wait_for_stdout(r'^trainer \d+ ready$')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert len(run.events('stop_signal_sent')[0]['pids']) == 3  # bash, the monitor and the trainer
    assert run.events('stop_phases')[0]['signal_to_exit_s'] < 15, run.output()
    assert not run.events('stop_grace_expired')
    assert_the_stop_save_is_the_newest_checkpoint(run, tmp_path)


def test_the_reader_of_a_pipeline_is_left_to_end_with_its_input(tmp_path):
    """Signalled, `tee` dies and the trainer's next print (nanoGPT says it is saving) raises BrokenPipeError."""
    job = script(
        tmp_path,
        SAVE_ON_STOP
        + """
    train_until_stopped()
    time.sleep(0.3)
    print('saving checkpoint', flush=True)
    save(3)
    """,
        'prints_then_saves.py',
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness(['bash', '-c', f'{PYTHON} {job} | tee {tmp_path / "train.log"}'], env)
    pid = int(run.wait_for_stdout(r'^trainer (\d+) ready$').group(1))
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    shell = run.events('user_command_started')[0]['pid']
    assert run.events('stop_signal_sent')[0]['pids'] == sorted([shell, pid])
    assert newest_saved_model(tmp_path) == 'stopped at 3'
    assert 'saved at 3' in (tmp_path / 'train.log').read_text()


def test_reaping_orphans_leaves_the_harness_own_subprocesses_to_whoever_waits_for_them():
    """nvidia-smi, run by the metrics thread, is the harness's child as much as an orphan is: its status is not ours."""
    program = textwrap.dedent(
        """
        import json, os, signal, subprocess, threading
        from trainyard_harness.processes import become_subreaper, reap_adopted
        become_subreaper()
        # The subshell starts `sh` in the background and exits at once: that `sh` is an orphan.
        leader = subprocess.Popen(['sh', '-c', '(sh -c "sleep 0.3; exit 4" &); sleep 5'], start_new_session=True)
        codes = []
        def metrics():
            for _ in range(40):
                codes.append(subprocess.run(['sh', '-c', 'exit 3']).returncode)
        thread = threading.Thread(target=metrics)
        thread.start()
        reaped = {}
        while thread.is_alive() or not reaped:
            reaped.update(reap_adopted(leader.pid))  # as often as it can: the race is the point
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        print(json.dumps({'codes': codes, 'reaped': list(reaped.values())}))
        """
    )
    env = {**os.environ, 'PYTHONPATH': str(HARNESS_SRC)}
    done = subprocess.run([PYTHON, '-c', program], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Each subprocess.run saw its own status; the orphan the command left (`exit 4`) was reaped.
    assert json.loads(done.stdout) == {'codes': [3] * 40, 'reaped': [4]}


def _harness_settings(tmp_path):
    env = {
        'TRAINYARD_JOB_ID': 'job-audit',
        'TRAINYARD_ATTEMPT': '1',
        'TRAINYARD_CHECKPOINT_URI': f'file://{tmp_path}/store/checkpoints',
        'TRAINYARD_CHECKPOINT_DIR': str(tmp_path / 'ckpt'),
    }
    return load_settings(env, ['true'])


def test_a_second_stop_signal_while_the_main_thread_writes_a_log_line_does_not_crash_the_harness(tmp_path):
    """A spot reclaim requests the stop twice: the IMDS poller first, then the SIGTERM that TerminateJob makes ECS send
    (DESIGN.md, "Checkpoint on interruption"). The signal handler runs on the main thread, here in the middle of a log
    write blocked on a full stderr pipe (EINTR; PEP 475 runs the handler, then retries): a log line written from the
    handler would re-enter the stream's BufferedWriter (RuntimeError, the harness dead before its final sync). A
    harness without PYTHONUNBUFFERED has such a writer (local mode from the source tree, a custom image). The handler
    only notes the repeated stop; the run loop logs it."""
    read_end, write_end = os.pipe()
    stream = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, 'w'), buffer_size=8192))
    log = Logger(stream)
    harness = Harness(_harness_settings(tmp_path), log)
    previous = signal.signal(signal.SIGTERM, harness._on_signal)
    try:
        harness.request_stop('spot-notice:terminate')  # the IMDS poller's request comes first
        # The log stream's reader is slow: the pipe is full, so the next write blocks in write(2).
        os.set_blocking(write_end, False)
        try:
            while True:
                os.write(write_end, b'x' * 65536)
        except BlockingIOError:
            pass
        os.set_blocking(write_end, True)
        main = threading.main_thread().ident
        stop_draining = threading.Event()

        def terminate_then_drain() -> None:
            time.sleep(0.3)
            signal.pthread_kill(main, signal.SIGTERM)  # ECS's SIGTERM arrives while the write is blocked
            time.sleep(0.3)
            os.set_blocking(read_end, False)
            while not stop_draining.is_set():  # the reader catches up
                try:
                    os.read(read_end, 1 << 20)
                except BlockingIOError:
                    time.sleep(0.02)

        drainer = threading.Thread(target=terminate_then_drain, daemon=True)
        drainer.start()
        try:
            log.info('stop_signal_sent', signal='SIGTERM', pids=[12345])  # what the main loop logs at the stop
        finally:
            stop_draining.set()
            drainer.join(5)
    finally:
        signal.signal(signal.SIGTERM, previous)
        os.close(read_end)
    assert harness.stop_reason == 'spot-notice:terminate'
    assert harness.repeated_stop_signals == ['SIGTERM']
