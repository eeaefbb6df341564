"""Progress metrics: parse training output, read a JSON-lines metrics file, sample GPUs, upload to storage."""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import subprocess
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterable

from trainyard_harness.logs import Logger
from trainyard_harness.storage import Storage

_NUMBER = r'[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf'

DEFAULT_PATTERNS: tuple[re.Pattern[str], ...] = (
    # nanoGPT: `iter 120: loss 2.4012, time 35.21ms, mfu 12.34%`
    re.compile(
        rf'\biter (?P<step>\d+): loss (?P<loss>{_NUMBER}), time (?P<iter_ms>{_NUMBER})ms'
        rf'(?:, mfu (?P<mfu_pct>{_NUMBER})%)?'
    ),
    # nanoGPT: `step 250: train loss 1.9876, val loss 2.0123`
    re.compile(rf'\bstep (?P<step>\d+): train loss (?P<train_loss>{_NUMBER}), val loss (?P<val_loss>{_NUMBER})'),
    # generic: `step=120 loss=2.40` / `step: 120, loss: 2.40` plus optional extras
    re.compile(
        rf'\bstep\s*[=:]\s*(?P<step>\d+)\b.*?\bloss\s*[=:]\s*(?P<loss>{_NUMBER})'
        rf'(?:.*?\bval_loss\s*[=:]\s*(?P<val_loss>{_NUMBER}))?'
        rf'(?:.*?\b(?:tokens_per_sec|tok/s)\s*[=:]\s*(?P<tokens_per_s>{_NUMBER}))?',
        re.IGNORECASE,
    ),
)


# The most of one output line the patterns see: they scan a line once per `step` in it (the generic one looks for a
# loss after each), so a line that only grows (a progress bar redrawn without a newline) would hold the interpreter,
# and with it the IMDS poller and the stop, for seconds (10 s at 350 KB). 8 KiB takes at most some tens of ms.
MAX_PARSED_LINE_CHARS = 8 * 1024


# The most samples metrics.jsonl keeps. Its readers need little: the API's forecast (lambdas/domain/forecast.ts) takes
# steps/s from the last ~11 step samples, and the report (Finalize, execution-ended) draws at most 2,000 points and
# reads at most 64 MiB (lambdas/shared/job-files.ts, ~440,000 samples). But the API reads the whole object on every
# `job show`, and the harness uploads it every minute. 20,000 samples of ~150-250 bytes are 3-5 MB: each upload and
# each read stays that size however long the run (a 10-hour nanoGPT run logging every 10 iterations makes 100,000+),
# and the newest 10,000 (an hour or more of such logging, GPU samples every 15 s included) stay whole.
MAX_METRIC_LINES = 20_000


# The keys the harness sets on every sample in metrics.jsonl; a script's fields of these names are renamed `user_<key>`.
HARNESS_SAMPLE_KEYS = frozenset({'time', 'attempt'})


def _convert(value: str) -> int | float | str:
    try:
        number = float(value)
    except ValueError:
        return value
    if re.fullmatch(r'[-+]?\d+', value.strip()):
        try:
            return int(value)
        except ValueError:
            # Past Python's 4,300-digit limit on int('…'): no metric is that long, and the output reader must not die
            # of it (the command would block on a full pipe). The float is infinite, which samples leave out.
            return number
    return number


def parse_line(line: str, patterns: Iterable[re.Pattern[str]]) -> dict[str, Any] | None:
    """Fields of the first pattern matching `line` (numbers converted), or None. User patterns come first."""
    for pattern in patterns:
        match = pattern.search(line)
        if match:
            fields = {k: _convert(v) for k, v in match.groupdict().items() if v is not None}
            if 'step' in fields and not isinstance(fields['step'], int):
                try:
                    fields['step'] = int(float(fields['step']))
                except (TypeError, ValueError, OverflowError):  # text, nan, or an infinite step (`step 1e999`)
                    del fields['step']
            return fields or None
    return None


