"""A parameter server's load per step, read from stored runs (issue #17).

The held-out model fits each server's CPU per step on runs with 1 and 2 clients and
extrapolates it to 8 (perfmodel/servercost.py `fit`). Whether that can work is a
question about the server, not the model: does its CPU per step grow linearly with its
clients, and does anything else change as they are added? Every run stores what answers
it (harness/telemetry.py): each process's mean cores, its threads' context switches
(voluntary: it slept until a message or a lock woke it) and the share of its CPU cgroup's
CFS periods that ran out of quota. This module turns them into per-step and per-client
figures, per run and over repeats (experiments/server-load-own.toml; `python -m
bench.server_load`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from statistics import median

from harness.perfmodel import network
from harness.perfmodel.predict import ps_clients
from harness.perfmodel.validate import STRATEGY_MAP, scenario

_ANY = network.Link("any", 0.0, 0.0)  # the link does not change who a server's clients are


@dataclass(frozen=True)
class ServerLoad:
    """The busiest server of one stored PS run, per training step."""
    model: str
    strategy: str
    servers: int
    clients: int
    t_iter_s: float
    core_s: float  # its CPU time per step
    voluntary: float | None  # context switches per step (None: not stored)
    involuntary: float | None
    throttled: float | None  # share of its host's CFS periods out of quota
    worker_core_s: float  # the mean worker's CPU time per step

    @property
    def per_client(self) -> float:
        return self.core_s / self.clients

    @property
    def per_client_over_worker(self) -> float:
        """Per client over the same run's worker's CPU per step. A worker's step is the
        same work at every client count (one batch, its gradients pushed and pulled
        once), so its CPU per step says how fast this machine ran this kind of work
        during that run: at 1 client it moved by 51% between two sweeps a day apart,
        where the noise meter's GEMM and copy probes moved by 19%. Only roughly, though:
        it also grows with clients (waiting costs some CPU), so this ratio is a hint."""
        return self.per_client / self.worker_core_s if self.worker_core_s else float("nan")


def of_run(r: dict) -> ServerLoad | None:
    """The busiest server's load in a stored run; None for runs without servers or
    without telemetry."""
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    servers = {k: v for k, v in cores.items() if k.startswith("server")}
    workers = [v for k, v in cores.items() if k.startswith("worker")]
    if r.get("status") != "ok" or not servers or not workers:
        return None
    tag = max(servers, key=servers.get)
    t = r["t_iter_s"]
    switches = json.loads(r.get("ctx_switches_by_process_json") or "{}").get(tag)
    throttled = json.loads(r.get("cpu_throttled_by_process_json") or "{}").get(tag)
    # a server's clients as the model counts them (one per node where MXNet sums a
    # node's devices first); strategies the model does not map (ps-async): every worker
    clients = (ps_clients(scenario(r, _ANY, _ANY)) if r["strategy"] in STRATEGY_MAP
               else r["workers"])
    return ServerLoad(r["model"], r["strategy"], len(servers), clients, t,
                      servers[tag] * t,
                      switches["voluntary_per_s"] * t if switches else None,
                      switches["involuntary_per_s"] * t if switches else None,
                      throttled, median(workers) * t)


def line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (clients, core-s) points."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


@dataclass(frozen=True)
class Curve:
    """One network's server load against its clients at one server count, each point
    the median over the repeats that measured it."""
    model: str
    strategy: str
    servers: int
    points: dict[int, list[ServerLoad]]  # clients -> one load per repeat

    def med(self, clients: int, field: str) -> float | None:
        got = [getattr(s, field) for s in self.points[clients]]
        got = [v for v in got if v is not None]
        return median(got) if got else None

    def fit_from_two(self) -> tuple[float, float] | None:
        """The line through the 1- and 2-client medians: what a model fitted on runs with
        at most 2 clients extrapolates (None without both)."""
        if not {1, 2} <= set(self.points):
            return None
        return line([(n, self.med(n, "core_s")) for n in (1, 2)])

    def fit_past_one(self) -> tuple[float, float] | None:
        """The line through every median from 2 clients on (None with fewer than two)."""
        ns = [n for n in sorted(self.points) if n >= 2]
        return line([(n, self.med(n, "core_s")) for n in ns]) if len(ns) >= 2 else None


def curves(runs_by_repeat: list[list[dict]]) -> list[Curve]:
    """Each network's curve per strategy and server count over every repeat's runs."""
    out: dict[tuple[str, str, int], dict[int, list[ServerLoad]]] = {}
    for runs in runs_by_repeat:
        for r in runs:
            s = of_run(r)
            if s is not None:
                out.setdefault((s.model, s.strategy, s.servers), {}).setdefault(
                    s.clients, []).append(s)
    return [Curve(m, st, k, dict(sorted(p.items()))) for (m, st, k), p in sorted(out.items())]


def table(cs: list[Curve]) -> str:
    """Per network and client count: the medians over repeats, per step and per client,
    and the two lines a model could draw through them."""
    def fmt(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)

    lines = ["a parameter server's load per step (the busiest server; medians over "
             "repeats, [min-max] of core-s per client):"]
    for c in cs:
        lines.append(f"  {c.model} {c.strategy}, {c.servers} server"
                     f"{'s' if c.servers > 1 else ''}:")
        lines.append("    clients  t_iter ms  core-s/step  per client [min-max]      "
                     "wake-ups/client  preempted/client  out of quota  worker core-s  "
                     "per client / worker's")
        for n, got in c.points.items():
            per = [s.per_client for s in got]
            vol, inv = c.med(n, "voluntary"), c.med(n, "involuntary")
            lines.append(
                f"    {n:7d}  {c.med(n, 't_iter_s') * 1e3:9.0f}  {c.med(n, 'core_s'):11.3f}  "
                f"{median(per):10.3f} [{min(per):.3f}-{max(per):.3f}]  "
                f"{fmt(vol and vol / n, '15.0f'):>15}  {fmt(inv and inv / n, '16.0f'):>16}  "
                f"{fmt(c.med(n, 'throttled'), '12.0%'):>12}  {c.med(n, 'worker_core_s'):13.3f}  "
                f"{c.med(n, 'per_client_over_worker'):21.2f}")
        two, rest = c.fit_from_two(), c.fit_past_one()
        last = max(c.points)
        if two and rest and last > 2:
            at = c.med(last, "core_s")
            lines.append(
                f"    fitted on 1 and 2 clients: {two[0]:.3f} + {two[1]:.3f} n core-s, "
                f"{two[0] + two[1] * last:.3f} at {last} ({(two[0] + two[1] * last) / at - 1:+.0%}"
                f" of the measured {at:.3f}); through 2 to {last} clients: {rest[0]:.3f} + "
                f"{rest[1]:.3f} n")
    return "\n".join(lines)
