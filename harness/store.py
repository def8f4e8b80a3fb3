"""The results database (SQLite): one row per run, every raw iteration time kept.

Each run is written in one transaction (the run row and all its raw times, or nothing),
in WAL mode, so a harness killed mid-write leaves a database that passes
`PRAGMA integrity_check` with no partial rows. Columns are defined once, with units, in
RUN_COLUMNS; CSV/JSON exports and the report read them from here.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# (name, SQL type, unit, meaning)
RUN_COLUMNS: list[tuple[str, str, str, str]] = [
    ("run_id", "TEXT PRIMARY KEY", "", "unique id of this run"),
    ("experiment", "TEXT", "", "experiment (sweep) name"),
    ("config_hash", "TEXT", "", "hash of the RunSpec's measured fields (resume key)"),
    ("status", "TEXT", "", "ok | failed | timeout | skipped | interrupted"),
    ("reason", "TEXT", "", "why a run did not finish (empty when ok)"),
    ("framework", "TEXT", "", "a registered framework (frameworks/<name>/)"),
    ("model", "TEXT", "", "network name"),
    ("strategy", "TEXT", "", "single | allreduce | horovod | ps-sync | ps-async"),
    ("mode", "TEXT", "", "throughput (no added syncs) | breakdown (sync between phases)"),
    ("device", "TEXT", "", "cpu | cuda"),
    ("precision", "TEXT", "", "fp32 | amp"),
    ("batch_size", "INTEGER", "images", "per-device batch size"),
    ("image_size", "INTEGER", "px", "input height = width"),
    ("workers", "INTEGER", "", "worker processes (nodes x devices per node)"),
    ("nodes", "INTEGER", "", "hosts"),
    ("ps", "INTEGER", "", "parameter servers (ps-* strategies)"),
    ("threads", "INTEGER", "", "compute threads per worker, as the worker set them"),
    ("label", "TEXT", "", "free-text label from the experiment"),
    ("started", "TEXT", "UTC", "start time, ISO 8601"),
    ("elapsed_s", "REAL", "s", "wall time of the whole job incl. start-up"),
    ("images_per_s", "REAL", "images/s", "total throughput = global batch / t_iter"),
    ("images_per_s_low", "REAL", "images/s", "95% interval, low end"),
    ("images_per_s_high", "REAL", "images/s", "95% interval, high end"),
    ("images_per_s_per_worker", "REAL", "images/s", "images_per_s / workers"),
    ("t_iter_s", "REAL", "s", "iteration time: median over trials of (trial wall time / "
     "its timed iterations)"),
    ("t_iter_low_s", "REAL", "s", "95% interval of that median over trials (order "
     "statistics; needs 6 trials), low end"),
    ("t_iter_high_s", "REAL", "s", "95% interval of the median, high end"),
    ("interval_halfwidth", "REAL", "fraction", "larger side of the 95% interval over the "
     "median: what adaptive sampling drives below target_width"),
    ("jitter", "REAL", "fraction", "1.4826 x MAD / median of iteration times (inside trials)"),
    ("n_iters", "INTEGER", "", "timed iterations (warm-up excluded)"),
    ("n_trials", "INTEGER", "", "timed trials: the independent samples of the interval"),
    ("trial_order", "TEXT", "", "interleaved (took turns trial by trial with the configurations "
     "compared with it) | sequential (measured alone, start to end)"),
    ("group_id", "TEXT", "", "run ids measured together in interleaved rounds"),
    ("stopped_by", "TEXT", "", "what ended sampling: target width | budget | fixed trials "
     "| max trials"),
    ("warmup_steps", "INTEGER", "", "untimed steps before the first trial (detected: until "
     "iteration times stop falling, single-worker runs)"),
    ("warmup_settled", "INTEGER", "", "1 if warm-up met the settling rule, 0 if it hit its "
     "cap still falling"),
    ("compile_s", "REAL", "s", "seconds the framework spent compiling its step functions "
     "before the first trial, never timed (JAX: ahead-of-time XLA compilation; empty where "
     "an adapter compiles lazily or not at all)"),
    ("settling", "REAL", "fraction", "first trial's time over the later trials' median, "
     "minus 1: > 0.05 means warm-up was too short"),
    ("t_iter_paired_s", "REAL", "s", "breakdown runs: throughput-mode iteration time (median "
     "over trials of wall / iterations) measured in the same process, alternating with the "
     "breakdown trials"),
    ("t_io_s", "REAL", "s", "breakdown: median time waiting for the next batch"),
    ("t_h2d_s", "REAL", "s", "breakdown: median host-to-device copy time"),
    ("t_forward_s", "REAL", "s", "breakdown: median forward + loss time"),
    ("t_backward_s", "REAL", "s", "breakdown: median backward time"),
    ("t_comm_s", "REAL", "s", "breakdown: median gradient aggregation time (no overlap)"),
    ("t_update_s", "REAL", "s", "breakdown: median optimizer update time"),
    ("link", "TEXT", "", "emulated inter-host link rate (e.g. 1gbit, unshaped); empty: "
     "all processes on this host"),
    ("cpus_per_host", "REAL", "CPUs", "compute per emulated host (cgroup quota on its own "
     "cores); 0: the hosts shared every core"),
    ("ps_hosts", "TEXT", "", "where the parameter servers ran: shared (server i on worker "
     "host i, the scheduler or chief on host 0) or own (a host each, and one for the "
     "scheduler or chief); empty: no servers, or stored before it was recorded (shared)"),
    ("ps_split_bound", "INTEGER", "elements", "MXNet parameter servers: arrays of at "
     "least this many elements were split into one slice per server "
     "(MXNET_KVSTORE_BIGARRAY_BOUND); 0 or empty: MXNet's default, 1000000"),
    ("replicate", "INTEGER", "", "which measurement of its configuration within the sweep "
     "(0 or empty: the first; the replicate axis, harness/replicates.py)"),
    ("env", "TEXT", "", "where the worker's software came from: venv (the framework's "
     "virtual environment) or container (its image; the manifest names image and engine)"),
    ("data", "TEXT", "", "input: 'synthetic' or the dataset folder of a real pipeline"),
    ("loader_workers", "INTEGER", "", "data-loader processes/threads per worker (real data)"),
    ("corrupt_skipped", "INTEGER", "files", "dataset files skipped as not complete JPEGs "
     "(all workers' shards)"),
    ("peak_rss_mb", "REAL", "MiB", "largest peak resident memory of one worker process "
     "(the kernel's high-water mark, excluding loader child processes)"),
    ("tree_rss_peak_mb", "REAL", "MiB", "largest sampled resident memory of one worker's "
     "whole process tree (worker + loader processes) while measuring: an upper bound, "
     "since pages a forked loader shares with its worker count in both"),
    ("tree_pss_peak_mb", "REAL", "MiB", "largest sampled proportional set size of one "
     "worker's whole process tree while measuring: each shared page divided among the "
     "processes sharing it, so the tree's real footprint (sampled every few seconds)"),
    ("tree_anon_peak_mb", "REAL", "MiB", "largest sampled anonymous memory of one "
     "worker's whole process tree while measuring (heap, tensors: no file's pages, so the "
     "page cache's state does not move it, where RSS and PSS count the framework "
     "libraries' mapped pages; sampled every few seconds; empty before 2026-12-07)"),
    ("machine_gflops", "REAL", "GFLOP/s", "the noise meter's fp32 GEMM on every core of "
     "the harness host, best of the probes around the run's trials (harness/noise.py)"),
    ("machine_copy_gbs", "REAL", "GB/s", "the noise meter's memory copy bandwidth"),
    ("peak_gflops", "REAL", "GFLOP/s", "the host's fp32 dense-matmul peak that a CPU run's "
     "mfu divides by: the best of machine_gflops and a NumPy GEMM with OpenBLAS free to "
     "pick its kernels for this CPU (harness/noise.py host_peak)"),
    ("noise_ratio", "REAL", "", "the median probe around the run's trials over the sweep's "
     "usual best (90th percentile of its probes so far): below 0.85 the machine was "
     "measurably disturbed"),
    ("noise_own_share", "REAL", "", "interleaved runs: share of the harness host's cores "
     "the sweep's own idle workers (the group's members waiting at their gates) used while "
     "the probes ran, median over the run's probes; above 0.1 a low noise_ratio is their "
     "load, not a disturbance (harness/noise.py state)"),
    ("group_idle_cores", "REAL", "cores", "interleaved runs: cores the group's other "
     "members, idle at their gates, used during this run's trials (median over its trials): "
     "an idle Horovod worker keeps negotiating with its peers"),
    ("mfu", "REAL", "", "model FLOPs utilisation: forward+backward FLOPs per image (cost "
     "model) x images/s over the peak of the devices that ran it: workers x device_gflops "
     "on GPUs, peak_gflops for CPU runs on this host"),
    ("device_gflops", "REAL", "GFLOP/s", "dense-matmul peak of one of the run's devices in "
     "its math mode, measured by the worker before warm-up (median over ranks; "
     "frameworks/peak.py): GPU runs, and CPU runs with DNNBENCH_DEVICE_PEAK=1"),
    ("device_math", "TEXT", "", "the math mode device_gflops was measured in: float32, tf32, "
     "bfloat16 or float16"),
    ("datasheet_gflops", "REAL", "GFLOP/s", "the vendor's dense peak of that device in that "
     "math mode (harness/datasheets.py), when known"),
    ("cpu_cores_per_worker", "REAL", "cores", "mean CPU use of one worker's process tree "
     "while measuring (sampled from /proc)"),
    ("cpu_cores_by_process_json", "TEXT", "cores", "mean CPU use of each launched process "
     "tree while measuring, by tag (worker0, server1, scheduler...): the parameter servers' "
     "own CPU time, which shares an emulated host's quota, feeds the performance model"),
    ("cpu_cores_by_host_json", "TEXT", "cores", "runs on emulated hosts: mean CPU use of "
     "every launched process while measuring, summed by the host whose network namespace "
     "it runs in (keys: host index); the only per-host split of a launcher's tree, such as "
     "mpirun's, whose ranks run on every host"),
    ("cpu_throttled_by_host_json", "TEXT", "", "runs on emulated hosts with a CPU quota: "
     "share of the CFS periods in which each host's CPU cgroup ran out of quota while "
     "measuring (keys: host index)"),
    ("ctx_switches_by_process_json", "TEXT", "1/s", "context switches per second of each "
     "launched process tree's threads while measuring, voluntary (slept until woken: "
     "waiting for a message or a lock) and involuntary (preempted, or its quota ran out)"),
    ("cpu_throttled_by_process_json", "TEXT", "", "share of the CFS periods in which the "
     "CPU cgroup of each launched process ran out of quota while measuring (emulated hosts "
     "with cpus_per_host, containers with a CPU limit): near 1 that host was CPU-bound"),
    ("cpu_cores_by_thread_json", "TEXT", "cores", "mean CPU use of each thread of each "
     "launched process tree while measuring, as \"name/tid\" (threads under 0.0005 cores "
     "left out): where in a process its CPU goes, e.g. a server's message thread apart "
     "from the threads that sum and apply"),
    ("machine_cpu_json", "TEXT", "cores", "the harness host's mean CPU by kind while "
     "measuring (/proc/stat: user, system, irq, softirq, steal, idle; they sum to its "
     "cores): work no process's quota bounds, such as the kernel's for emulated links "
     "(softirq) and the hypervisor's for other VMs (steal), and whether any core was left"),
    ("machine_softirqs_json", "TEXT", "per s", "the harness host's softirqs raised per "
     "second by kind while measuring (/proc/softirqs, every core summed: NET_RX, NET_TX, "
     "TIMER, HRTIMER, SCHED, RCU, ...; since 2026-12-06): counts, not time; which kind of "
     "the machine's softirq time (machine_cpu_json) grows with a run's traffic"),
    ("gpu_util_pct", "REAL", "%", "mean GPU utilisation while measuring (NVML)"),
    ("gpu_mem_peak_mb", "REAL", "MiB", "peak GPU memory used (NVML)"),
    ("gpu_power_w", "REAL", "W", "mean GPU power while measuring (NVML)"),
    ("parameters", "INTEGER", "", "trainable parameters the framework built"),
    ("final_loss", "REAL", "", "training loss after the last trial"),
    ("replicas_identical", "INTEGER", "", "1 if every worker ended with bit-identical "
     "parameters (expected for synchronous strategies), 0 if not, empty for one worker"),
    ("output_tail", "TEXT", "", "last output lines of the failing process"),
    ("spec_json", "TEXT", "", "the full RunSpec"),
    ("manifest_json", "TEXT", "", "environment manifest: host, versions, settings"),
]
COLUMN_NAMES = [c[0] for c in RUN_COLUMNS]
#: SQL condition for runs on synthetic data (rows from before the data column have NULL):
#: the compute/communication study and the performance model use only these.
SYNTHETIC = "(data IS NULL OR data = 'synthetic')"
PHASE_COLUMNS = {"io": "t_io_s", "h2d": "t_h2d_s", "forward": "t_forward_s",
                 "backward": "t_backward_s", "comm": "t_comm_s", "update": "t_update_s"}

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs ({", ".join(f"{n} {t}" for n, t, _, _ in RUN_COLUMNS)});
CREATE INDEX IF NOT EXISTS runs_config ON runs(experiment, config_hash, status);
CREATE TABLE IF NOT EXISTS iterations (
    run_id TEXT NOT NULL REFERENCES runs(run_id), rank INTEGER, trial INTEGER,
    iter INTEGER, seconds REAL);
CREATE INDEX IF NOT EXISTS iterations_run ON iterations(run_id);
CREATE TABLE IF NOT EXISTS phases (
    run_id TEXT NOT NULL REFERENCES runs(run_id), rank INTEGER, trial INTEGER,
    iter INTEGER, phase TEXT, seconds REAL);
CREATE INDEX IF NOT EXISTS phases_run ON phases(run_id);
CREATE TABLE IF NOT EXISTS trials (
    run_id TEXT NOT NULL REFERENCES runs(run_id), trial INTEGER, round INTEGER,
    started REAL, seconds REAL, wall REAL, iterations INTEGER);
CREATE INDEX IF NOT EXISTS trials_run ON trials(run_id);
CREATE TABLE IF NOT EXISTS comm (
    run_id TEXT NOT NULL, started TEXT, experiment TEXT, library TEXT, op TEXT,
    ranks INTEGER, nodes INTEGER, link TEXT, bytes INTEGER, median_s REAL,
    algbw REAL, busbw REAL, wrong INTEGER, times_json TEXT);
CREATE INDEX IF NOT EXISTS comm_lib ON comm(library, ranks, link);
CREATE TABLE IF NOT EXISTS telemetry (
    run_id TEXT NOT NULL REFERENCES runs(run_id), tag TEXT, t REAL, cpu_cores REAL,
    rss_bytes INTEGER, gpu_util REAL, gpu_mem_bytes INTEGER, gpu_power_w REAL,
    span_s REAL, pss_bytes INTEGER, anon_bytes INTEGER);
CREATE INDEX IF NOT EXISTS telemetry_run ON telemetry(run_id);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT NOT NULL, experiment TEXT NOT NULL, config_hash TEXT NOT NULL,
    run_id TEXT PRIMARY KEY, output TEXT, script TEXT, role TEXT, submitted TEXT,
    spec_json TEXT, manifest_json TEXT, collected TEXT);
CREATE INDEX IF NOT EXISTS jobs_open ON jobs(experiment, collected);
"""
#: `jobs`: runs submitted to Slurm and not waited for (dnnbench run --submit); `collected`
#: is when `dnnbench collect` stored the run's row (NULL: not yet). The job's output file
#: is the source of truth until then.


