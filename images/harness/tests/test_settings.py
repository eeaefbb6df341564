"""Settings validation: every variable, its default, and the exact error a bad value produces."""

import signal
import subprocess

import pytest
from conftest import HARNESS_SRC, PYTHON

from trainyard_harness.settings import ConfigError, load_settings, parent_uri

VALID = {
    'TRAINYARD_JOB_ID': 'job-1',
    'TRAINYARD_ATTEMPT': '2',
    'TRAINYARD_CHECKPOINT_URI': 's3://bucket/teams/ml/jobs/job-1/checkpoints/',
}


def load(overrides=None, command=('python', 'train.py')):
    env = dict(VALID)
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return load_settings(env, list(command))


def test_applies_documented_defaults_to_a_minimal_environment():
    settings = load()
    assert settings.job_id == 'job-1'
    assert settings.attempt == 2
    assert settings.command == ['python', 'train.py']
    assert settings.checkpoint_uri == 's3://bucket/teams/ml/jobs/job-1/checkpoints'
    assert settings.metrics_uri == 's3://bucket/teams/ml/jobs/job-1/metrics'
    assert settings.code_uri is None
    assert settings.checkpoint_dir == '/tmp/trainyard/checkpoints'
    assert settings.work_dir == '/tmp/trainyard/code'
    assert settings.resume_args == ['--init_from=resume']
    assert settings.stop_signal == signal.SIGTERM
    assert settings.stop_grace_seconds == 90
    assert settings.sync_interval_seconds == 300
    assert settings.keep_checkpoints == 3
    assert settings.metrics_patterns == []
    assert settings.total_steps is None
    assert settings.imds_endpoint == 'http://169.254.169.254'
    assert settings.imds_poll_seconds == 5
    assert settings.s3_endpoint is None


def test_reads_every_optional_setting():
    settings = load(
        {
            'TRAINYARD_CODE_URI': 'file:///bundles/code.tar.gz',
            'TRAINYARD_CODE_SHA256': 'ab' * 32,
            'TRAINYARD_CHECKPOINT_DIR': '/data/ckpt',
            'TRAINYARD_WORK_DIR': '/data/code',
            'TRAINYARD_RESUME_ARGS': "--resume 'with space'",
            'TRAINYARD_STOP_SIGNAL': 'usr1',
            'TRAINYARD_STOP_GRACE_SECONDS': '100.5',
            'TRAINYARD_SYNC_INTERVAL_SECONDS': '60',
            'TRAINYARD_KEEP_CHECKPOINTS': '5',
            'TRAINYARD_METRICS_URI': 'file:///metrics/job-1/',
            'TRAINYARD_METRICS_PATTERNS': '["epoch (?P<step>\\\\d+)"]',
            'TRAINYARD_METRICS_FILE': 'metrics.jsonl',
            'TRAINYARD_CHECKPOINT_DONE_FILE': 'step/SAVED',
            'TRAINYARD_TOTAL_STEPS': '5000',
            'TRAINYARD_IMDS_ENDPOINT': 'http://127.0.0.1:8111/',
            'TRAINYARD_IMDS_POLL_SECONDS': '0.5',
            'TRAINYARD_S3_ENDPOINT': 'http://127.0.0.1:4569',
        }
    )
    assert settings.code_uri == 'file:///bundles/code.tar.gz'
    assert settings.code_sha256 == 'ab' * 32
    assert settings.checkpoint_dir == '/data/ckpt'
    assert settings.work_dir == '/data/code'
    assert settings.resume_args == ['--resume', 'with space']
    assert settings.stop_signal == signal.SIGUSR1
    assert settings.stop_grace_seconds == 100.5
    assert settings.sync_interval_seconds == 60
    assert settings.keep_checkpoints == 5
    assert settings.metrics_uri == 'file:///metrics/job-1'
    assert [p.pattern for p in settings.metrics_patterns] == ['epoch (?P<step>\\d+)']
    assert settings.metrics_file == 'metrics.jsonl'
    assert settings.checkpoint_done_file == 'step/SAVED'
    assert settings.total_steps == 5000
    assert settings.imds_endpoint == 'http://127.0.0.1:8111'
    assert settings.imds_poll_seconds == 0.5
    assert settings.s3_endpoint == 'http://127.0.0.1:4569'


