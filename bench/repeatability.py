"""Do the default experiment's conclusions repeat? (`python -m bench.repeatability`)

Runs experiments/default.toml three times into three databases, one after another, on
this machine as it is (nothing else stopped):
  1. `fixed`: the schedule before interleaving (every configuration alone, 6 trials x 5
     steps, `--order sequential --target-width 0 --steps 5`): the time reference;
  2. `first` and `second`: the default schedule (interleaved, adaptive).
Reports, with targets:
  - contradictions: pairs of frameworks (same network and settings) that one report ranks
    with confidence and the other ranks the other way with confidence (target 0), for the
    default schedule and, for reference, between `fixed` and `first`;
  - calibration: the share of configurations whose two 95% intervals (first, second)
    overlap (target >= 95%), for the repeat intervals (harness/repeat.py: widened by this
    host's between-sweep drift, estimated from the host history WITHOUT these two sweeps:
    seed it first with `dnnbench history --add OLD.db`, or run this bench twice) and, for
    reference, for the runs' own within-sweep intervals;
  - time: each sweep's wall time; the default's against `fixed` (target: no slower).

`--evaluate A.db B.db C.db ...` measures nothing: it checks the repeat intervals' calibration
on sweeps already taken, leave-two-out. A history is built from exactly these databases;
for every pair, the drift is estimated from the others only, and the pair's repeat
intervals (and, for reference, their within-sweep ones) are checked for overlap.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import repeat, verdicts  # noqa: E402
from harness.analysis import config, display  # noqa: E402
from harness.stats import intervals_overlap  # noqa: E402
from harness.store import Store  # noqa: E402

SCHEDULES = {"fixed": ["--order", "sequential", "--target-width", "0", "--steps", "5"],
             "first": [], "second": []}


def sweep(name: str, extra: list[str], out: Path) -> float:
    db = out / f"{name}.db"
    db.unlink(missing_ok=True)
    exe = Path(sys.executable).parent / "dnnbench"
    t0 = time.monotonic()
    proc = subprocess.run([str(exe), "run", "--experiment", str(REPO / "experiments" /
                                                                 "default.toml"),
                           "--db", str(db), *extra], cwd=REPO)
    if proc.returncode:
        raise SystemExit(f"sweep {name} failed ({proc.returncode})")
    return time.monotonic() - t0


def all_verdicts(db: Path) -> dict[tuple, verdicts.Verdict]:
    """Every pair of frameworks per network and settings (throughput mode)."""
    with Store(db, readonly=True) as store:
        ok = [r for r in store.runs("WHERE status = 'ok' AND mode = 'throughput'")]
        rounds = verdicts.round_times(store.trials(r["run_id"] for r in ok))
    by: dict[tuple, list[dict]] = {}
    for r in ok:
        by.setdefault((r["model"], config(r)), []).append(r)
    out = {}
    for (model, cfg), rows in by.items():
        for a, b in itertools.combinations(sorted(rows, key=lambda r: r["framework"]), 2):
            out[(model, cfg, a["framework"], b["framework"])] = verdicts.compare_pair(
                a, b, rounds)
    return out


def contradictions(x: dict, y: dict) -> list[str]:
    out = []
    for key in sorted(set(x) & set(y)):
        a, b = x[key], y[key]
        if a.confident and b.confident and a.fast["framework"] != b.fast["framework"]:
            out.append(f"{key[0]} {key[1]}: {display(a.fast['framework'])} ahead of "
                       f"{display(a.slow['framework'])} by {a.speedup:.1%} in one, "
                       f"{display(b.fast['framework'])} by {b.speedup:.1%} in the other")
    return out


def overlap_share(x: Path, y: Path, repeat_intervals: bool = False
                  ) -> tuple[int, int, list[str], str]:
    """Configurations whose 95% intervals in x and y overlap. With `repeat_intervals`,
    the intervals are widened by the host's drift estimated without both sweeps."""
    def rows(db: Path) -> dict[tuple, dict]:
        # by what is measured, not config_hash: the fixed schedule runs 5 steps per trial
        with Store(db, readonly=True) as s:
            return {(r["framework"], r["model"], r["mode"], r["batch_size"], r["image_size"]): r
                    for r in s.runs("WHERE status = 'ok'")}

    a, b = rows(x), rows(y)
    both = sorted(set(a) & set(b))
    apart = []
    drift, how = None, "within-sweep intervals"
    if repeat_intervals:
        drifts = repeat.drifts_for(list(a.values()) + list(b.values()))
        drift = next(iter(drifts.values()), None) if len(drifts) == 1 else None
        how = drift.text() if drift else "no drift estimate (history has no other sweeps)"
    nan = (float("nan"), float("nan"))
    for k in both:
        if repeat_intervals:
            ia, ib = repeat.interval(a[k], drift) or nan, repeat.interval(b[k], drift) or nan
        else:
            ia = (a[k]["images_per_s_low"] or nan[0], a[k]["images_per_s_high"] or nan[0])
            ib = (b[k]["images_per_s_low"] or nan[0], b[k]["images_per_s_high"] or nan[0])
        if not intervals_overlap(ia, ib):
            apart.append(f"{a[k]['framework']} {a[k]['model']} {a[k]['mode']}: "
                         f"[{ia[0]:.1f}, {ia[1]:.1f}] vs [{ib[0]:.1f}, {ib[1]:.1f}]")
    return len(both) - len(apart), len(both), apart, how


