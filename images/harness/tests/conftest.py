"""Shared fixtures: a loopback fake IMDS, s3rver, and a harness subprocess whose output can be awaited."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
HARNESS_SRC = TESTS.parent
REPO = HARNESS_SRC.parent.parent
# The interpreter the harness and the trainers run under; another one (with CUDA torch, say) by TRAINYARD_TEST_PYTHON.
PYTHON = os.environ.get('TRAINYARD_TEST_PYTHON', '/usr/bin/python3')
WAIT_LIMIT = 60.0  # upper bound on every event wait: a hung process fails the test instead of hanging the suite

sys.path.insert(0, str(HARNESS_SRC))
sys.path.insert(0, str(TESTS))

from fake_imds import FakeImds  # noqa: E402

__all__ = ['FakeImds']


@pytest.fixture
def fake_imds():
    """A fake IMDS that serves no notice until the test arms it."""
    imds = FakeImds()
    yield imds
    imds.close()


def closed_port_endpoint() -> str:
    """An http endpoint on loopback where nothing listens (connection refused = "not on EC2")."""
    import socket

    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return f'http://127.0.0.1:{port}'


class S3rver:
    """s3rver (from the repo's node_modules) in a child node process; buckets are created at start."""

    def __init__(self, directory: Path, buckets: list[str]):
        self.process = subprocess.Popen(
            ['node', '--openssl-legacy-provider', str(TESTS / 's3rver_helper.mjs'), str(directory), *buckets],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError('s3rver helper exited before printing its port (is node_modules installed?)')
        self.port = json.loads(line)['port']
        self.endpoint = f'http://127.0.0.1:{self.port}'

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope='session')
def s3rver(tmp_path_factory):
    """One s3rver for the session with bucket `trainyard-test`; credentials it accepts are set in os.environ."""
    server = S3rver(tmp_path_factory.mktemp('s3rver'), ['trainyard-test'])
    saved = {k: os.environ.get(k) for k in ('AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION')}
    os.environ.update(AWS_ACCESS_KEY_ID='S3RVER', AWS_SECRET_ACCESS_KEY='S3RVER', AWS_REGION='us-east-1')
    yield server
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


def base_env(tmp_path: Path, imds_endpoint: str, **overrides: str) -> dict[str, str]:
    """Environment for a harness run that keeps everything under `tmp_path` (file:// storage by default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('TRAINYARD_')}
    env.update(
        PYTHONPATH=str(HARNESS_SRC),
        TRAINYARD_JOB_ID='job-test',
        TRAINYARD_ATTEMPT='1',
        TRAINYARD_CHECKPOINT_URI=f'file://{tmp_path}/store/checkpoints',
        TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'ckpt-attempt1'),
        TRAINYARD_IMDS_ENDPOINT=imds_endpoint,
        TRAINYARD_IMDS_POLL_SECONDS='0.05',
        TRAINYARD_SETTLE_SECONDS='0.2',
        TRAINYARD_STOP_GRACE_SECONDS='30',
    )
    env.update(overrides)
    return env


class HarnessRun:
    """The harness as a subprocess (`python -m trainyard_harness -- ...`), with awaitable stdout/stderr lines."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path | str | None = None):
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._changed = threading.Condition()
        self.process = subprocess.Popen(
            [PYTHON, '-m', 'trainyard_harness', '--', *command],
            env=env,
            cwd=str(cwd) if cwd else None,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._read, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream, sink: list[str]) -> None:
        for line in stream:
            with self._changed:
                sink.append(line.rstrip('\n'))
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for_stdout(self, pattern: str) -> re.Match[str]:
        """Blocks until a stdout line matches `pattern` (fails if the process ends first or WAIT_LIMIT passes)."""
        regex = re.compile(pattern)
        with self._changed:
            index = 0
            while True:
                while index < len(self.stdout):
                    match = regex.search(self.stdout[index])
                    if match:
                        return match
                    index += 1
                if self.process.poll() is not None and not any(r.is_alive() for r in self._readers[:1]):
                    raise AssertionError(f'harness exited before printing {pattern!r}:\n' + self.output())
                if not self._changed.wait(WAIT_LIMIT):
                    raise AssertionError(f'no stdout line matched {pattern!r} within {WAIT_LIMIT}s:\n' + self.output())

    def wait_for_event(self, event: str, **fields) -> dict:
        """Blocks until the harness logs a JSON line with this event (and these field values)."""
        with self._changed:
            index = 0
            while True:
                while index < len(self.stderr):
                    record = _json_or_none(self.stderr[index])
                    index += 1
                    if record and record.get('event') == event and all(record.get(k) == v for k, v in fields.items()):
                        return record
                if self.process.poll() is not None and not self._readers[1].is_alive():
                    raise AssertionError(f'harness exited before logging {event!r}:\n' + self.output())
                if not self._changed.wait(WAIT_LIMIT):
                    raise AssertionError(f'no {event!r} log line within {WAIT_LIMIT}s:\n' + self.output())

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def finish(self) -> int:
        """Waits for exit and for the output readers; returns the exit code."""
        try:
            code = self.process.wait(timeout=WAIT_LIMIT * 2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError('harness did not exit:\n' + self.output()) from None
        for reader in self._readers:
            reader.join(10)
        return code

    def events(self, name: str | None = None) -> list[dict]:
        """Parsed JSON log lines, optionally only those with event == name."""
        records = [r for r in (_json_or_none(line) for line in self.stderr) if r]
        return [r for r in records if name is None or r.get('event') == name]

    def output(self) -> str:
        return '--- stdout ---\n' + '\n'.join(self.stdout[-40:]) + '\n--- stderr ---\n' + '\n'.join(self.stderr[-40:])


def _json_or_none(line: str) -> dict | None:
    if not line.startswith('{'):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get('source') == 'trainyard-harness' else None


_RUNS: list[HarnessRun] = []


def run_harness(command: list[str], env: dict[str, str], cwd: Path | str | None = None) -> HarnessRun:
    """Starts the harness; call .finish() for the exit code."""
    run = HarnessRun(command, env, cwd)
    _RUNS.append(run)
    return run


@pytest.fixture(autouse=True)
def _no_harness_outlives_its_test():
    """A test that failed before .finish() leaves nothing running: the harness and its command's process group."""
    yield
    while _RUNS:
        run = _RUNS.pop()
        if run.process.poll() is not None:
            continue
        run.process.kill()
        run.process.wait()
        for started in run.events('user_command_started'):
            try:
                os.killpg(started['pid'], signal.SIGKILL)
            except ProcessLookupError:
                pass  # the command's group is gone already
