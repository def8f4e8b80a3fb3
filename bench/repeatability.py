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
    overlap (target >= 95%);
  - time: each sweep's wall time; the default's against `fixed` (target: no slower).
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

from harness import verdicts  # noqa: E402
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
    with Store(db) as store:
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


def overlap_share(x: Path, y: Path) -> tuple[int, int, list[str]]:
    def rows(db: Path) -> dict[tuple, dict]:
        # by what is measured, not config_hash: the fixed schedule runs 5 steps per trial
        with Store(db) as s:
            return {(r["framework"], r["model"], r["mode"], r["batch_size"], r["image_size"]): r
                    for r in s.runs("WHERE status = 'ok'")}

    a, b = rows(x), rows(y)
    both = sorted(set(a) & set(b))
    apart = []
    for k in both:
        ia = (a[k]["images_per_s_low"] or float("nan"), a[k]["images_per_s_high"] or float("nan"))
        ib = (b[k]["images_per_s_low"] or float("nan"), b[k]["images_per_s_high"] or float("nan"))
        if not intervals_overlap(ia, ib):
            apart.append(f"{a[k]['framework']} {a[k]['model']} {a[k]['mode']}: "
                         f"[{ia[0]:.1f}, {ia[1]:.1f}] vs [{ib[0]:.1f}, {ib[1]:.1f}]")
    return len(both) - len(apart), len(both), apart


def drift(x: Path, y: Path) -> dict[str, float]:
    """images/s of the second database over the first, per configuration: how much the
    machine itself moved between the sweeps."""
    def rows(db: Path) -> dict[tuple, float]:
        with Store(db) as s:
            return {(r["framework"], r["model"], r["mode"]): r["images_per_s"]
                    for r in s.runs("WHERE status = 'ok'")}

    a, b = rows(x), rows(y)
    return {" ".join(k): round(b[k] / a[k], 3) for k in sorted(set(a) & set(b))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(REPO / "results" / "repeatability"))
    ap.add_argument("--skip-fixed", action="store_true", help="no time reference sweep")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
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
    agree, n, apart = overlap_share(out / "first.db", out / "second.db")
    result["intervals_overlap"] = {"overlapping": agree, "configurations": n,
                                   "apart": apart}
    result["second_over_first"] = drift(out / "first.db", out / "second.db")
    if "fixed" in times:
        fixed = all_verdicts(out / "fixed.db")
        result["contradictions_fixed_vs_first"] = contradictions(fixed, first)
        result["time_ratio_default_over_fixed"] = (times["first"] + times["second"]) / 2 / \
            times["fixed"]
        agree_f, n_f, _ = overlap_share(out / "fixed.db", out / "first.db")
        result["intervals_overlap_fixed_vs_first"] = {"overlapping": agree_f,
                                                      "configurations": n_f}
    (out / "repeatability.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    print(f"contradictory confident statements, first vs second: "
          f"{len(result['contradictions'])} (target 0)")
    print(f"configurations whose 95% intervals overlap their repeat: {agree}/{n} "
          f"(target >= 95%)")
    if "fixed" in times:
        print(f"default schedule time / fixed 6x5 time: "
              f"{result['time_ratio_default_over_fixed']:.2f} (target <= 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
