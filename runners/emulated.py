"""An emulated cluster on one machine: network namespaces joined by veth pairs through a
bridge, one namespace per "host", each host's link rate shaped with tc.

    up(4, "1gbit")  ->  dnb-h0..dnb-h3 with 10.77.0.1..4 on eth0, 1 Gbit/s each way
    up(4, "1gbit", cpus_per_host=0.5)  ->  the same, each host's processes held to half
                    a CPU on the cores its share spans (runners/cgroups.py)
    down()          ->  removes every namespace, the bridge, the host limits and the guard
                       route

Safety (DESIGN.md §9): before any lab address exists, an `unreachable` route for the lab
subnet is installed in the root namespace, so traffic to lab addresses can never leave by
the default route; it is removed last. Lab traffic only flows between the project's own
namespaces. The subnet avoids 10.255.0.0/16 (the machine's resolver).

Rates use `tbf` on both ends of each host's veth (egress of the host and of the bridge
port towards it). This kernel has no `netem`, so latency cannot be emulated: a link
profile with latency is refused with that reason. Requires root.

Processes run inside a host with `nsenter --net=/run/netns/NAME` (not `ip netns exec`,
which remounts /sys: slurmd and some tools die there).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from runners import cgroups
from runners.process import identity
from runners.spec import ProcessSpec

PREFIX = "dnb-h"  # namespace names: dnb-h0, dnb-h1, ...
BRIDGE = "dnbbr0"
SUBNET = "10.77.0.0/24"
STATE = Path(os.environ.get("DNNBENCH_CLUSTER_STATE", "/run/dnnbench/cluster.json"))
RATE = re.compile(r"^(\d+(?:\.\d+)?)(k|m|g)?bit$")
#: One file per process using the cluster (a sweep, a commbench): the cluster is re-rated
#: or removed only while no other live process holds one.
LEASES = STATE.parent / "leases"
LOCK = STATE.parent / "cluster.lock"


class ClusterError(RuntimeError):
    """The emulated cluster cannot be created or used; the message says why and the fix."""


@dataclass
class Cluster:
    hosts: list[str]  # namespace names
    addresses: list[str]  # lab address of each host
    link: str  # "unshaped" or a tc rate such as "1gbit"
    created: str
    #: CPUs of compute per host (runners/cgroups.py); 0: every host shares every core
    cpus_per_host: float = 0.0
    memory_per_host: int = 0  # bytes; 0: no limit
    cpusets: list[str] = field(default_factory=list)  # the cores each host runs on
    #: one host's speed with busy neighbours over its speed alone (cgroups.isolation)
    isolation: dict = field(default_factory=dict)

    def namespace_of(self, address: str) -> str:
        if address not in self.addresses:
            raise ClusterError(f"{address} is not an emulated host; hosts: "
                               f"{', '.join(self.addresses)}")
        return self.hosts[self.addresses.index(address)]


#: tbf below a megabit starves TCP's handshakes; above ~40 Gbit/s it no longer limits
#: anything on one machine (one stream tops out near 10-15 Gbit/s here).
MIN_RATE, MAX_RATE = 1_000_000, 40_000_000_000


def rate_bits(link: str) -> int | None:
    """Bits per second of a link name ('1gbit', '500mbit'), None for 'unshaped'."""
    if link == "unshaped":
        return None
    m = RATE.match(link.lower())
    if not m:
        raise ClusterError(f"link = {link!r} is not a rate like 1gbit, 2gbit, 500mbit or "
                           "'unshaped' (latency cannot be emulated here: no netem)")
    bits = int(float(m.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)])
    if not MIN_RATE <= bits <= MAX_RATE:
        raise ClusterError(f"link = {link!r} is outside what tc shapes faithfully here "
                           f"(1mbit to 40gbit); use 'unshaped' for the full speed")
    return bits


def address(i: int) -> str:
    return f"10.77.0.{i + 1}"


def _ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    cmd = (["ip", "-n", ns] if ns else ["ip"]) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode:
        raise ClusterError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
    return proc


def tc(*args: str, ns: str | None = None) -> None:
    """Run `tc` (inside namespace `ns` where given); a failure raises ClusterError with
    tc's own message. Shared with the benches that shape links of their own."""
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["tc", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise ClusterError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")


def tbf_args(bits: int) -> list[str]:
    """tbf for a rate: the bucket holds >= 1 timer tick of traffic (HZ may be 100)."""
    burst = max(bits // 8 // 100, 64 * 1024)
    return ["tbf", "rate", f"{bits}bit", "burst", str(burst), "latency", "100ms"]


def namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return sorted((line.split()[0] for line in out.splitlines()
                   if line.startswith(PREFIX)), key=lambda n: int(n[len(PREFIX):]))


def namespace_ids(cluster: Cluster) -> dict[int, int]:
    """{network namespace inode: host index} of the cluster's hosts, for telling which
    host a process runs on from its /proc/PID/ns/net (harness/telemetry.py)."""
    out = {}
    for i, ns in enumerate(cluster.hosts):
        try:
            out[os.stat(f"/run/netns/{ns}").st_ino] = i
        except OSError:  # removed meanwhile: its processes are gone too
            continue
    return out


def up(hosts: int, link: str = "unshaped", cpus_per_host: float = 0.0,
       memory_per_host: int = 0) -> Cluster:
    """Create `hosts` emulated hosts (after removing any previous cluster), with
    `cpus_per_host` CPUs of compute each when > 0 (and `memory_per_host` bytes)."""
    if os.geteuid() != 0:
        raise ClusterError("the emulated cluster needs root (network namespaces, tc)")
    if not 1 <= hosts <= 64:
        raise ClusterError(f"hosts = {hosts}: choose 1..64")
    bits = rate_bits(link)
    if memory_per_host and not cpus_per_host:
        raise ClusterError("memory_per_host needs cpus_per_host too (both are the host's "
                           "cgroup limits)")
    try:
        limits = cgroups.plan(hosts, cpus_per_host, memory_per_host) if cpus_per_host else []
    except cgroups.CgroupError as exc:
        raise ClusterError(str(exc)) from None
    down()
    taken = routes_overlapping()
    if taken:
        raise ClusterError(f"this machine already routes addresses of the lab subnet "
                           f"{SUBNET} ({taken[0].strip()}); the emulated cluster would take "
                           f"them over: remove that route or change runners/emulated.py SUBNET")
    # the guard first: lab addresses are unreachable from the root namespace
    _ip("route", "add", "unreachable", SUBNET)
    try:
        _ip("link", "add", BRIDGE, "type", "bridge")
        _ip("link", "set", BRIDGE, "up")
        names = []
        for i in range(hosts):
            ns, port = f"{PREFIX}{i}", f"dnbv{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", port, "master", BRIDGE)
            _ip("link", "set", port, "up")
            _ip("link", "set", "lo", "up", ns=ns)
            _ip("addr", "add", f"{address(i)}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
            if bits:
                tc("qdisc", "replace", "dev", "eth0", "root", *tbf_args(bits), ns=ns)
                tc("qdisc", "replace", "dev", port, "root", *tbf_args(bits))
            names.append(ns)
        probe: dict = {}
        if limits:
            cgroups.create(names, limits)
            probe = cgroups.isolation(names, limits) if hosts > 1 else {}
    except cgroups.CgroupError as exc:
        down()
        raise ClusterError(str(exc)) from None
    except BaseException:
        down()
        raise
    cluster = Cluster(names, [address(i) for i in range(hosts)], link,
                      time.strftime("%Y-%m-%dT%H:%M:%S"), cpus_per_host, memory_per_host,
                      [lim.cpuset for lim in limits], probe)
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(asdict(cluster)))
    return cluster


def reshape(link: str) -> Cluster:
    """Change the running cluster's link rate in place (a sweep's `link` axis)."""
    c = current()
    if c is None:
        raise ClusterError("no emulated cluster is up; run: dnnbench cluster up --hosts N")
    bits = rate_bits(link)
    for i, ns in enumerate(c.hosts):
        for dev, where in (("eth0", ns), (f"dnbv{i}", None)):
            if bits:
                tc("qdisc", "replace", "dev", dev, "root", *tbf_args(bits), ns=where)
            else:
                cmd = (["ip", "netns", "exec", where] if where else []) + [
                    "tc", "qdisc", "del", "dev", dev, "root"]
                subprocess.run(cmd, capture_output=True)
    c.link = link
    STATE.write_text(json.dumps(asdict(c)))
    return c


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One process at a time decides what happens to the cluster."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def holders() -> list[dict]:
    """Live leases: {pid, hosts, link} of every process using the cluster now (stale
    lease files of processes that died are removed)."""
    out = []
    for f in sorted(LEASES.glob("*.json")) if LEASES.is_dir() else []:
        try:
            lease = json.loads(f.read_text())
        except (OSError, ValueError):
            lease = {}
        if lease.get("pid") and identity(lease["pid"]) == lease.get("identity"):
            out.append(lease)
        else:
            f.unlink(missing_ok=True)
    return out


def _others() -> list[dict]:
    return [h for h in holders() if h["pid"] != os.getpid()]


def _in_use(others: list[dict]) -> str:
    return "; ".join(f"pid {h['pid']} ({h['hosts']} hosts at {h['link']})" for h in others)


def ensure(hosts: int, link: str, cpus_per_host: float = 0.0) -> tuple[Cluster, bool]:
    """A cluster of exactly `hosts` hosts at `link` (and `cpus_per_host` CPUs each, 0:
    unlimited) for this process: the running one (re-shaped if the rate differs) or a
    new one; the flag says whether it was created here. Another live process using the
    cluster in another shape is never disturbed: ClusterError says who holds it. Call
    `release` when done."""
    with _locked():
        c = current()
        others = _others()
        same_hosts = c is not None and len(c.hosts) == hosts and \
            c.cpus_per_host == cpus_per_host
        if others and (not same_hosts or c.link != link):
            raise ClusterError(f"the emulated cluster is in use by {_in_use(others)}; it "
                               f"cannot become {hosts} hosts at {link}"
                               + (f" with {cpus_per_host:g} CPUs each" if cpus_per_host
                                  else "") + " until that ends")
        if same_hosts:
            c, made = (c if c.link == link else reshape(link)), False
        else:
            c, made = up(hosts, link, cpus_per_host), True
        LEASES.mkdir(parents=True, exist_ok=True)
        (LEASES / f"{os.getpid()}.json").write_text(json.dumps(
            {"pid": os.getpid(), "identity": identity(os.getpid()), "hosts": hosts,
             "link": link, "cpus_per_host": cpus_per_host}))
        return c, made


def release(take_down: bool) -> bool:
    """This process no longer uses the cluster; with `take_down` (it made the cluster)
    remove it too, unless another live process still uses it. True if it was removed."""
    with _locked():
        (LEASES / f"{os.getpid()}.json").unlink(missing_ok=True)
        if take_down and not _others():
            down()
            return True
        return False


def up_unless_used(hosts: int, link: str, cpus_per_host: float = 0.0,
                   memory_per_host: int = 0) -> Cluster:
    """`dnnbench cluster up`: a new cluster, or ClusterError naming the processes that
    use the running one."""
    with _locked():
        others = _others()
        if others:
            raise ClusterError(f"the emulated cluster is in use by {_in_use(others)}; "
                               "it cannot be replaced until they end")
        return up(hosts, link, cpus_per_host, memory_per_host)


def down_unless_used() -> list[str]:
    """`dnnbench cluster down`: remove the cluster, or ClusterError naming the processes
    that still use it."""
    with _locked():
        others = _others()
        if others:
            raise ClusterError(f"the emulated cluster is in use by {_in_use(others)}; "
                               "stop those first (it is removed when they end)")
        return down()


def down() -> list[str]:
    """Remove every emulated host, the bridge and the guard route; idempotent (also after
    a crash: it finds the namespaces by name, not from the state file)."""
    removed = []
    for ns in namespaces():
        _ip("netns", "del", ns, check=False)
        removed.append(ns)
    for link in _ip("-o", "link", "show", check=False).stdout.splitlines():
        name = link.split(":")[1].strip().split("@")[0] if ":" in link else ""
        if name.startswith("dnbv"):
            _ip("link", "del", name, check=False)
    _ip("link", "del", BRIDGE, check=False)
    cgroups.remove()
    if guard_installed():
        _ip("route", "del", "unreachable", SUBNET, check=False)  # the guard goes last
    STATE.unlink(missing_ok=True)
    return removed


def routes() -> list[str]:
    """This machine's IPv4 routes, every table, one per line as `ip -o` prints them."""
    return _ip("-4", "-o", "route", "show", "table", "all", check=False).stdout.splitlines()


def guard_installed(subnet: str = SUBNET) -> bool:
    """Whether the unreachable route that keeps `subnet`'s traffic off every real
    interface is in place (DESIGN.md section 9: it goes first and comes off last)."""
    return any(r.split()[:2] == ["unreachable", subnet] for r in routes())


def routes_overlapping(subnet: str = SUBNET) -> list[str]:
    """Routes of this machine (any table) to addresses in the lab subnet, other than this
    module's own guard: the lab must not take over addresses something else routes."""
    lab = ipaddress.ip_network(subnet)
    out = []
    for route in routes():
        words = route.split()
        if words[0] in ("unreachable", "local", "broadcast", "blackhole", "prohibit",
                        "multicast", "throw"):
            if words[:2] == ["unreachable", subnet]:
                continue
            words = words[1:]
        if not words or words[0] == "default":
            continue
        try:
            net = ipaddress.ip_network(words[0], strict=False)
        except ValueError:
            continue
        if net.overlaps(lab) and net.prefixlen > 0:
            out.append(route)
    return out


def current() -> Cluster | None:
    """The running cluster, or None; a state file whose namespaces are gone is stale."""
    if not STATE.is_file():
        return None
    c = Cluster(**json.loads(STATE.read_text()))
    return c if namespaces() == c.hosts else None


def status() -> list[dict]:
    """Per host: namespace, address, the shaped rate tc reports, bytes sent/received."""
    out = []
    c = current()
    for ns in namespaces():
        i = int(ns[len(PREFIX):])
        qdisc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev",
                                "eth0"], capture_output=True, text=True).stdout
        m = re.search(r"rate (\S+)", qdisc)
        limited = c is not None and c.cpus_per_host and i < len(c.cpusets)
        out.append({"host": ns, "address": address(i), "rate": m.group(1) if m else "unshaped",
                    **interface_bytes(ns), "link": c.link if c else "?",
                    "cpus": c.cpus_per_host if limited else 0.0,
                    "cpuset": c.cpusets[i] if limited else ""})
    return out


