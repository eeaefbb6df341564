"""Fetches the job's code bundle (a .tar.gz in storage) and unpacks it safely into the work directory."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile

from trainyard_harness.checkpoints import sha256_file
from trainyard_harness.storage import StorageError, open_storage


class BundleError(Exception):
    """The code bundle could not be fetched or is not a safe, readable .tar.gz (exit 79)."""


class BundleReplaced(BundleError):
    """The code bundle is not the one submitted (its sha256 differs): running it again cannot help (exit 78)."""


class BundleRefused(BundleError):
    """The code bundle, the one submitted, holds what no bundle may (a path leading outside, a device, a path named
    twice, an entry of another kind than a file, folder or link): running it again cannot help (exit 78)."""


# Regular files, folders and links: what the API's reader (lambdas/shared/tarball.ts) accepts too, so the two see the
# same bundle. tarfile would also unpack a contiguous file (type 7) or a sparse one as a regular file, and a sparse
# entry of a few bytes as gigabytes.
_ALLOWED_TYPES = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE)


def _split(uri: str) -> tuple[str, str]:
    head, _, name = uri.rstrip('/').rpartition('/')
    return head, name


def _inside(path: str, root: str) -> bool:
    """Whether the resolved `path` is `root` or below it."""
    return path == root or path.startswith(root + os.sep)


def _check_member(member: tarfile.TarInfo, root: str) -> None:
    target = os.path.realpath(os.path.join(root, member.name))
    if not _inside(target, root):
        raise BundleRefused(f'code bundle entry {member.name!r} would be written outside {root}')
    if member.isdev() or member.isfifo():
        raise BundleRefused(f'code bundle entry {member.name!r} is a device or fifo, which bundles may not contain')
    if member.type not in _ALLOWED_TYPES or member.sparse is not None:
        raise BundleRefused(
            f'code bundle entry {member.name!r} is of tar type {member.type!r}'
            f'{" (sparse)" if member.sparse is not None else ""}: a bundle holds regular files, folders and links only'
        )
    if member.issym() or member.islnk():
        # A symbolic link is made in place of whatever the entry's path holds (an earlier link too): its target is
        # relative to the folder it is made in, not to where an earlier link of that name leads.
        base = os.path.realpath(os.path.dirname(os.path.join(root, member.name))) if member.issym() else root
        link = os.path.realpath(os.path.join(base, member.linkname))
        if not _inside(link, root):
            raise BundleRefused(f'code bundle link {member.name!r} -> {member.linkname!r} points outside the bundle')


def _check_names(members: list[tarfile.TarInfo]) -> None:
    """Refuses a bundle that names one path twice. A later entry of a name replaces what the earlier one made, so a link
    checked while it led inside can be turned to lead outside once another link on its way is replaced (`p -> a`,
    `s -> p/../x`, then `p -> .`). No packer writes a path twice; a bundle that does is refused whole."""
    seen: set[str] = set()
    for member in members:
        name = os.path.normpath(member.name)
        if name in seen:
            raise BundleRefused(f'code bundle names {member.name!r} twice; each path may appear once')
        seen.add(name)


def _checked_as_unpacked(members: list[tarfile.TarInfo], root: str):
    """Each member again, checked just before it is unpacked (extractall unpacks each as it comes). Where an entry
    leads depends on the links unpacked before it, which only the files on disk tell: `b -> .`, then `a -> b/..`
    (the parent of `root` once `b` exists), then `a/evil.txt` each look inside `root` when checked up front.
    Directories are made here, not by extractall: it sets a directory's mode and times only once everything is
    unpacked, through its path as it leads then, which a link unpacked after it could have turned outside `root`. A
    code bundle's directories need no mode or times of their own."""
    for member in members:
        _check_member(member, root)
        if member.isdir():
            os.makedirs(os.path.join(root, member.name), exist_ok=True)
            continue
        yield member


def _check_unpacked(root: str) -> None:
    """Walks what was unpacked, without following links, and refuses any link that leads outside `root` now."""
    for folder, directories, files in os.walk(root):
        for name in directories + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                if not _inside(os.path.realpath(path), root):
                    raise BundleRefused(f'code bundle link {os.path.relpath(path, root)!r} leads outside the bundle')


def fetch_bundle(code_uri: str, work_dir: str, s3_endpoint: str | None, sha256: str | None = None) -> str:
    """Downloads and unpacks `code_uri` into a fresh `work_dir`; returns `work_dir`. With `sha256`, a bundle whose
    digest differs (replaced in storage after the job was submitted) is refused before anything is unpacked."""
    head, name = _split(code_uri)
    try:
        storage = open_storage(head, s3_endpoint)
    except StorageError as error:
        raise BundleError(str(error)) from error
    with tempfile.TemporaryDirectory(prefix='trainyard-bundle-') as scratch:
        archive = os.path.join(scratch, name)
        try:
            storage.get_file(name, archive)
        except StorageError as error:
            raise BundleError(f'cannot fetch code bundle {code_uri}: {error}') from error
        if sha256 is not None and (found := sha256_file(archive)) != sha256:
            raise BundleReplaced(
                f'code bundle {code_uri} has sha256 {found}, not the {sha256} submitted: it was replaced after the job '
                'was submitted; submit the job again'
            )
        if os.path.isdir(work_dir):
            shutil.rmtree(work_dir)
        os.makedirs(work_dir)
        root = os.path.realpath(work_dir)
        try:
            _unpack(archive, root, code_uri)
        except BundleError:
            # What a refused bundle left is not run, and no link of it stays behind leading outside.
            shutil.rmtree(root, ignore_errors=True)
            os.makedirs(root, exist_ok=True)
            raise
    return work_dir


def _unpack(archive: str, root: str, code_uri: str) -> None:
    """Unpacks `archive` into the empty folder `root`, refusing what would lead outside it (BundleError)."""
    try:
        with tarfile.open(archive, 'r:gz') as tar:
            members = tar.getmembers()
            _check_names(members)
            for member in members:
                _check_member(member, root)  # a bundle refused before anything is written, where that tells
            if hasattr(tarfile, 'fully_trusted_filter'):
                # Members are vetted here on every Python alike; say so explicitly so newer ones apply no second
                # filter (the 'data' filter is missing from the 3.11 that runs the harness in local mode).
                tar.extractall(root, members=_checked_as_unpacked(members, root), filter='fully_trusted')
            else:
                tar.extractall(root, members=_checked_as_unpacked(members, root))
        _check_unpacked(root)
    except (tarfile.TarError, EOFError, ValueError) as error:
        # The bytes are the ones submitted (their sha256 was checked): a bundle tarfile cannot read stays unreadable.
        raise BundleRefused(f'code bundle {code_uri} is not a readable .tar.gz: {error}') from error
    except OSError as error:
        raise BundleError(f'code bundle {code_uri} could not be unpacked: {error}') from error
