"""The harness end to end as a process: exit codes, environment, resume arguments, SIGTERM and spot notices."""

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import tarfile
import textwrap
import threading
import zipfile
from pathlib import Path

import pytest
from conftest import PYTHON, REPO, base_env, closed_port_endpoint, run_harness

from trainyard_harness.checkpoints import CheckpointStore
from trainyard_harness.logs import Logger
from trainyard_harness.storage import FileStorage

HELLO = str(REPO / 'examples' / 'hello-cpu' / 'train.py')


def script(tmp_path, body: str, name='job.py'):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def stored_checkpoints(tmp_path):
    store = CheckpointStore(FileStorage(f'file://{tmp_path}/store/checkpoints'), 3, Logger(io.StringIO()))
    return store


@pytest.mark.parametrize(
    ('case', 'body', 'expected'),
    [
        ('success', 'raise SystemExit(0)', 0),
        ('ordinary failure keeps its code', 'raise SystemExit(3)', 3),
        ('user 75 is not mistaken for "resume me"', 'raise SystemExit(75)', 1),
        ('user 76 is not mistaken for "resume failed, run me again"', 'raise SystemExit(76)', 1),
        ('user 78 is not mistaken for bad configuration', 'raise SystemExit(78)', 1),
        ('user 79 is not mistaken for infrastructure', 'raise SystemExit(79)', 1),
        ('killed by SIGKILL', 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)', 128 + 9),
        ('killed by SIGSEGV', 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)', 128 + 11),
    ],
)
def test_reports_the_user_command_exit_status(tmp_path, case, body, expected):
    run = run_harness([PYTHON, '-c', body], base_env(tmp_path, closed_port_endpoint()))
    assert run.finish() == expected, case + '\n' + run.output()
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert progress['exit_code'] == expected


def test_missing_user_program_exits_127(tmp_path):
    run = run_harness(['/nonexistent/program'], base_env(tmp_path, closed_port_endpoint()))
    assert run.finish() == 127
    assert run.events('user_command_not_started')


def test_exposes_checkpoint_dir_resumed_flag_and_attempt_to_the_user_process(tmp_path):
    body = 'import os; print("ENV", os.environ["TRAINYARD_CHECKPOINT_DIR"], os.environ["TRAINYARD_RESUMED"], os.environ["TRAINYARD_ATTEMPT"])'
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_ATTEMPT='3')
    run = run_harness([PYTHON, '-c', body], env)
    assert run.finish() == 0
    assert f'ENV {tmp_path / "ckpt-attempt1"} 0 3' in run.stdout


def test_injects_resume_args_only_when_a_checkpoint_was_restored(tmp_path):
    job = script(
        tmp_path,
        """
        import os, sys
        print('ARGS', sys.argv[1:], 'RESUMED', os.environ['TRAINYARD_RESUMED'])
        path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'state.txt')
        if os.path.exists(path):
            print('RESTORED', open(path).read())
        open(path, 'w').write('written by attempt ' + os.environ['TRAINYARD_ATTEMPT'])
        """,
    )
    first = run_harness([PYTHON, job, '--lr=1'], base_env(tmp_path, closed_port_endpoint()))
    assert first.finish() == 0
    second_env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_ATTEMPT='2',
        TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'fresh-container-dir'),
        TRAINYARD_RESUME_ARGS='--init_from=resume --note "two words"',
    )
    second = run_harness([PYTHON, job, '--lr=1'], second_env)
    assert second.finish() == 0

    assert "ARGS ['--lr=1'] RESUMED 0" in first.stdout
    assert "ARGS ['--lr=1', '--init_from=resume', '--note', 'two words'] RESUMED 1" in second.stdout
    assert 'RESTORED written by attempt 1' in second.stdout
    restored = second.events('checkpoint_restored')[0]
    assert restored['checkpoint'] == 'ckpt-000001' and restored['from_attempt'] == 1


def test_sigterm_stops_the_child_syncs_and_exits_75(tmp_path):
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_TOTAL_STEPS='100000')
    run = run_harness([PYTHON, HELLO, '--max_iters=100000', '--log_interval=5', '--step_delay=0.002'], env)
    run.wait_for_stdout(r'^iter 20:')
    run.signal(signal.SIGTERM)
    code = run.finish()

    assert code == 75, run.output()
    saved = run.wait_for_stdout(r'saved checkpoint at iter (\d+) \(SIGTERM\)')
    stopped_at = int(saved.group(1))
    manifest = stored_checkpoints(tmp_path).restore_newest(str(tmp_path / 'check'))
    assert json.loads((tmp_path / 'check' / 'ckpt.json').read_text())['iter_num'] == stopped_at
    assert manifest['attempt'] == 1
    phases = run.events('stop_phases')[0]
    assert phases['reason'] == 'SIGTERM'
    for key in ('request_to_signal_s', 'signal_to_exit_s', 'final_sync_s', 'total_s'):
        assert phases[key] >= 0
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert progress['state'] == 'checkpointed' and progress['exit_code'] == 75 and progress['total_steps'] == 100000


def test_with_a_done_file_a_save_cut_short_by_sigterm_is_not_uploaded(tmp_path):
    """The trainer's second save is cut short before its done file: the final sync keeps the first save newest."""
    body = """
        import os, signal, sys, threading, time
        folder = os.environ['TRAINYARD_CHECKPOINT_DIR']
        def save(n, finished):
            with open(os.path.join(folder, 'model.pt'), 'w') as f:
                f.write(f'model {n}')
            time.sleep(0.05)
            if finished:
                with open(os.path.join(folder, 'SAVED'), 'w') as f:
                    f.write(str(n))
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        save(1, True)
        print('saved 1', flush=True)
        stopping.wait(60)
        save(2, False)
        print('stopped mid-save', flush=True)
    """
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')
    run = run_harness([PYTHON, script(tmp_path, body)], env)
    run.wait_for_event('checkpoint_uploaded')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    run.wait_for_stdout('stopped mid-save')
    assert run.events('checkpoint_save_unfinished'), run.output()
    store = stored_checkpoints(tmp_path)
    assert store.restore_newest(str(tmp_path / 'check'))['checkpoint'] == 'ckpt-000001'
    assert (tmp_path / 'check' / 'model.pt').read_text() == 'model 1'


