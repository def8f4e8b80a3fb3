"""How processes are started: every launcher takes the same ProcessSpecs and returns the
same JobResult, and tears the whole process tree down on timeout, failure or Ctrl-C.
Never imports frameworks/."""

from __future__ import annotations

from runners.process import LineCallback, StartCallback
from runners.spec import JobResult, ProcessSpec


def launch(name: str, specs: list[ProcessSpec], timeout: float,
           on_line: LineCallback | None = None,
           on_start: StartCallback | None = None, **options) -> JobResult:
    """Start `specs` with the launcher called `name` (local, mpirun, horovodrun, slurm,
    container); `options` go to launchers that take them (slurm: options, nodes, horovod,
    job_name; container: image, engine, gpus, netns, mounts, job; all but slurm: cancel, an
    Event that ends the job from another thread)."""
    from runners import container, horovodrun, local, mpirun, slurm

    if name == "slurm":
        return slurm.launch(specs, timeout, on_line=on_line, on_start=on_start, **options)
    if name == "container":
        return container.launch(specs, timeout, on_line=on_line, on_start=on_start, **options)
    launchers = {"local": local.launch, "mpirun": mpirun.launch,
                 "horovodrun": horovodrun.launch}
    if name not in launchers:
        raise ValueError(f"launcher {name!r} is not one of {', '.join(launchers)}, slurm, "
                         "container")
    return launchers[name](specs, timeout, on_line=on_line, on_start=on_start, **options)
