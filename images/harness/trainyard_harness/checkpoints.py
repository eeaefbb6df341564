"""Checkpoint folders in storage: manifest-last snapshots, restore of the newest complete one, retention.

Layout under the checkpoint prefix: `ckpt-000001/<files...>` and `ckpt-000001/MANIFEST.json`, the manifest written
last. A checkpoint is complete only when its manifest exists and every file it lists has the listed size and sha256.
An attempt that restored a checkpoint and failed before any progress leaves `RESUME_FAILED-<attempt>.json` beside
it; after SET_ASIDE_AFTER_FAILURES of those the checkpoint is set aside and restore falls back to the one before.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from stat import S_ISREG
from typing import Callable

from trainyard_harness.logs import Logger
from trainyard_harness.storage import SourceChanged, Storage, StorageError, StoredObject, escapes

MANIFEST_NAME = 'MANIFEST.json'
MANIFEST_FORMAT = 1
_FOLDER = re.compile(r'^ckpt-([0-9]{6,})/(.+)$')
_RESUME_FAILED = re.compile(r'^RESUME_FAILED-([0-9]+)\.json$')
SET_ASIDE_AFTER_FAILURES = 2
# Background snapshots abandoned in a row (a file changed while uploading) before the harness warns that no checkpoint
# is getting through.
ABANDONED_BEFORE_WARNING = 3
# After a background upload fails (storage unreachable, throttling), the watcher waits this long before it tries again,
# twice as long after each further failure, up to the most: each try hashes the whole directory and takes a folder
# number. The final sync tries whatever the wait.
UPLOAD_RETRY_FIRST_SECONDS = 10.0
UPLOAD_RETRY_MAX_SECONDS = 300.0
_TEMPORARY_SUFFIXES = ('.tmp', '.temp', '.part', '.partial', '.swp', '~')
# Dotfiles that are never a writer's finished output: NFS silly-renames, LibreOffice and Emacs locks.
_TEMPORARY_PREFIXES = ('.nfs', '.~lock.', '.#')

Signature = dict[str, tuple[int, int, int]]

# Files a training script appends to while it runs and that often share the checkpoint directory: text logs, JSON-lines
# metrics, TensorBoard event files, W&B offline runs. A checkpoint takes them as they stand (a copy, so what is listed
# is what was uploaded), but they are not what a save writes: their changes neither start an upload, nor hold one back
# (settling, open for writing, a done file), nor make one torn.
_LOG_SUFFIXES = ('.log', '.jsonl', '.wandb')
_LOG_PREFIXES = ('events.out.tfevents.',)


def is_log_file(path: str) -> bool:
    """Whether a file of the checkpoint directory is a log the trainer appends to (by name; see _LOG_SUFFIXES)."""
    name = os.path.basename(path)
    return name.endswith(_LOG_SUFFIXES) or name.startswith(_LOG_PREFIXES)


# A zip archive (what torch.save writes, and numpy's .npz) ends with its end-of-central-directory record: 22 bytes and a
# comment of at most 65,535, written last. One without it was cut off mid-write.
_ZIP_LOCAL_HEADER = b'PK\x03\x04'
_ZIP_END_RECORD = b'PK\x05\x06'
_ZIP_END_RECORD_SIZE = 22
_ZIP_TAIL_BYTES = _ZIP_END_RECORD_SIZE + 65535


def unfinished_write(path: str) -> str | None:
    """Why a file is, by its own format, a write that was cut off (a zip archive such as torch.save's without its end
    record; a safetensors file shorter than its header says); None when it is complete or its format is not one of
    those. A save the trainer's launcher killed mid-write, or that a stalled writer left half done, is never uploaded
    as a checkpoint, whatever the harness knew of the processes that wrote it."""
    with open(path, 'rb') as handle:
        size = os.fstat(handle.fileno()).st_size
        head = handle.read(8)
        if head.startswith(_ZIP_LOCAL_HEADER):
            handle.seek(max(0, size - _ZIP_TAIL_BYTES))
            tail = handle.read()
            at = tail.rfind(_ZIP_END_RECORD)
            while at >= 0:
                comment = int.from_bytes(tail[at + 20 : at + 22], 'little')
                if at + _ZIP_END_RECORD_SIZE + comment == len(tail):
                    return None
                at = tail.rfind(_ZIP_END_RECORD, 0, at)
            return f'a zip archive (as torch.save writes) of {size} bytes without its end record: cut off mid-write'
        if path.endswith('.safetensors'):
            if len(head) < 8:
                return f'a safetensors file of {size} bytes, shorter than its header length'
            length = int.from_bytes(head, 'little')
            if 8 + length > size:
                return f'a safetensors header of {length} bytes in a file of {size}: cut off mid-write'
            try:
                header = json.loads(handle.read(length))
                end = max((int(v['data_offsets'][1]) for k, v in header.items() if k != '__metadata__'), default=0)
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                return f'a safetensors file of {size} bytes whose header does not parse: cut off mid-write'
            if 8 + length + end > size:
                return f'a safetensors file whose tensors end at byte {8 + length + end}, of {size}: cut off mid-write'
    return None


@dataclass(frozen=True)
class Uploaded:
    """A checkpoint in storage and the local files it was taken from: what a later snapshot may copy from it."""

    checkpoint: str
    files: dict[str, dict]
    signature: Signature

    @classmethod
    def of(cls, manifest: dict, signature: Signature) -> Uploaded:
        """From a manifest as upload_snapshot or restore_newest returns it (with its `checkpoint` name)."""
        return cls(manifest['checkpoint'], {entry['path']: entry for entry in manifest['files']}, dict(signature))

    def reusable(self, scanned: Signature) -> dict[str, dict]:
        """The manifest entries of the files scanned exactly as they were when this checkpoint took them."""
        return {
            path: self.files[path]
            for path, stat in saved_files(scanned).items()
            if path in self.files and self.signature.get(path) == stat and self.files[path]['size'] == stat[0]
        }


def saved_files(signature: Signature) -> Signature:
    """The files of a scan that a save writes: every one but the logs."""
    return {path: stat for path, stat in signature.items() if not is_log_file(path)}


class RestoredFiles:
    """
    Whether the files restored from a checkpoint still hold what was restored, judged on a scan of the directory.

    A file whose size, mtime or inode changed is read and compared with the restored manifest's sha256 when its size is
    the restored one: a script that writes its run config beside the checkpoint again before it loads the model (the
    same bytes, since the attempt that saved the checkpoint wrote them too) has saved nothing. A file gone, resized or
    holding other bytes is a save. A file is hashed once per state it is seen in (the syncer asks about a directory
    that has settled, not on every change).
    """

    def __init__(self, local_dir: str, baseline: Signature, manifest: dict):
        self._dir = local_dir
        self._restored = saved_files(baseline)
        self._hashes = {entry['path']: entry.get('sha256') for entry in manifest.get('files', [])}
        self._judged: dict[str, tuple[tuple[int, int, int], bool]] = {}  # path -> (a later state, restored bytes?)

    def intact(self, current: Signature) -> bool:
        """True when every restored file holds the bytes it was restored with."""
        for path, restored in self._restored.items():
            now = current.get(path)
            if now == restored:
                continue
            if now is None or now[0] != restored[0]:
                return False
            judged = self._judged.get(path)
            if judged is None or judged[0] != now:
                judged = (now, self._holds_restored_bytes(path))
                self._judged[path] = judged
            if not judged[1]:
                return False
        return True

    def _holds_restored_bytes(self, path: str) -> bool:
        expected = self._hashes.get(path)
        if expected is None:
            return False
        try:
            return sha256_file(os.path.join(self._dir, path)) == expected
        except OSError:
            return False  # gone or unreadable since the scan: not what was restored


def unfinished_save(signature: Signature, done_file: str, uploaded: Signature) -> str | None:
    """
    Why the directory does not hold a finished save by the trainer's own word, or None when it does. A trainer that
    names a done file (TRAINYARD_CHECKPOINT_DONE_FILE) writes it after every file of a save: the directory holds a
    finished save when that file was written since the last upload and nothing in it is newer. So a save that pauses
    between files (gathering shards, computing the next state) is never uploaded half old, half new.
    """
    marker = signature.get(done_file)
    if marker is None:
        return f'{done_file} has not been written'
    saved = saved_files(signature)
    newer = sorted(path for path, (_, mtime_ns, _) in saved.items() if path != done_file and mtime_ns > marker[1])
    if newer:
        return f'{len(newer)} file(s) written after {done_file}, a save in progress: {", ".join(newer[:3])}'
    if uploaded.get(done_file) == marker:
        return f'{done_file} has not been written again since the last upload'
    return None


class DirectoryChanged(Exception):
    """A checkpoint file changed while it was being uploaded, so this snapshot is abandoned (no manifest)."""

    def __init__(self, message: str, path: str):
        super().__init__(message)
        self.path = path


class SnapshotCancelled(Exception):
    """A background snapshot given up between files because the harness is stopping (the final sync takes over)."""


class UnfinishedWrite(DirectoryChanged):
    """A checkpoint file is, by its format, cut off mid-write (`unfinished_write`): the snapshot is not made."""


def folder_name(index: int) -> str:
    """`ckpt-000001` for index 1."""
    return f'ckpt-{index:06d}'


def is_temporary(relative_path: str) -> bool:
    """Files a writer has not finished (tmp names, locks) are never uploaded: atomic writers rename them later.

    Other dotfiles are checkpoint files like any: PyTorch's distributed checkpoints keep their index in `.metadata`
    (written as `.metadata.tmp`, then renamed), and a checkpoint uploaded without it cannot be loaded. A top-level
    `MANIFEST.json` would take the place of the folder's own manifest, so it is left out too; one in a subdirectory
    is a file like any.
    """
    name = os.path.basename(relative_path)
    return name.endswith(_TEMPORARY_SUFFIXES) or name.startswith(_TEMPORARY_PREFIXES) or relative_path == MANIFEST_NAME


def scan_directory(root: str, left_out: list[str] | None = None) -> Signature:
    """Relative path -> (size, mtime_ns, inode) for every finished regular file under `root` (a FIFO or a socket is
    no checkpoint, and reading a FIFO would block the sync for ever).

    A file or directory whose name is not valid UTF-8 (legal on Linux: a name written under a Latin-1 locale) is left
    out: no object key can name it, and S3 refusing its upload would fail every snapshot of the job as if storage
    were unreachable. Each one is added to `left_out` as `printable_path` shows it (a directory once, ending in '/').
    """
    signature: Signature = {}
    if not os.path.isdir(root):
        return signature
    for directory, dirs, files in os.walk(root):
        folder = os.path.relpath(directory, root).replace(os.sep, '/')
        prefix = '' if folder == '.' else folder + '/'
        kept = []
        for name in dirs:
            if name.startswith('.'):
                continue  # caches and tools' state (.cache, .git), not checkpoints
            if not _is_utf8(name):
                _note(left_out, prefix + name + '/')
                continue
            kept.append(name)
        dirs[:] = kept
        for name in files:
            relative = prefix + name
            if is_temporary(relative):
                continue
            if not _is_utf8(name):
                _note(left_out, relative)
                continue
            try:
                stat = os.stat(os.path.join(directory, name))
            except FileNotFoundError:
                continue  # renamed or deleted between listing and stat
            if not S_ISREG(stat.st_mode):
                continue
            signature[relative] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return signature


def _is_utf8(name: str) -> bool:
    """Whether a name as os.walk gives it was valid UTF-8 on disk (bytes that were not are lone surrogates here)."""
    try:
        name.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


def printable_path(relative: str) -> str:
    """A path as a log can show it: its bytes that are not UTF-8 written as \\xNN (`caf\\xe9.txt`)."""
    return os.fsencode(relative).decode('utf-8', 'backslashreplace')


def _note(left_out: list[str] | None, relative: str) -> None:
    if left_out is not None:
        left_out.append(printable_path(relative))


def sha256_file(path: str) -> str:
    """Hex sha256 of a file, read in 8 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        while chunk := handle.read(8 * 1024 * 1024):
            digest.update(chunk)
    return digest.hexdigest()


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec='milliseconds').replace('+00:00', 'Z')