def test_sigusr1_dumps_every_thread_stack_to_stderr_and_the_run_goes_on(tmp_path):
    env = base_env(tmp_path, closed_port_endpoint())
    run = run_harness([PYTHON, HELLO, '--max_iters=100000', '--log_interval=5', '--step_delay=0.002'], env)
    run.wait_for_stdout(r'^iter 20:')
    run.signal(signal.SIGUSR1)
    run.wait_for_stdout(r'^iter 200:')  # still training after the dump
    run.signal(signal.SIGTERM)
    assert run.finish() == 75, run.output()
    dump = '\n'.join(run.stderr)
    # faulthandler's format: one block per thread, the pumps and the checkpoint watcher among them.
    assert dump.count('Thread 0x') >= 3, run.output()
    assert 'in _pump' in dump and 'in _supervise' in dump, run.output()


def test_a_spot_notice_stops_the_child_and_exits_75(tmp_path, fake_imds):
    env = base_env(tmp_path, fake_imds.endpoint)
    run = run_harness([PYTHON, HELLO, '--max_iters=100000', '--log_interval=5', '--step_delay=0.002'], env)
    run.wait_for_stdout(r'^iter 20:')
    fake_imds.serve_notice()
    assert run.finish() == 75, run.output()
    assert run.events('spot_notice')[0]['action'] == 'terminate'
    assert run.events('stop_phases')[0]['reason'] == 'spot-notice:terminate'
    assert stored_checkpoints(tmp_path).restore_newest(str(tmp_path / 'check')) is not None
    # progress.json says a notice came, so the lifecycle can call the stop a reclaim without the platform's own record.
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert progress['state'] == 'checkpointed' and progress['spot_notice'] is True


def test_a_child_that_fails_after_the_signal_still_means_resume_and_its_status_is_logged(tmp_path):
    job = script(
        tmp_path,
        """
        import signal, sys
        def crash(*_):
            raise SystemExit(5)
        signal.signal(signal.SIGTERM, crash)
        print('ready', flush=True)
        while True:
            signal.pause()
        """,
    )
    run = run_harness([PYTHON, job], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGTERM)
    assert run.finish() == 75, run.output()
    assert run.events('stopped_command_failed')[0]['returncode'] == 5


def test_a_child_that_dies_of_the_stop_signal_still_means_resume(tmp_path):
    job = script(
        tmp_path,
        """
        import os, signal
        open(os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt.bin'), 'wb').write(b'x' * 10)
        print('ready', flush=True)
        while True:
            signal.pause()
        """,
    )
    run = run_harness([PYTHON, job], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGINT)
    assert run.finish() == 75
    assert run.events('stop_phases')[0]['reason'] == 'SIGINT'
    # Stopped by a signal with no notice from IMDS: not a reclaim as far as the harness can tell.
    assert json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())['spot_notice'] is False


def test_a_notice_after_the_child_finished_leaves_exit_0(tmp_path, fake_imds):
    # The notice is armed only after the user command has exited, so the harness never sends a signal.
    env = base_env(tmp_path, fake_imds.endpoint)
    run = run_harness([PYTHON, '-c', 'print("done")'], env)
    run.wait_for_event('user_command_exited')
    fake_imds.serve_notice()
    assert run.finish() == 0
    assert not run.events('stop_signal_sent')


def test_uploads_a_checkpoint_once_the_directory_settles_while_training_runs(tmp_path):
    job = script(
        tmp_path,
        """
        import os, signal
        d = os.environ['TRAINYARD_CHECKPOINT_DIR']
        with open(os.path.join(d, 'ckpt.pt.tmp'), 'wb') as f:
            f.write(b'weights' * 1000)
        os.replace(os.path.join(d, 'ckpt.pt.tmp'), os.path.join(d, 'ckpt.pt'))
        print('iter 10: loss 1.2345, time 1.00ms, mfu 1.00%', flush=True)
        signal.signal(signal.SIGTERM, lambda *_: None)
        signal.pause()
        """,
    )
    run = run_harness([PYTHON, job], base_env(tmp_path, closed_port_endpoint()))
    uploaded = run.wait_for_event('checkpoint_uploaded', reason='settled')
    assert run.process.poll() is None  # still training when the upload happened
    run.signal(signal.SIGTERM)
    assert run.finish() == 75

    assert uploaded['checkpoint'] == 'ckpt-000001' and uploaded['step'] == 10
    final = run.events('final_sync')[0]
    assert final['uploaded'] is False  # nothing changed since the settled upload
    folder = tmp_path / 'store' / 'checkpoints' / 'ckpt-000001'
    assert (folder / 'ckpt.pt').read_bytes() == b'weights' * 1000
    assert json.loads((folder / 'MANIFEST.json').read_text())['step'] == 10


def test_a_log_the_trainer_appends_to_beside_its_checkpoint_holds_nothing_back(tmp_path):
    # The log changes every few milliseconds and is open for writing all along: the checkpoint still settles and is
    # uploaded while training runs, and a trainer killed by the stop right after a log line is no torn checkpoint.
    job = script(
        tmp_path,
        """
        import os, time
        d = os.environ['TRAINYARD_CHECKPOINT_DIR']
        with open(os.path.join(d, 'ckpt.pt.tmp'), 'wb') as f:
            f.write(b'weights' * 1000)
        os.replace(os.path.join(d, 'ckpt.pt.tmp'), os.path.join(d, 'ckpt.pt'))
        print('iter 10: loss 1.2345, time 1.00ms, mfu 1.00%', flush=True)
        with open(os.path.join(d, 'train.log'), 'a') as log:
            while True:
                log.write('iter 11: still training\\n')
                log.flush()
                time.sleep(0.005)
        """,
    )
    run = run_harness([PYTHON, job], base_env(tmp_path, closed_port_endpoint()))
    uploaded = run.wait_for_event('checkpoint_uploaded', reason='settled')
    run.signal(signal.SIGTERM)
    assert run.finish() == 75

    assert uploaded['checkpoint'] == 'ckpt-000001' and uploaded['files'] == 2
    assert run.events('checkpoint_upload_deferred') == [] and run.events('final_sync_skipped') == []
    assert run.events('final_sync')[0]['skipped'] is False
    restored = stored_checkpoints(tmp_path).restore_newest(str(tmp_path / 'restored'))
    assert restored['step'] == 10
    assert (tmp_path / 'restored' / 'train.log').read_text().startswith('iter 11: still training\n')


