"""Checkpoint folders: manifest-last completeness, restore of the newest complete one, retention, torn uploads."""

import errno
import hashlib
import io
import json
import os
import struct
import threading
import time
import zipfile

import pytest

from trainyard_harness import checkpoints
from trainyard_harness.checkpoints import (
    CheckpointStore,
    CheckpointSyncer,
    DirectoryChanged,
    RestoredFiles,
    UnfinishedWrite,
    scan_directory,
    unfinished_write,
)
from trainyard_harness.logs import Logger
from trainyard_harness.storage import FileStorage, S3Storage, SourceChanged, StorageError, escapes


def make_store(tmp_path, keep=3):
    storage = FileStorage(f'file://{tmp_path}/store')
    return storage, CheckpointStore(storage, keep, Logger(io.StringIO()))


def write_checkpoint(storage, index, files, step=None, manifest=True, corrupt=None):
    """Writes ckpt-<index> by hand, computing the manifest independently of the code under test."""
    folder = f'ckpt-{index:06d}'
    entries = []
    for name, data in files.items():
        stored = corrupt.get(name, data) if corrupt else data
        storage.put_bytes(stored, f'{folder}/{name}')
        entries.append({'path': name, 'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()})
    if manifest:
        document = {'format': 1, 'job_id': 'j', 'attempt': 1, 'step': step, 'created_at': 'x', 'files': entries}
        storage.put_bytes(json.dumps(document).encode(), f'{folder}/MANIFEST.json')


def local_dir(tmp_path, files):
    """The trainer's checkpoint directory, tmp_path/local, holding these files."""
    local = tmp_path / 'local'
    local.mkdir()
    for name, data in files.items():
        (local / name).write_bytes(data)
    return local


def folders_in(tmp_path):
    root = tmp_path / 'store'
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_restores_the_newest_complete_checkpoint(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'ckpt.pt': b'old'}, step=100)
    write_checkpoint(storage, 2, {'ckpt.pt': b'newer', 'extra/meta.json': b'{}'}, step=200)
    local = tmp_path / 'local'

    manifest = store.restore_newest(str(local))

    assert manifest['step'] == 200 and manifest['checkpoint'] == 'ckpt-000002'
    assert (local / 'ckpt.pt').read_bytes() == b'newer'
    assert (local / 'extra' / 'meta.json').read_bytes() == b'{}'


def test_restores_into_a_checkpoint_directory_that_is_a_mount_point(tmp_path, monkeypatch):
    """A volume mounted at the checkpoint directory: staging beside it would need a rename across filesystems."""
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'ckpt.pt': b'saved', 'extra/meta.json': b'{}'}, step=100)
    local = local_dir(tmp_path, {'stale.pt': b'x'})
    mount = str(local)
    real_stat, real_replace = os.stat, os.replace

    def device(path):
        path = os.path.abspath(path)
        return 2 if path == mount or path.startswith(mount + os.sep) else 1

    def stat(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if isinstance(path, int):
            return result
        fields = list(result[:10])
        fields[2] = device(path)  # st_dev
        return os.stat_result(fields)

    def replace(src, dst, *args, **kwargs):
        if device(src) != device(os.path.dirname(os.path.abspath(dst))):
            raise OSError(errno.EXDEV, 'Invalid cross-device link', src)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, 'stat', stat)
    monkeypatch.setattr(os, 'replace', replace)

    manifest = store.restore_newest(mount)

    assert manifest['step'] == 100
    assert sorted(p.name for p in local.iterdir()) == ['ckpt.pt', 'extra']
    assert (local / 'ckpt.pt').read_bytes() == b'saved'
    assert (local / 'extra' / 'meta.json').read_bytes() == b'{}'
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith('.restore-')]


def test_never_restores_a_folder_whose_manifest_was_not_written(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'ckpt.pt': b'complete'}, step=10)
    write_checkpoint(storage, 2, {'ckpt.pt': b'partial upload'}, step=20, manifest=False)

    manifest = store.restore_newest(str(tmp_path / 'local'))

    assert manifest['checkpoint'] == 'ckpt-000001'
    assert (tmp_path / 'local' / 'ckpt.pt').read_bytes() == b'complete'


@pytest.mark.parametrize(
    ('case', 'corrupt'),
    [
        ('a listed file is shorter than its manifest says', {'ckpt.pt': b'tor'}),
        ('a listed file has the right size but other bytes', {'ckpt.pt': b'XXXXXXXX'}),
    ],
)
def test_skips_a_checkpoint_whose_files_do_not_match_the_manifest(tmp_path, case, corrupt):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'ckpt.pt': b'good one'}, step=1)
    write_checkpoint(storage, 2, {'ckpt.pt': b'new data'}, step=2, corrupt=corrupt)

    manifest = store.restore_newest(str(tmp_path / 'local'))

    assert manifest['checkpoint'] == 'ckpt-000001', case
    assert (tmp_path / 'local' / 'ckpt.pt').read_bytes() == b'good one'


def test_skips_a_checkpoint_whose_manifest_lists_a_missing_file(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'a.pt': b'a'}, step=1)
    write_checkpoint(storage, 2, {'a.pt': b'b', 'b.pt': b'c'}, step=2)
    storage.delete('ckpt-000002/b.pt')

    assert store.restore_newest(str(tmp_path / 'local'))['checkpoint'] == 'ckpt-000001'


@pytest.mark.parametrize('name', ['..keep', '...', '..config', 'sub/..hidden', '.. spaced'])
def test_a_checkpoint_file_whose_name_starts_with_two_dots_is_restored(tmp_path, name):
    # Only a real parent step ('../x') leads outside the directory; these are names, and refusing one made every
    # checkpoint holding it look corrupt, so the job started again from nothing.
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'weights'})
    (local / name).parent.mkdir(parents=True, exist_ok=True)
    (local / name).write_bytes(b'kept')
    uploaded = store.upload_snapshot(str(local), 'j', 1, 5)

    restored = store.restore_newest(str(tmp_path / 'restored'))

    assert restored['checkpoint'] == uploaded['checkpoint']
    assert (tmp_path / 'restored' / name).read_bytes() == b'kept'


