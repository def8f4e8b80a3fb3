"""Does a cost per request predict the parameter servers' CPU at scale better than a cost
per byte alone? (`python -m bench.server_requests`; issue #17).

For every stored sweep with servers' telemetry (default: every database shipped under
experiments/measured/), fits each family's server cost on its runs with at most 2 workers
twice, per byte alone and with a term per request (harness/perfmodel/servercost.py), and
predicts the busiest server's CPU per step of each run with more workers. Prints each
sweep's median |error| and median signed error each way, then the totals for synchronous
and asynchronous servers. Measures nothing (a few seconds); the databases are copied
first, so the shipped files are never opened for writing.

    python -m bench.server_requests [--db A.db --db B.db ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.perfmodel import servercost  # noqa: E402
from harness.store import Store  # noqa: E402

SHIPPED = REPO / "experiments" / "measured"


def checks_of(db: Path) -> list[servercost.Check]:
    """The held-out server checks of one database, read from a copy of it."""
    with tempfile.TemporaryDirectory(prefix="dnnbench-server-requests-") as tmp:
        copy = Path(shutil.copy(db, Path(tmp) / db.name))
        with Store(copy, readonly=True) as st:
            return servercost.held_out(st.runs())


def _line(name: str, cs: list[servercost.Check]) -> str:
    s = servercost.summary(cs)
    return (f"{name:<58} {s['n']:>4}  {s['by_bytes']:>6.1%} ({s['by_bytes_bias']:+6.1%})  "
            f"{s['with_requests']:>6.1%} ({s['with_requests_bias']:+6.1%})")


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
                     "parameter-server sweep with servers' telemetry)")
    print(f"{'sweep (busiest server of each run with > 2 workers)':<58} {'runs':>4}  "
          f"{'per byte: median |error| (bias)':>31}  {'with requests':>15}")
    by_kind: dict[str, list[servercost.Check]] = {"synchronous": [], "asynchronous": []}
    for db in dbs:
        cs = checks_of(db)
        for kind in by_kind:
            mine = [c for c in cs if c.family[2] == (kind == "asynchronous")]
            if mine:
                by_kind[kind] += mine
                print(_line(f"{db.parent.name}/{db.name} {kind}", mine))
    if not any(by_kind.values()):
        ap.error("no parameter-server run with servers' telemetry at both scales (<= 2 "
                 f"workers and more) in {', '.join(map(str, dbs))}")
    print()
    for kind, cs in by_kind.items():
        if cs:
            print(_line(f"all {kind} servers", cs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
