"""Benchmark training process: idles until SIGTERM, then writes a checkpoint of N bytes atomically and exits 0.

With a second argument U, it first writes U bytes it never changes (`base.bin`, a frozen base model), which the
harness uploads once the directory settles; the save after the notice then changes only `ckpt.bin`.
"""

import os
import signal
import sys

size = int(sys.argv[1])
unchanged = int(sys.argv[2]) if len(sys.argv) > 2 else 0
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
block = os.urandom(1024 * 1024)  # incompressible bytes; repeated so generating them costs nothing


def write(name: str, count: int) -> None:
    path = os.path.join(directory, name)
    with open(path + '.tmp', 'wb') as handle:
        remaining = count
        while remaining > 0:
            chunk = block if remaining >= len(block) else block[:remaining]
            handle.write(chunk)
            remaining -= len(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + '.tmp', path)


def save(*_args) -> None:
    write('ckpt.bin', size)
    print(f'saved {size} bytes', flush=True)
    sys.exit(0)


if unchanged:
    write('base.bin', unchanged)


signal.signal(signal.SIGTERM, save)
print('ready', flush=True)
while True:
    signal.pause()
