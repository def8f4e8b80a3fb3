"""The one job layer: a request (a RunSpec of the sweep or of `--submit`, a commbench
library, a verify or datacheck check) becomes a Job (its processes, the launcher that
starts them, that launcher's options), and `run` starts any Job on any launcher.

Which launcher serves which strategy and environment is decided once, as data, in
frameworks/contract.py (`RunSpec.resolved_launcher`, and RULES: every refusal with its
reason; the tests run every rule's example). This module turns that decision into
processes, once: on this host; across emulated hosts (each process in its host's network
namespace, or one mpirun reaching the hosts through its launch agent); in containers; as
Slurm tasks sized to the compute nodes. The harness never starts a process another way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path

import frameworks
import runners
from frameworks.plan import PlanContext, plan, slurm_mpi, spec_node_of
from harness import envs, telemetry
from runners import container, emulated
from runners.process import LineCallback, StartCallback
from runners.slurm import NODE_MARK, SlurmOptions
from runners.spec import JobResult, ProcessSpec


@dataclass
class Job:
    """What to start and how: `launcher` is a runners.launch name (local, mpirun,
    horovodrun, slurm, container), `options` that launcher's keyword options."""

    procs: list[ProcessSpec]
    launcher: str
    options: dict = field(default_factory=dict)


def run(job: Job, timeout: float, on_line: LineCallback | None = None,
        on_start: StartCallback | None = None, **extra) -> JobResult:
    """Start a Job and wait for it; every launcher tears its whole tree down on timeout,
    failure or Ctrl-C. `extra`: per-call options (cancel, an Event ending the job)."""
    return runners.launch(job.launcher, job.procs, timeout, on_line=on_line,
                          on_start=on_start, **extra, **job.options)


def across(procs: list[ProcessSpec], cluster: emulated.Cluster, launcher: str) -> Job:
    """Processes planned for an emulated cluster's addresses, placed on its hosts: one
    mpirun (or horovodrun with the MPI controller) reaching them through its launch
    agent, else each process inside its host's network namespace and limits."""
    if launcher in ("mpirun", "horovodrun-mpi"):
        return Job([emulated.mpirun_across(procs, cluster)], "local")
    return Job([emulated.inside(p, cluster) for p in procs], "local")


def for_library(procs: list[ProcessSpec], launcher: str) -> Job:
    """A communication benchmark's ranks on this host: `launcher` is the library's
    (frameworks' SUPPORT.comm_libraries), horovodrun-mpi being horovodrun with its MPI
    controller."""
    if launcher.startswith("horovodrun"):
        return Job(procs, "horovodrun",
                   {"controller": "mpi" if launcher.endswith("mpi") else "gloo"})
    return Job(procs, launcher if launcher == "mpirun" else "local")


def variant_for(device: str) -> str:
    return "cuda" if device == "cuda" else "cpu"


