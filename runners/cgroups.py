"""Fixed compute per emulated host: each host's processes in a cgroup of their own with a
CPU quota, the cores its share spans, and optionally a memory limit.

Without it, emulated hosts share every core of the machine, so adding hosts slows each
host's compute and a scaling curve mixes CPU contention with communication. With N hosts
of C CPUs (N x C <= the cores this process may use), host i is given the cores its share
[i*C, (i+1)*C) of the core line spans (cpuset) and a CFS quota of C CPUs: its speed no
longer depends on how busy the other hosts are (`isolation` measures that).

cgroup v2 (`cpu.max`, `cpuset.cpus`, `memory.max` under /sys/fs/cgroup/dnnbench) is used
where its controllers are enabled; otherwise cgroup v1 (`cpu.cfs_quota_us` in the cpu
hierarchy, `cpuset.cpus`, `memory.limit_in_bytes`). Every group lives under a `dnnbench`
parent, found by name when removed (idempotent, also after a crash). Requires root.
"""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(os.environ.get("DNNBENCH_CGROUP_ROOT", "/sys/fs/cgroup"))
PARENT = "dnnbench"
#: CFS period: short, so a host that spent its quota waits a few ms, not tens (on a ring
#: allreduce every step waits for the slowest host), but long enough that the quota is at
#: least the kernel's bandwidth slice (sched_cfs_bandwidth_slice_us, 5 ms by default):
#: runtime is handed to CPUs in slices, so a smaller quota is enforced only roughly.
PERIOD_US = 10_000
MAX_PERIOD_US = 1_000_000  # the kernel's limit
V1_CONTROLLERS = ("cpu", "cpuset", "memory")


def _slice_us() -> int:
    try:
        return int(Path("/proc/sys/kernel/sched_cfs_bandwidth_slice_us").read_text())
    except (OSError, ValueError):
        return 5_000


class CgroupError(RuntimeError):
    """Host limits cannot be set here; the message says why and the fix."""


@dataclass(frozen=True)
class HostLimits:
    cpus: float  # CPU quota (CPUs' worth of time per period)
    cpuset: str  # the cores the host may run on ("0", "0-1", "1")
    memory_bytes: int = 0  # 0: no limit


def version() -> str:
    """'v2' where the unified hierarchy has the cpu and cpuset controllers, 'v1' where the
    legacy cpu hierarchy takes quotas, '' where neither is usable."""
    controllers = ROOT / "cgroup.controllers"
    if controllers.is_file():
        have = set(controllers.read_text().split())
        if {"cpu", "cpuset"} <= have:
            return "v2"
    if (ROOT / "cpu" / "cpu.cfs_quota_us").is_file() and (ROOT / "cpuset").is_dir():
        return "v1"
    return ""


def usable_cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _ranges(cores: list[int]) -> str:
    out, start = [], None
    for i, c in enumerate(cores):
        if start is None:
            start = c
        if i + 1 == len(cores) or cores[i + 1] != c + 1:
            out.append(str(start) if start == c else f"{start}-{c}")
            start = None
    return ",".join(out)


def plan(hosts: int, cpus: float, memory_bytes: int = 0,
         cores: list[int] | None = None) -> list[HostLimits]:
    """Each host's limits: its share of the core line, or CgroupError if the hosts do not
    fit (their compute could not be independent then)."""
    cores = usable_cores() if cores is None else cores
    if not cpus > 0 or not math.isfinite(cpus):
        raise CgroupError(f"cpus_per_host = {cpus!r} must be a number > 0")
    if hosts * cpus > len(cores) + 1e-9:
        raise CgroupError(f"{hosts} hosts x cpus_per_host = {cpus:g} is {hosts * cpus:g} "
                          f"CPUs, more than the {len(cores)} core(s) this machine gives "
                          "dnnbench: hosts would slow each other down, which is what the "
                          f"limit exists to prevent; use cpus_per_host <= "
                          f"{len(cores) / hosts:g} or fewer hosts")
    if cpus < 0.01:
        raise CgroupError(f"cpus_per_host = {cpus:g} is below the 0.01 CPU a quota can "
                          f"enforce here (a {_slice_us() / 1000:g} ms bandwidth slice per "
                          f"period of at most {MAX_PERIOD_US / 1e6:g} s)")
    out = []
    for i in range(hosts):
        lo = math.floor(i * cpus + 1e-9)
        hi = max(lo + 1, math.ceil((i + 1) * cpus - 1e-9))
        out.append(HostLimits(cpus, _ranges(cores[lo:hi]), memory_bytes))
    return out


