"""The s3:// backend against s3rver (a real S3 wire protocol), with the client settings DESIGN.md lists."""

import hashlib
import io
import json
import os
import tarfile
import time
import uuid

import pytest

from conftest import PYTHON, REPO, base_env, closed_port_endpoint, run_harness

from trainyard_harness.checkpoints import CheckpointStore
from trainyard_harness.logs import Logger
from trainyard_harness.storage import PinnedFile, S3Storage, SourceChanged, StorageError, s3_client_config

HELLO = str(REPO / 'examples' / 'hello-cpu' / 'train.py')


def prefix():
    return f's3://trainyard-test/{uuid.uuid4().hex}'


def test_client_uses_path_style_bounded_timeouts_and_standard_retries():
    config = s3_client_config('http://127.0.0.1:4569')
    assert config.s3 == {'addressing_style': 'path'}
    assert config.retries == {'max_attempts': 5, 'mode': 'standard'}
    assert (config.connect_timeout, config.read_timeout) == (5, 60)
    # Newer botocore exposes the checksum switches; when it does they must be 'when_required' for s3rver.
    for option in ('request_checksum_calculation', 'response_checksum_validation'):
        assert getattr(config, option, 'when_required') == 'when_required'


def test_round_trips_bytes_files_listing_and_deletes(s3rver, tmp_path):
    storage = S3Storage(prefix(), s3rver.endpoint)
    storage.put_bytes(b'hello', 'a/one.txt')
    local = tmp_path / 'two.bin'
    local.write_bytes(b'\x00\x01' * 1000)
    storage.put_file(str(local), 'a/two.bin')

    assert storage.get_bytes('a/one.txt') == b'hello'
    assert storage.get_bytes('missing') is None
    assert [(o.key, o.size) for o in storage.list('a/')] == [('a/one.txt', 5), ('a/two.bin', 2000)]
    storage.get_file('a/two.bin', str(tmp_path / 'back.bin'))
    assert (tmp_path / 'back.bin').read_bytes() == local.read_bytes()
    storage.delete('a/one.txt')
    storage.delete('a/never-existed')
    assert [o.key for o in storage.list()] == ['a/two.bin']


def test_copies_an_object_within_the_prefix_in_the_store(s3rver, tmp_path):
    from boto3.s3.transfer import TransferConfig

    storage = S3Storage(prefix(), s3rver.endpoint)
    # Uploaded in parts; copied in one CopyObject all the same (s3rver, like S3 below 5 GiB, needs no UploadPartCopy).
    storage.transfer = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    data = os.urandom(12 * 1024 * 1024)
    (tmp_path / 'model.bin').write_bytes(data)
    storage.put_file(str(tmp_path / 'model.bin'), 'ckpt-000001/model.bin')

    storage.copy('ckpt-000001/model.bin', 'ckpt-000002/model.bin')

    assert storage.get_bytes('ckpt-000002/model.bin') == data
    with pytest.raises(StorageError, match='cannot copy s3://'):
        storage.copy('ckpt-000001/missing.bin', 'ckpt-000002/missing.bin')


