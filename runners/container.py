"""The `container` launcher: each process of a job inside a framework's image.

`container_command` is a pure function from a ProcessSpec to the command that runs it in a
container, for Docker or Podman (same CLI) and for Apptainer/Singularity (what most HPC
sites allow instead). The spec's argv runs as it is inside the image (plan the job with
IMAGE_PYTHON as the interpreter). Paths stay the same inside as outside (the worker
source, the data, anything mounted is bound at its host path), so a RunSpec means the
same thing in a container as in a venv; only the interpreter is the image's. The spec's
environment goes in with `-e`/`--env`, host networking by default or an emulated host's
network namespace, `--gpus all` (Docker), `--device nvidia.com/gpu=all` (Podman with the
NVIDIA toolkit's CDI spec) or `--nv` (Apptainer) on GPU hosts.

Teardown: a Docker/Podman container is not a child of the `run` command that started it
(the engine's monitor owns it), so killing the command's process tree, which `run_job`
does on a timeout, failure or Ctrl-C, is not enough. Every container gets a name and
`launch` removes them all (`rm -f`) when the job ends, however it ends. Apptainer runs the
program as a plain child process in the host's PID namespace: `run_job` alone tears it
down. A memory limit becomes the container's address-space ulimit (the same RLIMIT_AS a
venv run gets), since setting it on the engine's client would limit the client.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

from runners import horovodrun, mpirun
from runners.process import LineCallback, StartCallback, identity, run_job
from runners.spec import JobResult, ProcessSpec

NAME = "container"
ENGINES = ("podman", "docker", "apptainer", "singularity")
DAEMON_ENGINES = ("podman", "docker")
IMAGE_PYTHON = "/opt/venv/bin/python"  # docker/install.sh
#: Every container a harness starts carries its owner's identity (runners.process.identity)
#: so one left behind by a harness that died is found and removed (`reap`).
OWNER_LABEL = "dnnbench.owner"
_REAPED: set[str] = set()
#: Podman settings this project needs on hosts like its reference VM (docker/containers.conf)
CONTAINERS_CONF = Path(__file__).resolve().parent.parent / "docker" / "containers.conf"
PID_WAIT_S = 60.0


class ContainerError(ValueError):
    """This engine cannot run the job as asked (the message says why and what to use)."""


def engine_env(engine: str) -> dict[str, str]:
    """What an engine command adds to the environment: Podman reads the project's
    containers.conf unless the user points CONTAINERS_CONF elsewhere."""
    if engine == "podman" and "CONTAINERS_CONF" not in os.environ:
        return {"CONTAINERS_CONF": str(CONTAINERS_CONF)}
    return {}


def container_name(job: str, spec: ProcessSpec) -> str:
    return f"{job}-{spec.tag}"


def container_command(spec: ProcessSpec, image: str, engine: str = "podman",
                      gpus: bool = False, netns: str | None = None,
                      mounts: tuple[str, ...] = (), name: str | None = None,
                      labels: dict[str, str] | None = None) -> ProcessSpec:
    """`spec` (its argv a command inside the image) run in `image`; each mount is a host
    path bound read-only at the same path (or an explicit `SRC:DST[:OPTS]`). `labels`
    replace the owner label (the harness process that removes the container)."""
    if engine not in ENGINES:
        raise ContainerError(f"container engine {engine!r} is not one of {', '.join(ENGINES)}")
    if image.startswith("-") or not image.strip() or any(ord(c) < 33 for c in image):
        raise ContainerError(f"container image {image!r}: not an image name (it would be read "
                             "as an option)")
    binds = [_bind(m) for m in mounts]
    if engine in ("apptainer", "singularity"):
        # it shares its caller's network: enter the emulated host's namespace first
        cmd = ["nsenter", f"--net=/run/netns/{netns}", "--"] if netns else []
        cmd += [engine, "exec", "--cleanenv"]
        if spec.cwd:
            cmd += ["--pwd", spec.cwd]
        if gpus:
            cmd.append("--nv")
        for m in binds:
            cmd += ["--bind", m]
        for k in sorted(spec.env):
            cmd += ["--env", f"{k}={spec.env[k]}"]
        if spec.memory_limit_bytes:
            raise ContainerError("apptainer has no per-container ulimit: use a venv run or "
                             "Slurm's memory limit")
        cmd += [image, *spec.argv]
        return ProcessSpec(spec.role, spec.rank, tuple(cmd), {}, spec.cwd, None, spec.host,
                           spec.service)
    cmd = [engine, "run", "--rm", "--init", "--ipc=host",
           "--network", f"ns:/run/netns/{netns}" if netns else "host"]
    if netns:
        # inside an emulated host the host name resolves to its lab address: libraries
        # that bind what the host name resolves to (Horovod 0.28's process-set Gloo
        # context ignores HOROVOD_GLOO_IFACE) then bind the lab interface
        cmd += ["--hostname", netns, "--add-host", f"{netns}:{spec.host}"]
    for key, value in (labels or {OWNER_LABEL: identity(os.getpid())}).items():
        cmd += ["--label", f"{key}={value}"]
    if name:
        cmd += ["--name", name]
    if gpus:
        cmd += (["--device", "nvidia.com/gpu=all", "--security-opt=label=disable"]
                if engine == "podman" else ["--gpus", "all"])
    if spec.memory_limit_bytes:
        cmd += ["--ulimit", f"as={spec.memory_limit_bytes}:{spec.memory_limit_bytes}"]
    if spec.cwd:
        cmd += ["-w", spec.cwd]
    for m in binds:
        cmd += ["-v", m]
    for k in sorted(spec.env):
        cmd += ["-e", f"{k}={spec.env[k]}"]
    cmd += ["--entrypoint", spec.argv[0], "--", image, *spec.argv[1:]]
    return ProcessSpec(spec.role, spec.rank, tuple(cmd), engine_env(engine), spec.cwd, None,
                       spec.host, spec.service)


#: What a container under Slurm takes from its task's environment, by name (`-e NAME`):
#: srun sets the rank variables per task, and the batch script the job's addresses, known
#: only once allocated; the plan's own variables are added per job (`under_slurm`).
SLURM_PASS = ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_NNODES",
              "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURMD_NODENAME", "SLURM_CPUS_PER_TASK",
              "SLURM_CPUS_ON_NODE", "SLURM_JOB_NODELIST", "MASTER_ADDR", "TF_CONFIG",
              "DNNBENCH_TASK_ADDRS", "DNNBENCH_ROOT_IP")
#: the Slurm job a container belongs to: it is left over once Slurm no longer runs the job
SLURM_JOB_LABEL = "dnnbench.slurm_job"
#: set on the processes of a containerised Slurm job: the engine, for the job's clean-up
ENGINE_ENV = "DNNBENCH_CONTAINER_ENGINE"


def under_slurm(specs: list[ProcessSpec], image: str, engine: str, gpus: bool = False,
                mounts: tuple[str, ...] = ()) -> list[ProcessSpec]:
    """Each process (its argv a command inside the image) as a Slurm task running it in a
    container: a shell line, since the container's name holds the job and task ids
    (dnnbench-slurm-JOB-STEP-TASK) and its environment comes by name from the task's.
    Podman/Docker containers carry the job id as a label: `reap` removes any that outlive
    their job (a task killed with SIGKILL leaves its container behind). Apptainer runs
    the program as the task's own process and inherits its environment."""
    import shlex

    names = sorted({k for s in specs for k in s.env} | set(SLURM_PASS))
    out = []
    for spec in specs:
        if engine in ("apptainer", "singularity"):
            cmd = list(container_command(replace(spec, env={}), image, engine, gpus,
                                         mounts=mounts).argv)
            cmd.remove("--cleanenv")
            line = "exec " + " ".join(shlex.quote(a) for a in cmd)
        else:
            cmd = list(container_command(replace(spec, env={}), image, engine, gpus,
                                         mounts=mounts, name="dnnbench-slurm-@ID@",
                                         labels={SLURM_JOB_LABEL: "@JOB@"}).argv)
            at = cmd.index("--entrypoint")
            cmd[at:at] = [x for k in names for x in ("-e", k)]
            conf = "".join(f"export {k}={shlex.quote(v)}; "
                           for k, v in engine_env(engine).items())
            # the placeholders sit in words shlex leaves unquoted (letters, '-', '.', '=',
            # '@'), so the task's shell expands the variables put there
            line = ("exec " + " ".join(shlex.quote(a) for a in cmd)).replace(
                "@ID@", '"$SLURM_JOB_ID-${SLURM_STEP_ID:-0}-$SLURM_PROCID"').replace(
                "@JOB@", '"$SLURM_JOB_ID"')
            line = conf + line
        out.append(replace(spec, argv=("bash", "-c", line),
                           env={**spec.env, ENGINE_ENV: engine}))
    return out


