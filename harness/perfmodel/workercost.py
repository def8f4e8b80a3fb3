"""What a parameter-server worker's own CPU costs per byte it moves across the link (issue #17).

The held-out model takes a worker's compute from its 1-worker run (and the curve's 2-worker
runs, each run backwards through the simulated step) and keeps it at every scale. Measured,
it does not stay: on the workers' hosts (ps_hosts = "shared"), a 1-worker run's pushes and
pulls all go to the server beside it over loopback, while at 4 and 8 workers most of a
worker's bytes cross the emulated link, and its CPU per step grows with them (GoogLeNet,
0.25 CPU per host: about 67 core-ms per step at 1 worker, 78 for a worker beside the
busiest server and 87 for one on a host without a server at 4; ps-pieces-emulated r1).
Fitted on every shipped MXNet sweep's <= 2-worker runs alone, a cost per byte a worker
sends to or receives from another host predicts its CPU at 4 and 8 workers within a median
7.1% (bias -5.6%), against 15.0% (bias -14.6%) for the 1-worker run's CPU and 10.1%
(bias -9.0%) for the small runs' mean (`python -m bench.worker_wire`). With servers on
hosts of their own every byte crosses at every scale, so the term cannot be told from the
compute and is not fitted there.

Form: a worker's core-seconds per step = a + w x (bytes it pushes to and pulls from
servers on other hosts), a per configuration (network, image size, batch, quota, layout),
w per family (servercost.family: library, link, synchronous or not). psstep spends it on a
network thread of the worker's own (predict.Scenario.worker_wire_cost).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import NamedTuple

from harness.perfmodel import packetwork, predict, servercost
from harness.perfmodel.predict import Scenario, server_placement
from harness.perfmodel.validate import scenario
from harness.stats import error_medians
from models.cost import cost


class WorkerPoint(NamedTuple):
    """One worker of one stored parameter-server run, per training step."""
    config: tuple  # what its compute depends on (the fit's intercept is per config)
    remote_bytes: float  # bytes it pushes to and pulls from servers on other hosts
    core_s: float  # its measured CPU time
    run_id: str


def config(r: dict) -> tuple:
    """Runs whose workers compute the same per step, whatever their servers and scale."""
    return (r["model"], r.get("image_size"), r.get("batch"), r.get("num_classes"),
            r.get("cpus_per_host"), r.get("ps_hosts") or "shared")


def remote_bytes(r: dict) -> list[float]:
    """Bytes each worker of a stored PS run moves per step to and from servers on other
    hosts (scenario_remote_bytes)."""
    return scenario_remote_bytes(scenario(r, servercost._ANY, servercost._ANY))


def scenario_remote_bytes(sc: Scenario) -> list[float]:
    """Bytes each worker moves per step to and from servers on other hosts, as the
    simulated step places them (predict.remote_bytes)."""
    return predict.remote_bytes(sc, server_placement(sc, cost(sc.model, sc.image_size,
                                                              sc.num_classes)))


def points(r: dict) -> list[WorkerPoint]:
    """Each worker of a stored PS run with per-process telemetry (mean cores while
    measuring x t_iter); empty without it."""
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    if not any(k.startswith("worker") for k in cores):
        return []
    key = config(r)
    return [WorkerPoint(key, x, cores[f"worker{w}"] * r["t_iter_s"], r["run_id"])
            for w, x in enumerate(remote_bytes(r)) if f"worker{w}" in cores]


def _means(pts: list[WorkerPoint]) -> dict[tuple, tuple[float, float]]:
    """Each config's mean remote bytes and mean CPU."""
    by: dict[tuple, list[WorkerPoint]] = {}
    for p in pts:
        by.setdefault(p.config, []).append(p)
    return {k: (sum(p.remote_bytes for p in v) / len(v), sum(p.core_s for p in v) / len(v))
            for k, v in by.items()}


def fit(pts: list[WorkerPoint]) -> float | None:
    """w, core-seconds per byte a worker moves across the link: least squares with an
    intercept per config (the slope within configs), kept >= 0. None where no config's
    workers moved different bytes across the link (one layout's 1-worker runs alone, or
    servers on hosts of their own, where every byte crosses at every scale)."""
    mean = _means(pts)
    sxx = sum((p.remote_bytes - mean[p.config][0]) ** 2 for p in pts)
    if sxx <= 1.0:  # bytes: less than one byte of spread is none
        return None
    sxy = sum((p.remote_bytes - mean[p.config][0]) * (p.core_s - mean[p.config][1])
              for p in pts)
    return max(sxy / sxx, 0.0)