@pytest.mark.parametrize(
    ('node', 'main', 'is_main'),
    [(None, None, True), ('0', '0', True), ('1', '0', False), ('0', '2', False)],
)
def test_only_a_single_node_job_or_the_main_node_keeps_storage(node, main, is_main):
    settings = load({'AWS_BATCH_JOB_NODE_INDEX': node, 'AWS_BATCH_JOB_MAIN_NODE_INDEX': main})
    assert settings.node_index == (None if node is None else int(node))
    assert settings.is_main_node is is_main


def test_empty_resume_args_append_nothing():
    assert load({'TRAINYARD_RESUME_ARGS': ''}).resume_args == []


def test_takes_the_command_from_trainyard_command_when_argv_has_none():
    settings = load({'TRAINYARD_COMMAND': '["python", "train.py", "--max_iters=5"]'}, command=())
    assert settings.command == ['python', 'train.py', '--max_iters=5']


def test_argv_command_wins_over_trainyard_command():
    settings = load({'TRAINYARD_COMMAND': '["other"]'}, command=('python', 'x.py'))
    assert settings.command == ['python', 'x.py']


@pytest.mark.parametrize(
    ('overrides', 'command', 'message'),
    [
        ({'TRAINYARD_JOB_ID': None}, None, 'TRAINYARD_JOB_ID is required and was not set'),
        ({'TRAINYARD_ATTEMPT': None}, None, 'TRAINYARD_ATTEMPT is required and was not set'),
        ({'TRAINYARD_ATTEMPT': '0'}, None, "TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got '0'"),
        ({'TRAINYARD_ATTEMPT': 'two'}, None, "TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got 'two'"),
        # More digits than int() takes (4,300): a problem reported, not a ValueError out of load_settings.
        (
            {'TRAINYARD_ATTEMPT': '1' * 5000},
            None,
            f"TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got '{'1' * 40}'",
        ),
        (
            {'AWS_BATCH_JOB_NODE_INDEX': '0' * 5000, 'AWS_BATCH_JOB_MAIN_NODE_INDEX': '0'},
            None,
            f"AWS_BATCH_JOB_NODE_INDEX must be a node index (an integer from 0 to 999999999), got '{'0' * 40}'",
        ),
        # No process can be given an argument with a NUL in it; the JSON forms can carry one.
        (
            {'TRAINYARD_COMMAND': '["python3\\u0000", "-c", "1"]'},
            (),
            'the user command has an argument with a NUL character, which no process can be given',
        ),
        (
            {'TRAINYARD_RESUME_ARGS': "'--init_from=resume\x00'"},
            None,
            'TRAINYARD_RESUME_ARGS has an argument with a NUL character, which no process can be given',
        ),
        ({'TRAINYARD_CHECKPOINT_URI': None}, None, 'TRAINYARD_CHECKPOINT_URI is required and was not set'),
        (
            {'TRAINYARD_CHECKPOINT_URI': 'gs://bucket/x'},
            None,
            "TRAINYARD_CHECKPOINT_URI must be an s3:// or file:// prefix, got 'gs://bucket/x'",
        ),
        (
            {'TRAINYARD_CHECKPOINT_URI': 's3:///x'},
            None,
            "TRAINYARD_CHECKPOINT_URI must name a bucket (s3://bucket/prefix), got 's3:///x'",
        ),
        (
            {'TRAINYARD_CHECKPOINT_URI': 'file://relative/dir'},
            None,
            "TRAINYARD_CHECKPOINT_URI must be an absolute file:// URI (file:///path), got 'file://relative/dir'",
        ),
        (
            {'TRAINYARD_CODE_URI': 's3://bucket/code.zip'},
            None,
            "TRAINYARD_CODE_URI must point at a .tar.gz bundle, got 's3://bucket/code.zip'",
        ),
        (
            {'TRAINYARD_CODE_URI': 's3://bucket/code.tar.gz', 'TRAINYARD_CODE_SHA256': 'AB' * 32},
            None,
            f"TRAINYARD_CODE_SHA256 must be 64 lower-case hex digits, got {'AB' * 32!r}",
        ),
        (
            {'TRAINYARD_CODE_SHA256': 'ab' * 32},
            None,
            'TRAINYARD_CODE_SHA256 names the code bundle of TRAINYARD_CODE_URI, which is not set',
        ),
        (
            {'TRAINYARD_CHECKPOINT_DIR': 'ckpt'},
            None,
            "TRAINYARD_CHECKPOINT_DIR must be an absolute path, got 'ckpt'",
        ),
        (
            {'TRAINYARD_RESUME_ARGS': "--x 'unterminated"},
            None,
            'TRAINYARD_RESUME_ARGS is not a valid shell word list (No closing quotation)',
        ),
        (
            {'TRAINYARD_STOP_SIGNAL': 'SIGKILL'},
            None,
            "TRAINYARD_STOP_SIGNAL must be one of SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT, got 'SIGKILL'",
        ),
        (
            {'TRAINYARD_STOP_GRACE_SECONDS': '-1'},
            None,
            "TRAINYARD_STOP_GRACE_SECONDS must be a number >= 0, got '-1'",
        ),
        (
            {'TRAINYARD_SYNC_INTERVAL_SECONDS': '0'},
            None,
            "TRAINYARD_SYNC_INTERVAL_SECONDS must be a number > 0, got '0'",
        ),
        (
            {'TRAINYARD_KEEP_CHECKPOINTS': '0'},
            None,
            "TRAINYARD_KEEP_CHECKPOINTS must be an integer >= 1, got '0'",
        ),
        (
            {'TRAINYARD_KEEP_CHECKPOINTS': '2.5'},
            None,
            "TRAINYARD_KEEP_CHECKPOINTS must be an integer >= 1, got '2.5'",
        ),
        ({'TRAINYARD_TOTAL_STEPS': 'many'}, None, "TRAINYARD_TOTAL_STEPS must be an integer >= 1, got 'many'"),
        (
            {'TRAINYARD_METRICS_PATTERNS': '{"a": 1}'},
            None,
            'TRAINYARD_METRICS_PATTERNS must be a JSON list of regex strings, got \'{"a": 1}\'',
        ),
        (
            {'TRAINYARD_METRICS_PATTERNS': '["loss (\\\\d+"]'},
            None,
            'TRAINYARD_METRICS_PATTERNS[0] is not a valid regex',
        ),
        (
            {'TRAINYARD_METRICS_PATTERNS': '["loss ([0-9.]+)"]'},
            None,
            'TRAINYARD_METRICS_PATTERNS[0] needs at least one named group',
        ),
        (
            {'TRAINYARD_IMDS_ENDPOINT': '169.254.169.254'},
            None,
            "TRAINYARD_IMDS_ENDPOINT must be an http:// URL, got '169.254.169.254'",
        ),
        (
            {'TRAINYARD_IMDS_POLL_SECONDS': '0'},
            None,
            "TRAINYARD_IMDS_POLL_SECONDS must be a number > 0, got '0'",
        ),
        (
            {'TRAINYARD_S3_ENDPOINT': 'localhost:4569'},
            None,
            "TRAINYARD_S3_ENDPOINT must be an http:// or https:// URL with a host, got 'localhost:4569'",
        ),
        ({}, (), 'no user command: pass it after `--` or set TRAINYARD_COMMAND to a JSON array of strings'),
        (
            {'TRAINYARD_COMMAND': 'python train.py'},
            (),
            "TRAINYARD_COMMAND must be a non-empty JSON array of strings, got 'python train.py'",
        ),
        ({'TRAINYARD_COMMAND': '[]'}, (), "TRAINYARD_COMMAND must be a non-empty JSON array of strings, got '[]'"),
        (
            {'AWS_BATCH_JOB_NODE_INDEX': 'one', 'AWS_BATCH_JOB_MAIN_NODE_INDEX': '0'},
            None,
            "AWS_BATCH_JOB_NODE_INDEX must be a node index (an integer from 0 to 999999999), got 'one'",
        ),
        (
            {'AWS_BATCH_JOB_NODE_INDEX': '1'},
            None,
            'AWS_BATCH_JOB_MAIN_NODE_INDEX is required with AWS_BATCH_JOB_NODE_INDEX (a multi-node job)',
        ),
        *[
            (
                {'TRAINYARD_CHECKPOINT_DONE_FILE': bad},
                None,
                f"not a temporary name (*.tmp, *.part, …) nor MANIFEST.json at the top, got {bad!r}",
            )
            for bad in ['../SAVED', '/abs/SAVED', '.done', 'a//b', 'dir/', 'SAVED.tmp', 'MANIFEST.json', 'x' * 256]
        ],
        (
            {'TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS': '-1'},
            None,
            "TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS must be a number >= 0, got '-1'",
        ),
        *[
            (
                {'TRAINYARD_METRICS_FILE': bad},
                None,
                f'TRAINYARD_METRICS_FILE must name a JSON-lines file, not a directory, got {bad!r}',
            )
            for bad in ['/', '/tmp', 'logs/']
        ],
    ],
)
def test_refuses_a_bad_setting_with_a_precise_message(overrides, command, message):
    with pytest.raises(ConfigError) as caught:
        load(overrides, ('python', 'train.py') if command is None else command)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    ('name', 'relation'),
    [
        ('TRAINYARD_STOP_GRACE_SECONDS', '>='),
        ('TRAINYARD_SYNC_INTERVAL_SECONDS', '>'),
        ('TRAINYARD_IMDS_POLL_SECONDS', '>'),
        ('TRAINYARD_SETTLE_SECONDS', '>='),
        ('TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS', '>='),
    ],
)
@pytest.mark.parametrize('raw', ['inf', '1e999', 'nan', 'Infinity'])
def test_refuses_a_number_setting_that_is_not_finite(name, relation, raw):
    # float() takes them all; an infinite poll interval once passed, and the IMDS poller died of OverflowError on its
    # first wait, so a spot notice went unseen.
    with pytest.raises(ConfigError) as caught:
        load({name: raw})
    assert caught.value.problems == [f'{name} must be a finite number {relation} 0, got {raw!r}']