def test_a_save_a_launcher_kills_mid_write_in_another_session_is_never_uploaded(tmp_path):
    # torchrun (2.x) starts its workers in sessions of their own, passes the stop on, and SIGKILLs a worker still
    # saving 30 s later, then exits 1: the harness sees neither the worker nor its death. The torn torch.save (a zip
    # without its end record) must not become the newest checkpoint.
    worker = script(
        tmp_path,
        """
        import os, signal, time, zipfile
        path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt.pt')
        def save(slowly):
            with zipfile.ZipFile(path, 'w') as archive, archive.open('archive/data.pkl', 'w') as member:
                for _ in range(20):
                    member.write(b'w' * 65536)
                    if slowly:
                        member.flush(); archive.fp.flush(); time.sleep(0.2)
        save(False)
        print('iter 100: loss 1.0000, time 1.00ms, mfu 1.00%', flush=True)
        signal.signal(signal.SIGTERM, lambda *_: save(True) or os._exit(0))
        while True:
            time.sleep(0.05)
        """,
        name='worker.py',
    )
    launcher = script(
        tmp_path,
        f"""
        import os, signal, subprocess, sys, time
        worker = subprocess.Popen([sys.executable, {worker!r}], start_new_session=True)
        stop = []
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
        while worker.poll() is None and not stop:
            time.sleep(0.05)
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(1.0)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        sys.exit(1)
        """,
        name='launcher.py',
    )
    run = run_harness([PYTHON, launcher], base_env(tmp_path, closed_port_endpoint()))
    good = run.wait_for_event('checkpoint_uploaded', reason='settled')
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    assert good['checkpoint'] == 'ckpt-000001'
    store = stored_checkpoints(tmp_path)
    assert store.complete_indices() == [1]
    assert any('without its end record' in r.get('reason', '') for r in run.events('final_sync_skipped'))
    restored = store.restore_newest(str(tmp_path / 'restored'))
    assert restored['checkpoint'] == 'ckpt-000001'
    with zipfile.ZipFile(tmp_path / 'restored' / 'ckpt.pt') as archive:
        assert archive.read('archive/data.pkl') == b'w' * 65536 * 20


# Saves a complete checkpoint, reports a step, then ends with its next save cut off (a torch.save stopped by a full
# disk, or by a launcher's SIGKILL at a stop): on SIGTERM, or on its own once the file named by argv[1] exists.
ENDS_WITH_A_TORN_SAVE = """
import os, signal, sys, time, zipfile
path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt.pt')

def end_mid_save(*_):
    with open(path, 'wb') as handle:
        handle.write(b'PK\\x03\\x04' + b'w' * 5000)  # a zip (torch.save's format) without its end record
    sys.exit(1)

signal.signal(signal.SIGTERM, end_mid_save)
with zipfile.ZipFile(path, 'w') as archive:
    archive.writestr('archive/data.pkl', b'good' * 250)
print('step=1 loss=1.0', flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
end_mid_save()
"""


@pytest.mark.parametrize(('ending', 'expected', 'state'), [('stopped', 75, 'checkpointed'), ('crashed', 1, 'failed')])
def test_a_save_torn_at_the_end_is_skipped_and_the_exit_code_stays_the_commands(tmp_path, ending, expected, state):
    # A torn file is the command's save cut short, not storage failing: the final sync is not retried and does not
    # turn the attempt into an infrastructure failure (79), and the last complete checkpoint stays the newest.
    trainer = tmp_path / 'trainer.py'
    trainer.write_text(ENDS_WITH_A_TORN_SAVE)
    crash = tmp_path / 'crash-now'
    run = run_harness([PYTHON, str(trainer), str(crash)], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_event('checkpoint_uploaded', reason='settled')
    if ending == 'stopped':
        run.signal(signal.SIGTERM)
    else:
        crash.touch()

    assert run.finish() == expected, run.output()
    [skipped] = run.events('final_sync_skipped')
    assert skipped['files'] == [str(tmp_path / 'ckpt-attempt1' / 'ckpt.pt')]
    assert 'without its end record' in skipped['reason']
    assert run.events('final_sync_retry') == [] and run.events('final_sync_gave_up') == []
    assert run.events('final_sync')[0]['skipped'] is True
    restored = stored_checkpoints(tmp_path).restore_newest(str(tmp_path / 'restored'))
    assert restored['checkpoint'] == 'ckpt-000001'
    with zipfile.ZipFile(tmp_path / 'restored' / 'ckpt.pt') as archive:
        assert archive.read('archive/data.pkl') == b'good' * 250
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert progress['state'] == state and progress['exit_code'] == expected


def test_kills_a_child_that_outlives_the_grace_period(tmp_path):
    job = script(
        tmp_path,
        """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('ready', flush=True)
        while True:
            signal.pause()
        """,
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_STOP_GRACE_SECONDS='0.5')
    run = run_harness([PYTHON, job], env)
    run.wait_for_stdout('^ready$')
    run.signal(signal.SIGTERM)
    assert run.finish() == 75
    assert run.events('stop_grace_expired')[0]['action'] == 'SIGKILL'
    assert run.events('stop_phases')[0]['killed_after_grace'] is True


def write_bundle(archive: Path, members: dict[str, str]) -> str:
    """Writes a .tar.gz of text files, by name (names as given, even outside), and returns its file:// URI."""
    archive.parent.mkdir(exist_ok=True)
    with tarfile.open(archive, 'w:gz') as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return f'file://{archive}'


def test_runs_the_command_inside_a_fetched_code_bundle(tmp_path):
    code = write_bundle(
        tmp_path / 'bundles' / 'code.tar.gz',
        {
            'main.py': 'import os; print("CWD", os.getcwd()); print(open("data.txt").read())',
            'data.txt': 'bundled data',
        },
    )
    env = base_env(
        tmp_path, closed_port_endpoint(), TRAINYARD_CODE_URI=code, TRAINYARD_WORK_DIR=str(tmp_path / 'work')
    )
    run = run_harness([PYTHON, 'main.py'], env, cwd=tmp_path)
    assert run.finish() == 0, run.output()
    assert f'CWD {tmp_path / "work"}' in run.stdout and 'bundled data' in run.stdout


def test_refuses_a_bundle_replaced_after_submission_before_unpacking_it(tmp_path):
    archive = tmp_path / 'bundles' / 'code.tar.gz'
    code = write_bundle(archive, {'main.py': 'print("ran")'})
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_CODE_URI=code,
        TRAINYARD_CODE_SHA256=digest,
        TRAINYARD_WORK_DIR=str(tmp_path / 'work'),
    )
    run = run_harness([PYTHON, 'main.py'], env, cwd=tmp_path)
    assert run.finish() == 0, run.output()
    assert 'ran' in run.stdout

    # Another job of the team writes over the bundle: exit 78 (running it again cannot help), nothing unpacked or run.
    write_bundle(archive, {'main.py': 'print("replaced")'})
    shutil.rmtree(tmp_path / 'work')
    run = run_harness([PYTHON, 'main.py'], env, cwd=tmp_path)
    assert run.finish() == 78, run.output()
    found = hashlib.sha256(archive.read_bytes()).hexdigest()
    [event] = run.events('code_bundle_replaced')
    assert event['error'] == (
        f'code bundle {code} has sha256 {found}, not the {digest} submitted: it was replaced '
        'after the job was submitted; submit the job again'
    )
    assert 'replaced' not in run.stdout
    assert not (tmp_path / 'work').exists()


