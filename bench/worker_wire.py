"""Does a cost per byte a worker moves across the link predict the parameter-server workers'
CPU at scale better than their small runs' CPU alone? (`python -m bench.worker_wire`;
issue #17).

For every stored sweep with workers' telemetry on emulated hosts (default: every database
shipped under experiments/measured/), fits each family's workers on its runs with at most
2 workers (harness/perfmodel/workercost.py: an intercept per configuration, and a cost per
byte pushed to or pulled from servers on other hosts), and predicts the workers' mean CPU
per step of each run with more workers both ways: the small runs' mean (what the model
keeps at every scale) and with the term; and, where the runs' telemetry has the machine's
softirq time, with the packet work of every host on the cores charged to whoever runs
(harness/perfmodel/packetwork.py): the wire's prediction times 1 + the run's softirq
share minus its small runs', the share as measured ("+ packet work") and with the
softirq cores fitted on the small runs from the bytes per second across the link ("+
fitted packets"; both take the run's measured t_iter and busy cores, so they say what
the CPU per step is given the step, not the step), and the median rise of that share
from the small runs to the larger ones ("share rise", points of the busy cores). Prints
each sweep's median |error| and median signed error each way, then the totals for
synchronous and asynchronous servers.
Measures nothing (seconds); the databases are copied first.

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


def _way(s: dict, way: str) -> str:
    if s[way] is None:
        return f"{'-':>16}"
    return f"{s[way]:>6.1%} ({s[f'{way}_bias']:+6.1%})"


def _line(name: str, cs: list[workercost.Check]) -> str:
    s = workercost.summary(cs)
    return (f"{name:<58} {s['n']:>4}  {_way(s, 'constant'):>33}  {_way(s, 'with_wire'):>16}"
            f"  {s['n_packets']:>4}  {_way(s, 'wire_on_packets'):>16}  "
            f"{_way(s, 'with_packets'):>16}  "
            f"{_way(s, 'with_packets_fitted'):>16}  {_points(s['share_rise']):>11}")


def _points(rise: float | None) -> str:
    return "-" if rise is None else f"{100 * rise:+.1f} pts"


def main(argv: list[str] | None = None) -> int:
    ap = shipped.parser(__doc__)
    args = ap.parse_args(argv)
    dbs = shipped.databases(ap, args.db, "a parameter-server sweep on emulated hosts")
    return shipped.report_by_kind(
        ap, dbs, checks_of, _line,
        f"{'sweep (workers of each run with > 2 workers)':<58} {'runs':>4}  "
        f"{'small runs: median |error| (bias)':>33}  {'with the wire':>16}  "
        f"{'runs':>4}  {'the wire on them':>16}  {'+ packet work':>16}  "
        f"{'+ fitted packets':>16}  {'share rise':>11}",
        "all {kind} servers' workers",
        "no parameter-server run with workers' telemetry at both scales (<= 2 workers and "
        "more, whose bytes across the link differ)")


if __name__ == "__main__":
    sys.exit(main())
