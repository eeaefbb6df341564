"""Object storage behind one small interface: `s3://` (boto3, endpoint overridable) and `file://` (a directory)."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Protocol


# The largest object S3's CopyObject copies in one request.
COPY_OBJECT_MAX_BYTES = 5 * 1024 * 1024 * 1024


class StorageError(Exception):
    """Storage could not be reached or refused an operation (the harness exits 79 when it cannot proceed)."""


class SourceChanged(StorageError):
    """A file being uploaded was replaced, deleted or shrank meanwhile: the upload stopped instead of sending a short
    body (or failing as if storage had)."""


@dataclass(frozen=True)
class StoredObject:
    """One object under a storage prefix: its key relative to the prefix and its size in bytes."""

    key: str
    size: int


class Storage(Protocol):
    """A prefix in an object store; every key is relative to that prefix and uses `/` separators."""

    uri: str

    def put_file(self, local_path: str, key: str) -> None: ...

    def put_bytes(self, data: bytes, key: str) -> None: ...

    def copy(self, source_key: str, key: str) -> None:
        """Copies an object within the prefix, in the store (no bytes through this host)."""
        ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def get_file(self, key: str, local_path: str) -> None: ...

    def list(self, prefix: str = '') -> list[StoredObject]: ...

    def delete(self, key: str) -> None: ...


def escapes(relative: str) -> bool:
    """Whether a relative key or path leads outside the folder it is relative to: an absolute one, or one whose first
    component, once normalised, is '..'. A name that only starts with dots ('..keep', '...') is a name like any."""
    normalized = os.path.normpath(relative)
    return os.path.isabs(normalized) or normalized.split(os.sep, 1)[0] == os.pardir


class FileStorage:
    """`file:///dir` storage; writes go to a temporary name and are renamed so readers never see partial objects."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip('/')
        self.root = uri[len('file://') :].rstrip('/') or '/'

    def _path(self, key: str) -> str:
        if escapes(key):
            raise StorageError(f'key {key!r} escapes the storage prefix {self.uri}')
        return os.path.join(self.root, os.path.normpath(key))

    def _atomic_write(self, key: str, writer) -> None:
        target = self._path(key)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix='.upload-')
            try:
                with os.fdopen(fd, 'wb') as handle:
                    writer(handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, target)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError as error:
            raise StorageError(f'cannot write {self.uri}/{key}: {error}') from error

    def put_file(self, local_path: str, key: str) -> None:
        try:
            source = open(local_path, 'rb')
        except FileNotFoundError as error:
            raise SourceChanged(f'{local_path} was deleted before its upload') from error
        except OSError as error:
            raise StorageError(f'cannot write {self.uri}/{key}: {error}') from error
        with source:
            self._atomic_write(key, lambda handle: shutil.copyfileobj(source, handle, 8 * 1024 * 1024))

    def put_bytes(self, data: bytes, key: str) -> None:
        self._atomic_write(key, lambda handle: handle.write(data))

    def copy(self, source_key: str, key: str) -> None:
        source = self._path(source_key)

        def copy(handle) -> None:
            with open(source, 'rb') as stored:
                shutil.copyfileobj(stored, handle, 8 * 1024 * 1024)

        self._atomic_write(key, copy)

    def get_bytes(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), 'rb') as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StorageError(f'cannot read {self.uri}/{key}: {error}') from error

    def get_file(self, key: str, local_path: str) -> None:
        try:
            shutil.copyfile(self._path(key), local_path)
        except OSError as error:
            raise StorageError(f'cannot read {self.uri}/{key}: {error}') from error

    def list(self, prefix: str = '') -> list[StoredObject]:
        found: list[StoredObject] = []
        if not os.path.isdir(self.root):
            return found
        try:
            for directory, _dirs, files in os.walk(self.root):
                for name in files:
                    if name.startswith('.upload-'):
                        continue
                    full = os.path.join(directory, name)
                    key = os.path.relpath(full, self.root).replace(os.sep, '/')
                    if key.startswith(prefix):
                        found.append(StoredObject(key, os.path.getsize(full)))
        except OSError as error:
            raise StorageError(f'cannot list {self.uri}/{prefix}: {error}') from error
        return sorted(found, key=lambda item: item.key)

    def delete(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except FileNotFoundError:
            return
        except OSError as error:
            raise StorageError(f'cannot delete {self.uri}/{key}: {error}') from error


def s3_client_config(endpoint: str | None):
    """botocore Config the harness uses: bounded timeouts, standard retries, path-style when an endpoint is set.

    Newer botocore computes CRC checksums on every upload by default, which s3rver stores corrupted; only ask for
    checksums when S3 requires them (the option does not exist on older botocore, which never sends them).
    """
    from botocore.config import Config

    options = {
        'connect_timeout': 5,
        'read_timeout': 60,
        'retries': {'max_attempts': 5, 'mode': 'standard'},
        'max_pool_connections': 16,
    }
    if endpoint:
        options['s3'] = {'addressing_style': 'path'}
    try:
        return Config(**options, request_checksum_calculation='when_required', response_checksum_validation='when_required')
    except TypeError:
        return Config(**options)


class S3Storage:
    """`s3://bucket/prefix` storage through boto3; multipart transfers for large checkpoint files."""

    def __init__(self, uri: str, endpoint: str | None = None):
        import boto3
        from boto3.s3.transfer import TransferConfig

        self.uri = uri.rstrip('/')
        rest = self.uri[len('s3://') :]
        self.bucket, _, prefix = rest.partition('/')
        self.prefix = prefix.strip('/')
        region = os.environ.get('AWS_REGION') or os.environ.get('AWS_DEFAULT_REGION') or 'us-east-1'
        self.client = boto3.client(
            's3', endpoint_url=endpoint or None, region_name=region, config=s3_client_config(endpoint)
        )
        self.transfer = TransferConfig(
            multipart_threshold=64 * 1024 * 1024, multipart_chunksize=64 * 1024 * 1024, max_concurrency=8
        )

    def _key(self, key: str) -> str:
        return f'{self.prefix}/{key}' if self.prefix else key

    def _fail(self, action: str, key: str, error: Exception) -> StorageError:
        return StorageError(f'cannot {action} s3://{self.bucket}/{self._key(key)}: {error}')

    def put_file(self, local_path: str, key: str) -> None:
        """Uploads the file as it is now; raises SourceChanged at once if it is gone, or is replaced or shrinks
        meanwhile."""
        try:
            pinned = PinnedFile.of(local_path)
        except FileNotFoundError as error:
            raise SourceChanged(f'{local_path} was deleted before its upload') from error
        except OSError as error:
            raise self._fail('upload', key, error) from error
        self.put_pinned(pinned, key)

    def put_pinned(self, pinned: PinnedFile, key: str) -> None:
        """Uploads a file pinned earlier (its size and inode then); SourceChanged when it no longer matches."""
        from boto3.s3.transfer import S3Transfer

        try:
            with S3Transfer(self.client, config=self.transfer, osutil=pinned.osutil()) as transfer:
                transfer.upload_file(pinned.path, self.bucket, self._key(key))
        except SourceChanged:
            raise  # raised by a read through the pin, passed through s3transfer's future as is
        except Exception as error:  # boto3 raises several unrelated exception families
            raise self._fail('upload', key, error) from error

    def put_bytes(self, data: bytes, key: str) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except Exception as error:
            raise self._fail('write', key, error) from error

    def copy(self, source_key: str, key: str) -> None:
        """CopyObject up to its 5 GiB limit, UploadPartCopy in 512 MiB parts above it (s3rver has no UploadPartCopy)."""
        from boto3.s3.transfer import TransferConfig

        config = TransferConfig(
            multipart_threshold=COPY_OBJECT_MAX_BYTES, multipart_chunksize=512 * 1024 * 1024, max_concurrency=8
        )
        try:
            self.client.copy(
                {'Bucket': self.bucket, 'Key': self._key(source_key)}, self.bucket, self._key(key), Config=config
            )
        except Exception as error:
            raise self._fail(f'copy s3://{self.bucket}/{self._key(source_key)} to', key, error) from error

    def get_bytes(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return response['Body'].read()
        except ClientError as error:
            if error.response.get('Error', {}).get('Code') in ('NoSuchKey', '404', 'NotFound'):
                return None
            raise self._fail('read', key, error) from error
        except Exception as error:
            raise self._fail('read', key, error) from error

    def get_file(self, key: str, local_path: str) -> None:
        try:
            self.client.download_file(self.bucket, self._key(key), local_path, Config=self.transfer)
        except Exception as error:
            raise self._fail('download', key, error) from error

    def list(self, prefix: str = '') -> list[StoredObject]:
        base = f'{self.prefix}/' if self.prefix else ''
        found: list[StoredObject] = []
        try:
            paginator = self.client.get_paginator('list_objects_v2')
            for page in paginator.paginate(Bucket=self.bucket, Prefix=base + prefix):
                for item in page.get('Contents', []):
                    found.append(StoredObject(item['Key'][len(base) :], int(item['Size'])))
        except Exception as error:
            raise self._fail('list', prefix, error) from error
        return sorted(found, key=lambda item: item.key)

    def delete(self, key: str) -> None:
        # Single-object deletes: s3rver's DeleteObjects can race, and S3 treats a missing key as success.
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except Exception as error:
            raise self._fail('delete', key, error) from error


@dataclass(frozen=True)
class PinnedFile:
    """A file's size and inode at one moment, so an upload sends exactly those bytes or fails fast.

    s3transfer takes a file's size when an upload starts and opens the path later (once per part). A checkpoint the
    trainer rewrites meanwhile (torch.save truncates in place; others rename a new file over it) would then give a body
    shorter than the declared length, and the request hangs until the server's timeout (S3: about 20 s; s3rver: the
    client's 60 s read timeout), holding up the final sync inside a spot notice's two minutes. Reads through the pin
    raise SourceChanged instead: on a different inode at open, and on end-of-file before the pinned size.
    """

    path: str
    size: int
    inode: int

    @classmethod
    def of(cls, path: str) -> PinnedFile:
        stat = os.stat(path)
        return cls(path, stat.st_size, stat.st_ino)

    def osutil(self):
        """An s3transfer OSUtils whose opens of this path are checked against the pin."""
        from s3transfer.utils import OSUtils

        pinned = self

        class PinnedOSUtils(OSUtils):
            def get_file_size(self, filename: str) -> int:
                return pinned.size if filename == pinned.path else super().get_file_size(filename)

            def open(self, filename: str, mode: str):
                handle = super().open(filename, mode)
                if filename != pinned.path:
                    return handle
                if os.fstat(handle.fileno()).st_ino != pinned.inode:
                    handle.close()
                    raise SourceChanged(f'{filename} was replaced during its upload')
                return _ExactSizeReader(handle, pinned)

        return PinnedOSUtils()


class _ExactSizeReader:
    """A file opened for an upload: a read that meets end-of-file before the pinned size raises SourceChanged."""

    def __init__(self, handle, pinned: PinnedFile):
        self._handle = handle
        self._pinned = pinned

    def read(self, amount: int | None = None) -> bytes:
        start = self._handle.tell()
        wanted = self._pinned.size - start if amount is None or amount < 0 else min(amount, self._pinned.size - start)
        data = self._handle.read(wanted) if wanted > 0 else b''
        if len(data) < wanted:
            raise SourceChanged(
                f'{self._pinned.path} shrank during its upload: end of file at byte {start + len(data)}, '
                f'{self._pinned.size} bytes expected'
            )
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()

    def close(self) -> None:
        self._handle.close()

    def __getattr__(self, name: str):
        return getattr(self._handle, name)


def open_storage(uri: str, s3_endpoint: str | None = None) -> Storage:
    """Storage for an `s3://` or `file://` prefix."""
    if uri.startswith('s3://'):
        return S3Storage(uri, s3_endpoint)
    if uri.startswith('file://'):
        return FileStorage(uri)
    raise StorageError(f'unsupported storage URI {uri!r}: use s3:// or file://')
