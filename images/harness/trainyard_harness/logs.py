"""JSON log lines on stderr, one object per line, with the job id and attempt on every line."""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import datetime, timezone
from typing import IO, Any, TextIO


def write_or_drop(stream: IO[Any], data: Any) -> None:
    """Writes and flushes `data`. When nobody reads the stream any more (a closed pipe: EPIPE; a lost terminal: EIO),
    its file descriptor is pointed at /dev/null, so this write and every later one, the interpreter's flush at exit
    included, succeed unheard: what the harness does must not depend on being heard."""
    try:
        stream.write(data)
        stream.flush()
    except OSError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, stream.fileno())
            finally:
                os.close(null)
            stream.flush()  # what the failed write left buffered goes to /dev/null
        except (OSError, ValueError):
            pass  # a stream without a descriptor: this line is lost, and the next write tries again


class Logger:
    """Writes `{"time", "level", "source": "trainyard-harness", "event", ...}` lines; thread-safe."""

    def __init__(self, stream: TextIO | None = None, **context: Any):
        self.stream = stream
        self.context = context
        self._lock = threading.RLock()  # re-entrant: signal handlers may log while the main thread is logging
        # Whether the command's output passed through to this logger's stream left it mid-line (a progress bar that
        # redraws after a '\r' ends its line only when done): the next log line then starts a line of its own.
        self._mid_line = False

    def bind(self, **context: Any) -> None:
        """Adds persistent keys (job id, attempt) to every later line."""
        self.context.update(context)

    def _write(self, level: str, event: str, fields: dict[str, Any]) -> None:
        record = {
            'time': datetime.now(timezone.utc).isoformat(timespec='milliseconds').replace('+00:00', 'Z'),
            'level': level,
            'source': 'trainyard-harness',
            'event': event,
            **self.context,
            **fields,
        }
        line = json.dumps(record, default=str)
        with self._lock:
            write_or_drop(self.stream or sys.stderr, ('\n' if self._mid_line else '') + line + '\n')
            self._mid_line = False

    def pass_through(self, sink: IO[bytes], chunk: bytes) -> None:
        """Writes a chunk of the command's output to `sink`, the binary side of this logger's stream, and remembers
        whether it ended mid-line, so that no log line is glued to the end of the command's unfinished one."""
        with self._lock:
            write_or_drop(sink, chunk)
            self._mid_line = not chunk.endswith(b'\n')

    def info(self, event: str, **fields: Any) -> None:
        """Logs a normal event."""
        self._write('info', event, fields)

    def warn(self, event: str, **fields: Any) -> None:
        """Logs a recoverable problem."""
        self._write('warn', event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Logs a problem that ends the run."""
        self._write('error', event, fields)
