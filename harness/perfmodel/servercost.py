"""What a parameter server's CPU costs per step, read from stored runs and fitted (issue #17).

The held-out model (holdout.py) fits the servers' CPU on runs with at most 2 workers and
carries it to 8. Its form: core-seconds per step = B u + n (B c + K r), B the bytes a
server holds, K the pieces it holds (tensors, or slices of big arrays: MXNet splits those
over every server), n its clients; u the update per byte, c each client's push and pull
per byte, r each client's request per piece whatever its bytes. r is fitted only on
request (`requests`): measured on every shipped sweep, it predicts the busiest server's
CPU at 4 and 8 workers better for asynchronous servers and not for synchronous ones
(`held_out`; `python -m bench.server_requests`; harness/perfmodel/README.md, "What a request costs
a server").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import NamedTuple

from harness.perfmodel import network
from harness.perfmodel.predict import ServerCost, ps_clients, server_placement
from harness.perfmodel.validate import LIBRARY, asynchronous, scenario
from harness.stats import error_medians, least_squares
from models.cost import cost

#: the most workers a run may have to be fitted on, for the servers' fit and every other
#: input of the held-out model (holdout.py takes it from here)
FIT_MAX_WORKERS = 2

_ANY = network.Link("any", 0.0, 0.0)  # the link does not change what a server holds


class ServerPoint(NamedTuple):
    """One parameter server of one stored run, per training step."""
    nbytes: float  # bytes it holds
    clients: int
    core_s: float  # its measured CPU time
    pieces: int  # pieces it holds (tensors, or slices of big ones): its requests per client


def library(r: dict) -> str:
    """The communication library of a stored run (validate.LIBRARY; else its framework)."""
    return LIBRARY.get((r["framework"], r["strategy"], r["device"]), r["framework"])


def family(r: dict) -> tuple:
    """Runs whose parameter servers cost the same core-seconds per byte: the same library
    on the same link, whatever the hosts' CPU quota (a quota changes how long the work
    takes, which the model derives from it, not the work), synchronous or not (an
    asynchronous server updates once per push: its cost is fitted apart)."""
    return (library(r), r.get("link") or "local", asynchronous(r))


def server_cpu(r: dict) -> list[float]:
    """Core-seconds per step of each of a run's parameter servers, busiest first, from its
    telemetry (mean cores while measuring x t_iter); empty without telemetry."""
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    return sorted((v * r["t_iter_s"] for k, v in cores.items() if k.startswith("server")),
                  reverse=True)


def points(r: dict) -> list[ServerPoint]:
    """Each parameter server of a stored PS run. ps-lite numbers servers in the order they
    register, not by host, so the measured CPU is matched to the placement's byte counts
    by rank (busiest with largest)."""
    used = server_cpu(r)
    if not used:
        return []
    sc = scenario(r, _ANY, _ANY)
    net = cost(sc.model, sc.image_size, sc.num_classes)
    plc = server_placement(sc, net)
    held = sorted(zip(plc.bytes_per_server, plc.tensors_per_server), reverse=True)
    return [ServerPoint(b, ps_clients(sc), c, k) for (b, k), c in zip(held, used)]


def fit(pts: list[ServerPoint], per_push: bool = False, requests: bool = False
        ) -> tuple[float, float, float] | None:
    """(per_byte, per_client_byte, per_client_piece) by non-negative least squares on
    core-s = B u + n (B c + K r) (B bytes held, K pieces held, n clients); None when the
    points cannot separate the per-step term from the per-client ones (a single client
    count). `per_push` (asynchronous servers, which update once per push): u = 0, all of it
    per client, which any client count fits. The request term r only with `requests`, and
    only where the points' servers hold their bytes in different numbers of pieces per byte
    (servers of one run placed unevenly): with one server, or pieces in proportion to
    bytes, it cannot be told from c. Every term is kept >= 0: the fit is the best of the
    least-squares fits on each subset of the terms whose coefficients all come out >= 0
    (a tie goes to the fewer terms)."""
    if not pts or (not per_push and len({p.clients for p in pts}) < 2):
        return None
    columns = {"u": lambda p: p.nbytes, "c": lambda p: p.nbytes * p.clients,
               "r": lambda p: p.pieces * p.clients}
    names = ["c"] if per_push else ["u", "c"]
    if requests and len({round(p.pieces / p.nbytes, 15) for p in pts if p.nbytes}) > 1:
        names.append("r")
    best: tuple[float, dict[str, float]] | None = None
    for mask in range(1, 2 ** len(names)):
        use = [n for i, n in enumerate(names) if mask >> i & 1]
        coef = least_squares([[columns[n](p) for n in use] for p in pts],
                             [p.core_s for p in pts])
        if coef is None or min(coef) < 0:
            continue
        resid = sum((p.core_s - sum(x * columns[n](p) for x, n in zip(coef, use))) ** 2
                    for p in pts)
        if best is None or resid < best[0] * (1 - 1e-9):
            best = (resid, dict(zip(use, coef)))
    if best is None:
        return None
    return best[1].get("u", 0.0), best[1].get("c", 0.0), best[1].get("r", 0.0)


def busiest(c: ServerCost, pts: list[ServerPoint], per_push: bool) -> float:
    """The busiest of `pts`' servers' core-seconds per step under cost `c`."""
    return max(c.per_step(p.nbytes, p.clients, p.pieces, per_push) for p in pts)


@dataclass(frozen=True)
class Check:
    """The busiest server of one run with more than FIT_MAX_WORKERS workers: its measured
    CPU per step against the cost fitted on its family's smaller runs, each way."""
    family: tuple
    label: str
    measured: float  # core-seconds per step
    by_bytes: float  # predicted without the request term
    with_requests: float  # predicted with it (equal to by_bytes where it is not fitted)
    requests_fitted: bool


def held_out(runs: list[dict]) -> list[Check]:
    """Every larger PS run of one sweep with servers' telemetry, its busiest server's CPU
    predicted from its family's runs with at most FIT_MAX_WORKERS workers, with and
    without the request term. Families without a fit (one client count) are left out."""
    fams: dict[tuple, list[dict]] = {}
    for r in runs:
        if r.get("cpus_per_host") and server_cpu(r):
            fams.setdefault(family(r), []).append(r)
    out = []
    for fam, rs in fams.items():
        small = [p for r in rs if r["workers"] <= FIT_MAX_WORKERS for p in points(r)]
        plain, req = fit(small, fam[2]), fit(small, fam[2], requests=True)
        if plain is None or req is None:
            continue
        for r in rs:
            if r["workers"] > FIT_MAX_WORKERS:
                pts = points(r)
                split = f" split>={r['ps_split_bound']}" if r.get("ps_split_bound") else ""
                out.append(Check(fam, f"{r['model']} {r['strategy']} ps{r['ps']}{split} "
                                      f"x{r['workers']}", max(p.core_s for p in pts),
                                 busiest(ServerCost(*plain), pts, fam[2]),
                                 busiest(ServerCost(*req), pts, fam[2]), req[2] > 0))
    return out


def summary(checks: list[Check]) -> dict[str, float]:
    """Median |error| and median signed error of each way, over `checks`."""
    by, by_bias = error_medians([c.by_bytes / c.measured - 1 for c in checks])
    rq, rq_bias = error_medians([c.with_requests / c.measured - 1 for c in checks])
    return {"n": len(checks), "by_bytes": by, "by_bytes_bias": by_bias,
            "with_requests": rq, "with_requests_bias": rq_bias}
