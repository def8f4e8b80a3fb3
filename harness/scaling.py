"""Scaling efficiency: which 1-worker run a multi-worker run is compared with, and how.

One rule for the report's scaling table, the in-sample model check
(`harness/perfmodel/validate.py`) and the CLI, so the same run never shows two
efficiencies. Weak scaling: the per-worker batch is fixed, so efficiency is
t_iter(1) / t_iter(N), the same as throughput(N) / (N x throughput(1)).
"""

from __future__ import annotations

import json

from frameworks.plan import ps_layout
from harness import replicates


def synthetic(r: dict) -> bool:
    return r.get("data") in (None, "synthetic")


def cpus_per_worker(r: dict) -> float:
    """The CPU share each worker of `r` computes with on limited emulated hosts: the host's
    limit over the workers it holds (0.0: no limit)."""
    cpus = r.get("cpus_per_host") or 0.0
    if not cpus:
        return 0.0
    per_node = json.loads(r.get("spec_json") or "{}").get("devices_per_node", 1) or 1
    return cpus / per_node


def _limits(r: dict) -> tuple[str, float]:
    return r.get("link") or "", round(cpus_per_worker(r), 9)


def baseline(runs: list[dict], r: dict) -> dict | None:
    """The 1-worker throughput run that `r` (a multi-worker run) is compared with: the same
    configuration and threads per worker; of the same strategy if there is one (the
    curve's own first point), else a 'single' run, else any; the newest first.

    On emulated hosts with a CPU limit the baseline must compute with the same CPU share
    as each of `r`'s workers (`cpus_per_worker`: 2 workers on a host of 0.5 CPU are
    compared with 1 worker on a host of 0.25): without one there is no baseline (a run on
    the whole machine would make the limit look like a communication cost).
    Otherwise a run on the same link is preferred, and any same-configuration run serves.
    """
    same = [s for s in reversed(runs)
            if (s["workers"] == 1 and s["mode"] == "throughput" and s["status"] == "ok"
                and s["framework"] == r["framework"] and s["model"] == r["model"]
                and s["batch_size"] == r["batch_size"] and s["image_size"] == r["image_size"]
                and s["device"] == r["device"] and s["threads"] == r["threads"]
                and synthetic(s) == synthetic(r))]
    # the curve's own 1-worker point first (a 1-worker Horovod run still pays Horovod's
    # background thread), then a plain single-device run, then any
    # (and of its servers' layout: a server on a host of its own adds the wire to it)
    rank = {r.get("strategy"): 0, "single": 1}
    same.sort(key=lambda s: (rank.get(s.get("strategy"), 2),
                             ps_layout(s) != ps_layout(r)))  # stable: newest first within
    for s in same:
        if _limits(s) == _limits(r):
            return s
    return None if r.get("cpus_per_host") else (same[0] if same else None)


def efficiency(r: dict, base: dict | None) -> float | None:
    """Weak-scaling efficiency of `r` against `base` (None without a baseline)."""
    if not base or not r.get("t_iter_s") or not base.get("t_iter_s"):
        return None
    return base["t_iter_s"] / r["t_iter_s"]


def points(runs: list[dict]) -> list[dict]:
    """Every multi-worker throughput run with its baseline and efficiency: the rows of the
    report's scaling table and of `results.scaling` (one function, so the two agree); a
    configuration measured more than once in its sweep is its median replicate."""
    runs = replicates.medians(runs)
    out = []
    for r in runs:
        if r["mode"] != "throughput" or r["workers"] == 1 or r["status"] != "ok":
            continue
        base = baseline(runs, r)
        out.append({"run_id": r["run_id"], "framework": r["framework"], "model": r["model"],
                    "strategy": r["strategy"], "workers": r["workers"], "nodes": r["nodes"],
                    "link": r.get("link") or "", "cpus_per_host": r.get("cpus_per_host"),
                    "images_per_s": r["images_per_s"],
                    "baseline_run_id": base["run_id"] if base else None,
                    "efficiency": efficiency(r, base),
                    "exposed_s": r["t_iter_s"] - base["t_iter_s"] if base else None,
                    "_row": r, "_base": base})
    return out
