"""Horovod's Gloo rendezvous, run by dnnbench instead of horovodrun.

horovodrun starts its ranks itself (ssh, or its own process on one host), so it cannot put
each rank in its own container, network namespace or CPU limit. What it does for Gloo is
small: it serves a key-value store over HTTP (Horovod's RendezvousServer) that knows the
slot plan, and gives each rank the HOROVOD_* variables of its slot. This module does the
same, so any launcher that starts processes (the local one on emulated hosts, containers
inside them) can start a Horovod job: `plan_env` gives the variables (pure; no Horovod
import), `serve` (run as `python -m frameworks.horovod.rendezvous`, a service process of
the job, in the framework's environment or image) serves the store until stopped, and
`wait_then_init` makes a rank wait for the store to answer before `hvd.init()` (Horovod
retries its first request for 1.5 s only; the ranks and the store start together).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

#: the variables horovodrun's gloo_run sets (horovod/runner/gloo_run.py, 0.28)
ADDR, PORT = "HOROVOD_GLOO_RENDEZVOUS_ADDR", "HOROVOD_GLOO_RENDEZVOUS_PORT"
WAIT_S = 120.0


def slots(hosts: list[str], per_host: int) -> str:
    """Horovod's host string (`a:2,b:2`): the same slot plan on the store and the ranks."""
    return ",".join(f"{h}:{per_host}" for h in hosts)


def plan_env(hosts: list[str], per_host: int, rank: int, server: str, port: int,
             iface: str) -> dict[str, str]:
    """One rank's variables, ranks filling hosts in order (Horovod's get_host_assignments
    does the same, so the store's scope sizes match): `server`:`port` is the store,
    `iface` the interface Gloo binds (the emulated hosts' lab one, or lo)."""
    node, local = divmod(rank, per_host)
    return {ADDR: server, PORT: str(port), "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": iface,
            "HOROVOD_HOSTNAME": hosts[node], "HOROVOD_RANK": str(rank),
            "HOROVOD_SIZE": str(len(hosts) * per_host), "HOROVOD_LOCAL_RANK": str(local),
            "HOROVOD_LOCAL_SIZE": str(per_host), "HOROVOD_CROSS_RANK": str(node),
            "HOROVOD_CROSS_SIZE": str(len(hosts))}


#: DNNBENCH_HOROVOD_RENDEZVOUS: "1" when the plan gave each rank its slot ("static"),
#: "slurm" when each rank takes it from its Slurm task (`from_slurm`)
MODE = "DNNBENCH_HOROVOD_RENDEZVOUS"


def node_name(node: int) -> str:
    """A Slurm node's name in the slot plan: Horovod uses host names only to name the
    local and cross scopes, so the store and the ranks need only agree on them."""
    return f"node{node}"


def from_slurm(env: dict[str, str]) -> dict[str, str]:
    """A rank's slot variables from its Slurm task (block distribution, as the batch
    script's srun asks): rank SLURM_PROCID, node SLURM_NODEID, and the interface that
    reaches the rendezvous (that node's address, whatever its name)."""
    nodes = int(env.get("SLURM_NNODES") or env.get("SLURM_JOB_NUM_NODES") or 1)
    size = int(env["SLURM_NTASKS"])
    node, local = int(env["SLURM_NODEID"]), int(env["SLURM_LOCALID"])
    return {"HOROVOD_RANK": env["SLURM_PROCID"], "HOROVOD_SIZE": str(size),
            "HOROVOD_LOCAL_RANK": str(local), "HOROVOD_LOCAL_SIZE": str(size // nodes),
            "HOROVOD_CROSS_RANK": str(node), "HOROVOD_CROSS_SIZE": str(nodes),
            "HOROVOD_HOSTNAME": node_name(node), "HOROVOD_CONTROLLER": "gloo",
            "HOROVOD_CPU_OPERATIONS": "gloo",
            "HOROVOD_GLOO_IFACE": interface_towards(env[ADDR], int(env[PORT]))}


def interface_towards(addr: str, port: int) -> str:
    """The name of this host's interface whose address the kernel would use to reach
    `addr` (Gloo binds an interface by name; compute nodes name theirs differently)."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect((addr, port))  # UDP: picks the route, sends nothing
        local = probe.getsockname()[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915,  # SIOCGIFADDR
                                  struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            if socket.inet_ntoa(raw[20:24]) == local:
                return name
    raise RuntimeError(f"no interface of this host has {local}, the address that reaches "
                       f"Horovod's rendezvous at {addr}")


def wait_then_init(hvd: Any) -> None:
    """`hvd.init()`, after the store answers when dnnbench runs it (ADDR set without
    horovodrun's own driver): a rank that asks before the store listens fails for good.
    Under Slurm the rank first takes its slot from its task (`from_slurm`)."""
    addr, port = os.environ.get(ADDR), os.environ.get(PORT)
    if addr and port and os.environ.get(MODE) == "slurm":
        os.environ.update(from_slurm(dict(os.environ)))
    if addr and port and os.environ.get(MODE) in ("1", "slurm"):
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                socket.create_connection((addr, int(port)), timeout=2).close()
                break
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Horovod's rendezvous at {addr}:{port} did not answer "
                                       f"within {WAIT_S:.0f} s ({exc})") from exc
                time.sleep(0.2)
    hvd.init()


def serve(hosts: str, port: int) -> None:
    """Serve the store for the slot plan `hosts` (`a:2,b:2`) on every interface of this
    host (namespace) until stopped."""
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    parsed = parse_hosts(hosts)
    server = RendezvousHTTPServer(("", port), RendezvousHandler, 0)
    server.init(get_host_assignments(parsed, sum(h.slots for h in parsed)))
    print(f"horovod rendezvous serving {hosts} on port {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m frameworks.horovod.rendezvous HOST:SLOTS[,...] PORT")
    # under Slurm the port is picked on the first node when the job starts (runners/slurm)
    serve(sys.argv[1], int(os.environ.get(PORT) or sys.argv[2]))