def worker_source_root() -> str:
    """A directory holding only this project's packages, for the worker's PYTHONPATH.

    From a source checkout that is the checkout; from an installed copy the packages are
    staged into the cache, so no other package of the harness's site-packages can leak
    into a framework's environment.
    """
    root = Path(frameworks.__file__).resolve().parent.parent
    if (root / "setup.cfg").is_file():
        return str(root)
    digest = hashlib.sha256()
    for pkg in ("frameworks", "models", "runners"):
        for f in sorted((root / pkg).rglob("*.py")):
            digest.update(f.read_bytes())
    staged = envs.cache_dir() / "worker-src" / digest.hexdigest()[:12]
    if not staged.is_dir():
        tmp = staged.with_suffix(".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        for pkg in ("frameworks", "models", "runners"):
            shutil.copytree(root / pkg, tmp / pkg, ignore=shutil.ignore_patterns("__pycache__"))
        tmp.rename(staged)
    return str(staged)


def slurm_context(python: str, source_root: str, run_id: str,
                  options: SlurmOptions | None) -> PlanContext:
    """Threads per task from the compute nodes' CPUs (Slurm's word for them), not from
    this host's: the harness may run on a login node of another size."""
    from runners.slurm import node_cpus

    cpus = node_cpus((options or SlurmOptions()).partition)
    return PlanContext(python, source_root, run_id,
                       cores_per_host=cpus or os.cpu_count() or 1)


def placed(spec, python: str, source_root: str, run_id: str,
            cluster: emulated.Cluster | None, slurm_options: SlurmOptions | None = None
            ) -> tuple[list, str]:
    """The run's processes and the launcher that starts them: on this host, or one node
    per emulated host (each process inside its host's namespace, or one mpirun reaching
    the hosts through its launch agent); in containers, each process in its own (the
    container launcher puts it in its host's namespace); under Slurm, sized to the
    compute nodes."""
    launcher = ("container" if spec.env == "container" and spec.resolved_launcher != "slurm"
                else spec.resolved_launcher)
    if launcher == "slurm":
        return plan(spec, slurm_context(python, source_root, run_id, slurm_options)), launcher
    if cluster is None:
        procs = plan(spec, PlanContext(python, source_root, run_id))
        if launcher == "container":  # the image's horovodrun or mpirun, or one each
            procs = container.inside_one(procs, spec.resolved_launcher)
        return procs, launcher
    # a host's cores: its CPU limit (a fraction of a core still runs one thread), else
    # its share of this machine's
    cores = (int(cluster.cpus_per_host) if cluster.cpus_per_host
             else (os.cpu_count() or 1) // spec.hosts)
    ctx = PlanContext(python, source_root, run_id, hosts=tuple(cluster.addresses),
                      cores_per_host=max(1, cores))
    procs = plan(spec, ctx)
    if launcher == "container":
        return [emulated.on_lab_interface(p) for p in procs], launcher
    job = across(procs, cluster, spec.resolved_launcher)
    return job.procs, job.launcher


def launch_options(spec, run_id: str, slurm_options: SlurmOptions | None,
                    image: dict | None = None, source_root: str = "",
                    cluster: emulated.Cluster | None = None,
                    extra_mounts: tuple[str, ...] = ()) -> dict:
    if spec.env == "container" and spec.resolved_launcher != "slurm":
        assert image is not None
        # the same paths inside as outside: the worker code the harness speaks to, the data,
        # the gate files of interleaved trials
        mounts = ((source_root,) + ((str(Path(spec.data).resolve()),) if spec.data else ())
                  + extra_mounts)
        return {"image": image["image"], "engine": image["engine"],
                "gpus": spec.device == "cuda", "mounts": mounts, "job": f"dnnbench-{run_id}",
                "netns": dict(zip(cluster.addresses, cluster.hosts)) if cluster else None}
    if spec.resolved_launcher != "slurm":
        return {}
    return {"options": slurm_options or SlurmOptions(), "nodes": spec.nodes,
            "horovod": slurm_mpi(spec), "job_name": f"dnnbench-{run_id}"}


def slurm_tasks(procs: list, spec, image: dict | None, source_root: str,
                interval_s: float) -> list:
    """A Slurm run's processes as its tasks: the workers sample themselves (this host
    cannot see compute nodes' processes); with env = "container", each task runs its
    process in the framework's image, the worker source and data bound at their paths.
    A parameter-server run's tasks are each marked with the node of the job the plans'
    one rule puts it on (frameworks.plan.node_of; runners.slurm.NODE_MARK), as the local
    and emulated launchers place them and the model and bottleneck reading assume: server
    i on node i mod nodes beside the workers, the scheduler or chief on the first; with
    ps_hosts = "own", the servers and the scheduler or chief on nodes of their own past
    the workers'."""
    if spec.ps:
        procs = [replace(p, host=NODE_MARK.format(spec_node_of(spec, p.role, p.rank)))
                 for p in procs]
    procs = telemetry.self_sampled(procs, interval_s)
    if image is None:
        return procs
    procs = [replace(p, cwd=p.cwd or source_root) for p in procs]
    mounts = (source_root,) + ((str(Path(spec.data).resolve()),) if spec.data else ())
    return container.under_slurm(procs, image["image"], image["engine"],
                                 spec.device == "cuda", mounts)


def slurm_plan(spec, ctx: PlanContext, environments: dict, images: dict, source_root: str,
               interval_s: float) -> list:
    """One Slurm run's tasks, planned for the compute nodes (`ctx` from slurm_context,
    its run id this run's), in the framework's venv or its image."""
    key = (spec.framework, variant_for(spec.device))
    image = images.get(key) if spec.env == "container" else None
    python = container.IMAGE_PYTHON if image else environments[key].python
    return slurm_tasks(plan(spec, replace(ctx, python=python)), spec, image, source_root,
                       interval_s)


def for_run(spec, python: str, source_root: str, run_id: str,
            cluster: emulated.Cluster | None = None,
            slurm_options: SlurmOptions | None = None, image: dict | None = None,
            gate: tuple[str, str] | None = None, telemetry_interval_s: float = 0.0) -> Job:
    """One run of the sweep as a Job: planned and placed (`placed`), under a memory limit,
    in its image (`image`: engine, image) with the worker source, data and gate folder
    bound, gated for interleaved trials (`gate`: the variable and the gate file), and as
    Slurm tasks that sample themselves."""
    procs, launcher = placed(spec, python, source_root, run_id, cluster, slurm_options)
    if launcher == "slurm":
        procs = slurm_tasks(procs, spec, image, source_root, telemetry_interval_s)
    if spec.memory_limit_mb:
        procs = [replace(p, memory_limit_bytes=spec.memory_limit_mb * 2**20) for p in procs]
    if image is not None:
        # `python -m` puts its working directory first on sys.path: inside the image
        # that is the copy baked in at build time (/opt/dnnbench), which must not win
        # over the mounted checkout the harness speaks to
        procs = [replace(p, cwd=p.cwd or source_root) for p in procs]
    if gate is not None:
        procs = [replace(p, env={**p.env, gate[0]: gate[1]}) for p in procs]
    options = launch_options(spec, run_id, slurm_options, image, source_root, cluster,
                             extra_mounts=(str(Path(gate[1]).parent),) if gate else ())
    return Job(procs, launcher, options)