@dataclass
class RunRecord:
    row: dict[str, Any]
    iterations: list[tuple[int, int, int, float]] = field(default_factory=list)
    phases: list[tuple[int, int, int, str, float]] = field(default_factory=list)
    #: rank 0's trials: (trial, round of its interleaved group or None, started unix s,
    #: seconds per iteration, wall s, timed iterations)
    trials: list[tuple] = field(default_factory=list)
    telemetry: list[tuple] = field(default_factory=list)  # Telemetry.rows(): tag, t, ...


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class StoreError(ValueError):
    """The results database cannot be opened or used; the message names it."""


def _snapshot(path: Path) -> sqlite3.Connection:
    """An in-memory copy of the database at `path`, read without writing to it. With no
    -wal file beside it no connection has it open (a WAL database keeps one while any
    does), and it is read as immutable: a read-only connection to a WAL database would
    otherwise create -wal and -shm files and leave them behind. With one, a sweep may be
    writing: read through its WAL under the usual locks (the files exist already)."""
    live = Path(f"{path}-wal").exists()
    src = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro{'' if live else '&immutable=1'}",
                          uri=True, timeout=30)
    try:
        mem = sqlite3.connect(":memory:")
        src.backup(mem)
        return mem
    finally:
        src.close()


def require_file(path: str | Path) -> None:
    """Every reader names the same two mistakes the same way (a folder given for a file, a
    path that is not there) before it opens anything: opening would create the file."""
    path = Path(path)
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise StoreError(f"results database {path} {what} (run `dnnbench run` first, or "
                         "give --db the file a sweep wrote)")


