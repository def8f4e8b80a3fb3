"""Does a parameter server's CPU follow its requests at fixed bytes? (`python -m
bench.server_pieces`; issue #17, item 3).

The request term of the servers' cost (harness/perfmodel/servercost.py) was found from
two servers holding different pieces per byte by chance (MXNet's key hash). This reads a
sweep that moves the pieces on purpose (experiments/ps-pieces-emulated.toml): MXNet's
split bound (`ps_split_bound`) puts GoogLeNet's 22.4 MB on two servers as 16.9 MB in 86
pieces and 5.5 MB in 87 (the default), 11.2 MB in 116 and 115 (1000), or 11.2 MB in 173
each (1). For each strategy and worker count it prints every bound's servers (bytes,
pieces, measured CPU per step, on each configuration's median replicate), then the
ratios a cost per byte says are 1 and a cost per request says are not; then the held-out
fit each way (fitted on the sweep's <= 2-worker runs, the busiest server of each larger
run predicted). Measures nothing (a second); the database is read from a copy.

    python -m bench.server_pieces [--db RESULTS.db ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import replicates  # noqa: E402
from harness.perfmodel import servercost  # noqa: E402
from harness.store import Store  # noqa: E402

#: where the sweeps of experiments/ps-pieces-emulated.toml are shipped: a folder per
#: machine (ps-pieces-emulated-repeats/ the AMD VM's r1-r2, ps-pieces-emulated-intel/ r3-r4)
MEASURED = REPO / "experiments" / "measured"
SHIPPED_GLOB = "ps-pieces-emulated-*/r*.db"
#: the bounds the experiment compares: MXNet's default (stored as 0), 1000 and 1
BOUNDS = (0, 1000, 1)


@dataclass(frozen=True)
class Servers:
    """One 2-server run's servers, busiest first, and what its replicates measured."""
    points: list[servercost.ServerPoint]
    t_iter: float  # the median replicate's (s)
    replicate_sums: list[float]  # every ok replicate's summed servers' CPU per step

    @property
    def total(self) -> float:
        return sum(p.core_s for p in self.points)

    @property
    def busiest(self) -> float:
        return max(p.core_s for p in self.points)


@dataclass(frozen=True)
class Pair:
    """One strategy at one worker count, each split bound's servers."""
    strategy: str
    workers: int
    by_bound: dict[int, Servers]

    def ratio(self, what: str, a: int, b: int) -> float | None:
        """`what` ("total", "busiest" or "t_iter") at bound a over bound b."""
        if a not in self.by_bound or b not in self.by_bound:
            return None
        return getattr(self.by_bound[a], what) / getattr(self.by_bound[b], what)


def read(db: Path) -> list[dict]:
    """Every ok run of a results database, read from a copy of it."""
    with tempfile.TemporaryDirectory(prefix="dnnbench-server-pieces-") as tmp:
        copy = Path(shutil.copy(db, Path(tmp) / db.name))
        with Store(copy, readonly=True) as st:
            return st.runs("WHERE status = 'ok'")


def pairs(runs: list[dict]) -> list[Pair]:
    """The 2-server runs with servers' telemetry, by strategy and workers, each bound on
    its median replicate."""
    sums: dict[tuple, list[float]] = {}
    for r in runs:
        if r.get("ps") == 2 and servercost.server_cpu(r):
            key = (r["strategy"], r["workers"], r.get("ps_split_bound") or 0)
            sums.setdefault(key, []).append(sum(servercost.server_cpu(r)))
    out: dict[tuple, dict[int, Servers]] = {}
    for r in replicates.medians(runs):
        pts = servercost.points(r) if r.get("ps") == 2 else []
        if pts:
            bound = r.get("ps_split_bound") or 0
            out.setdefault((r["strategy"], r["workers"]), {})[bound] = Servers(
                pts, r["t_iter_s"], sums[(r["strategy"], r["workers"], bound)])
    return [Pair(s, w, b) for (s, w), b in sorted(out.items())]


def fitted(runs: list[dict]) -> dict[tuple, tuple]:
    """Each family's servers' cost fitted on its <= 2-worker runs' median replicates,
    per byte and with requests (servercost.fit)."""
    fams: dict[tuple, list[servercost.ServerPoint]] = {}
    for r in replicates.medians(runs):
        if r["workers"] <= servercost.FIT_MAX_WORKERS and r.get("cpus_per_host"):
            fams.setdefault(servercost.family(r), []).extend(servercost.points(r))
    return {fam: (servercost.fit(pts, fam[2]), servercost.fit(pts, fam[2], requests=True))
            for fam, pts in fams.items() if pts}


