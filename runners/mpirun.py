"""The `mpirun` launcher (Open MPI): all ranks of a job under one mpirun.

`mpirun_command` is a pure function (tests compare its output to expected text); `launch`
runs it through the same process-tree owner as every other launcher. Per-rank variables
cannot differ under mpirun, so workers read their rank from OMPI_COMM_WORLD_* (see
frameworks.worker.rank_info); everything else travels with `-x`.
"""

from __future__ import annotations

import os
import shutil
import threading

from runners.process import LineCallback, StartCallback, run_job
from runners.spec import JobResult, ProcessSpec

NAME = "mpirun"
#: Variables that differ per rank: mpirun sets its own equivalents.
PER_RANK = {"DNNBENCH_RANK", "DNNBENCH_LOCAL_RANK", "RANK", "LOCAL_RANK"}


class MpiNotFound(RuntimeError):
    pass


def mpirun_command(specs: list[ProcessSpec], mpirun: str = "mpirun",
                   as_root: bool | None = None, mca: dict[str, str] | None = None
                   ) -> ProcessSpec:
    """One ProcessSpec running every rank of `specs` (same argv) under mpirun."""
    if not specs:
        raise ValueError("no processes to launch")
    argv0 = specs[0].argv
    if any(s.argv != argv0 for s in specs):
        raise ValueError("mpirun runs one program for all ranks; got different argv")
    slots: dict[str, int] = {}
    for s in specs:
        slots[s.host] = slots.get(s.host, 0) + 1
    env = {k: v for k, v in specs[0].env.items() if k not in PER_RANK}
    as_root = (os.geteuid() == 0) if as_root is None else as_root
    cmd = [mpirun, "-np", str(len(specs)), "-H",
           ",".join(f"{h}:{n}" for h, n in slots.items()),
           "--bind-to", "none", "--map-by", "slot", "--tag-output"]
    if as_root:
        cmd.append("--allow-run-as-root")
    for key, value in sorted((mca or {}).items()):
        cmd += ["--mca", key, value]
    for key in sorted(env):
        cmd += ["-x", key]
    cmd += list(argv0)
    run_env = dict(env)
    if as_root:
        run_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return ProcessSpec("mpirun", 0, tuple(cmd), run_env, cwd=specs[0].cwd)


def launch(specs: list[ProcessSpec], timeout: float, on_line: LineCallback | None = None,
           on_start: StartCallback | None = None, mpirun: str | None = None,
           cancel: threading.Event | None = None) -> JobResult:
    exe = mpirun or shutil.which("mpirun")
    if not exe:
        raise MpiNotFound("mpirun not found: install Open MPI (Debian: apt-get install "
                          "openmpi-bin libopenmpi-dev)")
    return run_job([mpirun_command(specs, exe)], timeout, on_line=on_line, on_start=on_start,
                   cancel=cancel)
