"""The Slurm launcher against a real Slurm: harness/slurm-cluster.sh starts slurmctld and
two slurmd (Debian's MULTIPLE_SLURMD build) on this machine for these tests."""

from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import time

import pytest

from runners.slurm import SlurmError, SlurmOptions, sbatch_script
from runners.spec import ProcessSpec
from tests.conftest import REPO, run_cli

SCRIPT = REPO / "harness" / "slurm-cluster.sh"


def specs(n: int, argv=("/e/bin/python", "-m", "frameworks.worker")) -> list[ProcessSpec]:
    return [ProcessSpec("worker", r, argv, {"DNNBENCH_RANK": str(r), "RANK": str(r),
                                            "DNNBENCH_THREADS": "2", "DNNBENCH_SPEC": "{'a': 1}",
                                            "MASTER_PORT": "29500"}) for r in range(n)]


def test_sbatch_script_text_and_syntax(tmp_path):
    text = sbatch_script(specs(4), 2, "job1", "/out/job1-%j.out", 600,
                         SlurmOptions(partition="gpu", account="proj", gpus_per_node=2,
                                      extra=["--qos=debug"]), horovod=True)
    lines = text.splitlines()
    for expected in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=2",
                     "#SBATCH --cpus-per-task=2", "#SBATCH --time=00:11:00",
                     "#SBATCH --partition=gpu", "#SBATCH --account=proj",
                     "#SBATCH --gpus-per-node=2", "#SBATCH --qos=debug",
                     "#SBATCH --output=/out/job1-%j.out", "export MASTER_PORT=29500",
                     "export DNNBENCH_THREADS=2",
                     "export DNNBENCH_SPEC=" + shlex.quote("{'a': 1}"),
                     "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 "
                     "--export=ALL --mpi=pmix /e/bin/python -m frameworks.worker"):
        assert expected in lines, expected
    assert not any(ln.startswith(("export RANK=", "export DNNBENCH_RANK=")) for ln in lines)
    path = tmp_path / "j.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    with pytest.raises(SlurmError, match="one program"):
        sbatch_script(specs(1) + specs(1, ("python", "-c", "import mxnet")), 1, "j", "o", 60)


def test_dry_run_writes_checked_scripts(torch_env, tmp_path):
    proc = run_cli("run", "--framework", "torch", "--model", "googlenet", "--strategy",
                   "allreduce", "--nodes", "2", "--launcher", "slurm", "--dry-run",
                   str(tmp_path / "s"), "--partition", "debug")
    assert proc.returncode == 0, proc.stderr
    (script,) = (tmp_path / "s").glob("*.sbatch")
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "#SBATCH --partition=debug" in text and "srun --nodes=2 --ntasks=2" in text
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster runs its daemons as root")
    state = tmp_path_factory.mktemp("slurm")
    # compute nodes smaller than this host (the login node): 1 CPU each
    env = {**os.environ, "DNNBENCH_SLURM_DIR": str(state), "DNNBENCH_SLURM_CPUS": "1"}
    up = subprocess.run(["bash", str(SCRIPT), "up", "2"], env=env, capture_output=True,
                        text=True, timeout=600)
    assert up.returncode == 0, up.stdout + up.stderr
    conf = {"SLURM_CONF": str(state / "slurm.conf")}
    yield conf
    subprocess.run(["bash", str(SCRIPT), "down"], env=env, capture_output=True, timeout=60)


def _rows(db) -> list[tuple]:
    return sqlite3.connect(db).execute(
        "SELECT status, reason, strategy, nodes, replicas_identical FROM runs "
        "ORDER BY started").fetchall()


#: threads left to dnnbench: sized to the compute nodes
AUTO_THREADS = ("--model", "googlenet", "--image-size", "32", "--batch", "4", "--steps", "3",
                "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes", "10",
                "--nodes", "2", "--launcher", "slurm")
COMMON = AUTO_THREADS + ("--threads", "1")


def test_sbatch_two_node_runs_land_in_the_database(all_envs, slurm, tmp_path):
    db = str(tmp_path / "r.db")
    runs = (("torch", "allreduce"), ("torch", "horovod"), ("jax", "allreduce"))
    for i, (fw, strategy) in enumerate(runs):
        # the first with threads left to dnnbench: sized to the compute nodes (1 CPU
        # each), not to this 2-core host, or Slurm refuses the job's --cpus-per-task
        common = AUTO_THREADS if i == 0 else COMMON
        proc = run_cli("run", "--framework", fw, "--strategy", strategy, *common, "--db", db,
                       "--slurm-dir", str(tmp_path / "jobs"), env=slurm)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _rows(db) == [("ok", "", strategy, 2, 1) for _, strategy in runs]
    threads = [t for (t,) in sqlite3.connect(db).execute(
        "SELECT threads FROM runs ORDER BY started")]
    assert threads == [1, 1, 1]
    outs = list((tmp_path / "jobs").glob("*.out"))
    assert len(outs) == len(runs)
    assert all(":::DNNBENCH_SLURM_EXIT 0" in p.read_text() for p in outs)


