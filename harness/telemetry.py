"""Resource telemetry sampled from outside the workers while a job runs.

A thread in the harness reads /proc every `interval` seconds: per launched process (a
worker, a parameter server...) the CPU time and resident memory of its whole process
tree, so data-loader children count toward the worker that owns them. On hosts with an
NVIDIA driver it also reads each GPU's utilisation, memory and power through NVML
(nvidia-ml-py). Nothing runs inside the workers, so the measured job is not disturbed
beyond reading a few /proc files per interval (`python -m bench.telemetry` measures the
overhead on training throughput). Exact per-process peak memory comes from the workers themselves
(getrusage high-water marks, in the DONE event); the samples give the time series.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from runners import cgroups
from runners.process import all_pids, read_stat, tree

#: processes that start every rank of a run: sampled as one tree holding all of them
LAUNCHER_TAGS = ("mpirun", "horovodrun")

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
DEFAULT_INTERVAL_S = 1.0
RESCAN_S = 5.0  # full /proc scans (new child processes) at most this often


@dataclass
class Sample:
    tag: str  # process tag ("worker0", "server1") or GPU ("gpu0")
    t: float  # seconds since the sampler started
    cpu_cores: float | None = None  # CPU time / wall time over the last interval
    rss_bytes: int | None = None  # resident memory of the process tree (shared pages twice)
    pss_bytes: int | None = None  # proportional set size of the tree (at full scans only)
    #: the tree's anonymous pages (heap, tensors; at full scans only; a page a forked
    #: loader shares copy-on-write counts in each): what the processes themselves hold.
    #: RSS and PSS also count the mapped pages of the framework's shared libraries, and
    #: how many of those a process maps depends on how the file entered the page cache:
    #: an MXNet process mapped 78 MiB more of libmxnet.so after the file had been read
    #: whole than after its pages were faulted in, its anonymous memory the same
    #: (`python -m bench.page_cache_rss`)
    anon_bytes: int | None = None
    gpu_util: float | None = None  # percent
    gpu_mem_bytes: int | None = None
    gpu_power_w: float | None = None
    #: seconds that interval lasted: a turn's end can come milliseconds after the
    #: sampler's own tick, and CPU time counts in 10 ms ticks, so one such sample reads
    #: 0 or 5 cores; means weight each rate by the time it covers
    span_s: float | None = None


@dataclass
class Counters:
    """Cumulative counters of one launched process tree, read at one moment (at full
    scans: every RESCAN_S, and where a turn begins and ends). Their rates say why a
    process's CPU time per unit of work changes with load: a thread that sleeps until the
    next message arrives switches voluntarily, so a server that wakes once per message
    switches more often per byte than one whose messages queue; and a CPU cgroup that
    spent its quota is throttled until its next CFS period."""
    tag: str
    t: float
    voluntary: int  # context switches of all its threads so far
    involuntary: int
    periods: int | None = None  # CFS periods of its CPU cgroup (None: no quota readable)
    throttled: int | None = None  # of which the group ran out of quota
    #: CPU ticks so far of each of its live threads ("name/tid"): a server's message
    #: I/O thread apart from the threads that sum and apply gradients
    threads: dict[str, int] = field(default_factory=dict)


#: /proc/stat's "cpu" line, the fields kept (man 5 proc), and how they are reported:
#: nice counts as user, iowait as idle (a core waiting on I/O could run something)
_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_MACHINE_KINDS = {"user": ("user", "nice"), "system": ("system",), "irq": ("irq",),
                  "softirq": ("softirq",), "steal": ("steal",), "idle": ("idle", "iowait")}


@dataclass
class MachineTicks:
    """The whole machine's CPU ticks so far by kind, read at the counters' moments. The
    quotas of emulated hosts bound their processes' CPU, but not the kernel's work for
    their network (veth and tbf run in softirq, charged to whichever task the interrupt
    lands on or to ksoftirqd), nor the harness, nor a neighbour VM's share of the host
    (steal): a step that waits on none of its processes' resources may wait on these."""
    t: float
    ticks: tuple[int, ...]  # in _STAT_FIELDS order
    #: softirqs raised so far by kind, every core summed (/proc/softirqs): /proc/stat's
    #: softirq time does not say which kind, and network work is only some of it
    softirqs: dict[str, int] = field(default_factory=dict)