def slurm_cleanup(engine: str) -> str:
    """Shell: remove this job's containers still there on the node it runs on."""
    return (f"{engine} ps -aq --filter label={SLURM_JOB_LABEL}=\"$SLURM_JOB_ID\" | "
            f"xargs -r {engine} rm -f >/dev/null 2>&1 || true")


def _bind(mount: str) -> str:
    """A host path bound read-only at the same path, or an explicit absolute
    `SRC:DST[:OPTS]`. Anything else with a ':' (a host folder named `a:b`) would be read
    as SRC:DST and lose its read-only flag: refused."""
    if ":" not in mount:
        return f"{mount}:{mount}:ro"
    parts = mount.split(":")
    if (len(parts) in (2, 3) and all(p.startswith("/") for p in parts[:2])
            and (len(parts) == 2 or parts[2] in ("ro", "rw"))):
        return mount
    raise ContainerError(f"mount {mount!r}: a host path with ':' cannot be bound (the engine "
                         "reads ':' as SRC:DST:OPTIONS); move or rename it")


def container_pid(engine: str, name: str) -> int | None:
    """The host PID of the container's first process, once it runs."""
    proc = subprocess.run([engine, "inspect", "--format", "{{.State.Pid}}", name],
                          capture_output=True, text=True, env={**os.environ,
                                                               **engine_env(engine)})
    try:
        pid = int(proc.stdout.strip() or 0)
    except ValueError:
        return None
    return pid or None


