"""Fetches the job's code bundle (a .tar.gz in storage) and unpacks it safely into the work directory."""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile

from trainyard_harness.storage import StorageError, open_storage


class BundleError(Exception):
    """The code bundle could not be fetched or is not a safe, readable .tar.gz (exit 79)."""


def _split(uri: str) -> tuple[str, str]:
    head, _, name = uri.rstrip('/').rpartition('/')
    return head, name


def _check_member(member: tarfile.TarInfo, root: str) -> None:
    target = os.path.realpath(os.path.join(root, member.name))
    if not (target == root or target.startswith(root + os.sep)):
        raise BundleError(f'code bundle entry {member.name!r} would be written outside {root}')
    if member.isdev() or member.isfifo():
        raise BundleError(f'code bundle entry {member.name!r} is a device or fifo, which bundles may not contain')
    if member.issym() or member.islnk():
        # A symbolic link is made in place of whatever the entry's path holds (an earlier link too): its target is
        # relative to the folder it is made in, not to where an earlier link of that name leads.
        base = os.path.realpath(os.path.dirname(os.path.join(root, member.name))) if member.issym() else root
        link = os.path.realpath(os.path.join(base, member.linkname))
        if not (link == root or link.startswith(root + os.sep)):
            raise BundleError(f'code bundle link {member.name!r} -> {member.linkname!r} points outside the bundle')


def _checked_as_unpacked(members: list[tarfile.TarInfo], root: str):
    """Each member again, checked just before it is unpacked (extractall unpacks each as it comes). Where an entry
    leads depends on the links unpacked before it, which only the files on disk tell: `b -> .`, then `a -> b/..`
    (the parent of `root` once `b` exists), then `a/evil.txt` each look inside `root` when checked up front."""
    for member in members:
        _check_member(member, root)
        yield member


def fetch_bundle(code_uri: str, work_dir: str, s3_endpoint: str | None) -> str:
    """Downloads and unpacks `code_uri` into a fresh `work_dir`; returns `work_dir`."""
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
        if os.path.isdir(work_dir):
            shutil.rmtree(work_dir)
        os.makedirs(work_dir)
        root = os.path.realpath(work_dir)
        try:
            with tarfile.open(archive, 'r:gz') as tar:
                members = tar.getmembers()
                for member in members:
                    _check_member(member, root)  # a bundle refused before anything is written, where that tells
                if hasattr(tarfile, 'fully_trusted_filter'):
                    # Members are vetted here on every Python alike; say so explicitly so newer ones apply no second
                    # filter (the 'data' filter is missing from the 3.11 that runs the harness in local mode).
                    tar.extractall(root, members=_checked_as_unpacked(members, root), filter='fully_trusted')
                else:
                    tar.extractall(root, members=_checked_as_unpacked(members, root))
        except (tarfile.TarError, OSError, EOFError) as error:
            raise BundleError(f'code bundle {code_uri} is not a readable .tar.gz: {error}') from error
    return work_dir
