"""Which term of rank 0's host's CPU the held-out model misses, and which way (`python -m
bench.host_cpu`; issue #17).

A parameter-server step on emulated hosts is mostly rank 0's host's CPU over its quota: its
worker's and its servers' (harness/perfmodel/hostcpu.py). For every stored sweep (default:
every database shipped under experiments/measured/, each repeat alone) the held-out
validation is run each way (the model's default; `--server-requests`; `--worker-wire`;
both), and each held-out row's host is split into its worker's and its servers' core-
seconds per step, measured against modelled. Prints, per sweep, strategy and way, the
median signed error (and median |error|) of the worker's term, the servers' and the step,
then the totals over every sweep. Measures nothing (about 7 minutes here: one held-out
validation per sweep and way); the databases are copied first, so the shipped files are
never opened for writing.

    python -m bench.host_cpu [--db A.db ...] [--way default --way requests ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import shipped  # noqa: E402
from harness.perfmodel import holdout  # noqa: E402
from harness.stats import median  # noqa: E402
from harness.store import Store  # noqa: E402

#: each way's holdout.validate options
WAYS = {"default": {}, "requests": {"requests": True}, "wire": {"worker_wire": True},
        "both": {"requests": True, "worker_wire": True}}


def rows_of(db: Path, way: str) -> list[holdout.HeldOut]:
    """The held-out rows with a host split of one database, validated `way` on a copy of
    it; none where it cannot be validated (no runs at both scales)."""
    with shipped.copy_of(db) as copy, Store(copy, readonly=True) as st:
        try:
            res = holdout.validate(st, **WAYS[way])
        except holdout.HoldoutError:
            return []
    return [r for r in res.rows if r.host_cpu is not None]


def errors(rows: list[holdout.HeldOut]) -> dict[str, tuple[float, float] | None]:
    """Median signed and median absolute error of the worker's term, the servers' (None:
    no server beside rank 0) and the step."""
    hosts = [r.host_cpu for r in rows if r.host_cpu is not None]
    servers = [e for e in (h.servers_error() for h in hosts) if e is not None]

    def both(errs: list[float]) -> tuple[float, float] | None:
        return (median(errs), median([abs(e) for e in errs])) if errs else None

    return {"worker": both([h.worker_error() for h in hosts]), "servers": both(servers),
            "step": both([r.error for r in rows])}


def _line(name: str, rows: list[holdout.HeldOut]) -> str:
    cells = [f"{v[0]:>+7.1%} ({v[1]:>5.1%})" if v else f"{'-':>15}" for v in errors(rows).values()]
    return f"{name:<60} {len(rows):>4}  " + "  ".join(cells)


def main(argv: list[str] | None = None) -> int:
    ap = shipped.parser(__doc__)
    ap.add_argument("--way", action="append", choices=sorted(WAYS),
                    help="validate this way (repeatable; default: all four): default, "
                         "requests (--server-requests), wire (--worker-wire), both")
    args = ap.parse_args(argv)
    dbs = shipped.databases(ap, args.db, "a parameter-server sweep on emulated hosts")
    ways = args.way or list(WAYS)
    print(f"{'sweep, strategy, way (rank 0 host of each held-out row)':<60} {'rows':>4}  "
          f"{'worker':>15}  {'servers':>15}  {'step':>15}   (median error (median |error|))",
          flush=True)
    total: dict[tuple[str, str], list[holdout.HeldOut]] = {}
    for db in dbs:
        for way in ways:
            rows = rows_of(db, way)
            for s in sorted({r.strategy for r in rows}):
                mine = [r for r in rows if r.strategy == s]
                total.setdefault((s, way), []).extend(mine)
                print(_line(f"{db.parent.name}/{db.name} {s} {way}", mine), flush=True)
    if not total:
        ap.error("no held-out parameter-server row with per-process telemetry in "
                 + ", ".join(map(str, dbs)))
    print()
    for (s, way), rows in sorted(total.items()):
        print(_line(f"all sweeps {s} {way}", rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
