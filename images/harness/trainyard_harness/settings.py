"""Job settings from environment variables, validated with precise errors (a bad setting means exit 78)."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import urllib.parse
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from trainyard_harness.checkpoints import is_temporary

MAX_WAIT_SECONDS = 14 * 86400
"""The longest a seconds setting may be: a tier's longest runtime (lib/config.ts MAX_RUNTIME_SECONDS, 14 days)."""

DEFAULT_CHECKPOINT_DIR = '/tmp/trainyard/checkpoints'
DEFAULT_WORK_DIR = '/tmp/trainyard/code'
DEFAULT_RESUME_ARGS = '--init_from=resume'
DEFAULT_IMDS_ENDPOINT = 'http://169.254.169.254'

_URI_SCHEMES = ('s3://', 'file://')
# A path inside the checkpoint directory: '/'-separated names of letters, digits, '.', '_' and '-', none starting with
# '.' (the checkpoint scan skips dot-directories). The API applies the same rule (lambdas/api/schemas.ts).
DONE_FILE_PATTERN = re.compile(r'[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*')
DONE_FILE_MAX_CHARS = 255


class ConfigError(Exception):
    """One or more settings are invalid; the message lists every problem found."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__('invalid harness configuration:\n  - ' + '\n  - '.join(self.problems))


@dataclass(frozen=True)
class Settings:
    """Validated job settings (see images/harness/README.md for each variable)."""

    job_id: str
    attempt: int
    command: list[str]
    checkpoint_uri: str
    metrics_uri: str
    code_uri: str | None = None
    code_sha256: str | None = None
    checkpoint_dir: str = DEFAULT_CHECKPOINT_DIR
    work_dir: str = DEFAULT_WORK_DIR
    resume_args: list[str] = field(default_factory=lambda: shlex.split(DEFAULT_RESUME_ARGS))
    stop_signal: signal.Signals = signal.SIGTERM
    stop_grace_seconds: float = 90.0
    sync_interval_seconds: float = 300.0
    keep_checkpoints: int = 3
    metrics_patterns: list[re.Pattern[str]] = field(default_factory=list)
    metrics_file: str | None = None
    checkpoint_done_file: str | None = None
    total_steps: int | None = None
    imds_endpoint: str = DEFAULT_IMDS_ENDPOINT
    imds_poll_seconds: float = 5.0
    s3_endpoint: str | None = None
    settle_seconds: float = 2.0
    # A resumed command that fails later than this after starting had loaded its checkpoint: its failure is its own,
    # and the checkpoint gets no resume-failure marker (two of which set it aside, and retention then deletes it).
    resume_failure_window_seconds: float = 1200.0
    # A multi-node parallel job's node (AWS_BATCH_JOB_NODE_INDEX / AWS_BATCH_JOB_MAIN_NODE_INDEX, set by Batch).
    node_index: int | None = None
    main_node_index: int | None = None

    @property
    def is_main_node(self) -> bool:
        """Whether this harness keeps the job's storage: a single-node job's, or a multi-node job's main node.

        Every node restores the checkpoint and runs the command; only the main node uploads checkpoints, writes
        progress and metrics, and marks a checkpoint that failed to load, so the nodes never race for one prefix.
        """
        return self.node_index is None or self.node_index == self.main_node_index



def metrics_file_problem(setting: str, resolved: str | None = None) -> str:
    """What is wrong with a TRAINYARD_METRICS_FILE that names a directory (`resolved`: where a relative one led)."""
    where = f' ({resolved})' if resolved is not None and resolved != setting else ''
    return f'TRAINYARD_METRICS_FILE must name a JSON-lines file, not a directory, got {setting!r}{where}'


def parent_uri(uri: str) -> str:
    """The URI one level above `uri` (`s3://b/jobs/j1/checkpoints` -> `s3://b/jobs/j1`); a bucket root stays."""
    scheme, _, rest = uri.partition('://')
    rest = rest.rstrip('/')
    head, sep, _tail = rest.rpartition('/')
    if not sep:
        return f'{scheme}://{rest}'
    return f'{scheme}://{head}'


def load_settings(env: Mapping[str, str], argv_command: Sequence[str]) -> Settings:
    """Reads and validates every TRAINYARD_* variable; raises ConfigError listing all problems at once."""
    problems: list[str] = []

    def text(name: str, required: bool = False) -> str | None:
        value = env.get(name)
        if value is None or value.strip() == '':
            if required:
                problems.append(f'{name} is required and was not set')
            return None
        return value.strip()

    def number(
        name: str,
        default: float,
        minimum: float,
        integer: bool,
        allow_equal: bool = True,
        maximum: float | None = None,
    ) -> float:
        raw = text(name)
        if raw is None:
            return default
        kind = 'an integer' if integer else 'a number'
        relation = '>=' if allow_equal else '>'
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            problems.append(f'{name} must be {kind} {relation} {minimum:g}, got {raw!r}')
            return default
        if not integer and not math.isfinite(value):
            # float() takes 'inf', 'nan' and '1e999' (inf): a wait that long kills the thread that waits (OverflowError)
            problems.append(f'{name} must be a finite number {relation} {minimum:g}, got {raw!r}')
            return default
        if value < minimum or (not allow_equal and value == minimum):
            problems.append(f'{name} must be {kind} {relation} {minimum:g}, got {raw!r}')
            return default
        if maximum is not None and value > maximum:
            problems.append(f'{name} must be at most {maximum:g} ({maximum / 86400:g} days), got {raw!r}')
            return default
        return value

    def uri(name: str, required: bool, what: str) -> str | None:
        value = text(name, required)
        if value is None:
            return None
        if not value.startswith(_URI_SCHEMES):
            problems.append(f'{name} must be an s3:// or file:// {what}, got {value!r}')
            return None
        scheme, _, rest = value.partition('://')
        if scheme == 's3' and (rest == '' or rest.startswith('/')):
            problems.append(f'{name} must name a bucket (s3://bucket/prefix), got {value!r}')
            return None
        if scheme == 'file' and not rest.startswith('/'):
            problems.append(f'{name} must be an absolute file:// URI (file:///path), got {value!r}')
            return None
        return value.rstrip('/') if what == 'prefix' else value

    job_id = text('TRAINYARD_JOB_ID', required=True)
    attempt_raw = text('TRAINYARD_ATTEMPT', required=True)
    attempt = 1
    if attempt_raw is not None:
        # At most 9 digits: int() refuses a string of over 4,300, and no job makes a billion attempts.
        if not re.fullmatch(r'[0-9]{1,9}', attempt_raw) or int(attempt_raw) < 1:
            problems.append(f'TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got {attempt_raw[:40]!r}')
        else:
            attempt = int(attempt_raw)

    code_uri = uri('TRAINYARD_CODE_URI', False, 'URI of a .tar.gz code bundle')
    if code_uri is not None and not code_uri.endswith(('.tar.gz', '.tgz')):
        problems.append(f'TRAINYARD_CODE_URI must point at a .tar.gz bundle, got {code_uri!r}')
    elif code_uri is not None and code_uri.startswith('s3://') and '/' not in code_uri[len('s3://') :]:
        problems.append(f'TRAINYARD_CODE_URI must be s3://<bucket>/<key>.tar.gz, with a key, got {code_uri!r}')
    code_sha256 = text('TRAINYARD_CODE_SHA256')
    if code_sha256 is not None:
        if not re.fullmatch(r'[0-9a-f]{64}', code_sha256):
            problems.append(f'TRAINYARD_CODE_SHA256 must be 64 lower-case hex digits, got {code_sha256[:80]!r}')
        elif code_uri is None:
            problems.append('TRAINYARD_CODE_SHA256 names the code bundle of TRAINYARD_CODE_URI, which is not set')
    checkpoint_uri = uri('TRAINYARD_CHECKPOINT_URI', True, 'prefix')
    metrics_uri = uri('TRAINYARD_METRICS_URI', False, 'prefix')
    if metrics_uri is None and checkpoint_uri is not None:
        metrics_uri = parent_uri(checkpoint_uri) + '/metrics'

    checkpoint_dir = text('TRAINYARD_CHECKPOINT_DIR') or DEFAULT_CHECKPOINT_DIR
    work_dir = text('TRAINYARD_WORK_DIR') or DEFAULT_WORK_DIR
    for name, value in (('TRAINYARD_CHECKPOINT_DIR', checkpoint_dir), ('TRAINYARD_WORK_DIR', work_dir)):
        if not value.startswith('/'):
            problems.append(f'{name} must be an absolute path, got {value!r}')
        elif os.path.normpath(value) == '/':
            problems.append(f'{name} must be a folder of its own, not the root folder: the harness empties it')
    if work_dir.startswith('/') and checkpoint_dir.startswith('/'):
        # The bundle is unpacked into a fresh work folder and a restore replaces the checkpoint folder: neither may
        # hold the other (the code would be uploaded as a checkpoint, or a restore would delete it).
        work, checkpoints = os.path.normpath(work_dir), os.path.normpath(checkpoint_dir)
        if work == checkpoints or work.startswith(checkpoints + '/') or checkpoints.startswith(work + '/'):
            problems.append(
                f'TRAINYARD_WORK_DIR ({work_dir!r}) and TRAINYARD_CHECKPOINT_DIR ({checkpoint_dir!r}) must be separate '
                'folders, neither inside the other'
            )

    resume_raw = env.get('TRAINYARD_RESUME_ARGS', DEFAULT_RESUME_ARGS)
    try:
        resume_args = shlex.split(resume_raw)
    except ValueError as error:
        problems.append(f'TRAINYARD_RESUME_ARGS is not a valid shell word list ({error}), got {resume_raw!r}')
        resume_args = []

    stop_signal = signal.SIGTERM
    signal_raw = text('TRAINYARD_STOP_SIGNAL')
    if signal_raw is not None:
        name = signal_raw.upper()
        name = name if name.startswith('SIG') else 'SIG' + name
        allowed = ('SIGTERM', 'SIGINT', 'SIGUSR1', 'SIGUSR2', 'SIGHUP', 'SIGQUIT')
        if name not in allowed:
            problems.append(f'TRAINYARD_STOP_SIGNAL must be one of {", ".join(allowed)}, got {signal_raw!r}')
        else:
            stop_signal = signal.Signals[name]

    # A wait is at most a job's longest run (14 days): longer ones overflow the waits' timeouts (OverflowError past
    # about 9.2e9 s), which would end the thread that waits.
    longest = MAX_WAIT_SECONDS
    grace = number('TRAINYARD_STOP_GRACE_SECONDS', 90.0, 0.0, integer=False, maximum=longest)
    sync_interval = number(
        'TRAINYARD_SYNC_INTERVAL_SECONDS', 300.0, 0.0, integer=False, allow_equal=False, maximum=longest
    )
    keep = int(number('TRAINYARD_KEEP_CHECKPOINTS', 3, 1, integer=True))
    poll = number('TRAINYARD_IMDS_POLL_SECONDS', 5.0, 0.0, integer=False, allow_equal=False, maximum=longest)
    settle = number('TRAINYARD_SETTLE_SECONDS', 2.0, 0.0, integer=False, maximum=longest)
    resume_window = number('TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS', 1200.0, 0.0, integer=False, maximum=longest)
    total_steps_raw = text('TRAINYARD_TOTAL_STEPS')
    total_steps: int | None = None
    if total_steps_raw is not None:
        total_steps = int(number('TRAINYARD_TOTAL_STEPS', 1, 1, integer=True))

    patterns: list[re.Pattern[str]] = []
    patterns_raw = text('TRAINYARD_METRICS_PATTERNS')
    if patterns_raw is not None:
        try:
            decoded = json.loads(patterns_raw)
        except json.JSONDecodeError as error:
            problems.append(f'TRAINYARD_METRICS_PATTERNS must be a JSON list of regex strings ({error.msg})')
            decoded = []
        except RecursionError:
            problems.append('TRAINYARD_METRICS_PATTERNS must be a JSON list of regex strings (it nests too deep)')
            decoded = []
        if not isinstance(decoded, list) or not all(isinstance(p, str) for p in decoded):
            problems.append(f'TRAINYARD_METRICS_PATTERNS must be a JSON list of regex strings, got {patterns_raw!r}')
            decoded = []
        for index, source in enumerate(decoded):
            try:
                compiled = re.compile(source)
            except (re.error, OverflowError, RecursionError) as error:
                problems.append(
                    f'TRAINYARD_METRICS_PATTERNS[{index}] is not a valid regex ({error or type(error).__name__}): {source[:200]!r}'
                )
                continue
            if not compiled.groupindex:
                problems.append(
                    f'TRAINYARD_METRICS_PATTERNS[{index}] needs at least one named group like (?P<loss>...): {source!r}'
                )
                continue
            patterns.append(compiled)

    metrics_file = text('TRAINYARD_METRICS_FILE')
    # A relative one names a file of the command's working directory, which may come with the code bundle: the
    # harness checks that one once it knows the directory.
    if metrics_file is not None and (
        metrics_file.endswith('/') or (os.path.isabs(metrics_file) and os.path.isdir(metrics_file))
    ):
        problems.append(metrics_file_problem(metrics_file))
        metrics_file = None
    done_file = text('TRAINYARD_CHECKPOINT_DONE_FILE')
    if done_file is not None and (
        len(done_file) > DONE_FILE_MAX_CHARS or not DONE_FILE_PATTERN.fullmatch(done_file) or is_temporary(done_file)
    ):
        problems.append(
            'TRAINYARD_CHECKPOINT_DONE_FILE must be a path inside the checkpoint directory of at most '
            f"{DONE_FILE_MAX_CHARS} characters: '/'-separated names of letters, digits, '.', '_' and '-', none "
            f'starting with \'.\', and not a temporary name (*.tmp, *.part, …) nor MANIFEST.json at the top, got {done_file!r}'
        )
        done_file = None

    imds_endpoint = (text('TRAINYARD_IMDS_ENDPOINT') or DEFAULT_IMDS_ENDPOINT).rstrip('/')
    if not imds_endpoint.startswith(('http://', 'https://')):
        problems.append(f'TRAINYARD_IMDS_ENDPOINT must be an http:// URL, got {imds_endpoint!r}')
    s3_endpoint = text('TRAINYARD_S3_ENDPOINT')
    if s3_endpoint is not None:
        parts = urllib.parse.urlsplit(s3_endpoint)
        if parts.scheme not in ('http', 'https') or not parts.hostname or any(c.isspace() for c in s3_endpoint):
            problems.append(f'TRAINYARD_S3_ENDPOINT must be an http:// or https:// URL with a host, got {s3_endpoint!r}')

    command = list(argv_command)
    if not command:
        command_raw = text('TRAINYARD_COMMAND')
        if command_raw is None:
            problems.append('no user command: pass it after `--` or set TRAINYARD_COMMAND to a JSON array of strings')
        else:
            try:
                decoded_command = json.loads(command_raw)
            except (json.JSONDecodeError, RecursionError):
                decoded_command = None
            if (
                not isinstance(decoded_command, list)
                or not decoded_command
                or not all(isinstance(part, str) for part in decoded_command)
                or decoded_command[0] == ''
            ):
                problems.append(
                    f'TRAINYARD_COMMAND must be a non-empty JSON array of strings, got {command_raw!r}'
                )
            else:
                command = decoded_command
    # No process can be started with a NUL in an argument (the OS takes C strings): the JSON forms can carry one.
    for name, words in (('the user command', command), ('TRAINYARD_RESUME_ARGS', resume_args)):
        if any('\0' in word for word in words):
            problems.append(f'{name} has an argument with a NUL character, which no process can be given')

    node_indexes: list[int | None] = []
    for name in ('AWS_BATCH_JOB_NODE_INDEX', 'AWS_BATCH_JOB_MAIN_NODE_INDEX'):
        raw = text(name)
        if raw is not None and not re.fullmatch(r'[0-9]{1,9}', raw):
            problems.append(f'{name} must be a node index (an integer from 0 to 999999999), got {raw[:40]!r}')
            raw = None
        node_indexes.append(None if raw is None else int(raw))
    node_index, main_node_index = node_indexes
    if node_index is not None and main_node_index is None:
        problems.append('AWS_BATCH_JOB_MAIN_NODE_INDEX is required with AWS_BATCH_JOB_NODE_INDEX (a multi-node job)')

    if problems:
        raise ConfigError(problems)
    assert job_id is not None and checkpoint_uri is not None and metrics_uri is not None
    return Settings(
        job_id=job_id,
        attempt=attempt,
        command=command,
        checkpoint_uri=checkpoint_uri,
        metrics_uri=metrics_uri,
        code_uri=code_uri,
        code_sha256=code_sha256,
        checkpoint_dir=checkpoint_dir,
        work_dir=work_dir,
        resume_args=resume_args,
        stop_signal=stop_signal,
        stop_grace_seconds=grace,
        sync_interval_seconds=sync_interval,
        keep_checkpoints=keep,
        metrics_patterns=patterns,
        metrics_file=metrics_file,
        checkpoint_done_file=done_file,
        total_steps=total_steps,
        imds_endpoint=imds_endpoint,
        imds_poll_seconds=poll,
        s3_endpoint=s3_endpoint,
        settle_seconds=settle,
        resume_failure_window_seconds=resume_window,
        node_index=node_index,
        main_node_index=main_node_index,
    )
