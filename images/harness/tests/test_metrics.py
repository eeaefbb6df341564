"""Progress parsing (nanoGPT and generic formats, user patterns), metrics file tailing, metrics/progress upload."""

import io
import json
import re
import threading
from datetime import datetime, timedelta, timezone

import pytest

from trainyard_harness import metrics
from trainyard_harness.logs import Logger
from trainyard_harness.metrics import (
    DEFAULT_PATTERNS,
    MAX_PARSED_LINE_CHARS,
    MetricsFileTail,
    MetricsLoop,
    MetricsRecorder,
    parse_line,
)
from trainyard_harness.storage import FileStorage, StorageError


@pytest.mark.parametrize(
    ('line', 'expected'),
    [
        (
            'iter 120: loss 2.4012, time 35.21ms, mfu 12.34%',
            {'step': 120, 'loss': 2.4012, 'iter_ms': 35.21, 'mfu_pct': 12.34},
        ),
        ('iter 0: loss 4.2000, time 9000.00ms, mfu -100.00%', {'step': 0, 'loss': 4.2, 'iter_ms': 9000.0, 'mfu_pct': -100.0}),
        ('step 250: train loss 1.9876, val loss 2.0123', {'step': 250, 'train_loss': 1.9876, 'val_loss': 2.0123}),
        ('step=42 loss=0.5', {'step': 42, 'loss': 0.5}),
        ('Step: 7, Loss: 1e-3, val_loss: 2.5e-1, tokens_per_sec: 1200', {'step': 7, 'loss': 0.001, 'val_loss': 0.25, 'tokens_per_s': 1200}),
        ('epoch 3 done', None),
        ('loss=0.5 without a step', None),
    ],
)
def test_default_patterns_parse_nanogpt_and_generic_lines(line, expected):
    assert parse_line(line, DEFAULT_PATTERNS) == expected


def test_a_number_too_long_for_an_int_drops_the_step_instead_of_killing_the_reader():
    # 5,000 digits: past Python's limit on converting text to int (a ValueError that would end the output reader).
    fields = parse_line(f'step={"1" * 5000} loss=0.5', DEFAULT_PATTERNS)
    assert fields == {'loss': 0.5}
    # A user pattern that reads an infinite step (a float) drops it the same way.
    custom = re.compile(r'it (?P<step>\S+) loss (?P<loss>\S+)')
    assert parse_line('it 1e999 loss 0.5', [custom]) == {'loss': 0.5}
    assert parse_line('it inf loss 0.5', [custom]) == {'loss': 0.5}


def test_user_patterns_are_tried_before_the_defaults():
    custom = re.compile(r'iter (?P<step>\d+): loss (?P<custom_loss>[\d.]+)')
    fields = parse_line('iter 5: loss 1.5, time 1ms, mfu 1%', [custom, *DEFAULT_PATTERNS])
    assert fields == {'step': 5, 'custom_loss': 1.5}


def recorder(tmp_path, total_steps=None, attempt=1, **options):
    storage = FileStorage(f'file://{tmp_path}/metrics')
    return storage, MetricsRecorder(storage, 'job-7', attempt, total_steps, [], Logger(io.StringIO()), **options)


def test_uploads_metrics_jsonl_and_progress_json(tmp_path):
    storage, rec = recorder(tmp_path, total_steps=1000)
    rec.resumed_from_step = 100
    rec.observe_line('iter 110: loss 2.5000, time 10.00ms, mfu 1.00%')
    rec.observe_line('not a metric')
    rec.observe_line('step 120: train loss 2.2500, val loss 2.4000')
    rec.upload()

    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert [(s['step'], s.get('loss'), s.get('val_loss'), s['attempt']) for s in samples] == [
        (110, 2.5, None, 1),
        (120, None, 2.4, 1),
    ]
    assert all(s['time'].endswith('Z') for s in samples)
    progress = json.loads(storage.get_bytes('progress.json'))
    assert {k: progress[k] for k in ('job_id', 'attempt', 'step', 'total_steps', 'loss', 'resumed_from_step')} == {
        'job_id': 'job-7',
        'attempt': 1,
        'step': 120,
        'total_steps': 1000,
        'loss': 2.25,
        'resumed_from_step': 100,
    }
    assert progress['updated_at'].endswith('Z')


