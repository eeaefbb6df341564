"""The harness: fetch code, restore a checkpoint, run the user command, sync, handle interruptions, report."""

from __future__ import annotations

import faulthandler
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import IO, NoReturn, Sequence

from trainyard_harness import (
    EXIT_BAD_CONFIG,
    EXIT_CHECKPOINTED,
    EXIT_INFRASTRUCTURE,
    EXIT_RESUME_FAILED,
    RESERVED_EXIT_CODES,
)
from trainyard_harness.bundle import BundleError, BundleRefused, BundleReplaced, fetch_bundle
from trainyard_harness.checkpoints import (
    CheckpointStore,
    CheckpointSyncer,
    DirectoryChanged,
    RestoredFiles,
    UnfinishedWrite,
    is_log_file,
    saved_files,
    scan_directory,
    unfinished_save,
)
from trainyard_harness.imds import ImdsClient, InstanceAction, InterruptionPoller
from trainyard_harness.logs import Logger, write_or_drop
from trainyard_harness.metrics import (
    MAX_PARSED_LINE_CHARS,
    MetricsFileTail,
    MetricsLoop,
    MetricsRecorder,
    resolve_metrics_file,
)
from trainyard_harness.processes import (
    become_subreaper,
    files_open_for_writing,
    group_stopped,
    ignores_signal,
    is_shell,
    live_group_pids,
    reap_adopted,
    stop_targets,
)
from trainyard_harness.settings import ConfigError, Settings, load_settings, metrics_file_problem
from trainyard_harness.storage import StorageError, open_storage

FINAL_SYNC_ATTEMPTS = 3
OUTPUT_DRAIN_SECONDS = 5.0
KILL_WRITE_WAIT_SECONDS = 5.0
_PUMP_CHUNK_BYTES = 64 * 1024
_LINE_END = re.compile(rb'\r\n|[\r\n]')


def split_command(argv: Sequence[str]) -> list[str]:
    """The user command: everything after the first `--` (or all of argv when there is no `--`)."""
    args = list(argv)
    if '--' in args:
        return args[args.index('--') + 1 :]
    return args


def user_exit_code(returncode: int, log: Logger) -> int:
    """Maps the child's status to the harness's: signal N -> 128+N; 75/76/78/79 -> 1 so they keep their meaning."""
    if returncode < 0:
        return 128 - returncode
    if returncode in RESERVED_EXIT_CODES:
        log.warn('user_exit_code_remapped', user_exit_code=returncode, harness_exit_code=1)
        return 1
    return returncode


