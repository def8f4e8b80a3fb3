"""The `horovodrun` launcher: Horovod's own launcher starts every rank (gloo rendezvous by
default, or Open MPI underneath with `controller="mpi"`).

`horovodrun_command` is a pure function (tests compare it to expected text); `launch` runs
it through the same process-tree owner as every other launcher, so a hung or failed rank
tears down horovodrun and every rank it started. Per-rank variables cannot differ under
horovodrun: workers read HOROVOD_RANK / HOROVOD_LOCAL_RANK / HOROVOD_SIZE (see
frameworks.worker.rank_info).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from runners.process import LineCallback, StartCallback, run_job
from runners.spec import JobResult, ProcessSpec

NAME = "horovodrun"
PER_RANK = {"DNNBENCH_RANK", "DNNBENCH_LOCAL_RANK", "RANK", "LOCAL_RANK"}
CONTROLLERS = ("gloo", "mpi")


class HorovodNotFound(RuntimeError):
    pass


def horovodrun_for(python: str) -> str:
    """horovodrun of the environment whose python runs the workers."""
    return str(Path(python).parent / "horovodrun")


def horovodrun_command(specs: list[ProcessSpec], horovodrun: str, controller: str = "gloo",
                       as_root: bool | None = None) -> ProcessSpec:
    """One ProcessSpec running every rank of `specs` (same argv) under horovodrun."""
    if not specs:
        raise ValueError("no processes to launch")
    if controller not in CONTROLLERS:
        raise ValueError(f"controller {controller!r} is not one of {', '.join(CONTROLLERS)}")
    argv0 = specs[0].argv
    if any(s.argv != argv0 for s in specs):
        raise ValueError("horovodrun runs one program for all ranks; got different argv")
    slots: dict[str, int] = {}
    for s in specs:
        host = "localhost" if s.host in ("127.0.0.1", "localhost") else s.host
        slots[host] = slots.get(host, 0) + 1
    env = {k: v for k, v in specs[0].env.items() if k not in PER_RANK}
    cmd = [horovodrun, "-np", str(len(specs)), "-H",
           ",".join(f"{h}:{n}" for h, n in slots.items()), f"--{controller}"]
    cmd += list(argv0)
    as_root = (os.geteuid() == 0) if as_root is None else as_root
    if as_root and controller == "mpi":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return ProcessSpec("horovodrun", 0, tuple(cmd), env, cwd=specs[0].cwd)


def launch(specs: list[ProcessSpec], timeout: float, on_line: LineCallback | None = None,
           on_start: StartCallback | None = None, controller: str = "gloo",
           cancel: threading.Event | None = None) -> JobResult:
    exe = horovodrun_for(specs[0].argv[0])
    if not Path(exe).is_file():
        raise HorovodNotFound(f"{exe} does not exist: this environment was built without "
                              "Horovod (rebuild it with `dnnbench env setup FRAMEWORK` and "
                              "DNNBENCH_HOROVOD unset)")
    return run_job([horovodrun_command(specs, exe, controller)], timeout, on_line=on_line,
                   on_start=on_start, cancel=cancel)