def test_a_later_attempt_appends_to_earlier_attempts_metrics(tmp_path):
    storage, first = recorder(tmp_path, attempt=1)
    first.observe_line('step=1 loss=3.0')
    first.upload()
    _, second = recorder(tmp_path, attempt=2)
    second.load_previous()
    second.observe_line('step=2 loss=2.0')
    second.upload()

    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert [(s['attempt'], s['step'], s['loss']) for s in samples] == [(1, 1, 3.0), (2, 2, 2.0)]


def test_gpu_readings_become_samples_and_decorate_later_ones(tmp_path):
    storage, rec = recorder(tmp_path)
    rec.observe_line('step=3 loss=1.0')
    rec.observe_gpu(87.5, 10240.0)
    rec.observe_line('step=4 loss=0.9')
    rec.upload()
    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert samples[1]['gpu_util'] == 87.5 and samples[1]['gpu_mem_mib'] == 10240.0 and samples[1]['step'] == 3
    assert samples[2]['gpu_util'] == 87.5 and samples[2]['step'] == 4


def test_a_scripts_own_time_and_attempt_fields_never_replace_the_harness_ones(tmp_path):
    storage, rec = recorder(tmp_path, attempt=3)
    rec.record({'time': 1732771234.5, 'attempt': 1, 'step': 5, 'loss': 0.7})
    rec.upload()
    sample = json.loads(storage.get_bytes('metrics.jsonl'))
    assert sample['attempt'] == 3
    assert re.fullmatch(r'\d{4}-\d{2}-\d{2}T[\d:.]+Z', sample['time'])
    assert sample['user_time'] == 1732771234.5 and sample['user_attempt'] == 1
    assert sample['step'] == 5 and rec.step == 5


@pytest.mark.parametrize('bad', [-1, True, 2**53], ids=['negative', 'a bool', 'past 2^53 - 1'])
def test_a_step_that_is_no_step_count_stays_in_its_sample_but_is_not_progress(tmp_path, bad):
    # The control plane refuses a progress.json whose step is not an integer from 0 to 2^53 - 1, and with it the spot
    # notice the harness saw (lambdas/domain/watch.ts harnessProgressSchema).
    storage, rec = recorder(tmp_path)
    rec.record({'step': 5, 'loss': 0.7})
    rec.record({'step': bad, 'loss': 0.6})
    rec.upload()
    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert [s['step'] for s in samples] == [5, bad]
    progress = json.loads(storage.get_bytes('progress.json'))
    assert (progress['step'], progress['loss'], rec.step) == (5, 0.6, 5)


def test_a_loss_too_large_for_a_float_is_written_as_null_and_the_reader_goes_on(tmp_path):
    # A user pattern reading a 400-digit integer: float() of it raises, which would end the thread reading the output.
    storage, rec = recorder(tmp_path)
    rec.record({'step': 3, 'loss': 10**400})
    rec.record({'step': 4, 'loss': 0.5})
    rec.upload()
    progress = json.loads(storage.get_bytes('progress.json'))
    assert (progress['step'], progress['loss']) == (4, 0.5)
    rec.record({'step': 5, 'loss': 10**400})
    rec.upload()
    assert json.loads(storage.get_bytes('progress.json'))['loss'] is None


def test_non_finite_losses_are_written_as_null(tmp_path):
    storage, rec = recorder(tmp_path)
    rec.observe_line('step=9 loss=nan')
    rec.upload()
    assert json.loads(storage.get_bytes('metrics.jsonl'))['loss'] is None


def test_non_finite_values_nested_in_a_metrics_file_line_are_written_as_null(tmp_path):
    # Python's json.dumps writes a NaN loss as the bare token NaN, which no JSON reader of the control plane takes.
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    nested = {'step': 5, 'losses': {'train': float('nan'), 'val': [1.5, float('inf')]}, 'loss': float('-inf')}
    path.write_text(json.dumps(nested) + '\n')
    tail.poll()
    rec.upload()

    def refuse(token):
        raise ValueError(f'not JSON: {token}')

    sample = json.loads(storage.get_bytes('metrics.jsonl'), parse_constant=refuse)
    assert (sample['step'], sample['losses'], sample['loss']) == (5, {'train': None, 'val': [1.5, None]}, None)