@pytest.mark.parametrize(
    ('path', 'leaves'),
    [
        ('..keep', False),
        ('...', False),
        ('a/..b', False),
        ('a/../b', False),
        ('..', True),
        ('../ckpt.pt', True),
        ('a/../../ckpt.pt', True),
        ('/etc/passwd', True),
    ],
)
def test_only_a_path_with_a_real_parent_step_or_an_absolute_one_escapes_its_folder(path, leaves):
    assert escapes(path) is leaves


def test_restore_replaces_stale_local_files_and_returns_none_without_checkpoints(tmp_path):
    storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'stale.pt': b'stale'})

    assert store.restore_newest(str(local)) is None
    assert (local / 'stale.pt').exists()

    write_checkpoint(storage, 1, {'ckpt.pt': b'fresh'})
    store.restore_newest(str(local))
    assert sorted(os.listdir(local)) == ['ckpt.pt']


def test_snapshot_writes_files_then_a_manifest_with_sizes_and_hashes(tmp_path):
    storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'weights', 'ckpt.pt.tmp': b'half written', '.nfs0001': b'x'})

    manifest = store.upload_snapshot(str(local), 'job-9', 4, 321)

    stored = json.loads(storage.get_bytes('ckpt-000001/MANIFEST.json'))
    assert stored['files'] == [
        {'path': 'ckpt.pt', 'size': 7, 'sha256': hashlib.sha256(b'weights').hexdigest()},
    ]
    assert (stored['job_id'], stored['attempt'], stored['step'], stored['format']) == ('job-9', 4, 321, 1)
    assert stored['created_at'].endswith('Z')
    assert manifest['checkpoint'] == 'ckpt-000001'
    assert sorted(o.key for o in storage.list()) == ['ckpt-000001/MANIFEST.json', 'ckpt-000001/ckpt.pt']


class ModifyDuringUpload(FileStorage):
    """Storage that rewrites the local file while it is being uploaded, like a trainer writing in place."""

    def __init__(self, uri, victim):
        super().__init__(uri)
        self.victim = victim

    def put_file(self, local_path, key):
        super().put_file(local_path, key)
        with open(self.victim, 'ab') as handle:
            handle.write(b'more bytes')


def test_abandons_a_snapshot_when_a_file_changes_during_upload(tmp_path):
    local = local_dir(tmp_path, {'ckpt.pt': b'first'})
    storage = ModifyDuringUpload(f'file://{tmp_path}/store', local / 'ckpt.pt')
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))

    with pytest.raises(DirectoryChanged):
        store.upload_snapshot(str(local), 'j', 1, None)

    assert storage.get_bytes('ckpt-000001/MANIFEST.json') is None
    assert store.restore_newest(str(tmp_path / 'restore')) is None


def test_an_abandoned_snapshot_deletes_what_it_had_uploaded(tmp_path):
    # Each retry takes a new folder: left behind, every abandoned copy of a large checkpoint would stay in storage
    # (prune deletes nothing while no checkpoint is complete).
    local = local_dir(tmp_path, {'a.pt': b'optimizer', 'ckpt.pt': b'first'})
    storage = ModifyDuringUpload(f'file://{tmp_path}/store', local / 'ckpt.pt')
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))

    with pytest.raises(DirectoryChanged) as raised:
        store.upload_snapshot(str(local), 'j', 1, None)

    assert raised.value.path == 'ckpt.pt'
    assert storage.list() == []
    # The next snapshot takes the next number all the same: no folder is written twice.
    storage.victim = tmp_path / 'elsewhere'
    assert store.upload_snapshot(str(local), 'j', 1, None)['checkpoint'] == 'ckpt-000002'


class RotatingStorage(FileStorage):
    """Storage during whose first upload the trainer deletes another of its saves (it keeps only the last few)."""

    def __init__(self, uri, victim):
        super().__init__(uri)
        self.victim = victim

    def put_file(self, local_path, key):
        super().put_file(local_path, key)
        if os.path.exists(self.victim):
            os.unlink(self.victim)


@pytest.mark.parametrize('deleted', ['b.pt', 'a.pt'], ids=['before-its-turn', 'right-after-its-upload'])
def test_a_snapshot_whose_file_the_trainer_deletes_is_abandoned_and_leaves_nothing_in_storage(tmp_path, deleted):
    local = local_dir(tmp_path, {'a.pt': b'step 100', 'b.pt': b'step 200'})
    storage = RotatingStorage(f'file://{tmp_path}/store', local / deleted)
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))

    with pytest.raises(DirectoryChanged) as raised:
        store.upload_snapshot(str(local), 'j', 1, None)

    assert raised.value.path == deleted
    assert storage.list() == []


def test_a_file_gone_before_its_format_is_checked_abandons_the_snapshot(tmp_path, monkeypatch):
    local = local_dir(tmp_path, {'a.pt': b'step 100'})
    _storage, store = make_store(tmp_path)
    scan = checkpoints.scan_directory
    monkeypatch.setattr(checkpoints, 'scan_directory', lambda *args: {**scan(*args), 'gone.pt': (5, 1, 1)})

    with pytest.raises(DirectoryChanged) as raised:
        store.upload_snapshot(str(local), 'j', 1, None)

    assert raised.value.path == 'gone.pt'


@pytest.mark.parametrize('kind', ['file', 's3'])
def test_uploading_a_file_that_is_gone_is_a_changed_source_not_a_storage_failure(tmp_path, kind):
    if kind == 'file':
        storage = FileStorage(f'file://{tmp_path}/store')
    else:
        storage = S3Storage('s3://bucket/p', 'http://127.0.0.1:9')  # nothing is sent: the file is gone first

    with pytest.raises(SourceChanged):
        storage.put_file(str(tmp_path / 'gone.pt'), 'ckpt-000001/gone.pt')


