"""A checkpoint the command cannot resume from is retried, then set aside for the one before (exit 76)."""

import io
import json
import signal
import textwrap

import pytest
from conftest import PYTHON, base_env, closed_port_endpoint, run_harness

from trainyard_harness.checkpoints import CheckpointStore
from trainyard_harness.logs import Logger
from trainyard_harness.storage import FileStorage

# Loads state.json if there is one (exit 3 when it cannot), reports two steps, saves, exits 0; with
# `crash-after-a-step` it reports one step and exits 4; with `crash-silently-later` it loads, then exits 5 a second
# later without a word; with `writes-config-first` it first writes its run config beside the checkpoint.
RESUMER = """
import json, os, sys, time
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
path = os.path.join(directory, 'state.json')
if 'writes-config-first' in sys.argv:
    os.makedirs(directory, exist_ok=True)
    json.dump({'argv': sys.argv[1:]}, open(os.path.join(directory, 'config.json'), 'w'))
    time.sleep(0.5)  # past the settle time: the background sync sees the new file before the load fails
step = 0
if os.path.exists(path):
    try:
        step = json.load(open(path))['step']
    except ValueError:
        print('cannot load', path, file=sys.stderr)
        sys.exit(3)
if 'crash-silently-later' in sys.argv:
    time.sleep(1.0)
    sys.exit(5)
if 'crash-after-a-step' in sys.argv:
    print(f'step={step + 1} loss=0.5')
    sys.exit(4)
for done in (step + 1, step + 2):
    print(f'step={done} loss=0.5')
os.makedirs(directory, exist_ok=True)
json.dump({'step': step + 2}, open(path, 'w'))
"""


@pytest.fixture
def resumer(tmp_path):
    path = tmp_path / 'resumer.py'
    path.write_text(textwrap.dedent(RESUMER))
    return str(path)


def script_file(tmp_path, body: str) -> str:
    path = tmp_path / 'script.py'
    path.write_text(textwrap.dedent(body))
    return str(path)


def seed(tmp_path, *states: bytes | dict[str, bytes]) -> CheckpointStore:
    """Stores one checkpoint per state (ckpt-000001 first): state.json with those bytes, or the files named."""
    store = CheckpointStore(FileStorage(f'file://{tmp_path}/store/checkpoints'), 3, Logger(io.StringIO()))
    for index, state in enumerate(states, start=1):
        local = tmp_path / f'seed{index}'
        local.mkdir()
        for name, body in (state if isinstance(state, dict) else {'state.json': state}).items():
            (local / name).write_bytes(body)
        assert store.upload_snapshot(str(local), 'job-test', 1, None)['checkpoint'] == f'ckpt-{index:06d}'
    return store


def attempt(tmp_path, number: int, command: list[str], **overrides: str):
    env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_ATTEMPT=str(number),
        TRAINYARD_CHECKPOINT_DIR=str(tmp_path / f'container{number}'),
        **overrides,
    )
    run = run_harness(command, env)
    run.code = run.finish()
    return run


def test_an_unloadable_checkpoint_is_retried_once_then_set_aside_and_the_one_before_restored(tmp_path, resumer):
    store = seed(tmp_path, b'{"step": 2}', b'garbage: a script wrote this')

    second = attempt(tmp_path, 2, [PYTHON, resumer])
    assert second.code == 76, second.output()
    failed = second.events('resume_failed')[0]
    assert (failed['checkpoint'], failed['exit_code'], failed['resume_failures'], failed['set_aside'], failed['retry']) == (
        'ckpt-000002',
        3,
        1,
        False,
        True,
    )
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    assert (progress['state'], progress['exit_code']) == ('failed', 76)

    third = attempt(tmp_path, 3, [PYTHON, resumer])
    assert third.code == 76, third.output()
    assert third.events('checkpoint_restored')[0]['checkpoint'] == 'ckpt-000002', 'one failure may be bad luck'
    failed = third.events('resume_failed')[0]
    assert (failed['resume_failures'], failed['set_aside'], failed['retry']) == (2, True, True)

    fourth = attempt(tmp_path, 4, [PYTHON, resumer])
    assert fourth.code == 0, fourth.output()
    restored = fourth.events('checkpoint_restored')[0]
    assert (restored['checkpoint'], restored['set_aside_newer']) == ('ckpt-000001', ['ckpt-000002'])
    assert fourth.stdout[:2] == ['step=3 loss=0.5', 'step=4 loss=0.5']
    assert not fourth.events('resume_failed')
    assert store.restore_newest(str(tmp_path / 'check'))['checkpoint'] == 'ckpt-000003'
    assert json.loads((tmp_path / 'check' / 'state.json').read_text()) == {'step': 4}