def test_a_metrics_file_line_too_long_to_hold_is_skipped_and_the_lines_after_it_are_read(tmp_path, monkeypatch):
    monkeypatch.setattr(MetricsFileTail, 'MAX_LINE_BYTES', 1024)
    monkeypatch.setattr(MetricsFileTail, 'READ_CHUNK_BYTES', 300)
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    log_stream = io.StringIO()
    tail = MetricsFileTail(str(path), rec, Logger(log_stream))
    # A script writing without newlines: what the harness holds of it stays under the limit, poll after poll.
    path.write_text('{"step": 1, "loss": 2.0}\n' + '[' + '1, ' * 2000)
    tail.poll()
    assert len(tail.partial) <= 1024
    with path.open('a') as handle:
        handle.write('1]\n{"step": 2, "loss": 1.5}\n')
    tail.poll()
    rec.upload()

    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert [(s['step'], s['loss']) for s in samples] == [(1, 2.0), (2, 1.5)]
    skipped = [json.loads(line) for line in log_stream.getvalue().splitlines()]
    assert [(r['event'], r['error']) for r in skipped] == [
        ('metrics_file_bad_line', 'a line longer than 1024 bytes: skipped')
    ]


def test_a_metrics_file_grown_by_more_than_a_read_is_read_whole_in_one_poll(tmp_path, monkeypatch):
    monkeypatch.setattr(MetricsFileTail, 'READ_CHUNK_BYTES', 64)
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    path.write_text(lines(*range(1, 51)))
    tail.poll()
    assert recorded_steps(storage, rec) == list(range(1, 51))


def test_metrics_file_lines_are_recorded_once_and_partial_lines_wait(tmp_path):
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    tail.poll()  # file not there yet
    path.write_text('{"step": 1, "loss": 3.5, "tokens_per_s": 100}\n{"step": 2, ')
    tail.poll()
    with path.open('a') as handle:
        handle.write('"loss": 3.0}\nnot json\n')
    tail.poll()
    tail.poll()
    rec.upload()
    samples = [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]
    assert [(s['step'], s['loss']) for s in samples] == [(1, 3.5), (2, 3.0)]
    assert samples[0]['tokens_per_s'] == 100
    assert rec.step == 2 and rec.loss == 3.0


def lines(*steps: int) -> str:
    return ''.join(json.dumps({'step': step, 'loss': 1.0 / step}) + '\n' for step in steps)


def recorded_steps(storage, rec) -> list[int]:
    rec.upload(force=True)
    return [json.loads(line)['step'] for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]


def test_a_metrics_file_tail_skips_what_the_file_held_before_the_command_started(tmp_path):
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    assert tail.skip_existing() == 0, 'no file: nothing to skip'
    path.write_text(lines(*range(1, 40)))
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    assert tail.skip_existing() == path.stat().st_size
    tail.poll()
    assert rec.step is None
    with path.open('a') as handle:
        handle.write(lines(40, 41))
    tail.poll()
    assert recorded_steps(storage, rec) == [40, 41]


@pytest.mark.parametrize(
    ('case', 'rewrite', 'expected'),
    [
        ('truncated and rewritten shorter', lines(100), [100]),
        # Grown past the old end between two polls: the size alone cannot tell, the bytes before the offset do.
        ('truncated and rewritten longer', lines(*range(100, 140)), list(range(100, 140))),
        ('rewritten whole with the same lines first', lines(1, 2, 3, 4), [4]),
    ],
)
def test_a_metrics_file_the_script_rewrites_is_read_again_only_where_it_changed(tmp_path, case, rewrite, expected):
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'user-metrics.jsonl'
    path.write_text(lines(1, 2, 3))
    tail = MetricsFileTail(str(path), rec, Logger(io.StringIO()))
    tail.poll()
    path.write_text(rewrite)
    tail.poll()
    assert recorded_steps(storage, rec) == [1, 2, 3, *expected], case


def test_a_line_is_parsed_from_its_first_characters_only(tmp_path, monkeypatch):
    # A progress bar that never ends its line would otherwise be scanned once per `step=` in it, for seconds.
    seen: list[int] = []

    def measuring(line, patterns):
        seen.append(len(line))
        return parse_line(line, patterns)

    monkeypatch.setattr(metrics, 'parse_line', measuring)
    _storage, rec = recorder(tmp_path)

    rec.observe_line('step=5 loss=0.25 ' + 'step=6, lr=0.001 ' * 20000)

    assert seen == [MAX_PARSED_LINE_CHARS]
    assert (rec.step, rec.loss) == (5, 0.25)