def test_a_log_that_changes_during_upload_rides_along_as_it_stood(tmp_path):
    # A trainer appending to train.log (or TensorBoard events) beside its checkpoint: the log changes during every
    # upload, and must not cost the checkpoint. Uploaded from a copy, it is listed as uploaded, so restore verifies it.
    local = local_dir(tmp_path, {'ckpt.pt': b'weights', 'train.log': b'step 1\n', 'events.out.tfevents.1.host': b'ev'})
    storage = ModifyDuringUpload(f'file://{tmp_path}/store', local / 'train.log')
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))

    manifest = store.upload_snapshot(str(local), 'j', 1, 5)

    assert manifest['checkpoint'] == 'ckpt-000001'
    stored_log = storage.get_bytes('ckpt-000001/train.log')
    assert stored_log.startswith(b'step 1\n')
    assert [(e['path'], e['size']) for e in manifest['files']] == [
        ('ckpt.pt', 7),
        ('events.out.tfevents.1.host', 2),
        ('train.log', len(stored_log)),
    ]
    restored = store.restore_newest(str(tmp_path / 'restored'))
    assert restored['checkpoint'] == 'ckpt-000001'
    assert (tmp_path / 'restored' / 'ckpt.pt').read_bytes() == b'weights'


def torch_like_zip(path, comment=b''):
    """A zip archive as torch.save writes one (stored members under archive/), built with zipfile."""
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('archive/data.pkl', b'pickled state' * 1000)
        archive.writestr('archive/data/0', os.urandom(200_000))
        archive.comment = comment
    return path.read_bytes()


def safetensors_bytes(tensors):
    """A safetensors file by its published layout: u64 header length, JSON header, then the tensors' bytes."""
    header, data = {}, b''
    for name, raw in tensors.items():
        header[name] = {'dtype': 'U8', 'shape': [len(raw)], 'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    encoded = json.dumps({'__metadata__': {'format': 'pt'}, **header}).encode()
    return struct.pack('<Q', len(encoded)) + encoded + data


def test_tells_a_save_cut_off_mid_write_by_its_format(tmp_path):
    whole = torch_like_zip(tmp_path / 'whole.pt')
    with_comment = torch_like_zip(tmp_path / 'comment.pt', comment=b'written by a test')
    tensors = safetensors_bytes({'w': os.urandom(5000), 'b': os.urandom(100)})
    files = {
        'whole.pt': whole,
        'comment.pt': with_comment,
        'cut.pt': whole[: len(whole) // 2],
        'cut-before-its-end-record.pt': whole[:-10],
        'model.safetensors': tensors,
        'cut.safetensors': tensors[:-1],
        'cut-in-header.safetensors': tensors[:20],
        'legacy.pt': b'\x80\x02pickle protocol 2, not a zip',
        'empty.pt': b'',
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)

    verdicts = {name: unfinished_write(str(tmp_path / name)) for name in files}

    assert {name for name, why in verdicts.items() if why is None} == {
        'whole.pt',
        'comment.pt',
        'model.safetensors',
        'legacy.pt',
        'empty.pt',
    }
    assert verdicts['cut.pt'].endswith('without its end record: cut off mid-write')
    assert 'tensors end at byte' in verdicts['cut.safetensors']
    assert 'header of' in verdicts['cut-in-header.safetensors']


def test_a_save_cut_off_mid_write_is_never_uploaded(tmp_path):
    storage, store = make_store(tmp_path)
    whole = torch_like_zip(tmp_path / 'whole.pt')
    local = local_dir(tmp_path, {'config.json': b'{}', 'ckpt.pt': whole[:-100]})

    with pytest.raises(UnfinishedWrite) as raised:
        store.upload_snapshot(str(local), 'j', 1, None)

    assert raised.value.path == 'ckpt.pt'
    assert storage.list() == []
    (local / 'ckpt.pt').write_bytes(whole)
    assert store.upload_snapshot(str(local), 'j', 1, None)['checkpoint'] == 'ckpt-000001'


def test_uploads_a_manifest_json_of_the_trainer_in_a_subdirectory_but_not_one_in_the_place_of_its_own(tmp_path):
    storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'weights', 'MANIFEST.json': b'{"mine": true}'})
    (local / 'tokenizer').mkdir()
    (local / 'tokenizer' / 'MANIFEST.json').write_bytes(b'{"vocab": 50304}')

    manifest = store.upload_snapshot(str(local), 'j', 1, None)

    assert [e['path'] for e in manifest['files']] == ['ckpt.pt', 'tokenizer/MANIFEST.json']
    assert json.loads(storage.get_bytes('ckpt-000001/MANIFEST.json'))['job_id'] == 'j'
    store.restore_newest(str(tmp_path / 'restored'))
    assert (tmp_path / 'restored' / 'tokenizer' / 'MANIFEST.json').read_bytes() == b'{"vocab": 50304}'


def test_a_directory_with_only_logs_is_no_checkpoint(tmp_path):
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'train.log': b'starting', 'metrics.jsonl': b'{}'})

    assert store.upload_snapshot(str(local), 'j', 1, None) is None
    assert folders_in(tmp_path) == []


def test_skips_fifos_and_sockets_which_are_no_checkpoint_and_would_block_a_read(tmp_path):
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'weights'})
    os.mkfifo(local / 'progress.fifo')

    assert sorted(scan_directory(str(local))) == ['ckpt.pt']
    manifest = store.upload_snapshot(str(local), 'j', 1, None)
    assert [e['path'] for e in manifest['files']] == ['ckpt.pt']