_SENT = re.compile(r"^qdisc tbf \S+ dev (\S+) .*\n\s*Sent (\d+) bytes \d+ pkt \(dropped (\d+), "
                   r"overlimits (\d+)", re.M)


def qdisc_counters(text: str) -> dict[str, dict[str, int]]:
    """{device: {"dropped": n, "overlimits": n}} from `tc -s qdisc show` (tbf qdiscs only:
    the ones this module creates)."""
    return {m.group(1): {"dropped": int(m.group(3)), "overlimits": int(m.group(4))}
            for m in _SENT.finditer(text)}


def tcp_counters(snmp: str) -> dict[str, int]:
    """{"out_segs": n, "retrans_segs": n} from /proc/net/snmp's Tcp lines (names, values)."""
    rows = [line.split() for line in snmp.splitlines() if line.startswith("Tcp:")]
    if len(rows) < 2:
        return {}
    got = dict(zip(rows[0][1:], rows[1][1:]))
    try:
        return {"out_segs": int(got["OutSegs"]), "retrans_segs": int(got["RetransSegs"])}
    except (KeyError, ValueError):
        return {}


def link_counters(hosts: list[str]) -> dict[str, dict[str, int]]:
    """Per host, counters that only grow, read around each run (its deltas are stored with
    the run): eth0's bytes; the tbf drops and overlimits (packets that had to wait for
    tokens) at the host's egress (`out_`) and at the bridge port towards it, its ingress
    (`in_`); and its TCP segments sent and retransmitted. With two hosts a host's ingress
    carries one sender, already paced by that sender's egress; with more, several paced
    senders meet there, and these say whether the link still delivers its rate."""
    root = subprocess.run(["tc", "-s", "qdisc", "show"], capture_output=True, text=True)
    ports = qdisc_counters(root.stdout)
    out = {}
    for ns in hosts:
        i = int(ns[len(PREFIX):])
        inside = subprocess.run(
            ["ip", "netns", "exec", ns, "sh", "-c",
             "cat /sys/class/net/eth0/statistics/tx_bytes /sys/class/net/eth0/statistics/"
             "rx_bytes; echo; tc -s qdisc show; cat /proc/net/snmp"],
            capture_output=True, text=True).stdout
        head = (inside.split("\n", 2) + ["", ""])[:2]  # the two byte counters
        one = {name: int(v) if v.strip().isdigit() else 0
               for name, v in zip(("tx_bytes", "rx_bytes"), head)}
        for where, got in (("out", qdisc_counters(inside).get("eth0")),
                           ("in", ports.get(f"dnbv{i}"))):
            for k, v in (got or {}).items():
                one[f"{where}_{k}"] = v
        one.update(tcp_counters(inside))
        out[ns] = one
    return out