def period_us(cpus: float) -> int:
    """The CFS period for a quota of `cpus`: PERIOD_US, or longer so that the quota is at
    least one bandwidth slice (0.25 CPU: 20 ms; 0.125 CPU: 40 ms)."""
    return min(MAX_PERIOD_US, max(PERIOD_US, math.ceil(_slice_us() / cpus)))


def _write(path: Path, value: str) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        raise CgroupError(f"cannot write {value!r} to {path}: {exc.strerror or exc} "
                          "(host limits need root and a writable cgroup hierarchy)") from None


def _group_dirs(host: str) -> list[Path]:
    """The directories one host's processes join: one per v1 controller, one in v2."""
    if version() == "v2":
        return [ROOT / PARENT / host]
    return [ROOT / c / PARENT / host for c in V1_CONTROLLERS]


def procs_files(host: str) -> list[str]:
    """The files a process writes its PID to, to join the host's groups (all exist only
    while the host is limited)."""
    return [str(d / "cgroup.procs") for d in _group_dirs(host)]


def create(hosts: list[str], limits: list[HostLimits]) -> None:
    """One group per host with its limits (groups left from before are replaced)."""
    kind = version()
    if os.geteuid() != 0:
        raise CgroupError("host CPU limits need root (cgroups)")
    if not kind:
        raise CgroupError(f"no usable cgroup controllers under {ROOT}: neither cgroup v2 "
                          "with cpu and cpuset enabled nor the v1 cpu and cpuset "
                          "hierarchies; run without cpus_per_host")
    remove()
    try:
        if kind == "v2":
            _create_v2(hosts, limits)
        else:
            _create_v1(hosts, limits)
    except BaseException:
        remove()
        raise


def _create_v1(hosts: list[str], limits: list[HostLimits]) -> None:
    cpuset_root = ROOT / "cpuset"
    parent = cpuset_root / PARENT
    parent.mkdir(exist_ok=True)
    # a v1 cpuset child is unusable until its cpus and mems are set, the parent's first
    _write(parent / "cpuset.cpus", (cpuset_root / "cpuset.cpus").read_text().strip())
    mems = (cpuset_root / "cpuset.mems").read_text().strip()
    _write(parent / "cpuset.mems", mems)
    (ROOT / "cpu" / PARENT).mkdir(exist_ok=True)
    (ROOT / "memory" / PARENT).mkdir(exist_ok=True)
    for host, lim in zip(hosts, limits):
        cpu, cs, mem = (ROOT / c / PARENT / host for c in V1_CONTROLLERS)
        for d in (cpu, cs, mem):
            d.mkdir(exist_ok=True)
        period = period_us(lim.cpus)
        _write(cpu / "cpu.cfs_period_us", str(period))
        _write(cpu / "cpu.cfs_quota_us", str(int(round(lim.cpus * period))))
        _write(cs / "cpuset.cpus", lim.cpuset)
        _write(cs / "cpuset.mems", mems)
        _write(mem / "memory.limit_in_bytes", str(lim.memory_bytes) if lim.memory_bytes
               else "-1")


def _create_v2(hosts: list[str], limits: list[HostLimits]) -> None:
    enable = "+cpu +cpuset" + (" +memory" if any(x.memory_bytes for x in limits) else "")
    _write(ROOT / "cgroup.subtree_control", enable)
    parent = ROOT / PARENT
    parent.mkdir(exist_ok=True)
    _write(parent / "cgroup.subtree_control", enable)
    for host, lim in zip(hosts, limits):
        d = parent / host
        d.mkdir(exist_ok=True)
        period = period_us(lim.cpus)
        _write(d / "cpu.max", f"{int(round(lim.cpus * period))} {period}")
        _write(d / "cpuset.cpus", lim.cpuset)
        if lim.memory_bytes:
            _write(d / "memory.max", str(lim.memory_bytes))


def _groups() -> list[Path]:
    """Every dnnbench group on this machine, children before their parent."""
    tops = [ROOT / PARENT] + [ROOT / c / PARENT for c in V1_CONTROLLERS]
    out = []
    for top in tops:
        if top.is_dir():
            out += sorted(p for p in top.iterdir() if p.is_dir())
            out.append(top)
    return out


def remove() -> list[str]:
    """Remove every dnnbench group (idempotent). A process still inside one (a run killed
    with the harness) is moved to the hierarchy's root group, not stopped: it is not
    this call's to stop, and a group with members cannot be removed."""
    removed = []
    for group in _groups():
        root_procs = group.parent.parent / "cgroup.procs" if group.parent.name == PARENT \
            else group.parent / "cgroup.procs"
        try:
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    root_procs.write_text(pid)
                except OSError:
                    pass  # it exited meanwhile
            group.rmdir()
            removed.append(str(group))
        except OSError:
            pass
    return removed


