"""The emulated scaling sweeps and the model's held-out check (`python -m bench.holdout`,
`make bench-scaling`; issue #17).

Each experiment runs on emulated hosts with a fixed CPU share each (resuming whatever its
database already holds: a rerun measures only what is missing), then the performance
model is fitted on the runs with at most 2 workers and predicts every run with 4 and 8.
Reported per experiment: the sweep's wall time, the held-out table and each strategy's
median and worst |error| against the targets (10% and 25%). The targets are stated and
reported, not asserted: the machine is shared and noisy. Needs root (namespaces,
cgroups); about 17 + 28 + 10 minutes on 2 cores (the third, MXNet's Horovod, needs its
environment built with Horovod: `dnnbench env setup mxnet`, which `make bench-scaling`
does). Also reported: every run's bytes per host, the model's against the emulated hosts'
counters (harness/perfmodel/traffic.py).

    python -m bench.holdout [--experiments A.toml,B.toml] [--results DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import write_json  # noqa: E402
from harness.experiment import load  # noqa: E402
from harness.perfmodel import holdout  # noqa: E402
from harness.store import Store  # noqa: E402

EXPERIMENTS = ("experiments/scaling-emulated.toml,experiments/cori2017-emulated.toml,"
               "experiments/scaling-emulated-horovod.toml")


def measure(experiment: Path, db: Path) -> float:
    """Run (or resume) one sweep, its progress on this terminal; its wall time in s."""
    t0 = time.monotonic()
    exe = Path(sys.executable).parent / "dnnbench"
    proc = subprocess.run([str(exe), "run", "--experiment", str(experiment), "--db", str(db)],
                          cwd=REPO)
    if proc.returncode:
        raise SystemExit(f"bench.holdout: the sweep {experiment} failed (exit "
                         f"{proc.returncode}); its finished runs are kept in {db}")
    return time.monotonic() - t0


def check(db: Path, name: str) -> dict:
    """The held-out validation of one sweep's database, as printed and as JSON."""
    with Store(str(db)) as store:
        result = holdout.validate(store, name)
    print(holdout.table(result))
    return {"by_strategy": result.by_strategy(), "links": result.links,
            "servers": result.servers, "skipped": result.skipped,
            "rows": [{"configuration": r.label, "strategy": r.strategy, "workers": r.workers,
                      "measured_s": r.measured, "predicted_s": r.predicted,
                      "error": r.error, "fitted_from": r.fitted_from} for r in result.rows],
            "traffic": [{"run": t.label, "steps": t.steps, "modelled": t.modelled,
                         "counted": t.measured, "ok": t.ok} for t in result.traffic]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiments", default=EXPERIMENTS,
                    help=f"comma-separated experiment files (default: {EXPERIMENTS})")
    ap.add_argument("--results", default=str(REPO / "results"),
                    help="folder of the sweeps' databases, one per experiment, named after "
                         "it (default: results/)")
    ap.add_argument("--out", default=str(REPO / "results" / "bench-holdout.json"))
    a = ap.parse_args()
    report = []
    for item in [x.strip() for x in a.experiments.split(",") if x.strip()]:
        path = Path(item) if Path(item).is_absolute() else REPO / item
        name = load(path).name
        db = Path(a.results) / f"{name}.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        wall = measure(path, db)
        print(f"\n== {name}: sweep {wall / 60:.1f} min (resumed runs cost nothing), {db}")
        try:
            report.append({"experiment": name, "db": str(db), "wall_s": round(wall, 1),
                           **check(db, name)})
        except holdout.HoldoutError as exc:
            print(f"held-out validation impossible: {exc}")
            report.append({"experiment": name, "db": str(db), "wall_s": round(wall, 1),
                           "error": str(exc)})
    write_json(a.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
