"""What bound a step on emulated hosts, from measurements alone.

Every run on emulated hosts stores each process's mean CPU while measuring (telemetry)
and each host's interface counters over the run (runners/emulated.py). Summed per host,
they say how busy each of the two resources a host has was:

* CPU: the cores of the processes the plans put on that host (frameworks/plan.py
  `node_of`: workers, servers, the scheduler or chief, wherever ps_hosts puts them)
  over the host's CPU quota;
* wire: the larger of the bytes its interface sent and received per step (the run's
  steps, traffic.steps_run) over the link's shaped rate, as a share of the step.

A resource near 100% bound the step; where neither is, the step waited on something
else (a synchronous barrier, latency, one process at a time). This is the measurement a
performance model has to match: on the MXNet parameter-server runs of shi2017-emulated
and scaling-emulated-ps-async (2026-12-02) the busiest host's CPU was 95-99% busy while
its wire carried up to about half the step, and 55-83% once the wire grew past that,
when the wire itself was 64-77% busy: neither saturated, which neither the additive
model nor "the longer of the two" reproduced, and the tensor-by-tensor simulation that
replaced them (perfmodel/psstep.py) predicts within 9% on those runs (harness/perfmodel/README.md,
"What bound each step").
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from frameworks.plan import hosts_label, spec_hosts, spec_node_of
from harness.perfmodel.traffic import host_counters, steps_run
from harness.telemetry import LAUNCHER_TAGS

#: a resource this busy bound the step
SATURATED = 0.9
_TAG = re.compile(r"^([a-z_]+?)(\d+)$")
_HOST = re.compile(r"(\d+)$")


@dataclass(frozen=True)
class Bottleneck:
    label: str
    run_id: str
    t_iter_s: float
    #: the busiest host's CPU over its quota (None: no quota or no telemetry), and its index
    cpu: float | None
    cpu_host: int | None
    #: the busiest host's bytes per step over the link's rate, as a share of the step
    #: (None: unshaped link or no counters), and its index
    wire: float | None
    wire_host: int | None
    #: share of the CFS periods in which the busiest CPU host's cgroup ran out of quota
    #: (None: not stored, as in runs from before 2026-12-03): the kernel's own word on
    #: whether the quota, not the work on hand, set that host's pace
    throttled: float | None = None
    #: the most times per step any host's ingress shaper made packets wait for tokens
    #: (tc's overlimits at the bridge port towards it; None: not stored, as in runs from
    #: before 2026-12-03). Two hosts' ingress carries one peer's already paced flows and
    #: hardly waits; with more hosts several senders meet there (ResNet-50 x8 on 4 hosts:
    #: 7-13x as often as x4 on 2), a queue the model's fluid shares do not see
    ingress_waits: float | None = None

    @property
    def verdict(self) -> str:
        cpu, wire = self.cpu or 0.0, self.wire or 0.0
        if cpu >= SATURATED and cpu >= wire:
            return f"CPU-bound (host {self.cpu_host})"
        if wire >= SATURATED:
            return f"wire-bound (host {self.wire_host})"
        if self.cpu is None or self.wire is None:
            return f"{'wire' if self.cpu is None else 'CPU'} not saturated (" \
                f"{'CPU' if self.cpu is None else 'wire'} unmeasured)"
        return "neither saturated: waiting (synchronisation, latency)"

    @property
    def short(self) -> str:
        """The verdict in a few words, for a table's column."""
        return self.verdict.split(" (")[0].split(":")[0] + \
            (", CPU unmeasured" if self.cpu is None else
             ", wire unmeasured" if self.wire is None else "")

    @property
    def brief(self) -> str:
        """The verdict with both shares, for a table's cell."""
        if self.cpu is None or self.wire is None:
            return self.verdict
        return f"{self.short} (CPU {self.cpu:.0%}, wire {self.wire:.0%})"

    @property
    def text(self) -> str:
        """One clause for a run's result line."""
        out_of_quota = (f" (out of quota in {self.throttled:.0%} of its CFS periods)"
                        if self.throttled is not None else "")
        parts = ([f"busiest host's CPU {self.cpu:.0%} of its quota{out_of_quota}"]
                 if self.cpu is not None else []) + \
            ([f"wire {self.wire:.0%} of the step"] if self.wire is not None else [])
        return f"{', '.join(parts)}: {self.verdict}"


def _obj(value: Any) -> dict:
    """A JSON column as stored (text), or as a run's row holds it before it is stored."""
    return value if isinstance(value, dict) else json.loads(value or "{}")