def test_refuses_a_bundle_that_writes_outside_the_work_dir(tmp_path):
    code = write_bundle(tmp_path / 'bundles' / 'evil.tar.gz', {'../escaped.txt': 'x'})
    env = base_env(
        tmp_path, closed_port_endpoint(), TRAINYARD_CODE_URI=code,
        TRAINYARD_WORK_DIR=str(tmp_path / 'work'),
    )
    run = run_harness([PYTHON, '-c', 'print(1)'], env)
    # The bundle is the one submitted: every attempt would meet it, so it is bad configuration, not a failure to retry.
    assert run.finish() == 78
    assert 'outside' in run.events('code_bundle_refused')[0]['error']
    assert not (tmp_path / 'escaped.txt').exists()


@pytest.mark.parametrize(
    ('entries', 'refusal'),
    [
        # `b -> .`, then `a -> b/..` (the work dir's parent once b exists on disk), then a file a/evil.txt.
        ([('b', '.'), ('a', 'b/..'), ('a/evil.txt', None)], 'outside'),
        # `b -> .` and `x -> sub/deep`, then a link x again, which replaces the first: `b/../evil` is outside from
        # the work dir, where it is made, though not from sub, where the first x leads. A path named twice is refused
        # before anything is written.
        ([('b', '.'), ('x', 'sub/deep'), ('x', 'b/../evil')], "names 'x' twice"),
        # `p -> a`, `s -> p/../victim` (inside while p leads to a), a directory `s` (its mode and times would be set
        # last, through s), then `p -> .`: s now leads beside the work dir.
        ([('a/', 'dir'), ('p', 'a'), ('s', 'p/../victim'), ('s/', 'dir'), ('p', '.')], 'twice'),
        # `s -> q/sub/../..` (the work dir itself while q does not exist), then `q -> .`: s now leads to the parent.
        # Nothing is written through s; the walk after unpacking finds the link.
        ([('s', 'q/sub/../..'), ('q', '.')], "link 's' leads outside"),
    ],
    ids=[
        'through-a-link-to-itself',
        'in-place-of-an-earlier-link',
        'a-directory-through-a-relinked-path',
        'a-link-through-a-later-one',
    ],
)
def test_refuses_a_bundle_whose_entries_lead_outside_the_work_dir_only_once_unpacked(tmp_path, entries, refusal):
    # Each entry, checked against an empty work dir, looks inside it.
    from trainyard_harness.bundle import BundleError, fetch_bundle

    bundles = tmp_path / 'bundles'
    bundles.mkdir()
    with tarfile.open(bundles / 'chain.tar.gz', 'w:gz') as tar:
        for name, target in entries:
            entry = tarfile.TarInfo(name)
            if target is None:
                entry.size = len(b'escaped')
                tar.addfile(entry, io.BytesIO(b'escaped'))
            elif target == 'dir':
                entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o777, 0
                tar.addfile(entry)
            else:
                entry.type, entry.linkname = tarfile.SYMTYPE, target
                tar.addfile(entry)
    work = tmp_path / 'parent' / 'work'
    work.parent.mkdir()

    with pytest.raises(BundleError, match=refusal):
        fetch_bundle(f'file://{bundles}/chain.tar.gz', str(work), None)

    assert os.listdir(work.parent) == ['work']
    assert all(os.path.realpath(path).startswith(str(work)) for path in work.rglob('*')), 'a link leads outside'


def test_missing_code_bundle_is_an_infrastructure_failure(tmp_path):
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_CODE_URI=f'file://{tmp_path}/nothing/code.tar.gz')
    run = run_harness([PYTHON, '-c', 'print(1)'], env)
    assert run.finish() == 79
    assert run.events('code_bundle_unavailable')


def test_takes_the_command_from_trainyard_command(tmp_path):
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_COMMAND=json.dumps([PYTHON, '-c', 'print("from env")']))
    run = run_harness([], env)
    assert run.finish() == 0
    assert 'from env' in run.stdout