@dataclass(frozen=True)
class Folder:
    """One `ckpt-N/` folder as listed: its index, its objects, and its manifest if one was written."""

    index: int
    objects: dict[str, StoredObject]

    @property
    def has_manifest(self) -> bool:
        return MANIFEST_NAME in self.objects

    @property
    def resume_failures(self) -> int:
        """Attempts that restored this checkpoint and then failed before any progress (one marker each)."""
        return sum(1 for name in self.objects if _RESUME_FAILED.match(name))

    @property
    def set_aside(self) -> bool:
        """Failed to resume from often enough that restore prefers an older checkpoint."""
        return self.resume_failures >= SET_ASIDE_AFTER_FAILURES


def resume_failure_marker(attempt: int) -> str:
    """The marker an attempt leaves beside a checkpoint it could not resume from (one per attempt: idempotent)."""
    return f'RESUME_FAILED-{attempt:06d}.json'


def _staging_parent(local_dir: str) -> str:
    """
    Where a restore is staged: beside `local_dir`, or inside it when it is a mount point (a volume of its own). The
    staged files are renamed into place, and a rename across filesystems fails with EXDEV.
    """
    local = local_dir.rstrip('/') or '/'
    parent = os.path.dirname(local) or '/'
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(local) and os.stat(local).st_dev != os.stat(parent).st_dev:
        return local
    return parent


