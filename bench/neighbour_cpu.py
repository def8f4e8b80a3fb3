"""Does a worker's CPU per step depend on busy neighbours sharing its core? (`python -m
bench.neighbour_cpu`; issue #17, items 1 and 4).

Held out, the model keeps a parameter-server worker's CPU per step at what its 1- and
2-worker runs measured, and at 4 and 8 workers the workers beside rank 0 spent a median
10-12% more on every shipped set, with few of their bytes on the wire (`python -m
bench.host_cpu`). With C = 0.25 CPU per emulated host, hosts 0-3 share core 0
(runners/cgroups.py gives host i the cores [iC, (i+1)C) spans): at 1 worker rank 0's
worker and server have that core to themselves, at 4 they time-slice it with six other
busy processes. `cluster up`'s isolation probe (a spinning loop) reads its speed
unchanged by neighbours; a training step, whose working set is the network's weights and
activations, may not be.

This measures it without the network: the same 1-worker run (MXNet dist_sync, one server
beside it, GoogLeNet 32 px, batch 8, 0.25 CPU, as ps-pieces-emulated.toml's) alone, and
with neighbours on its core holding the other 0.75 CPU of it (a cgroup of their own,
outside dnnbench's, pinned to the run's core with that quota), of four kinds: `spin`, a
Python loop (the isolation probe's load, a small working set); `stream`, a loop copying
32 MiB (a working set far above the caches); `wire`, a TCP stream between two namespaces
of their own over a veth shaped at the run's link rate (bench/wire_neighbours.py: this
kernel charges a packet's softirq work to whichever process is running); and `spinwire`,
the wire's two and two spinning ones together (the core fully booked, so the packet work
finds a busy process wherever it lands, never an idle core). The
conditions are taken in turns (alone, spin, stream, alone, ...), each a `dnnbench run` of
its own database. Prints each run's worker and server CPU per step and t_iter, the share of
the core's time the kernel spent in softirq meanwhile and the neighbours' bytes, then each
condition's medians, and the median over rounds of each run over its round's run alone.
Needs root, cgroups (v1 here), and the MXNet environment (built by the first run if
missing); about 40 seconds per run here.

    python -m bench.neighbour_cpu [--rounds 6] [--kinds spin,stream,wire,spinwire] [--out DIR]
    python -m bench.neighbour_cpu --read experiments/measured/neighbour-cpu
    python -m bench.neighbour_cpu --read experiments/measured/neighbour-wire
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import shipped, wire_neighbours  # noqa: E402
from runners import cgroups  # noqa: E402

GROUP = "dnnbench-neighbours"  # outside cgroups.PARENT: `cluster down` never touches it
#: what each kind of neighbour runs (one process per neighbour)
LOADS = {"spin": "while True:\n    pass",
         "stream": "src = bytes(32 << 20)\ndst = bytearray(32 << 20)\n"
                   "while True:\n    dst[:] = src"}
#: every kind: LOADS', `wire` (two processes moving bytes: bench/wire_neighbours.py) and
#: `spinwire` (both the wire's and `count` spinning ones: the core fully booked, so the
#: packet work finds the run's processes or busy neighbours, never an idle core)
KINDS = [*LOADS, "wire", "spinwire"]
WIRED = ("wire", "spinwire")
LINK = "1gbit"  # the run's and the wire neighbours' link
EXPERIMENT = """name = "neighbour-cpu"
description = "one MXNet dist_sync worker and its server on one 0.25-CPU emulated host"
[defaults]
framework = "mxnet"
model = "googlenet"
image_size = 32
batch_size = 8
num_classes = 10
steps = 4
warmup = 2
trials = 6
target_width = 0
link = "{link}"
timeout_s = 900
cpus_per_host = {cpus}
strategy = "ps-sync"
nodes = 1
ps = 1
"""


def _group_dirs() -> list[Path]:
    if cgroups.version() == "v2":
        return [cgroups.ROOT / GROUP]
    return [cgroups.ROOT / c / GROUP for c in ("cpu", "cpuset")]


def make_group(cpus: float, core: str) -> list[Path]:
    """A cgroup of `cpus` CPUs pinned to `core`, for the neighbours; removed by
    `remove_group`."""
    period = cgroups.period_us(cpus)
    quota = str(int(round(cpus * period)))
    dirs = _group_dirs()
    for d in dirs:
        d.mkdir(exist_ok=True)
    if cgroups.version() == "v2":
        (dirs[0] / "cpu.max").write_text(f"{quota} {period}")
        (dirs[0] / "cpuset.cpus").write_text(core)
    else:
        cpu, cs = dirs
        (cpu / "cpu.cfs_period_us").write_text(str(period))
        (cpu / "cpu.cfs_quota_us").write_text(quota)
        (cs / "cpuset.cpus").write_text(core)
        (cs / "cpuset.mems").write_text(
            (cgroups.ROOT / "cpuset" / "cpuset.mems").read_text().strip())
    return dirs


def remove_group() -> None:
    for d in _group_dirs():
        if d.is_dir():
            d.rmdir()


def start_neighbours(kind: str, count: int, dirs: list[Path]) -> list[subprocess.Popen]:
    """`count` processes of load `kind` (`wire`: its sender and receiver; `spinwire`:
    those and `count` spinning ones), each joining the neighbours' group before it runs a
    line of the load."""
    procs_files = [str(d / "cgroup.procs") for d in dirs]

    def join() -> None:
        for f in procs_files:
            Path(f).write_text(str(os.getpid()))

    def popen(argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, preexec_fn=join, start_new_session=True,
                                stdout=subprocess.DEVNULL)

    if kind in WIRED:
        spin = [popen([sys.executable, "-c", LOADS["spin"]])
                for _ in range(count if kind == "spinwire" else 0)]
        return wire_neighbours.start(sys.executable, popen) + spin
    return [popen([sys.executable, "-c", LOADS[kind]]) for _ in range(count)]


def core_ticks(core: str) -> tuple[int, int]:
    """`core`'s ticks in softirq and in all, from /proc/stat (counters that only grow)."""
    for row in Path("/proc/stat").read_text().splitlines():
        f = row.split()
        if f[0] == f"cpu{core}":
            ticks = [int(v) for v in f[1:9]]  # user .. steal (guest is inside user)
            return ticks[6], sum(ticks)
    raise RuntimeError(f"/proc/stat has no line for cpu{core}")