def test_reads_the_user_metrics_file_into_progress(tmp_path):
    job = script(
        tmp_path,
        """
        import json
        with open('user-metrics.jsonl', 'w') as f:
            for step in (1, 2, 3):
                f.write(json.dumps({'step': step, 'loss': 4.0 - step, 'tokens_per_s': 10 * step}) + '\\n')
        """,
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_METRICS_FILE='user-metrics.jsonl')
    run = run_harness([PYTHON, job], env, cwd=tmp_path)
    assert run.finish() == 0
    samples = [json.loads(l) for l in (tmp_path / 'store' / 'metrics' / 'metrics.jsonl').read_text().splitlines()]
    assert [(s['step'], s['loss'], s['tokens_per_s']) for s in samples] == [(1, 3.0, 10), (2, 2.0, 20), (3, 1.0, 30)]
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert (progress['step'], progress['loss'], progress['state']) == (3, 1.0, 'succeeded')


def test_a_metrics_file_setting_that_names_a_directory_of_the_commands_working_directory_exits_78(tmp_path):
    (tmp_path / 'logs').mkdir()
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_METRICS_FILE='logs')
    run = run_harness([PYTHON, '-c', 'print(1)'], env, cwd=tmp_path)

    assert run.finish() == 78, run.output()
    assert run.events('bad_configuration')[0]['problems'] == [
        f"TRAINYARD_METRICS_FILE must name a JSON-lines file, not a directory, got 'logs' ({tmp_path / 'logs'})"
    ]
    assert not run.events('user_command_started')


