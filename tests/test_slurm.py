"""The Slurm launcher against a real Slurm: harness/slurm-cluster.sh starts slurmctld and
four slurmd (Debian's MULTIPLE_SLURMD build) on this machine for these tests."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from runners.slurm import SlurmError, SlurmOptions, sbatch_script
from runners.spec import ProcessSpec
from tests.conftest import PLUMBING_MODEL, REPO, run_cli, stored_tails

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
                     "#SBATCH --output=/out/job1-%j.out",
                     "export MASTER_PORT=$(dnnbench_free_port)",
                     "export DNNBENCH_THREADS=2",
                     "export DNNBENCH_SPEC=" + shlex.quote("{'a': 1}"),
                     "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 "
                     "--export=ALL --mpi=pmix /e/bin/python -m frameworks.worker"):
        assert expected in lines, expected
    assert not any(ln.startswith(("export RANK=", "export DNNBENCH_RANK=")) for ln in lines)
    path = tmp_path / "j.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    # the rendezvous port is picked on the first node when the job starts, below the
    # kernel's ephemeral range, skipping ports something listens on there
    from runners.slurm import FREE_PORT

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(512)  # room for every probe: a full queue drops them (slow, "free")
        taken = busy.getsockname()[1]
        out = subprocess.run(["bash", "-c", FREE_PORT + "; RANDOM=1; for i in $(seq 200); do "
                              "dnnbench_free_port 3; done"], capture_output=True, text=True)
        picks = {int(x) for x in out.stdout.split()}
        assert len(picks) > 100 and all(20000 <= p and p + 3 <= low for p in picks), picks
        for first, n in ((taken, 1), (taken - 1, 2)):  # the port, or one of a run, is busy
            assert "RANDOM % span" in FREE_PORT
            probe = subprocess.run(["bash", "-c", FREE_PORT.replace(
                "RANDOM % span", f"0 + {first - 20000}") + f"; dnnbench_free_port {n}"],
                capture_output=True, text=True)
            assert int(probe.stdout) != first  # the only port it tries is busy: fallback
    # nodes picking at once (TF's cluster ports): disjoint blocks even from one random draw,
    # so nodes sharing a host never clash (two of a local cluster's nodes once picked 26228)
    blocks = [int(subprocess.run(["bash", "-c", FREE_PORT + f"; RANDOM=7; dnnbench_free_port "
                                  f"2 {k} 4"], capture_output=True, text=True).stdout)
              for k in range(4)]
    assert len({p + i for p in blocks for i in range(2)}) == 8, blocks
    assert all(20000 <= p and p + 2 <= low for p in blocks), blocks
    # no node answered (srun gave nothing): the first node picks each node's block, in
    # that node's lane still
    from runners.slurm import cluster_ports

    tf = '{"cluster": {"worker": ["@N0@:1", "@N1@:1", "@N2@:1", "@N3@:1"]}}'
    lines = cluster_ports({0: tf}, 4)
    fallback = next(ln for ln in lines if "no port block from node" in ln)
    out = subprocess.run(["bash", "-c", FREE_PORT + "; RANDOM=7; " + fallback
                          + '; for k in 0 1 2 3; do v="DNNBENCH_P$k"; echo "${!v}"; done'],
                         capture_output=True, text=True)
    blocks = [int(x) for x in out.stdout.split()]
    assert out.stderr.count("no port block from node") == 4, out.stderr
    assert [(p - 20000) % 4 for p in blocks] == [0, 1, 2, 3], blocks  # node k: lane k
    assert all(20000 <= p and p + 1 <= low for p in blocks), blocks
    with pytest.raises(SlurmError, match="one program"):
        sbatch_script(specs(1) + specs(1, ("python", "-c", "import mxnet")), 1, "j", "o", 60)


def test_parameter_server_roles_get_their_own_step_and_variables(tmp_path):
    """A plan with scheduler and server roles: the batch script starts them as a second
    step; each task of it exports its own role's variables, with the rendezvous address
    the job's first node (run here with bash: task 1 is the server)."""
    from runners.slurm import services_script

    role_env = {"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": "9000",
                "ODD": "a b'c"}
    services = [ProcessSpec(role, 0, ("/usr/bin/env",), {**role_env, "DMLC_ROLE": role})
                for role in ("scheduler", "server")]
    workers = [ProcessSpec("worker", r, ("/e/bin/python", "-m", "frameworks.worker"),
                           {**role_env, "DMLC_ROLE": "worker", "DNNBENCH_RANK": str(r),
                            "DNNBENCH_THREADS": "1"}) for r in range(2)]
    text = sbatch_script(services + workers, 2, "ps", "/out/ps-%j.out", 600)
    path = tmp_path / "ps.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    lines = text.splitlines()
    assert "#SBATCH --ntasks-per-node=1" in lines  # workers only: services overcommit
    assert 'export DMLC_PS_ROOT_URI="$DNNBENCH_ROOT_IP"' in lines
    assert any(ln.startswith("srun --nodes=2 --ntasks=2 --distribution=cyclic --overlap "
                             "--overcommit") for ln in lines)
    script = tmp_path / "services.sh"
    script.write_text(services_script(services))
    for task, role in ((0, "scheduler"), (1, "server")):
        out = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                             env={"SLURM_PROCID": str(task), "DNNBENCH_ROOT_IP": "10.1.2.3",
                                  "PATH": os.environ["PATH"]})
        env = dict(ln.split("=", 1) for ln in out.stdout.splitlines() if "=" in ln)
        assert env["DMLC_ROLE"] == role and env["DMLC_PS_ROOT_URI"] == "10.1.2.3"
        assert env["ODD"] == "a b'c"
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                         env={"SLURM_PROCID": "2", "PATH": os.environ["PATH"]})
    assert out.returncode == 1 and "no service for task 2" in out.stderr