# The run config the resumer writes with `writes-config-first` when resumed, byte for byte (json.dump's defaults): what
# a checkpoint saved by a resumed attempt holds.
RESUMER_CONFIG = json.dumps({'argv': ['writes-config-first', '--init_from=resume']}).encode()


@pytest.mark.parametrize('config_in_checkpoints', [False, True], ids=['a new file', 'a restored file written again'])
def test_a_file_written_beside_an_unloadable_checkpoint_is_not_uploaded_as_progress(
    tmp_path, resumer, config_in_checkpoints
):
    # Uploaded, the config beside the garbage would be a new checkpoint each attempt: no fallback, and after three
    # attempts the good checkpoint pruned (keep 3). When the script wrote its config in the attempts that saved the
    # checkpoints too (resumed attempts, as this one), the config comes back with each restore, and writing it again
    # (the same bytes) saves nothing.
    states = [{'state.json': b'{"step": 2}'}, {'state.json': b'garbage: a script wrote this'}]
    if config_in_checkpoints:
        states = [{**state, 'config.json': RESUMER_CONFIG} for state in states]
    store = seed(tmp_path, *states)
    command = [PYTHON, resumer, 'writes-config-first']
    codes = [attempt(tmp_path, number, command, TRAINYARD_SETTLE_SECONDS='0.1').code for number in (2, 3)]
    assert codes == [76, 76]
    assert sorted(store.folders()) == [1, 2], 'the failed attempts uploaded nothing'

    fourth = attempt(tmp_path, 4, command, TRAINYARD_SETTLE_SECONDS='0.1')
    assert fourth.code == 0, fourth.output()
    assert fourth.events('checkpoint_restored')[0]['checkpoint'] == 'ckpt-000001'
    assert store.restore_newest(str(tmp_path / 'check'))['checkpoint'] == 'ckpt-000003'
    assert json.loads((tmp_path / 'check' / 'state.json').read_text()) == {'step': 4}


# Writes its run config beside the checkpoint, then takes its time before loading it (building the model, the data).
SLOW_LOADER = """
import json, os, sys, time
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
json.dump({'argv': sys.argv[1:]}, open(os.path.join(directory, 'config.json'), 'w'))
time.sleep(30)
json.load(open(os.path.join(directory, 'state.json')))
"""


def test_a_stop_before_the_restored_checkpoint_loaded_uploads_it_with_its_resume_failures(tmp_path):
    # The stop uploads what is there (a save with a new name would be lost otherwise); nothing was seen to load the
    # restored checkpoint, so the copy has failed as often as it: a stop never resets an unloadable one's count.
    store = seed(tmp_path, b'{"step": 2}', b'garbage: a script wrote this')
    store.record_resume_failure('ckpt-000002', 2, 3)
    env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_ATTEMPT='3',
        TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'container3'),
        TRAINYARD_SETTLE_SECONDS='0.1',
    )
    run = run_harness([PYTHON, script_file(tmp_path, SLOW_LOADER)], env)
    run.wait_for_event('checkpoint_upload_held')
    run.signal(signal.SIGTERM)
    assert run.finish() == 75, run.output()

    uploaded = run.events('checkpoint_uploaded')
    assert [(e['checkpoint'], e['inherited_resume_failures'], e['from_checkpoint']) for e in uploaded] == [
        ('ckpt-000003', 1, 'ckpt-000002')
    ]
    folders = store.folders()
    assert (folders[3].resume_failures, sorted(folders)) == (1, [1, 2, 3])
    # One more failure on the copy sets it aside, as it would have the original.
    assert store.record_resume_failure('ckpt-000003', 4, 3)[0].set_aside


