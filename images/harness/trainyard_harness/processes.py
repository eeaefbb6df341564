"""The training command's processes, read from Linux /proc: who is in its group, who runs whom, who writes what.

The harness starts the command in a process group of its own. These helpers answer what the stop needs to know:
which processes the stop signal must reach (`stop_targets`), whether any is still alive (`live_group_pids`), whether
all are frozen (`group_stopped`) and which checkpoint files they hold open for writing (`files_open_for_writing`).
As a child subreaper (`become_subreaper`) the harness is also the parent of every process the command orphans, and
`reap_adopted` collects how they ended (from wait(2), not /proc). Every helper tolerates processes that exit while it
looks, and returns nothing when /proc cannot be read.
"""

from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

# prctl(2): the orphans of this process's descendants are re-parented to it, not to the namespace's init (Linux 3.4).
PR_SET_CHILD_SUBREAPER = 36

# A POSIX shell never passes a signal on to the command it runs: without a trap it dies at once and leaves the command
# running, with one it runs the trap only once the command has ended (bash(1), SIGNALS). `busybox` is the shell of
# small images (its `sh` applet).
SHELLS = frozenset({'sh', 'bash', 'dash', 'zsh', 'ksh', 'mksh', 'ash', 'busybox'})

# States in /proc/<pid>/stat of a thread that runs no more: stopped, traced, zombie, dead.
_HALTED = frozenset({'T', 't', 'Z', 'X', 'x'})
_GONE = frozenset({'Z', 'X', 'x'})


class ProcessInfo(NamedTuple):
    state: str
    ppid: int


def _stat(path: str) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) from a /proc stat file; None when it cannot be read (the process or thread is gone)."""
    try:
        with open(path, encoding='ascii', errors='replace') as stat:
            # The command name, in parentheses, may itself hold spaces and parentheses: fields follow the last ')'.
            fields = stat.read().rpartition(')')[2].split()
        return fields[0], int(fields[1]), int(fields[2])
    except (OSError, IndexError, ValueError):
        return None


def group_processes(pgid: int) -> dict[int, ProcessInfo]:
    """Every process of group `pgid`, zombies included, with its state and parent."""
    try:
        names = os.listdir('/proc')
    except OSError:
        return {}
    found: dict[int, ProcessInfo] = {}
    for name in names:
        if not name.isdigit():
            continue
        stat = _stat(f'/proc/{name}/stat')
        if stat is not None and stat[2] == pgid:
            found[int(name)] = ProcessInfo(stat[0], stat[1])
    return found


def group_pids(pgid: int) -> list[int]:
    """The processes of group `pgid`, zombies included."""
    return sorted(group_processes(pgid))


def live_group_pids(pgid: int) -> list[int]:
    """The processes of group `pgid` that have not exited (a zombie has: it only waits for its parent to reap it)."""
    return sorted(pid for pid, info in group_processes(pgid).items() if info.state not in _GONE)


def group_stopped(pgid: int) -> bool:
    """Whether every thread of every process of group `pgid` is stopped or dead.

    kill(SIGSTOP) only queues the signal: a thread running on another core, or inside a system call, stops a
    moment later, and until it has, it can still open (and truncate) a checkpoint file.
    """
    for pid in group_pids(pgid):
        try:
            tids = os.listdir(f'/proc/{pid}/task')
        except OSError:
            continue
        for tid in tids:
            stat = _stat(f'/proc/{pid}/task/{tid}/stat')
            if stat is not None and stat[0] not in _HALTED:
                return False
    return True


def become_subreaper() -> bool:
    """Makes this process the child subreaper of its descendants; whether that worked (Linux only).

    A process whose parent exits is then re-parented to this one instead of to init, so its exit status comes here:
    the trainer a wrapper shell leaves when it dies of the stop signal, the workers of a launcher that died. They
    must then be reaped here too (`reap_adopted`), or each stays a zombie until this process exits.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # no prctl (not Linux): orphans go to init, as before


def reap_adopted(leader: int) -> dict[int, int]:
    """Reaps the orphans re-parented to this process that have exited: its children outside its own process group,
    except `leader` (subprocess.Popen waits for it). This process's own subprocesses (`nvidia-smi` run by a thread,
    in this process's group) are left to whoever waits for them.

    Returns how each ended, as Popen reports it: the exit status, or minus the signal it died of. One system call when
    none has exited; none is reaped while a child that is not an orphan waits to be (a later call gets them).
    """
    ended: dict[int, int] = {}
    own_group = os.getpgrp()
    while True:
        try:
            # WNOWAIT: look without reaping, so that a status that is not ours to take stays where it is.
            waitable = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return ended  # no children at all
        if waitable is None or waitable.si_pid == leader:
            return ended
        stat = _stat(f'/proc/{waitable.si_pid}/stat')
        if stat is None or stat[2] == own_group:
            return ended
        try:
            pid, status = os.waitpid(waitable.si_pid, os.WNOHANG)
        except ChildProcessError:
            continue  # reaped meanwhile
        if pid != waitable.si_pid:
            return ended  # not waitable after all: look again on the next call
        ended[pid] = os.waitstatus_to_exitcode(status)


