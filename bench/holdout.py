"""The emulated scaling sweeps and the model's held-out check (`python -m bench.holdout`,
`make bench-scaling`; issue #17).

Each experiment runs on emulated hosts with a fixed CPU share each (resuming whatever its
database already holds: a rerun measures only what is missing), then the performance
model is fitted on the runs with at most 2 workers and predicts every run with 4 and 8.
Reported per experiment: the sweep's wall time, the held-out table and each strategy's
median and worst |error| against the targets (10% and 25%). The targets are stated and
reported, not asserted: the machine is shared and noisy. Needs root (namespaces,
cgroups); about 17 + 28 + 10 + 6 + 6 + 10 minutes on 2 cores (the third, MXNet's
Horovod, needs its environment built with Horovod: `dnnbench env setup mxnet`, which
`make bench-scaling` does; the fourth, TensorFlow's and JAX's allreduce, their
environments; the fifth is HEP-CNN with PyTorch DDP and Horovod, the sixth with MXNet's
and TensorFlow's Horovod, their environments built with it).
Also reported: every run's bytes per host, the model's against the emulated hosts'
counters (harness/perfmodel/traffic.py).

With `--repeats N` each experiment is measured N times, one after the other, into a
database each (`<name>.db`, `<name>-r2.db`, ...), and judged over the repeats
(harness/perfmodel/holdout_repeats.py): each repeat's own held-out verdict, each
held-out configuration's measured spread, and the verdict on the median sweep (each
configuration from its median repeat). One sweep's verdict on this shared machine is one
draw: cori2017-emulated passed once and failed its repeat (README, "Performance model").

    python -m bench.holdout [--experiments A.toml,B.toml] [--repeats N] [--results DIR]
                            [--out FILE]
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
from harness.perfmodel import holdout, holdout_repeats  # noqa: E402
from harness.store import Store  # noqa: E402

EXPERIMENTS = ("experiments/scaling-emulated.toml,experiments/cori2017-emulated.toml,"
               "experiments/scaling-emulated-horovod.toml,"
               "experiments/scaling-emulated-tf-jax-hepcnn.toml,"
               "experiments/scaling-emulated-hepcnn-torch.toml,"
               "experiments/scaling-emulated-hepcnn-horovod.toml")


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


def _json(result: holdout.Result) -> dict:
    return {"by_strategy": result.by_strategy(), "links": result.links,
            "servers": result.servers, "skipped": result.skipped,
            "replicated": result.replicated,
            "rows": [{"configuration": r.label, "strategy": r.strategy, "workers": r.workers,
                      "measured_s": r.measured, "predicted_s": r.predicted,
                      "error": r.error, "fitted_from": r.fitted_from} for r in result.rows],
            "traffic": [{"run": t.label, "steps": t.steps, "modelled": t.modelled,
                         "counted": t.measured, "ok": t.ok} for t in result.traffic]}


def check(dbs: list[Path], name: str) -> dict:
    """The held-out validation of one sweep's database, or over several repeats' (each
    repeat's and the median sweep's), as printed and as JSON."""
    if len(dbs) == 1:
        with Store(dbs[0], readonly=True) as store:
            result = holdout.validate(store, name)
        print(holdout.table(result))
        return _json(result)
    rep = holdout_repeats.validate(dbs, name)
    print(holdout_repeats.table(rep))
    return {**_json(rep.median),
            "repeats": [{"db": str(p), **({"error": r} if isinstance(r, str) else
                                          {"by_strategy": r.by_strategy(),
                                           "traffic_ok": [sum(t.ok for t in r.traffic),
                                                          len(r.traffic)]})}
                        for p, r in zip(dbs, rep.each)],
            "spread": {f"{e}/{c}": ts for (e, c), ts in rep.sweep.t_iter.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiments", default=EXPERIMENTS,
                    help=f"comma-separated experiment files (default: {EXPERIMENTS})")
    ap.add_argument("--results", default=str(REPO / "results"),
                    help="folder of the sweeps' databases, one per experiment, named after "
                         "it (default: results/)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="measure each experiment this many times, a database each, and "
                         "judge the model over the repeats (default 1)")
    ap.add_argument("--out", help="the JSON summary (default: bench-holdout.json in "
                                  "--results, beside the databases it judges)")
    a = ap.parse_args()
    if not 1 <= a.repeats <= 20:
        ap.error(f"--repeats {a.repeats}: give 1 to 20 (3 gives a median that one disturbed "
                 "repeat cannot move)")
    report = []
    for item in [x.strip() for x in a.experiments.split(",") if x.strip()]:
        path = Path(item) if Path(item).is_absolute() else REPO / item
        name = load(path).name
        dbs = [Path(a.results) / (f"{name}.db" if k == 1 else f"{name}-r{k}.db")
               for k in range(1, a.repeats + 1)]
        dbs[0].parent.mkdir(parents=True, exist_ok=True)
        walls = []
        for k, db in enumerate(dbs, 1):
            walls.append(measure(path, db))
            print(f"\n== {name}: repeat {k} of {len(dbs)}: sweep {walls[-1] / 60:.1f} min "
                  f"(resumed runs cost nothing), {db}")
        entry = {"experiment": name, "db": [str(d) for d in dbs],
                 "wall_s": [round(w, 1) for w in walls]}
        try:
            report.append({**entry, **check(dbs, name)})
        except holdout.HoldoutError as exc:
            print(f"held-out validation impossible: {exc}")
            report.append({**entry, "error": str(exc)})
    write_json(a.out or str(Path(a.results) / "bench-holdout.json"), report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
