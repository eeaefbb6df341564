"""Benchmark training process: idles until SIGTERM, then writes a checkpoint of N bytes atomically and exits 0."""

import os
import signal
import sys

size = int(sys.argv[1])
directory = os.environ['TRAINYARD_CHECKPOINT_DIR']
block = os.urandom(1024 * 1024)  # incompressible bytes; repeated so generating them costs nothing


def save(*_args) -> None:
    path = os.path.join(directory, 'ckpt.bin')
    with open(path + '.tmp', 'wb') as handle:
        remaining = size
        while remaining > 0:
            chunk = block if remaining >= len(block) else block[:remaining]
            handle.write(chunk)
            remaining -= len(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + '.tmp', path)
    print(f'saved {size} bytes', flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, save)
print('ready', flush=True)
while True:
    signal.pause()