def is_shell(pid: int) -> bool | None:
    """Whether process `pid` runs a shell (by its executable, so a `#!/bin/bash` script named run.sh is one too).

    None when it cannot be told: the process has gone.
    """
    try:
        return os.path.basename(os.readlink(f'/proc/{pid}/exe')) in SHELLS
    except OSError:
        return None


def ignores_signal(pid: int, signum: int) -> bool:
    """Whether process `pid` ignores signal `signum` (SIG_IGN; e.g. SIGINT for what a shell starts with `&`)."""
    try:
        with open(f'/proc/{pid}/status', encoding='ascii', errors='replace') as status:
            mask = next((int(line.split()[1], 16) for line in status if line.startswith('SigIgn:')), 0)
    except (OSError, ValueError, IndexError):
        return False
    return bool(mask >> (signum - 1) & 1)


def _pipe_ends(pids: list[int]) -> tuple[dict[int, int], dict[int, set[int]]]:
    """Each process's stdin pipe (by inode), and for each pipe the processes holding its write end."""
    stdin: dict[int, int] = {}
    writers: dict[int, set[int]] = {}
    for pid in pids:
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f'/proc/{pid}/fd/{fd}')
                if not target.startswith('pipe:['):
                    continue
                inode = int(target[6:-1])
                if fd == '0':
                    stdin[pid] = inode
                with open(f'/proc/{pid}/fdinfo/{fd}', encoding='ascii') as info:
                    flags = next((int(line.split()[1], 8) for line in info if line.startswith('flags:')), 0)
                if flags & os.O_WRONLY:
                    writers.setdefault(inode, set()).add(pid)
            except (OSError, ValueError):
                continue  # the process or descriptor went away while we looked
    return stdin, writers


def stop_targets(pgid: int, orphans: bool) -> list[int]:
    """The processes of group `pgid` (led by process `pgid`) that a stop signal should go to.

    The leader gets it, as `docker stop` sends it to a container's first process; its children do not: a trainer's
    data-loader workers die of SIGTERM, and the trainer then fails fetching its next batch instead of saving; a
    launcher such as torchrun passes the signal on to its workers itself. A shell passes nothing on, so the commands
    it runs get it too, recursively, and so does the shell, so that it starts nothing more (`train && evaluate`, a
    loop). Once the leader has gone, and only if `orphans` (it died of a signal, leaving its work unattended), the
    processes whose parent is outside the group get it: those it left behind. A process reading a pipe that another
    process of the group writes to (`train.py | tee log`) is left out: it ends when its input does, and dying first
    it would break the writer's next print.
    """
    processes = {pid: info for pid, info in group_processes(pgid).items() if info.state not in _GONE}
    children: dict[int, list[int]] = {}
    for pid, info in processes.items():
        children.setdefault(info.ppid, []).append(pid)
    if pgid in processes:
        pending = [pgid]
    elif orphans:
        pending = [pid for pid, info in processes.items() if info.ppid not in processes]
    else:
        pending = []
    found: list[int] = []
    while pending:
        pid = pending.pop()
        below = children.get(pid)
        if below and is_shell(pid):
            pending.extend(below)
        found.append(pid)
    if len(found) > 1:
        stdin, writers = _pipe_ends(list(processes))
        found = [pid for pid in found if not writers.get(stdin.get(pid, -1), set()) - {pid}]
    return sorted(found)


def files_open_for_writing(pgid: int, directory: str) -> list[str]:
    """Files under `directory` that a process of group `pgid` has open for writing."""
    found: list[str] = []
    for pid in group_pids(pgid):
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            continue  # the process exited while we looked
        for fd in fds:
            target = _open_for_writing(pid, fd, directory)
            if target is not None:
                found.append(target)
    return sorted(set(found))


def _open_for_writing(pid: int, fd: str, directory: str) -> str | None:
    """The file under `directory` that descriptor `fd` of process `pid` has open for writing, if it does.

    Each descriptor is read on its own: a trainer opens and closes files all the time (a data loader's memmap per
    batch), and one closed between the listing and its readlink must not hide the others, a checkpoint being written
    among them.
    """
    try:
        target = os.readlink(f'/proc/{pid}/fd/{fd}')
        if not target.startswith(directory + os.sep):
            return None
        with open(f'/proc/{pid}/fdinfo/{fd}', encoding='ascii') as info:
            flags = next((int(line.split()[1], 8) for line in info if line.startswith('flags:')), 0)
    except (OSError, ValueError):
        return None  # closed, or the process exited, while we looked
    return target if flags & (os.O_WRONLY | os.O_RDWR) else None