def evaluate(dbs: list[Path], history: Path) -> dict:
    """Leave-two-out calibration over stored sweeps (see the module docstring)."""
    import os

    history.unlink(missing_ok=True)
    with repeat.History(history) as h:
        for db in dbs:
            h.add_database(db)
    os.environ["DNNBENCH_HISTORY"] = str(history)
    pairs = []
    for x, y in itertools.combinations(dbs, 2):
        agree, n, apart, how = overlap_share(x, y, True)
        agree_w, _, _, _ = overlap_share(x, y)
        pairs.append({"a": str(x), "b": str(y), "repeat_overlap": agree, "within_overlap":
                      agree_w, "configurations": n, "drift": how, "apart": apart})
    total = sum(p["configurations"] for p in pairs)
    return {"pairs": pairs, "configurations": total,
            "repeat_overlap": sum(p["repeat_overlap"] for p in pairs),
            "within_overlap": sum(p["within_overlap"] for p in pairs)}


def drift(x: Path, y: Path) -> dict[str, float]:
    """images/s of the second database over the first, per configuration: how much the
    machine itself moved between the sweeps."""
    def rows(db: Path) -> dict[tuple, float]:
        with Store(db, readonly=True) as s:
            return {(r["framework"], r["model"], r["mode"]): r["images_per_s"]
                    for r in s.runs("WHERE status = 'ok'")}

    a, b = rows(x), rows(y)
    return {" ".join(k): round(b[k] / a[k], 3) for k in sorted(set(a) & set(b))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "results" / "repeatability"))
    ap.add_argument("--skip-fixed", action="store_true", help="no time reference sweep")
    ap.add_argument("--evaluate", nargs="+", metavar="DB", type=Path,
                    help="measure nothing: leave-two-out calibration over these sweeps")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.evaluate:
        result = evaluate(a.evaluate, out / "evaluate-history.db")
        for p in result["pairs"]:
            print(f"{p['a']} vs {p['b']}: repeat {p['repeat_overlap']}/{p['configurations']}, "
                  f"within {p['within_overlap']}/{p['configurations']} ({p['drift']})")
        n = result["configurations"]
        print(f"repeat 95% intervals overlapping their repeat: {result['repeat_overlap']}/{n} "
              f"({result['repeat_overlap'] / n:.1%}; target >= 95%); within-sweep intervals: "
              f"{result['within_overlap']}/{n} ({result['within_overlap'] / n:.1%})")
        (out / "evaluate.json").write_text(json.dumps(result, indent=1))
        return 0
    times = {}
    for name, extra in SCHEDULES.items():
        if name == "fixed" and a.skip_fixed:
            continue
        times[name] = sweep(name, extra, out)
        print(f"sweep {name}: {times[name]:.0f} s", flush=True)
    first, second = all_verdicts(out / "first.db"), all_verdicts(out / "second.db")
    result = {
        "times_s": times,
        "confident": {"first": sum(v.confident for v in first.values()),
                      "second": sum(v.confident for v in second.values()),
                      "pairs": len(first)},
        "contradictions": contradictions(first, second)}
    agree, n, apart, how = overlap_share(out / "first.db", out / "second.db", True)
    result["repeat_intervals_overlap"] = {"overlapping": agree, "configurations": n,
                                          "apart": apart, "drift": how}
    agree_w, n_w, apart_w, _ = overlap_share(out / "first.db", out / "second.db")
    result["within_intervals_overlap"] = {"overlapping": agree_w, "configurations": n_w,
                                          "apart": apart_w}
    result["second_over_first"] = drift(out / "first.db", out / "second.db")
    if "fixed" in times:
        fixed = all_verdicts(out / "fixed.db")
        result["contradictions_fixed_vs_first"] = contradictions(fixed, first)
        result["time_ratio_default_over_fixed"] = (times["first"] + times["second"]) / 2 / \
            times["fixed"]
        agree_f, n_f, _, _ = overlap_share(out / "fixed.db", out / "first.db")
        result["intervals_overlap_fixed_vs_first"] = {"overlapping": agree_f,
                                                      "configurations": n_f}
    (out / "repeatability.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    print(f"contradictory confident statements, first vs second: "
          f"{len(result['contradictions'])} (target 0)")
    print(f"configurations whose repeat 95% intervals overlap their repeat: {agree}/{n} "
          f"(target >= 95%; {how})")
    print(f"  within-sweep intervals only, for reference: {agree_w}/{n_w}")
    if "fixed" in times:
        print(f"default schedule time / fixed 6x5 time: "
              f"{result['time_ratio_default_over_fixed']:.2f} (target <= 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
