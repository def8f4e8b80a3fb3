"""Repeat intervals: where a configuration's throughput would land if it were measured
again on this host, another time.

Why this exists: a run's own 95% interval comes from its trials, and the trials of one
sweep span minutes. A shared machine also moves on a longer time scale: on the 2-core VM
this project is developed on, the default experiment run twice 45 minutes apart came out
5-21% slower in every configuration one time and 1-14% faster another time, far outside
the trial intervals. Nothing inside one sweep can see that component; sweeping again can.

So every ok run is also written to this host's history (`DNNBENCH_HISTORY`, default
`<cache>/history.db`; `dnnbench history` shows it, `--add DB` seeds it from older results),
and the between-sweep variance is estimated from it, in log time per iteration:

    log t = configuration + sweep effect + noise
    between = (variance of log t across sweeps, pooled over configurations seen in >= 2
               sweeps) - (median squared within-run standard error of those runs)
    repeat interval = log t +- 1.96 sqrt(within SE^2 + between)

The sweep being judged is left out of the estimate (an interval never widens by its own
repeat), and `compare` leaves out both sides. So a run's repeat interval needs two other
sweeps of some configuration on its host (the third sweep is the first to get one); until
then its intervals stay the within-sweep ones and say so.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

Z95 = 1.959964

SCHEMA = """CREATE TABLE IF NOT EXISTS history (
    run_id TEXT PRIMARY KEY, sweep TEXT NOT NULL, host TEXT NOT NULL,
    config_hash TEXT NOT NULL, description TEXT, started TEXT,
    t_iter_s REAL NOT NULL, t_iter_low_s REAL, t_iter_high_s REAL)"""


def default_path() -> Path:
    from harness.envs import cache_dir

    return Path(os.environ.get("DNNBENCH_HISTORY") or cache_dir() / "history.db")


def host_key(row: dict) -> str:
    """The machine a run was measured on, from its manifest: host name, CPU model and core
    count (a rebuilt VM with the same name and hardware counts as the same host)."""
    manifest = row.get("manifest_json") or row.get("manifest") or {}
    if isinstance(manifest, str):
        manifest = json.loads(manifest)
    h = manifest.get("host") or {}
    return f"{h.get('host', '?')}|{h.get('cpu', '?')}|{h.get('cores', '?')}"


def _within_se(t: float, low: float | None, high: float | None) -> float | None:
    """Standard error of log t from the run's own 95% interval of t_iter."""
    if not low or not high or low <= 0 or high < low:
        return None
    return (math.log(high) - math.log(low)) / (2 * Z95)