def test_a_file_whose_name_is_not_utf8_is_no_checkpoint_and_is_named_when_it_is_all_there_is(tmp_path):
    _storage, store = make_store(tmp_path)
    out = io.StringIO()
    store.log = Logger(out)
    local = tmp_path / 'local'
    local.mkdir()
    with open(os.path.join(os.fsencode(local), b'mod\xe8le.pt'), 'wb') as handle:
        handle.write(b'weights')
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: None, store.log)

    assert scan_directory(str(local)) == {}
    assert syncer.sync('final') is None and syncer.sync('final') is None
    assert folders_in(tmp_path) == []
    [warning] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (warning['event'], warning['paths']) == ('checkpoint_files_left_out', ['mod\\xe8le.pt'])


def test_keeps_the_last_k_complete_checkpoints_and_drops_older_partials(tmp_path):
    storage, store = make_store(tmp_path, keep=2)
    write_checkpoint(storage, 1, {'c': b'1'})
    write_checkpoint(storage, 2, {'c': b'2'}, manifest=False)
    write_checkpoint(storage, 3, {'c': b'3'})
    write_checkpoint(storage, 4, {'c': b'4'})
    write_checkpoint(storage, 5, {'c': b'5'}, manifest=False)

    deleted = store.prune()

    assert deleted == [1, 2]
    # ckpt-5 is newer than every complete checkpoint (perhaps still uploading), so it stays.
    assert sorted({o.key.split('/')[0] for o in storage.list()}) == ['ckpt-000003', 'ckpt-000004', 'ckpt-000005']


def test_never_deletes_anything_while_no_complete_checkpoint_exists(tmp_path):
    storage, store = make_store(tmp_path, keep=1)
    write_checkpoint(storage, 1, {'c': b'1'}, manifest=False)
    write_checkpoint(storage, 2, {'c': b'2'}, manifest=False)

    assert store.prune() == []
    assert len(storage.list()) == 2


def test_a_torn_newer_checkpoint_does_not_count_towards_retention(tmp_path):
    storage, store = make_store(tmp_path, keep=1)
    write_checkpoint(storage, 1, {'c': b'1'})
    write_checkpoint(storage, 2, {'c': b'22'}, corrupt={'c': b'2'})  # size mismatch: not complete

    assert store.prune() == []
    assert store.restore_newest(str(tmp_path / 'local'))['checkpoint'] == 'ckpt-000001'


def mark_resume_failure(storage, index, attempt):
    """Writes the marker a failed resume leaves, by hand (the name the harness README documents)."""
    storage.put_bytes(b'{}', f'ckpt-{index:06d}/RESUME_FAILED-{attempt:06d}.json')


def test_a_checkpoint_that_failed_to_resume_twice_is_passed_over_for_the_one_before(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'c': b'good'}, step=10)
    write_checkpoint(storage, 2, {'c': b'unloadable'}, step=20)
    write_checkpoint(storage, 3, {'c': b'partial'}, step=30, manifest=False)

    mark_resume_failure(storage, 2, attempt=2)
    once = store.restore_newest(str(tmp_path / 'local'))
    assert (once['checkpoint'], once['resume_failures'], once['set_aside_newer']) == ('ckpt-000002', 1, [])

    mark_resume_failure(storage, 2, attempt=3)
    twice = store.restore_newest(str(tmp_path / 'local'))
    assert (twice['checkpoint'], twice['resume_failures'], twice['set_aside_newer']) == ('ckpt-000001', 0, ['ckpt-000002'])
    assert (tmp_path / 'local' / 'c').read_bytes() == b'good'
    assert store.usable_indices() == [1]


def test_when_every_checkpoint_is_set_aside_the_newest_is_still_restored(tmp_path):
    storage, store = make_store(tmp_path)
    for index in (1, 2):
        write_checkpoint(storage, index, {'c': str(index).encode()}, step=index)
        mark_resume_failure(storage, index, attempt=2 * index)
        mark_resume_failure(storage, index, attempt=2 * index + 1)

    manifest = store.restore_newest(str(tmp_path / 'local'))

    assert (manifest['checkpoint'], manifest['resume_failures']) == ('ckpt-000002', 2)
    assert store.usable_indices() == []
    assert store.prune() == [], 'nothing is deleted while no usable checkpoint exists'


def test_recording_a_resume_failure_counts_each_attempt_once(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 4, {'c': b'x'})

    assert store.record_resume_failure('ckpt-000004', attempt=5, exit_code=3)[0].resume_failures == 1
    assert store.record_resume_failure('ckpt-000004', attempt=5, exit_code=3)[0].resume_failures == 1
    folder, usable_remains = store.record_resume_failure('ckpt-000004', attempt=6, exit_code=1)
    assert (folder.resume_failures, folder.set_aside) == (2, True)
    assert not usable_remains, 'its only checkpoint is now set aside'
    marker = json.loads(storage.get_bytes('ckpt-000004/RESUME_FAILED-000006.json'))
    assert (marker['attempt'], marker['exit_code']) == (6, 1)
    with pytest.raises(ValueError, match='not a checkpoint folder name'):
        store.record_resume_failure('../elsewhere', attempt=1, exit_code=1)


def test_a_set_aside_checkpoint_stays_until_a_newer_usable_one_exists_and_does_not_count_towards_retention(tmp_path):
    storage, store = make_store(tmp_path, keep=2)
    write_checkpoint(storage, 1, {'c': b'1'})
    write_checkpoint(storage, 2, {'c': b'2'})
    write_checkpoint(storage, 3, {'c': b'3'})
    mark_resume_failure(storage, 3, attempt=4)
    mark_resume_failure(storage, 3, attempt=5)

    assert store.prune() == [], 'ckpt-3 is newer than the newest usable one; 1 and 2 are the two kept'

    write_checkpoint(storage, 4, {'c': b'4'})  # saved by an attempt that resumed from ckpt-2
    assert store.prune() == [1, 3]
    assert sorted({o.key.split('/')[0] for o in storage.list()}) == ['ckpt-000002', 'ckpt-000004']


