"""Image invariants that can be checked without a Docker engine: pinned base, non-root user, harness entry point."""

import json
import re

import pytest
from conftest import REPO

IMAGES = REPO / 'images'
DOCKERFILES = ['pytorch-gpu/Dockerfile', 'cpu/Dockerfile']


def instructions(path):
    """(INSTRUCTION, argument) pairs with line continuations joined and comments dropped."""
    text = re.sub(r'\\\n', ' ', (IMAGES / path).read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith('#'):
            keyword, _, argument = line.partition(' ')
            result.append((keyword.upper(), argument.strip()))
    return result


@pytest.mark.parametrize('path', DOCKERFILES)
def test_base_image_is_pinned_to_an_exact_tag(path):
    bases = [arg for keyword, arg in instructions(path) if keyword == 'FROM']
    assert len(bases) == 1
    image, _, tag = bases[0].partition(':')
    assert tag and tag != 'latest', f'{path}: base {bases[0]} must carry an explicit, non-latest tag'
    assert re.search(r'\d+\.\d+', tag), f'{path}: tag {tag} must name a version'


@pytest.mark.parametrize('path', DOCKERFILES)
def test_runs_as_a_non_root_user(path):
    users = [arg for keyword, arg in instructions(path) if keyword == 'USER']
    assert users, f'{path} has no USER instruction'
    user = users[-1].split(':')[0]
    assert user not in ('root', '0'), f'{path} runs as {user}'
    steps = [keyword for keyword, _ in instructions(path)]
    assert steps.index('USER') > max(i for i, k in enumerate(steps) if k == 'RUN'), 'USER must come after every RUN'


@pytest.mark.parametrize('path', DOCKERFILES)
def test_entrypoint_is_the_harness_so_batch_command_is_the_user_command(path):
    entrypoints = [arg for keyword, arg in instructions(path) if keyword == 'ENTRYPOINT']
    assert [json.loads(e) for e in entrypoints] == [['trainyard-harness', '--']]
    assert not [arg for keyword, arg in instructions(path) if keyword == 'CMD'], 'a CMD would run when Batch sends none'


@pytest.mark.parametrize('path', DOCKERFILES)
def test_installs_the_harness_from_the_build_context(path):
    steps = instructions(path)
    assert ('COPY', 'harness/ /opt/trainyard/harness/') in steps
    assert any(k == 'RUN' and 'pip install /opt/trainyard/harness/' in arg for k, arg in steps)


def test_cpu_image_takes_torch_from_the_pytorch_cpu_index():
    runs = ' '.join(arg for keyword, arg in instructions('cpu/Dockerfile') if keyword == 'RUN')
    assert re.search(r'--index-url https://download\.pytorch\.org/whl/cpu torch==\d+\.\d+\.\d+', runs)


def test_gpu_image_uses_a_cuda_runtime_base():
    base = next(arg for keyword, arg in instructions('pytorch-gpu/Dockerfile') if keyword == 'FROM')
    assert re.fullmatch(r'pytorch/pytorch:\d+\.\d+\.\d+-cuda\d+\.\d+-cudnn\d+-runtime', base)


def test_harness_package_declares_boto3_only_and_the_console_script():
    import tomllib

    project = tomllib.loads((IMAGES / 'harness' / 'pyproject.toml').read_text())['project']
    assert project['dependencies'] == ['boto3']
    assert project['scripts'] == {'trainyard-harness': 'trainyard_harness.main:entry_point'}
    assert project['requires-python'] == '>=3.10'