@dataclass
class Telemetry:
    samples: list[Sample] = field(default_factory=list)
    measuring_from: float | None = None  # first timed trial began (start-up excluded)
    interval_s: float = DEFAULT_INTERVAL_S
    gpu: bool = False
    launcher_ranks: int = 1  # ranks inside one launcher's tree (mpirun, horovodrun)
    cpu_seconds: float = 0.0  # CPU time the sampler itself used (its overhead's upper bound)
    #: An interleaved run's turns (start, end): it measures only during them, and waits
    #: idle in between, so only samples inside a turn describe it.
    turns: list[list[float]] = field(default_factory=list)
    counters: list[Counters] = field(default_factory=list)
    machine: list[MachineTicks] = field(default_factory=list)
    #: CPU of every sampled process by the emulated host whose network namespace it runs
    #: in (tags "host0", "host1"...): a launcher's tree holds the ranks of every host, and
    #: this is the only split of it by host
    host_samples: list[Sample] = field(default_factory=list)
    #: each emulated host's CPU cgroup's CFS counters (tags "host0"...), read with the
    #: trees' counters (only periods and throttled are read; switches stay 0)
    host_counters: list[Counters] = field(default_factory=list)

    def _turn(self, t: float) -> int | None:
        """Which stretch of measuring time t falls in (0 when the run had no turns); None
        outside all of them."""
        if t < (self.measuring_from or 0.0):
            return None
        if not self.turns:
            return 0
        return next((i for i, (a, b) in enumerate(self.turns)
                     if a <= t <= (b if b is not None else t)), None)

    def _window(self, prefix: str, samples: list[Sample] | None = None
                ) -> dict[str, list[Sample]]:
        out: dict[str, list[Sample]] = {}
        for s in self.samples if samples is None else samples:
            if s.tag.startswith(prefix) and self._turn(s.t) is not None:
                out.setdefault(s.tag, []).append(s)
        return out

    def _consecutive(self, readings):
        """(earlier, later) for consecutive readings (anything with a time `t`) inside
        one stretch of measuring time: an interleaved run's idle gaps are not its own."""
        got = sorted(readings, key=lambda c: c.t)
        for a, b in zip(got, got[1:]):
            turn = self._turn(a.t)
            if turn is not None and turn == self._turn(b.t) and b.t > a.t:
                yield a, b

    def _counter_pairs(self, counters: list[Counters] | None = None):
        """(tag, earlier, later) for consecutive counter readings of one tree (or host)
        inside one stretch of measuring time."""
        counters = self.counters if counters is None else counters
        for tag in sorted({c.tag for c in counters}):
            for a, b in self._consecutive(c for c in counters if c.tag == tag):
                yield tag, a, b

    def machine_rates(self) -> dict[str, float]:
        """The whole machine's mean cores by kind while measuring (user, system, irq,
        softirq, steal, idle; they sum to its core count), from readings within one
        stretch; an interval whose ticks count down (never, short of a broken clock) is
        left out."""
        dt, got = 0.0, [0] * len(_STAT_FIELDS)
        for a, b in self._consecutive(self.machine):
            d = [y - x for x, y in zip(a.ticks, b.ticks)]
            if min(d) < 0:
                continue
            dt += b.t - a.t
            got = [g + x for g, x in zip(got, d)]
        if not dt:
            return {}
        ticks = dict(zip(_STAT_FIELDS, got))
        return {kind: round(sum(ticks[f] for f in fields) / TICK / dt, 4)
                for kind, fields in _MACHINE_KINDS.items()}

    def machine_softirq_rates(self) -> dict[str, float]:
        """The whole machine's softirqs raised per second by kind while measuring, from
        the same readings as machine_rates (counts, not time: whether the kernel's work
        that grows with a run is its network's, NET_RX and NET_TX, or the timers' and the
        scheduler's, which grow with busy cores); kinds never raised are left out."""
        dt, got = 0.0, {}
        for a, b in self._consecutive(m for m in self.machine if m.softirqs):
            d = {k: b.softirqs[k] - v for k, v in a.softirqs.items() if k in b.softirqs}
            if not d or min(d.values()) < 0:
                continue
            dt += b.t - a.t
            for k, v in d.items():
                got[k] = got.get(k, 0) + v
        return {k: round(v / dt, 1) for k, v in sorted(got.items()) if v} if dt else {}

    def thread_rates(self, least: float = 0.0005) -> dict[str, dict[str, float]]:
        """{tag: {"name/tid": mean CPU cores}} while measuring, from the same readings
        as counter_rates. A thread's interval counts only where it was read at both ends
        and its ticks did not count down (its id reused); threads under `least` cores are
        left out (an idle pool adds entries, not information)."""
        spans: dict[tuple[str, str], list[float]] = {}
        for tag, a, b in self._counter_pairs():
            for name, ticks in b.threads.items():
                before = a.threads.get(name)
                if before is None or ticks < before:
                    continue
                acc = spans.setdefault((tag, name), [0.0, 0])
                acc[0] += b.t - a.t
                acc[1] += ticks - before
        out: dict[str, dict[str, float]] = {}
        for (tag, name), (dt, ticks) in sorted(spans.items()):
            cores = ticks / TICK / dt
            if cores >= least:
                out.setdefault(tag, {})[name] = round(cores, 4)
        return out

    def counter_rates(self, counters: list[Counters] | None = None
                      ) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
        """({tag: voluntary and involuntary context switches per second}, {tag: share of
        its CPU cgroup's CFS periods that ran out of quota}) while measuring, from
        consecutive readings within one stretch (an interleaved run's idle gaps between
        turns are not its own). A reading whose tree lost a member (a loader that exited)
        counts down, and that interval is left out."""
        spans: dict[str, list[float]] = {}
        for tag, a, b in self._counter_pairs(counters):
            dv, di = b.voluntary - a.voluntary, b.involuntary - a.involuntary
            if min(dv, di) < 0:
                continue
            acc = spans.setdefault(tag, [0.0, 0, 0, 0, 0])
            acc[0] += b.t - a.t
            acc[1] += dv
            acc[2] += di
            if None not in (a.periods, b.periods, a.throttled, b.throttled) \
                    and b.periods >= a.periods:
                acc[3] += b.periods - a.periods
                acc[4] += b.throttled - a.throttled
        switches = {tag: {"voluntary_per_s": round(v / dt, 1),
                          "involuntary_per_s": round(i / dt, 1)}
                    for tag, (dt, v, i, _, _) in spans.items()}
        throttled = {tag: round(th / n, 4) for tag, (_, _, _, n, th) in spans.items() if n}
        return switches, throttled

    def summary(self) -> dict[str, float | str | None]:
        """Per-run columns: mean CPU cores per worker and peak tree RSS while measuring;
        GPU means/peaks when NVML was available."""
        workers, per = self._window("worker"), 1
        if not workers:  # ranks started by a launcher: its tree holds all of them
            workers = {k: v for tag in LAUNCHER_TAGS for k, v in self._window(tag).items()}
            per = max(1, self.launcher_ranks)
        means = [m / per for m in (self._mean_cores(v) for v in workers.values())
                 if m is not None]
        rss = [s.rss_bytes / per for v in workers.values() for s in v
               if s.rss_bytes is not None]
        pss = [s.pss_bytes / per for v in workers.values() for s in v
               if s.pss_bytes is not None]
        anon = [s.anon_bytes / per for v in workers.values() for s in v
                if s.anon_bytes is not None]
        out: dict[str, float | str | None] = {
            "cpu_cores_per_worker": sum(means) / len(means) if means else None,
            "tree_rss_peak_mb": max(rss) / 2**20 if rss else None,
            "tree_pss_peak_mb": max(pss) / 2**20 if pss else None,
            "tree_anon_peak_mb": max(anon) / 2**20 if anon else None}
        procs = {tag: self._mean_cores(v)
                 for tag, v in self._window("").items() if not tag.startswith("gpu")}
        by_process = {tag: round(m, 4) for tag, m in sorted(procs.items()) if m is not None}
        if by_process:  # servers and schedulers too: their CPU shares a host's quota
            out["cpu_cores_by_process_json"] = json.dumps(by_process, sort_keys=True)
        hosts = {tag: self._mean_cores(v)
                 for tag, v in self._window("host", self.host_samples).items()}
        by_host = {tag: round(m, 4) for tag, m in hosts.items() if m is not None}
        if by_host:
            out["cpu_cores_by_host_json"] = _by_host_index(by_host)
        switches, throttled = self.counter_rates()
        if switches:
            out["ctx_switches_by_process_json"] = json.dumps(switches, sort_keys=True)
        if throttled:
            out["cpu_throttled_by_process_json"] = json.dumps(throttled, sort_keys=True)
        _, by_host = self.counter_rates(self.host_counters)
        if by_host:
            out["cpu_throttled_by_host_json"] = _by_host_index(by_host)
        threads = self.thread_rates()
        if threads:
            out["cpu_cores_by_thread_json"] = json.dumps(threads, sort_keys=True)
        machine = self.machine_rates()
        if machine:
            out["machine_cpu_json"] = json.dumps(machine)
        softirqs = self.machine_softirq_rates()
        if softirqs:
            out["machine_softirqs_json"] = json.dumps(softirqs)
        gpus = [s for v in self._window("gpu").values() for s in v]
        if gpus:
            out["gpu_util_pct"] = sum(s.gpu_util or 0 for s in gpus) / len(gpus)
            out["gpu_mem_peak_mb"] = max(s.gpu_mem_bytes or 0 for s in gpus) / 2**20
            out["gpu_power_w"] = sum(s.gpu_power_w or 0 for s in gpus) / len(gpus)
        return out

    def _mean_cores(self, samples: list[Sample]) -> float | None:
        """CPU time over wall time across the samples: each rate weighted by the time it
        covers (the sampling interval where that is unknown). An unweighted mean let one
        4 ms sample at a turn's end, two ticks over it read as 5.03 cores, make an MXNet
        server under a 0.15-CPU quota read 0.50 cores (cori2017-emulated-own, x1), and
        the held-out model fits the servers' cost to these numbers."""
        rated = [(s.cpu_cores, s.span_s if s.span_s is not None else self.interval_s)
                 for s in samples if s.cpu_cores is not None]
        spent = sum(w for _, w in rated)
        return sum(c * w for c, w in rated) / spent if rated and spent > 0 else None

    @classmethod
    def from_events(cls, evs: list[dict]) -> Telemetry | None:
        """The workers' own samples (TELEMETRY events, frameworks/selfsample.py: Slurm
        jobs, whose processes this host cannot see) as one Telemetry; None without any.
        Times count from the first sample of any rank, like the harness's sampler."""
        got = [ev for ev in evs if ev.get("event") == "telemetry" and ev.get("samples")]
        if not got:
            return None
        t0 = min(float(s[0]) for ev in got for s in ev["samples"])
        starts = [float(ev["measuring_from"]) for ev in got if ev.get("measuring_from")]
        out = cls(interval_s=float(got[0].get("interval_s") or DEFAULT_INTERVAL_S),
                  measuring_from=min(starts) - t0 if starts else None)
        for ev in got:
            tag = f"worker{int(ev.get('rank', 0))}"
            out.samples += [Sample(tag, float(t) - t0, float(cpu), int(rss))
                            for t, cpu, rss in ev["samples"]]
        return out

    def rows(self) -> list[tuple]:
        """The samples as the store's telemetry table holds them (harness/store.py)."""
        return [(s.tag, round(s.t, 3), s.cpu_cores, s.rss_bytes, s.gpu_util, s.gpu_mem_bytes,
                 s.gpu_power_w, None if s.span_s is None else round(s.span_s, 4),
                 s.pss_bytes, s.anon_bytes)
                for s in self.samples]