def test_syncer_uploads_only_when_the_directory_changed(tmp_path):
    storage, store = make_store(tmp_path, keep=5)
    local = local_dir(tmp_path, {})
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 7, Logger(io.StringIO()))

    assert syncer.sync('test') is None  # empty directory
    (local / 'ckpt.pt').write_bytes(b'v1')
    first = syncer.sync('test')
    again = syncer.sync('test')
    (local / 'ckpt.pt.tmp').write_bytes(b'v2')
    os.replace(local / 'ckpt.pt.tmp', local / 'ckpt.pt')
    second = syncer.sync('test')

    assert first['checkpoint'] == 'ckpt-000001' and first['step'] == 7
    assert again is None
    assert second['checkpoint'] == 'ckpt-000002'
    assert storage.get_bytes('ckpt-000002/ckpt.pt') == b'v2'


class CountingStorage(FileStorage):
    """file:// storage that counts uploads and in-store copies, and can refuse copies."""

    def __init__(self, uri, refuse_copies=False):
        super().__init__(uri)
        self.uploads: list[str] = []
        self.copies: list[tuple[str, str]] = []
        self.refuse_copies = refuse_copies

    def put_file(self, local_path, key):
        self.uploads.append(key)
        super().put_file(local_path, key)

    def copy(self, source_key, key):
        if self.refuse_copies:
            raise StorageError(f'AccessDenied copying {source_key}')
        self.copies.append((source_key, key))
        super().copy(source_key, key)


def test_syncer_copies_the_files_a_save_left_unchanged_from_the_last_checkpoint_instead_of_uploading_them(tmp_path):
    storage = CountingStorage(f'file://{tmp_path}/store')
    out = io.StringIO()
    store = CheckpointStore(storage, 3, Logger(out))
    local = local_dir(tmp_path, {'base-model.bin': b'frozen' * 1000, 'adapter.pt': b'step 1'})
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(out))

    syncer.sync('test')
    (local / 'adapter.pt').write_bytes(b'step 2')
    second = syncer.sync('test')

    assert storage.uploads == ['ckpt-000001/adapter.pt', 'ckpt-000001/base-model.bin', 'ckpt-000002/adapter.pt']
    assert storage.copies == [('ckpt-000001/base-model.bin', 'ckpt-000002/base-model.bin')]
    assert second['files'] == [
        {'path': 'adapter.pt', 'size': 6, 'sha256': hashlib.sha256(b'step 2').hexdigest()},
        {'path': 'base-model.bin', 'size': 6000, 'sha256': hashlib.sha256(b'frozen' * 1000).hexdigest()},
    ]
    uploaded = [json.loads(line) for line in out.getvalue().splitlines() if 'checkpoint_uploaded' in line]
    assert [(e['copied_files'], e['copied_bytes']) for e in uploaded] == [(0, 0), (1, 6000)]
    store.restore_newest(str(tmp_path / 'restored'))
    assert (tmp_path / 'restored' / 'base-model.bin').read_bytes() == b'frozen' * 1000


def test_a_copy_the_store_refuses_is_uploaded_instead(tmp_path):
    storage = CountingStorage(f'file://{tmp_path}/store', refuse_copies=True)
    out = io.StringIO()
    store = CheckpointStore(storage, 3, Logger(out))
    local = local_dir(tmp_path, {'base-model.bin': b'frozen', 'adapter.pt': b'step 1'})
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(out))

    syncer.sync('test')
    (local / 'adapter.pt').write_bytes(b'step 2')
    second = syncer.sync('test')

    assert second['checkpoint'] == 'ckpt-000002'
    assert 'ckpt-000002/base-model.bin' in storage.uploads
    assert 'checkpoint_copy_failed' in out.getvalue()


def test_after_a_restore_the_files_still_as_restored_are_copied_from_that_checkpoint(tmp_path):
    storage = CountingStorage(f'file://{tmp_path}/store')
    write_checkpoint(storage, 4, {'base-model.bin': b'frozen', 'adapter.pt': b'step 1'})
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))
    local = tmp_path / 'local'
    restored = store.restore_newest(str(local))
    syncer = CheckpointSyncer(store, str(local), 'j', 2, 300, 0, lambda: 2, Logger(io.StringIO()))
    syncer.set_baseline(scan_directory(str(local)), restored)

    (local / 'adapter.pt').write_bytes(b'step 2')
    syncer.sync('test')

    assert storage.copies == [('ckpt-000004/base-model.bin', 'ckpt-000005/base-model.bin')]
    assert storage.uploads == ['ckpt-000005/adapter.pt']


def test_syncer_does_not_upload_a_checkpoint_again_because_its_log_grew(tmp_path):
    storage, store = make_store(tmp_path, keep=5)
    local = local_dir(tmp_path, {'ckpt.pt': b'v1', 'train.log': b'step 1\n'})
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(io.StringIO()))

    first = syncer.sync('test')
    with open(local / 'train.log', 'ab') as log:
        log.write(b'step 2\n')
    grown = syncer.sync('test')
    (local / 'ckpt.pt').write_bytes(b'v2')
    second = syncer.sync('test')

    assert first['checkpoint'] == 'ckpt-000001' and grown is None
    assert second['checkpoint'] == 'ckpt-000002'
    assert storage.get_bytes('ckpt-000002/train.log') == b'step 1\nstep 2\n'


def test_a_paused_syncer_uploads_nothing_from_the_background_and_the_final_sync_still_runs(tmp_path):
    # Paused before the harness kills the trainer: what the kill left is judged by the final sync alone.
    storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {})
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 0.05, 0, lambda: 1, Logger(io.StringIO()))
    syncer.pause()
    syncer.start()
    try:
        (local / 'ckpt.pt').write_bytes(b'weights')
        time.sleep(0.5)  # many ticks and intervals
        assert folders_in(tmp_path) == []
    finally:
        syncer.stop()
    assert syncer.sync('final')['checkpoint'] == 'ckpt-000001'