def _replace_contents(local_dir: str, staging: str) -> None:
    """Makes `local_dir` hold exactly the staged files (the directory itself may be a mount point, so it stays)."""
    os.makedirs(local_dir, exist_ok=True)
    for name in os.listdir(local_dir):
        path = os.path.join(local_dir, name)
        if os.path.samefile(path, staging):
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for name in os.listdir(staging):
        os.replace(os.path.join(staging, name), os.path.join(local_dir, name))


class CheckpointStore:
    """Reads and writes checkpoint folders under one storage prefix."""

    def __init__(self, storage: Storage, keep: int, log: Logger):
        self.storage = storage
        self.keep = keep
        self.log = log
        # The highest folder number this store has taken: an abandoned snapshot deletes its folder, and its number is
        # never taken again, so no folder is ever written twice.
        self._taken = 0
        self._left_out_named: set[str] = set()  # files `scan` warned it leaves out: each is named once, not per scan

    def scan(self, local_dir: str) -> Signature:
        """`scan_directory`, warning once about each file it leaves out of every checkpoint (a name that is not
        UTF-8), so that a checkpoint missing a file the trainer wrote says why."""
        left_out: list[str] = []
        signature = scan_directory(local_dir, left_out)
        unnamed = [path for path in left_out if path not in self._left_out_named]
        if unnamed:
            self._left_out_named.update(unnamed)
            self.log.warn(
                'checkpoint_files_left_out',
                reason='their names are not valid UTF-8, which object storage keys must be: rename them to be saved',
                paths=unnamed,
            )
        return signature

    def folders(self) -> dict[int, Folder]:
        """Every ckpt-N folder in storage, by index."""
        grouped: dict[int, dict[str, StoredObject]] = {}
        for item in self.storage.list('ckpt-'):
            match = _FOLDER.match(item.key)
            if match:
                grouped.setdefault(int(match.group(1)), {})[match.group(2)] = item
        return {index: Folder(index, objects) for index, objects in grouped.items()}

    def read_manifest(self, folder: Folder) -> dict | None:
        """The folder's manifest if present and well formed, and every listed file exists with the listed size."""
        if not folder.has_manifest:
            return None
        raw = self.storage.get_bytes(f'{folder_name(folder.index)}/{MANIFEST_NAME}')
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            files = manifest['files']
            for entry in files:
                if not isinstance(entry['path'], str) or not isinstance(entry['size'], int):
                    return None
                if not isinstance(entry['sha256'], str):
                    return None
        except (ValueError, KeyError, TypeError):
            self.log.warn('checkpoint_manifest_invalid', checkpoint=folder_name(folder.index))
            return None
        for entry in files:
            stored = folder.objects.get(entry['path'])
            if stored is None or stored.size != entry['size']:
                return None
        return manifest

    def complete_indices(self, folders: dict[int, Folder] | None = None) -> list[int]:
        """Indices of folders whose manifest exists and whose listed sizes match, oldest first."""
        folders = self.folders() if folders is None else folders
        return sorted(i for i, folder in folders.items() if self.read_manifest(folder) is not None)

    def usable_indices(self, folders: dict[int, Folder] | None = None) -> list[int]:
        """Complete checkpoints that are not set aside, oldest first."""
        folders = self.folders() if folders is None else folders
        return [i for i in self.complete_indices(folders) if not folders[i].set_aside]

    def restore_newest(self, local_dir: str) -> dict | None:
        """Downloads the newest complete checkpoint into `local_dir` (replacing its contents); None if there is none.

        Hashes are checked after download; a folder whose bytes do not match its manifest is skipped for the next
        older one, so a partial or corrupted upload is never restored. Checkpoints set aside (attempts kept failing
        right after restoring them) come last: one is restored only when no other complete checkpoint is left, since
        a job should not start again from nothing while its saved state exists. The returned manifest carries the
        folder's name (`checkpoint`), how often resuming from it failed (`resume_failures`) and the newer checkpoints
        passed over because they are set aside (`set_aside_newer`).
        """
        folders = self.folders()
        newest_first = sorted(folders, reverse=True)
        for index in sorted(newest_first, key=lambda i: folders[i].set_aside):  # stable: newest first within each
            folder = folders[index]
            manifest = self.read_manifest(folder)
            if manifest is None:
                if folder.objects:
                    self.log.info('checkpoint_skipped_incomplete', checkpoint=folder_name(index))
                continue
            staging = tempfile.mkdtemp(prefix='.restore-', dir=_staging_parent(local_dir))
            try:
                if self._download_verified(folder, manifest, staging):
                    _replace_contents(local_dir, staging)
                    manifest['checkpoint'] = folder_name(index)
                    manifest['resume_failures'] = folder.resume_failures
                    manifest['set_aside_newer'] = [folder_name(i) for i in newest_first if i > index and folders[i].set_aside]
                    return manifest
                self.log.warn('checkpoint_skipped_hash_mismatch', checkpoint=folder_name(index))
            finally:
                if os.path.isdir(staging):
                    shutil.rmtree(staging)
        return None

    def _download_verified(self, folder: Folder, manifest: dict, staging: str) -> bool:
        for entry in manifest['files']:
            if escapes(entry['path']):  # a manifest that would write outside the checkpoint directory
                return False
            target = os.path.join(staging, os.path.normpath(entry['path']))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self.storage.get_file(f'{folder_name(folder.index)}/{entry["path"]}', target)
            if os.path.getsize(target) != entry['size'] or sha256_file(target) != entry['sha256']:
                return False
        return True

    def record_resume_failure(self, checkpoint: str, attempt: int, exit_code: int) -> tuple[Folder, bool]:
        """Marks `checkpoint` as one this attempt could not resume from.

        Returns the folder as it now stands and whether a usable checkpoint (complete, not set aside) remains, both
        from one listing. One marker per attempt, so a repeated call (a retried report) counts once.
        """
        match = re.fullmatch(r'ckpt-([0-9]{6,})', checkpoint)
        if match is None:
            raise ValueError(f'not a checkpoint folder name: {checkpoint!r}')
        marker = {'attempt': attempt, 'exit_code': exit_code, 'created_at': _now_iso()}
        self.storage.put_bytes(json.dumps(marker).encode(), f'{checkpoint}/{resume_failure_marker(attempt)}')
        folders = self.folders()
        index = int(match.group(1))
        return folders.get(index, Folder(index, {})), bool(self.usable_indices(folders))

    def upload_snapshot(
        self,
        local_dir: str,
        job_id: str,
        attempt: int,
        step: int | None,
        accept: Callable[[Signature], bool] = lambda _: True,
        previous: Uploaded | None = None,
        markers_from: str | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> dict | None:
        """Uploads every finished file of `local_dir` as a new folder, manifest last; None when there is nothing a save
        wrote, or when `accept` refuses the files as scanned.

        With `markers_from` (a checkpoint folder's name), the new folder gets that folder's resume-failure markers
        before its manifest: a snapshot of a restored checkpoint nothing has been seen to load is that checkpoint
        again, and resuming from it has failed as often. When `cancelled()` turns true between files, the snapshot is
        given up (SnapshotCancelled) and what it had uploaded deleted.

        A saved file unchanged since `previous` (the same size, mtime and inode as when that checkpoint took it) is
        copied from it within the store instead of uploaded again: a directory that keeps large files from save to save
        (a frozen base model, the last few checkpoints of a trainer that keeps them) costs a snapshot only what changed,
        and the final sync inside a spot notice's two minutes too. A copy that fails is uploaded after all.

        A saved file cut off mid-write by its own format (`unfinished_write`) stops the snapshot before anything is
        uploaded (UnfinishedWrite). Each saved file is hashed, uploaded, then stat-ed again: if it changed meanwhile
        the snapshot is abandoned (DirectoryChanged) before any manifest is written, so storage never claims a torn
        checkpoint is complete, and what it had uploaded is deleted. Logs (`is_log_file`) go last, each from a copy
        taken then, whatever they do.
        """
        signature = self.scan(local_dir)
        if not saved_files(signature) or not accept(signature):
            return None
        folders = self.folders()
        index = max(max(folders, default=0), self._taken) + 1
        name = folder_name(index)
        for relative in sorted(saved_files(signature)):
            try:
                why = unfinished_write(os.path.join(local_dir, relative))
            except FileNotFoundError as error:  # a trainer that keeps its last few saves deleted one
                raise DirectoryChanged(f'{relative} disappeared before its upload', relative) from error
            if why is not None:
                raise UnfinishedWrite(f'{relative} is {why}', relative)
        self._taken = index
        entries: dict[str, dict] = {}
        reusable = previous.reusable(signature) if previous is not None else {}
        copied: list[str] = []
        try:
            for relative in sorted(saved_files(signature)):
                if cancelled():
                    raise SnapshotCancelled(f'{name} given up before {relative}: the harness is stopping')
                entry = reusable.get(relative)
                if entry is not None and self._copy(f'{previous.checkpoint}/{relative}', f'{name}/{relative}'):
                    entries[relative] = entry
                    copied.append(relative)
                else:
                    entries[relative] = self._upload_saved(local_dir, relative, signature[relative], name)
            for relative in sorted(set(signature) - set(entries)):
                entry = self._upload_log(local_dir, relative, name)
                if entry is not None:
                    entries[relative] = entry
        except (DirectoryChanged, SnapshotCancelled) as stopped:
            # The changed file may have been uploaded before it was seen.
            changed = [stopped.path] if isinstance(stopped, DirectoryChanged) else []
            for relative in {*entries, *changed}:
                try:
                    self.storage.delete(f'{name}/{relative}')
                except StorageError:
                    pass  # a leftover without a manifest is never restored, and prune removes it
            raise
        inherited = self._inherit_markers(folders, markers_from, name) if markers_from is not None else 0
        manifest = {
            'format': MANIFEST_FORMAT,
            'job_id': job_id,
            'attempt': attempt,
            'step': step,
            'created_at': _now_iso(),
            'files': [entries[relative] for relative in sorted(entries)],
        }
        self.storage.put_bytes(json.dumps(manifest, indent=2).encode(), f'{name}/{MANIFEST_NAME}')
        manifest['checkpoint'] = name
        manifest['signature'] = signature
        manifest['copied'] = copied
        manifest['inherited_resume_failures'] = inherited
        return manifest

    def _inherit_markers(self, folders: dict[int, Folder], source: str, name: str) -> int:
        """Writes into folder `name` a marker for each resume-failure marker of folder `source`; how many."""
        match = re.fullmatch(r'ckpt-([0-9]{6,})', source)
        folder = folders.get(int(match.group(1))) if match else None
        markers = sorted(n for n in (folder.objects if folder else {}) if _RESUME_FAILED.match(n))
        for marker in markers:
            body = {'inherited_from': source, 'created_at': _now_iso()}
            self.storage.put_bytes(json.dumps(body).encode(), f'{name}/{marker}')
        return len(markers)

    def _copy(self, source: str, key: str) -> bool:
        """Copies a stored file within the store; False (logged) when the store refused, so the caller uploads it."""
        try:
            self.storage.copy(source, key)
            return True
        except StorageError as error:
            self.log.warn('checkpoint_copy_failed', source=source, key=key, error=str(error), action='uploaded instead')
            return False

    def _upload_saved(self, local_dir: str, relative: str, scanned: tuple[int, int, int], folder: str) -> dict:
        """Uploads one file a save wrote; DirectoryChanged when it is not, after the upload, the file scanned."""
        full = os.path.join(local_dir, relative)
        try:
            digest = sha256_file(full)
        except FileNotFoundError as error:
            raise DirectoryChanged(f'{relative} disappeared before its upload', relative) from error
        try:
            self.storage.put_file(full, f'{folder}/{relative}')
        except SourceChanged as error:
            raise DirectoryChanged(f'{relative} changed during upload ({error})', relative) from error
        try:
            stat = os.stat(full)
        except FileNotFoundError as error:
            raise DirectoryChanged(f'{relative} disappeared during upload', relative) from error
        if (stat.st_size, stat.st_mtime_ns, stat.st_ino) != scanned:
            raise DirectoryChanged(f'{relative} changed during upload', relative)
        return {'path': relative, 'size': stat.st_size, 'sha256': digest}

    def _upload_log(self, local_dir: str, relative: str, folder: str) -> dict | None:
        """Uploads a copy of a log as it stands now (None when it is gone): its size and hash are the copy's."""
        with tempfile.TemporaryDirectory(prefix='trainyard-log-') as scratch:
            copy = os.path.join(scratch, 'log')
            try:
                shutil.copyfile(os.path.join(local_dir, relative), copy)
            except FileNotFoundError:
                return None
            self.storage.put_file(copy, f'{folder}/{relative}')
            return {'path': relative, 'size': os.path.getsize(copy), 'sha256': sha256_file(copy)}

    def prune(self) -> list[int]:
        """Keeps the newest K usable checkpoints (complete, not set aside); deletes older ones, and partial or
        set-aside folders older than the newest usable one. Never deletes the newest usable one, nor anything while
        there is none. Returns the deleted indices."""
        folders = self.folders()
        usable = self.usable_indices(folders)
        if not usable:
            return []
        kept = set(usable[-self.keep :])
        newest = usable[-1]
        doomed = [i for i in sorted(folders) if i not in kept and i < newest]
        for index in doomed:
            objects = folders[index].objects
            # Manifest first: the folder stops counting as complete before any of its files disappear.
            if MANIFEST_NAME in objects:
                self.storage.delete(f'{folder_name(index)}/{MANIFEST_NAME}')
            for relative in objects:
                if relative != MANIFEST_NAME:
                    self.storage.delete(f'{folder_name(index)}/{relative}')
        return doomed


class CheckpointSyncer:
    """Uploads the local checkpoint directory when it settles after a write and every sync interval.

    A directory that has settled may still hold a half-written file: a writer that stalls mid-write (blocked on a
    slow disk, descheduled, stopped) changes nothing for as long as it stalls. So a background upload waits while
    `open_for_writing` names files the training process holds open for writing, for at most one sync interval;
    after that it goes ahead (`checkpoint_upload_while_open`), since a script may keep a log open there for good.

    With a `done_file`, every upload (the final one too) waits for the trainer to say a save is finished (see
    `unfinished_save`); a trainer stopped mid-save leaves the previous checkpoint the newest.
    """

    def __init__(
        self,
        store: CheckpointStore,
        local_dir: str,
        job_id: str,
        attempt: int,
        interval_seconds: float,
        settle_seconds: float,
        step_provider: Callable[[], int | None],
        log: Logger,
        open_for_writing: Callable[[], list[str]] = lambda: [],
        done_file: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.store = store
        self.clock = clock  # what the watcher times settling, intervals and retries by
        self.done_file = done_file
        self._waiting: str | None = None
        self.local_dir = local_dir
        self.job_id = job_id
        self.attempt = attempt
        self.interval_seconds = interval_seconds
        self.settle_seconds = settle_seconds
        self.step_provider = step_provider
        self.log = log
        self.open_for_writing = open_for_writing
        self.uploaded: Signature = {}
        self.last_manifest: dict | None = None
        self._previous: Uploaded | None = None
        self._hold: Callable[[Signature], bool] = lambda _current: False
        self._held = False
        self._restored_checkpoint: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._abandoned_in_a_row = 0
        self._paused = threading.Event()

    def _stopping(self) -> bool:
        return self._stop.is_set() or self._paused.is_set()

    def pause(self) -> None:
        """Starts no more background uploads, and gives up one in progress at its next file (the final sync still
        runs): called before the harness kills the trainer, whose files it can no longer judge from the background once
        the writer is gone."""
        self._paused.set()

    def set_baseline(self, signature: Signature, restored: dict | None = None) -> None:
        """Marks the directory's current contents as already in storage (after a restore); with the restored
        checkpoint's manifest, later snapshots copy the files still as restored from it."""
        self.uploaded = dict(signature)
        if restored is not None:
            self._previous = Uploaded.of(restored, signature)
            self._restored_checkpoint = restored['checkpoint']

    def hold_while(self, hold: Callable[[Signature], bool]) -> None:
        """Uploads nothing while `hold(directory)` is true, except a final sync that does not honour it."""
        self._hold = hold

    def held(self, current: Signature) -> bool:
        """Whether uploads are held for this directory; logs when a hold begins."""
        held = self._hold(current)
        if held and not self._held:
            self.log.info('checkpoint_upload_held', reason='the restored checkpoint is unchanged and nothing ran yet')
        self._held = held
        return held

    def sync(
        self,
        reason: str,
        honour_hold: bool = True,
        cancelled: Callable[[], bool] = lambda: False,
        inherit_failures: bool = True,
    ) -> dict | None:
        """Uploads a new checkpoint if the directory differs from the last upload; None when unchanged or empty.

        A snapshot taken while uploads are held (a final sync that does not honour the hold, at a stop) is the restored
        checkpoint as far as anyone has seen: it carries that checkpoint's resume-failure markers, unless
        `inherit_failures` is false (the command exited 0: it was seen to work). `cancelled` gives up a snapshot
        between files (the background's, when the harness stops)."""
        with self._lock:
            current = self.store.scan(self.local_dir)
            saved = saved_files(current)
            if not saved or saved == saved_files(self.uploaded):
                return None  # a log that grew is uploaded with the next save, not as one
            # Not honoured (a final sync at a stop), the hold is only asked whether this is the restored checkpoint.
            held = self.held(current) if honour_hold else self._hold(current)
            if honour_hold and held:
                return None
            if self.done_file is not None:
                why = unfinished_save(current, self.done_file, self.uploaded)
                if why is not None:
                    self._note_waiting(reason, why, never_written=self.done_file not in current)
                    return None
            started = time.monotonic()
            manifest = self.store.upload_snapshot(
                self.local_dir,
                self.job_id,
                self.attempt,
                self.step_provider(),
                self._accepts,
                self._previous,
                markers_from=self._restored_checkpoint if held and inherit_failures else None,
                cancelled=cancelled,
            )
            if manifest is None:
                return None
            self._waiting = None
            self._abandoned_in_a_row = 0
            self.uploaded = manifest.pop('signature')
            copied = manifest.pop('copied')
            inherited = manifest.pop('inherited_resume_failures')
            self.last_manifest = manifest
            self._previous = Uploaded.of(manifest, self.uploaded)
            total = sum(entry['size'] for entry in manifest['files'])
            copied_bytes = sum(entry['size'] for entry in manifest['files'] if entry['path'] in copied)
            deleted = self.store.prune()
            self.log.info(
                'checkpoint_uploaded',
                reason=reason,
                checkpoint=manifest['checkpoint'],
                step=manifest['step'],
                files=len(manifest['files']),
                bytes=total,
                copied_files=len(copied),
                copied_bytes=copied_bytes,
                **({'inherited_resume_failures': inherited, 'from_checkpoint': self._restored_checkpoint} if inherited else {}),
                duration_s=round(time.monotonic() - started, 3),
                pruned=[folder_name(i) for i in deleted],
            )
            return manifest

    def _accepts(self, signature: Signature) -> bool:
        """Whether a snapshot of these files may be uploaded: always, or with a done file, a finished save."""
        return self.done_file is None or unfinished_save(signature, self.done_file, self.uploaded) is None

    def _note_waiting(self, reason: str, why: str, never_written: bool) -> None:
        """
        Logs why no upload was made: the final sync always (the trainer stopped mid-save), otherwise on change; a
        warning while the done file was never written, since a script that never writes it is never checkpointed.
        """
        if reason == 'final':
            self.log.warn('checkpoint_save_unfinished', done_file=self.done_file, reason=why)
        elif why != self._waiting:
            log = self.log.warn if never_written else self.log.info
            log('checkpoint_upload_waiting_for_done_file', done_file=self.done_file, reason=why)
        self._waiting = why

    def start(self) -> None:
        """Starts the background watcher thread."""
        self._thread = threading.Thread(target=self._run, name='checkpoint-sync', daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the watcher, giving up a background upload in progress at its next file (the final sync follows)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        tick = max(0.05, min(1.0, self.settle_seconds / 2 if self.settle_seconds else 0.5))
        seen: Signature = {}
        changed_at = self.clock()
        last_interval = self.clock()
        deferred_since: float | None = None
        unfinished: Signature | None = None  # the files as they were when a save was found cut off
        failures = 0  # uploads failed in a row
        retry_at = 0.0
        while not self._stop.wait(tick):
            if self._paused.is_set():
                continue
            now = self.clock()
            try:
                scanned = scan_directory(self.local_dir)
                current = saved_files(scanned)  # logs change all the time: a save settles
                if current != seen:
                    seen, changed_at = current, now
                if now < retry_at:
                    continue  # backing off after a failed upload (changes are still tracked above)
                settled = now - changed_at >= self.settle_seconds
                # A save the done file does not call finished waits for the interval (which logs why), rather than
                # looking at /proc and scanning again on every tick.
                fresh = current and current != saved_files(self.uploaded)
                if fresh and settled and current != unfinished and self._accepts(scanned) and not self.held(current):
                    reason = 'settled'
                elif now - last_interval >= self.interval_seconds:
                    reason = 'interval'
                else:
                    continue
                busy = self.open_for_writing() if fresh else []
                if busy:
                    if deferred_since is None:
                        deferred_since = now
                        self.log.info('checkpoint_upload_deferred', reason=reason, open_for_writing=busy)
                    if now - deferred_since < self.interval_seconds:
                        continue
                    self.log.warn(
                        'checkpoint_upload_while_open',
                        reason=reason,
                        open_for_writing=busy,
                        deferred_s=round(now - deferred_since, 3),
                    )
                deferred_since = None
                last_interval = now
                if self.sync(reason, cancelled=self._stopping) is not None and failures:
                    self.log.info('checkpoint_upload_recovered', failed_attempts=failures)
                    failures = 0
            except SnapshotCancelled as error:
                self.log.info('checkpoint_upload_given_up', reason=str(error))
            except DirectoryChanged as error:
                # A save found cut off is tried again once a file changes (the writer went on) or at the interval.
                unfinished = current if isinstance(error, UnfinishedWrite) else None
                self._abandoned_in_a_row += 1
                self.log.info('checkpoint_upload_retry', reason=str(error))
                if self._abandoned_in_a_row == ABANDONED_BEFORE_WARNING:
                    self.log.warn(
                        'checkpoint_upload_keeps_changing',
                        path=error.path,
                        reason=str(error),
                        abandoned=self._abandoned_in_a_row,
                        advice='the trainer rewrites its checkpoint faster than it uploads, or leaves a save '
                        'unfinished: save less often, or name a done file it writes after each save '
                        '(trainyard submit --checkpoint-done-file)',
                    )
            except (StorageError, OSError) as error:
                failures += 1
                delay = min(UPLOAD_RETRY_MAX_SECONDS, UPLOAD_RETRY_FIRST_SECONDS * 2 ** min(failures - 1, 16))
                retry_at = now + delay
                if failures == 1:  # once a streak; `checkpoint_upload_recovered` ends it
                    self.log.warn('checkpoint_upload_failed', error=str(error), retry_in_s=delay)