@dataclass(frozen=True)
class Check:
    """The workers of one run with more than FIT_MAX_WORKERS workers: their mean measured
    CPU per step against their configuration's fitted on its family's smaller runs, each
    way."""
    family: tuple
    label: str
    measured: float  # mean core-seconds per step of its workers
    constant: float  # the small runs' mean: the compute the model keeps at every scale
    with_wire: float  # with the cost per byte across the link
    #: with_wire, and the packet work of every host on the cores charged to whoever runs
    #: (packetwork.py): x (1 + the run's softirq share - its small runs'), the share as
    #: measured, and as fitted from the bytes per second (None: no machine telemetry)
    with_packets: float | None = None
    with_packets_fitted: float | None = None
    #: the run's measured share minus its small runs' mean (what with_packets charges)
    share_rise: float | None = None


def bytes_per_s(r: dict) -> float:
    """Bytes per second a stored run's workers move across the link (all of them)."""
    return sum(remote_bytes(r)) / r["t_iter_s"]


def held_out(runs: list[dict]) -> list[Check]:
    """Every larger PS run of one sweep with workers' telemetry on quota-limited hosts,
    its workers' mean CPU predicted from its family's runs with at most FIT_MAX_WORKERS
    workers of the same configuration, with and without the wire term. Families without
    a fit are left out."""
    fams: dict[tuple, list[dict]] = {}
    for r in runs:
        if r.get("cpus_per_host") and r["strategy"] in ("ps-sync", "ps-async") and points(r):
            fams.setdefault(servercost.family(r), []).append(r)
    out = []
    for fam, rs in fams.items():
        small_runs = [r for r in rs if r["workers"] <= servercost.FIT_MAX_WORKERS]
        small = [p for r in small_runs for p in points(r)]
        w = fit(small)
        if w is None:
            continue
        mean = _means(small)
        shares: dict[tuple, list[float]] = {}
        for r in small_runs:
            x = packetwork.share(r)
            if x is not None:
                shares.setdefault(config(r), []).append(x)
        pw = packetwork.fit([(bytes_per_s(r), packetwork.softirq_cores(r))
                             for r in small_runs if packetwork.softirq_cores(r) is not None])
        for r in rs:
            if r["workers"] <= servercost.FIT_MAX_WORKERS or config(r) not in mean:
                continue
            pts = points(r)
            x0, y0 = mean[config(r)]
            wire = y0 + w * (sum(p.remote_bytes for p in pts) / len(pts) - x0)
            base = shares.get(config(r))
            x0_share = sum(base) / len(base) if base else None
            x, xf = packetwork.share(r), (packetwork.modelled_share(pw, bytes_per_s(r), r)
                                          if pw else None)
            split = f" split>={r['ps_split_bound']}" if r.get("ps_split_bound") else ""
            out.append(Check(
                fam, f"{r['model']} {r['strategy']} ps{r['ps']}{split} x{r['workers']}",
                sum(p.core_s for p in pts) / len(pts), y0, wire,
                wire * (1 + x - x0_share) if None not in (x, x0_share) else None,
                wire * (1 + xf - x0_share) if None not in (xf, x0_share) else None,
                x - x0_share if None not in (x, x0_share) else None))
    return out


def summary(checks: list[Check]) -> dict[str, float | None]:
    """Median |error| and median signed error of each way, over `checks` (the packet-work
    ways over the checks that have them, with the wire's over the same checks beside
    them as `wire_on_packets`; None where none has)."""
    out: dict[str, float | None] = {"n": len(checks)}
    for way in ("constant", "with_wire", "with_packets", "with_packets_fitted"):
        errs = [getattr(c, way) / c.measured - 1 for c in checks
                if getattr(c, way) is not None]
        out[way], out[f"{way}_bias"] = error_medians(errs) if errs else (None, None)
    on = [c.with_wire / c.measured - 1 for c in checks if c.with_packets is not None]
    out["wire_on_packets"], out["wire_on_packets_bias"] = error_medians(on) if on else (None,
                                                                                        None)
    out["n_packets"] = len(on)
    rises = [c.share_rise for c in checks if c.share_rise is not None]
    out["share_rise"] = statistics.median(rises) if rises else None
    return out