def _bound_name(b: int) -> str:
    return "default" if b == 0 else str(b)


def report(runs: list[dict]) -> None:
    """Print one sweep's servers at each bound, their ratios and the held-out fit."""
    print("each server: MB held / pieces / CPU per step (core-ms), busiest first; "
          "the sum over replicates in brackets")
    found = pairs(runs)
    for p in found:
        print(f"{p.strategy} x{p.workers}")
        for b in BOUNDS:
            if b in p.by_bound:
                s = p.by_bound[b]
                each = "  ".join(f"{q.nbytes / 1e6:5.1f} MB /{q.pieces:4d} /{q.core_s * 1e3:5.0f}"
                                 for q in s.points)
                reps = ", ".join(f"{x * 1e3:.0f}" for x in s.replicate_sums)
                print(f"  bound {_bound_name(b):>7}: {each}   sum {s.total * 1e3:4.0f} "
                      f"[{reps}]   t_iter {s.t_iter * 1e3:5.0f} ms")
    print("\nratios (a cost per byte says 1.00 for the first two; the busiest server "
          "0.66 by bytes)")
    print(f"{'':<16}{'sum 1/1000':>12}{'sum 1000/0':>12}{'busiest 1000/0':>16}"
          f"{'t_iter 1/1000':>15}")
    cols = [("total", 1, 1000), ("total", 1000, 0), ("busiest", 1000, 0), ("t_iter", 1, 1000)]
    for p in found:
        vals = [p.ratio(*c) for c in cols]
        print(f"{p.strategy + ' x' + str(p.workers):<16}"
              + "".join(f"{v:>{w}.2f}" if v is not None else f"{'-':>{w}}"
                        for v, w in zip(vals, (12, 12, 16, 15))))
    print("\nheld out: servers' cost fitted on the <= 2-worker runs (median replicates)")
    for fam, (plain, req) in fitted(runs).items():
        kind = "asynchronous" if fam[2] else "synchronous"
        if plain is None or req is None:
            print(f"  {kind}: no fit (one client count)")
            continue
        print(f"  {kind}: per byte u {plain[0] * 1e9:.2f} c {plain[1] * 1e9:.2f} ns/B; "
              f"with requests u {req[0] * 1e9:.2f} c {req[1] * 1e9:.2f} ns/B, "
              f"r {req[2] * 1e6:.0f} us per request")
    checks = servercost.held_out(replicates.medians(runs))
    for kind in ("synchronous", "asynchronous"):
        cs = [c for c in checks if c.family[2] == (kind == "asynchronous")]
        if cs:
            s = servercost.summary(cs)
            print(f"  {kind}: busiest server of {s['n']} larger runs, median |error| per "
                  f"byte {s['by_bytes']:.1%} (bias {s['by_bytes_bias']:+.1%}), with requests "
                  f"{s['with_requests']:.1%} ({s['with_requests_bias']:+.1%})")
            for c in cs:
                print(f"    {c.label:<40} measured {c.measured * 1e3:5.0f}  per byte "
                      f"{c.by_bytes * 1e3:5.0f}  requests {c.with_requests * 1e3:5.0f} core-ms")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, action="append", default=[],
                    help="a results database of experiments/ps-pieces-emulated.toml; "
                         "repeat for several (default: every shipped sweep, "
                         f"experiments/measured/{SHIPPED_GLOB})")
    args = ap.parse_args(argv)
    # in measurement order across the machines' folders (r1, r2, then r3, r4)
    dbs = args.db or sorted(MEASURED.glob(SHIPPED_GLOB), key=lambda db: int(db.stem[1:]))
    sweeps = []
    for db in dbs:
        if not db.is_file():
            ap.error(f"--db {db}: no such file (run `dnnbench run -e "
                     "experiments/ps-pieces-emulated.toml --db FILE` first)")
        runs = read(db)
        if not any(len(p.by_bound) > 1 for p in pairs(runs)):
            ap.error(f"--db {db}: no 2-server configuration measured at more than one "
                     "ps_split_bound with servers' telemetry "
                     "(experiments/ps-pieces-emulated.toml has them)")
        sweeps.append((db, runs))
    for i, (db, runs) in enumerate(sweeps):
        print(("\n" if i else "") + f"== {db} ==")
        report(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
