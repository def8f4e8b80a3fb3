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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import shipped  # noqa: E402
from harness.perfmodel import workercost  # noqa: E402


def checks_of(db: Path) -> list[workercost.Check]:
    """The held-out worker checks of one database, read from a copy of it."""
    return workercost.held_out(shipped.runs_of(db))


def _line(name: str, cs: list[workercost.Check]) -> str:
    s = workercost.summary(cs)
    return (f"{name:<58} {s['n']:>4}  {s['constant']:>6.1%} ({s['constant_bias']:+6.1%})  "
            f"{s['with_wire']:>6.1%} ({s['with_wire_bias']:+6.1%})")


def main(argv: list[str] | None = None) -> int:
    ap = shipped.parser(__doc__)
    args = ap.parse_args(argv)
    dbs = shipped.databases(ap, args.db, "a parameter-server sweep on emulated hosts")
    return shipped.report_by_kind(
        ap, dbs, checks_of, _line,
        f"{'sweep (workers of each run with > 2 workers)':<58} {'runs':>4}  "
        f"{'small runs: median |error| (bias)':>33}  {'with the wire':>15}",
        "all {kind} servers' workers",
        "no parameter-server run with workers' telemetry at both scales (<= 2 workers and "
        "more, whose bytes across the link differ)")


if __name__ == "__main__":
    sys.exit(main())
