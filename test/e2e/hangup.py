"""Support for hangup.test.ts (not a test): runs `trainyard local` on a pseudo-terminal, as in an SSH session, submits
a long job, waits for its attempt's processes, then closes the terminal and sends the SIGHUP a shell passes on when
its session ends. Prints one JSON line: whether local mode started, the submit's exit code, how many attempt
processes ran before the hangup, which were left running after local mode ended, and the folder's files. Whatever it
finds left running it kills before it exits, so nothing it started outlives it.

Usage: hangup.py <repository root> <empty local mode folder>
"""

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time

root, folder = sys.argv[1], sys.argv[2]
tsx = os.path.join(root, 'node_modules', '.bin', 'tsx')
env = dict(os.environ, TRAINYARD_LOCAL_DIR=folder)
env.pop('TRAINYARD_API_URL', None)
attempts_dir = f'TRAINYARD_WORK_DIR={folder}/attempts/'.encode()


def read_terminal(master: int, seconds: float, until: bytes | None = None) -> bytes:
    """What local mode printed within `seconds` (or until `until` appears)."""
    seen, end = b'', time.time() + seconds
    while time.time() < end:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
            if until is not None and until in seen:
                break
    return seen


def attempt_processes() -> list[int]:
    """Live processes of this folder's attempts, known by the work dir the runner gives each."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/environ', 'rb') as handle:
                environ = handle.read().split(b'\0')
            with open(f'/proc/{entry}/stat') as handle:
                stat = handle.read()
        except OSError:
            continue
        zombie = stat[stat.rfind(')') + 2] == 'Z'
        if not zombie and any(variable.startswith(attempts_dir) for variable in environ):
            found.append(int(entry))
    return sorted(found)


pid, master = pty.fork()
if pid == 0:
    os.chdir(root)
    os.execve(tsx, [tsx, 'bin/trainyard.ts', 'local'], env)

report: dict[str, object] = {}
try:
    report['started'] = b'is running' in read_terminal(master, 120, b'is running')
    submit = subprocess.run(
        [tsx, 'bin/trainyard.ts', 'submit', 'examples/hello-cpu', '--tier', 'cpu-large', '--yes', '--', 'python',
         'train.py', '--max_iters=100000', '--step_delay=0.05', '--checkpoint_interval=200'],
        cwd=root, env=env, capture_output=True, text=True, timeout=120)
    report['submitted'] = submit.returncode
    end = time.time() + 60
    while not attempt_processes() and time.time() < end:
        read_terminal(master, 0.5)
    report['attemptProcessesBefore'] = len(attempt_processes())
    with open(os.path.join(folder, 'local.json')) as handle:
        local_mode = json.load(handle)['pid']
    os.close(master)  # the terminal goes away (the SSH session closed)...
    time.sleep(0.5)
    try:
        os.kill(local_mode, signal.SIGHUP)  # ...and the shell passes SIGHUP on to its jobs
    except ProcessLookupError:
        pass
    end = time.time() + 60  # local mode's stop takes a few seconds
    while time.time() < end:
        try:
            os.kill(local_mode, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    time.sleep(1)
    report['leftOver'] = attempt_processes()
    report['files'] = sorted(os.listdir(folder))
finally:
    for process in attempt_processes():
        try:
            os.kill(process, signal.SIGKILL)
        except OSError:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print(json.dumps(report), flush=True)