def side(softirq: tuple[int, int], before: tuple[int, int], wire: int, seconds: float
         ) -> dict[str, float]:
    """What a run's database does not hold: the core's softirq share of its ticks over the
    run, and the wire neighbours' bytes per second (kept beside the database as JSON)."""
    ticks = softirq[1] - before[1]
    return {"softirq_share": (softirq[0] - before[0]) / ticks if ticks else 0.0,
            "wire_MBps": wire / seconds / 1e6 if seconds else 0.0}


def stop(procs: list[subprocess.Popen]) -> None:
    """Only the processes started here, by PID."""
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def measured(db: Path) -> tuple[dict[str, float], bool]:
    """Worker 0's and server 0's core-seconds per step and t_iter of the one run in `db`
    (read from a copy: a kept database is never opened for writing), and whether the
    harness's probes read the machine disturbed during it (harness/noise.py)."""
    from harness import noise
    from harness.store import Store

    with shipped.copy_of(db) as copy, Store(copy, readonly=True) as st:
        rows = st.runs("WHERE status = 'ok'")
    if not rows:
        raise RuntimeError(f"the run in {db} did not finish ok")
    r = rows[0]
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    t = r["t_iter_s"]
    return ({"t_iter": t, "worker": cores.get("worker0", 0.0) * t,
             "server": cores.get("server0", 0.0) * t}, noise.state(r) == "disturbed")


def line(rnd: int, cond: str, m: dict[str, float], disturbed: bool,
         extra: dict[str, float] | None = None) -> str:
    return (f"round {rnd + 1} {cond:<7} t_iter {m['t_iter'] * 1e3:6.1f} ms  worker "
            f"{m['worker'] * 1e3:5.1f}  server {m['server'] * 1e3:5.1f} core-ms per step"
            + (f"; core softirq {extra['softirq_share']:.1%}, neighbours' wire "
               f"{extra['wire_MBps']:.0f} MB/s" if extra else "")
            + (" (probes: disturbed)" if disturbed else ""))


def paired(runs: list[dict[str, float]], alone: list[dict[str, float]],
           absolute: bool = False) -> dict[str, float]:
    """Each measure's median over rounds: of the runs themselves (`absolute`), or of each
    run over its own round's run alone. The machine drifts between rounds (here 482 and
    587 ms for the same run alone, 5 minutes apart), so a condition is judged against the
    run alone taken beside it, not against the rounds' pooled median."""
    return {k: statistics.median(m[k] if absolute else m[k] / a[k] for m, a in zip(runs, alone))
            for k in runs[0]}


def report(results: dict[str, list[dict[str, float]]],
           extras: dict[str, list[dict[str, float]]] | None = None) -> str:
    """Each condition's medians over rounds, and over its rounds' runs alone (and the
    median softirq share and wire rate where `extras` has them)."""
    def more(cond: str) -> str:
        got = [e for e in (extras or {}).get(cond, []) if e]
        if not got:
            return ""
        return (f"; core softirq {statistics.median(e['softirq_share'] for e in got):.1%}, "
                f"wire {statistics.median(e['wire_MBps'] for e in got):.0f} MB/s")

    return "\n".join(
        f"{cond:<7} " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in paired(
            ms, results["alone"], absolute=True).items()) + "; over its round's alone run: "
        + ", ".join(f"{k} {v:.3f}" for k, v in paired(ms, results["alone"]).items())
        + more(cond) for cond, ms in results.items())


