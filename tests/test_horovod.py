"""Horovod in every framework, launched by horovodrun (gloo) and by mpirun (MPI
controller): real builds from `dnnbench env setup`, real processes."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from frameworks import events
from frameworks.contract import RunSpec, SpecError, validate
from frameworks.plan import PlanContext, plan
from harness import collect
from harness.jobs import worker_source_root
from harness.manifest import host_manifest
from runners import horovodrun, launch
from runners.process import tree
from runners.spec import ProcessSpec
from tests.conftest import horovod_frameworks

needs_mpi = pytest.mark.skipif(shutil.which("mpirun") is None,
                               reason="Open MPI not installed (harness/system-deps.sh)")


def hvd_run(env, framework: str, launcher: str = "auto", **kw):
    spec = RunSpec(**{"framework": framework, "model": "resnet50", "image_size": 32,
                      "batch_size": 4, "steps": 4, "warmup": 1, "trials": 1, "num_classes": 10,
                      "strategy": "horovod", "devices_per_node": 2, "threads": 1,
                      "launcher": launcher, "timeout_s": 300, **kw})
    validate(spec)
    procs = plan(spec, PlanContext(env.python, worker_source_root(), "t"))
    job = launch(spec.resolved_launcher, procs, spec.timeout_s)
    return collect.record(spec, "test", "t", job, host_manifest()), job


def test_horovodrun_command_is_exact():
    specs = [ProcessSpec("worker", r, ("/e/bin/python", "-m", "frameworks.worker"),
                         {"DNNBENCH_RANK": str(r), "DNNBENCH_SPEC": "{}", "RANK": str(r)})
             for r in range(2)]
    p = horovodrun.horovodrun_command(specs, "/e/bin/horovodrun", "gloo", as_root=True)
    assert " ".join(p.argv) == ("/e/bin/horovodrun -np 2 -H localhost:2 --gloo "
                                "/e/bin/python -m frameworks.worker")
    assert p.env == {"DNNBENCH_SPEC": "{}"}  # per-rank variables come from horovodrun
    mpi = horovodrun.horovodrun_command(specs, "/e/bin/horovodrun", "mpi", as_root=True)
    assert "--mpi" in mpi.argv and mpi.env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    with pytest.raises(ValueError, match="controller"):
        horovodrun.horovodrun_command(specs, "x", "nccl")


def test_launcher_rules_are_validated():
    base = dict(framework="torch", model="resnet50", devices_per_node=2)
    validate(RunSpec(**base, strategy="horovod", launcher="local"))  # dnnbench's rendezvous
    with pytest.raises(SpecError, match="Horovod jobs only"):
        validate(RunSpec(**base, strategy="allreduce", launcher="horovodrun"))
    with pytest.raises(SpecError, match="scheduler, server and worker"):
        validate(RunSpec("mxnet", "resnet50", devices_per_node=2, strategy="ps-sync", ps=1,
                         launcher="mpirun"))
    assert RunSpec(**base, strategy="horovod").resolved_launcher == "horovodrun"
    # the new field leaves existing configurations' identity (resume keys) unchanged
    assert "launcher" not in RunSpec(**base).to_json() or \
        RunSpec(**base).config_hash() == RunSpec(**base, launcher="auto").config_hash()


@pytest.mark.parametrize("framework", horovod_frameworks())
def test_horovod_two_workers_identical_weights_falling_loss(horovod_env, framework):
    rec, job = hvd_run(horovod_env(framework), framework, steps=10, loss_every=1,
                       model="googlenet", lr=0.02)
    row = rec.row
    assert row["status"] == "ok", row["output_tail"]
    assert row["replicas_identical"] == 1 and row["workers"] == 2
    manifest = rec.row["manifest_json"]
    assert manifest["ranks"]["0"]["horovod"] == "0.28.1"
    losses = [v for ev in collect.job_events(job) if ev["event"] == events.LOSS
              and ev.get("rank") == 0 for v in ev["values"]]
    assert sum(losses[-3:]) < sum(losses[:3])


@pytest.mark.parametrize("framework", horovod_frameworks())
def test_horovod_breakdown_measures_allreduce(horovod_env, framework):
    rec, _ = hvd_run(horovod_env(framework), framework, mode="breakdown")
    row = rec.row
    assert row["status"] == "ok", row["output_tail"]
    # ResNet-50's ~94 MB of gradients (10 classes) through gloo: clearly measurable
    assert row["t_comm_s"] > 0.005 and row["replicas_identical"] == 1


def test_horovod_plan_with_the_projects_rendezvous():
    spec = RunSpec("torch", "resnet50", strategy="horovod", nodes=2, devices_per_node=2,
                   launcher="local")
    procs = plan(spec, PlanContext("/e/bin/python", "/src", "t",
                                   hosts=("10.0.0.1", "10.0.0.2")))
    server, ranks = procs[0], procs[1:]
    assert server.service and server.host == "10.0.0.1"
    assert server.argv[-2:] == ("10.0.0.1:2,10.0.0.2:2", ranks[0].env["HOROVOD_GLOO_RENDEZVOUS_PORT"])
    assert [(p.host, p.env["HOROVOD_RANK"], p.env["HOROVOD_LOCAL_RANK"],
             p.env["HOROVOD_CROSS_RANK"], p.env["HOROVOD_HOSTNAME"]) for p in ranks] == [
        ("10.0.0.1", "0", "0", "0", "10.0.0.1"), ("10.0.0.1", "1", "1", "0", "10.0.0.1"),
        ("10.0.0.2", "2", "0", "1", "10.0.0.2"), ("10.0.0.2", "3", "1", "1", "10.0.0.2")]
    assert {p.env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] for p in ranks} == {"10.0.0.1"}
    assert {p.env["HOROVOD_SIZE"] for p in ranks} == {"4"}
    # horovodrun's own launch keeps its own rendezvous
    assert len(plan(RunSpec("torch", "resnet50", strategy="horovod", devices_per_node=2),
                    PlanContext("/e/bin/python", "/src", "t"))) == 2


def test_horovod_slots_from_slurm_tasks():
    """Under Slurm in containers: one rendezvous service on the first node, ranks that
    take their slot from their task, srun without --mpi."""
    from frameworks.horovod import rendezvous
    from frameworks.plan import slurm_mpi

    spec = RunSpec("torch", "resnet50", strategy="horovod", nodes=2, launcher="slurm",
                   env="container")
    procs = plan(spec, PlanContext("/e/bin/python", "/src", "t"))
    assert [p.role for p in procs] == ["rendezvous", "worker", "worker"]
    assert procs[0].service and procs[0].argv[-2] == "node0:1,node1:1"
    assert {p.env[rendezvous.MODE] for p in procs[1:]} == {"slurm"}
    assert "HOROVOD_RANK" not in procs[1].env  # from the task, not the plan
    assert not slurm_mpi(spec) and slurm_mpi(RunSpec("torch", "resnet50", strategy="horovod",
                                                     nodes=2, launcher="slurm"))
    task = {"SLURM_NNODES": "2", "SLURM_NTASKS": "4", "SLURM_NODEID": "1",
            "SLURM_LOCALID": "0", "SLURM_PROCID": "2", rendezvous.ADDR: "127.0.0.1",
            rendezvous.PORT: "29999"}
    slot = rendezvous.from_slurm(task)
    assert slot == {**slot, "HOROVOD_RANK": "2", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "0",
                    "HOROVOD_LOCAL_SIZE": "2", "HOROVOD_CROSS_RANK": "1",
                    "HOROVOD_CROSS_SIZE": "2", "HOROVOD_HOSTNAME": "node1",
                    "HOROVOD_GLOO_IFACE": "lo"}  # the interface that reaches 127.0.0.1


def test_horovod_with_the_projects_rendezvous(all_envs):
    """No horovodrun: the local launcher starts the ranks and the rendezvous service."""
    rec, job = hvd_run(all_envs["torch"], "torch", launcher="local")
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    assert rec.row["replicas_identical"] == 1 and rec.row["workers"] == 2
    assert rec.row["manifest_json"]["ranks"]["0"]["settings"]["backend"] == "horovod-gloo"
    assert [p.spec.tag for p in job.processes] == ["rendezvous0", "worker0", "worker1"]


@needs_mpi
def test_horovod_under_mpirun(all_envs):
    rec, job = hvd_run(all_envs["torch"], "torch", launcher="mpirun")
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    assert rec.row["replicas_identical"] == 1
    settings = rec.row["manifest_json"]["ranks"]["0"]["settings"]
    assert settings["backend"] == "horovod-mpi"


def test_killed_horovod_rank_tears_down_everything(all_envs):
    spec = RunSpec("torch", "resnet50", image_size=32, batch_size=4, steps=500, warmup=1,
                   trials=1, num_classes=10, strategy="horovod", devices_per_node=2,
                   threads=1, timeout_s=120)
    procs = plan(spec, PlanContext(all_envs["torch"].python, worker_source_root(), "t"))
    roots: dict[str, int] = {}
    killed: list[int] = []

    def on_line(tag, line):
        ev = events.parse(line)
        if ev and ev["event"] == events.MODEL and ev.get("rank") == 1 and not killed:
            # the rank-1 worker is a descendant of horovodrun: find it by its environment
            for pid in tree(roots["horovodrun0"]):
                try:
                    environ = open(f"/proc/{pid}/environ", "rb").read()
                except OSError:
                    continue
                if b"HOROVOD_RANK=1\x00" in environ and b"frameworks.worker" in open(
                        f"/proc/{pid}/cmdline", "rb").read():
                    killed.append(pid)
                    os.kill(pid, 9)
                    break

    t0 = time.monotonic()
    job = launch("horovodrun", procs, spec.timeout_s, on_line=on_line,
                 on_start=lambda tag, pid: roots.__setitem__(tag, pid))
    assert killed, "never found rank 1"
    assert not job.ok and time.monotonic() - t0 < 90
    time.sleep(0.5)
    assert not tree(roots["horovodrun0"])


def test_horovod_sweep_from_the_cli_records_telemetry(all_envs, tmp_path):
    """`dnnbench run` end to end: horovodrun by default, mpirun on request."""
    import sqlite3

    from tests.conftest import run_cli

    db = str(tmp_path / "r.db")
    common = ("run", "--framework", "torch", "--model", "googlenet", "--image-size", "32",
              "--batch", "4", "--steps", "3", "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes",
              "10", "--strategy", "horovod", "--devices-per-node", "2", "--threads", "1",
              "--db", db, "--telemetry-interval", "0.2")
    proc = run_cli(*common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if shutil.which("mpirun"):
        proc = run_cli(*common, "--launcher", "mpirun")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT status, replicas_identical, cpu_cores_per_worker, spec_json "
                        "FROM runs").fetchall()
    assert all(r[0] == "ok" and r[1] == 1 for r in rows)
    assert all(r[2] is not None and 0.05 < r[2] < 4 for r in rows)
    tags = {t for (t,) in conn.execute("SELECT DISTINCT tag FROM telemetry")}
    assert "horovodrun0" in tags