def _require_results_tables(conn: sqlite3.Connection, path: Path) -> None:
    """A reader refuses an SQLite file no sweep wrote: its in-memory copy would otherwise
    get an empty `runs` table, and a report of nothing would be written with success."""
    tables = sorted(name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    if "runs" in tables:
        return
    held = f"its tables: {', '.join(tables[:6])}{', ...' if len(tables) > 6 else ''}" \
        if tables else "it holds no tables"
    conn.close()
    raise StoreError(f"results database {path}: an SQLite file but not one `dnnbench run` "
                     f"wrote ({held}; no `runs` table); give --db the file a sweep wrote")


#: Statuses that end a configuration: a sweep neither runs nor stores it again.
FINISHED = ("ok", "skipped")


def resumed(retry_failed: bool = False) -> set[str]:
    """The statuses a resumed sweep leaves alone, in one place for `run`, `run --submit` and
    `plan`, so that a plan's "to measure" is what the sweep will measure: a failure stays
    stored (measuring it again costs its timeout) unless the user asks for it."""
    return set(FINISHED) | (set() if retry_failed else {"failed", "timeout"})


class Store:
    """A results database, opened to record runs or, with `readonly=True`, to read them.

    A reader (report, compare, predict, paper, the bench tools) gets a private in-memory
    copy, taken through SQLite's backup API from a read-only connection: the file is
    never written, so a shipped or archived database keeps its bytes (a writer's open
    migrates older columns and switches the file to WAL), a sweep still writing to it is
    read as one consistent snapshot, and a mistyped path is an error instead of a new
    empty database."""

    def __init__(self, path: str | Path, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        if readonly:
            require_file(self.path)
        if not readonly:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if readonly:
                self.conn = _snapshot(self.path)
                _require_results_tables(self.conn, self.path)
            else:
                self.conn = sqlite3.connect(str(self.path), timeout=30)
                self.conn.execute("PRAGMA journal_mode=WAL")
                self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as exc:  # not SQLite, a folder, unreadable, locked
            raise StoreError(f"results database {self.path}: {exc} (give --db a new file or "
                             "a dnnbench results database)") from None
        if readonly:  # the copy has today's columns; nothing may think it stored a run
            self.conn.execute("PRAGMA query_only = ON")
            return
        try:  # one row per (experiment, configuration); a database made before may hold more
            with self.conn:
                self.conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS runs_identity ON "
                                  "runs(experiment, config_hash)")
        except sqlite3.IntegrityError:
            pass  # older duplicates stay readable; add() still stores nothing twice

    def _migrate(self) -> None:
        """Add columns that newer versions define to a database made by an older one."""
        have = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
        with self.conn:
            for name, sqltype, _, _ in RUN_COLUMNS:
                if name not in have:
                    self.conn.execute(f"ALTER TABLE runs ADD COLUMN {name} "
                                      f"{sqltype.replace(' PRIMARY KEY', '')}")
            # the time each CPU rate covers (2026-12-03), the tree's PSS and anonymous
            # memory at full scans (2026-12-07); older samples have none
            sampled = {r[1] for r in self.conn.execute("PRAGMA table_info(telemetry)")}
            for name in ("span_s REAL", "pss_bytes INTEGER", "anon_bytes INTEGER"):
                if name.split()[0] not in sampled:
                    self.conn.execute(f"ALTER TABLE telemetry ADD COLUMN {name}")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, rec: RunRecord, replaces: str | None = None, from_job: bool = False
            ) -> bool:
        """Store a run with all its raw samples in one transaction; False (nothing stored)
        when this experiment already holds a finished row (ok or skipped) for the same
        configuration, e.g. written by another sweep on the same database meanwhile.

        The check runs inside the write transaction (BEGIN IMMEDIATE takes SQLite's write
        lock first), so two sweeps writing at once neither duplicate nor lose a row: the
        second one sees the first one's row. A failed row is replaced by a retry; an ok row
        only when named in `replaces` (a disturbed run measured again), in the same
        transaction, so the old result stays until the new one is stored. `from_job`: the
        row is a submitted Slurm job's (same run_id), marked collected in the same
        transaction, so collecting twice stores nothing twice."""
        row = {k: rec.row.get(k) for k in COLUMN_NAMES}
        for key in ("spec_json", "manifest_json"):
            if row[key] is not None and not isinstance(row[key], str):
                row[key] = json.dumps(row[key], sort_keys=True)
        with self.conn:  # one transaction: the run and all its raw samples, or nothing
            self.conn.execute("BEGIN IMMEDIATE")
            if replaces:
                for table in ("iterations", "phases", "trials", "telemetry", "runs"):
                    self.conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (replaces,))
            if from_job:
                self.conn.execute("UPDATE jobs SET collected = ? WHERE run_id = ?",
                                  (_now(), row["run_id"]))
            existing = self.conn.execute(
                "SELECT run_id, status FROM runs WHERE experiment = ? AND config_hash = ?",
                (row["experiment"], row["config_hash"])).fetchall()
            if any(status in FINISHED for _, status in existing):
                return False
            for run_id, _ in existing:  # failed or timed out: a retry replaces it
                for table in ("iterations", "phases", "trials", "telemetry", "runs"):
                    self.conn.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
            self.conn.execute(
                f"INSERT INTO runs ({', '.join(COLUMN_NAMES)}) VALUES "
                f"({', '.join('?' for _ in COLUMN_NAMES)})", [row[k] for k in COLUMN_NAMES])
            self.conn.executemany("INSERT INTO iterations VALUES (?, ?, ?, ?, ?)",
                                  [(row["run_id"], *it) for it in rec.iterations])
            self.conn.executemany("INSERT INTO phases VALUES (?, ?, ?, ?, ?, ?)",
                                  [(row["run_id"], *ph) for ph in rec.phases])
            self.conn.executemany("INSERT INTO trials VALUES (?, ?, ?, ?, ?, ?, ?)",
                                  [(row["run_id"], *t) for t in rec.trials])
            self.conn.executemany(  # a sample without a span (older callers) stores NULL
                "INSERT INTO telemetry VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(row["run_id"], *t, *[None] * (10 - len(t))) for t in rec.telemetry])
        return True

    def add_jobs(self, rows: list[dict[str, Any]]) -> None:
        """Record submitted jobs, all or none (see `jobs` above)."""
        cols = ("job_id", "experiment", "config_hash", "run_id", "output", "script", "role",
                "submitted", "spec_json", "manifest_json")
        with self.conn:
            self.conn.executemany(
                f"INSERT INTO jobs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                [tuple(json.dumps(r[c], sort_keys=True) if isinstance(r.get(c), dict)
                       else r.get(c) for c in cols) for r in rows])

    def set_job_ids(self, ids: dict[str, str]) -> None:
        """Give recorded jobs (by run id) the ids sbatch answered, in one transaction."""
        with self.conn:
            for run_id, job_id in ids.items():
                row = self.conn.execute("SELECT manifest_json FROM jobs WHERE run_id = ?",
                                        (run_id,)).fetchone()
                manifest = json.loads(row[0] or "{}") if row else {}
                manifest.setdefault("slurm", {})["job_id"] = job_id
                self.conn.execute("UPDATE jobs SET job_id = ?, manifest_json = ? "
                                  "WHERE run_id = ?",
                                  (job_id, json.dumps(manifest, sort_keys=True), run_id))

    def drop_jobs(self, run_ids: list[str]) -> None:
        """Forget jobs that were never submitted: their runs are pending again."""
        with self.conn:
            self.conn.executemany("DELETE FROM jobs WHERE run_id = ? AND collected IS NULL",
                                  [(r,) for r in run_ids])

    def jobs(self, where: str = "", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(f"SELECT * FROM jobs {where} ORDER BY submitted, job_id",
                                tuple(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def finished(self, experiment: str, config_hash: str) -> bool:
        """Whether the experiment holds an ok or skipped row for this configuration."""
        return self.conn.execute(
            f"SELECT 1 FROM runs WHERE experiment = ? AND config_hash = ? AND status IN "
            f"({', '.join('?' * len(FINISHED))})",
            (experiment, config_hash, *FINISHED)).fetchone() is not None

    def completed(self, experiment: str) -> set[str]:
        cur = self.conn.execute(
            "SELECT config_hash FROM runs WHERE experiment = ? AND status = 'ok'", (experiment,))
        return {r[0] for r in cur}

    def runs(self, where: str = "", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(f"SELECT * FROM runs {where} ORDER BY started", tuple(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def iteration_times(self, run_id: str) -> list[float]:
        return [r[0] for r in self.conn.execute(
            "SELECT seconds FROM iterations WHERE run_id = ? ORDER BY rank, trial, iter",
            (run_id,))]

    def rank_seconds(self, run_id: str) -> dict[int, float]:
        """Each rank's timed iterations, summed: how far apart its ranks ran."""
        return dict(self.conn.execute(
            "SELECT rank, SUM(seconds) FROM iterations WHERE run_id = ? GROUP BY rank",
            (run_id,)))

    def trials(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Rank 0's trials (all runs, or these), in the order they ran."""
        ids = None if run_ids is None else list(run_ids)
        if ids == []:
            return []
        where = "" if ids is None else f"WHERE run_id IN ({', '.join('?' * len(ids))})"
        cur = self.conn.execute(f"SELECT * FROM trials {where} ORDER BY started, run_id",
                                tuple(ids or ()))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def telemetry(self, run_id: str) -> list[dict[str, Any]]:
        cur = self.conn.execute("SELECT * FROM telemetry WHERE run_id = ? ORDER BY t, tag",
                                (run_id,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def add_comm(self, rows: list[dict[str, Any]]) -> None:
        cols = ("run_id", "started", "experiment", "library", "op", "ranks", "nodes", "link",
                "bytes", "median_s", "algbw", "busbw", "wrong", "times_json")
        with self.conn:
            self.conn.executemany(
                f"INSERT INTO comm ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                [tuple(r.get(c) for c in cols) for r in rows])

    def comm(self, where: str = "", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(f"SELECT * FROM comm {where} ORDER BY started, bytes",
                                tuple(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def integrity_ok(self) -> bool:
        return self.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