def test_multipart_upload_keeps_large_files_intact(s3rver, tmp_path):
    from boto3.s3.transfer import TransferConfig

    storage = S3Storage(prefix(), s3rver.endpoint)
    storage.transfer = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    data = hashlib.sha256(b'seed').digest() * (12 * 1024 * 1024 // 32 + 7)
    (tmp_path / 'big.bin').write_bytes(data)
    storage.put_file(str(tmp_path / 'big.bin'), 'big.bin')
    storage.get_file('big.bin', str(tmp_path / 'copy.bin'))
    assert hashlib.sha256((tmp_path / 'copy.bin').read_bytes()).digest() == hashlib.sha256(data).digest()


# A checkpoint rewritten between the moment its upload takes the size and the moment it reads the file: before the
# pin, s3transfer sent a body shorter than its Content-Length and the request hung for the 60 s read timeout.
@pytest.mark.parametrize('multipart', [False, True])
def test_an_upload_whose_file_shrinks_in_place_fails_fast_and_leaves_no_object(s3rver, tmp_path, multipart):
    from boto3.s3.transfer import TransferConfig

    storage = S3Storage(prefix(), s3rver.endpoint)
    storage.transfer = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    path = tmp_path / 'ckpt.pt'
    path.write_bytes(b'x' * (12 * 1024 * 1024 if multipart else 4000))
    pinned = PinnedFile.of(str(path))
    with open(path, 'r+b') as handle:  # torch.save's way: same inode, truncated and rewritten shorter
        handle.truncate(pinned.size - 100)
    started = time.monotonic()
    with pytest.raises(SourceChanged, match=r'ckpt\.pt shrank during its upload: end of file at byte \d+'):
        storage.put_pinned(pinned, 'ckpt.pt')
    assert time.monotonic() - started < 10
    assert storage.list() == []


def test_an_upload_whose_file_is_replaced_by_rename_fails_fast(s3rver, tmp_path):
    storage = S3Storage(prefix(), s3rver.endpoint)
    path = tmp_path / 'ckpt.json'
    path.write_text('{"iter_num": 100}')
    pinned = PinnedFile.of(str(path))
    (tmp_path / 'next.json').write_text('{"iter_num": 99}')
    os.replace(tmp_path / 'next.json', path)  # a new inode under the same name, one byte shorter
    with pytest.raises(SourceChanged, match='ckpt.json was replaced during its upload'):
        storage.put_pinned(pinned, 'ckpt.json')
    assert storage.list() == []


def test_lists_past_one_page(s3rver):
    storage = S3Storage(prefix(), s3rver.endpoint)
    for index in range(1005):
        storage.put_bytes(b'', f'k/{index:05d}')
    assert len(storage.list('k/')) == 1005


def test_checkpoints_snapshot_restore_and_retention_on_s3(s3rver, tmp_path):
    uri = prefix()
    store = CheckpointStore(S3Storage(uri, s3rver.endpoint), 2, Logger(io.StringIO()))
    local = tmp_path / 'local'
    local.mkdir()
    for version in range(1, 5):
        (local / 'ckpt.pt').write_bytes(f'version {version}'.encode())
        store.upload_snapshot(str(local), 'job', 1, version * 10)
        store.prune()
    storage = S3Storage(uri, s3rver.endpoint)
    # A torn newer upload: files but no manifest.
    storage.put_bytes(b'torn', 'ckpt-000005/ckpt.pt')

    manifest = store.restore_newest(str(tmp_path / 'restored'))

    assert manifest['checkpoint'] == 'ckpt-000004' and manifest['step'] == 40
    assert (tmp_path / 'restored' / 'ckpt.pt').read_bytes() == b'version 4'
    assert sorted({o.key.split('/')[0] for o in storage.list()}) == ['ckpt-000003', 'ckpt-000004', 'ckpt-000005']
    stored = json.loads(storage.get_bytes('ckpt-000004/MANIFEST.json'))
    assert stored['files'][0]['sha256'] == hashlib.sha256(b'version 4').hexdigest()


def test_files_whose_names_are_not_utf8_are_left_out_of_every_checkpoint_and_named_once(s3rver, tmp_path):
    # Legal on Linux, but no S3 key can hold them: uploaded, they failed every snapshot as if storage were unreachable
    # (and the final sync with 79).
    local = tmp_path / 'local'
    (local / 'tokenizer').mkdir(parents=True)
    (local / 'ckpt.pt').write_bytes(b'version 1')
    (local / 'tokenizer' / 'vocab.json').write_bytes(b'{}')
    root = os.fsencode(local)
    with open(os.path.join(root, b'caf\xe9.txt'), 'wb') as handle:  # a Latin-1 name
        handle.write(b'notes')
    os.mkdir(os.path.join(root, b'r\xe9sum\xe9'))
    with open(os.path.join(root, b'r\xe9sum\xe9', b'state.pt'), 'wb') as handle:
        handle.write(b'state')
    out = io.StringIO()
    store = CheckpointStore(S3Storage(prefix(), s3rver.endpoint), 3, Logger(out))

    first = store.upload_snapshot(str(local), 'job', 1, 10)
    (local / 'ckpt.pt').write_bytes(b'version 2')
    second = store.upload_snapshot(str(local), 'job', 1, 20)

    for manifest in (first, second):
        assert [entry['path'] for entry in manifest['files']] == ['ckpt.pt', 'tokenizer/vocab.json']
    [warning] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert warning['event'] == 'checkpoint_files_left_out' and warning['level'] == 'warn'
    assert sorted(warning['paths']) == ['caf\\xe9.txt', 'r\\xe9sum\\xe9/']
    assert store.restore_newest(str(tmp_path / 'restored'))['checkpoint'] == second['checkpoint']
    assert (tmp_path / 'restored' / 'ckpt.pt').read_bytes() == b'version 2'


def test_harness_runs_a_job_with_code_checkpoints_and_metrics_on_s3(s3rver, tmp_path):
    uri = prefix()
    bundle = io.BytesIO()
    with tarfile.open(fileobj=bundle, mode='w:gz') as tar:
        tar.add(HELLO, 'train.py')
    S3Storage(uri, s3rver.endpoint).put_bytes(bundle.getvalue(), 'code/bundle.tar.gz')
    env = base_env(
        tmp_path,
        closed_port_endpoint(),
        TRAINYARD_CODE_URI=f'{uri}/code/bundle.tar.gz',
        TRAINYARD_WORK_DIR=str(tmp_path / 'work'),
        TRAINYARD_CHECKPOINT_URI=f'{uri}/checkpoints',
        TRAINYARD_S3_ENDPOINT=s3rver.endpoint,
        TRAINYARD_TOTAL_STEPS='60',
    )
    first = run_harness([PYTHON, 'train.py', '--max_iters=40'], env)
    assert first.finish() == 0, first.output()
    env.update(TRAINYARD_ATTEMPT='2', TRAINYARD_CHECKPOINT_DIR=str(tmp_path / 'ckpt2'))
    second = run_harness([PYTHON, 'train.py', '--max_iters=60'], env)
    assert second.finish() == 0, second.output()

    assert 'resuming from iter 40 (' in '\n'.join(second.stdout)
    metrics = S3Storage(f'{uri}/metrics', s3rver.endpoint)
    progress = json.loads(metrics.get_bytes('progress.json'))
    assert (progress['attempt'], progress['step'], progress['total_steps'], progress['resumed_from_step']) == (
        2,
        60,
        60,
        40,
    )
    samples = [json.loads(line) for line in metrics.get_bytes('metrics.jsonl').decode().splitlines()]
    assert {s['attempt'] for s in samples} == {1, 2}
    assert max(s['step'] for s in samples if s['attempt'] == 1) == 40