@pytest.mark.parametrize(
    'name',
    [
        'TRAINYARD_STOP_GRACE_SECONDS',
        'TRAINYARD_SYNC_INTERVAL_SECONDS',
        'TRAINYARD_IMDS_POLL_SECONDS',
        'TRAINYARD_SETTLE_SECONDS',
        'TRAINYARD_RESUME_FAILURE_WINDOW_SECONDS',
    ],
)
def test_refuses_a_wait_longer_than_a_job_can_run(name):
    # 1e10 s is finite but past what a thread's wait takes (about 9.2e9 s): the waiting thread died of OverflowError.
    with pytest.raises(ConfigError) as caught:
        load({name: '1e10'})
    assert caught.value.problems == [f"{name} must be at most 1.2096e+06 (14 days), got '1e10'"]
    # 14 days exactly is a wait a job can have.
    assert load({name: str(14 * 86400)}) is not None


def test_reports_every_problem_at_once():
    with pytest.raises(ConfigError) as caught:
        load_settings({'TRAINYARD_ATTEMPT': '-3', 'TRAINYARD_KEEP_CHECKPOINTS': 'x'}, ['python'])
    assert caught.value.problems == [
        'TRAINYARD_JOB_ID is required and was not set',
        "TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got '-3'",
        'TRAINYARD_CHECKPOINT_URI is required and was not set',
        "TRAINYARD_KEEP_CHECKPOINTS must be an integer >= 1, got 'x'",
    ]