def _by_host_index(values: dict[str, float]) -> str:
    """{"host3": x, ...} as stored: JSON keyed by host index ("3"), in host order."""
    index = {int(tag[len("host"):]): v for tag, v in values.items()}
    return json.dumps({str(i): index[i] for i in sorted(index)})


def self_sampled(procs: list, interval_s: float) -> list:
    """The job's workers told to sample themselves every `interval_s` (0: not at all):
    for launchers whose processes run where this host's /proc cannot see them (Slurm)."""
    from dataclasses import replace

    from frameworks.selfsample import ENV

    if not interval_s > 0:
        return procs
    return [replace(p, env={**p.env, ENV: f"{interval_s:g}"}) if p.role in ("worker", "chief")
            else p for p in procs]


def _read(pids) -> dict[int, tuple[int, int, str, int, int]]:
    """pid -> (ppid, process group, state, cpu ticks, rss pages) for these pids."""
    return {pid: (int(f[1]), int(f[2]), f[0], int(f[11]) + int(f[12]), int(f[21]))
            for pid, f in read_stat(pids).items()}


def _read_all() -> dict[int, tuple[int, int, str, int, int]]:
    return _read(all_pids())


def _task_files(pids, leaf: str):
    """(tid, bytes of /proc/PID/task/TID/<leaf>) for every live thread of these
    processes; threads and processes gone meanwhile are skipped."""
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/{leaf}", "rb") as fh:
                    text = fh.read()
            except OSError:
                continue
            yield tid, text


