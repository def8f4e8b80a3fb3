"""Does a cost per byte a worker moves across the link predict the parameter-server workers'
CPU at scale better than their small runs' CPU alone? (`python -m bench.worker_wire`;
issue #17).

For every stored sweep with workers' telemetry on emulated hosts (default: every database
shipped under experiments/measured/), fits each family's workers on its runs with at most
2 workers (harness/perfmodel/workercost.py: an intercept per configuration, and a cost per
byte pushed to or pulled from servers on other hosts), and predicts the workers' mean CPU
per step of each run with more workers both ways: the small runs' mean (what the model
keeps at every scale) and with the term. Prints each sweep's median |error| and median
signed error each way, then the totals for synchronous and asynchronous servers. Measures
nothing (seconds); the databases are copied first.

    python -m bench.worker_wire [--db A.db --db B.db ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.perfmodel import workercost  # noqa: E402
from harness.store import Store  # noqa: E402

SHIPPED = REPO / "experiments" / "measured"


def checks_of(db: Path) -> list[workercost.Check]:
    """The held-out worker checks of one database, read from a copy of it."""
    with tempfile.TemporaryDirectory(prefix="dnnbench-worker-wire-") as tmp:
        copy = Path(shutil.copy(db, Path(tmp) / db.name))
        with Store(copy, readonly=True) as st:
            return workercost.held_out(st.runs())


def _line(name: str, cs: list[workercost.Check]) -> str:
    s = workercost.summary(cs)
    return (f"{name:<58} {s['n']:>4}  {s['constant']:>6.1%} ({s['constant_bias']:+6.1%})  "
            f"{s['with_wire']:>6.1%} ({s['with_wire_bias']:+6.1%})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", action="append", default=[],
                    help="read these databases (default: every one shipped under "
                         "experiments/measured/)")
    args = ap.parse_args(argv)
    dbs = [Path(d) for d in args.db] or sorted(SHIPPED.glob("*/*.db"))
    for db in dbs:
        if not db.is_file():
            ap.error(f"--db {db}: no such file (give a results database of a "
                     "parameter-server sweep on emulated hosts)")
    print(f"{'sweep (workers of each run with > 2 workers)':<58} {'runs':>4}  "
          f"{'small runs: median |error| (bias)':>33}  {'with the wire':>15}")
    by_kind: dict[str, list[workercost.Check]] = {"synchronous": [], "asynchronous": []}
    for db in dbs:
        cs = checks_of(db)
        for kind in by_kind:
            mine = [c for c in cs if c.family[2] == (kind == "asynchronous")]
            if mine:
                by_kind[kind] += mine
                print(_line(f"{db.parent.name}/{db.name} {kind}", mine))
    if not any(by_kind.values()):
        ap.error("no parameter-server run with workers' telemetry at both scales (<= 2 "
                 "workers and more, whose bytes across the link differ) in "
                 + ", ".join(map(str, dbs)))
    print()
    for kind, cs in by_kind.items():
        if cs:
            print(_line(f"all {kind} servers' workers", cs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