class SlowStorage(FileStorage):
    """Storage that takes `seconds` per file uploaded, and tells when the first upload has begun."""

    def __init__(self, uri, seconds):
        super().__init__(uri)
        self.seconds = seconds
        self.started = threading.Event()
        self.puts = 0

    def put_file(self, local_path, key):
        self.started.set()
        self.puts += 1
        time.sleep(self.seconds)
        super().put_file(local_path, key)


@pytest.mark.parametrize('how', ['stop', 'pause'])
def test_a_background_snapshot_in_progress_is_given_up_at_its_next_file_when_the_harness_stops(tmp_path, how):
    # The trainer's save on SIGTERM makes it stale, and the final sync cannot start until it lets go: eight files at
    # 0.2 s each would hold the final sync 1.6 s of a two-minute window.
    local = local_dir(tmp_path, {f'shard-{i}.bin': os.urandom(64) for i in range(8)})
    storage = SlowStorage(f'file://{tmp_path}/store', 0.2)
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(out))
    syncer.start()
    try:
        assert storage.started.wait(10)
        if how == 'pause':
            syncer.pause()  # at the end of the grace period, before the kill
    finally:
        syncer.stop()
    assert storage.puts <= 2, 'it uploaded on after the stop'
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e['event'] for e in events] == ['checkpoint_upload_given_up']
    # Nothing of it is left: no manifest, and the files it had uploaded deleted.
    assert not any(path.is_file() for path in (tmp_path / 'store').rglob('*'))
    assert syncer.sync('final')['checkpoint'] == 'ckpt-000002'


def test_a_snapshot_taken_while_held_carries_the_restored_checkpoints_resume_failures(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'state.json': b'cannot be loaded'})
    store.record_resume_failure('ckpt-000001', 2, 3)
    local = tmp_path / 'local'
    restored = store.restore_newest(str(local))
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 3, 300, 0, lambda: None, Logger(out))
    syncer.set_baseline(scan_directory(str(local)), restored)
    syncer.hold_while(lambda _current: True)
    (local / 'config.json').write_bytes(b'{"lr": 0.1}')

    assert syncer.sync('final', honour_hold=False)['checkpoint'] == 'ckpt-000002'
    assert store.folders()[2].resume_failures == 1, 'a copy of a checkpoint no one has loaded starts over at 0 failures'
    uploaded = [json.loads(line) for line in out.getvalue().splitlines() if '"checkpoint_uploaded"' in line]
    assert (uploaded[0]['inherited_resume_failures'], uploaded[0]['from_checkpoint']) == (1, 'ckpt-000001')
    # The same snapshot from a command seen to work (it exited 0) carries none.
    (local / 'config.json').write_bytes(b'{"lr": 0.2}')
    assert syncer.sync('final', honour_hold=False, inherit_failures=False)['checkpoint'] == 'ckpt-000003'
    assert store.folders()[3].resume_failures == 0


def test_a_restored_file_written_again_with_its_restored_bytes_is_no_save(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'model.pt': b'weights-v1', 'config.json': b'{"lr": 0.1}'})
    local = tmp_path / 'local'
    restored = store.restore_newest(str(local))
    files = RestoredFiles(str(local), scan_directory(str(local)), restored)
    assert files.intact(scan_directory(str(local)))

    # A new inode, mtime and the same bytes: the script's run config written again.
    (local / 'config.json').unlink()
    (local / 'config.json').write_bytes(b'{"lr": 0.1}')
    assert files.intact(scan_directory(str(local)))

    # Caught mid-rewrite (truncated), it is not what was restored; written back whole, it is again.
    (local / 'config.json').write_bytes(b'')
    assert not files.intact(scan_directory(str(local)))
    (local / 'config.json').write_bytes(b'{"lr": 0.1}')
    assert files.intact(scan_directory(str(local)))

    # The same size, other bytes: a save.
    (local / 'model.pt').write_bytes(b'weights-v2')
    assert not files.intact(scan_directory(str(local)))


@pytest.mark.parametrize('change', ['resized', 'deleted'])
def test_a_restored_file_resized_or_deleted_is_a_save(tmp_path, change):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'model.pt': b'weights-v1'})
    local = tmp_path / 'local'
    restored = store.restore_newest(str(local))
    files = RestoredFiles(str(local), scan_directory(str(local)), restored)
    if change == 'resized':
        (local / 'model.pt').write_bytes(b'weights-v1 and more')
    else:
        (local / 'model.pt').unlink()
    assert not files.intact(scan_directory(str(local)))


def test_syncer_warns_when_snapshot_after_snapshot_is_abandoned(tmp_path):
    local = local_dir(tmp_path, {'ckpt.pt': b'first'})
    storage = ModifyDuringUpload(f'file://{tmp_path}/store', local / 'ckpt.pt')
    store = CheckpointStore(storage, 3, Logger(io.StringIO()))
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 0.05, 0, lambda: None, Logger(out))
    syncer.start()
    try:
        wait_for(lambda: 'checkpoint_upload_keeps_changing' in out.getvalue())
    finally:
        syncer.stop()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    warnings = [e for e in events if e['event'] == 'checkpoint_upload_keeps_changing']
    assert len(warnings) == 1 and warnings[0]['path'] == 'ckpt.pt' and warnings[0]['abandoned'] == 3
    assert [e['event'] for e in events[:3]] == ['checkpoint_upload_retry'] * 3