def test_tensorflow_ps_tasks_learn_every_tasks_node_address(tmp_path):
    """TensorFlow's parameter-server cluster under Slurm: the chief in the main step on the
    first node, serving workers and ps in the services step, cyclic over the nodes; each
    task's TF_CONFIG names every task at the node it will run on and a port of the block
    picked on that node when the job starts, never the plan's (run here with bash)."""
    import json

    from runners.slurm import cluster_templates, services_script

    cluster = {"chief": ["127.0.0.1:5000"], "worker": ["127.0.0.1:5001", "127.0.0.1:5002"],
               "ps": ["127.0.0.1:5003"]}

    def spec(role, job, i, service):
        conf = json.dumps({"cluster": cluster, "task": {"type": job, "index": i}})
        return ProcessSpec(role, i, ("/usr/bin/env",), {"TF_CONFIG": conf}, service=service)

    main = [spec("chief", "chief", 0, False)]
    services = [spec("worker", "worker", 0, True), spec("worker", "worker", 1, True),
                spec("ps", "ps", 0, True)]
    text = sbatch_script(main + services, 2, "tfps", "/out/tfps-%j.out", 600)
    path = tmp_path / "tfps.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    assert "srun --nodes=1 --ntasks=1" in text  # the chief alone in the main step
    # a block of 3 ports (node 0 runs 3 tasks) picked on each of the 2 nodes, in one step
    assert "--nodes=2 --ntasks=2 --ntasks-per-node=1 --overlap" in text
    assert "dnnbench_free_port 3" in text and ":500" not in text  # no plan port left
    templates = cluster_templates(main, services, 2)
    script = tmp_path / "services.sh"
    script.write_text(services_script(services, {i - 1: t for i, t in templates.items() if i}))
    nodes = {"DNNBENCH_N0": "10.0.0.1", "DNNBENCH_N1": "10.0.0.2",
             "DNNBENCH_P0": "30000", "DNNBENCH_P1": "31000"}
    want = {"chief": ["10.0.0.1:30000"], "worker": ["10.0.0.1:30001", "10.0.0.2:31000"],
            "ps": ["10.0.0.1:30002"]}  # cyclic: worker 0, worker 1, ps 0 on nodes 0, 1, 0
    for task, (job, index) in enumerate((("worker", 0), ("worker", 1), ("ps", 0))):
        out = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                             env={"SLURM_PROCID": str(task), "PATH": os.environ["PATH"],
                                  **nodes})
        env = dict(ln.split("=", 1) for ln in out.stdout.splitlines() if "=" in ln)
        conf = json.loads(env["TF_CONFIG"])
        assert conf == {"cluster": want, "task": {"type": job, "index": index}}, conf
        assert f"{job}{index} on node ?, at {want[job][index]}" in out.stderr, out.stderr
    # a node whose block is missing fails the task loudly, never a port of 0 + i
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                         env={"SLURM_PROCID": "1", "PATH": os.environ["PATH"],
                              **{k: v for k, v in nodes.items() if k != "DNNBENCH_P1"}})
    assert out.returncode != 0 and "no port block picked on node 1" in out.stderr


def test_servers_on_nodes_of_their_own(tmp_path):
    """ps_hosts = "own" under Slurm: the harness marks every task with the node the plans'
    one rule (frameworks.plan.node_of) gives it, and the job allocates the workers' nodes
    plus one per server and one for the scheduler or chief. MXNet: the services step lays
    scheduler and server out by a hostfile (node 3, node 2), and the rendezvous is the
    scheduler's node. TensorFlow: the chief's step starts at its node, and every task's
    TF_CONFIG names the ps task at node 2 and the chief at node 3."""
    import json

    from frameworks.contract import RunSpec
    from harness.jobs import slurm_tasks
    from harness.perfmodel.traffic import spec_hosts
    from runners.slurm import check_fits, cluster_templates, job_nodes, services_script

    def planned(framework: str, strategy: str, ps_hosts: str = "own"
                ) -> tuple[RunSpec, list[ProcessSpec]]:
        from frameworks.plan import PlanContext, plan

        spec = RunSpec(framework=framework, model="hepcnn", strategy=strategy, ps=1, nodes=2,
                       ps_hosts=ps_hosts, launcher="slurm", threads=1)
        procs = plan(spec, PlanContext("/e/bin/python", "/src", "r1"))
        return spec, slurm_tasks(procs, spec, None, "/src", 0.0)

    spec, procs = planned("mxnet", "ps-sync")
    assert spec.hosts == spec_hosts(spec) == job_nodes(procs, spec.nodes) == 4
    assert {p.tag: p.host for p in procs} == {
        "scheduler0": "@N3@", "server0": "@N2@", "worker0": "@N0@", "worker1": "@N1@"}
    text = sbatch_script(procs, spec.nodes, "own", "/out/own-%j.out", 600)
    (tmp_path / "own.sbatch").write_text(text)
    assert subprocess.run(["bash", "-n", str(tmp_path / "own.sbatch")]).returncode == 0
    lines = text.splitlines()
    assert "#SBATCH --nodes=4" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert 'export DNNBENCH_ROOT_IP="${DNNBENCH_N3-}"' in lines
    # the scheduler's port is picked free on the scheduler's node
    assert any(ln.startswith("export DMLC_PS_ROOT_PORT=$(srun --nodes=1 --ntasks=1 "
                             "--relative=3 --overlap") for ln in lines)
    assert ("printf '%s\\n' \"${dnnbench_nodes[3]}\" \"${dnnbench_nodes[2]}\" > "
            '"$svc_file.hosts"') in lines
    assert any(ln.startswith('SLURM_HOSTFILE="$svc_file.hosts" srun --ntasks=2 '
                             "--distribution=arbitrary") for ln in lines)
    assert any(ln.startswith("srun --nodes=2 --ntasks=2") and "--relative" not in ln
               for ln in lines)  # the workers from node 0
    # a partition of 3 nodes cannot hold it: refused before anything is queued, with why
    # (check_fits asks sinfo; a stand-in sinfo on PATH answers for 3 nodes)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\nprintf 'n1 4\\nn2 4\\nn3 4\\n'\n")
    (bin_dir / "sinfo").chmod(0o755)
    old = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}:{old}"
    try:
        with pytest.raises(SlurmError, match=r"needs nodes = 4 \(2 for the workers, 2 for the "
                           r"servers and the scheduler or chief: ps_hosts = 'own'\)"):
            check_fits(procs, spec.nodes)
    finally:
        os.environ["PATH"] = old

    spec, procs = planned("tensorflow", "ps-async")
    main = [p for p in procs if p.role == "chief"]
    services = [p for p in procs if p.role != "chief"]
    text = sbatch_script(procs, spec.nodes, "tfown", "/out/tfown-%j.out", 600)
    assert "#SBATCH --nodes=4" in text
    assert "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --kill-on-bad-exit=1 --export=ALL " \
        "--relative=3 --overlap" in text  # the chief alone, on its own node
    templates = cluster_templates(main, services, spec.nodes)
    conf = json.loads(templates[0])["cluster"]
    assert [a.split(":")[0] for a in conf["chief"]] == ["@N3@"]
    assert [a.split(":")[0] for a in conf["ps"]] == ["@N2@"]
    assert [a.split(":")[0] for a in conf["worker"]] == ["@N0@", "@N1@"]
    assert services_script(services, {i - 1: t for i, t in templates.items() if i})
    # the shared layout by the same rule: the scheduler and server 0 beside worker 0 on
    # the first node (as the emulated launcher and the model place them), nothing past the
    # workers' nodes, the rendezvous on the first node
    spec, procs = planned("mxnet", "ps-sync", "shared")
    assert {p.tag: p.host for p in procs} == {
        "scheduler0": "@N0@", "server0": "@N0@", "worker0": "@N0@", "worker1": "@N1@"}
    assert job_nodes(procs, 2) == 2
    lines = sbatch_script(procs, 2, "sh", "/out/sh-%j.out", 600).splitlines()
    assert ("printf '%s\\n' \"${dnnbench_nodes[0]}\" \"${dnnbench_nodes[0]}\" > "
            '"$svc_file.hosts"') in lines
    assert 'export DNNBENCH_ROOT_IP="${DNNBENCH_N0-}"' in lines
    assert "export DMLC_PS_ROOT_PORT=$(dnnbench_free_port)" in lines
    # 2 servers over 2 nodes: server i on node i mod 2
    spec = RunSpec(framework="mxnet", model="hepcnn", strategy="ps-sync", ps=2, nodes=2,
                   launcher="slurm", threads=1)
    from frameworks.plan import PlanContext, plan

    procs = slurm_tasks(plan(spec, PlanContext("/e/bin/python", "/src", "r1")), spec, None,
                        "/src", 0.0)
    assert {p.tag: p.host for p in procs if p.role == "server"} == {
        "server0": "@N0@", "server1": "@N1@"}
    # the TensorFlow chief on the first node, its ps task beside it
    spec, procs = planned("tensorflow", "ps-async", "shared")
    assert {p.tag: p.host for p in procs} == {
        "chief0": "@N0@", "ps0": "@N0@", "worker0": "@N0@", "worker1": "@N1@"}