def test_a_metrics_file_that_cannot_be_read_is_reported_once_and_read_once_it_can_be(tmp_path):
    path = tmp_path / 'train-metrics.jsonl'
    path.mkdir()  # the script made a directory of that name
    out = io.StringIO()
    _storage, rec = recorder(tmp_path)
    tail = MetricsFileTail(str(path), rec, Logger(out))

    assert tail.skip_existing() == 0
    tail.poll()
    tail.poll()
    path.rmdir()
    path.write_text('{"step": 3}\n')
    tail.poll()

    assert rec.step == 3
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e['event'], e['path']) for e in events] == [('metrics_file_unreadable', str(path))]


def test_a_line_nested_too_deeply_to_parse_is_skipped_and_the_lines_after_it_are_read(tmp_path):
    # Legal JSON, but json.loads raises RecursionError (not a ValueError) on it: it once killed the metrics thread, and
    # read by the harness just before the final sync, kept that sync from running.
    path = tmp_path / 'train-metrics.jsonl'
    out = io.StringIO()
    storage, rec = recorder(tmp_path)
    tail = MetricsFileTail(str(path), rec, Logger(out))
    deep = '[' * 5000 + ']' * 5000
    path.write_text(lines(1) + deep + '\n' + '{"nested": ' + deep + '}\n' + lines(2))

    tail.poll()

    assert recorded_steps(storage, rec) == [1, 2]
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e['event'] for e in events] == ['metrics_file_bad_line'] * 2
    assert all(e['error'].startswith('RecursionError') for e in events)


class NoPause(threading.Event):
    """The metrics loop's stop event, without the half second between rounds."""

    def wait(self, timeout=None):
        return self.is_set()


def test_the_metrics_loop_logs_a_failing_round_once_and_goes_on(tmp_path):
    storage, rec = recorder(tmp_path)
    path = tmp_path / 'train-metrics.jsonl'
    path.write_text(lines(7))
    out = io.StringIO()
    loop = MetricsLoop(rec, 3600.0, Logger(out), MetricsFileTail(str(path), rec, Logger(out)), gpu_interval=1e9)
    loop.stopped = NoPause()
    polls = []
    poll = loop.tail.poll

    def failing_twice():
        polls.append(1)
        if len(polls) <= 2:
            raise RuntimeError('a bug in reading the file')
        poll()
        loop.stopped.set()

    loop.tail.poll = failing_twice
    loop._run()  # in this thread: it returns once it is stopped, and raises if the failures end it

    assert len(polls) == 3 and rec.step == 7
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e['event'], e['step'], e['error']) for e in events] == [
        ('metrics_loop_failed', 'read_file', 'RuntimeError: a bug in reading the file')
    ]
    assert recorded_steps(storage, rec) == [7]


@pytest.fixture
def ticking_clock(monkeypatch):
    """Each sample one second after the one before, so their times tell them apart and tell their order."""
    moments = iter(datetime(2025, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=n) for n in range(10**7))
    monkeypatch.setattr(metrics, '_now', lambda: next(moments))


def uploaded(storage, rec) -> list[dict]:
    rec.upload(force=True)
    return [json.loads(line) for line in storage.get_bytes('metrics.jsonl').decode().splitlines()]


def test_the_default_cap_keeps_twenty_thousand_samples():
    assert metrics.MAX_METRIC_LINES == 20_000


def test_the_history_never_holds_more_samples_than_the_cap(tmp_path, ticking_clock):
    storage, rec = recorder(tmp_path, max_lines=40)
    sizes = []

    for step in range(1000):
        rec.record({'step': step})
        sizes.append(len(rec.lines))

    assert max(sizes) == 40
    assert len(uploaded(storage, rec)) <= 40


def test_the_newest_half_of_the_cap_is_kept_whole_and_in_order(tmp_path, ticking_clock):
    storage, rec = recorder(tmp_path, max_lines=40)

    for step in range(1000):
        rec.record({'step': step, 'loss': 1.0})

    assert [s['step'] for s in uploaded(storage, rec)][-20:] == list(range(980, 1000))


def test_thinned_samples_stay_in_time_order_and_cover_the_whole_run_evenly(tmp_path, ticking_clock):
    storage, rec = recorder(tmp_path, max_lines=40)

    for step in range(1000):
        rec.record({'step': step})

    samples = uploaded(storage, rec)
    times = [s['time'] for s in samples]
    assert times == sorted(times) and len(set(times)) == len(times)
    steps = [s['step'] for s in samples]
    whole_from = len(steps) - 1
    while steps[whole_from - 1] == steps[whole_from] - 1:
        whole_from -= 1
    older, newest = steps[:whole_from], steps[whole_from:]
    assert len(newest) >= 20 and newest[-1] == 999
    assert older[0] == 0, 'the run keeps its first sample'
    # One sample per time bucket (2^k ms wide; samples 1 s apart): gaps differ by at most the rounding, from the first
    # sample to the full-resolution window, so no stretch of the run is thinned more than another.
    points = [*older, newest[0]]
    gaps = [b - a for a, b in zip(points, points[1:])]
    assert max(gaps) - min(gaps[1:-1]) <= 1, f'uneven: {older} then {newest[0]}'