def reap(engine: str) -> list[str]:
    """Remove the containers a dnnbench process started and left behind when it died
    (kill -9, a lost session: its `finally` never ran). Only containers carrying the owner
    label are looked at, and only those whose owner is no longer alive are removed."""
    env = {**os.environ, **engine_env(engine)}
    proc = subprocess.run([engine, "ps", "-a", "--filter", f"label={OWNER_LABEL}", "--format",
                           "{{.Names}} {{index .Labels \"" + OWNER_LABEL + "\"}}"],
                          capture_output=True, text=True, env=env)
    dead = []
    for line in proc.stdout.splitlines():
        name, _, owner = line.strip().partition(" ")
        pid = owner.split("-", 1)[0]
        if name and (not pid.isdigit() or identity(int(pid)) != owner):
            dead.append(name)
    remove(engine, dead)
    return dead + reap_slurm(engine)


def reap_slurm(engine: str) -> list[str]:
    """Remove containers of Slurm jobs that Slurm no longer runs. Only when squeue
    answers: an unreachable controller must not make running jobs look ended."""
    env = {**os.environ, **engine_env(engine)}
    proc = subprocess.run([engine, "ps", "-a", "--filter", f"label={SLURM_JOB_LABEL}",
                           "--format", "{{.Names}} {{index .Labels \"" + SLURM_JOB_LABEL
                           + "\"}}"], capture_output=True, text=True, env=env)
    found = [line.split() for line in proc.stdout.splitlines() if len(line.split()) == 2]
    if not found:
        return []
    try:
        queue = subprocess.run(["squeue", "-h", "-o", "%i %A"], capture_output=True,
                               text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if queue.returncode:
        return []
    active = set(queue.stdout.split())  # array task ids (1_2) and their own job ids
    dead = [name for name, job in found if job not in active]
    remove(engine, dead)
    return dead


def remove(engine: str, names: list[str]) -> None:
    """Force-remove the job's containers (those still there; `--rm` took the others).
    Podman stops at the first name it does not know and removes none of the rest unless
    told `--ignore` (measured with 4.3.1: `rm -f gone there` leaves `there`); Docker
    removes the others and reports the missing ones."""
    if names:
        subprocess.run([engine, "rm", "-f", *(["--ignore"] if engine == "podman" else []),
                        *names], capture_output=True, env={**os.environ, **engine_env(engine)})


def inside_one(specs: list[ProcessSpec], launcher: str,
               controller: str = "gloo") -> list[ProcessSpec]:
    """The job's processes as the container launcher starts them: each in its own
    (launcher "local"), or, for horovodrun and mpirun, the image's own launcher in one
    container starting every rank inside it (one host)."""
    if launcher == "horovodrun":
        exe = str(Path(specs[0].argv[0]).parent / "horovodrun")
        return [horovodrun.horovodrun_command(specs, exe, controller)]
    if launcher == "mpirun":
        return [mpirun.mpirun_command(specs, "mpirun")]
    if launcher != "local":
        raise ContainerError(f"launcher {launcher!r} cannot run inside a container: use "
                             "local, horovodrun or mpirun")
    return specs


def launch(specs: list[ProcessSpec], timeout: float, on_line: LineCallback | None = None,
           on_start: StartCallback | None = None, image: str = "", engine: str = "podman",
           gpus: bool = False, netns: dict[str, str] | None = None,
           mounts: tuple[str, ...] = (), job: str = "dnnbench",
           cancel: threading.Event | None = None) -> JobResult:
    """Run each of `specs` in its own container of `image` (`netns` maps a spec's host
    address to the emulated host it runs in). A launcher inside one container (the
    image's horovodrun or mpirun starting every rank) is one spec: `inside_one`."""
    if not image:
        raise ContainerError("the container launcher needs an image")
    daemon = engine in DAEMON_ENGINES
    if daemon and engine not in _REAPED:  # once per harness process, before its first job
        reap(engine)
        _REAPED.add(engine)
    names = [container_name(job, s) if daemon else "" for s in specs]
    wrapped = [container_command(s, image, engine, gpus, (netns or {}).get(s.host), mounts,
                                 name or None) for s, name in zip(specs, names)]
    stop = threading.Event()

    def report_pids() -> None:
        """Telemetry follows the container's processes, not the engine's client."""
        todo = {s.tag: n for s, n in zip(specs, names)}
        deadline = time.monotonic() + PID_WAIT_S
        while todo and not stop.is_set() and time.monotonic() < deadline:
            for tag, n in list(todo.items()):
                pid = container_pid(engine, n)
                if pid:
                    on_start(tag, pid)
                    del todo[tag]
            stop.wait(0.5)

    watcher = threading.Thread(target=report_pids, daemon=True)
    try:
        def started(tag: str, pid: int) -> None:
            if on_start is not None:
                on_start(tag, pid)
                if daemon and not watcher.is_alive() and tag == specs[-1].tag:
                    watcher.start()

        return run_job(wrapped, timeout, on_line=on_line, on_start=started, cancel=cancel)
    finally:
        stop.set()
        if daemon:
            remove(engine, names)