def _json_safe(value: Any) -> Any:
    """`value` with every non-finite float in it, however deeply nested, as None: JSON has no NaN or Infinity, and
    a line holding one (which Python's json.dumps writes by default) is no JSON to the control plane's readers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec='milliseconds').replace('+00:00', 'Z')


def _now_iso() -> str:
    return _iso(_now())


def _epoch_ms(moment: datetime) -> float:
    return max(0.0, moment.timestamp() * 1000)  # never negative: a bucket wide enough then holds every sample


def _placement_of(line: str, previous: tuple[Any, float]) -> tuple[Any, float]:
    """A metrics.jsonl line's `attempt` and `time` (epoch ms); a line without them (not JSON, torn, a time that does
    not parse) is placed with the line before it."""
    try:
        document = json.loads(line)
    except (ValueError, RecursionError):
        return previous
    if not isinstance(document, dict):
        return previous
    attempt, time_ms = previous
    if isinstance(document.get('attempt'), int):
        attempt = document['attempt']
    if isinstance(document.get('time'), str):
        try:
            moment = datetime.fromisoformat(document['time'].replace('Z', '+00:00'))
        except ValueError:
            pass
        else:
            time_ms = _epoch_ms(moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc))
    return attempt, time_ms


MAX_STEP = 2**53 - 1
"""The largest step progress.json reports: JSON readers (the control plane's) hold integers exactly up to 2^53 - 1."""


def is_step(value: Any) -> bool:
    """Whether a sample's `step` is a step count: an integer from 0 to MAX_STEP, not a bool (True is an int in Python).
    Anything else stays in the sample but is not progress: progress.json with it would be refused whole by the control
    plane, spot notice and all."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP


class MetricsRecorder:
    """Collects samples, keeps the latest progress, and writes `metrics.jsonl` and `progress.json` to storage.

    Earlier attempts' samples are read back at start so one `metrics.jsonl` tells the job's whole story. At most
    `max_lines` are kept: past that the older samples are thinned (`_thin`), the newest half never.
    """

    def __init__(
        self,
        storage: Storage,
        job_id: str,
        attempt: int,
        total_steps: int | None,
        patterns: Iterable[re.Pattern[str]],
        log: Logger,
        max_lines: int = MAX_METRIC_LINES,
    ):
        self.storage = storage
        self.job_id = job_id
        self.attempt = attempt
        self.total_steps = total_steps
        self.patterns = list(patterns) + list(DEFAULT_PATTERNS)
        self.log = log
        self.lines: list[str] = []
        self.step: int | None = None
        self.loss: float | None = None
        self.resumed_from_step: int | None = None
        self.state = 'starting'
        self.exit_code: int | None = None
        # Set at the end when IMDS announced a spot interruption during the attempt (progress.json `spot_notice`).
        self.spot_notice = False
        self.gpu: dict[str, float] = {}
        self._lock = threading.Lock()
        self._dirty = True
        if max_lines < 8:
            raise ValueError(f'max_lines must be at least 8 (a recent window and an older part), got {max_lines}')
        self.max_lines = max_lines
        # The newest half is kept whole; the older lines are kept at most one per time bucket, at most a quarter of the
        # cap, so a pass leaves room for a quarter of the cap before the next: O(1) amortised work per sample.
        self._recent_lines = max_lines // 2
        self._older_limit = max_lines // 4
        # Each line's attempt and time (epoch ms), parallel to `lines`: where attempts begin and end, which bucket.
        self._line_attempts: list[Any] = []
        self._line_times: list[float] = []
        self._older_count = 0  # `lines[:_older_count]` are thinned to one per bucket already
        # Only grows (doubling), so the older lines' spacing is even across the run, earlier attempts' included.
        self._bucket_ms = 1
        self.thinning_passes = 0  # each costs O(max_lines) and frees a quarter of it: the amortised bound, countable

    def load_previous(self) -> None:
        """Reads earlier attempts' metrics.jsonl so this attempt appends to it (thinned to the cap as it is read)."""
        raw = self.storage.get_bytes('metrics.jsonl')
        if not raw:
            return
        with self._lock:
            ours = list(zip(self.lines, self._line_attempts, self._line_times))
            self.lines, self._line_attempts, self._line_times = [], [], []
            self._older_count = 0
            placement: tuple[Any, float] = (None, 0.0)
            # Line by line, so an earlier attempt's large file is never held as a list of every line.
            for text in io.StringIO(raw.decode('utf-8', 'replace'), newline='\n'):
                line = text.rstrip('\r\n')
                if not line.strip():
                    continue
                placement = _placement_of(line, placement)
                self._append(line, *placement)
            for line, attempt, time_ms in ours:
                self._append(line, attempt, time_ms)
            self._dirty = True

    def _append(self, line: str, attempt: Any, time_ms: float) -> None:
        """Adds a line, thinning the older lines when the cap is passed (the caller holds the lock)."""
        self.lines.append(line)
        self._line_attempts.append(attempt)
        self._line_times.append(time_ms)
        if len(self.lines) > self.max_lines:
            self._thin()

    def _is_attempt_edge(self, index: int) -> bool:
        """Whether `lines[index]` is its attempt's first or last: kept through every pass, so each attempt's span (and
        the run's first sample) stays in the file. Thinning only drops lines inside an attempt, so the neighbours still
        in the list tell the edges as the original ones would."""
        attempts = self._line_attempts
        return (
            index == 0
            or index == len(attempts) - 1
            or attempts[index] != attempts[index - 1]
            or attempts[index] != attempts[index + 1]
        )

    def _one_per_bucket(self, indexes: Iterable[int], kept: list[int]) -> list[int]:
        """`kept` plus each of `indexes` that is an attempt edge or in a later time bucket than the last one kept."""
        width, times = self._bucket_ms, self._line_times
        last = times[kept[-1]] // width if kept else None
        for index in indexes:
            bucket = times[index] // width
            if bucket != last or self._is_attempt_edge(index):
                kept.append(index)
                last = bucket
        return kept

    def _thin(self) -> None:
        """Keeps the newest `_recent_lines` whole and, of the lines before them, each attempt's first and last and the
        first in each time bucket, doubling the bucket while they are more than `_older_limit`. Order is kept, so the
        file stays in time order, and older lines thin evenly over the run's time rather than the oldest most."""
        self.thinning_passes += 1
        leaving = len(self.lines) - self._recent_lines
        kept = self._one_per_bucket(range(self._older_count, leaving), list(range(self._older_count)))
        # The first in a bucket twice as wide is the first of one of its halves, so each doubling keeps a subset of
        # what the narrower buckets kept: the older lines never depend on how often they were thinned.
        while len(kept) > self._older_limit and not all(self._is_attempt_edge(i) for i in kept):
            self._bucket_ms *= 2
            kept = self._one_per_bucket(kept, [])
        self.lines = [self.lines[i] for i in kept] + self.lines[leaving:]
        self._line_attempts = [self._line_attempts[i] for i in kept] + self._line_attempts[leaving:]
        self._line_times = [self._line_times[i] for i in kept] + self._line_times[leaving:]
        self._older_count = len(kept)

    def record(self, fields: dict[str, Any]) -> None:
        """Adds one sample and updates progress (step, loss)."""
        with self._lock:
            # `time` and `attempt` are the harness's: a script's own fields of those names (a metrics file's epoch
            # `time`, say) are kept as `user_time` / `user_attempt` rather than misplacing the sample.
            own = {f'user_{k}' if k in HARNESS_SAMPLE_KEYS else k: v for k, v in fields.items()}
            now = _now()
            sample = {'time': _iso(now), 'attempt': self.attempt, **self.gpu, **own}
            self._append(json.dumps(_json_safe(sample), allow_nan=False), self.attempt, _epoch_ms(now))
            step = fields.get('step')
            if is_step(step):
                self.step = step
            for key in ('loss', 'train_loss'):
                value = fields.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    try:
                        self.loss = float(value)
                    except OverflowError:  # an integer past a float's range: infinite, which progress.json writes as null
                        self.loss = math.inf
                    break
            self._dirty = True

    def observe_line(self, line: str) -> None:
        """Parses one line of the user's output (its first MAX_PARSED_LINE_CHARS) and records a sample if a pattern
        matches."""
        fields = parse_line(line[:MAX_PARSED_LINE_CHARS], self.patterns)
        if fields:
            self.record(fields)

    def observe_gpu(self, util: float, mem_mib: float) -> None:
        """Keeps the latest GPU reading (added to later samples) and records it as a sample of its own."""
        self.gpu = {'gpu_util': util, 'gpu_mem_mib': mem_mib}
        self.record({'step': self.step} if self.step is not None else {})

    def progress(self) -> dict[str, Any]:
        """The latest progress document (progress.json)."""
        with self._lock:
            return {
                'job_id': self.job_id,
                'attempt': self.attempt,
                'state': self.state,
                'step': self.step,
                'total_steps': self.total_steps,
                'loss': _json_safe(self.loss),
                'resumed_from_step': self.resumed_from_step,
                'exit_code': self.exit_code,
                'spot_notice': self.spot_notice,
                'updated_at': _now_iso(),
            }

    def upload(self, force: bool = False) -> None:
        """Writes metrics.jsonl then progress.json (only when something changed, unless forced)."""
        with self._lock:
            if not (self._dirty or force):
                return
            body = ('\n'.join(self.lines) + '\n').encode() if self.lines else b''
            self._dirty = False
        try:
            self.storage.put_bytes(body, 'metrics.jsonl')
            self.storage.put_bytes(json.dumps(self.progress(), indent=2).encode(), 'progress.json')
        except BaseException:
            # Not stored: the next round tries again, not only the next sample (a long evaluation prints none).
            with self._lock:
                self._dirty = True
            raise


class MetricsFileTail:
    """Follows a JSON-lines file the user script appends to; each complete line becomes a sample.

    What the file holds before the command starts is not this attempt's: a file kept in the checkpoint directory comes
    back with the checkpoint, and a reused working directory keeps the last attempt's. `skip_existing` starts after it
    (those samples are in metrics.jsonl already, and their steps are no progress of this attempt's). A file the script
    truncates or rewrites is read again from its start; one it rewrites with more lines after the same ones reads on.
    """

    # Bytes just before the read offset, compared at every poll: if they differ, the file is no longer the one read.
    SIGNATURE_BYTES = 64
    # A poll reads the new bytes this many at a time, and a line longer than MAX_LINE_BYTES is skipped, not held: a
    # script that writes a large file at once, or one without newlines, costs the harness this much memory at most.
    READ_CHUNK_BYTES = 4 * 1024 * 1024
    MAX_LINE_BYTES = 1024 * 1024

    def __init__(self, path: str, recorder: MetricsRecorder, log: Logger):
        self.path = path
        self.recorder = recorder
        self.log = log
        self.offset = 0
        self.signature = b''
        self.partial = b''
        self._skipping = False  # inside a line over MAX_LINE_BYTES, skipped up to its newline
        self._lock = threading.Lock()  # the metrics thread polls, and the harness once more at the end
        self._unreadable = False  # logged once until it is read again

    def skip_existing(self) -> int:
        """Starts reading after what the file holds now; returns how many bytes that skips (0 without a file)."""
        try:
            with open(self.path, 'rb') as handle:
                start = max(0, os.fstat(handle.fileno()).st_size - self.SIGNATURE_BYTES)
                handle.seek(start)
                self.signature = handle.read()
        except OSError:
            return 0  # none yet, or not readable now: `poll` says so
        self.offset, self.partial, self._skipping = start + len(self.signature), b'', False
        return self.offset

    def poll(self) -> None:
        """Reads lines added since the last poll (a line without its newline waits for the next poll)."""
        with self._lock:
            self._poll()

    def _poll(self) -> None:
        try:
            with open(self.path, 'rb') as handle:
                data = self._read_new(handle)
                while data:
                    self._unreadable = False
                    self._take(data)
                    data = handle.read(self.READ_CHUNK_BYTES)
        except FileNotFoundError:
            return
        except OSError as error:  # a directory made there, a file the harness may not read: never fatal to the run
            if not self._unreadable:
                self.log.warn('metrics_file_unreadable', path=self.path, error=str(error))
                self._unreadable = True
            return

    def _take(self, data: bytes) -> None:
        """Takes the next bytes of the file: each complete line is recorded, the unfinished one waits."""
        self.offset += len(data)
        self.signature = (self.signature + data)[-self.SIGNATURE_BYTES :]
        if self._skipping:
            end = data.find(b'\n')
            if end == -1:
                return
            data, self._skipping = data[end + 1 :], False
        chunks = (self.partial + data).split(b'\n')
        self.partial = chunks.pop()
        for chunk in chunks:
            if chunk.strip():
                self._record_line(chunk)
        if len(self.partial) > self.MAX_LINE_BYTES:
            self.log.warn(
                'metrics_file_bad_line',
                line=self.partial[:200].decode('utf-8', 'replace'),
                error=f'a line longer than {self.MAX_LINE_BYTES} bytes: skipped',
            )
            self.partial, self._skipping = b'', True

    def _record_line(self, line: bytes) -> None:
        """Records one line of the file as a sample when it is a JSON object; any other line is logged and skipped.

        Whatever taking one line raises is caught here, not only the ValueError of a line that is not JSON: a legal
        line nested too deeply for the interpreter's stack raises RecursionError (from json.loads, or from json.dumps
        when the sample is written out), and one line of the script's must neither stop the lines after it nor the
        metrics thread, nor the harness itself, which reads the last lines just before the final sync.
        """
        try:
            document = json.loads(line)
            if isinstance(document, dict):
                self.recorder.record(document)
        except Exception as error:
            self.log.warn(
                'metrics_file_bad_line',
                line=line[:200].decode('utf-8', 'replace'),
                error=f'{type(error).__name__}: {error}',
            )

    def _read_new(self, handle) -> bytes:
        """The first bytes after the offset (at most READ_CHUNK_BYTES), or of the whole file (offset reset) if it is
        not the file read so far."""
        size = os.fstat(handle.fileno()).st_size
        if size >= self.offset:
            handle.seek(self.offset - len(self.signature))
            data = handle.read(len(self.signature) + self.READ_CHUNK_BYTES)
            if data.startswith(self.signature):
                return data[len(self.signature) :]
        self.log.info('metrics_file_rewritten', path=self.path, size=size, read_before=self.offset)
        self.offset, self.signature, self.partial, self._skipping = 0, b'', b'', False
        handle.seek(0)
        return handle.read(self.READ_CHUNK_BYTES)


def sample_gpus() -> tuple[float, float] | None:
    """Mean GPU utilisation (%) and total memory used (MiB) from nvidia-smi, or None without GPUs."""
    binary = shutil.which('nvidia-smi')
    if binary is None:
        return None
    try:
        output = subprocess.run(
            [binary, '--query-gpu=utilization.gpu,memory.used', '--format=csv,noheader,nounits'],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    utils, mems = [], []
    for row in output.strip().splitlines():
        parts = [p.strip() for p in row.split(',')]
        if len(parts) != 2:
            continue
        try:
            utils.append(float(parts[0]))
            mems.append(float(parts[1]))
        except ValueError:
            continue
    if not utils:
        return None
    return sum(utils) / len(utils), sum(mems)


class MetricsLoop:
    """Background thread: polls the metrics file, samples GPUs, uploads metrics every `interval` seconds."""

    def __init__(
        self,
        recorder: MetricsRecorder,
        interval: float,
        log: Logger,
        tail: MetricsFileTail | None = None,
        gpu_interval: float = 15.0,
    ):
        self.recorder = recorder
        self.interval = interval
        self.log = log
        self.tail = tail
        self.gpu_interval = gpu_interval
        self.stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts the thread."""
        self._thread = threading.Thread(target=self._run, name='metrics', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the thread and waits for it (a GPU sample or an upload in progress ends first)."""
        self.stopped.set()
        if self._thread is not None:
            self._thread.join()

    def read_file(self) -> None:
        """Reads what the metrics file gained since the thread last did (safe while the thread runs)."""
        if self.tail:
            self.tail.poll()

    def _run(self) -> None:
        has_gpu = shutil.which('nvidia-smi') is not None
        last_upload = last_gpu = 0.0
        failing: set[str] = set()
        while not self.stopped.wait(0.5):
            now = time.monotonic()
            if self.tail:
                self._guarded('read_file', self.tail.poll, failing)
            if has_gpu and now - last_gpu >= self.gpu_interval:
                last_gpu = now
                self._guarded('sample_gpus', self._sample_gpus, failing)
            if now - last_upload >= self.interval:
                last_upload = now
                try:
                    self.recorder.upload()
                except Exception as error:  # metrics are best effort while running; the final upload is checked
                    self.log.warn('metrics_upload_failed', error=str(error))

    def _sample_gpus(self) -> None:
        reading = sample_gpus()
        if reading is not None:
            self.recorder.observe_gpu(*reading)

    def _guarded(self, step: str, action: Callable[[], None], failing: set[str]) -> None:
        """Runs one step of a round. Metrics are advisory: a step that fails (a harness bug, an input nobody foresaw)
        is logged, once until it succeeds again, and the rest of the round and the next rounds run. A thread that
        died of it would report no progress for the rest of the attempt, and say so nowhere."""
        try:
            action()
        except Exception as error:
            if step not in failing:
                self.log.warn('metrics_loop_failed', step=step, error=f'{type(error).__name__}: {error}')
            failing.add(step)
        else:
            failing.discard(step)


def resolve_metrics_file(path: str | None, cwd: str) -> str | None:
    """A relative TRAINYARD_METRICS_FILE is relative to the user command's working directory."""
    if path is None:
        return None
    return path if os.path.isabs(path) else os.path.join(cwd, path)
