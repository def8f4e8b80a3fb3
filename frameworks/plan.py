"""Which processes a RunSpec needs: plain Python, no deep-learning framework imported.

The harness asks for the plan and hands the ProcessSpecs to a runner; runners never look
inside. A framework with distributed strategies provides `frameworks/<fw>/plan.py` with a
`plan(spec, ctx)`; everything else gets one worker process.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import socket
from dataclasses import dataclass, field, replace

from frameworks.contract import RunSpec, hosts_taken
from runners.spec import ProcessSpec

WORKER_MODULE = "frameworks.worker"


@dataclass(frozen=True)
class PlanContext:
    """Where the processes will run: the environment's python, source root, host list."""

    python: str
    source_root: str
    run_id: str
    hosts: tuple[str, ...] = ("127.0.0.1",)  # one address per node
    cores_per_host: int = field(default_factory=lambda: os.cpu_count() or 1)

    def host_of(self, node: int) -> str:
        return self.hosts[node % len(self.hosts)]


#: Roles that serve every worker (parameter servers).
SERVER_ROLES = ("server", "ps")


def node_of(role: str, index: int, nodes: int, devices_per_node: int, ps: int = 0,
            own: bool = False) -> int:
    """The node every plan puts a process on: worker `index` on node index // devices
    per node; parameter server `index` on node index mod nodes, or with `own` (ps_hosts =
    "own", `ps` servers) on node nodes + index, a host of its own; anything else
    (scheduler, chief, rendezvous) on node 0, or with `own` on node nodes + ps, the one
    host after the servers'. Read back by the harness to sum a host's processes
    (harness/bottleneck.py), so it stays the plans' one rule."""
    if role == "worker":
        return index // max(1, devices_per_node)
    if role in SERVER_ROLES:
        return nodes + index if own else index % max(1, nodes)
    return nodes + ps if own else 0


def _field(spec: RunSpec | dict):
    """A field of a RunSpec, or of a stored run's spec (its JSON as a dict, where fields
    added later may be missing: their defaults)."""
    if isinstance(spec, dict):
        return lambda k: spec.get(k, RunSpec.__dataclass_fields__[k].default) or \
            RunSpec.__dataclass_fields__[k].default
    return lambda k: getattr(spec, k)


def spec_node_of(spec: RunSpec | dict, role: str, index: int) -> int:
    """node_of for a RunSpec or a stored run's spec."""
    get = _field(spec)
    return node_of(role, index, get("nodes"), get("devices_per_node"), get("ps"),
                   ps_layout(spec) == "own")


def spec_hosts(spec: RunSpec | dict) -> int:
    """RunSpec.hosts for a RunSpec or a stored run's spec."""
    get = _field(spec)
    return hosts_taken(get("nodes"), get("ps"), ps_layout(spec))


def ps_layout(spec: RunSpec | dict) -> str:
    """Where a run's parameter servers ran (ps_hosts): "shared" or "own"; "" for a run
    without servers. Reads a RunSpec, a stored spec or a stored row alike (rows and specs
    stored before the field existed ran their servers shared): the one reader, so the
    model, the placement and every label agree on a run's layout."""
    get = _field(spec)
    return get("ps_hosts") if get("ps") else ""


def layout_note(layout: str, parens: bool = False) -> str:
    """The words every table appends to a run whose servers had hosts of their own (a
    ps_layout): ", servers on own hosts", or in parentheses; "" for every other run."""
    if layout != "own":
        return ""
    return " (servers on own hosts)" if parens else ", servers on own hosts"


def hosts_label(r: dict) -> str:
    """A stored multi-host run in the words every per-run check prints (the traffic
    check, the bottleneck, the asynchronous ranks' paces): framework, network, strategy,
    its servers and how they split arrays, workers, and the hosts it took."""
    spec = r["spec_json"] if isinstance(r["spec_json"], dict) else json.loads(r["spec_json"])
    get = _field(spec)
    ps = f" ps{get('ps')}" if get("ps") else ""
    split = f" split>={get('ps_split_bound')}" if ps and get("ps_split_bound") else ""
    hosts = spec_hosts(spec)
    return (f"{r['framework']} {r['model']} {r['strategy']}{ps}{split} x{r['workers']} on "
            f"{hosts} host{'s' if hosts != 1 else ''}"
            + layout_note(ps_layout(spec), parens=True))