def test_inside_an_allocation_runs_a_job_step(all_envs, slurm, tmp_path):
    db = str(tmp_path / "r.db")
    exe = os.path.join(os.path.dirname(os.sys.executable), "dnnbench")
    proc = subprocess.run(["salloc", "--nodes=2", "--ntasks-per-node=1", "--time=5", exe,
                           "run", "--framework", "torch", "--strategy", "allreduce", *COMMON,
                           "--timeout", "240", "--db", db, "--slurm-dir",
                           str(tmp_path / "jobs")],
                          env={**os.environ, **slurm}, capture_output=True, text=True,
                          timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _rows(db) == [("ok", "", "allreduce", 2, 1)]
    assert not (tmp_path / "jobs").exists()  # no sbatch: srun inside the allocation


def test_timeout_cancels_the_job(all_envs, slurm, tmp_path):
    db = str(tmp_path / "r.db")
    steps = COMMON.index("--steps") + 1
    long_run = (*COMMON[:steps], "500", *COMMON[steps + 1:])
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce", *long_run,
                   "--timeout", "15", "--db", db, "--slurm-dir", str(tmp_path / "jobs"),
                   env=slurm)
    assert proc.returncode == 1
    (row,) = _rows(db)
    assert row[0] == "timeout"
    queue = subprocess.run(["squeue", "-h"], env={**os.environ, **slurm}, capture_output=True,
                           text=True)
    assert queue.stdout.strip() == ""  # scancel removed it


@pytest.mark.parametrize("change, message", [
    (("--threads", "2"), "needs 1 task(s) x threads = 2, 2 CPUs on each of 2 node(s), but "
                         "the default partition has 2 nodes with at most 1 (sinfo); set "
                         "threads <= 1"),
    (("--nodes", "3"), "needs nodes = 3, but the default partition has 2 node(s)")])
def test_a_job_no_node_can_hold_is_refused_before_it_is_queued(torch_env, slurm, tmp_path,
                                                                change, message):
    """Slurm accepts a job asking more CPUs per node than any node has and leaves it
    pending: the sweep would wait out the queue time. dnnbench asks sinfo first."""
    db = str(tmp_path / "r.db")
    flag = COMMON.index(change[0])
    args = (*COMMON[:flag], *change, *COMMON[flag + 2:])
    t0 = time.monotonic()
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce", *args,
                   "--db", db, "--slurm-dir", str(tmp_path / "jobs"), env=slurm)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    ((status, reason, *_),) = _rows(db)
    assert status == "failed" and message in reason, reason
    assert time.monotonic() - t0 < 60
    assert not list((tmp_path / "jobs").glob("*.sbatch"))  # nothing was submitted


def test_unreachable_slurm_is_a_failed_run_not_a_crash(torch_env, tmp_path):
    """A controller that does not answer (on loopback: no traffic leaves the machine)."""
    conf = tmp_path / "dead.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost\nSlurmctldPort=1\n"
                    "AuthType=auth/munge\nAuthInfo=socket=/nonexistent/munge.sock\n"
                    "NodeName=n1 NodeHostname=localhost\nPartitionName=p Nodes=n1\n")
    db = str(tmp_path / "r.db")
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce", *COMMON,
                   "--db", db, "--slurm-dir", str(tmp_path / "jobs"),
                   env={"SLURM_CONF": str(conf)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    ((status, reason, *_),) = _rows(db)
    assert status == "failed" and "sbatch" in reason


def _script_with(state, action):
    return subprocess.run(["bash", str(SCRIPT), action], capture_output=True, text=True,
                          env={**os.environ, "DNNBENCH_SLURM_DIR": str(state)}, timeout=60)


def test_cluster_script_refuses_folders_it_cannot_trust(tmp_path):
    """It runs as root: a symlink, a folder others can write, or someone else's files in
    place of its state folder are refused before anything is read from them."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    r = _script_with(tmp_path / "link", "down")
    assert r.returncode == 2 and "symbolic link" in r.stderr
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    r = _script_with(shared, "down")
    assert r.returncode == 2 and "writable by others" in r.stderr


def test_cluster_script_signals_only_its_own_daemons(tmp_path):
    """A pid file that names some other process (a stale file, a reused pid, a planted
    one) is not acted on."""
    state = tmp_path / "state"
    (state / "run").mkdir(parents=True)
    state.chmod(0o700)
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        for name in ("slurmctld", "munged", "slurmd-node1"):
            (state / "run" / f"{name}.pid").write_text(str(bystander.pid))
        r = _script_with(state, "down")
        assert r.returncode == 0, r.stderr
        assert bystander.poll() is None  # still running
        assert list((state / "run").iterdir()) == []
    finally:
        bystander.kill()
        bystander.wait()