def interface_bytes(ns: str) -> dict[str, int]:
    """eth0's byte counters inside a host (to prove traffic crossed the shaped link)."""
    got = link_counters([ns])[ns]
    return {"tx_bytes": got["tx_bytes"], "rx_bytes": got["rx_bytes"]}


AGENT = Path(__file__).resolve().parent / "mpirun-agent.sh"


def mpirun_across(specs: list[ProcessSpec], cluster: Cluster, mpirun: str = "mpirun"
                  ) -> ProcessSpec:
    """One mpirun for every rank, itself inside the first host, reaching the others
    through the launch agent; MPI's TCP traffic is pinned to the lab subnet."""
    from runners.mpirun import mpirun_command

    lab = {"GLOO_SOCKET_IFNAME": "eth0", "HOROVOD_GLOO_IFACE": "eth0",
           "NCCL_SOCKET_IFNAME": "eth0"}
    specs = [ProcessSpec(s.role, s.rank, s.argv, {**s.env, **lab}, s.cwd,
                         s.memory_limit_bytes, s.host) for s in specs]
    # each host's daemon talks straight to mpirun, not through a tree of daemons: one
    # MXNet x4 run in 24 failed at start with "ORTE does not know how to route a message",
    # whose own advice is routed=direct. (Not plm_rsh_no_tree_spawn: with it Open MPI 4.1
    # starts the daemons with --daemonize, outside mpirun's process tree, where neither
    # teardown nor telemetry finds them.)
    cmd = mpirun_command(specs, mpirun, mca={
        "plm_rsh_agent": str(AGENT), "btl": "tcp,self", "btl_tcp_if_include": SUBNET,
        "oob_tcp_if_include": SUBNET, "routed": "direct"})
    ns = cluster.namespace_of(cluster.addresses[0])
    # mpirun and the first host's ranks in that host's limits; the agent puts the other
    # hosts' ranks in theirs
    return ProcessSpec(cmd.role, cmd.rank, _limited(ns, cluster, (
        "nsenter", f"--net=/run/netns/{ns}", "--", *cmd.argv)), cmd.env, cmd.cwd)


def _limited(ns: str, cluster: Cluster, argv: tuple[str, ...]) -> tuple[str, ...]:
    return cgroups.join_argv(ns, argv) if cluster.cpus_per_host else tuple(argv)


def on_lab_interface(spec: ProcessSpec) -> ProcessSpec:
    """The same process with every library that picks an interface (Gloo, NCCL, Horovod,
    ps-lite) told to pick the lab one: by hostname they would find loopback."""
    env = {**spec.env, "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0",
           "HOROVOD_GLOO_IFACE": "eth0", "DMLC_INTERFACE": "eth0", "DMLC_NODE_HOST": spec.host}
    return replace(spec, env=env)


def inside(spec: ProcessSpec, cluster: Cluster) -> ProcessSpec:
    """The same process, started inside the namespace that owns its host address."""
    ns = cluster.namespace_of(spec.host)
    return replace(on_lab_interface(spec), argv=_limited(
        ns, cluster, ("nsenter", f"--net=/run/netns/{ns}", "--", *spec.argv)))
