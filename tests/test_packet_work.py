"""The kernel's packet work on the emulated cluster's shared cores (issue #17):
harness/perfmodel/packetwork.py, the held-out workers' CPU with it (bench.worker_wire), the
simulated step's `packet_work` and `predict --validate --holdout --packet-work`. Read from
shipped databases under experiments/measured/ (copied first)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from harness.perfmodel import network, packetwork
from harness.perfmodel.predict import Compute, Scenario, ServerCost, predict, simulated
from tests.conftest import cli_here, run_cli

MEASURED = Path(__file__).resolve().parent.parent / "experiments" / "measured"


def _run(softirq: float | None, cores: dict[str, float]) -> dict:
    return {"machine_cpu_json": json.dumps({"user": 0.3, "softirq": softirq})
            if softirq is not None else None,
            "cpu_cores_by_process_json": json.dumps(cores)}


def test_the_share_is_the_softirq_time_over_the_runs_busy_cores():
    """The neighbour-wire bench's numbers: 0.05 softirq cores over the run's 0.25 busy
    cores is a fifth more CPU for each of its processes; nothing to say without the
    machine's or the processes' telemetry."""
    r = _run(0.05, {"worker0": 0.12, "server0": 0.13, "scheduler0": 0.0})
    assert packetwork.softirq_cores(r) == 0.05
    assert packetwork.busy_cores(r) == pytest.approx(0.25)
    assert packetwork.share(r) == pytest.approx(0.2)
    assert packetwork.share(_run(None, {"worker0": 0.1})) is None
    assert packetwork.share(_run(0.05, {})) is None


def test_the_fit_is_softirq_cores_against_bytes_per_second():
    """s = s0 + sigma x bytes per second, least squares, sigma kept >= 0; one byte rate
    alone fits nothing."""
    pts = [(0.0, 0.010), (0.0, 0.012), (64e6, 0.030), (64e6, 0.028)]
    f = packetwork.fit(pts)
    assert f is not None
    assert f.s0 == pytest.approx(0.011) and f.sigma == pytest.approx(0.018 / 64e6)
    assert packetwork.fit([(0.0, 0.01), (0.0, 0.02)]) is None
    assert packetwork.fit([(0.0, 0.03), (64e6, 0.01)]).sigma == 0.0
    r = _run(0.04, {"worker0": 0.2, "worker1": 0.2})
    assert packetwork.modelled_share(f, 100e6, r) == pytest.approx(
        (0.011 + 100e6 * 0.018 / 64e6) / 0.4)


def test_the_simulated_step_charges_every_process_the_share():
    """`packet_work` > 0: every CPU cost of the simulated step grows by the share of the
    busy cores the packet work takes at the step's bytes per second across the link, so
    the step grows, by less than the share the note names (the wire's part is not CPU);
    0 leaves the step as it was; one host (nothing across the link) is untouched."""
    c = Compute(0.05, 0.1)
    lk = network.Link("shaped", 0.0, 8e-9)
    base = Scenario("googlenet", 8, nodes=4, strategy="ps", ps=2, image_size=32,
                    num_classes=10, ps_placement="mxnet", ps_colocated=True,
                    cpus_per_host=0.25, server_cost=ServerCost(1e-9, 1e-9), intra=lk,
                    inter=lk)
    assert simulated(base)
    plain = predict(base, c)
    assert predict(replace(base, packet_work=0.0), c).t_iter == plain.t_iter
    charged = predict(replace(base, packet_work=0.3e-9), c)
    note = next(a for a in charged.assumptions if "the kernel's packet work" in a)
    share = float(note.split("costs every process ")[1].split("%")[0]) / 100
    assert 0.01 < share < 0.5
    assert plain.t_iter < charged.t_iter <= plain.t_iter * (1 + share) * 1.01
    alone = replace(base, nodes=1, ps=1)
    assert predict(replace(alone, packet_work=0.3e-9), c).t_iter == predict(alone, c).t_iter


def test_the_shipped_workers_cpu_with_the_packet_work(capsys):
    """bench.worker_wire's packet-work columns over every shipped database whose runs have
    the machine's softirq time (harness/perfmodel/README.md, "Neighbours that move bytes"): on the
    same runs, the wire term alone leaves the workers' CPU at 4 and 8 workers a median 0.0% off
    or 6.2% low; with the measured share of the packet work 2.1% high or 2.0% low; with the
    softirq time fitted from the bytes per second on the small runs 2.6% high or 4.9% low. The
    share rises a median 3.4 points from the small runs (synchronous), 3.3 (asynchronous)."""
    from bench import worker_wire
    from harness.perfmodel import workercost

    checks = [c for db in sorted(MEASURED.glob("*/*.db")) for c in worker_wire.checks_of(db)]
    got = {}
    for asyn in (False, True):
        s = workercost.summary([c for c in checks if c.family[2] == asyn])
        got[asyn] = tuple(round(100 * s[k], 1) for k in (
            "wire_on_packets", "wire_on_packets_bias", "with_packets", "with_packets_bias",
            "with_packets_fitted", "with_packets_fitted_bias", "share_rise")) + (
            s["n_packets"],)
    # the last but one: the share's median rise from the small runs, in points
    assert got == {False: (7.6, 0.0, 6.4, 2.1, 8.1, 2.6, 3.4, 182),
                   True: (6.9, -6.2, 5.7, -2.0, 7.2, -4.9, 3.3, 92)}, got
    assert worker_wire.main([]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("all synchronous"))
    assert " 182 " in line and "6.4% ( +2.1%)" in line and line.endswith("+3.4 pts"), line


def test_holdout_fits_the_packet_work_on_request(tmp_path):
    """`predict --validate --holdout --packet-work` on pieces sweep 1: the softirq time
    per byte across the link fitted on the small runs' machine telemetry, named with its
    runs; the verdicts it gives (it moves them little: README); refused without
    --holdout."""
    db = Path(shutil.copy(MEASURED / "ps-pieces-emulated-repeats" / "r1.db", tmp_path / "r1.db"))
    got = cli_here("predict", "--validate", "--holdout", "--packet-work", "--db", str(db))
    assert got.returncode == 1, got.stdout[-2000:] + got.stderr
    assert ("mxnet @ 1gbit, packet work: 0.134 softirq core-ns per byte across the link, "
            "charged to whichever process runs") in got.stdout
    assert "mxnet @ 1gbit (asynchronous), packet work: 0.159 softirq core-ns" in got.stdout
    assert ("ps-sync: median |error| 4.5% (target <= 10%), worst 6.0% (target <= 25%)"
            in got.stdout)
    assert ("ps-async: median |error| 11.2% (target <= 10%), worst 17.7% (target <= 25%)"
            in got.stdout)
    assert "the kernel's packet work, share of the run's busy cores modelled / measured" \
        in got.stdout
    row = next(ln for ln in got.stdout.splitlines()
               if ln.startswith("  mxnet googlenet b8 32px ps-sync ps2 x4") and " / " in ln
               and "%" in ln and "host 0" not in ln)
    modelled, measured = (float(x.strip().rstrip("%")) for x in row.split()[-3::2])
    assert 0 < modelled < measured, row  # the small runs' cost per byte, short at scale
    bad = run_cli("predict", "--validate", "--packet-work", "--db", str(db))
    assert bad.returncode == 2 and "--packet-work" in bad.stderr and "--holdout" in bad.stderr


def test_the_packet_work_neither_bytes_nor_waits_per_set(capsys):
    """bench.packet_work over every shipped database but the neighbour benches' (their
    softirq time is mostly their neighbours'): fitted on the <= 2-worker runs of all sets
    pooled, the bytes across the link alone leave the larger runs' softirq cores 14% short
    (33.1% off), and a term per shaper wait does not close it (25.7% off, 20.7% over);
    each set fitted on its own small runs, the waits do no better (21.2% -> 24.1% over
    the seven sets that can fit both), every host's TCP segments do no better
    than the bytes (21.9%), and the bytes alone range from 44% short
    (pieces) to 48% over (cori-replicated, whose small runs cannot fit the waits): the form
    is not settled (harness/perfmodel/README.md, "The packet work, held out"). The two sets that
    stored the softirqs by kind, each on its own, say which grow (harness/perfmodel/README.md,
    "Which softirqs grow")."""
    from bench import packet_work

    pts = packet_work.points(sorted(MEASURED.glob("*/*.db")))
    got = {name: (round(100 * err, 1), round(100 * bias, 1))
           for name, _, err, bias in packet_work.judged(pts)}
    assert got == {"bytes": (33.1, -14.3), "segments": (32.6, -13.9),
                   "bytes + waits": (25.7, 20.7)}, got
    assert len(pts) == 767
    per, together, common = packet_work.judged_by_set(pts)
    assert {f: (round(100 * e, 1), round(100 * b, 1), n) for f, (e, b, n) in together.items()
            } == {"bytes": (21.2, -20.7, 190), "segments": (21.9, -21.6, 190),
                  "bytes + waits": (24.1, 11.7, 190)}, together
    assert "cori2017-emulated-replicated-repeats" not in common and len(common) == 7
    bias = {n: round(100 * fits[0][3], 1) for n, fits in per.items()}
    assert bias["ps-pieces-emulated-repeats"] == -44.2, bias
    assert bias["cori2017-emulated-replicated-repeats"] == 48.3, bias
    assert packet_work.main([]) == 0
    out = capsys.readouterr().out
    assert "9.41 core-us per wait" in out and "      1   119         0.0090" in out
    assert "each set on its own small runs:" in out
    assert "bytes + waits  median |error| 24.1% (bias +11.7%) over 190 runs" in out
    # the one set that stored the softirqs by kind (replicated repeats 6 and 7, a slower
    # VM): from 2 to 8 workers the network's softirqs grow with the shapers' waits
    # (NET_TX) and slower than the bytes (NET_RX), the timers' and the scheduler's do not
    # grow; fitted on the small runs, the network's softirqs carry the larger runs better
    # than the bytes
    assert "52 runs that stored them (scaling-emulated-ps-replicated-slow-vm)" in out
    assert "x8/x2          2.47        3.04     9.41     1.93     7.59     1.04     2.68" \
        "     0.43     0.37" in out
    assert "net softirqs   median |error| 9.8% (bias -7.6%)" in out
    assert "bytes          median |error| 14.5% (bias -14.5%): s0 10.7" in out
    # the second (cori2017-emulated on the same VM, 10 Gbit/s: the shaper never waits, so
    # NET_TX stays 0): there the network's softirqs do no better than the bytes
    # (preregistered.md there, predictions 12 and 13: both failed)
    assert "36 runs that stored them (cori2017-emulated-slow-vm)" in out
    assert "x8/x2          2.63        3.96      nan     2.37      nan     1.67     2.52" \
        "     0.41     1.95" in out
    assert "net softirqs   median |error| 26.3% (bias +7.0%)" in out
    assert "bytes          median |error| 23.0% (bias +23.0%): s0 8.9" in out
    # the third (server-load-own on the same VM, one server, no waits): the bytes again
    assert "12 runs that stored them (server-load-own-slow-vm)" in out
    assert "x8/x2          1.80        1.95      nan     1.91      nan     1.51     1.35" \
        "     0.70     1.31" in out
    assert "net softirqs   median |error| 19.6% (bias +19.6%)" in out
    assert "bytes          median |error| 9.7% (bias +9.7%): s0 0.1" in out
    # the fourth (the same sweep on a third AMD VM): the bytes carry it as well
    assert "12 runs that stored them (server-load-own-third-vm)" in out
    assert "x8/x2          1.66        1.85      nan     1.89      nan     1.37     1.33" \
        "     0.55     1.39" in out
    assert "net softirqs   median |error| 15.9% (bias +15.9%)" in out
    assert "bytes          median |error| 10.1% (bias +10.1%): s0 -2.7" in out
    # the fifth (cori2017-emulated-own on that VM)
    assert "18 runs that stored them (cori2017-emulated-own-third-vm)" in out
    assert "bytes          median |error| 17.7% (bias -1.6%): s0 5.3" in out
    # the same two experiments on an Intel VM (server-load-own three times,
    # cori2017-emulated-own three times): the bytes alone predict high
    assert "36 runs that stored them (server-load-own-intel)" in out
    assert "bytes          median |error| 16.2% (bias +16.2%): s0 -1.9" in out
    assert "54 runs that stored them (cori2017-emulated-own-intel)" in out
    assert "bytes          median |error| 12.3% (bias +12.3%): s0 0.6" in out
    # the replicated experiment on that VM (1 Gbit/s: the shapers wait): as on the slow
    # VM's, the network's softirqs carry the larger runs better than the bytes
    assert "26 runs that stored them (scaling-emulated-ps-replicated-intel)" in out
    assert "x8/x2          3.03        2.52     6.96     1.66     5.54     1.06     2.66" \
        "     0.37     1.16" in out
    assert "net softirqs   median |error| 10.5% (bias -10.5%)" in out
    assert "bytes          median |error| 22.6% (bias -22.6%): s0 7.9" in out


def test_the_softirqs_by_kind_fits(capsys):
    """bench.packet_work's last part, on points made to follow the network's softirqs
    (NET_RX + NET_TX) and not the bytes: the fit on those counts carries the larger runs
    exactly, the bytes' does not, the other kinds (timers, scheduler) are the second term
    and never the first; runs that stored no kinds are left out, and with none it says
    which column it needs."""
    from bench import packet_work

    def pt(workers: int, bps: float, rx: float, tx: float, timer: float) -> dict:
        return {"workers": workers, "bps": bps, "s": 0.01 + 2e-6 * (rx + tx),
                "waits": tx / 2, "set": "x", "kinds": {"NET_RX": rx, "NET_TX": tx, "TIMER": timer}}

    pts = [pt(1, 0.0, 500, 100, 900), pt(2, 50e6, 3000, 600, 950),
           pt(2, 60e6, 3400, 800, 940), pt(4, 100e6, 9000, 3000, 990),
           pt(8, 150e6, 15000, 6000, 1000), {**pt(8, 1.0, 0, 0, 0), "kinds": None}]
    assert packet_work.net_softirqs(pts[1]) == 3600
    assert packet_work.other_softirqs(pts[1]) == 950
    got = {name: errs for name, _, errs in packet_work.kind_errors(pts)}
    assert set(got) == {"bytes", "net softirqs", "net + others"}
    assert len(got["net softirqs"]) == 2  # the two larger runs that stored kinds
    assert max(map(abs, got["net softirqs"])) < 1e-9
    assert max(map(abs, got["net + others"])) < 1e-6
    assert min(got["bytes"]) < -0.2  # the bytes grow slower than the counts here
    packet_work.print_kinds([p for p in pts if p["kinds"]])
    out = capsys.readouterr().out
    assert "5 runs that stored them (x)" in out and "2.000 core-us per softirq" in out
    growth = next(ln for ln in out.splitlines() if ln.strip().startswith("x8/x2")).split()
    assert growth[1:4] == ["2.92", "2.73", "8.57"]  # softirq cores, MB/s, waits/s
    packet_work.print_kinds([])
    assert "machine_softirqs_json" in capsys.readouterr().out


def test_bench_packet_work_names_what_it_needs(tmp_path):
    """A database with no runs at both scales (here one 1-worker run's, the neighbour
    bench's): the option, the value and what it needs."""
    from bench import packet_work

    db = MEASURED / "neighbour-cpu" / "alone-0.db"
    for argv in (["--db", str(tmp_path / "nope.db")], ["--db", str(db)]):
        with pytest.raises(SystemExit) as exc:
            packet_work.main(argv)
        assert exc.value.code == 2


def _async_verdict(dbs: list[str], *opts: str) -> str:
    out = cli_here("predict", "--validate", "--holdout", *opts,
                  *[a for db in dbs for a in ("--db", db)]).stdout
    return [ln.split(" over ")[0].replace(" (target <= 10%)", "").replace(
        " (target <= 25%)", "") for ln in out.splitlines()
        if ln.startswith("ps-async: median |error|")][-1]


def test_the_servers_requests_and_the_packet_work_together(tmp_path):
    """`--server-requests --packet-work`: each option fixes a different half of the
    asynchronous step (the busiest server's CPU per request; the workers' CPU at scale,
    charged the kernel's packet work). On the two pieces sweeps as a median sweep
    dist_async fails by default (10.7 / 17.7%) and passes with both (5.1 / 7.5%). Chosen
    on the replicated sweeps 1-4 (each option alone fails dist_async there, both pass it 4
    of 4) and tested on repeat 5, measured after (preregistered.md): it passed with both,
    9.2 / 15.7%, but so did the default, 8.5 / 15.8% (harness/perfmodel/README.md, "The servers'
    requests and the packet work together")."""
    pieces = [str(shutil.copy(MEASURED / "ps-pieces-emulated-repeats" / n, tmp_path / n))
              for n in ("r1.db", "r2.db")]
    assert _async_verdict(pieces) == "ps-async: median |error| 10.7%, worst 17.7%"
    assert _async_verdict(pieces, "--server-requests", "--packet-work") == \
        "ps-async: median |error| 5.1%, worst 7.5%"
    r5 = [str(shutil.copy(MEASURED / "scaling-emulated-ps-replicated-repeats" / "r5.db",
                          tmp_path / "r5.db"))]
    assert _async_verdict(r5) == "ps-async: median |error| 8.5%, worst 15.8%"
    assert _async_verdict(r5, "--server-requests", "--packet-work") == \
        "ps-async: median |error| 9.2%, worst 15.7%"
