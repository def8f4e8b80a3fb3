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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import shipped  # noqa: E402
from harness.perfmodel import servercost  # noqa: E402


def checks_of(db: Path) -> list[servercost.Check]:
    """The held-out server checks of one database, read from a copy of it."""
    return servercost.held_out(shipped.runs_of(db))


def _line(name: str, cs: list[servercost.Check]) -> str:
    s = servercost.summary(cs)
    return (f"{name:<58} {s['n']:>4}  {s['by_bytes']:>6.1%} ({s['by_bytes_bias']:+6.1%})  "
            f"{s['with_requests']:>6.1%} ({s['with_requests_bias']:+6.1%})")


def main(argv: list[str] | None = None) -> int:
    ap = shipped.parser(__doc__)
    args = ap.parse_args(argv)
    dbs = shipped.databases(ap, args.db, "a parameter-server sweep with servers' telemetry")
    return shipped.report_by_kind(
        ap, dbs, checks_of, _line,
        f"{'sweep (busiest server of each run with > 2 workers)':<58} {'runs':>4}  "
        f"{'per byte: median |error| (bias)':>31}  {'with requests':>15}",
        "all {kind} servers",
        "no parameter-server run with servers' telemetry at both scales (<= 2 workers and "
        "more)")


if __name__ == "__main__":
    sys.exit(main())
