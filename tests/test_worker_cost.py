"""A parameter-server worker's own CPU at scale (issue #17): its cost per byte across the
link (harness/perfmodel/workercost.py, `--worker-wire`), and rank 0's host split into its
worker's and its servers' CPU, measured against modelled (harness/perfmodel/hostcpu.py;
harness/perfmodel/README.md, "Where rank 0's host's CPU goes"). Recomputed from the databases
shipped under experiments/measured/ (copied first)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.perfmodel import placement, psstep, workercost
from harness.store import Store
from models.cost import cost
from tests.conftest import cli_here, run_cli

MEASURED = Path(__file__).resolve().parent.parent / "experiments" / "measured"
PIECES = MEASURED / "ps-pieces-emulated-repeats"


def _copy(tmp_path: Path, db: Path) -> Path:
    return Path(shutil.copy(db, tmp_path / db.name))


def test_a_worker_without_a_server_beside_it_spends_more_cpu(tmp_path):
    """The measurement behind the term: in every 2-server 4-worker run of both pieces
    sweeps (servers on hosts 0 and 1), the workers of hosts 2 and 3, whose every byte
    crosses the link, spent more CPU per step than the workers beside a server (half of
    their bytes over loopback): the lesser of the two 4-15% more than the greater of the
    others. Their compute is the same."""
    ratios = []
    for name in ("r1.db", "r2.db"):
        with Store(_copy(tmp_path, PIECES / name), readonly=True) as st:
            for r in st.runs("WHERE status = 'ok' AND ps = 2 AND workers = 4"):
                pts = workercost.points(r)
                far = [p.core_s for p in pts if p.remote_bytes > 40e6]
                near = [p.core_s for p in pts if p.remote_bytes < 40e6]
                assert len(far) == len(near) == 2
                ratios.append(min(far) / max(near))
    assert len(ratios) == 24
    assert min(ratios) > 1.03, sorted(ratios)


def test_the_fit_is_the_slope_within_each_configuration():
    """An intercept per configuration (what a worker computes) and one slope (its cost per
    byte across the link), kept >= 0; None where no configuration's workers moved
    different bytes (servers on hosts of their own: every byte crosses at every scale)."""
    def pts(cfg: str, base: float, slope: float) -> list[workercost.WorkerPoint]:
        return [workercost.WorkerPoint((cfg,), x, base + slope * x, "r")
                for x in (0.0, 20e6, 45e6)]

    got = workercost.fit(pts("a", 0.060, 0.2e-9) + pts("b", 0.200, 0.2e-9))
    assert got == pytest.approx(0.2e-9, rel=1e-9)
    assert workercost.fit(pts("a", 0.060, -0.1e-9)) == 0.0
    flat = [workercost.WorkerPoint(("a",), 45e6, y, "r") for y in (0.06, 0.07)]
    assert workercost.fit(flat) is None


def test_the_simulated_step_spends_the_cost_on_the_workers_host():
    """psstep with `per_wire_byte`: worker 1, on a host without the server, spends w per
    byte of its push and of its pull (the whole gradient each way) on its host's quota,
    and nothing else changes where w = 0. Its host's busy core-seconds per step grow by
    exactly 2 G w; worker 0's pushes stay on loopback, and the step, bound by rank 0's
    host (the server beside it keeps its quota busy all step), does not change."""
    net = cost("googlenet", 32, 10)
    plc = placement.place([(t.key, t.nbytes) for t in net.tensors], 1, "mxnet", "googlenet")
    quota, w = 0.25, 0.5e-9

    def play(per_wire_byte: float) -> psstep.StepResult:
        return psstep.simulate(net, plc.assignment, 2, 1, quota, 125e6, 0.02, 0.04,
                               1e-9, 1e-9, per_wire_byte=per_wire_byte)

    plain, wired = play(0.0), play(w)
    assert plain == psstep.simulate(net, plc.assignment, 2, 1, quota, 125e6, 0.02, 0.04,
                                    1e-9, 1e-9)
    assert wired.t_iter == pytest.approx(plain.t_iter) and wired.cpu_busy[0] == 1.0
    # host 1 runs only worker 1 (and its network thread): busy share x step x quota
    core_s = {r: r.cpu_busy[1] * r.t_iter * quota for r in (plain, wired)}
    assert core_s[plain] == pytest.approx(0.06, rel=0.01)
    assert core_s[wired] - core_s[plain] == pytest.approx(2 * net.gradient_bytes * w,
                                                          rel=0.02)


def test_the_shipped_workers_cpu_held_out_each_way(capsys):
    """bench.worker_wire over every shipped database: the workers' mean CPU per step at 4
    and 8 workers from the runs with <= 2. The small runs' mean (what the model keeps):
    11.1% (bias -6.3%) synchronous over 266 runs, 11.2% (-11.2%) asynchronous over 104;
    with the cost per byte across the link 8.4% (-2.1%) and 7.9% (-6.8%)."""
    from bench import worker_wire

    checks = [c for db in sorted(MEASURED.glob("*/*.db")) for c in worker_wire.checks_of(db)]
    got = {}
    for asyn in (False, True):
        s = workercost.summary([c for c in checks if c.family[2] == asyn])
        got[asyn] = (s["n"], round(100 * s["constant"], 1), round(100 * s["constant_bias"], 1),
                     round(100 * s["with_wire"], 1), round(100 * s["with_wire_bias"], 1))
    assert got == {False: (266, 11.1, -6.3, 8.4, -2.1),
                   True: (104, 11.2, -11.2, 7.9, -6.8)}, got
    assert worker_wire.main([]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("all asynchronous"))
    assert " 104 " in line and "11.2%" in line and "7.9%" in line, line


@pytest.mark.parametrize("bench", ["worker_wire", "host_cpu"])
def test_the_benches_name_a_missing_database(tmp_path, bench):
    import importlib

    with pytest.raises(SystemExit) as exc:
        importlib.import_module(f"bench.{bench}").main(["--db", str(tmp_path / "nope.db")])
    assert exc.value.code == 2


def test_holdout_splits_rank_0s_host_and_fits_the_wire_on_request(tmp_path):
    """`predict --validate --holdout` on pieces sweep 1 prints each simulated row's host
    split: the 2-server synchronous 4-worker row is predicted +3.4% because its servers
    are modelled 18% high and its worker 15% low. `--worker-wire` fits the cost (0.156
    core-ns per byte synchronous, 0.273 asynchronous) and moves the step little; the flag
    is refused without --holdout."""
    db = _copy(tmp_path, PIECES / "r1.db")
    plain = cli_here("predict", "--validate", "--holdout", "--db", str(db))
    wired = cli_here("predict", "--validate", "--holdout", "--worker-wire", "--db", str(db))
    assert plain.returncode == wired.returncode == 1, wired.stdout[-2000:] + wired.stderr
    assert "rank 0's host's CPU per step, core-ms measured / modelled" in plain.stdout
    row = next(ln for ln in plain.stdout.splitlines()
               if ln.startswith("  mxnet googlenet b8 32px ps-sync ps2 x4") and "host 0:" in ln)
    assert row.endswith("host 0: worker 78 / 67 (-15%), servers 125 / 148 (+18%)"), row
    assert "workers' CPU across the link" not in plain.stdout
    assert ("workers' CPU across the link, mxnet @ 1gbit: 0.156 core-ns per byte a worker "
            "moves to or from another host") in wired.stdout
    assert "mxnet @ 1gbit (asynchronous): 0.273 core-ns per byte" in wired.stdout
    assert ("ps-sync: median |error| 2.8% (target <= 10%), worst 3.7% (target <= 25%)"
            in wired.stdout)
    assert ("ps-async: median |error| 11.0% (target <= 10%), worst 15.2% (target <= 25%)"
            in wired.stdout)
    bad = run_cli("predict", "--validate", "--worker-wire", "--db", str(db))
    assert bad.returncode == 2 and "--worker-wire" in bad.stderr and \
        "Traceback" not in bad.stderr


def test_bench_host_cpu_shows_the_terms_that_cancel(capsys):
    """Why the request term makes the synchronous step worse (harness/perfmodel/README.md, "Where
    rank 0's host's CPU goes"), on pieces sweep 1: per byte the servers beside rank 0 are off by a
    median 16.5% either way and its worker 12.9% low, and the step comes out 3.0% off; with the
    term the servers come within 8.0% (low) and the step, its worker still low, 7.4%."""
    from bench import host_cpu

    assert host_cpu.main(["--db", str(PIECES / "r1.db"), "--way", "default",
                          "--way", "requests"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0] + " " + ln.split()[1] + " " + ln.split()[2]: ln
             for ln in out.splitlines() if ln.startswith("ps-pieces")}
    assert lines["ps-pieces-emulated-repeats/r1.db ps-sync default"].split()[3:] == \
        ["4", "-12.9%", "(12.9%)", "-0.9%", "(16.5%)", "+2.7%", "(", "3.0%)"]
    assert lines["ps-pieces-emulated-repeats/r1.db ps-sync requests"].split()[3:] == \
        ["4", "-11.0%", "(11.0%)", "-8.0%", "(", "8.0%)", "-4.3%", "(", "7.4%)"]


def test_the_split_reads_each_server_by_its_host(tmp_path):
    """hostcpu matches the telemetry's servers to hosts by launch index (server i on host
    i), not by rank, and models the server the placement puts there: on 2 servers
    ps-lite's numbering puts the 16.9 of GoogLeNet's 22.4 MB beside rank 0."""
    from harness.perfmodel import holdout

    with Store(_copy(tmp_path, PIECES / "r1.db"), readonly=True) as st:
        res = holdout.validate(st)
        rid = next(x.run_id for x in res.rows
                   if x.label.startswith("mxnet googlenet b8 32px ps-sync ps2 x4"))
        r = st.runs("WHERE run_id = ?", (rid,))[0]
    row = next(x for x in res.rows if x.run_id == r["run_id"])
    cores, t = json.loads(r["cpu_cores_by_process_json"]), r["t_iter_s"]
    h = row.host_cpu
    assert h is not None and h.host == 0
    assert h.servers_measured == pytest.approx(cores["server0"] * t)
    assert h.worker_measured == pytest.approx(cores["worker0"] * t)
    # the fitted per-byte cost on the 16.9 MB server's bytes, 4 clients
    assert h.servers_modelled == pytest.approx(16.9e6 * (1.667e-9 + 4 * 1.773e-9), rel=0.01)


def test_the_kept_neighbour_runs_read_back(capsys):
    """bench.neighbour_cpu --read on the shipped runs (harness/perfmodel/README.md, "Busy
    neighbours on a worker's core"): six rounds of one 1-worker run alone and beside spinning and
    streaming neighbours on its core; each run over its own round's run alone."""
    from bench import neighbour_cpu

    folder = MEASURED / "neighbour-cpu"
    results, extras = neighbour_cpu.read(folder)
    assert [len(v) for v in results.values()] == [6, 6, 6]
    assert all(e == {} for es in extras.values() for e in es)  # kept before the JSON
    assert list(results) == ["alone", "spin", "stream"]
    got = {c: {k: round(v, 3) for k, v in neighbour_cpu.paired(ms, results["alone"]).items()}
           for c, ms in results.items()}
    assert got["spin"] == {"t_iter": 0.972, "worker": 0.99, "server": 0.971}
    assert got["stream"] == {"t_iter": 1.047, "worker": 1.046, "server": 1.032}
    assert neighbour_cpu.main(["--read", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "round 6 alone   t_iter  792.4 ms" in out
    assert "stream  t_iter 590.9 ms" in out


def test_the_kept_wire_neighbour_runs_read_back(capsys):
    """bench.neighbour_cpu --read on the runs beside neighbours that only move bytes
    (harness/perfmodel/README.md, "Neighbours that move bytes"): the run's worker and server spend
    about a fifth more CPU per step, and the core's softirq share kept beside each database says
    the bytes were moving."""
    from bench import neighbour_cpu

    folder = MEASURED / "neighbour-wire"
    results, extras = neighbour_cpu.read(folder)
    assert list(results) == ["alone", "spin", "wire"]
    got = {c: {k: round(v, 3) for k, v in neighbour_cpu.paired(ms, results["alone"]).items()}
           for c, ms in results.items()}
    assert got["wire"] == {"t_iter": 1.198, "worker": 1.187, "server": 1.218}
    assert got["spin"] == {"t_iter": 0.926, "worker": 0.928, "server": 0.914}
    assert all(e["wire_MBps"] > 110 and e["softirq_share"] > 0.04 for e in extras["wire"])
    assert all(e["wire_MBps"] < 0.01 and e["softirq_share"] < 0.01 for e in extras["alone"])
    assert neighbour_cpu.main(["--read", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "round 2 wire    t_iter  841.7 ms  worker  95.2" in out
    assert "core softirq 5.0%, wire 119 MB/s" in out


def test_the_kept_spinwire_runs_read_back():
    """The fully booked core (harness/perfmodel/README.md, "Neighbours that move bytes"): beside
    spinning and wire neighbours together the run's worker pays about a third of what it pays beside
    the wire neighbours alone, each run over its round's spin run."""
    from statistics import median

    from bench import neighbour_cpu

    results, extras = neighbour_cpu.read(MEASURED / "neighbour-spinwire")
    assert list(results) == ["alone", "spin", "spinwire", "wire"]
    over_spin = {c: round(median(m["worker"] / s["worker"]
                                 for m, s in zip(results[c], results["spin"])), 3)
                 for c in ("wire", "spinwire")}
    assert over_spin == {"wire": 1.317, "spinwire": 1.104}
    assert all(e["wire_MBps"] > 110 for c in ("wire", "spinwire") for e in extras[c])


def test_bench_neighbour_cpu_refuses_bad_input(tmp_path):
    """An unknown load, a share outside one core, or a folder with no kept runs: the
    option, the value and what to give, before anything starts."""
    from bench import neighbour_cpu

    for argv in (["--kinds", "spin,burn"], ["--cpus", "1.5"], ["--rounds", "0"],
                 ["--read", str(tmp_path)]):
        with pytest.raises(SystemExit) as exc:
            neighbour_cpu.main(argv)
        assert exc.value.code == 2


@pytest.mark.heavy  # root, and a rate it measures: never beside another test
@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and cgroups need root")
def test_wire_neighbours_move_bytes_at_the_link_rate_and_leave_nothing_behind():
    """bench.neighbour_cpu's `wire` neighbours: a TCP stream between two namespaces of the
    bench's own, shaped like an emulated host's link, run in the neighbours' cgroup; the
    core's softirq share and the bytes moved are read around it; afterwards no namespace,
    guard route or cgroup of theirs is left (DESIGN.md §9: the guard is up first)."""
    import time

    from bench import neighbour_cpu, wire_neighbours
    from runners import emulated

    dirs = neighbour_cpu.make_group(0.5, "0")
    try:
        wire_neighbours.up("100mbit")
        assert any(r.split()[:2] == ["unreachable", wire_neighbours.SUBNET]
                   for r in emulated.routes())
        ticks, moved, t0 = neighbour_cpu.core_ticks("0"), wire_neighbours.received_bytes(), \
            time.monotonic()
        procs = neighbour_cpu.start_neighbours("wire", 2, dirs)
        try:
            time.sleep(2.0)
            assert [p.poll() for p in procs] == [None, None]
            joined = {int(x) for d in dirs for x in (d / "cgroup.procs").read_text().split()}
            assert {p.pid for p in procs} <= joined
        finally:
            neighbour_cpu.stop(procs)
        side = neighbour_cpu.side(neighbour_cpu.core_ticks("0"), ticks,
                                  wire_neighbours.received_bytes() - moved,
                                  time.monotonic() - t0)
        # `spinwire`: the same two and two spinning ones, every one in the group
        procs = neighbour_cpu.start_neighbours("spinwire", 2, dirs)
        try:
            time.sleep(0.5)
            assert [p.poll() for p in procs] == [None] * 4
            joined = {int(x) for d in dirs for x in (d / "cgroup.procs").read_text().split()}
            assert {p.pid for p in procs} <= joined
        finally:
            neighbour_cpu.stop(procs)
    finally:
        neighbour_cpu.remove_group()
        wire_neighbours.down()
    # 100 Mbit/s is 12.5 MB/s of frames; the connection's start takes a little of the 2 s
    assert 5 < side["wire_MBps"] < 14
    assert 0 <= side["softirq_share"] < 1
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in listed for ns in wire_neighbours.NAMESPACES)
    assert emulated.routes_overlapping(wire_neighbours.SUBNET) == [] and not any(
        r.split()[:2] == ["unreachable", wire_neighbours.SUBNET] for r in emulated.routes())
    assert not any(d.exists() for d in dirs)
    wire_neighbours.down()  # idempotent