def test_site_settings_come_from_the_experiment_file(tmp_path):
    """[slurm] in the experiment file: checked like the flags (one line, names the key)."""
    from harness.experiment import ExperimentError, from_dict

    base = {"name": "s", "defaults": {"framework": "torch", "model": "alexnet"}}
    exp = from_dict({**base, "slurm": {"partition": "gpu", "qos": "debug",
                                       "constraint": "a100", "gpus_per_node": 4,
                                       "sbatch_options": ["--exclusive"],
                                       "queue_wait_s": 600}})
    assert exp.slurm["qos"] == "debug" and exp.slurm["gpus_per_node"] == 4
    for table, message in (({"qos": "x\n#SBATCH --x"}, "control character"),
                           ({"partiton": "gpu"}, "did you mean 'partition'"),
                           ({"gpus_per_node": "4"}, "expected int"),
                           ({"gpus_per_node": 99}, "out of range"),
                           ({"sbatch_options": ["exclusive"]}, "starts with '-'"),
                           ({"sbatch_options": "--exclusive"}, "a list of strings")):
        with pytest.raises(ExperimentError, match=message):
            from_dict({**base, "slurm": table})
    text = sbatch_script(specs(2), 2, "j", "/o/j-%j.out", 60,
                         SlurmOptions(qos="debug", constraint="a100"))
    assert "#SBATCH --qos=debug" in text and "#SBATCH --constraint=a100" in text


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
    # the experiment file's [slurm] table, the command line over it
    exp = tmp_path / "site.toml"
    exp.write_text('name = "site"\n[defaults]\nframework = "torch"\nmodel = "googlenet"\n'
                   'strategy = "allreduce"\nnodes = 2\nlauncher = "slurm"\n[slurm]\n'
                   'partition = "big"\nqos = "long"\nsbatch_options = ["--exclusive"]\n')
    proc = run_cli("run", "--experiment", str(exp), "--dry-run", str(tmp_path / "t"),
                   "--qos", "short")
    assert proc.returncode == 0, proc.stderr
    (script,) = (tmp_path / "t").glob("*.sbatch")
    lines = script.read_text().splitlines()
    assert {"#SBATCH --partition=big", "#SBATCH --qos=short", "#SBATCH --exclusive"} <= set(
        lines), lines


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster runs its daemons as root")
    state = tmp_path_factory.mktemp("slurm")
    # compute nodes smaller than this host (the login node): 1 CPU each
    env = {**os.environ, "DNNBENCH_SLURM_DIR": str(state), "DNNBENCH_SLURM_CPUS": "1"}
    # 4 nodes: 2 workers' and, with ps_hosts = "own", a server's and the scheduler's
    up = subprocess.run(["bash", str(SCRIPT), "up", "4"], env=env, capture_output=True,
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
AUTO_THREADS = ("--model", PLUMBING_MODEL, "--image-size", "32", "--batch", "4", "--steps", "3",
                "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes", "10",
                "--nodes", "2", "--launcher", "slurm")
#: a hang ends as a stored timeout row, with its output, well before the test's own limit
COMMON = AUTO_THREADS + ("--threads", "1", "--timeout", "240")


@pytest.mark.parametrize("fw,strategy", [
    ("torch", "allreduce"), ("torch", "horovod"),
    # the same (allreduce, slurm, venv) cell as torch's: `make test-all` only
    pytest.param("jax", "allreduce", marks=pytest.mark.extended),
    pytest.param("tensorflow", "allreduce", marks=pytest.mark.extended)])  # TF_CONFIG per task
def test_sbatch_two_node_runs_land_in_the_database(all_envs, slurm, tmp_path, fw, strategy):
    db = str(tmp_path / "r.db")
    # torch DDP with threads left to dnnbench: sized to the compute nodes (1 CPU each), not
    # to this 2-core host, or Slurm refuses the job's --cpus-per-task
    common = AUTO_THREADS if (fw, strategy) == ("torch", "allreduce") else COMMON
    proc = run_cli("run", "--framework", fw, "--strategy", strategy, *common, "--db", db,
                   "--slurm-dir", str(tmp_path / "jobs"), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    runs = [(fw, strategy)]
    assert _rows(db) == [("ok", "", strategy, 2, 1)]
    threads = [t for (t,) in sqlite3.connect(db).execute(
        "SELECT threads FROM runs ORDER BY started")]
    assert threads == [1] * len(runs)
    # compute-node facts: the workers' own telemetry, and every rank's node in the manifest
    import json

    for cores, samples, manifest in sqlite3.connect(db).execute(
            "SELECT cpu_cores_per_worker, (SELECT COUNT(*) FROM telemetry t WHERE "
            "t.run_id = runs.run_id), manifest_json FROM runs"):
        assert cores is not None and 0 < cores <= 2.5 and samples > 0, (cores, samples)
        ranks = json.loads(manifest)["ranks"]
        assert sorted(ranks) == ["0", "1"]
        assert {r["slurmd_nodename"] for r in ranks.values()} == {"node1", "node2"}
        assert all(r["cpu_model"] and r["slurm_cpus_per_task"] == "1" for r in ranks.values())
    outs = list((tmp_path / "jobs").glob("*.out"))
    assert len(outs) == len(runs)
    assert all(":::DNNBENCH_SLURM_EXIT 0" in p.read_text() for p in outs)


def _job_processes(job_id: str) -> list[int]:
    """PIDs of processes on this machine (every local node) that belong to a Slurm job."""
    mark = f"SLURM_JOB_ID={job_id}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if mark in (d / "environ").read_bytes().split(b"\0"):
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def _job_id(jobs: Path) -> str:
    (out,) = jobs.glob("*.out")
    return out.stem.rsplit("-", 1)[1]


def test_mxnet_parameter_servers_run_as_one_slurm_job(all_envs, slurm, tmp_path):
    """Scheduler and 2 servers in a step of their own, the workers in theirs, on 2 nodes:
    the run lands like a local one, each role on the node the plans' rule gives it (the
    scheduler and server 0 on the first node, server 1 on the second, as on emulated
    hosts), and nothing of the job is left running."""
    db = str(tmp_path / "r.db")
    jobs = tmp_path / "jobs"
    proc = run_cli("run", "--framework", "mxnet", "--strategy", "ps-sync", "--ps", "2",
                   *COMMON, "--db", db, "--slurm-dir", str(jobs), env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, strategy, nodes, ps, workers, n_trials, images_per_s > 0 "
        "FROM runs").fetchone()
    assert row == ("ok", "ps-sync", 2, 2, 2, 2, 1), row
    text = next(jobs.glob("*.out")).read_text()
    assert ":::DNNBENCH_SLURM_EXIT 0" in text
    for line in ("scheduler0 on node node1", "server0 on node node1",
                 "server1 on node node2"):
        assert f"dnnbench: {line}" in text, text
    script = next(jobs.glob("*.sbatch")).read_text()
    assert "DMLC_ROLE=scheduler" in script and script.count("DMLC_ROLE=server") == 2
    assert _job_processes(_job_id(jobs)) == []
    assert not list(jobs.glob("services-*.sh"))  # the job removed its role script


def test_mxnet_servers_on_nodes_of_their_own_under_slurm(all_envs, slurm, tmp_path):
    """ps_hosts = "own": 2 workers on nodes 1-2, the server on node 3 and the scheduler on
    node 4 of a 4-node job; the run lands, and every task ran on the node its role was
    given (each prints its SLURMD_NODENAME: the job's output names them)."""
    db = str(tmp_path / "r.db")
    jobs = tmp_path / "jobs"
    proc = run_cli("run", "--framework", "mxnet", "--strategy", "ps-sync", "--ps", "1",
                   "--ps-hosts", "own", *COMMON, "--db", db, "--slurm-dir", str(jobs),
                   env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, nodes, ps, ps_hosts, workers, images_per_s > 0 FROM runs").fetchone()
    assert row == ("ok", 2, 1, "own", 2, 1), row
    script = next(jobs.glob("*.sbatch")).read_text()
    assert "#SBATCH --nodes=4" in script and "--distribution=arbitrary" in script
    text = next(jobs.glob("*.out")).read_text()
    assert "dnnbench: server0 on node node3" in text, text
    assert "dnnbench: scheduler0 on node node4" in text, text
    assert _job_processes(_job_id(jobs)) == []


@pytest.mark.parametrize("ps_hosts", ["shared", "own"])
def test_tensorflow_parameter_servers_run_as_one_slurm_job(all_envs, slurm, tmp_path,
                                                           ps_hosts):
    """ParameterServerStrategy (the Cori study's setup): the chief alone in the main step,
    the serving workers and the ps in the services step, stopped when the chief is done.
    With ps_hosts = "own", the ps task on node 3 and the chief on node 4 (its manifest says
    where it ran; each service prints its node), the serving workers on nodes 1-2."""
    import json

    db = str(tmp_path / "r.db")
    jobs = tmp_path / "jobs"
    proc = run_cli("run", "--framework", "tensorflow", "--strategy", "ps-async", "--ps", "1",
                   "--ps-hosts", ps_hosts, *COMMON, "--db", db, "--slurm-dir", str(jobs),
                   env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    row = sqlite3.connect(db).execute(
        "SELECT status, strategy, nodes, ps, workers, images_per_s > 0 FROM runs").fetchone()
    assert row == ("ok", "ps-async", 2, 1, 2, 1), row
    text = next(jobs.glob("*.out")).read_text()
    assert ":::DNNBENCH_SLURM_EXIT 0" in text
    assert _job_processes(_job_id(jobs)) == []
    # every task bound a port of the block picked on its own node when the job started
    # (node k, offset): the chief in the main step, the others in the services step
    block = {int(k): int(p) for k, p in re.findall(r"dnnbench: ports of node (\d+) from (\d+)",
                                                   text)}
    bound = {tag: int(port) for tag, port in re.findall(r"dnnbench: (\w+)\b[^\n]* at "
                                                        r"[\d.]+:(\d+)", text)}
    where = ({"worker0": (0, 0), "worker1": (1, 0), "ps0": (2, 0), "chief0": (3, 0)}
             if ps_hosts == "own" else
             {"chief0": (0, 0), "worker0": (0, 1), "worker1": (1, 0), "ps0": (0, 2)})
    assert bound == {tag: block[k] + i for tag, (k, i) in where.items()}, text
    if ps_hosts == "own":
        for line in ("ps0 on node node3", "worker0 on node node1", "worker1 on node node2"):
            assert f"dnnbench: {line}" in text, text
        (manifest,) = sqlite3.connect(db).execute("SELECT manifest_json FROM runs").fetchone()
        nodes = {r.get("slurmd_nodename") for r in json.loads(manifest)["ranks"].values()}
        assert nodes == {"node4"}, manifest  # the chief's


def test_a_dead_parameter_server_ends_the_slurm_job(all_envs, slurm, tmp_path):
    """Kill the scheduler mid-run: the services step fails, the workers are ended at once
    (not at the timeout), the row says failed, and no process of the job is left."""
    db = str(tmp_path / "r.db")
    jobs = tmp_path / "jobs"
    steps = COMMON.index("--steps") + 1
    long_run = (*COMMON[:steps], "1000", *COMMON[steps + 1:])  # a trial of tens of seconds
    exe = os.path.join(os.path.dirname(os.sys.executable), "dnnbench")
    t0 = time.monotonic()
    run = subprocess.Popen([exe, "run", "--framework", "mxnet", "--strategy", "ps-sync",
                            "--ps", "1", *long_run, "--timeout", "240", "--db", db,
                            "--slurm-dir", str(jobs)], env={**os.environ, **slurm},
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           cwd=REPO)
    try:
        scheduler = None
        while scheduler is None and time.monotonic() - t0 < 120:
            time.sleep(1)
            outs = list(jobs.glob("*.out"))
            # training has begun: warmed up, the long trial under way (waiting for the
            # trial's own event took the trial's ~50 s)
            if outs and '"event":"warmup"' in outs[0].read_text():
                for pid in _job_processes(_job_id(jobs)):
                    try:
                        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                    except OSError:
                        continue
                    if b"DMLC_ROLE=scheduler" in env and b"python" in Path(
                            f"/proc/{pid}/cmdline").read_bytes():
                        scheduler = pid
        assert scheduler is not None, "the scheduler never started"
        killed = time.monotonic()
        os.kill(scheduler, signal.SIGKILL)
        out, _ = run.communicate(timeout=200)
    finally:
        if run.poll() is None:  # a failed check: dnnbench cancels its job on SIGTERM, so
            run.terminate()  # the next test does not queue behind it
            try:
                run.wait(timeout=60)
            except subprocess.TimeoutExpired:
                run.kill()
    assert time.monotonic() - killed < 90, "the job waited for its timeout"
    (row,) = _rows(db)
    assert row[0] == "failed", (row, out)
    assert _job_processes(_job_id(jobs)) == []


def test_inside_an_allocation_runs_a_job_step(all_envs, slurm, tmp_path):
    db = str(tmp_path / "r.db")
    exe = os.path.join(os.path.dirname(os.sys.executable), "dnnbench")
    proc = subprocess.run(["salloc", "--nodes=2", "--ntasks-per-node=1", "--time=5", exe,
                           "run", "--framework", "torch", "--strategy", "allreduce", *COMMON,
                           "--db", db, "--slurm-dir",
                           str(tmp_path / "jobs")],
                          env={**os.environ, **slurm}, capture_output=True, text=True,
                          timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    assert _rows(db) == [("ok", "", "allreduce", 2, 1)]
    assert not (tmp_path / "jobs").exists()  # no sbatch: srun inside the allocation


def test_timeout_cancels_the_job(all_envs, slurm, tmp_path):
    db = str(tmp_path / "r.db")
    steps = COMMON.index("--steps") + 1
    long_run = (*COMMON[:steps], "5000", *COMMON[steps + 1:])
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce", *long_run,
                   "--timeout", "15", "--db", db, "--slurm-dir", str(tmp_path / "jobs"),
                   env=slurm)
    assert proc.returncode == 1
    (row,) = _rows(db)
    assert row[0] == "timeout"
    queue = subprocess.run(["squeue", "-h"], env={**os.environ, **slurm}, capture_output=True,
                           text=True)
    assert queue.stdout.strip() == ""  # scancel removed it


def test_a_job_waiting_on_drained_nodes_says_why_and_is_cancelled(torch_env, slurm, tmp_path):
    """A job whose nodes an administrator drained pends with no end: progress says which
    nodes and why while it waits, and after queue_wait_s the row says the job never left
    the queue (not "no result within timeout_s") and nothing is left queued."""
    env = {**os.environ, **slurm}
    exp = tmp_path / "e.toml"
    exp.write_text(
        'name = "drained"\n[defaults]\nframework = "torch"\nstrategy = "allreduce"\n'
        f'model = "{PLUMBING_MODEL}"\nimage_size = 32\nbatch_size = 4\nsteps = 3\n'
        'warmup = 1\ntrials = 2\ntarget_width = 0\nnum_classes = 10\nthreads = 1\n'
        'nodes = 2\nlauncher = "slurm"\n[slurm]\nqueue_wait_s = 8\n')
    db = str(tmp_path / "r.db")
    drain = ["scontrol", "update", "nodename=node[1-4]"]
    subprocess.run([*drain, "state=drain", "reason=dnnbench-test-maintenance"], env=env,
                   check=True)
    try:
        proc = run_cli("run", "-e", str(exp), "--db", db, "--slurm-dir",
                       str(tmp_path / "jobs"), env=slurm, timeout=120)
    finally:
        subprocess.run([*drain, "state=resume"], env=env, check=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out
    assert "PENDING (" in out and "drained: dnnbench-test-maintenance" in out, out
    ((status, reason, *_),) = _rows(db)
    assert status == "timeout" and "waited 8 s in the queue without starting" in reason, reason
    assert "queue_wait_s" in reason, reason
    queue = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
    assert queue.stdout.strip() == ""  # scancel removed it


@pytest.mark.parametrize("change, message", [
    (("--threads", "2"), "needs 1 task(s) x threads = 2, 2 CPUs on each of 2 node(s), but "
                         "the default partition has 2 nodes with at most 1 (sinfo); set "
                         "threads <= 1"),
    (("--nodes", "5"), "needs nodes = 5, but the default partition has 4 node(s)")])
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
    """A controller that does not answer (on loopback: no traffic leaves the machine).
    MessageTimeout=2: each Slurm command gives up after 1 s instead of 9 (the default 10)."""
    conf = tmp_path / "dead.conf"
    conf.write_text("ClusterName=none\nSlurmctldHost=localhost\nSlurmctldPort=1\n"
                    "AuthType=auth/munge\nAuthInfo=socket=/nonexistent/munge.sock\n"
                    "MessageTimeout=2\n"
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


def test_a_second_cluster_is_refused_by_name_and_the_first_keeps_running(slurm, tmp_path):
    """slurmctld's ports are fixed: a second `up` from another state folder used to fail
    with exit 1 and no word (its slurmctld could not bind). It names the port now, and
    touches nothing of the cluster already up."""
    r = _script_with(tmp_path / "second", "up")
    assert r.returncode == 2 and "port 16817 is taken" in r.stderr, r.stdout + r.stderr
    states = subprocess.run(["sinfo", "-h", "-o", "%T"], env={**os.environ, **slurm},
                            capture_output=True, text=True, timeout=30).stdout.split()
    assert states and set(states) <= {"idle", "mixed", "allocated"}, states


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


def test_job_array_runs_each_task_its_own_run(tmp_path):
    """Runs asking for the same allocation become one job array: task i exports run i's
    variables and runs its step; a run of another shape cannot join."""
    from runners.slurm import BatchRun, array_script

    def run(batch: str) -> list[ProcessSpec]:
        return [ProcessSpec("worker", r, ("/usr/bin/env",),
                            {"DNNBENCH_RANK": str(r), "DNNBENCH_THREADS": "1",
                             "DNNBENCH_SPEC": batch}) for r in range(2)]

    o = SlurmOptions(qos="debug")
    jobs = [BatchRun(run(b), 2, 60) for b in ("b2", "b4", "b6")]
    text = array_script(jobs, "arr", "/o/arr-%A_%a.out", o)
    assert "#SBATCH --array=0-2" in text and "#SBATCH --qos=debug" in text
    assert text.count("#SBATCH --nodes=2") == 1 and text.count("srun ") == 3
    path = tmp_path / "a.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    # run task 1's branch with srun stood in by a function that prints the environment
    shim = tmp_path / "shim.sh"
    shim.write_text("srun() { echo \"SPEC=$DNNBENCH_SPEC\"; }\nscontrol() { :; }\n"
                    "export -f srun scontrol\nSLURM_ARRAY_JOB_ID=7 SLURM_ARRAY_TASK_ID=1 "
                    "SLURM_JOB_NODELIST=n1 "
                    f"bash -c \"$(cat {path})\"\n")
    out = subprocess.run(["bash", str(shim)], capture_output=True, text=True)
    assert "SPEC=b4" in out.stdout and ":::DNNBENCH_SLURM_EXIT 0" in out.stdout, out
    # the task names its job first: found again even if its id was never recorded
    assert out.stdout.splitlines()[0] == ":::DNNBENCH_SLURM_JOB 7_1", out
    assert BatchRun(run("x"), 1, 60).shape(o) != jobs[0].shape(o)
    assert BatchRun(run("x"), 2, 600).shape(o) != jobs[0].shape(o)  # another time limit
    with pytest.raises(SlurmError, match="same allocation"):
        array_script([*jobs, BatchRun(run("x"), 1, 60)], "arr", "/o/a-%A_%a.out", o)


def test_an_ended_jobs_status_comes_from_its_output_and_slurm():
    from runners.slurm import EXIT_MARK, ended_by_slurm, result_from_output

    assert ended_by_slurm(["x", f"{EXIT_MARK}3"]) is None  # the script ended by itself
    assert result_from_output(["x", f"{EXIT_MARK}3"], "slurm", "s", 1.0).processes[0] \
        .returncode == 3
    limit = "slurmstepd: error: *** JOB 7 ON node1 CANCELLED AT 2026-01-01T00:00:00 DUE TO " \
            "TIME LIMIT ***"
    assert ended_by_slurm(["a", limit])[0] == "timeout"
    assert ended_by_slurm([], "TIMEOUT")[0] == "timeout"
    status, reason = ended_by_slurm([], "CANCELLED")
    assert status == "failed" and "never started" in reason
    assert "cancelled" in ended_by_slurm(["a", limit.split(" DUE")[0] + " ***"])[1]
    assert "NODE_FAIL" in ended_by_slurm(["a"], "NODE_FAIL")[1]
    assert "not shared" in ended_by_slurm([])[1]


def test_submit_needs_slurm_runs(torch_env, tmp_path):
    exp = tmp_path / "e.toml"
    exp.write_text('name = "e"\n[defaults]\nframework = "torch"\nmodel = "googlenet"\n')
    proc = run_cli("run", "-e", str(exp), "--submit", "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "add --launcher slurm" in proc.stderr, proc.stderr
    proc = run_cli("run", "-e", str(exp), "--submit", "--dry-run", str(tmp_path / "d"),
                   "--launcher", "slurm")
    assert proc.returncode == 2 and "give one" in proc.stderr
    proc = run_cli("collect", "--db", str(tmp_path / "none.db"))
    assert proc.returncode == 2 and "no such results database" in proc.stderr
    assert not (tmp_path / "none.db").exists()


SUBMITTED = """name = "{name}"
[defaults]
framework = "torch"
model = "googlenet"
image_size = 32
steps = 3
warmup = 1
trials = 2
target_width = 0
num_classes = 10
threads = 1
launcher = "slurm"
timeout_s = 240
[matrix]
batch_size = {batches}
strategy = ["single", "allreduce"]
nodes = [1, 2]
[[exclude]]
strategy = "single"
nodes = 2
[[exclude]]
strategy = "allreduce"
nodes = 1
"""


def test_a_submitted_sweep_is_collected_later_and_loses_nothing(all_envs, slurm, tmp_path):
    """6 runs of two shapes: two job arrays, submitted at once; the collector is killed
    (kill -9) midway and run again: every run lands once, with a local run's columns; a
    third collect stores nothing."""
    db, jobs = str(tmp_path / "r.db"), str(tmp_path / "jobs")
    exp = tmp_path / "s.toml"
    exp.write_text(SUBMITTED.format(name="sub", batches="[2, 4, 6]"))
    start = time.monotonic()
    proc = run_cli("run", "-e", str(exp), "--submit", "--db", db, "--slurm-dir", jobs,
                   env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    assert time.monotonic() - start < 60  # returns without waiting for any job
    assert "submitted 6 runs in 2 jobs" in proc.stdout, proc.stdout
    assert len(sqlite3.connect(db).execute("SELECT job_id FROM jobs").fetchall()) == 6
    again = run_cli("run", "-e", str(exp), "--submit", "--db", db, "--slurm-dir", jobs,
                    env=slurm)  # in flight: not submitted twice
    assert "submitted 0 runs" in again.stdout and "6 submitted earlier" in again.stdout
    status = run_cli("status", "--db", db, env=slurm)
    assert status.returncode == 0 and "sub " in status.stdout, status.stdout
    exe = os.path.join(os.path.dirname(os.sys.executable), "dnnbench")
    collector = subprocess.Popen([exe, "collect", "--db", db, "--wait", "--poll", "1"],
                                 env={**os.environ, **slurm}, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not sqlite3.connect(db).execute(
            "SELECT COUNT(*) FROM runs").fetchone()[0]:
        time.sleep(0.5)
    collector.kill()
    collector.wait()
    proc = run_cli("collect", "--db", db, "--wait", "--poll", "1", env=slurm)
    assert proc.returncode == 0, proc.stdout + proc.stderr + stored_tails(db)
    rows = sqlite3.connect(db).execute(
        "SELECT status, strategy, nodes, batch_size, n_trials, threads, images_per_s > 0, "
        "replicas_identical FROM runs ORDER BY strategy, batch_size").fetchall()
    assert rows == [("ok", "allreduce", 2, b, 2, 1, 1, 1) for b in (2, 4, 6)] + [
        ("ok", "single", 1, b, 2, 1, 1, None) for b in (2, 4, 6)], rows
    assert sqlite3.connect(db).execute(
        "SELECT COUNT(*) FROM jobs WHERE collected IS NULL").fetchone() == (0,)
    third = run_cli("collect", "--db", db, env=slurm)
    assert "nothing to collect" in third.stdout
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone() == (6,)


def test_a_cancelled_submitted_job_is_a_failed_row(torch_env, slurm, tmp_path):
    """Held in the queue (the experiment file's [slurm] table asks to begin in an hour),
    cancelled: collect stores a failed row saying so."""
    db = str(tmp_path / "r.db")
    exp = tmp_path / "c.toml"
    exp.write_text(SUBMITTED.format(name="held", batches="[2]").replace(
        'nodes = [1, 2]', 'nodes = [1]') + '[slurm]\nsbatch_options = ["--begin=now+3600"]\n')
    proc = run_cli("run", "-e", str(exp), "--submit", "--db", db, "--slurm-dir",
                   str(tmp_path / "jobs"), env=slurm)
    assert proc.returncode == 0 and "submitted 1 runs in 1 jobs" in proc.stdout, proc.stdout
    (job_id,) = sqlite3.connect(db).execute("SELECT job_id FROM jobs").fetchone()
    status = run_cli("status", "--db", db, env=slurm)
    assert status.stdout.splitlines()[1].split()[:4] == ["held", "1", "0", "0"], status.stdout
    # where Slurm cannot be asked, a job must not look ended: nothing is stored
    lost = run_cli("collect", "--db", db, env={**slurm, "PATH": str(tmp_path)})
    assert lost.returncode == 2 and "cannot ask Slurm" in lost.stderr, lost.stderr
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
    subprocess.run(["scancel", job_id], env={**os.environ, **slurm}, check=True)
    proc = run_cli("collect", "--db", db, env=slurm)
    assert "1 failed" in proc.stdout, proc.stdout
    (row,) = sqlite3.connect(db).execute("SELECT status, reason FROM runs").fetchall()
    assert row[0] == "failed" and "cancelled" in row[1] and job_id in row[1], row


def test_a_harness_killed_while_sbatch_answers_loses_no_job(torch_env, slurm, tmp_path,
                                                            monkeypatch):
    """The job is recorded before sbatch runs: a harness that dies right after sbatch
    (before it writes the id) leaves a row that the next collect finds the job of again,
    by its script in the queue; a row whose job never reached Slurm is forgotten after
    RECOVER_AFTER_S, so its run is submitted again."""
    import sys

    from harness import submit
    from harness.store import Store

    db = str(tmp_path / "r.db")
    exp = tmp_path / "k.toml"
    exp.write_text(SUBMITTED.format(name="killed", batches="[2]").replace(
        'nodes = [1, 2]', 'nodes = [1]') + '[slurm]\nsbatch_options = ["--begin=now+3600"]\n')
    dies = ("import os, sys\nfrom harness.store import Store\n"
            "Store.set_job_ids = lambda self, ids: os._exit(9)\n"
            "from harness.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", dies, "run", "-e", str(exp), "--submit",
                           "--db", db, "--slurm-dir", str(tmp_path / "jobs")],
                          env={**os.environ, **slurm}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 9, proc.stdout + proc.stderr
    assert sqlite3.connect(db).execute("SELECT job_id FROM jobs").fetchall() == [("?",)]
    queue = subprocess.run(["squeue", "-h", "-o", "%i %j"], env={**os.environ, **slurm},
                           capture_output=True, text=True).stdout.split()
    job_id = queue[queue.index("dnnbench-killed") - 1]
    proc = run_cli("collect", "--db", db, env=slurm)
    assert proc.returncode == 0 and "recovered 1 job" in proc.stdout, proc.stdout
    assert sqlite3.connect(db).execute("SELECT job_id FROM jobs").fetchall() == [(job_id,)]
    status = run_cli("status", "--db", db, env=slurm)  # held: pending
    assert status.stdout.splitlines()[1].split()[:2] == ["killed", "1"], status.stdout
    subprocess.run(["scancel", job_id], env={**os.environ, **slurm}, check=True)
    proc = run_cli("collect", "--db", db, env=slurm)
    assert "1 failed" in proc.stdout, proc.stdout
    # a row recorded long ago whose sbatch never ran: forgotten, its run pending again
    for key, value in slurm.items():
        monkeypatch.setenv(key, value)
    store = Store(str(tmp_path / "lost.db"))
    store.add_jobs([{"job_id": "?", "experiment": "lost", "config_hash": "h", "run_id": "r1",
                     "output": str(tmp_path / "never.out"), "script": str(tmp_path / "x.sbatch"),
                     "role": "slurm", "submitted": "2026-01-01T00:00:00+00:00",
                     "spec_json": "{}", "manifest_json": {}}])
    assert submit.recover_unsubmitted(store) == 1
    assert store.jobs() == []


def test_a_worker_samples_itself_where_the_harness_cannot(tmp_path):
    """frameworks/selfsample.py in a real child process that spins one core for ~1.5 s:
    its samples, read back by the harness, give ~1 core and its memory, measured from the
    mark on (the start-up sleep before it is excluded)."""
    import sys

    from frameworks import events
    from harness.telemetry import Telemetry

    child = (
        "import time, os\n"
        "from frameworks import events\n"
        "from frameworks.selfsample import SelfSampler\n"
        "s = SelfSampler.from_env()\n"
        "time.sleep(0.6)\n"
        "s.measuring()\n"
        "end = time.time() + 1.5\n"
        "while time.time() < end: pass\n"
        "events.emit(events.TELEMETRY, rank=1, **s.result())\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         env={**os.environ, "DNNBENCH_SELF_TELEMETRY": "0.2",
                              "PYTHONPATH": str(REPO)}, timeout=60)
    (ev,) = [events.parse(ln) for ln in out.stdout.splitlines() if events.parse(ln)]
    assert ev["event"] == events.TELEMETRY and len(ev["samples"]) >= 8, ev
    tel = Telemetry.from_events([ev])
    assert {s.tag for s in tel.samples} == {"worker1"}
    summary = tel.summary()
    # the spin, not the sleep (one core; sampling jitter on a loaded machine reached 1.27)
    assert 0.6 < summary["cpu_cores_per_worker"] <= 1.5, summary
    assert summary["tree_rss_peak_mb"] > 5
    # what sampling costs, reported with the samples: the sampling thread's own CPU time
    # (bench/selfsample.py measures it on real training), a small part of the time sampled
    assert 0 < ev["sampler_cpu_s"] < 0.1 * ev["sampled_s"] and ev["sampled_s"] >= 2.0, ev
    assert Telemetry.from_events([{"event": "done"}]) is None
    from frameworks.selfsample import ENV, SelfSampler

    for value in ("", "0", "x"):  # not asked: nothing runs in the worker
        os.environ[ENV] = value
        try:
            assert SelfSampler.from_env() is None
        finally:
            del os.environ[ENV]


def test_each_slurm_task_runs_in_a_container_named_for_its_job_and_task(tmp_path):
    """runners/container.under_slurm: the task's shell line, run here with a stand-in
    `podman` that prints its arguments: the container is named for job, step and task,
    labelled with the job, takes the rank variables and the plan's by name, and mounts the
    worker source read-only; the batch script removes the job's leftovers on every node."""
    from runners.container import SLURM_JOB_LABEL, under_slurm

    procs = [ProcessSpec("worker", r, ("/opt/venv/bin/python", "-m", "frameworks.worker"),
                         {"DNNBENCH_RANK": str(r), "DNNBENCH_THREADS": "1",
                          "DNNBENCH_SPEC": "{}"}, cwd="/src") for r in range(2)]
    tasks = under_slurm(procs, "localhost/dnnbench-torch:cpu", "podman", mounts=("/src",))
    assert tasks[0].argv == tasks[1].argv  # one program for every task of the step
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "podman").write_text("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n")
    (fake / "podman").chmod(0o755)
    out = subprocess.run(tasks[1].argv, capture_output=True, text=True, env={
        "PATH": f"{fake}:/usr/bin:/bin", "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "1"}).stdout.splitlines()
    assert out[out.index("--name") + 1] == "dnnbench-slurm-42-0-1"
    assert f"{SLURM_JOB_LABEL}=42" in out
    passed = {out[i + 1] for i, a in enumerate(out) if a == "-e"}
    assert {"SLURM_PROCID", "SLURM_LOCALID", "MASTER_ADDR", "TF_CONFIG", "DNNBENCH_SPEC",
            "DNNBENCH_THREADS"} <= passed
    assert "/src:/src:ro" in out and out[out.index("-w") + 1] == "/src"
    assert out[-3:] == ["localhost/dnnbench-torch:cpu", "-m", "frameworks.worker"]
    text = sbatch_script(tasks, 2, "c", "/o/c-%j.out", 60)
    assert "podman rm -f" in text and "--ntasks-per-node=1 --overlap" in text
    path = tmp_path / "c.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_threads_left_to_dnnbench_follow_the_jobs_allocation(monkeypatch):
    from frameworks.contract import RunSpec, worker_threads
    from frameworks.worker import allocated_threads, node_facts

    monkeypatch.setenv("DNNBENCH_THREADS", "1")  # the plan's estimate from sinfo
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "3")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    allocated_threads(RunSpec("torch", "alexnet"))
    assert os.environ["DNNBENCH_THREADS"] == "1"  # not inside a job: the plan's
    monkeypatch.setenv("SLURM_JOB_ID", "5")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    allocated_threads(RunSpec("torch", "alexnet", threads=2))
    assert worker_threads(RunSpec("torch", "alexnet", threads=2)) == 2  # asked: kept
    assert os.environ["OMP_NUM_THREADS"] == "1"
    allocated_threads(RunSpec("torch", "alexnet"))
    assert worker_threads(RunSpec("torch", "alexnet")) == 3
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "3"
    facts = node_facts()
    assert facts["slurm_job_id"] == "5" and facts["node_cpus"] >= 1 and facts["cpu_model"]
