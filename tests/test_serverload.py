"""A parameter server's load per step, read from the databases shipped with the claims
of harness/perfmodel/README.md (experiments/measured/, opened read-only: the files keep
their bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import serverload

MEASURED = Path(__file__).resolve().parent.parent / "experiments" / "measured"


def _curves(folder: str, repeats=(1, 2, 3)) -> dict[tuple[str, str, int], serverload.Curve]:
    from harness.store import Store

    runs = []
    for i in repeats:
        with Store(MEASURED / folder / f"r{i}.db", readonly=True) as st:
            runs.append(st.runs())
    return {(c.model, c.strategy, c.servers): c for c in serverload.curves(runs)}


def test_the_readmes_server_load_numbers_recompute():
    """"What a parameter server's CPU per client depends on": one MXNet server on a host
    of its own, 1-8 clients, three sweeps (server-load-own), beside the three
    cori2017-emulated-own repeats of the day before."""
    today = _curves("server-load-own-repeats")
    res = today["resnet50", "ps-sync", 1]
    assert sorted(res.points) == [1, 2, 3, 4, 6, 8]
    assert all(len(v) == 3 for v in res.points.values())
    per = {n: res.med(n, "per_client") for n in res.points}
    # every server host out of quota in most CFS periods, at every client count: the
    # server bound every step, so its CPU per step is the work the step needed
    assert all(s.throttled > 0.84 for v in res.points.values() for s in v)
    assert res.med(1, "throttled") < 0.9 < res.med(8, "throttled")
    # per client flat from 2 to 8 (medians 0.136-0.150 core-s), the 1-client run far
    # above: a line through 2-8 is within 6%, the 1-client point 71% off it
    assert per[1] == pytest.approx(0.2385, abs=5e-4)
    assert per[2] == pytest.approx(0.150, abs=5e-4) and per[8] == pytest.approx(0.1414, abs=5e-4)
    assert all(0.13 < per[n] < 0.151 for n in (2, 3, 4, 6, 8)), per
    a, b = res.fit_past_one()
    assert all(abs((a + b * n) / res.med(n, "core_s") - 1) < 0.06 for n in (2, 3, 4, 6, 8))
    assert res.med(1, "core_s") / (a + b) - 1 == pytest.approx(0.71, abs=0.01)
    # what a fit on 1 and 2 clients extrapolates to 8: 41% low
    u, c = res.fit_from_two()
    assert (u + 8 * c) / res.med(8, "core_s") - 1 == pytest.approx(-0.41, abs=0.01)
    # one configuration, three sweeps: x4's per client 0.099 in one, 0.151 in another
    assert sorted(round(s.per_client, 3) for s in res.points[4]) == [0.099, 0.137, 0.151]
    # wake-ups per client fall by 16% from 2 to 8, the CPU per client by 6%
    assert res.med(8, "voluntary") / 8 / (res.med(2, "voluntary") / 2) == pytest.approx(
        0.84, abs=0.01)
    # over the same run's worker's CPU per step: falls from 0.84 at 2 to 0.62 at 8
    assert res.med(2, "per_client_over_worker") == pytest.approx(0.835, abs=0.005)
    assert res.med(8, "per_client_over_worker") == pytest.approx(0.619, abs=0.005)
    # HEP-CNN: its server out of quota in 11% of periods at 1 client, 77% at 8, the step
    # 171 ms to 297 ms while the worker's CPU per step stays 0.022-0.026 core-s
    hep = today["hepcnn", "ps-sync", 1]
    assert hep.med(1, "throttled") == pytest.approx(0.112, abs=0.001)
    assert hep.med(8, "throttled") == pytest.approx(0.770, abs=0.001)
    assert all(0.021 < hep.med(n, "worker_core_s") < 0.026 for n in hep.points)
    text = serverload.table(list(today.values()))
    assert "fitted on 1 and 2 clients: 0.177 + 0.062 n core-s, 0.669 at 8 (-41% of the " \
           "measured 1.131); through 2 to 8 clients: -0.005 + 0.144 n" in text


@pytest.mark.parametrize("folder, repeat, per, throttled, line, off, at_8", [
    # harness/perfmodel/README.md, "The same sweep on the slow VM": the line through 2 to
    # 8 clients holds at 1 client too, so the fit on 1 and 2 clients carries to 8 (the
    # held-out verdict, 6.1 / 12.0%, is the scoreboard's)
    ("server-load-own-slow-vm", 4, (0.304, 0.221, 0.18, 0.16, 0.17, 0.145),
     (0.92, 0.93, 0.95, 0.96, 0.97, 0.97), (0.169, 0.128), 0.02, 0.09),
    # "The same sweep on a third VM": a per-step term again, the 1-client run below the
    # line, so the fit on 1 and 2 clients puts 8 clients high (held out: +24.2% at 8)
    ("server-load-own-third-vm", 5, (0.193, 0.158, 0.129, 0.124, 0.123, 0.107),
     (0.84, 0.94, 0.95, 0.95, 0.97, 0.97), (0.119, 0.095), -0.10, 0.22),
    # "Both on a fourth AMD VM of the same CPU and kernel": the 1-client run below the
    # line again and the 2-client run above it, so the fit on 1 and 2 clients puts 8
    # clients 55% high (held out: +55.0% at 8)
    ("server-load-own-fourth-vm", 9, (0.264, 0.224, 0.163, 0.138, 0.138, 0.125),
     (0.86, 0.94, 0.96, 0.96, 0.97, 0.97), (0.211, 0.098), -0.15, 0.55),
    # "The same two experiments on an Intel VM, server-load-own twice": the 1-client run 11%
    # above the line in one sweep and on it in the next, the fit on 1 and 2 clients within
    # 2% at 8 in both
    ("server-load-own-intel", 6, (0.217, 0.171, 0.151, 0.142, 0.148, 0.139),
     (0.86, 0.95, 0.95, 0.96, 0.97, 0.97), (0.063, 0.132), 0.11, -0.02),
    ("server-load-own-intel", 7, (0.238, 0.183, 0.165, 0.162, 0.163, 0.144),
     (0.87, 0.96, 0.95, 0.96, 0.97, 0.97), (0.102, 0.136), 0.0, -0.01),
    # "The same VM later": a third sweep after the VM's first hour, every run faster, the
    # 1-client run 19% above the line, so the fit on 1 and 2 clients puts 8 16% low
    ("server-load-own-intel", 8, (0.212, 0.151, 0.141, 0.128, 0.141, 0.125),
     (0.84, 0.94, 0.96, 0.97, 0.97, 0.98), (0.056, 0.122), 0.19, -0.16),
])
def test_the_later_vms_server_load_numbers_recompute(folder, repeat, per, throttled, line,
                                                     off, at_8):
    """server-load-own on each of four later VMs (ResNet-50, one server): its cost per
    client and throttling by clients, the line through 2 to 8 clients, where the 1-client
    run sits against it, and how far the fit on 1 and 2 clients lands at 8."""
    res = _curves(folder, repeats=(repeat,))["resnet50", "ps-sync", 1]
    clients = sorted(res.points)
    assert clients == [1, 2, 3, 4, 6, 8]
    assert tuple(round(res.med(n, "per_client"), 3) for n in clients) == per
    assert tuple(round(res.med(n, "throttled"), 2) for n in clients) == throttled
    a, b = res.fit_past_one()
    assert (round(a, 3), round(b, 3)) == line
    assert res.med(1, "core_s") / (a + b) - 1 == pytest.approx(off, abs=0.01)
    u, c = res.fit_from_two()
    assert (u + 8 * c) / res.med(8, "core_s") - 1 == pytest.approx(at_8, abs=0.01)


def test_the_slow_vms_workers_cpu_falls_with_clients():
    """On the slow VM the workers' CPU per step falls from 2 to 8 clients (it grew on
    r1-r3): the same-run worker is no gauge of the server's cost."""
    res = _curves("server-load-own-slow-vm", repeats=(4,))["resnet50", "ps-sync", 1]
    assert res.med(2, "worker_core_s") == pytest.approx(0.316, abs=5e-4)
    assert res.med(8, "worker_core_s") == pytest.approx(0.274, abs=5e-4)