def cpu_stat_file(pid: int) -> Path | None:
    """The cpu.stat of the CPU cgroup a process is in (any group, not only dnnbench's: a
    container's or a Slurm job's quota throttles the same way); None where it cannot be
    read. v1 names the group on the cpu controller's line of /proc/PID/cgroup, v2 on the
    unified one ("0::")."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if "cpu" in controllers.split(","):
            path = ROOT / "cpu" / rel.lstrip("/") / "cpu.stat"
            if path.is_file():
                return path
    for line in lines:
        if line.startswith("0::"):
            path = ROOT / line[3:].lstrip("/") / "cpu.stat"
            if path.is_file():
                return path
    return None


def throttling(stat_file: Path) -> tuple[int, int] | None:
    """(CFS periods elapsed, periods in which the group ran out of quota) so far, from a
    cpu.stat (v1 and v2 name them alike); None where it is gone or has no quota."""
    try:
        fields = dict(line.split() for line in stat_file.read_text().splitlines()
                      if line.count(" ") == 1)
        return int(fields["nr_periods"]), int(fields["nr_throttled"])
    except (OSError, KeyError, ValueError):
        return None


def exists() -> list[str]:
    """Names of the hosts that have groups now."""
    return sorted({p.name for p in _groups() if p.name != PARENT})


def join_argv(host: str, argv: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """argv started inside the host's groups: a shell writes its own PID into each
    group's procs file, then execs argv (children inherit the groups)."""
    writes = "; ".join(f"echo $$ > {shlex.quote(f)} || exit 125" for f in procs_files(host))
    return ("sh", "-c", f"{writes}; exec \"$@\"", "dnnbench-host-limits", *argv)


SPIN = ("import sys, time\nend = time.perf_counter() + float(sys.argv[1])\nn = 0\n"
        "cpu = time.process_time()\n"
        "while time.perf_counter() < end:\n    n += 1\nprint(n, time.process_time() - cpu)")
HOG = "while True:\n    pass"


def isolation(hosts: list[str], limits: list[HostLimits] | None, seconds: float = 1.5
              ) -> dict[str, float]:
    """How much one host's compute depends on its neighbours: a spinning process on the
    first host counts loop turns alone, then with every other host running two greedy
    spinners per CPU of its quota (each in a session of its own, so the kernel's
    autogroup cannot shield it). `ratio` near 1: the hosts are independent. With
    `limits` None the hosts are unlimited (the control: neighbours then slow it).
    `cpu_ratio` is the same for the CPU time the probe got: the part of the slowdown
    the kernel's scheduler decides, which limits control. A speed ratio below it is lost
    below the kernel: to hardware the vCPUs share, or to the hypervisor (which of these,
    this guest cannot tell; limited hosts read a speed of 0.61-0.77 three times in a row
    in CI on 2026-12-04, at a CPU-time ratio near 1 here)."""
    def start(host: str, argv: tuple[str, ...]) -> tuple[str, ...]:
        return join_argv(host, argv) if limits else argv

    def spin() -> tuple[int, float]:
        proc = subprocess.run(start(hosts[0], (sys.executable, "-c", SPIN, str(seconds))),
                              capture_output=True, text=True, timeout=seconds + 30)
        if proc.returncode:
            raise CgroupError(f"isolation probe failed: {proc.stderr.strip()[-300:]}")
        turns, cpu = proc.stdout.split()[-2:]
        return int(turns), float(cpu)

    alone, cpu_alone = spin()
    hogs = []
    try:
        for i, host in enumerate(hosts[1:], 1):
            for _ in range(2 * max(1, math.ceil(limits[i].cpus if limits else 1))):
                hogs.append(subprocess.Popen(start(host, (sys.executable, "-c", HOG)),
                                             start_new_session=True,
                                             stdout=subprocess.DEVNULL))
        time.sleep(0.3)  # the neighbours are busy before the probe starts
        busy, cpu_busy = spin()
    finally:
        for h in hogs:  # only the hogs started here, by PID
            h.kill()
            h.wait()
    return {"alone": alone, "busy": busy, "ratio": busy / alone if alone else 0.0,
            "cpu_ratio": cpu_busy / cpu_alone if cpu_alone else 0.0,
            "seconds": seconds, "neighbours": len(hogs)}
