"""The median sweep: several repeats of one experiment, each configuration by its median run.

Why this exists: on a shared machine one sweep's result is one draw. The held-out check
of #17 (harness/perfmodel/holdout.py) passed on one measurement of cori2017-emulated and
failed on its repeat the same day (median 7.0% then 11.6%), and the own-hosts layout
went the other way; a single disturbed 20-second run at 1 or 2 workers moves a whole
predicted curve, and a verdict that flips between repeats says nothing about the model.
Repeating the sweep (one results database per repeat: a sweep never runs a stored
configuration again) and judging the model on the median sweep takes that noise out of
both sides, the small runs the model is fitted on and the large runs it predicts.

The median sweep is a results database of its own, made fresh: for each configuration
(experiment and configuration hash) the repeat whose ok run has the median t_iter (the
lower median for an even count, so every configuration is one real run, never an
average), copied with all its raw samples (iterations, phases, trials, telemetry, its
Slurm job row). A whole run, not a median of each column: its telemetry, bytes and
timings stay one measurement's and agree with each other. Configurations with no ok run
in any repeat come from the first repeat that has them. Every repeat's microbenchmark
rows (`comm`) are kept: they are fitted, not judged.

With `keep_from` and `keep`, the configurations whose runs `keep` picks (the large runs a
held-out check predicts) come from that one repeat instead: the small runs the model is
fitted on are the median's, the runs it is judged on one repeat's own, so that repeat's
held-out error carries its own large runs' noise and not the fit's (holdout_repeats).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.stats import median
from harness.store import Store, StoreError

#: Tables of per-run raw samples, copied with their run.
_PER_RUN = ("iterations", "phases", "trials", "telemetry", "jobs")


@dataclass
class MedianSweep:
    path: Path
    repeats: list[Path]
    #: (experiment, config_hash) -> t_iter of every repeat's ok run, in repeat order
    #: (None where that repeat has no ok run of it)
    t_iter: dict[tuple[str, str], list[float | None]] = field(default_factory=dict)
    #: (experiment, config_hash) -> index of the repeat the median sweep took it from
    chosen: dict[tuple[str, str], int] = field(default_factory=dict)
    #: repeats whose machine's probes read unlike the others' (`other_machines`)
    notes: list[str] = field(default_factory=list)


#: a repeat whose probes' median GEMM rate is further than this from the repeats' median
#: ran on another machine (on one VM the sweeps' medians agree within 3%, 202-207 GFLOPS
#: over five AMD sweeps; a fresh VM of the same kind read 183, 2026-12-06, and the Intel
#: VMs 275-294). The copy bandwidth is not used: one Intel VM's sweeps read 13.8-26.8 GB/s
MACHINE_TOLERANCE = 0.10


def other_machines(paths: list[Path], per_repeat: list[list[dict]]) -> list[str]:
    """A note for each repeat whose runs' probes read a median GEMM rate (machine_gflops)
    more than MACHINE_TOLERANCE from the repeats' median: repeats are the same
    sweep on the same machine, and a median sweep over another machine's repeat mixes
    the machines silently (replicated repeat 6, on a slower VM: every one of its runs was
    slower than the other five sweeps' median, so the median sweep took none of them)."""
    def med(xs: list[float]) -> float | None:
        return median(xs) if xs else None

    probes = [{k: med([r[k] for r in rows if r["status"] == "ok" and r.get(k)])
               for k in ("machine_gflops", "machine_copy_gbs")} for rows in per_repeat]
    common = {k: med([p[k] for p in probes if p[k]]) for k in probes[0]} if probes else {}
    notes = []
    for i, (path, p) in enumerate(zip(paths, probes)):
        v, c = p["machine_gflops"], common.get("machine_gflops")
        if v and c and abs(v / c - 1) > MACHINE_TOLERANCE:
            notes.append(
                f"r{i + 1} ({path}) ran on another machine: its probes read a median "
                f"{p['machine_gflops'] or 0:.0f} GFLOPS and {p['machine_copy_gbs'] or 0:.1f}"
                f" GB/s copy against the repeats' {common['machine_gflops'] or 0:.0f} and "
                f"{common['machine_copy_gbs'] or 0:.1f}; repeats are one machine's, so "
                f"judge it alone (--db {path} by itself)")
    return notes


def _columns(conn: sqlite3.Connection, schema: str, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({table})")]


def _named(experiments: list[str]) -> str:
    return ", ".join(experiments) if experiments else "no runs"


def _same_experiments(paths: list[Path], per_repeat: list[list[dict]]) -> None:
    """Repeats are databases of the same experiments sharing configurations: two
    different sweeps given as repeats would otherwise make a "median sweep" of each one's
    own runs, every configuration from the only repeat that has it, and judge it."""
    names = [sorted({r["experiment"] for r in rows}) for rows in per_repeat]
    for p, n in zip(paths[1:], names[1:]):
        if n != names[0]:
            raise StoreError(f"{paths[0]} holds {_named(names[0])} and {p} holds "
                             f"{_named(n)}: each --db must be a repeat of the same "
                             "experiment (give --db once to validate one sweep)")
    seen = Counter(key for rows in per_repeat
                   for key in {(r["experiment"], r["config_hash"]) for r in rows})
    if len(paths) > 1 and seen and max(seen.values()) < 2:
        raise StoreError(f"the repeats {', '.join(map(str, paths))} share no configuration "
                         f"of {_named(names[0])}: was the experiment file changed "
                         "between them? Repeats must measure the same configurations")


def build(repeats: list[str | Path], out: str | Path, keep_from: int | None = None,
          keep: Callable[[dict], bool] | None = None) -> MedianSweep:
    """Write the median sweep of `repeats` (results databases of the same experiment, each
    opened once as a Store first, so an older one gains the current columns) to `out`, a
    new file; a configuration whose run in repeat `keep_from` is ok and `keep` accepts is
    taken from that repeat instead of its median one (the module's docstring).
    StoreError names a repeat that is missing, not a results database, the same file
    twice, a copy of another, or one of other experiments or configurations."""
    paths = [Path(p) for p in repeats]
    seen: dict[Path, Path] = {}
    for p in paths:
        if not p.is_file():
            raise StoreError(f"results database {p} does not exist (each --db is one repeat "
                             "of the sweep)")
        real = p.resolve()
        if real in seen:
            raise StoreError(f"{p} is given twice ({seen[real]}): each --db must be a "
                             "different repeat of the sweep")
        seen[real] = p
    per_repeat: list[list[dict]] = []
    for p in paths:
        with Store(p, readonly=True) as st:  # today's columns, the file untouched
            per_repeat.append(st.runs())
    owner: dict[str, int] = {}
    for i, rows in enumerate(per_repeat):
        for r in rows:
            j = owner.setdefault(r["run_id"], i)
            if j != i:  # one sweep under two names (a copy), not two repeats
                raise StoreError(f"{paths[j]} and {paths[i]} share run ids ({r['run_id']}): "
                                 "they are one sweep, not two repeats; give each --db a "
                                 "separate sweep's database")
    _same_experiments(paths, per_repeat)
    result = MedianSweep(Path(out), paths, notes=other_machines(paths, per_repeat))
    configs: dict[tuple[str, str], list[dict | None]] = {}
    for i, rows in enumerate(per_repeat):
        for r in rows:
            slot = configs.setdefault((r["experiment"], r["config_hash"]),
                                      [None] * len(paths))
            if slot[i] is None or (r["status"] == "ok" and slot[i]["status"] != "ok"):
                slot[i] = r
    for key, slot in configs.items():
        ok = [(r["t_iter_s"], i) for i, r in enumerate(slot)
              if r is not None and r["status"] == "ok" and r["t_iter_s"] is not None]
        result.t_iter[key] = [r["t_iter_s"] if r is not None and r["status"] == "ok"
                              else None for r in slot]
        mine = slot[keep_from] if keep_from is not None and keep is not None else None
        if mine is not None and mine["status"] == "ok" and keep(mine):
            result.chosen[key] = keep_from
        elif ok:
            ok.sort()
            result.chosen[key] = ok[(len(ok) - 1) // 2][1]  # the lower median
        else:
            result.chosen[key] = next(i for i, r in enumerate(slot) if r is not None)
    with Store(out) as dst:
        conn = dst.conn
        for i, p in enumerate(paths):
            ids = [configs[k][i]["run_id"] for k, c in result.chosen.items() if c == i]
            conn.execute("ATTACH DATABASE ? AS src", (str(p),))
            try:
                with conn:
                    conn.execute("CREATE TEMP TABLE pick (run_id TEXT PRIMARY KEY)")
                    conn.executemany("INSERT INTO pick VALUES (?)", [(x,) for x in ids])
                    for table in ("runs", *_PER_RUN):
                        cols = ", ".join(c for c in _columns(conn, "main", table)
                                         if c in _columns(conn, "src", table))
                        conn.execute(f"INSERT OR IGNORE INTO main.{table} ({cols}) SELECT "
                                     f"{cols} FROM src.{table} WHERE run_id IN "
                                     "(SELECT run_id FROM pick)")
                    cols = ", ".join(c for c in _columns(conn, "main", "comm")
                                     if c in _columns(conn, "src", "comm"))
                    conn.execute(f"INSERT INTO main.comm ({cols}) SELECT {cols} FROM src.comm")
                    conn.execute("DROP TABLE temp.pick")
            finally:
                conn.execute("DETACH DATABASE src")
    return result