def context_switches(pids) -> tuple[int, int]:
    """(voluntary, involuntary) context switches so far of every live thread of these
    processes (a thread that exited takes its count with it)."""
    voluntary = involuntary = 0
    for _, text in _task_files(pids, "status"):
        for line in text.splitlines():
            if line.startswith(b"voluntary_ctxt_switches:"):
                voluntary += int(line.split()[1])
            elif line.startswith(b"nonvoluntary_ctxt_switches:"):
                involuntary += int(line.split()[1])
    return voluntary, involuntary


def thread_ticks(pids) -> dict[str, int]:
    """CPU ticks (user + system) so far of every live thread of these processes, keyed
    "name/tid" (the kernel's comm, then the thread id): many runtimes never name their
    threads (an MXNet server's message and update threads all read "python"), so the id
    keeps them apart, and the name says what it can (pt_autograd_0, tf_...)."""
    out: dict[str, int] = {}
    for tid, text in _task_files(pids, "stat"):
        head, _, rest = text.rpartition(b")")  # the name may hold spaces and ')'
        f = rest.split()
        if len(f) < 13 or b"(" not in head:
            continue
        name = head.split(b"(", 1)[1].decode("utf-8", "replace")
        out[f"{name}/{tid}"] = int(f[11]) + int(f[12])
    return out


