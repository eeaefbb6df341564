"""Measures, through the real harness, the time from a spot notice to a complete checkpoint in S3 (s3rver).

Each run: a loopback fake IMDS (IMDSv2 token flow) answers 404 until the notice is armed; the harness polls it every
TRAINYARD_IMDS_POLL_SECONDS (default 5 s, as on EC2), signals the child, the child writes N bytes, the harness
uploads them and writes the manifest, then exits 75. Prints one JSON object per run on stdout.

A size `N+U` first has the child write U bytes it never changes, and serves the notice once the harness has uploaded
them: the final checkpoint then copies those within the store and uploads only the N bytes of the save.

Usage: notice_to_checkpoint.py --endpoint http://127.0.0.1:PORT --bucket B --size BYTES[+BYTES] [--size ...] --runs N
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, 'images', 'harness'))
# The same loopback IMDS the harness tests use.
sys.path.insert(0, os.path.join(REPO, 'images', 'harness', 'tests'))

from fake_imds import FakeImds  # noqa: E402
from trainyard_harness.storage import S3Storage  # noqa: E402


def parse_time(value: str) -> float:
    return datetime.fromisoformat(value.replace('Z', '+00:00')).timestamp()


def one_run(endpoint: str, bucket: str, size: int, unchanged: int, poll_seconds: float) -> dict:
    scratch = tempfile.mkdtemp(prefix='trainyard-bench-')
    imds = FakeImds()
    prefix = f's3://{bucket}/bench-{uuid.uuid4().hex}'
    env = {k: v for k, v in os.environ.items() if not k.startswith('TRAINYARD_')}
    env.update(
        PYTHONPATH=os.path.join(REPO, 'images', 'harness'),
        AWS_ACCESS_KEY_ID='S3RVER',
        AWS_SECRET_ACCESS_KEY='S3RVER',
        AWS_REGION='us-east-1',
        TRAINYARD_JOB_ID='bench',
        TRAINYARD_ATTEMPT='1',
        TRAINYARD_CHECKPOINT_URI=f'{prefix}/checkpoints',
        TRAINYARD_CHECKPOINT_DIR=os.path.join(scratch, 'ckpt'),
        TRAINYARD_S3_ENDPOINT=endpoint,
        TRAINYARD_IMDS_ENDPOINT=imds.endpoint,
        TRAINYARD_IMDS_POLL_SECONDS=str(poll_seconds),
        TRAINYARD_STOP_GRACE_SECONDS='110',
    )
    process = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'trainyard_harness',
            '--',
            sys.executable,
            os.path.join(HERE, 'child.py'),
            str(size),
            str(unchanged),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        if process.stdout.readline().strip() != 'ready':
            raise RuntimeError('benchmark child did not start: ' + process.stderr.read())
        before = ''
        if unchanged:
            # The unchanged file in storage first, as any file a trainer keeps from save to save would be.
            while '"checkpoint_uploaded"' not in before:
                line = process.stderr.readline()
                if not line:
                    raise RuntimeError('harness ended before uploading the unchanged file:\n' + before)
                before += line
        notice_at = time.time()
        imds.serve_notice()
        stderr = before + process.stderr.read()
        code = process.wait()
        done_at = time.time()
        logs = [json.loads(line) for line in stderr.splitlines() if line.startswith('{')]
        by_event = {record['event']: record for record in logs}
        if code != 75 or 'stop_phases' not in by_event:
            raise RuntimeError(f'harness exited {code}, expected 75:\n{stderr}')
        storage = S3Storage(f'{prefix}/checkpoints', endpoint)
        folder = 'ckpt-000002' if unchanged else 'ckpt-000001'
        manifest = json.loads(storage.get_bytes(f'{folder}/MANIFEST.json') or b'null')
        stored = {o.key: o.size for o in storage.list()}
        complete = bool(manifest) and all(stored.get(f'{folder}/{f["path"]}') == f['size'] for f in manifest['files'])
        sizes = {f['path']: f['size'] for f in manifest['files']} if manifest else {}
        expected = {'ckpt.bin': size, **({'base.bin': unchanged} if unchanged else {})}
        if not complete or sizes != expected:
            raise RuntimeError(f'checkpoint in storage is not complete: {stored}')
        final = [r for r in logs if r['event'] == 'checkpoint_uploaded' and r.get('reason') == 'final']
        phases = by_event['stop_phases']
        for key in stored:
            storage.delete(key)
        return {
            'bytes': size,
            'unchanged_bytes': unchanged,
            'copied_bytes': final[-1]['copied_bytes'] if final else 0,
            'notice_to_complete_s': round(done_at - notice_at, 3),
            'phases': {
                'detect_s': round(parse_time(by_event['spot_notice']['time']) - notice_at, 3),
                'signal_s': phases['request_to_signal_s'],
                'child_save_s': phases['signal_to_exit_s'],
                'upload_s': phases['final_sync_s'],
            },
        }
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        imds.close()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--endpoint', required=True)
    parser.add_argument('--bucket', required=True)
    parser.add_argument('--size', action='append', required=True, help='BYTES, or BYTES+UNCHANGED_BYTES')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--poll-seconds', type=float, default=5.0)
    args = parser.parse_args()
    # s3rver accepts these fixed credentials; the verification reads below use them too.
    os.environ.update(AWS_ACCESS_KEY_ID='S3RVER', AWS_SECRET_ACCESS_KEY='S3RVER', AWS_REGION='us-east-1')
    for case in args.size:
        size, _, unchanged = case.partition('+')
        for run in range(args.runs):
            result = one_run(args.endpoint, args.bucket, int(size), int(unchanged or 0), args.poll_seconds)
            result['run'] = run + 1
            print(json.dumps(result), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
