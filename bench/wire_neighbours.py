"""Two network namespaces of their own, joined by one veth shaped like an emulated host's
link, and a TCP stream between them: neighbours whose load is moving bytes
(bench.neighbour_cpu's `wire` kind).

Why: this kernel has no CONFIG_IRQ_TIME_ACCOUNTING, so the softirq work of a packet (tbf's
timer-driven dequeue, the veth's receive path, TCP's input) is charged to whichever
process is running on the core when it happens, worker or server of another host included,
and against that process's cgroup quota. On the emulated cluster every host's traffic is
processed on the few cores the hosts share; if that is where part of a worker's extra CPU
per step at 4-8 workers comes from, a worker beside neighbours that only move bytes pays
for some of their packets.

Safety (DESIGN.md §9): the guard route for SUBNET (unreachable from the root namespace) is
installed before any address exists and removed last; the veth's two ends are both inside
the project's namespaces, so no address of SUBNET is ever reachable from the root
namespace, let alone beyond the machine. The names (NAMESPACES, SUBNET) differ from the
emulated cluster's (runners/emulated.py), so `cluster up`/`down` never touch them and
`down()` here touches nothing of the cluster's. Requires root.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

from runners import emulated

NAMESPACES = ("dnb-nb0", "dnb-nb1")  # the sender's, the receiver's
DEVICES = ("nbv0", "nbv1")
SUBNET = "10.78.0.0/24"
ADDRESSES = ("10.78.0.1", "10.78.0.2")
PORT = 5201
RECEIVER = f"""import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("{ADDRESSES[1]}", {PORT}))
s.listen(1)
c, _ = s.accept()
buf = memoryview(bytearray(1 << 20))
while c.recv_into(buf):
    pass
"""
SENDER = f"""import socket, time
for _ in range(200):
    try:
        c = socket.create_connection(("{ADDRESSES[1]}", {PORT}))
        break
    except OSError:
        time.sleep(0.05)
else:
    raise SystemExit("the receiver never listened")
data = bytes(1 << 20)
try:
    while True:
        c.sendall(data)
except (BrokenPipeError, ConnectionResetError):  # the receiver was stopped first
    pass
"""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise RuntimeError(f"ip {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def up(link: str) -> None:
    """The pair, shaped at `link` on both ends as an emulated host's eth0 and bridge
    port are (after removing any left by a crash)."""
    down()
    taken = emulated.routes_overlapping(SUBNET)
    if taken:
        raise RuntimeError(f"this machine already routes addresses of {SUBNET} "
                           f"({taken[0].strip()}); change bench/wire_neighbours.py SUBNET")
    _ip("route", "add", "unreachable", SUBNET)  # the guard first
    try:
        for ns in NAMESPACES:
            _ip("netns", "add", ns)
        _ip("link", "add", DEVICES[0], "netns", NAMESPACES[0], "type", "veth", "peer",
            "name", DEVICES[1], "netns", NAMESPACES[1])
        bits = emulated.rate_bits(link)
        for ns, dev, addr in zip(NAMESPACES, DEVICES, ADDRESSES):
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            if bits:
                emulated.tc("qdisc", "replace", "dev", dev, "root",
                            *emulated.tbf_args(bits), ns=ns)
    except BaseException:
        down()
        raise


def down() -> None:
    """Remove the pair and then the guard; idempotent (finds them by name)."""
    listed = _ip("netns", "list", check=False).stdout.split()
    for ns in NAMESPACES:
        if ns in listed:
            _ip("netns", "del", ns, check=False)
    if emulated.guard_installed(SUBNET):
        _ip("route", "del", "unreachable", SUBNET, check=False)


def received_bytes() -> int:
    """Bytes the receiver's end has taken in so far (a counter that only grows)."""
    out = _ip("-n", NAMESPACES[1], "-j", "-s", "link", "show", DEVICES[1]).stdout
    return int(json.loads(out)[0]["stats64"]["rx"]["bytes"])


def start(python: str, popen: Callable[[list[str]], subprocess.Popen]
          ) -> list[subprocess.Popen]:
    """The receiver, then the sender, each `python` inside its namespace, started by
    `popen` (which puts them in the neighbours' cgroup)."""
    enter = ["nsenter", f"--net=/run/netns/{NAMESPACES[1]}"]
    receiver = popen(enter + [python, "-c", RECEIVER])
    enter = ["nsenter", f"--net=/run/netns/{NAMESPACES[0]}"]
    return [receiver, popen(enter + [python, "-c", SENDER])]