class History:
    """This host's ok runs across sweeps (a small SQLite file of its own, not the results
    database: it outlives any one results file)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(SCHEMA)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, row: dict, sweep: str) -> bool:
        """Add one ok run (a results-database row). False when it is not usable (not ok,
        no time) or already there."""
        if row.get("status") != "ok" or not row.get("t_iter_s"):
            return False
        cur = self.conn.execute(
            "INSERT OR IGNORE INTO history VALUES (?,?,?,?,?,?,?,?,?)",
            (row["run_id"], sweep, host_key(row), row["config_hash"], row.get("label"),
             row.get("started"), row["t_iter_s"], row.get("t_iter_low_s"),
             row.get("t_iter_high_s")))
        self.conn.commit()
        return cur.rowcount == 1

    def add_database(self, db: str | Path) -> int:
        """Seed from an older results database: each experiment in it counts as one sweep."""
        from harness.store import Store, require_file

        require_file(db)
        tag = hashlib.sha1(str(Path(db).resolve()).encode()).hexdigest()[:12]
        with Store(db, readonly=True) as store:
            rows = store.runs("WHERE status = 'ok'")
        return sum(self.record(r, f"db:{tag}:{r['experiment']}") for r in rows)

    def sweep_of(self, run_ids: Iterable[str]) -> set[str]:
        ids = list(run_ids)
        out: set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            out |= {r[0] for r in self.conn.execute(
                f"SELECT DISTINCT sweep FROM history WHERE run_id IN "
                f"({','.join('?' * len(chunk))})", chunk)}
        return out

    def rows(self, host: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM history WHERE host = ? ORDER BY started",
                                 (host,)).fetchall()

    def hosts(self) -> dict[str, int]:
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT host, COUNT(DISTINCT sweep) FROM history GROUP BY host")}


@dataclass(frozen=True)
class Drift:
    """How much this host moves between sweeps, in log time per iteration."""

    host: str
    variance: float  # between-sweep variance (log t), floored at 0
    sweeps: int  # distinct sweeps that contributed
    configurations: int  # configurations seen in >= 2 of them
    df: int  # sum over those configurations of (sweeps - 1)

    @property
    def sd_pct(self) -> float:
        return (math.exp(math.sqrt(self.variance)) - 1) * 100

    def text(self) -> str:
        return (f"between-sweep drift on this host: sd {self.sd_pct:.1f}% (from "
                f"{self.configurations} configurations over {self.sweeps} sweeps)")


def estimate(history: History, host: str, exclude: Iterable[str] = ()) -> Drift | None:
    """Pooled between-sweep variance of this host, leaving out the sweeps in `exclude`;
    None when no configuration was measured in two of the remaining sweeps."""
    skip = set(exclude)
    latest: dict[str, dict[str, sqlite3.Row]] = defaultdict(dict)
    for r in history.rows(host):  # oldest first: a sweep's newest run of a config counts
        if r["sweep"] not in skip:
            latest[r["config_hash"]][r["sweep"]] = r
    num = dof = 0.0
    sweeps: set[str] = set()
    ses: list[float] = []
    configs = 0
    for by_sweep in latest.values():
        if len(by_sweep) < 2:
            continue
        ys = [math.log(r["t_iter_s"]) for r in by_sweep.values()]
        mean = sum(ys) / len(ys)
        num += sum((y - mean) ** 2 for y in ys)
        dof += len(ys) - 1
        ses += [se for r in by_sweep.values() if (se := _within_se(
            r["t_iter_s"], r["t_iter_low_s"], r["t_iter_high_s"])) is not None]
        configs += 1
        sweeps |= set(by_sweep)
    if not configs:
        return None
    # the median, not the mean, of the within-run part: one wild trial makes a 6-trial
    # order-statistic interval span min..max, and its square would swamp a mean (it drove
    # the estimate to 0 on this project's own history)
    within = statistics.median(se * se for se in ses) if ses else 0.0
    return Drift(host, max(0.0, num / dof - within), len(sweeps), configs, int(dof))


def interval(row: dict, drift: Drift | None) -> tuple[float, float] | None:
    """The repeat 95% interval of images/s for one run; None without a within-run interval
    or without a drift estimate (then only the run's own interval can be given)."""
    if drift is None or not row.get("images_per_s"):
        return None
    se = _within_se(row.get("t_iter_s"), row.get("t_iter_low_s"), row.get("t_iter_high_s"))
    if se is None:
        return None
    half = Z95 * math.sqrt(se * se + drift.variance)
    v = row["images_per_s"]
    return v * math.exp(-half), v * math.exp(half)


def drifts_for(rows: list[dict], path: str | Path | None = None,
               exclude_runs: Iterable[str] = ()) -> dict[str, Drift | None]:
    """host -> drift estimate for these runs' hosts, leaving out the sweeps these runs (and
    `exclude_runs`) belong to. Reads the history only if it exists (a report never creates
    it)."""
    hist_path = Path(path) if path else default_path()
    hosts = {host_key(r) for r in rows}
    if not hist_path.is_file() or not rows:
        return dict.fromkeys(hosts)
    with History(hist_path) as h:
        skip = h.sweep_of([r["run_id"] for r in rows] + list(exclude_runs))
        return {host: estimate(h, host, skip) for host in hosts}


def record_sweep(rows: list[dict], sweep: str, path: str | Path | None = None) -> None:
    """Called by the sweep for each stored run; a history that cannot be written costs the
    repeat interval, never a result."""
    try:
        with History(path) as h:
            for r in rows:
                h.record(r, sweep)
    except (OSError, sqlite3.Error):
        pass