def _per_host(tag: str, spec: dict) -> re.Match | None:
    """The tag's (role, index), where its process runs on one host: a launcher's tree
    holds the ranks of every host (on emulated hosts mpirun reaches each through its
    launch agent), so its CPU cannot be split by host (it summed to 772% of one host's
    quota on 8 hosts of MXNet's Horovod, 2026-12-03)."""
    m = _TAG.match(tag)
    if m is None or (m.group(1) in LAUNCHER_TAGS and spec_hosts(spec) > 1):
        return None
    return m


def host_cores(r: dict) -> dict[int, float]:
    """Mean cores each host's processes used while measuring, by host index: summed by
    the network namespace each process ran in where the run stored that (from
    2026-12-04), else from each process's tag and the plan's placement (ranks a launcher
    started across hosts are then not known apart: left out)."""
    by_host = _obj(r.get("cpu_cores_by_host_json"))
    if by_host:
        return {int(h): used for h, used in by_host.items()}
    cores = _obj(r.get("cpu_cores_by_process_json"))
    spec = _obj(r["spec_json"])
    out: dict[int, float] = {}
    for tag, used in cores.items():
        m = _per_host(tag, spec)
        if m:
            node = spec_node_of(spec, m.group(1), int(m.group(2)))
            out[node] = out.get(node, 0.0) + used
    return out


def host_throttled(r: dict) -> dict[int, float]:
    """Share of its CFS periods each host's CPU cgroup ran out of quota while measuring,
    by host index: read from the host's group itself where the run stored that (from
    2026-12-04), else from its processes' tags (they share the group: the largest read is
    kept)."""
    by_host = _obj(r.get("cpu_throttled_by_host_json"))
    if by_host:
        return {int(h): share for h, share in by_host.items()}
    spec = _obj(r["spec_json"])
    out: dict[int, float] = {}
    for tag, share in _obj(r.get("cpu_throttled_by_process_json")).items():
        m = _per_host(tag, spec)
        if m:
            node = spec_node_of(spec, m.group(1), int(m.group(2)))
            out[node] = max(out.get(node, 0.0), share)
    return out


def host_bytes_per_step(r: dict) -> dict[int, float]:
    """The larger of each host's sent and received bytes per step, by host index."""
    moved = host_counters(r)
    steps = steps_run(r)
    out: dict[int, float] = {}
    for ns, v in moved.items():
        m = _HOST.search(ns)
        if m and steps:
            out[int(m.group(1))] = max(v.get("tx_bytes", 0), v.get("rx_bytes", 0)) / steps
    return out


def ingress_waits_per_step(r: dict) -> float | None:
    """The largest of the hosts' ingress-shaper waits per step (None: not counted)."""
    moved = host_counters(r)
    waits = [v["in_overlimits"] for v in moved.values() if "in_overlimits" in v]
    steps = steps_run(r)
    return max(waits) / steps if waits and steps else None


def check(r: dict) -> Bottleneck | None:
    """The busiest host's CPU and wire of a stored throughput run across emulated hosts;
    None where neither can be measured."""
    from runners.emulated import ClusterError, rate_bits

    spec = _obj(r["spec_json"])
    if r.get("mode") != "throughput" or spec_hosts(spec) < 2 or not r.get("t_iter_s"):
        return None
    t = r["t_iter_s"]
    cpu = cpu_host = wire = wire_host = None
    quota = r.get("cpus_per_host") or 0.0
    cores = host_cores(r)
    if quota and cores:
        cpu_host = max(cores, key=cores.get)
        cpu = cores[cpu_host] / quota
    try:
        bits = rate_bits(r.get("link") or "")
    except ClusterError:
        bits = None
    moved = host_bytes_per_step(r)
    if bits and moved:
        wire_host = max(moved, key=moved.get)
        wire = moved[wire_host] * 8 / bits / t
    if cpu is None and wire is None:
        return None
    return Bottleneck(hosts_label(r), r["run_id"], t, cpu, cpu_host, wire, wire_host,
                      host_throttled(r).get(cpu_host) if cpu_host is not None else None,
                      ingress_waits_per_step(r))


def table(rows: list[Bottleneck]) -> str:
    """One line per run: the busiest host's CPU and wire, and which bound the step."""
    def pct(x: float | None) -> str:
        return "   -" if x is None else f"{x:4.0%}"

    lines = ["what bound each step (measured: the busiest host's processes' CPU over its "
             "quota, and its interface's bytes per step over the link's rate, as a share "
             f"of the step; {SATURATED:.0%} or more is saturated):"]
    for b in rows:
        waits = ("" if b.ingress_waits is None
                 else f"   ingress waits {b.ingress_waits:,.0f}/step")
        lines.append(f"  {b.label:<50} t_iter {b.t_iter_s * 1e3:8.1f} ms   CPU {pct(b.cpu)}   "
                     f"wire {pct(b.wire)}   {b.verdict}{waits}")
    return "\n".join(lines)
