"""Whether an asynchronous run's ranks kept one pace: the assumption its step rests on.

The model's asynchronous parameter-server step (psstep, `sync=False`) lets no worker
begin a step before every other has begun the one before (psstep.ASYNC_LEAD), because the
measured ranks of MXNet's dist_async runs kept one pace where workers simulated at their
own pace did not (worker 0, beside server 0, ran up to 2.9x faster than the slowest). The
held-out table checks it on every asynchronous run it reads, as it checks the model's
bytes per host (traffic.py): each rank's timed iterations summed, the slowest rank's
against the fastest's. The widest of the 42 multi-host dist_async runs of
scaling-emulated-ps-async (seven repeats, 2026-12-03 to -05) was 1.11x; past
`ONE_PACE` a rank ran ahead of the others and the model's step does not describe the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from frameworks.plan import hosts_label
from harness.perfmodel.validate import asynchronous
from harness.store import Store

#: the slowest rank's summed step times over the fastest's beyond which the ranks did not
#: keep one pace (measured: 1.00-1.11x on every multi-host dist_async run shipped)
ONE_PACE = 1.15


@dataclass(frozen=True)
class Pace:
    label: str
    run_id: str
    #: each rank's timed iterations, summed: the slowest rank's over the fastest's
    spread: float
    slowest: int
    fastest: int

    @property
    def ok(self) -> bool:
        return self.spread <= ONE_PACE


def check(store: Store, r: dict) -> Pace | None:
    """The ranks' spread of an asynchronous run the model covers with more than one
    worker; None for any other run, or one that stored no iterations."""
    if not asynchronous(r) or r["workers"] < 2:
        return None
    per_rank = {k: v for k, v in store.rank_seconds(r["run_id"]).items() if v}
    if len(per_rank) < 2:
        return None
    slowest, fastest = max(per_rank, key=per_rank.get), min(per_rank, key=per_rank.get)
    return Pace(hosts_label(r), r["run_id"], per_rank[slowest] / per_rank[fastest], slowest,
                fastest)


def table(rows: list[Pace]) -> str:
    """One line per run: how far apart its ranks ran, against the model's one pace."""
    lines = ["asynchronous ranks (the model holds every worker to one pace: the slowest "
             "rank's summed step times over the fastest's; above "
             f"{ONE_PACE:.2f}x the run's ranks did not keep one):"]
    for p in rows:
        lines.append(f"  {p.label:<50} {p.spread:.3f}x (rank {p.slowest} slowest, rank "
                     f"{p.fastest} fastest): "
                     + ("one pace" if p.ok else "NOT ONE PACE: the model's step does not "
                        "describe this run"))
    return "\n".join(lines)