class Harness:
    """One attempt of one job."""

    def __init__(self, settings: Settings, log: Logger):
        self.settings = settings
        self.log = log
        self.stop_event = threading.Event()
        self.stop_reason: str | None = None
        self.stop_requested_at: float | None = None
        # Whether IMDS announced a spot interruption of this instance, whatever stopped the command first: progress.json
        # says so, so the lifecycle can tell a reclaim from another stop when the notice never reached the platform.
        self.spot_notice_seen = False
        self.child: subprocess.Popen[bytes] | None = None
        self.leader_is_shell = False
        # Stop signals that came after the stop was requested, in order (logged by the run loop, not the handler).
        self.repeated_stop_signals: list[str] = []

    # Called from the signal handler (main thread) or the IMDS poller thread.
    def request_stop(self, reason: str) -> None:
        """Asks the run loop to stop the child gracefully; later requests are ignored."""
        if self.stop_event.is_set():
            self.log.info('stop_already_requested', reason=reason)
            return
        self._set_stop(reason)

    def _set_stop(self, reason: str) -> None:
        self.stop_reason = reason
        self.stop_requested_at = time.monotonic()
        self.stop_event.set()

    def _on_signal(self, signum: int, _frame: object) -> None:
        # A signal handler runs on the main thread between two of its bytecodes, in the middle of a log write as
        # likely as not: writing a log line here would re-enter that stream's buffer (RuntimeError, the harness
        # dead before its final sync). A repeated stop (IMDS first, then the SIGTERM it announced) is noted and
        # logged by the run loop.
        name = signal.Signals(signum).name
        if self.stop_event.is_set():
            self.repeated_stop_signals.append(name)
        else:
            self._set_stop(name)

    def _on_notice(self, notice: InstanceAction) -> None:
        self.spot_notice_seen = True
        self.request_stop(f'spot-notice:{notice.action}')

    def _pump(
        self, source: io.BufferedReader, sink: IO[bytes], recorder: MetricsRecorder, shares_log: bool = False
    ) -> None:
        """Passes the command's output through as it comes and hands each line to the parser.

        Read as it arrives, not by lines: a progress bar (tqdm) redraws itself after a '\r' and ends its line only
        when done, so its output, and the steps in it, would show only then. A '\r' ends a line for the parser too,
        and of a line that never ends only its start is kept (MAX_PARSED_LINE_CHARS). Drained to the end even when
        nobody reads the sink any more: a command whose output pipe fills up blocks. Where the sink is the harness's own
        log stream (stderr), the logger writes it, so that a log line never lands in the middle of one of the command's.
        """
        partial = b''
        while chunk := source.read1(_PUMP_CHUNK_BYTES):
            if shares_log:
                self.log.pass_through(sink, chunk)
            else:
                write_or_drop(sink, chunk)
            *lines, partial = _LINE_END.split(partial + chunk)
            for line in lines:
                if line:
                    recorder.observe_line(line[:MAX_PARSED_LINE_CHARS].decode('utf-8', 'replace'))
            partial = partial[:MAX_PARSED_LINE_CHARS]
        if partial:
            recorder.observe_line(partial.decode('utf-8', 'replace'))
        source.close()

    def run(self) -> int:
        """Runs the attempt and returns the harness exit code."""
        # Handlers first: a SIGTERM during a long fetch or restore must not kill the harness without a clean exit.
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self._run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _run(self) -> int:
        s = self.settings
        started = time.monotonic()
        self.log.bind(job_id=s.job_id, attempt=s.attempt)
        self.log.info(
            'harness_start',
            command=s.command,
            checkpoint_uri=s.checkpoint_uri,
            metrics_uri=s.metrics_uri,
            node_index=s.node_index,
            main_node=s.is_main_node,
        )

        try:
            checkpoint_storage = open_storage(s.checkpoint_uri, s.s3_endpoint)
            metrics_storage = open_storage(s.metrics_uri, s.s3_endpoint)
        except StorageError as error:
            self.log.error('storage_unavailable', error=str(error))
            return EXIT_INFRASTRUCTURE

        cwd = os.getcwd()
        if s.code_uri:
            phase = time.monotonic()
            try:
                cwd = fetch_bundle(s.code_uri, s.work_dir, s.s3_endpoint, s.code_sha256)
            except BundleReplaced as error:
                self.log.error('code_bundle_replaced', error=str(error), exit_code=EXIT_BAD_CONFIG)
                return EXIT_BAD_CONFIG
            except BundleRefused as error:
                self.log.error('code_bundle_refused', error=str(error), exit_code=EXIT_BAD_CONFIG)
                return EXIT_BAD_CONFIG
            except BundleError as error:
                self.log.error('code_bundle_unavailable', error=str(error))
                return EXIT_INFRASTRUCTURE
            self.log.info('code_bundle_fetched', work_dir=cwd, duration_s=round(time.monotonic() - phase, 3))

        # Checked here as well as in the settings: a relative one is relative to the command's working directory,
        # which may be the code bundle's.
        metrics_file = resolve_metrics_file(s.metrics_file, cwd)
        if s.metrics_file is not None and metrics_file is not None and os.path.isdir(metrics_file):
            problems = [metrics_file_problem(s.metrics_file, metrics_file)]
            self.log.error('bad_configuration', problems=problems, exit_code=EXIT_BAD_CONFIG)
            return EXIT_BAD_CONFIG

        recorder = MetricsRecorder(
            metrics_storage, s.job_id, s.attempt, s.total_steps, s.metrics_patterns, self.log
        )
        store = CheckpointStore(checkpoint_storage, s.keep_checkpoints, self.log)
        command = list(s.command)
        phase = time.monotonic()
        try:
            recorder.load_previous()
            restored = store.restore_newest(s.checkpoint_dir)
        except (StorageError, OSError) as error:
            self.log.error('checkpoint_restore_failed', error=str(error))
            return EXIT_INFRASTRUCTURE
        os.makedirs(s.checkpoint_dir, exist_ok=True)
        syncer = CheckpointSyncer(
            store,
            s.checkpoint_dir,
            s.job_id,
            s.attempt,
            s.sync_interval_seconds,
            s.settle_seconds,
            lambda: recorder.step,
            self.log,
            lambda: self._checkpoint_files_open_for_writing(self.child),
            s.checkpoint_done_file,
        )
        if restored is not None:
            command += s.resume_args
            recorder.resumed_from_step = restored.get('step')
            baseline = scan_directory(s.checkpoint_dir)
            syncer.set_baseline(baseline, restored)
            # Until the command reports a step, saves over what was restored or writes its done file after a save
            # (within the window a silent failure is judged in), a snapshot is the restored checkpoint plus whatever
            # the script wrote beside it (its config, a log): uploaded, it would count as progress, hide a checkpoint
            # that cannot be loaded from the fallback, and in a few attempts prune the good ones. A new file alone
            # does not end the hold: it may be a config written before the load failed; nor does a restored file
            # written again with the bytes it was restored with (RestoredFiles). A stop the harness sent, or a command
            # that exits 0, still uploads it (see the final sync), carrying the restored checkpoint's failure markers.
            hold_until = time.monotonic() + s.resume_failure_window_seconds
            done_file = s.checkpoint_done_file
            restored_files = RestoredFiles(s.checkpoint_dir, baseline, restored)
            syncer.hold_while(
                lambda current: recorder.step is None
                and time.monotonic() < hold_until
                and restored_files.intact(current)
                and (done_file is None or unfinished_save(current, done_file, baseline) is not None)
            )
            self.log.info(
                'checkpoint_restored',
                checkpoint=restored['checkpoint'],
                step=restored.get('step'),
                from_attempt=restored.get('attempt'),
                resume_failures=restored['resume_failures'],
                set_aside_newer=restored['set_aside_newer'],
                resume_args=s.resume_args,
                duration_s=round(time.monotonic() - phase, 3),
            )
        else:
            self.log.info('no_checkpoint_to_restore', duration_s=round(time.monotonic() - phase, 3))

        metrics_tail = None
        if metrics_file is not None:
            metrics_tail = MetricsFileTail(metrics_file, recorder, self.log)
            skipped = metrics_tail.skip_existing()
            if skipped:
                # Restored with the checkpoint, or left by the last attempt: metrics.jsonl has these samples already.
                self.log.info('metrics_file_earlier_lines_skipped', path=metrics_file, bytes=skipped)

        env = dict(os.environ)
        env.update(
            TRAINYARD_CHECKPOINT_DIR=s.checkpoint_dir,
            TRAINYARD_RESUMED='1' if restored is not None else '0',
            TRAINYARD_ATTEMPT=str(s.attempt),
        )
        env.setdefault('PYTHONUNBUFFERED', '1')

        return self._supervise(command, cwd, env, recorder, metrics_tail, syncer, started, restored)

    def _supervise(
        self,
        command: list[str],
        cwd: str,
        env: dict[str, str],
        recorder: MetricsRecorder,
        metrics_tail: MetricsFileTail | None,
        syncer: CheckpointSyncer,
        started: float,
        restored: dict | None,
    ) -> int:
        s = self.settings
        if self.stop_event.is_set():
            # Stopped before training began: storage holds exactly what it held before, so resuming is safe.
            self.log.info('stopped_before_start', reason=self.stop_reason)
            recorder.state, recorder.exit_code = 'checkpointed', EXIT_CHECKPOINTED
            self._final_metrics(recorder)
            return EXIT_CHECKPOINTED
        # Before the command starts, so that every process it orphans, however early, comes to the harness.
        subreaper = become_subreaper()
        try:
            child = subprocess.Popen(
                command,
                cwd=cwd,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # own process group: the stop signal reaches the whole training tree
            )
        except OSError as error:
            code = 127 if isinstance(error, FileNotFoundError) else 126
            self.log.error('user_command_not_started', error=str(error), exit_code=code)
            recorder.state, recorder.exit_code = 'failed', code
            self._final_metrics(recorder)
            return code
        self.child = child
        # Read now, and again at the stop (`bash -c 'python train.py'` execs python): once the process is gone its
        # executable cannot be read. Popen returns after the exec.
        self.leader_is_shell = bool(is_shell(child.pid))
        recorder.state = 'running'
        self.log.info('user_command_started', pid=child.pid, command=command, cwd=cwd, subreaper=subreaper)

        assert child.stdout is not None and child.stderr is not None
        pumps = [
            threading.Thread(target=self._pump, args=(child.stdout, sys.stdout.buffer, recorder), daemon=True),
            threading.Thread(target=self._pump, args=(child.stderr, sys.stderr.buffer, recorder, True), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        child_started_at = time.monotonic()
        metrics_loop = MetricsLoop(recorder, min(s.sync_interval_seconds, 60.0), self.log, metrics_tail)
        if s.is_main_node:
            syncer.start()
            metrics_loop.start()
        poller = InterruptionPoller(ImdsClient(s.imds_endpoint), s.imds_poll_seconds, self._on_notice, self.log)
        poller.start()

        signal_sent_at: float | None = None
        signalled: set[int] = set()
        reached: set[int] = set()
        awaited: set[int] = {child.pid}
        shells: set[int] = set()
        adopted: dict[int, int] = {}
        killed = False
        torn_files: list[str] = []
        returncode: int | None = None
        leader_exited_at: float | None = None
        while True:
            if returncode is None:
                try:
                    returncode = child.wait(timeout=0.1)
                    leader_exited_at = time.monotonic()
                except subprocess.TimeoutExpired:
                    pass
            # A leader that ended before the signal was due keeps its own status (see _exit_code).
            if self.stop_event.is_set() and not killed and (returncode is None or signal_sent_at is not None):
                if signal_sent_at is None:
                    signal_sent_at = time.monotonic()
                    leader_runs = is_shell(child.pid) if returncode is None else None
                    if leader_runs is not None:
                        self.leader_is_shell = leader_runs
                    targets = self._pass_stop_on(child, returncode, signalled, reached, awaited, shells)
                    self.log.info('stop_signal_sent', signal=s.stop_signal.name, reason=self.stop_reason, pids=targets)
                else:
                    # Commands a trapping shell starts after the signal, orphans of a launcher that died of it.
                    targets = self._pass_stop_on(child, returncode, signalled, reached, awaited, shells)
                    if targets:
                        self.log.info('stop_signal_passed_on', signal=s.stop_signal.name, pids=targets)
            # Orphans of the command that have exited: each is a zombie, holding a pid, until reaped. Only the statuses
            # of processes the stop reached are kept: a pid reaped before it was signalled may have been reused since.
            adopted.update(self._reached_statuses(reap_adopted(child.pid), reached))
            if returncode is not None and (
                signal_sent_at is None or killed or not awaited.intersection(live_group_pids(child.pid))
            ):
                # While stopping, wait for every process the stop signal reached and that can act on it: a trainer
                # run by a shell or a launcher may still be saving after the process the harness started has exited.
                # The rest (workers, a monitor that ignores the signal) is killed below, as after any exit.
                break
            if signal_sent_at is not None and not killed and time.monotonic() - signal_sent_at > s.stop_grace_seconds:
                killed = True
                syncer.pause()  # nothing more from the background: the final sync judges what the kill left
                torn_files = self._kill_between_writes(child)
                self.log.warn('stop_grace_expired', grace_s=s.stop_grace_seconds, action='SIGKILL', torn_files=torn_files)
            if returncode is not None:
                time.sleep(0.1)
        child_exited_at = time.monotonic()
        if not killed:
            # Processes that outlive the leader (dataloader workers, daemons) would keep the pipes open.
            self._signal_group(child, signal.SIGKILL)
        adopted.update(self._reached_statuses(reap_adopted(child.pid), reached))
        for pump in pumps:
            pump.join(OUTPUT_DRAIN_SECONDS)
        # The IMDS poller and the metrics loop may be in a slow call (a request, nvidia-smi for up to 10 s, a metrics
        # upload): they are told to stop now and waited for after the final sync, which at a stop has what is left
        # of the container's stop window. The syncer is waited for: an upload in progress holds the final sync's lock.
        poller.stopped.set()
        metrics_loop.stopped.set()
        syncer.stop()
        try:
            metrics_loop.read_file()  # its last lines: a step there is progress (the hold, judging a resume)
        except Exception as error:  # progress is advisory: nothing in reading it may keep the final sync from running
            self.log.warn('metrics_file_read_failed', error=f'{type(error).__name__}: {error}')
        assert returncode is not None and leader_exited_at is not None
        for name in self.repeated_stop_signals:
            self.log.info('stop_already_requested', reason=name)
        self.log.info(
            'user_command_exited',
            returncode=returncode,
            stop_requested=self.stop_event.is_set(),
            group_outlived_leader_s=round(child_exited_at - leader_exited_at, 3),
        )

        sync_started = time.monotonic()
        sync_error: str | None = None
        manifest = None
        unsafe = self._unsafe_to_upload(
            child.pid, returncode, killed, torn_files, child_exited_at, reached, shells, adopted
        )
        if s.is_main_node and not unsafe:
            # A command that exited 0 on its own has finished: what it wrote is its result, held or not.
            honour_hold = signal_sent_at is None and returncode != 0
            # Stopped, it may have saved or not yet loaded: what is held is still the restored checkpoint, markers and
            # all. Exited 0 on its own, it was seen to work.
            seen_to_work = signal_sent_at is None and returncode == 0
            manifest, sync_error, unsafe = self._final_sync(syncer, honour_hold, inherit_failures=not seen_to_work)
        sync_done = time.monotonic()
        self.log.info(
            'final_sync',
            checkpoint=(manifest or syncer.last_manifest or {}).get('checkpoint'),
            uploaded=manifest is not None,
            skipped=unsafe,
            main_node=s.is_main_node,
            duration_s=round(sync_done - sync_started, 3),
            ok=sync_error is None,
        )
        poller.stop()
        metrics_loop.stop()  # before the final metrics upload, so that none of its own lands after it

        stopped_by_us = signal_sent_at is not None
        code = self._exit_code(returncode, stopped_by_us, killed)
        if sync_error is not None:
            self.log.error('final_sync_gave_up', error=sync_error, would_have_exited=code)
            code = EXIT_INFRASTRUCTURE
        elif restored is not None and not stopped_by_us and s.is_main_node:
            code = self._judge_resume(code, restored, recorder, syncer, child_exited_at - child_started_at)
        recorder.exit_code = code
        recorder.state = {0: 'succeeded', EXIT_CHECKPOINTED: 'checkpointed', EXIT_INFRASTRUCTURE: 'infrastructure'}.get(
            code, 'failed'
        )
        self._final_metrics(recorder)
        finished = time.monotonic()
        if stopped_by_us and self.stop_requested_at is not None and signal_sent_at is not None:
            self.log.info(
                'stop_phases',
                reason=self.stop_reason,
                request_to_signal_s=round(signal_sent_at - self.stop_requested_at, 3),
                signal_to_exit_s=round(child_exited_at - signal_sent_at, 3),
                wind_down_s=round(sync_started - child_exited_at, 3),
                final_sync_s=round(sync_done - sync_started, 3),
                final_metrics_s=round(finished - sync_done, 3),
                total_s=round(finished - self.stop_requested_at, 3),
                killed_after_grace=killed,
            )
        self.log.info('harness_exit', exit_code=code, state=recorder.state, duration_s=round(finished - started, 3))
        return code

    def _final_sync(
        self, syncer: CheckpointSyncer, honour_hold: bool, inherit_failures: bool = True
    ) -> tuple[dict | None, str | None, bool]:
        """The final upload: its manifest (None when nothing new was uploaded), why it failed (None when it did not),
        and whether it was skipped because a file of the save is torn.

        A file that changed while it was uploaded is tried again, FINAL_SYNC_ATTEMPTS times in all: its writer may
        have been finishing. A file that its own format shows was cut off (UnfinishedWrite) is not: its writer is
        gone and nobody will finish it. That is the command's save cut short (a launcher that SIGKILLed a worker
        mid-save at the stop, a crash or a full disk mid-save), like a file open for writing at the harness's SIGKILL,
        not storage failing: the upload is skipped, the last complete checkpoint stays the newest, and the exit code
        stays the one the command's end gives. Only storage that fails, or a file that changes on every try, fails
        the final sync (exit 79).
        """
        error: str | None = None
        for attempt in range(1, FINAL_SYNC_ATTEMPTS + 1):
            try:
                return syncer.sync('final', honour_hold=honour_hold, inherit_failures=inherit_failures), None, False
            except UnfinishedWrite as torn:
                self.log.warn(
                    'final_sync_skipped',
                    reason=f'a checkpoint file is cut off mid-write: {torn}',
                    files=[os.path.join(syncer.local_dir, torn.path)],
                )
                return None, None, True
            except DirectoryChanged as changed:
                error = str(changed)
                self.log.info('final_sync_retry', attempt=attempt, reason=error)
            except (StorageError, OSError) as failed:
                error = str(failed)
                self.log.warn('final_sync_failed', attempt=attempt, error=error)
        return None, error, False

    def _exit_code(self, returncode: int, stopped_by_us: bool, killed_by_us: bool) -> int:
        """The documented rule (README "Finished or stopped early?").

        If the harness sent the stop signal, the attempt is "checkpointed, resume me" (75) however the command ended:
        its status then says how it took the stop, not whether it can train. torchrun exits 1 after its workers have
        saved, and a script whose shutdown code fails still has its last checkpoint. A failure of the
        command's own shows again in the next attempt, which no stop interrupts. A status other than the ones a
        stop explains (0, death by the stop signal or by the harness's SIGKILL, 128 + either) is
        logged as `stopped_command_failed`. If the harness never sent a signal, the child's own status is reported
        (0 stays 0 even if a notice arrived after it finished).
        """
        if not stopped_by_us:
            return user_exit_code(returncode, self.log)
        stop = int(self.settings.stop_signal)
        explained = {0, -stop, 128 + stop}
        if killed_by_us:
            explained |= {-int(signal.SIGKILL), 128 + int(signal.SIGKILL)}
        if returncode not in explained:
            self.log.warn('stopped_command_failed', returncode=returncode, exit_code=EXIT_CHECKPOINTED)
        return EXIT_CHECKPOINTED

    def _judge_resume(
        self, code: int, restored: dict, recorder: MetricsRecorder, syncer: CheckpointSyncer, ran_s: float
    ) -> int:
        """The exit code after an attempt that resumed from `restored` ended on its own with `code` after `ran_s`.

        A command that failed soon after it started (within TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS), before
        reporting a step and before saving a checkpoint, may not be able to load the one it was given (garbage written
        by the script, a file cut short by a crash that storage cannot see). The checkpoint gets this attempt's marker; set aside
        after SET_ASIDE_AFTER_FAILURES of them, the next restore falls back to the one before. While a checkpoint that
        is not set aside remains, the attempt exits 76 (run me again); otherwise with the command's own code. A command
        that ran longer had loaded its checkpoint, whatever its output says: its failure keeps its code.
        """
        if code in (0, EXIT_CHECKPOINTED) or recorder.step is not None or syncer.last_manifest is not None:
            return code
        if ran_s > self.settings.resume_failure_window_seconds:
            self.log.info('resume_not_judged', checkpoint=restored['checkpoint'], exit_code=code, ran_s=round(ran_s, 1))
            return code
        try:
            folder, retry = syncer.store.record_resume_failure(restored['checkpoint'], self.settings.attempt, code)
        except (StorageError, OSError) as error:
            self.log.warn('resume_failure_not_recorded', checkpoint=restored['checkpoint'], error=str(error))
            return code
        self.log.warn(
            'resume_failed',
            checkpoint=restored['checkpoint'],
            exit_code=code,
            resume_failures=folder.resume_failures,
            set_aside=folder.set_aside,
            retry=retry,
        )
        return EXIT_RESUME_FAILED if retry else code

    def _kill_between_writes(self, child: subprocess.Popen[bytes]) -> list[str]:
        """SIGKILLs the group, but not while it holds a checkpoint file open for writing (if avoidable).

        The group is frozen with SIGSTOP, the harness waits until every thread has actually stopped, and /proc is
        inspected; if a file under the checkpoint directory is open for writing, the group is resumed briefly so
        the write can finish, for at most KILL_WRITE_WAIT_SECONDS. Returns the files that may be torn: those still
        open for writing at the kill, or every file of the directory if the group never stopped.
        """
        deadline = time.monotonic() + KILL_WRITE_WAIT_SECONDS
        while True:
            self._signal_group(child, signal.SIGSTOP)
            stopped = group_stopped(child.pid)
            while not stopped and time.monotonic() < deadline:
                time.sleep(0.001)
                # Again each time: a process forked just before the group stopped never received the first one.
                self._signal_group(child, signal.SIGSTOP)
                stopped = group_stopped(child.pid)
            open_files = self._checkpoint_files_open_for_writing(child)
            if (stopped and not open_files) or time.monotonic() >= deadline:
                break
            self._signal_group(child, signal.SIGCONT)
            time.sleep(0.02)  # let the writer run on; polled, because the harness cannot be told when it closes
        self._signal_group(child, signal.SIGKILL)
        if not stopped:
            # Killed at an unknown point of its work: nothing it was writing can be told apart from what it was not.
            directory = os.path.realpath(self.settings.checkpoint_dir)
            return sorted(os.path.join(directory, relative) for relative in saved_files(scan_directory(directory)))
        return open_files

    def _checkpoint_files_open_for_writing(self, child: subprocess.Popen[bytes] | None) -> list[str]:
        """Checkpoint files the child's process group holds open for writing (a log it keeps open is none); none
        before the child starts."""
        if child is None:
            return []
        found = files_open_for_writing(child.pid, os.path.realpath(self.settings.checkpoint_dir))
        return [path for path in found if not is_log_file(path)]

    def _unsafe_to_upload(
        self,
        leader: int,
        returncode: int,
        killed: bool,
        torn_files: list[str],
        exited_at: float,
        reached: set[int],
        shells: set[int],
        adopted: dict[int, int],
    ) -> bool:
        """Whether the final upload must be skipped because the local checkpoint may be half written.

        A child killed by SIGKILL while holding a checkpoint file open may have been mid-write, and so may one that
        died of a signal within the settle window of its last checkpoint write (nanoGPT writes ckpt.pt in place).
        The same holds for each process the stop signal `reached`: one seen dying of a signal, and one whose end the
        harness did not see (`adopted` holds the statuses it reaped: a shell's command re-parented to it when the shell
        died; one a trapping shell waited for itself is not there). A shell writes no checkpoint: its own death by a
        signal is harmless once the stop has reached its commands (and so is its end unseen: a shell that died of the
        signal may be reaped by the shell that ran it), but its 128 + N reports a command's death by signal N. The last
        upload made while the child ran stays the newest. With a done file the window is not needed: the final sync
        then uploads only a save whose done file was written after every other file of it.
        """
        if killed and torn_files:
            self.log.warn('final_sync_skipped', reason='checkpoint file open for writing at SIGKILL', files=torn_files)
            return True
        if killed or self.settings.checkpoint_done_file is not None:
            return False
        died_of_signal: list[int] = []
        unseen: list[int] = []
        for pid in sorted(reached | {leader}):
            status = returncode if pid == leader else adopted.get(pid)
            shell = self.leader_is_shell if pid == leader else pid in shells
            if status is None:
                if not shell:  # a shell's commands were reached with it and are judged on their own
                    unseen.append(pid)
            elif (status < 0 and not (shell and pid in reached)) or (shell and 128 < status <= 128 + 64):
                died_of_signal.append(pid)
        if not died_of_signal and not unseen:
            return False
        signature = saved_files(scan_directory(self.settings.checkpoint_dir))
        newest = max((mtime for _size, mtime, _ino in signature.values()), default=0) / 1e9
        age = time.time() - (time.monotonic() - exited_at) - newest
        if signature and age < self.settings.settle_seconds:
            self.log.warn(
                'final_sync_skipped',
                reason=(
                    'a process of the command died of a signal right after a checkpoint write (it may be torn)'
                    if died_of_signal
                    else 'the stop reached processes whose end the harness cannot see (the commands of a shell that '
                    'waits for them), right after a checkpoint write (it may be torn): run the trainer with exec, '
                    'or set a done file'
                ),
                returncode=returncode,
                died_of_signal_pids=died_of_signal,
                unseen_pids=unseen,
                seconds_since_write=round(age, 3),
            )
            return True
        return False

    def _pass_stop_on(
        self,
        child: subprocess.Popen[bytes],
        returncode: int | None,
        signalled: set[int],
        reached: set[int],
        awaited: set[int],
        shells: set[int],
    ) -> list[int]:
        """Sends the stop signal to the group's processes that should get it (`stop_targets`) and have not yet.

        Orphans get it only once the leader has died of a signal. Each process reached joins `reached`, the shells
        among them `shells`, and each one that can act on it (does not ignore it) `awaited`: the stop waits for it to
        exit.
        """
        stop = self.settings.stop_signal
        orphans = returncode is not None and returncode < 0
        sent = []
        for pid in stop_targets(child.pid, orphans):
            if pid in signalled:
                continue
            signalled.add(pid)
            # Read before the signal: a shell without a trap dies at once, and then /proc no longer tells.
            shell, ignoring = is_shell(pid), ignores_signal(pid, stop)
            try:
                os.kill(pid, stop)
            except ProcessLookupError:
                continue  # it exited while we looked
            reached.add(pid)
            sent.append(pid)
            if shell:
                shells.add(pid)
            if not ignoring:
                awaited.add(pid)
        return sent

    @staticmethod
    def _reached_statuses(reaped: dict[int, int], reached: set[int]) -> dict[int, int]:
        return {pid: status for pid, status in reaped.items() if pid in reached}

    def _signal_group(self, child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            pass  # the group is already gone

    def _final_metrics(self, recorder: MetricsRecorder) -> None:
        if not self.settings.is_main_node:
            return
        recorder.spot_notice = self.spot_notice_seen
        try:
            recorder.upload(force=True)
        except Exception as error:  # progress is advisory; the exit code already says what happened
            self.log.warn('metrics_final_upload_failed', error=str(error))


def _dump_stacks_on_sigusr1() -> None:
    """`kill -USR1 <harness pid>` writes every thread's stack to stderr (the attempt's log); the run goes on."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass  # stderr is not a real file (an embedding host captured it): nothing to dump to


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point: `trainyard-harness -- <command...>`."""
    args = sys.argv[1:] if argv is None else argv
    _dump_stacks_on_sigusr1()
    log = Logger()
    try:
        settings = load_settings(os.environ, split_command(args))
    except ConfigError as error:
        log.error('bad_configuration', problems=error.problems, exit_code=EXIT_BAD_CONFIG)
        sys.stderr.write(str(error) + '\n')
        return EXIT_BAD_CONFIG
    return Harness(settings, log).run()


def entry_point() -> NoReturn:
    """The process's entry (`trainyard-harness`, `python -m trainyard_harness`): runs `main` and ends the process with
    its code at once, without the interpreter's shutdown. Everything the harness writes is flushed as it is written
    and the final upload is done when `main` returns, so the shutdown has nothing left to do for the attempt; but it
    can hang (collecting what is left, running finalizers, tearing down daemon threads that may still be in a system
    call), and a harness that does not end keeps its attempt RUNNING, and billed, until Batch's timeout. One was seen
    in local mode alive after `harness_exit`, its one thread in the garbage collector. A harness bug (an exception out
    of `main`) is reported as Python reports it, with Python's status for it, 1."""
    try:
        code = main()
    except Exception:
        traceback.print_exc()
        code = 1
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


if __name__ == '__main__':
    entry_point()