def test_syncer_treats_restored_files_as_already_uploaded(tmp_path):
    storage, store = make_store(tmp_path)
    write_checkpoint(storage, 1, {'ckpt.pt': b'restored'})
    local = tmp_path / 'local'
    store.restore_newest(str(local))
    syncer = CheckpointSyncer(store, str(local), 'j', 2, 300, 0, lambda: None, Logger(io.StringIO()))
    syncer.set_baseline(scan_directory(str(local)))

    assert syncer.sync('test') is None
    assert folders_in(tmp_path) == ['ckpt-000001']


def test_with_a_done_file_only_a_save_the_trainer_finished_is_uploaded(tmp_path):
    """A save that pauses between its files: the syncer waits for the trainer's done file, written last."""
    storage, store = make_store(tmp_path, keep=5)
    local = local_dir(tmp_path, {})
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(out), done_file='SAVED')

    def write(name, data):
        (local / name).write_bytes(data)
        time.sleep(0.01)  # distinct modification times, as a save that takes a moment per file has

    write('model.pt', b'model 1')
    assert syncer.sync('settled') is None  # the first save has not said it is done
    waiting = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(r['level'], r['event'], r['reason']) for r in waiting] == [
        ('warn', 'checkpoint_upload_waiting_for_done_file', 'SAVED has not been written')
    ]
    write('optim.pt', b'optim 1')
    write('SAVED', b'1')
    first = syncer.sync('settled')
    assert first['checkpoint'] == 'ckpt-000001'
    assert sorted(e['path'] for e in first['files']) == ['SAVED', 'model.pt', 'optim.pt']

    write('model.pt', b'model 2')  # the second save, paused before its optimizer state
    assert syncer.sync('interval') is None
    assert 'a save in progress: model.pt' in out.getvalue()
    write('optim.pt', b'optim 2')
    assert syncer.sync('interval') is None  # both files new, but not yet said done
    write('SAVED', b'2')
    second = syncer.sync('settled')

    assert second['checkpoint'] == 'ckpt-000002'
    assert folders_in(tmp_path) == ['ckpt-000001', 'ckpt-000002']
    restored = tmp_path / 'restored'
    store.restore_newest(str(restored))
    assert [(restored / n).read_bytes() for n in ('model.pt', 'optim.pt', 'SAVED')] == [b'model 2', b'optim 2', b'2']


def test_with_a_done_file_a_log_written_after_it_is_no_save_in_progress(tmp_path):
    storage, store = make_store(tmp_path, keep=5)
    local = local_dir(tmp_path, {'model.pt': b'model 1'})
    time.sleep(0.01)
    (local / 'SAVED').write_bytes(b'1')
    time.sleep(0.01)
    (local / 'train.log').write_bytes(b'saved step 1, training on')
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(io.StringIO()), done_file='SAVED')

    first = syncer.sync('settled')

    assert first['checkpoint'] == 'ckpt-000001'
    assert storage.get_bytes('ckpt-000001/train.log') == b'saved step 1, training on'


def test_with_a_done_file_a_trainer_stopped_mid_save_leaves_the_last_finished_save_newest(tmp_path):
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {})
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(out), done_file='step/SAVED')
    (local / 'model.pt').write_bytes(b'model 1')
    (local / 'step').mkdir()
    time.sleep(0.01)
    (local / 'step' / 'SAVED').write_bytes(b'1')
    assert syncer.sync('settled')['checkpoint'] == 'ckpt-000001'
    time.sleep(0.01)
    (local / 'model.pt').write_bytes(b'model 2, cut short')

    assert syncer.sync('final') is None

    assert folders_in(tmp_path) == ['ckpt-000001']
    assert 'checkpoint_save_unfinished' in out.getvalue()
    assert store.restore_newest(str(tmp_path / 'restored'))['checkpoint'] == 'ckpt-000001'
    assert (tmp_path / 'restored' / 'model.pt').read_bytes() == b'model 1'


def test_with_a_done_file_the_watcher_does_not_recheck_an_unfinished_save_on_every_tick(tmp_path):
    """Between saves the directory is settled but unfinished: no /proc look per tick, until the done file comes."""
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'model.pt': b'model 1'})
    looks = []
    syncer = CheckpointSyncer(
        store, str(local), 'j', 1, 300, 0.05, lambda: 1, Logger(io.StringIO()), lambda: looks.append(1) or [], 'SAVED'
    )
    syncer.start()
    try:
        time.sleep(0.5)  # many ticks with a settled directory whose save is not said done
        assert looks == [] and folders_in(tmp_path) == []
        time.sleep(0.01)
        (local / 'SAVED').write_bytes(b'1')
        wait_for(lambda: folders_in(tmp_path) == ['ckpt-000001'])
    finally:
        syncer.stop()
    assert len(looks) == 1


def test_with_a_done_file_a_snapshot_scanned_mid_save_is_not_uploaded(tmp_path):
    """The check holds on the files the upload itself scans, not only on the syncer's look before it."""
    storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'model.pt': b'model 1'})
    time.sleep(0.01)
    (local / 'SAVED').write_bytes(b'1')
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 1, Logger(io.StringIO()), done_file='SAVED')
    real_upload = store.upload_snapshot

    def next_save_begins_first(*args, **kwargs):
        time.sleep(0.01)
        (local / 'model.pt').write_bytes(b'model 2, being written')
        return real_upload(*args, **kwargs)

    store.upload_snapshot = next_save_begins_first

    assert syncer.sync('settled') is None
    assert folders_in(tmp_path) == []


def wait_for(predicate, limit=30.0):
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, 'condition not reached in time'
        time.sleep(0.02)


def test_syncer_waits_while_a_checkpoint_file_is_open_for_writing(tmp_path):
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'half'})
    writing = [str(local / 'ckpt.pt')]
    out = io.StringIO()
    syncer = CheckpointSyncer(store, str(local), 'j', 1, 300, 0, lambda: 3, Logger(out), lambda: list(writing))
    syncer.start()
    try:
        wait_for(lambda: 'checkpoint_upload_deferred' in out.getvalue())
        time.sleep(0.3)  # several ticks with a settled directory, all while the file stays open
        assert folders_in(tmp_path) == []
        (local / 'ckpt.pt').write_bytes(b'half and the rest')
        writing.clear()
        wait_for(lambda: folders_in(tmp_path) == ['ckpt-000001'])
    finally:
        syncer.stop()
    assert store.restore_newest(str(tmp_path / 'restored'))['step'] == 3
    assert (tmp_path / 'restored' / 'ckpt.pt').read_bytes() == b'half and the rest'