@pytest.mark.parametrize(
    ('uri', 'parent'),
    [
        ('s3://b/jobs/j1/checkpoints', 's3://b/jobs/j1'),
        ('s3://b/checkpoints/', 's3://b'),
        ('s3://b', 's3://b'),
        ('file:///tmp/x/checkpoints', 'file:///tmp/x'),
    ],
)
def test_metrics_default_to_a_sibling_of_the_checkpoint_prefix(uri, parent):
    assert parent_uri(uri) == parent


def test_bad_configuration_exits_78_naming_the_variable():
    env = {'PATH': '/usr/bin:/bin', 'PYTHONPATH': str(HARNESS_SRC), 'TRAINYARD_ATTEMPT': 'x'}
    result = subprocess.run(
        [PYTHON, '-m', 'trainyard_harness', '--', 'true'], env=env, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 78
    assert 'TRAINYARD_JOB_ID is required and was not set' in result.stderr
    assert "TRAINYARD_ATTEMPT must be an integer from 1 to 999999999, got 'x'" in result.stderr


# Every invalid TRAINYARD_* value is a ConfigError that says what is allowed, never another exception.
_BASE = {'TRAINYARD_JOB_ID': 'j', 'TRAINYARD_ATTEMPT': '1', 'TRAINYARD_CHECKPOINT_URI': 's3://bucket/ckpt'}


@pytest.mark.parametrize(
    'overrides, argv',
    [
        ({'TRAINYARD_METRICS_PATTERNS': '[' * 100_000}, ['x']),  # RecursionError from json.loads
        ({'TRAINYARD_COMMAND': '[' * 100_000}, []),  # RecursionError from json.loads
        ({'TRAINYARD_METRICS_PATTERNS': '["(?P<a>x{4294967296})"]'}, ['x']),  # OverflowError from re.compile
        ({'TRAINYARD_METRICS_PATTERNS': '["(?P<a>' + '(' * 1000 + ')' * 1000 + ')"]'}, ['x']),  # RecursionError
    ],
    ids=['deep-json-patterns', 'deep-json-command', 'huge-repeat', 'deep-groups'],
)
def test_malformed_json_or_regex_is_a_config_error(overrides, argv):
    with pytest.raises(ConfigError):
        load_settings({**_BASE, **overrides}, argv)


@pytest.mark.parametrize(
    'overrides',
    [
        # boto3.client raises ValueError('Invalid endpoint') in open_storage, which main does not catch: a traceback.
        {'TRAINYARD_S3_ENDPOINT': 'http://exa mple:9000'},
        {'TRAINYARD_S3_ENDPOINT': 'http://'},
        # No key: bundle._split makes the storage URI 's3:/', refused at fetch time as an infrastructure failure (79).
        {'TRAINYARD_CODE_URI': 's3://bundle.tar.gz'},
        # fetch_bundle rmtree()s the work directory before unpacking.
        {'TRAINYARD_WORK_DIR': '/'},
        # The restore replaces the checkpoint directory (and the unpacked code inside it); the sync uploads the code.
        {'TRAINYARD_WORK_DIR': '/tmp/t/ckpt/code', 'TRAINYARD_CHECKPOINT_DIR': '/tmp/t/ckpt'},
    ],
    ids=['endpoint-space', 'endpoint-no-host', 'code-uri-no-key', 'work-dir-root', 'work-dir-in-checkpoint-dir'],
)
def test_unusable_value_is_refused_up_front(overrides):
    with pytest.raises(ConfigError):
        load_settings({**_BASE, **overrides}, ['x'])