def read(folder: Path) -> tuple[dict[str, list[dict[str, float]]],
                                dict[str, list[dict[str, float]]]]:
    """A kept run's databases (`--out`: CONDITION-ROUND.db, with CONDITION-ROUND.json
    beside each where the bench wrote one), by condition (alone first) in round order;
    prints each run's line."""
    found: dict[str, dict[int, tuple[dict[str, float], bool]]] = {}
    extra: dict[str, dict[int, dict[str, float]]] = {}
    for db in folder.glob("*-*.db"):
        cond, _, rnd = db.stem.rpartition("-")
        if rnd.isdigit():
            found.setdefault(cond, {})[int(rnd)] = measured(db)
            js = db.with_suffix(".json")
            extra.setdefault(cond, {})[int(rnd)] = (json.loads(js.read_text())
                                                    if js.is_file() else {})
    if "alone" not in found:
        raise FileNotFoundError(f"{folder}: no alone-N.db (give a folder written by --out)")
    order = ["alone"] + sorted(c for c in found if c != "alone")
    for rnd in sorted({n for rs in found.values() for n in rs}):
        for cond in order:
            if rnd in found[cond]:
                print(line(rnd, cond, *found[cond][rnd], extra[cond][rnd]))
    return ({c: [found[c][n][0] for n in sorted(found[c])] for c in order},
            {c: [extra[c][n] for n in sorted(extra[c])] for c in order})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=6,
                    help="each condition this many times, in turns (default 6)")
    ap.add_argument("--kinds", default="spin,stream",
                    help="neighbour loads, comma-separated, of: " + ", ".join(KINDS))
    ap.add_argument("--cpus", type=float, default=0.25,
                    help="the run's host's CPUs (default 0.25); the neighbours get the "
                         "rest of its core")
    ap.add_argument("--out", help="keep the runs' databases here (default: a temporary "
                                  "folder, removed)")
    ap.add_argument("--read", metavar="DIR",
                    help="measure nothing: report the runs kept in DIR by --out (the "
                         "shipped ones: experiments/measured/neighbour-cpu)")
    args = ap.parse_args(argv)
    if args.read:
        try:
            results, extras = read(Path(args.read))
            print()
            print(report(results, extras))
        except (FileNotFoundError, RuntimeError) as exc:
            ap.error(f"--read {args.read}: {exc}")
        return 0
    kinds = [k for k in args.kinds.split(",") if k]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"--kinds {','.join(bad)}: unknown; use some of {', '.join(KINDS)}")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: give 1 or more (each round measures every "
                 "condition once)")
    if not 0 < args.cpus < 1:
        ap.error(f"--cpus {args.cpus:g}: give a share of one core, between 0 and 1")
    if os.geteuid() != 0:
        ap.error("needs root (emulated hosts and cgroups)")
    core = cgroups.plan(1, args.cpus)[0].cpuset
    rest = round(1.0 - args.cpus, 4)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="dnnbench-neighbours-"))
    out.mkdir(parents=True, exist_ok=True)
    toml = out / "neighbour-cpu.toml"
    toml.write_text(EXPERIMENT.format(cpus=args.cpus, link=LINK))
    print(f"one 1-worker run on core {core} at {args.cpus:g} CPU; neighbours hold the other "
          f"{rest:g} CPU of it; {args.rounds} round(s) of: alone, {', '.join(kinds)}",
          flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    extras: dict[str, list[dict[str, float]]] = {}
    try:
        dirs = make_group(rest, core)
        wired = any(k in WIRED for k in kinds)
        moved = wire_neighbours.received_bytes if wired else lambda: 0
        if wired:
            wire_neighbours.up(LINK)
        for rnd in range(args.rounds):
            for cond in ["alone"] + kinds:
                procs = [] if cond == "alone" else start_neighbours(cond, 2, dirs)
                db = out / f"{cond}-{rnd}.db"
                t0, ticks0 = time.monotonic(), core_ticks(core)
                wire0 = moved()
                try:
                    run = subprocess.run([sys.executable, "-m", "harness.cli", "run", "-e",
                                          str(toml), "--db", str(db)], cwd=REPO,
                                         capture_output=True, text=True, timeout=1800)
                finally:
                    stop(procs)
                extra = side(core_ticks(core), ticks0, moved() - wire0, time.monotonic() - t0)
                if run.returncode:
                    print(run.stdout[-2000:], run.stderr[-2000:], file=sys.stderr)
                    raise SystemExit(f"round {rnd + 1}, {cond}: dnnbench run failed "
                                     f"(exit {run.returncode}); its database: {db}")
                db.with_suffix(".json").write_text(json.dumps(extra))
                m, disturbed = measured(db)
                results.setdefault(cond, []).append(m)
                extras.setdefault(cond, []).append(extra)
                print(line(rnd, cond, m, disturbed, extra)
                      + f" ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        remove_group()
        wire_neighbours.down()
    print()
    print(report(results, extras))
    if not args.out:
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