# Loads state.json, then, without a line the step patterns match, writes what it trained under a name the restored
# checkpoint does not have; with `then-fails` it then exits 1, with `says-saved` it first writes the done file SAVED.
FINISHER = """
import json, os, sys
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
json.load(open(os.path.join(directory, 'state.json')))
print('epoch 3/3 done, val acc 0.91')
open(os.path.join(directory, 'final_model.bin'), 'wb').write(b'trained weights')
if 'says-saved' in sys.argv:
    open(os.path.join(directory, 'SAVED'), 'w').close()
if 'then-fails' in sys.argv:
    sys.exit(1)
"""


def test_a_resumed_command_that_finishes_at_once_without_a_step_line_has_what_it_wrote_uploaded(tmp_path):
    store = seed(tmp_path, b'{"step": 2}')
    finisher = script_file(tmp_path, FINISHER)

    run = attempt(tmp_path, 2, [PYTHON, finisher])

    assert run.code == 0, run.output()
    assert sorted(store.folders()) == [1, 2], 'the finished model was never uploaded'
    store.restore_newest(str(tmp_path / 'check'))
    assert (tmp_path / 'check' / 'final_model.bin').read_bytes() == b'trained weights'


def test_a_save_the_done_file_calls_finished_is_uploaded_and_is_progress_though_the_command_then_fails(tmp_path):
    store = seed(tmp_path, b'{"step": 2}')
    finisher = script_file(tmp_path, FINISHER)

    run = attempt(tmp_path, 2, [PYTHON, finisher, 'says-saved', 'then-fails'], TRAINYARD_CHECKPOINT_DONE_FILE='SAVED')

    assert run.code == 1, 'it saved after loading: its failure is its own\n' + run.output()
    assert not run.events('resume_failed')
    assert sorted(store.folders()) == [1, 2]
    store.restore_newest(str(tmp_path / 'check'))
    assert (tmp_path / 'check' / 'final_model.bin').read_bytes() == b'trained weights'


def test_a_new_file_without_the_done_file_is_still_held_when_the_command_fails(tmp_path):
    # Not finished by the trainer's word, a new file may be a run config written before the load failed.
    store = seed(tmp_path, b'{"step": 2}')
    finisher = script_file(tmp_path, FINISHER)

    run = attempt(tmp_path, 2, [PYTHON, finisher, 'then-fails'])

    assert run.code == 76, run.output()
    assert sorted(store.folders()) == [1]


@pytest.mark.parametrize(
    ('case', 'states', 'extra', 'expected'),
    [
        ('it reported a step after the restore', (b'{"step": 2}',), ['crash-after-a-step'], 4),
        ('nothing was restored', (), [], None),
    ],
)
def test_a_failure_that_cannot_be_the_checkpoint_keeps_the_commands_code_and_marks_nothing(
    tmp_path, resumer, case, states, extra, expected
):
    seed(tmp_path, *states)
    if not states:
        (tmp_path / 'container2').mkdir()
        (tmp_path / 'container2' / 'state.json').write_text('left by the image, not by Trainyard')
        expected = 3
    run = attempt(tmp_path, 2, [PYTHON, resumer, *extra])

    assert run.code == expected, case + '\n' + run.output()
    assert not run.events('resume_failed'), case
    assert not list((tmp_path / 'store' / 'checkpoints').rglob('RESUME_FAILED-*')), case


