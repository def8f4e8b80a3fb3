"""Container commands: the same worker, run inside a framework's image.

Pure functions from a ProcessSpec to the command that runs it in a container, for Docker
or Podman (same CLI) and for Apptainer/Singularity (what most HPC sites allow instead):
the spec's environment goes in with `-e`/`--env` (except the host's PYTHONPATH: the image
has its own copy of the project), host networking by default or an emulated host's network
namespace, the results directory mounted, `--gpus all` (Docker/Podman) or `--nv`
(Apptainer) on GPU hosts. Differences that matter for benchmarking: Docker/Podman isolate
the environment and PID namespace (`--init` reaps zombies; teardown signals reach the
container's process through the engine); Apptainer runs the image as the calling user in
the host's PID and network namespaces with the host environment unless `--cleanenv`,
which is what is used here so that both see only the RunSpec's variables.

Not wired into sweeps yet (issue #9): the image build works through `dnnbench image
build`, these commands are tested as text.
"""

from __future__ import annotations

from runners.spec import ProcessSpec

ENGINES = ("podman", "docker", "apptainer", "singularity")
HOST_ONLY = {"PYTHONPATH", "PYTHONNOUSERSITE"}


def container_command(spec: ProcessSpec, image: str, engine: str = "podman",
                      gpus: bool = False, netns: str | None = None,
                      mounts: tuple[str, ...] = ()) -> ProcessSpec:
    """`spec` (a worker running `python -m MODULE`) inside `image`."""
    if engine not in ENGINES:
        raise ValueError(f"container engine {engine!r} is not one of {', '.join(ENGINES)}")
    env = {k: v for k, v in spec.env.items() if k not in HOST_ONLY}
    program = list(spec.argv[1:])  # drop the host's interpreter: the image has its own
    if engine in ("apptainer", "singularity"):
        cmd = [engine, "exec", "--cleanenv"]
        if gpus:
            cmd.append("--nv")
        for m in mounts:
            cmd += ["--bind", m]
        for k in sorted(env):
            cmd += ["--env", f"{k}={env[k]}"]
        cmd += [image, "/opt/venv/bin/python", *program]
    else:
        cmd = [engine, "run", "--rm", "--init", "--ipc=host",
               "--network", f"ns:/run/netns/{netns}" if netns else "host"]
        if gpus:
            cmd += ["--gpus", "all"]
        for m in mounts:
            cmd += ["-v", m]
        for k in sorted(env):
            cmd += ["-e", f"{k}={env[k]}"]
        cmd += ["--entrypoint", "/opt/venv/bin/python", image, *program]
    return ProcessSpec(spec.role, spec.rank, tuple(cmd), {}, spec.cwd, spec.memory_limit_bytes,
                       spec.host, spec.service)