def test_syncer_uploads_after_one_interval_when_a_file_stays_open_for_good(tmp_path):
    _storage, store = make_store(tmp_path)
    local = local_dir(tmp_path, {'ckpt.pt': b'weights', 'stats.db': b'a file the script keeps open'})
    out = io.StringIO()
    syncer = CheckpointSyncer(
        store, str(local), 'j', 1, 0.5, 0, lambda: None, Logger(out), lambda: [str(local / 'stats.db')]
    )
    started = time.monotonic()
    syncer.start()
    try:
        wait_for(lambda: folders_in(tmp_path) == ['ckpt-000001'])
    finally:
        syncer.stop()
    assert time.monotonic() - started >= 0.5
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    late = [e for e in events if e['event'] == 'checkpoint_upload_while_open']
    assert len(late) == 1 and late[0]['open_for_writing'] == [str(local / 'stats.db')]
    assert late[0]['deferred_s'] >= 0.5


def test_uploads_a_distributed_checkpoints_metadata_dotfile_and_skips_temporary_names(tmp_path):
    # torch.distributed.checkpoint: shards __<rank>_0.distcp and the index .metadata (written as .metadata.tmp, then
    # renamed). Without .metadata the checkpoint cannot be loaded, however complete its shards.
    files = {
        '__0_0.distcp': b'shard 0',
        '__1_0.distcp': b'shard 1',
        '.metadata': b'the index',
        '.metadata.tmp': b'being written',
        '.nfs000000000001': b'silly-renamed',
        '.#model.pt': b'emacs lock',
    }
    local = local_dir(tmp_path, files)
    (local / '.cache').mkdir()
    (local / '.cache' / 'blob').write_bytes(b'not a checkpoint')

    assert sorted(scan_directory(str(local))) == ['.metadata', '__0_0.distcp', '__1_0.distcp']

    _storage, store = make_store(tmp_path)
    store.upload_snapshot(str(local), 'j', 1, None)
    restored_dir = tmp_path / 'restored'
    assert store.restore_newest(str(restored_dir))['checkpoint'] == 'ckpt-000001'
    assert (restored_dir / '.metadata').read_bytes() == b'the index'


class SteppedClock:
    """A clock the test moves by hand. Each read is counted, so the test can wait until the watcher has looked again."""

    def __init__(self):
        self.now = 0.0
        self.reads = 0
        self.changed = threading.Condition()

    def __call__(self) -> float:
        with self.changed:
            self.reads += 1
            self.changed.notify_all()
            return self.now

    def move_to(self, now: float) -> None:
        """Sets the time and returns once the watcher has run a whole tick at it (it reads the time once a tick)."""
        with self.changed:
            self.now = now
            target = self.reads + 2
            assert self.changed.wait_for(lambda: self.reads >= target, timeout=10), 'the watcher stopped ticking'


class UnreachableStorage(FileStorage):
    """file:// storage whose uploads fail (S3 throttling, a network outage) while `down`, counted."""

    def __init__(self, uri):
        super().__init__(uri)
        self.down = True
        self.uploads = 0

    def put_file(self, local_path, key):
        self.uploads += 1
        if self.down:
            raise StorageError('503 SlowDown')
        super().put_file(local_path, key)


def test_after_a_failed_upload_the_watcher_backs_off_exponentially_warns_once_and_says_when_it_recovers(tmp_path):
    storage = UnreachableStorage(f'file://{tmp_path}/store')
    out = io.StringIO()
    local = local_dir(tmp_path, {'ckpt.pt': b'v1'})
    clock = SteppedClock()
    syncer = CheckpointSyncer(
        CheckpointStore(storage, 3, Logger(out)), str(local), 'j', 1, 300, 0.1, lambda: 1, Logger(out), clock=clock
    )
    syncer.start()
    try:
        clock.move_to(0.0)  # the watcher has seen the save
        clock.move_to(1.0)  # settled: the first try
        assert storage.uploads == 1, 'not again on the next tick'
        failed_at = 1.0
        for tried, delay in enumerate((10, 20, 40, 80, 160, 300, 300), start=1):
            clock.move_to(failed_at + delay - 0.1)
            assert storage.uploads == tried, f'{delay} s after failure {tried}'
            clock.move_to(failed_at + delay)
            failed_at += delay
        assert storage.uploads == 8

        storage.down = False
        clock.move_to(failed_at + 300)
        assert storage.uploads == 9 and syncer.last_manifest is not None

        storage.down = True
        (local / 'ckpt.pt').write_bytes(b'v2')
        clock.move_to(failed_at + 300)  # the watcher has seen the new save
        clock.move_to(failed_at + 301)  # settled: fails, and the backoff starts again from its first delay
        clock.move_to(failed_at + 310.9)
        assert storage.uploads == 10
        clock.move_to(failed_at + 311)
        assert storage.uploads == 11
    finally:
        syncer.stop()

    storage.down = False
    assert syncer.sync('final') is not None, 'the final sync does not wait for the backoff'
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    streaks = [e for e in events if e['event'] in ('checkpoint_upload_failed', 'checkpoint_upload_recovered')]
    assert [(e['event'], e.get('retry_in_s'), e.get('failed_attempts')) for e in streaks] == [
        ('checkpoint_upload_failed', 10, None),
        ('checkpoint_upload_recovered', None, 8),
        ('checkpoint_upload_failed', 10, None),
    ]
