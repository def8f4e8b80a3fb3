"""Results for analysis: a results database as tidy pandas frames.

    from dnnbench import results
    r = results.load("results/default.db")       # every table, one frame each
    r.runs[["framework", "model", "images_per_s", "mfu"]]
    results.verdicts(r)                            # who is faster, and can it be said

Frames (one row per observation; the columns and units are in `COLUMNS` and in
`results.describe()`):
  runs        one row per run: the documented RUN_COLUMNS (harness/store.py), `spec` and
              `manifest` parsed from JSON
  trials      rank 0's trials: run_id, trial, round (of its interleaved group), started
              (unix s), seconds (wall / timed iterations), wall (s), iterations
  iterations  every timed iteration: run_id, rank, trial, iter, seconds
  phases      breakdown mode, every phase of every iteration: ... phase, seconds
  telemetry   resource samples: run_id, tag, t (s from launch), cpu_cores, rss_bytes, gpu_*,
              span_s, pss_bytes, anon_bytes
  comm        commbench: one row per library, ranks, link and message size
  verdicts    (function) every pair of frameworks per network and settings, compared
              the way the report does (harness/verdicts.py)
  scaling     (function) every multi-worker run with its 1-worker baseline and weak-scaling
              efficiency (harness/scaling.py: the report's scaling table uses the same rows)
  intervals   (function) each run's 95% interval over its sweep and its repeat interval
              (harness/repeat.py: widened by this host's between-sweep drift)
The report and `dnnbench results --verdicts/--scaling/--intervals` call the same
functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from harness.store import RUN_COLUMNS, Store

#: table -> [(column, unit, meaning)]
COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "runs": [(n, u, m) for n, _, u, m in RUN_COLUMNS],
    "trials": [("run_id", "", "the run"), ("trial", "", "trial number, from 0"),
               ("round", "", "round of its interleaved group (empty: measured alone)"),
               ("started", "unix s", "when the trial began"),
               ("seconds", "s", "wall time over timed iterations: the trial's sample"),
               ("wall", "s", "trial wall time"), ("iterations", "", "timed iterations")],
    "iterations": [("run_id", "", "the run"), ("rank", "", "worker rank"),
                   ("trial", "", "trial number"), ("iter", "", "iteration in the trial"),
                   ("seconds", "s", "host time of the iteration")],
    "phases": [("run_id", "", "the run"), ("rank", "", "worker rank"),
               ("trial", "", "trial number"), ("iter", "", "iteration in the trial"),
               ("phase", "", "io | h2d | forward | backward | comm | update"),
               ("seconds", "s", "time of the phase, synchronised")],
    "telemetry": [("run_id", "", "the run"), ("tag", "", "process (worker0) or gpuN"),
                  ("t", "s", "since launch"), ("cpu_cores", "cores", "CPU use of the tree"),
                  ("rss_bytes", "bytes", "resident memory of the tree"),
                  ("gpu_util", "%", "GPU utilisation"),
                  ("gpu_mem_bytes", "bytes", "GPU memory used"),
                  ("gpu_power_w", "W", "GPU power"),
                  ("span_s", "s", "time the cpu_cores rate covers (empty before 2026-12-03)"),
                  ("pss_bytes", "bytes", "proportional set size of the tree, at full scans "
                   "(every few seconds; empty between them and before 2026-12-07)"),
                  ("anon_bytes", "bytes", "anonymous memory of the tree (heap, tensors: not "
                   "the libraries' mapped pages, which move with the page cache's state), "
                   "at full scans (empty between them and before 2026-12-07)")],
    "comm": [("library", "", "collective library"), ("op", "", "collective"),
             ("ranks", "", "processes"), ("nodes", "", "hosts"), ("link", "", "emulated link"),
             ("bytes", "bytes", "message size"), ("median_s", "s", "median time"),
             ("algbw", "GB/s", "bytes / time"), ("busbw", "GB/s", "nccl-tests bus bandwidth"),
             ("wrong", "", "results that were not the expected sum")],
}


class ResultsError(ValueError):
    """The database cannot be loaded; the message names it."""


@dataclass
class Results:
    """One results database as frames (see the module docstring for their columns)."""

    runs: pd.DataFrame
    trials: pd.DataFrame
    iterations: pd.DataFrame
    phases: pd.DataFrame
    telemetry: pd.DataFrame
    comm: pd.DataFrame
    path: str = ""


def _frame(store: Store, table: str, where: str = "", params: tuple = ()) -> pd.DataFrame:
    cur = store.conn.execute(f"SELECT * FROM {table} {where}", params)
    return pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])


def load(path: str | Path, experiment: str | None = None) -> Results:
    """Every table of the database at `path` (only `experiment`'s runs, if given)."""
    if not Path(path).is_file():
        raise ResultsError(f"results database {path} does not exist")
    with Store(path, readonly=True) as store:
        where, params = ("WHERE experiment = ?", (experiment,)) if experiment else ("", ())
        runs = _frame(store, "runs", where + " ORDER BY started", params)
        for col in ("spec_json", "manifest_json"):
            runs[col[:-5]] = [json.loads(v) if v else {} for v in runs.pop(col)]
        ids = set(runs["run_id"])

        def of_runs(table: str) -> pd.DataFrame:
            df = _frame(store, table)
            return df[df["run_id"].isin(ids)].reset_index(drop=True)

        out = Results(runs=runs, trials=of_runs("trials"), iterations=of_runs("iterations"),
                      phases=of_runs("phases"), telemetry=of_runs("telemetry"),
                      comm=_frame(store, "comm", where, params), path=str(path))
    return out


def describe(table: str = "runs") -> pd.DataFrame:
    """The documented columns of one frame, with units."""
    return pd.DataFrame(COLUMNS[table], columns=["column", "unit", "meaning"])


def verdicts(res: Results, mode: str = "throughput") -> pd.DataFrame:
    """Every pair of frameworks per network and settings (single worker, synthetic data,
    this mode): the faster one, by how much, its 95% interval, paired or independent,
    and whether the report would state it with confidence."""
    import itertools

    from harness import replicates
    from harness import verdicts as V
    from harness.analysis import config

    ok = res.runs[(res.runs["status"] == "ok") & (res.runs["mode"] == mode)]
    rows = replicates.medians([r for r in ok.to_dict("records")
                               if r.get("data") in (None, "synthetic")])
    rounds = V.round_times(res.trials.to_dict("records"))
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault((r["model"], config(r)), []).append(r)
    out = []
    for (model, cfg), runs in sorted(by.items()):
        for a, b in itertools.combinations(sorted(runs, key=lambda r: r["framework"]), 2):
            v = V.compare_pair(a, b, rounds)
            out.append({"model": model, "config": cfg, "faster": v.fast["framework"],
                        "slower": v.slow["framework"], "speedup": v.speedup, "low": v.low,
                        "high": v.high, "method": v.method, "rounds": v.n,
                        "confident": v.confident})
    return pd.DataFrame(out, columns=["model", "config", "faster", "slower", "speedup", "low",
                                      "high", "method", "rounds", "confident"])


def scaling(res: Results) -> pd.DataFrame:
    """Every multi-worker throughput run: its baseline run, efficiency (t_iter(1) /
    t_iter(N), weak scaling) and exposed time (t_iter(N) - t_iter(1), s). `work_meter`
    and `baseline_work_meter`: the run's and its baseline's workers' CPU per step over
    their workload's usual in the sweep (harness/workmeter.py; empty where the meter does
    not read, as for allreduce): a baseline above workmeter.SLOW ran on a slow CPU, and
    the efficiency rests on it."""
    from harness import workmeter
    from harness.scaling import points

    cols = ["run_id", "framework", "model", "strategy", "workers", "nodes", "link",
            "cpus_per_host", "images_per_s", "baseline_run_id", "efficiency", "exposed_s",
            "work_meter", "baseline_work_meter"]
    records = res.runs.to_dict("records")
    meter = workmeter.ratios([r for r in records if r["status"] == "ok"])
    rows = [{**p, "work_meter": meter.get(p["run_id"]),
             "baseline_work_meter": meter.get(p["baseline_run_id"])}
            for p in points(records)]
    return pd.DataFrame([{c: p[c] for c in cols} for p in rows], columns=cols)


def intervals(res: Results, history: str | Path | None = None) -> pd.DataFrame:
    """Each ok run's images/s with its 95% interval over its own sweep (low, high) and its
    repeat interval (repeat_low, repeat_high: what measuring again another time on this
    host would give; empty until the host history knows another sweep of some
    configuration). `drift_sd_pct` is the host's between-sweep drift used."""
    from harness import repeat

    cols = ["run_id", "framework", "model", "mode", "workers", "images_per_s", "low", "high",
            "repeat_low", "repeat_high", "drift_sd_pct"]
    ok = [r for r in res.runs.to_dict("records") if r["status"] == "ok"]
    for r in ok:
        r["manifest_json"] = r.get("manifest") or {}
    drifts = repeat.drifts_for(ok, history)
    out = []
    for r in ok:
        d = drifts.get(repeat.host_key(r))
        rep = repeat.interval(r, d)
        out.append({"run_id": r["run_id"], "framework": r["framework"], "model": r["model"],
                    "mode": r["mode"], "workers": r["workers"],
                    "images_per_s": r["images_per_s"], "low": r["images_per_s_low"],
                    "high": r["images_per_s_high"],
                    "repeat_low": rep[0] if rep else None,
                    "repeat_high": rep[1] if rep else None,
                    "drift_sd_pct": d.sd_pct if d else None})
    return pd.DataFrame(out, columns=cols)