def test_each_attempts_first_and_last_samples_survive_thinning(tmp_path, ticking_clock):
    storage, rec = recorder(tmp_path, attempt=1, max_lines=40)
    for step in range(500):
        rec.record({'step': step})
    for attempt, first_step in ((2, 300), (3, 450)):
        rec.upload(force=True)
        _, rec = recorder(tmp_path, attempt=attempt, max_lines=40)
        rec.load_previous()
        for step in range(first_step, first_step + 500):
            rec.record({'step': step})

    samples = uploaded(storage, rec)

    by_attempt = {a: [s['step'] for s in samples if s['attempt'] == a] for a in (1, 2, 3)}
    assert [(steps[0], steps[-1]) for steps in by_attempt.values()] == [(0, 499), (300, 799), (450, 949)]
    assert [s['attempt'] for s in samples] == sorted(s['attempt'] for s in samples)
    assert [s['time'] for s in samples] == sorted(s['time'] for s in samples)
    assert len(samples) <= 40


def test_an_oversized_earlier_file_is_thinned_as_it_is_read(tmp_path):
    storage, _ = recorder(tmp_path)
    start = datetime(2025, 1, 1, tzinfo=timezone.utc)
    rows = [
        json.dumps({'time': (start + timedelta(seconds=n)).isoformat().replace('+00:00', 'Z'), 'attempt': 1, 'step': n})
        for n in range(5000)
    ]
    rows[2500] = 'torn {"time": '
    storage.put_bytes(('\n'.join(rows) + '\n').encode(), 'metrics.jsonl')
    _, rec = recorder(tmp_path, attempt=2, max_lines=40)

    rec.load_previous()
    rec.record({'step': 5000})

    assert len(rec.lines) <= 40
    samples = [json.loads(line) for line in rec.lines if not line.startswith('torn')]
    steps = [s['step'] for s in samples]
    assert steps[0] == 0 and steps[-21:] == list(range(4980, 5001))
    assert steps == sorted(steps)
    assert rec.thinning_passes <= 1 + (5000 - 40) // 10, 'one pass per quarter of the cap read, not one per line'


def test_thinning_runs_once_per_quarter_of_the_cap_not_once_per_sample(tmp_path, ticking_clock):
    _, rec = recorder(tmp_path, max_lines=400)

    for step in range(20_000):
        rec.record({'step': step})

    # A pass visits at most the cap's lines and frees at least a quarter of it: O(1) work per sample, amortised.
    assert 1 <= rec.thinning_passes <= 1 + (20_000 - 400) // 100


def test_a_cap_too_small_to_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match='max_lines must be at least 8 .*, got 4'):
        recorder(tmp_path, max_lines=4)


class _FlakyStorage(FileStorage):
    """File storage whose first `failures` puts fail, as S3 does while it throttles."""

    def __init__(self, uri: str, failures: int):
        super().__init__(uri)
        self.failures = failures

    def put_bytes(self, data: bytes, key: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise StorageError('SlowDown: please reduce your request rate')
        super().put_bytes(data, key)


def test_a_metrics_upload_that_failed_is_tried_again_on_the_next_round(tmp_path):
    """A round whose put fails (S3 throttling past botocore's retries) is tried again by the next round, which the
    metrics loop calls without force: not only after the script's next matching line, which a trainer in a long
    evaluation, or one that logs every few minutes, would leave the forecast and the deadline check waiting for."""
    storage = _FlakyStorage(f'file://{tmp_path}/metrics', failures=1)
    recorder = MetricsRecorder(storage, 'job-audit', 1, 1000, [], Logger(io.StringIO()))
    recorder.state = 'running'
    recorder.observe_line('iter 500: loss 1.2345, time 10.00ms, mfu 1.00%')
    try:
        recorder.upload()  # the metrics thread's round: throttled
    except StorageError:
        pass
    recorder.upload()  # the next round, a minute later, with no new line meanwhile
    progress = storage.get_bytes('progress.json')
    assert progress is not None, 'progress.json was never uploaded after one failed round'
    assert json.loads(progress)['step'] == 500