#: Ports free_port handed out in this process: a plan asks for several in a row (one per
#: TensorFlow task), and each must be its own.
_HANDED: set[int] = set()
#: free_port's own draw, untouched by anyone seeding the random module
_DRAW = random.Random()
#: the lowest port free_port picks (above the usual services' ports)
LOWEST_PORT = 20000


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port free right now on every address of this host, which the rendezvous (or
    a TensorFlow task, a ps-lite scheduler) binds moments later. Drawn below the kernel's
    ephemeral range, never twice in one process: a port from bind(0) is an ephemeral one,
    which the kernel may give to any outgoing connection between the pick and the bind
    (CI, 2026-12-02: a TensorFlow ps task could not bind 0.0.0.0:47007 it had been
    given). The Slurm batch script picks its ports by the same rule (runners/slurm.py
    FREE_PORT)."""
    high = _ephemeral_low()
    if high - LOWEST_PORT >= 1000:
        for _ in range(200):
            port = _DRAW.randrange(LOWEST_PORT, high)
            if port not in _HANDED and _bindable(port):
                _HANDED.add(port)
                return port
    while True:  # no room below the ephemeral range: the kernel's pick
        with socket.socket() as s:
            s.bind(("0.0.0.0", 0))
            port = s.getsockname()[1]
        if port not in _HANDED:
            _HANDED.add(port)
            return port


def worker_env(spec: RunSpec, ctx: PlanContext, rank: int, local_rank: int,
               procs_on_host: int) -> dict[str, str]:
    """The environment is the whole launcher-to-worker contract."""
    threads = spec.threads or max(1, ctx.cores_per_host // procs_on_host)
    return {
        "DNNBENCH_SPEC": spec.to_json(),
        "DNNBENCH_RUN_ID": ctx.run_id,
        "DNNBENCH_RANK": str(rank),
        "DNNBENCH_LOCAL_RANK": str(local_rank),
        "DNNBENCH_WORLD_SIZE": str(spec.workers),
        "DNNBENCH_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONPATH": ctx.source_root,
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
    }


def workers(spec: RunSpec, ctx: PlanContext, extra=None) -> list[ProcessSpec]:
    """One worker per device, devices filling each node; `extra(rank, local_rank)` adds env."""
    out = []
    for node in range(spec.nodes):
        for local in range(spec.devices_per_node):
            rank = node * spec.devices_per_node + local
            env = worker_env(spec, ctx, rank, local, spec.devices_per_node)
            if extra:
                env.update(extra(rank, local, node))
            out.append(ProcessSpec("worker", rank, (ctx.python, "-m", WORKER_MODULE), env,
                                   host=ctx.host_of(spec_node_of(spec, "worker", rank))))
    return out


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    try:
        module = importlib.import_module(f"frameworks.{spec.framework}.plan")
    except ModuleNotFoundError:
        procs = workers(spec, ctx)
    else:
        procs = module.plan(spec, ctx)
    if dnnbench_rendezvous(spec):
        procs = with_horovod_rendezvous(spec, ctx, procs)
    return procs


def dnnbench_rendezvous(spec: RunSpec) -> bool:
    """Whether Horovod's ranks meet at dnnbench's own Gloo rendezvous: started by the
    local launcher, or as Slurm tasks in containers (srun cannot start the image's MPI
    through the host's PMIx); else horovodrun's, or MPI's."""
    return spec.strategy == "horovod" and (
        spec.resolved_launcher == "local"
        or (spec.resolved_launcher == "slurm" and spec.env == "container"))


def slurm_mpi(spec: RunSpec) -> bool:
    """Whether srun starts the ranks as MPI processes (`--mpi`): Horovod in a venv."""
    return spec.strategy == "horovod" and not dnnbench_rendezvous(spec)


def with_horovod_rendezvous(spec: RunSpec, ctx: PlanContext,
                            procs: list[ProcessSpec]) -> list[ProcessSpec]:
    """Horovod started without horovodrun (the local launcher: each rank can then sit in
    its own emulated host, container or CPU limit): the project serves Horovod's Gloo
    rendezvous as a service process on the first host, and each rank gets its slot's
    variables (frameworks/horovod/rendezvous.py)."""
    from frameworks.horovod import rendezvous

    port = free_port()
    if spec.resolved_launcher == "slurm":
        # nodes known once allocated: each rank takes its slot from its task, the
        # batch script gives the first node's address and a port free there
        hosts = [rendezvous.node_name(n) for n in range(spec.nodes)]
        common = {rendezvous.MODE: "slurm", rendezvous.ADDR: ctx.host_of(0),
                  rendezvous.PORT: str(port)}
        ranked = [replace(p, env={**p.env, **common}) for p in procs]
        server_env = {rendezvous.ADDR: ctx.host_of(0), rendezvous.PORT: str(port)}
    else:
        hosts = [ctx.host_of(n) for n in range(spec.nodes)]
        iface = "lo" if all(h.startswith("127.") for h in hosts) else "eth0"
        ranked = [replace(p, env={**p.env, rendezvous.MODE: "1",
                                  **rendezvous.plan_env(hosts, spec.devices_per_node,
                                                        p.rank, hosts[0], port, iface)})
                  for p in procs]
        server_env = {}
    server = ProcessSpec("rendezvous", 0, (ctx.python, "-m", "frameworks.horovod.rendezvous",
                                           rendezvous.slots(hosts, spec.devices_per_node),
                                           str(port)),
                         {"PYTHONPATH": ctx.source_root, "PYTHONUNBUFFERED": "1",
                          "PYTHONNOUSERSITE": "1", **server_env}, host=ctx.host_of(0),
                         service=True)
    return [server, *ranked]