def test_sync_and_async_servers_are_separate_curves():
    """The ps-async experiment holds dist_sync and dist_async runs of one network and
    server count: each strategy is its own curve (one curve of both would take each
    client count's median across two different servers)."""
    got = _curves("scaling-emulated-ps-async-repeats")
    assert {(m, s) for m, s, _ in got} == {("googlenet", "ps-sync"), ("googlenet", "ps-async")}
    for c in got.values():
        assert all(s.strategy == c.strategy and s.servers == c.servers
                   for v in c.points.values() for s in v)


def test_runs_stored_before_the_counters_read_as_unmeasured():
    """The cori2017-emulated-own repeats (2026-12-03, before context switches and
    throttling were stored): their servers' CPU is read, their wake-ups and throttling
    print as unmeasured, not as zero."""
    old = _curves("cori2017-emulated-own-repeats")
    res = old["resnet50", "ps-sync", 1]
    assert sorted(res.points) == [1, 2, 4, 8]
    assert res.med(8, "voluntary") is None and res.med(8, "throttled") is None
    text = serverload.table(list(old.values()))
    assert "resnet50 ps-sync, 4 servers:" in text and "hepcnn ps-sync, 2 servers:" in text
    # the day before: per client fell from 0.141 at 2 clients to 0.098 at 8, the 1-client
    # run at 0.134, so the fit on 1 and 2 clients overshot 8 by 49% (the held-out FAIL)
    assert res.med(2, "per_client") == pytest.approx(0.1408, abs=5e-4)
    assert res.med(8, "per_client") == pytest.approx(0.0978, abs=5e-4)
    u, c = res.fit_from_two()
    assert (u + 8 * c) / res.med(8, "core_s") - 1 == pytest.approx(0.49, abs=0.01)
    assert res.med(2, "per_client_over_worker") == pytest.approx(0.945, abs=0.005)
    assert res.med(8, "per_client_over_worker") == pytest.approx(0.593, abs=0.005)
    assert "+49% of the measured 0.783" in text
