"""The kernel's packet work on the emulated cluster's shared cores, and who pays for it
(issue #17).

This kernel has no CONFIG_IRQ_TIME_ACCOUNTING: a packet's softirq work (tbf's timed
dequeue, the veth's receive path, TCP's input) is charged to whichever process is running
on the core when it happens, and against that process's cgroup quota. So a worker pays for
bytes it never sends: beside neighbours that only moved 119 MB/s over a shaped veth on its
core, a 1-worker run's worker spent 19% more CPU per step and its server 22%, while the
core spent 5.0% of its time in softirq, against the run's 0.25 busy cores: 0.05 / 0.25 =
0.20 (harness/perfmodel/README.md, "Neighbours that move bytes";
experiments/measured/neighbour-wire).

Form: every process on the cores pays the same share of its time, the machine's softirq
cores over the parameter-server processes' busy cores (telemetry's `machine_cpu_json` and
`cpu_cores_by_process_json`, both read while measuring). A run's workers then spend
(1 + that share) times their own CPU per step; the held-out check compares a larger run's
share with its configuration's small runs' (workercost.held_out). The softirq cores grow
with the bytes per second crossing the link (`fit`: least squares over the small runs,
s = s0 + sigma x bytes per second); measured, they grow faster than that at 4-8 workers
(`python -m bench.worker_wire`), so the measured share explains more than the fitted one.
The shapers' waits (tbf overlimits: a packet that found no tokens, each a timer and a
requeue) grow faster than the bytes as more senders meet at an ingress, and a term per
wait (`fit_with_waits`) looks like the missing growth when every set is pooled; fitted
on each set's own small runs it makes the larger runs' softirq worse, not better
(`python -m bench.packet_work`: 18.3% -> 31.5% median |error|), and TCP segments in
place of bytes (`segments_per_s`) do no better (19.5%). The form is not settled; the simulated step
(predict.Scenario.packet_work) has the per-byte form.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from harness.perfmodel.traffic import host_counters, steps_run
from harness.stats import least_squares


def softirq_cores(r: dict) -> float | None:
    """The machine's mean cores in softirq while stored run `r` measured; None where its
    telemetry has no machine reading."""
    m = json.loads(r.get("machine_cpu_json") or "{}")
    return m.get("softirq")


#: the softirq kinds a packet raises (/proc/softirqs): its transmit and its receive
NET_KINDS = ("NET_RX", "NET_TX")


def softirqs_per_s(r: dict) -> dict[str, float] | None:
    """The machine's softirqs raised per second by kind while stored run `r` measured
    (telemetry's `machine_softirqs_json`: counts, not time); None where the run did not
    store them (every run before 2026-12-06)."""
    return json.loads(r.get("machine_softirqs_json") or "{}") or None


def busy_cores(r: dict) -> float | None:
    """The run's own processes' mean cores (workers, servers, scheduler) while measuring;
    None without per-process telemetry."""
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    total = sum(cores.values())
    return total if total > 0 else None


def share(r: dict) -> float | None:
    """The softirq cores over the run's busy cores: the extra fraction each of its
    processes pays where the packet work lands on whoever runs."""
    s, b = softirq_cores(r), busy_cores(r)
    return s / b if s is not None and b else None


class Fit(NamedTuple):
    s0: float  # softirq cores with nothing on the wire
    sigma: float  # softirq core-seconds per byte per second crossing the link


def fit(points: list[tuple[float, float]]) -> Fit | None:
    """s = s0 + sigma x bytes per second across the link, least squares over `points`
    ((bytes per second, softirq cores) of small runs; sigma >= 0); None with fewer than
    two distinct byte rates."""
    if len({round(x) for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sigma = max(sum((x - mx) * (y - my) for x, y in points) / sxx, 0.0)
    return Fit(my - sigma * mx, sigma)


def modelled_share(f: Fit, bytes_per_s: float, r: dict) -> float | None:
    """`share` with the softirq cores from fit `f` at `bytes_per_s` across the link (from
    the run's measured t_iter) over its measured busy cores: what the packet work costs
    each process given the step."""
    b = busy_cores(r)
    return (f.s0 + f.sigma * bytes_per_s) / b if b else None


def _counted_per_s(r: dict, *fields: str) -> float | None:
    """`fields` of every emulated host's counters stored with run `r`, summed over the
    hosts that counted any of them, per second of its steps (None: none counted)."""
    got = [sum(v.get(f, 0) for f in fields) for v in host_counters(r).values()
           if any(f in v for f in fields)]
    steps = steps_run(r)
    return sum(got) / steps / r["t_iter_s"] if got and steps and r.get("t_iter_s") else None


def shaper_waits_per_s(r: dict) -> float | None:
    """Every emulated host's tbf waits (overlimits) per second, egress and ingress
    together, from the interface counters stored with run `r` (None: not counted)."""
    return _counted_per_s(r, "in_overlimits", "out_overlimits")


def segments_per_s(r: dict) -> float | None:
    """Every emulated host's TCP segments sent per second (loopback included: a host's
    own server's traffic is packet work too), from the counters stored with run `r`
    (None: not counted)."""
    return _counted_per_s(r, "out_segs")


class WaitsFit(NamedTuple):
    s0: float  # softirq cores with nothing on the wire
    sigma: float  # core-seconds per byte crossing the link
    tau: float  # core-seconds per shaper wait


def fit_with_waits(points: list[tuple[float, float, float]]) -> WaitsFit | None:
    """s = s0 + sigma x bytes per second + tau x shaper waits per second, least squares
    over `points` ((bytes per second, waits per second, softirq cores)); None where the
    points cannot tell the terms apart."""
    coef = least_squares([[1.0, b, w] for b, w, _ in points], [s for _, _, s in points])
    return WaitsFit(*coef) if coef else None