def test_a_silent_failure_after_the_window_is_the_commands_own_and_marks_nothing(tmp_path, resumer):
    # It loaded the checkpoint and failed later without a step line or a new checkpoint (a script whose output the
    # step patterns miss, an NCCL error hours in): no marker, so two such failures never set a good checkpoint aside.
    seed(tmp_path, b'{"step": 2}')
    run = attempt(tmp_path, 2, [PYTHON, resumer, 'crash-silently-later'], TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS='0.5')

    assert run.code == 5, run.output()
    assert not run.events('resume_failed')
    assert run.events('resume_not_judged')[0]['checkpoint'] == 'ckpt-000001'
    assert not list((tmp_path / 'store' / 'checkpoints').rglob('RESUME_FAILED-*'))

    within = attempt(tmp_path, 3, [PYTHON, resumer, 'crash-silently-later'])
    assert within.code == 76, 'inside the default window the same failure may be the checkpoint\'s\n' + within.output()


def test_with_every_checkpoint_set_aside_the_newest_is_restored_and_the_commands_code_stands(tmp_path, resumer):
    seed(tmp_path, b'not json either', b'garbage')
    codes = [attempt(tmp_path, number, [PYTHON, resumer]).code for number in (2, 3, 4, 5)]
    # ckpt-2 twice, then ckpt-1 twice; then none is left to fall back to.
    assert codes == [76, 76, 76, 3]

    last = attempt(tmp_path, 6, [PYTHON, resumer])
    assert last.code == 3, last.output()
    assert last.events('checkpoint_restored')[0]['checkpoint'] == 'ckpt-000002', 'never start again from nothing'
    failed = last.events('resume_failed')[0]
    assert (failed['resume_failures'], failed['set_aside'], failed['retry']) == (3, True, False)


# Keeps its own metrics file beside its state, so the file comes back with every checkpoint. Exits 1 (a traceback) when
# state.json does not load.
METRICS_KEEPER = """
import json, os
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
step = json.load(open(os.path.join(directory, 'state.json')))['step']
with open(os.path.join(directory, 'train-metrics.jsonl'), 'a') as f:
    for done in (step + 1, step + 2):
        f.write(json.dumps({'step': done, 'loss': 1.0 / done}) + '\\n')
json.dump({'step': step + 2}, open(os.path.join(directory, 'state.json'), 'w'))
"""


@pytest.mark.parametrize('state', [b'{"step": 2}', b'garbage'], ids=['loads', 'does-not-load'])
def test_a_metrics_file_restored_with_the_checkpoint_is_neither_progress_nor_counted_twice(tmp_path, state):
    earlier = [{'step': 1, 'loss': 1.0}, {'step': 2, 'loss': 0.5}]
    seed(tmp_path, {'state.json': state, 'train-metrics.jsonl': b''.join(json.dumps(s).encode() + b'\n' for s in earlier)})
    (tmp_path / 'store' / 'metrics').mkdir(parents=True)
    (tmp_path / 'store' / 'metrics' / 'metrics.jsonl').write_text(
        ''.join(json.dumps({'time': '2026-11-22T00:00:00.000Z', 'attempt': 1, **s}) + '\n' for s in earlier)
    )
    keeper = tmp_path / 'keeper.py'
    keeper.write_text(textwrap.dedent(METRICS_KEEPER))

    run = attempt(tmp_path, 2, [PYTHON, str(keeper)], TRAINYARD_METRICS_FILE=str(tmp_path / 'container2' / 'train-metrics.jsonl'))

    samples = [json.loads(line) for line in (tmp_path / 'store' / 'metrics' / 'metrics.jsonl').read_text().splitlines()]
    progress = json.loads((tmp_path / 'store' / 'metrics' / 'progress.json').read_text())
    if state == b'garbage':
        # The restored steps 1 and 2 are no progress of this attempt's, so the failure is the checkpoint's.
        assert run.code == 76, run.output()
        assert [(s['attempt'], s['step']) for s in samples] == [(1, 1), (1, 2)]
        assert progress['step'] is None
    else:
        assert run.code == 0, run.output()
        assert [(s['attempt'], s['step']) for s in samples] == [(1, 1), (1, 2), (2, 3), (2, 4)]
        assert (progress['step'], progress['loss']) == (4, 0.25)
    skipped = run.events('metrics_file_earlier_lines_skipped')[0]['bytes']
    assert skipped == len((tmp_path / 'seed1' / 'train-metrics.jsonl').read_bytes())