def test_finds_checkpoint_files_a_process_group_holds_open_for_writing(tmp_path):
    import subprocess

    from trainyard_harness.main import files_open_for_writing

    directory = tmp_path / 'ckpt'
    directory.mkdir()
    (directory / 'read.pt').write_bytes(b'r')
    holder = subprocess.Popen(
        [PYTHON, '-c', 'import sys; w = open(sys.argv[1], "wb"); r = open(sys.argv[2], "rb"); print("open", flush=True); sys.stdin.read()',
         str(directory / 'writing.pt'), str(directory / 'read.pt')],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline().strip() == 'open'
        assert files_open_for_writing(holder.pid, str(directory)) == [str(directory / 'writing.pt')]
    finally:
        holder.stdin.close()
        holder.wait(30)
    assert files_open_for_writing(holder.pid, str(directory)) == []


def test_a_descriptor_closed_while_it_is_looked_at_hides_no_other_file_open_for_writing(tmp_path, monkeypatch):
    # A trainer opens and closes files all the time (nanoGPT memmaps train.bin for every batch): one closed between the
    # listing of /proc/<pid>/fd and its readlink once hid every later descriptor of that process, its checkpoint too.
    from trainyard_harness.main import files_open_for_writing

    directory = os.path.realpath(tmp_path)
    batch = open(os.path.join(directory, 'train.bin'), 'wb')  # the lower descriptor: looked at first
    checkpoint = open(os.path.join(directory, 'ckpt.pt'), 'wb')
    readlink = os.readlink

    def closed_meanwhile(path, *args, **kwargs):
        target = readlink(path, *args, **kwargs)
        if target == batch.name:
            raise FileNotFoundError(path)
        return target

    monkeypatch.setattr(os, 'readlink', closed_meanwhile)
    try:
        assert files_open_for_writing(os.getpgrp(), directory) == [checkpoint.name]
    finally:
        batch.close()
        checkpoint.close()


def test_tells_a_stopped_process_group_from_a_running_one(tmp_path):
    import os
    import subprocess
    import time

    from trainyard_harness.main import group_stopped

    spinner = subprocess.Popen([PYTHON, '-c', 'while True: pass'], start_new_session=True)
    try:
        assert not group_stopped(spinner.pid)
        os.killpg(spinner.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not group_stopped(spinner.pid):
            assert time.monotonic() < deadline, 'SIGSTOP never took effect'
            time.sleep(0.001)
        os.killpg(spinner.pid, signal.SIGCONT)
        assert not group_stopped(spinner.pid)
    finally:
        spinner.kill()
        spinner.wait(30)


# A writer that rewrites its checkpoint in place as fast as it can: most of its time is spent with the file open
# and truncated, so a kill that lands at the wrong moment leaves invalid JSON behind.
RESTLESS_WRITER = textwrap.dedent(
    '''
    import json, os, sys
    step = 0
    while True:
        step += 1
        with open(os.path.join(sys.argv[1], 'ckpt.json'), 'w') as handle:
            json.dump({'step': step, 'padding': 'x' * 200_000}, handle)
    '''
)


def test_a_kill_never_tears_a_checkpoint_file_it_does_not_report(tmp_path):
    """kill(SIGSTOP) returns before the group has stopped; the harness waits for the stop before it looks at /proc.

    Before it did, a writer still running after SIGSTOP could open (truncate) its checkpoint between the look and
    the SIGKILL, and the empty file was uploaded as the newest checkpoint (over half of these trials on a 2-core
    machine).
    """
    import subprocess
    import time
    import types

    from trainyard_harness.main import Harness

    for trial in range(20):
        directory = tmp_path / f'trial-{trial}'
        directory.mkdir()
        writer = subprocess.Popen([PYTHON, '-c', RESTLESS_WRITER, str(directory)], start_new_session=True)
        while not (directory / 'ckpt.json').exists():
            time.sleep(0.005)
        time.sleep(0.05)
        harness = Harness(types.SimpleNamespace(checkpoint_dir=str(directory)), Logger())
        torn = harness._kill_between_writes(writer)
        assert writer.wait(30) == -signal.SIGKILL
        if torn:
            assert torn == [str(directory / 'ckpt.json')]
            continue
        saved = json.loads((directory / 'ckpt.json').read_text())
        assert saved['step'] >= 1, f'trial {trial}'


def test_a_writer_that_stalls_mid_write_never_has_its_half_file_uploaded(tmp_path):
    """The directory is quiet for longer than the settle window while the checkpoint is half written."""
    job = script(
        tmp_path,
        """
        import json, os, signal, sys, time
        path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'ckpt.json')
        for step in (10, 20):
            text = json.dumps({'step': step, 'padding': 'x' * 10_000})
            with open(path, 'w') as handle:
                handle.write(text[:100])
                handle.flush()
                time.sleep(1.5)  # stalled, file open and unchanged, far past TRAINYARD_SETTLE_SECONDS
                handle.write(text[100:])
            print(f'iter {step}: loss 1.0000, time 1.00ms, mfu 0.00%', flush=True)
            while step == 10 and not os.path.exists(sys.argv[1]):  # the next save once this one is uploaded
                time.sleep(0.05)
        signal.pause()
        """,
    )
    go = tmp_path / 'go'
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_SETTLE_SECONDS='0.1')
    run = run_harness([PYTHON, job, str(go)], env)
    run.wait_for_event('checkpoint_uploaded', checkpoint='ckpt-000001')
    go.touch()
    run.wait_for_event('checkpoint_uploaded', checkpoint='ckpt-000002')
    run.signal(signal.SIGTERM)
    assert run.finish() == 75

    folders = sorted((tmp_path / 'store' / 'checkpoints').iterdir())
    for folder in folders:
        assert len((folder / 'ckpt.json').read_bytes()) > 100, f'{folder.name} holds the half-written file'
    assert [json.loads((f / 'ckpt.json').read_text())['step'] for f in folders] == [10, 20]
    assert len(run.events('checkpoint_upload_deferred')) == 2


def test_a_group_that_never_stops_has_every_checkpoint_file_treated_as_torn(tmp_path, monkeypatch):
    """A thread stuck in the kernel (state D) never reaches the stop: the kill lands at an unknown point."""
    import subprocess
    import types

    from trainyard_harness import main as harness_main

    monkeypatch.setattr(harness_main, 'group_stopped', lambda pgid: False)
    monkeypatch.setattr(harness_main, 'KILL_WRITE_WAIT_SECONDS', 0.2)
    directory = tmp_path / 'ckpt'
    (directory / 'optim').mkdir(parents=True)
    (directory / 'ckpt.pt').write_bytes(b'weights')
    (directory / 'optim' / 'state.pt').write_bytes(b'moments')
    sleeper = subprocess.Popen([PYTHON, '-c', 'import time; time.sleep(60)'], start_new_session=True)
    harness = harness_main.Harness(types.SimpleNamespace(checkpoint_dir=str(directory)), Logger())

    torn = harness._kill_between_writes(sleeper)

    assert sleeper.wait(30) == -signal.SIGKILL
    assert torn == [str(directory / 'ckpt.pt'), str(directory / 'optim' / 'state.pt')]


def test_a_process_forked_as_the_group_stops_is_stopped_too(tmp_path, monkeypatch):
    """A fork just before the SIGSTOP lands leaves a newcomer that never received it; the harness stops it as well."""
    import subprocess
    import types

    from trainyard_harness import main as harness_main

    monkeypatch.setattr(harness_main, 'KILL_WRITE_WAIT_SECONDS', 3.0)
    directory = tmp_path / 'ckpt'
    directory.mkdir()
    (directory / 'ckpt.pt').write_bytes(b'weights')
    leader = subprocess.Popen([PYTHON, '-c', 'import time; time.sleep(60)'], process_group=0)
    newcomers: list[subprocess.Popen] = []
    real_group_stopped = harness_main.group_stopped

    def group_stopped_after_a_fork(pgid):
        if not newcomers:  # the first look comes right after the first SIGSTOP: a member appears that missed it
            newcomers.append(subprocess.Popen([PYTHON, '-c', 'while True: pass'], process_group=leader.pid))
        return real_group_stopped(pgid)

    monkeypatch.setattr(harness_main, 'group_stopped', group_stopped_after_a_fork)
    harness = harness_main.Harness(types.SimpleNamespace(checkpoint_dir=str(directory)), Logger())
    try:
        torn = harness._kill_between_writes(leader)
    finally:
        for process in [leader, *newcomers]:
            process.kill()
            process.wait(30)

    assert torn == [], 'the newcomer was never stopped, so the kill was treated as landing mid-write'


def test_a_node_other_than_the_main_one_restores_and_runs_but_writes_nothing_to_storage(tmp_path):
    seeded = tmp_path / 'seed'
    seeded.mkdir()
    (seeded / 'state.txt').write_text('saved by the main node')
    stored_checkpoints(tmp_path).upload_snapshot(str(seeded), 'job-test', 1, None)
    job = script(
        tmp_path,
        """
        import os
        path = os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'state.txt')
        print('RESTORED', open(path).read(), 'RESUMED', os.environ['TRAINYARD_RESUMED'])
        open(path, 'w').write('written by node ' + os.environ['AWS_BATCH_JOB_NODE_INDEX'])
        print('step=7 loss=0.1')
        """,
    )
    store = tmp_path / 'store'
    before = sorted(str(p.relative_to(store)) for p in store.rglob('*'))

    def node(index: str):
        env = base_env(
            tmp_path,
            closed_port_endpoint(),
            TRAINYARD_ATTEMPT='2',
            TRAINYARD_CHECKPOINT_DIR=str(tmp_path / f'node{index}'),
            AWS_BATCH_JOB_NODE_INDEX=index,
            AWS_BATCH_JOB_MAIN_NODE_INDEX='0',
        )
        run = run_harness([PYTHON, job], env)
        assert run.finish() == 0, run.output()
        assert 'RESTORED saved by the main node RESUMED 1' in run.stdout
        return run

    worker = node('1')
    assert sorted(str(p.relative_to(store)) for p in store.rglob('*')) == before
    assert worker.events('final_sync')[0]['main_node'] is False

    node('0')
    progress = json.loads((store / 'metrics' / 'progress.json').read_text())
    assert (progress['step'], progress['state']) == (7, 'succeeded')
    restored = stored_checkpoints(tmp_path).restore_newest(str(tmp_path / 'check'))
    assert restored['checkpoint'] == 'ckpt-000002'
    assert (tmp_path / 'check' / 'state.txt').read_text() == 'written by node 0'


def test_outlives_a_reader_of_its_output_that_goes_away(tmp_path):
    """Whoever reads the harness's output may stop reading (a local-mode runner stopped, a log pipe closed): the
    harness goes on supervising and draining the command's output, uploads the final checkpoint and exits with the
    command's status. Before, its first write failed with BrokenPipeError: the harness died, and the trainer it left
    blocked on a full pipe."""
    script = tmp_path / 'chatty.py'
    script.write_text(
        textwrap.dedent(
            """
            import os, time
            time.sleep(0.5)  # the reader has gone by now
            for i in range(5000):
                print('x' * 100, flush=True)  # 500 KB, far past a pipe's buffer
            with open(os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'model.bin'), 'wb') as f:
                f.write(b'w' * 1000)
            """
        )
    )
    env = base_env(tmp_path, closed_port_endpoint())
    process = subprocess.Popen(
        [PYTHON, '-m', 'trainyard_harness', '--', PYTHON, str(script)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    process.stderr.close()
    try:
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    uploaded = [p.relative_to(tmp_path / 'store') for p in (tmp_path / 'store').rglob('model.bin')]
    assert uploaded == [Path('checkpoints/ckpt-000001/model.bin')]


def test_ends_when_its_run_does_whatever_the_interpreter_has_left_to_tear_down(tmp_path):
    """Once the harness has logged `harness_exit`, its process ends with that code: the interpreter's own shutdown
    (collecting what is left, finalizers, the daemon threads' leftovers) is not run, so nothing there can keep the
    attempt RUNNING, and billed, after its work is done. A harness was seen in local mode alive after `harness_exit`,
    its one thread in the garbage collector. Here an object with a finalizer that blocks for ever is left, in a
    reference cycle, for the shutdown's collection to find (sitecustomize, which every interpreter imports at start)."""
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'sitecustomize.py').write_text(
        textwrap.dedent(
            """
            import threading

            class BlocksWhenCollected:
                def __del__(self):
                    threading.Event().wait()  # for ever

            left = BlocksWhenCollected()
            left.cycle = left
            del left
            import gc
            gc.disable()  # so that only the shutdown's own collection finds it
            """
        )
    )
    env = base_env(tmp_path, closed_port_endpoint())
    env['PYTHONPATH'] = f'{site}:{env["PYTHONPATH"]}'
    run = run_harness(['sh', '-c', 'exit 3'], env)
    assert run.finish() == 3
    assert [line for line in run.stdout + run.stderr if '"harness_exit"' in line]


def test_reports_a_harness_bug_as_python_does_and_exits_1(tmp_path):
    """An exception out of `main` (a bug in the harness) still ends the process at once: traceback, status 1."""
    code = 'import trainyard_harness.main as m\ndef bug(argv=None): raise RuntimeError("a harness bug")\nm.main = bug\nm.entry_point()'
    env = base_env(tmp_path, closed_port_endpoint())
    done = subprocess.run([PYTHON, '-c', code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith('RuntimeError: a harness bug')
    assert 'Traceback (most recent call last)' in done.stderr


class OutputSink:
    """Where the harness passes a command's output through: what has arrived, awaitable."""

    def __init__(self):
        self.data = b''
        self.changed = threading.Condition()

    def write(self, data: bytes) -> None:
        with self.changed:
            self.data += data
            self.changed.notify_all()

    def flush(self) -> None:
        pass

    def wait_for(self, expected: bytes) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: expected in self.data, timeout=10)


class ParsedLines(OutputSink):
    """A recorder stand-in: the lines handed to the metrics parser."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def observe_line(self, line: str) -> None:
        with self.changed:
            self.lines.append(line)
            self.changed.notify_all()

    def wait_for_line(self, line: str) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: line in self.lines, timeout=10)


def pump_in_background(source, sink, parsed):
    import types

    from trainyard_harness.main import Harness

    harness = Harness(types.SimpleNamespace(), Logger(io.StringIO()))
    pump = threading.Thread(target=harness._pump, args=(source, sink, parsed), daemon=True)
    pump.start()
    return pump


def test_progress_redrawn_with_carriage_returns_is_passed_through_and_parsed_while_the_command_runs():
    # tqdm redraws its bar after a '\r' and ends the line only when done: read by lines, nothing would show (nor
    # would a step be parsed) before the command ended.
    read_end, write_end = os.pipe()
    sink, parsed = OutputSink(), ParsedLines()
    pump = pump_in_background(os.fdopen(read_end, 'rb'), sink, parsed)
    try:
        os.write(write_end, b'\r 10%|#   | step=1 loss=0.9\r 20%|##  | step=2 loss=0.5')
        assert sink.wait_for(b'step=2 loss=0.5'), 'the redrawn bar never reached the output'
        assert parsed.wait_for_line(' 10%|#   | step=1 loss=0.9'), parsed.lines
    finally:
        os.close(write_end)
    pump.join(10)
    assert sink.data == b'\r 10%|#   | step=1 loss=0.9\r 20%|##  | step=2 loss=0.5'
    assert parsed.lines[-1] == ' 20%|##  | step=2 loss=0.5', 'the last line is parsed at the end of the output'


def test_the_parser_never_gets_more_than_the_start_of_a_line_however_long_it_grows():
    from trainyard_harness.metrics import MAX_PARSED_LINE_CHARS

    read_end, write_end = os.pipe()
    sink, parsed = OutputSink(), ParsedLines()
    pump = pump_in_background(os.fdopen(read_end, 'rb'), sink, parsed)
    written = 0
    with os.fdopen(write_end, 'wb') as writer:
        for _ in range(64):
            writer.write(b'step=1, lr=0.001 ' * 1000)
            written += 17 * 1000
        writer.write(b'\nstep=2 loss=0.5\n')
    pump.join(10)

    assert len(sink.data) == written + len(b'\nstep=2 loss=0.5\n')
    assert max(len(line) for line in parsed.lines) <= MAX_PARSED_LINE_CHARS
    assert parsed.lines[0].startswith('step=1, lr=0.001 ') and 'step=2 loss=0.5' in parsed.lines


# Saves and exits 0 on SIGTERM. Its handler is installed before it opens the FIFO it is given, so a test that has
# opened the other end knows the stop will be taken.
SAVES_ON_SIGTERM = """
import os, signal, sys
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']

def save(*_):
    open(os.path.join(directory, 'ckpt.bin'), 'wb').write(b'final weights')
    sys.exit(0)

signal.signal(signal.SIGTERM, save)
open(sys.argv[1]).read()
while True:
    signal.pause()
"""


def test_the_final_checkpoint_sync_does_not_wait_for_a_metrics_upload_in_flight(tmp_path, monkeypatch):
    # A metrics upload (or nvidia-smi, up to 10 s) still running when the command ends must not hold up the final
    # checkpoint sync: at a stop, that sync has what is left of the container's 110 s.
    from trainyard_harness import main as harness_main
    from trainyard_harness.settings import load_settings

    monkeypatch.setattr(harness_main, 'become_subreaper', lambda: False)  # the test process stays an ordinary parent
    upload_started, upload_released, upload_done = threading.Event(), threading.Event(), threading.Event()
    put_bytes = FileStorage.put_bytes

    def slow_metrics_upload(storage, data, key):
        if key == 'metrics.jsonl' and not upload_started.is_set():
            upload_started.set()
            upload_released.wait(10)
            put_bytes(storage, data, key)
            upload_done.set()
            return
        put_bytes(storage, data, key)

    monkeypatch.setattr(FileStorage, 'put_bytes', slow_metrics_upload)
    synced_during_the_upload: list[bool] = []

    class ReleasingLogger(Logger):
        def info(self, event, **fields):
            super().info(event, **fields)
            if event == 'final_sync':
                synced_during_the_upload.append(fields['uploaded'] and not upload_done.is_set())
                upload_released.set()

    fifo = tmp_path / 'ready'
    os.mkfifo(fifo)
    trainer = tmp_path / 'trainer.py'
    trainer.write_text(SAVES_ON_SIGTERM)
    settings = load_settings(base_env(tmp_path, closed_port_endpoint()), [PYTHON, str(trainer), str(fifo)])
    log_stream = io.StringIO()
    harness = harness_main.Harness(settings, ReleasingLogger(log_stream))

    def stop_once_the_upload_is_in_flight():
        assert upload_started.wait(20)
        with open(fifo, 'w'):
            pass  # returns once the trainer has opened its end: its handler is installed
        harness.request_stop('test')

    stopper = threading.Thread(target=stop_once_the_upload_is_in_flight, daemon=True)
    stopper.start()
    code = harness.run()
    stopper.join(10)

    assert code == 75, log_stream.getvalue()
    assert synced_during_the_upload == [True], log_stream.getvalue()
    assert upload_done.is_set(), 'the metrics thread was waited for before the exit'
    records = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    phases = next(r for r in records if r['event'] == 'stop_phases')
    parts = ('request_to_signal_s', 'signal_to_exit_s', 'wind_down_s', 'final_sync_s', 'final_metrics_s')
    assert sum(phases[part] for part in parts) == pytest.approx(phases['total_s'], abs=0.01)
    assert records[-1]['event'] == 'harness_exit'


def test_a_failure_reading_the_metrics_file_never_keeps_the_final_sync_from_running(tmp_path, monkeypatch):
    # The harness reads the metrics file's last lines itself, just before the final sync: whatever that raises (a line
    # json cannot take once did) is logged, and the final checkpoint is still uploaded.
    from trainyard_harness import main as harness_main
    from trainyard_harness.metrics import MetricsFileTail
    from trainyard_harness.settings import load_settings

    monkeypatch.setattr(harness_main, 'become_subreaper', lambda: False)  # the test process stays an ordinary parent

    def broken_poll(_tail):
        raise RecursionError('maximum recursion depth exceeded while decoding a JSON array from a unicode string')

    monkeypatch.setattr(MetricsFileTail, 'poll', broken_poll)
    trainer = script(
        tmp_path,
        """
        import os
        open(os.path.join(os.environ['TRAINYARD_CHECKPOINT_DIR'], 'final_model.bin'), 'wb').write(b'weights')
        """,
    )
    env = base_env(tmp_path, closed_port_endpoint(), TRAINYARD_METRICS_FILE=str(tmp_path / 'metrics.jsonl'))
    out = io.StringIO()

    code = harness_main.Harness(load_settings(env, [PYTHON, trainer]), Logger(out)).run()

    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 0, out.getvalue()
    [failed] = [r for r in records if r['event'] == 'metrics_file_read_failed']
    assert failed['error'].startswith('RecursionError')
    assert [r['uploaded'] for r in records if r['event'] == 'final_sync'] == [True]
    assert stored_checkpoints(tmp_path).complete_indices() == [1]


def test_a_harness_log_line_never_shares_a_line_with_the_commands_unfinished_stderr(tmp_path):
    # A progress bar (tqdm writes to stderr) redraws after a '\r' and ends its line only when done: the harness's next
    # event starts a line of its own, so that readers taking the log line by line still see it.
    script = tmp_path / 'bar.py'
    script.write_text(
        textwrap.dedent(
            """
            import signal, sys, time
            signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
            print('ready', flush=True)
            sys.stderr.write('\\r  5%|#         | 5/100')
            sys.stderr.flush()
            while True:
                time.sleep(0.1)
            """
        )
    )
    run = run_harness([PYTHON, str(script)], base_env(tmp_path, closed_port_endpoint()))
    run.wait_for_stdout('^ready$')
    threading.Event().wait(0.5)  # the bar reaches the harness's stderr before the stop
    run.signal(signal.SIGTERM)

    assert run.finish() == 75, run.output()
    harness_lines = [line for line in run.stderr if '"source": "trainyard-harness"' in line]
    assert harness_lines and all(line.startswith('{') for line in harness_lines), run.output()
    assert any(line.endswith('5/100') for line in run.stderr), run.output()
