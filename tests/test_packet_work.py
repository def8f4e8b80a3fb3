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
from tests.conftest import run_cli

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
    the machine's softirq time (README, "Neighbours that move bytes"): on the same runs,
    the wire term alone leaves the workers' CPU at 4 and 8 workers a median 5-6% low; with
    the measured share of the packet work 1.2-1.3% low; with the softirq time fitted from
    the bytes per second on the small runs in between. The share rises a median 4.6 points
    from the small runs (synchronous), 3.5 (asynchronous)."""
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
    assert got == {False: (6.4, -5.3, 5.1, -1.3, 6.7, -1.5, 4.6, 74),
                   True: (6.5, -5.8, 4.4, -1.2, 6.2, -4.2, 3.5, 62)}, got
    assert worker_wire.main([]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines()
                if ln.startswith("all synchronous"))
    assert " 74 " in line and "5.1% ( -1.3%)" in line and line.endswith("+4.6 pts"), line


def test_holdout_fits_the_packet_work_on_request(tmp_path):
    """`predict --validate --holdout --packet-work` on pieces sweep 1: the softirq time
    per byte across the link fitted on the small runs' machine telemetry, named with its
    runs; the verdicts it gives (it moves them little: README); refused without
    --holdout."""
    db = Path(shutil.copy(MEASURED / "ps-pieces-emulated-repeats" / "r1.db", tmp_path / "r1.db"))
    got = run_cli("predict", "--validate", "--holdout", "--packet-work", "--db", str(db))
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
    pooled, the bytes across the link alone leave the larger runs' softirq cores a median
    18% short, and a term per shaper wait looks like the missing one (14.8% off, 12.2%
    over); but each set fitted on its own small runs, the waits make it worse (18.4% ->
    32.6% over the three sets that can fit both), every host's TCP segments do no better
    than the bytes (19.6%), and the bytes alone range from 44% short
    (pieces) to 48% over (cori-replicated, whose small runs cannot fit the waits): the form
    is not settled (README, "The packet work, held out")."""
    from bench import packet_work

    pts = packet_work.points(sorted(MEASURED.glob("*/*.db")))
    got = {name: (round(100 * err, 1), round(100 * bias, 1))
           for name, _, err, bias in packet_work.judged(pts)}
    assert got == {"bytes": (19.7, -17.8), "segments": (21.0, -18.5),
                   "bytes + waits": (14.8, 12.2)}, got
    assert len(pts) == 306
    per, together, common = packet_work.judged_by_set(pts)
    assert {f: (round(100 * e, 1), round(100 * b, 1), n) for f, (e, b, n) in together.items()
            } == {"bytes": (18.4, -17.0, 124), "segments": (19.6, -18.1, 124),
                  "bytes + waits": (32.6, 23.2, 124)}, together
    assert "cori2017-emulated-replicated-repeats" not in common and len(common) == 3
    bias = {n: round(100 * fits[0][3], 1) for n, fits in per.items()}
    assert bias["ps-pieces-emulated-repeats"] == -44.2, bias
    assert bias["cori2017-emulated-replicated-repeats"] == 48.3, bias
    assert packet_work.main([]) == 0
    out = capsys.readouterr().out
    assert "6.01 core-us per wait" in out and "      1    50         0.0112" in out
    assert "each set on its own small runs:" in out
    assert "bytes + waits  median |error| 32.6% (bias +23.2%) over 124 runs" in out


def test_bench_packet_work_names_what_it_needs(tmp_path):
    """A database with no runs at both scales (here one 1-worker run's, the neighbour
    bench's): the option, the value and what it needs."""
    from bench import packet_work

    db = MEASURED / "neighbour-cpu" / "alone-0.db"
    for argv in (["--db", str(tmp_path / "nope.db")], ["--db", str(db)]):
        with pytest.raises(SystemExit) as exc:
            packet_work.main(argv)
        assert exc.value.code == 2
