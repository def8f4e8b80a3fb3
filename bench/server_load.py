"""What a parameter server's CPU per client depends on (`python -m bench.server_load`;
issue #17).

Measures experiments/server-load-own.toml (one MXNet server on a host of its own, 1, 2,
3, 4, 6 and 8 clients, every host at 0.15 CPU) `--repeats` times, one sweep after the
other, into a database each, then prints each network's server load per step against its
clients, the medians over the repeats (harness/serverload.py): core-seconds per step and
per client, wake-ups (voluntary context switches) and preemptions per client, the share
of its CFS periods the server's host ran out of quota in, and the line a model fitted on
1 and 2 clients draws against the line through 2 to 8. Needs root; about 21 minutes per
repeat on 2 cores. `--db A.db --db B.db ...` measures nothing and reads those.

    python -m bench.server_load [--repeats N] [--results DIR] | [--db A.db ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.holdout import measure  # noqa: E402
from harness import serverload  # noqa: E402
from harness.store import Store  # noqa: E402

EXPERIMENT = REPO / "experiments" / "server-load-own.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="sweeps, one after the other (3)")
    ap.add_argument("--results", default="results/server-load",
                    help="folder of the repeats' databases (r1.db, r2.db, ...)")
    ap.add_argument("--db", action="append", default=[],
                    help="read these databases (one per repeat) instead of measuring")
    args = ap.parse_args(argv)
    dbs = [Path(d) for d in args.db]
    if not dbs:
        if args.repeats < 1:
            ap.error(f"--repeats {args.repeats}: give 1 or more")
        for i in range(1, args.repeats + 1):
            dbs.append(Path(args.results) / f"r{i}.db")
            dbs[-1].parent.mkdir(parents=True, exist_ok=True)
            wall = measure(EXPERIMENT, dbs[-1])
            print(f"repeat {i}: {wall / 60:.1f} min")
    runs = []
    for db in dbs:
        if not db.is_file():
            ap.error(f"--db {db}: no such file (give a results database of "
                     f"{EXPERIMENT.name}, or measure with --repeats)")
        with Store(db, readonly=True) as st:
            runs.append(st.runs())
    curves = serverload.curves(runs)
    if not curves:
        ap.error(f"no parameter-server run with telemetry in {', '.join(map(str, dbs))} "
                 f"(give results databases of {EXPERIMENT.name} or another ps-sync sweep)")
    print(serverload.table(curves))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