def machine_ticks() -> tuple[int, ...] | None:
    """The whole machine's CPU ticks so far, in _STAT_FIELDS order (/proc/stat's first
    line); None where it cannot be read."""
    try:
        with open("/proc/stat", "rb") as fh:
            f = fh.readline().split()
    except OSError:
        return None
    if len(f) < 1 + len(_STAT_FIELDS) or f[0] != b"cpu":
        return None
    return tuple(int(x) for x in f[1:1 + len(_STAT_FIELDS)])


def machine_softirqs() -> dict[str, int]:
    """Softirqs raised so far by kind, every core summed (/proc/softirqs: a header of
    CPUs, then a row per kind); empty where it cannot be read."""
    try:
        with open("/proc/softirqs", "rb") as fh:
            rows = fh.read().decode("ascii", "replace").splitlines()[1:]
    except OSError:
        return {}
    out = {}
    for row in rows:
        kind, _, counts = row.partition(":")
        try:
            out[kind.strip()] = sum(int(x) for x in counts.split())
        except ValueError:
            continue
    return out


def netns_id(pid: int) -> int | None:
    """The inode of the network namespace a process runs in (None: gone, or not ours to
    read); /run/netns/NAME of a named namespace has the same one."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def rollup_bytes(pid: int) -> tuple[int, int] | None:
    """(PSS, anonymous) bytes of one process. Proportional set size: each resident page
    divided by the number of processes mapping it, so a tree's sum counts a page its
    forked loaders share with the worker once. Anonymous: pages backed by no file, which
    the page cache's state does not move (Sample.anon_bytes). The kernel walks the page
    tables for both, so they are read at full scans only."""
    pss = anon = None
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
                elif line.startswith("Anonymous:"):
                    anon = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None if pss is None or anon is None else (pss, anon)


class _Nvml:
    """NVML through nvidia-ml-py, or nothing: hosts without a driver just skip GPU data."""

    def __init__(self) -> None:
        self.handles: list = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nv = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                            for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception:  # noqa: BLE001 - no library, no driver, no device: no GPU data
            self.handles = []

    def sample(self, t: float) -> list[Sample]:
        out = []
        for i, h in enumerate(self.handles):
            try:
                util = self.nv.nvmlDeviceGetUtilizationRates(h).gpu
                mem = self.nv.nvmlDeviceGetMemoryInfo(h).used
                power = self.nv.nvmlDeviceGetPowerUsage(h) / 1000
            except Exception:  # noqa: BLE001 - a device that stops answering drops out
                continue
            out.append(Sample(f"gpu{i}", t, gpu_util=float(util), gpu_mem_bytes=int(mem),
                              gpu_power_w=float(power)))
        return out


def cores_between(before: dict[int, int], after: dict[int, int], seconds: float) -> float:
    """Cores the processes read twice used in between (a process that ended or started
    in between counts for nothing: its ticks before or after are unknown)."""
    if seconds <= 0:
        return 0.0
    ticks = sum(after[p] - before[p] for p in after.keys() & before.keys())
    return max(0, ticks) / TICK / seconds


class Sampler:
    """Start it, register each launched process with `add` (runners' on_start), call
    `measuring()` when timed trials begin, `stop()` returns the Telemetry."""

    def __init__(self, interval_s: float = DEFAULT_INTERVAL_S, gpu: bool = True,
                 launcher_ranks: int = 1, host_of_netns: dict[int, int] | None = None
                 ) -> None:
        """host_of_netns: {network namespace inode: host index} of emulated hosts
        (runners.emulated.namespace_ids); with it every process's CPU is also summed by
        the host it runs on."""
        self.interval = interval_s
        self._host_of_netns = host_of_netns or {}
        self._host_of_pid: dict[int, int] = {}
        self.roots: dict[str, int] = {}
        self.data = Telemetry(interval_s=interval_s, launcher_ranks=launcher_ranks)
        self._nvml = _Nvml() if gpu else None
        self.data.gpu = bool(self._nvml and self._nvml.handles)
        self._stop = threading.Event()
        self._prev: dict[int, tuple[float, int]] = {}
        self._members: dict[int, list[int]] = {}
        self._scanned = -RESCAN_S
        self._t0 = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="telemetry")
        self._paused = False
        self._lock = threading.Lock()  # ticks come from its thread and from turn changes
        self._cpu_stat: dict[int, Path | None] = {}  # root pid -> its cgroup's cpu.stat

    def add(self, tag: str, pid: int) -> None:
        self.roots[tag] = pid

    def measuring(self) -> None:
        if self.data.measuring_from is None:
            self.data.measuring_from = time.monotonic() - self._t0
            self._scanned = -RESCAN_S  # processes exist now: find all of them next tick

    def turn_begins(self) -> None:
        """An interleaved run's turn: sample from now until `turn_ends`. A baseline read
        now and a sample at the end give every turn, however short against the
        interval, at least one CPU rate covering exactly the turn."""
        self.measuring()
        with self._lock:
            self._prev.clear()  # the idle time before is not this run's CPU use
            self.tick(record=False)
            self.data.turns.append([time.monotonic() - self._t0, None])
            self._read_counters(time.monotonic() - self._t0)
            self._paused = False

    def turn_ends(self) -> None:
        """Its turn is over: it waits idle (not sampled) until the next one."""
        with self._lock:
            if self.data.turns and self.data.turns[-1][1] is None:
                if not self._paused:
                    # a full scan: a turn shorter than RESCAN_S may otherwise record no
                    # PSS at all (the scan at turn_begins is not recorded); the trial is
                    # over, so the scan costs it nothing
                    self.tick(full=True)
                self.data.turns[-1][1] = time.monotonic() - self._t0
            self._paused = True

    def _read_counters(self, t: float) -> None:
        """Context switches and CFS throttling of every registered tree, and the whole
        machine's CPU ticks, at time t. Read at full scans only (a few files per
        thread), not at every tick."""
        ticks = machine_ticks()
        if ticks is not None:
            self.data.machine.append(MachineTicks(t, ticks, machine_softirqs()))
        for tag, root in self.roots.items():
            members = self._members.get(root)
            if not members:
                continue
            if root not in self._cpu_stat:
                self._cpu_stat[root] = cgroups.cpu_stat_file(root)
            stat = self._cpu_stat[root]
            cfs = cgroups.throttling(stat) if stat is not None else None
            vol, inv = context_switches(members)
            self.data.counters.append(Counters(tag, t, vol, inv, *(cfs or (None, None)),
                                               threads=thread_ticks(members)))
        one_per_host = {host: pid for pid, host in self._host_of_pid.items()}
        for host, pid in sorted(one_per_host.items()):
            stat = cgroups.cpu_stat_file(pid)  # every process of a host shares its group
            cfs = cgroups.throttling(stat) if stat is not None else None
            if cfs is not None:
                self.data.host_counters.append(Counters(f"host{host}", t, 0, 0, *cfs))

    def cpu_ticks(self) -> dict[int, int]:
        """pid -> CPU ticks (utime + stime, all threads) of every process of the registered
        trees alive now, read on demand: the interleaved scheduler reads it around a noise
        probe and around other members' trials, where the sampler itself is paused."""
        with self._lock:
            pids = [p for m in self._members.values() for p in m] or list(self.roots.values())
            return {pid: info[3] for pid, info in _read(pids).items() if info[2] != "Z"}

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> Telemetry:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.data

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                if not self._paused:
                    self.tick()
        self.data.cpu_seconds = time.thread_time()  # this thread's own CPU time, all ticks

    def tick(self, record: bool = True, full: bool = False) -> None:
        """One sample of every registered tree. The whole of /proc is scanned only every
        RESCAN_S (to find new children such as loader processes); in between only the
        known members are read: on a machine whose cores training keeps busy, every
        millisecond the sampler runs is taken from a training thread."""
        now = time.monotonic()
        t = now - self._t0
        # full scans at every tick while processes are still being started (the first
        # RESCAN_S), then every RESCAN_S
        full = (full or t < RESCAN_S or now - self._scanned >= RESCAN_S
                or any(r not in self._members for r in self.roots.values()))
        if full:
            procs = _read_all()
            rows = [(pid, v[0], v[1], v[2]) for pid, v in procs.items()]
            self._members = {root: [root, *tree(root, rows)] for root in self.roots.values()
                             if root in procs and procs[root][2] != "Z"}
            self._scanned = now
            if self._host_of_netns:  # a process enters its host's namespace once, at start
                self._host_of_pid = {pid: host for m in self._members.values() for pid in m
                                     if (host := self._host_of_netns.get(netns_id(pid)))
                                     is not None}
        else:
            procs = _read(p for m in self._members.values() for p in m)
        per_host: dict[int, list[float]] = {}  # host -> [cores, longest span]
        counted: set[int] = set()
        for tag, root in list(self.roots.items()):
            if root not in procs or procs[root][2] == "Z":
                continue
            members = self._members.get(root, [root])
            cores = 0.0
            have_rate = False
            span = 0.0  # the longest interval a member's rate covers (all read together)
            rss = 0
            pss: int | None = 0 if full else None
            anon = 0
            for pid in members:
                info = procs.get(pid)
                if info is None:
                    continue
                rss += info[4] * PAGE
                if pss is not None:
                    one = rollup_bytes(pid)
                    if one is not None:
                        pss += one[0]
                        anon += one[1]
                    elif pid == root:
                        pss = None  # unreadable (not ours): no partial sum is reported
                    # else a member (a loader) that exited since the scan: it holds none
                prev = self._prev.get(pid)
                if prev is not None and now > prev[0]:
                    rate = (info[3] - prev[1]) / TICK / (now - prev[0])
                    cores += rate
                    span = max(span, now - prev[0])
                    have_rate = True
                    host = self._host_of_pid.get(pid)
                    if host is not None and pid not in counted:
                        counted.add(pid)
                        acc = per_host.setdefault(host, [0.0, 0.0])
                        acc[0] += rate
                        acc[1] = max(acc[1], now - prev[0])
                self._prev[pid] = (now, info[3])
            if record:
                self.data.samples.append(Sample(tag, t, cores if have_rate else None, rss,
                                                pss_bytes=pss,
                                                anon_bytes=None if pss is None else anon,
                                                span_s=span if have_rate else None))
        if record:
            self.data.host_samples += [Sample(f"host{h}", t, c, span_s=dt)
                                       for h, (c, dt) in sorted(per_host.items())]
        if record and full and self.data.measuring_from is not None:
            self._read_counters(t)
        if record and self._nvml is not None and self._nvml.handles:
            self.data.samples.extend(self._nvml.sample(t))
