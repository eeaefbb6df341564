"""bundle.py on bundles tarfile reads in ways the API's reader (lambdas/shared/tarball.ts) refuses: refused here too,
never a crash, and as the bad configuration it is (exit 78), not an infrastructure failure tried again."""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess

import pytest

from conftest import PYTHON, base_env, closed_port_endpoint
from trainyard_harness import bundle


def _header(name: bytes, size: int, typ: bytes = b'0') -> bytes:
    block = bytearray(512)
    block[0 : len(name)] = name
    block[100:108] = b'0000644\0'
    block[108:116] = b'0000000\0'
    block[116:124] = b'0000000\0'
    block[124:136] = b'%011o\0' % size
    block[136:148] = b'00000000000\0'
    block[148:156] = b' ' * 8
    block[156:157] = typ
    block[257:265] = b'ustar\x0000'
    block[148:156] = b'%06o\0 ' % sum(block)
    return bytes(block)


def _pad(data: bytes) -> bytes:
    return data + b'\0' * ((512 - len(data) % 512) % 512)


def _file(name: bytes, data: bytes, typ: bytes = b'0') -> bytes:
    return _header(name, len(data), typ) + _pad(data)


def _pax(records: list[tuple[str, str]]) -> bytes:
    body = b''
    for key, value in records:
        rest = f' {key}={value}\n'.encode()
        n = len(rest) + 1
        while n != len(rest) + len(str(n)):
            n = len(rest) + len(str(n))
        body += str(n).encode() + rest
    return _header(b'././@PaxHeader', len(body), b'x') + _pad(body)


def _bundle(tmp_path, *parts: bytes) -> str:
    path = tmp_path / 'code.tar.gz'
    path.write_bytes(gzip.compress(b''.join(parts) + b'\0' * 1024))
    return str(path)


@pytest.mark.parametrize('record', [('GNU.sparse.size', 'abc'), ('GNU.sparse.map', '')])
def test_malformed_sparse_pax_record_is_a_bundle_error_not_a_crash(tmp_path, record):
    """tarfile raises ValueError on these records: the bundle is refused, not a traceback (exit 1)."""
    archive = _bundle(tmp_path, _pax([record]), _file(b'train.py', b'print(1)\n'))
    root = tmp_path / 'work'
    root.mkdir()
    with pytest.raises(bundle.BundleError):
        bundle._unpack(archive, os.path.realpath(root), 'code.tar.gz')


def test_sparse_entry_cannot_unpack_past_the_api_limit(tmp_path):
    """A 2 KiB bundle whose PAX 1.0 sparse entry tarfile would expand to 5 GiB, past the 1 GiB the API allows."""
    sparse = _pax(
        [
            ('GNU.sparse.major', '1'),
            ('GNU.sparse.minor', '0'),
            ('GNU.sparse.name', 'big.bin'),
            ('GNU.sparse.realsize', str(5 * 2**30)),
        ]
    )
    archive = _bundle(tmp_path, sparse, _file(b'x.bin', b'1\n0\n0\n'.ljust(512, b'\0')))
    root = tmp_path / 'work'
    root.mkdir()
    try:
        bundle._unpack(archive, os.path.realpath(root), 'code.tar.gz')
    except bundle.BundleError:
        return
    sizes = {name: os.path.getsize(root / name) for name in os.listdir(root)}
    assert max(sizes.values(), default=0) <= 1024**3, sizes


def test_a_refused_bundle_is_bad_configuration_not_an_infrastructure_failure(tmp_path):
    """A bundle whose sha256 matched but that names a path twice is refused the same way on every attempt: exit 78
    (bad configuration), not 79, which the platform takes for an infrastructure failure and tries again."""
    archive = _bundle(tmp_path, _file(b'train.py', b'print(1)\n'), _file(b'train.py', b'print(2)\n'))
    digest = hashlib.sha256(open(archive, 'rb').read()).hexdigest()
    env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_CODE_URI=f'file://{archive}',
        TRAINYARD_CODE_SHA256=digest,
        TRAINYARD_WORK_DIR=str(tmp_path / 'code'),
    )
    done = subprocess.run(
        [PYTHON, '-m', 'trainyard_harness', '--', 'true'], env=env, capture_output=True, text=True, timeout=60
    )
    assert 'twice' in done.stdout + done.stderr
    assert done.returncode == 78, done.stdout[-2000:]
