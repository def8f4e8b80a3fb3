"""The performance model against real 2-process runs on this host.

Two claims, two stated tolerances (measured on this 2-core shared VM):

* Iteration model (t_iter = io + h2d + f + b + comm + u, each phase timed in the job)
  against throughput iterations that ran alternately in the same job: 20%. Observed:
  single-device within 3%, 2 DDP workers +0.6, +2.1, +3.2% (2026-12-02; +9% here and +29%
  in one CI run while breakdown's allreduce flattened and copied the gradients each step).
* The alpha-beta prediction (compute measured in the 2-worker job, communication from the
  link fitted by a separate commbench job): 35%. Observed over 7 runs: -6.7, -7.4, -8.8,
  -7.3, -9.5, -17.3, -25.3% (the last two with other load on the machine): a consistent
  under-prediction (DDP's own bucketing/hook overhead) plus the spread of a link measured
  in another job (gloo fits of 0.74-1.26 GB/s). 35% still fails a model that ignores
  communication altogether (about -42% here). Errors are printed (pytest -s).
"""

import io
import json
import os
import re

import pytest

from harness import commbench
from harness.experiment import from_dict
from harness.perfmodel.validate import ITERATION_MODEL, checks, median_abs_error
from harness.store import Store
from harness.sweep import run_experiment

ITERATION_TOLERANCE = 0.20
ALPHA_BETA_TOLERANCE = 0.35


@pytest.mark.slow
def test_predicted_vs_measured_two_workers(torch_env, tmp_path):
    exp = from_dict({
        "name": "validate",
        "defaults": {"image_size": 32, "batch_size": 8, "num_classes": 100, "steps": 16,
                     "warmup": 3, "trials": 5, "target_width": 0, "threads": 1,
                     "model": "googlenet",
                     "framework": "torch"},
        "matrix": {"strategy": ["single", "allreduce"], "devices_per_node": [1, 2],
                   "mode": ["throughput", "breakdown"]},
        "exclude": [{"strategy": "single", "devices_per_node": 2},
                    {"strategy": "allreduce", "devices_per_node": 1}]})
    with Store(tmp_path / "v.db") as store:
        commbench.run("torch-gloo", 2, commbench.parse_sizes("4..64M"), store, iters=15)
        summary = run_experiment(exp, store, out=io.StringIO())
        assert summary.ok == 4, summary
        cs = checks(store)
    multi = [c for c in cs if c.workers == 2 and not c.basis.startswith(ITERATION_MODEL)]
    assert len(multi) == 1 and "measured:torch-gloo" in multi[0].basis
    assert "compute measured in place by the 2-worker breakdown run" in multi[0].basis
    assert "alternating with the breakdown trials in the same job" in multi[0].basis
    for c in cs:
        print(f"{c.label}: measured {c.measured * 1e3:.1f} ms, predicted "
              f"{c.predicted * 1e3:.1f} ms, error {c.error:+.1%}")
        bound = ITERATION_TOLERANCE if c.basis.startswith(ITERATION_MODEL) else \
            ALPHA_BETA_TOLERANCE
        assert abs(c.error) < bound, c
    assert sum(c.basis.startswith(ITERATION_MODEL) for c in cs) == 2  # 1 and 2 workers
    print(f"median absolute error {median_abs_error(cs):.1%}")


# --- held-out validation: fitted on <= 2 workers, judged on more ---------------------------


def test_holdout_refuses_without_runs_at_both_scales(tmp_path):
    from harness.perfmodel import holdout
    from tests.conftest import run_cli

    db = tmp_path / "empty.db"
    with Store(str(db)) as store:
        with pytest.raises(holdout.HoldoutError, match="needs runs at both scales"):
            holdout.validate(store)
    proc = run_cli("predict", "--validate", "--holdout", "--db", str(db))
    assert proc.returncode == 2
    assert "has throughput runs at no worker counts" in proc.stderr
    assert "experiments/scaling-emulated.toml" in proc.stderr


def test_holdout_names_the_runs_it_has_no_model_for(tmp_path):
    """TensorFlow's ParameterServerStrategy runs at 1, 2 and 4 workers: the held-out
    validation says it does not model them (not that the runs are missing a scale), in
    the CLI too; beside a curve it does model, they are listed as not validated."""
    from frameworks.contract import RunSpec
    from harness import collect
    from harness.perfmodel import holdout
    from harness.store import RunRecord
    from tests.conftest import run_cli

    db = tmp_path / "tfps.db"
    with Store(str(db)) as store:
        for n in (1, 2, 4):
            spec = RunSpec("tensorflow", "googlenet", batch_size=8, image_size=32,
                           num_classes=10, strategy="ps-async", nodes=n, ps=1)
            store.add(RunRecord({**collect.base_row(spec, "tfps", f"tf{n}", "ok"),
                                 "t_iter_s": 0.5 + 0.1 * n}))
        with pytest.raises(holdout.HoldoutError, match="is of a strategy the model predicts: "
                           "tensorflow googlenet b8 32px ps-async ps1 x4: not modelled"):
            holdout.validate(store)
    proc = run_cli("predict", "--validate", "--holdout", "--db", str(db))
    assert proc.returncode == 2 and "ParameterServerStrategy" in proc.stderr, proc.stderr
    assert "needs runs at both scales" not in proc.stderr
    with Store(str(db)) as store:
        for n in (1, 2, 4):
            spec = RunSpec("torch", "googlenet", batch_size=8, image_size=32, num_classes=10,
                           strategy="allreduce", nodes=n)
            store.add(RunRecord({**collect.base_row(spec, "tfps", f"pt{n}", "ok"),
                                 "t_iter_s": 0.5 + 0.1 * n}))
        res = holdout.validate(store)
    assert [r.label for r in res.rows] == ["torch googlenet b8 32px allreduce x4"], res.rows
    assert res.skipped == ["tensorflow googlenet b8 32px ps-async ps1 x4: "
                           + holdout._unmodelled({"strategy": "ps-async"})], res.skipped


def test_holdout_link_fit_recovers_alpha_and_beta_from_two_gradient_sizes():
    """The fit is the model's own structure run backwards: exposed communication made by
    the model for a known link at 2 workers of two networks gives that link back."""
    from dataclasses import replace

    from harness.perfmodel import holdout, network
    from harness.perfmodel.predict import Compute, Scenario, predict

    alpha, beta = 80e-6, 1 / 1.25e8
    points = []
    for model in ("googlenet", "resnet50"):
        sc = Scenario(model, 8, nodes=2, image_size=32, num_classes=10, overlap=False)
        compute = Compute(0.1, 0.2)
        a, b = holdout._coefficients(sc, compute)
        lk = network.Link("x", alpha, beta)
        exposed = predict(replace(sc, intra=lk, inter=lk), compute).t_comm_exposed
        points.append((a, b, exposed))
    fa, fb, how = holdout._fit_link(points, None)
    assert how == "alpha and beta by least squares"
    assert fa == pytest.approx(alpha, rel=1e-6) and fb == pytest.approx(beta, rel=1e-6)
    # one size: beta absorbs everything, alpha assumed 0 (and the output says so)
    fa, fb, how = holdout._fit_link(points[:1], None)
    assert fa == 0.0 and "alpha = 0 assumed" in how and fb > beta


@pytest.mark.slow
@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="emulated hosts need root")
def test_holdout_on_a_tiny_real_scaling_run(torch_env, tmp_path):
    """1, 2 and 4 emulated hosts of half a CPU each: the 4-host run is predicted from the
    1- and 2-host runs alone, and the table says where each input came from."""
    from tests.conftest import run_cli

    exp = tmp_path / "tiny.toml"
    exp.write_text('name = "tiny-scaling"\n[defaults]\nframework = "torch"\n'
                   'model = "googlenet"\nimage_size = 32\nbatch_size = 4\nnum_classes = 10\n'
                   'steps = 3\nwarmup = 1\ntrials = 3\ntarget_width = 0\n'
                   'strategy = "allreduce"\nlink = "1gbit"\ncpus_per_host = 0.5\n'
                   '[matrix]\nnodes = [1, 2, 4]\n')
    db, report = tmp_path / "s.db", tmp_path / "s.html"
    proc = run_cli("run", "-e", str(exp), "--db", str(db), "--report", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # each run across hosts says what bound its step (harness/bottleneck.py), with the
    # busiest host's CFS throttling read from its cgroup
    assert sum(re.search(r"of its quota \(out of quota in \d+% of its CFS periods\), wire ",
                         ln) is not None for ln in proc.stdout.splitlines()) == 2, proc.stdout
    html = report.read_text()
    # the report headlines the held-out error and draws the held-out prediction
    assert "Held-out prediction (allreduce; every input fitted on runs with &le; 2" in html
    assert 'id="table-holdout"' in html and "held-out prediction: 4," in html
    proc = run_cli("predict", "--validate", "--holdout", "--db", str(db))
    print(proc.stdout)
    assert proc.returncode in (0, 1), proc.stderr  # 1: a target missed, still a table
    rows = [ln for ln in proc.stdout.splitlines() if " x4 @ 1gbit, 0.5 CPU/host" in ln
            and "ms" in ln]
    assert len(rows) == 1  # the held-out run, and only it (x1, x2 were fitted on)
    measured, predicted = (float(w[:-2]) for w in rows[0].split() if w.endswith("ms")
                           and w[:-2].replace(".", "").isdigit())
    assert 0.5 < predicted / measured < 2.0  # a prediction, not noise
    assert "fitted only on runs with <= 2 workers" in proc.stdout
    assert "beta from runs" in proc.stdout and "compute: 1-worker run" in proc.stdout
    # the ring's bytes per host (2(n-1)/n of the gradient on each host's one outgoing edge)
    # against the emulated hosts' counters, in the CLI and the report alike
    moved = [ln for ln in proc.stdout.splitlines() if "googlenet allreduce x" in ln
             and " steps: " in ln]
    assert len(moved) == 2 and all(ln.endswith(": ok") for ln in moved), moved
    assert 'id="table-traffic"' in html
    # what bound each step, measured: the busiest host's CPU over its quota (one worker
    # per host of 0.5 CPU) and its wire, which must be the counted bytes over the link
    bound = [ln for ln in proc.stdout.splitlines() if "googlenet allreduce x" in ln
             and " CPU " in ln and " wire " in ln]
    assert len(bound) == 2, proc.stdout
    from harness import bottleneck
    from harness.perfmodel import traffic

    with Store(str(db)) as store:
        multi = [r for r in store.runs("WHERE status = 'ok'") if r["nodes"] > 1]
    for r in multi:
        b, counted = bottleneck.check(r), traffic.check(r)
        assert 0.3 < b.cpu < 1.3, b  # a worker under its quota, not the machine's 2 cores
        assert b.wire == pytest.approx(max(counted.measured) * 8 / 1e9 / r["t_iter_s"],
                                       rel=0.05), (b, counted)
        assert 0.0 < b.wire < 1.2, b
        # each host's link counters beside its bytes (both tbf ends, TCP) and the whole
        # machine's CPU by kind, stored with the run
        hosts = json.loads(r["manifest_json"])["host"]["emulated"]["bytes"]
        assert all({"in_overlimits", "out_overlimits", "retrans_segs", "out_segs"}
                   <= set(v) for v in hosts.values()), hosts
        assert all(v["out_segs"] > 0 for v in hosts.values()), hosts
        machine = json.loads(r["machine_cpu_json"])
        assert sum(machine.values()) == pytest.approx(os.cpu_count(), rel=0.1), machine
        softirqs = json.loads(r["machine_softirqs_json"])  # the links' packets among them
        assert softirqs["NET_RX"] > 0 and softirqs["TIMER"] > 0, softirqs
        assert b.ingress_waits is not None and b.ingress_waits >= 0, b
    assert 'id="table-bottleneck"' in html
    assert ("allreduce: median |error|" in proc.stdout
            and ("PASS" in proc.stdout) == (proc.returncode == 0))
    # one analysis layer: the in-sample check and the report's scaling table measure each
    # point's efficiency against the same baseline (the 1-host run under the same limit,
    # with the same threads per worker)
    from harness.analysis import scaling

    with Store(str(db)) as store:
        ok = store.runs("WHERE status = 'ok'")
        cs = {c.run_id: c for c in checks(store)}
    assert {r["threads"] for r in ok} == {1}, [(r["workers"], r["threads"]) for r in ok]
    table = {row["_row"]["run_id"]: row for row in scaling(ok, list(cs.values())).rows}
    assert sorted(row["workers"] for row in table.values()) == [2, 4]
    for run_id, row in table.items():
        assert run_id in cs, ("no in-sample check for", row["workers"])
        assert cs[run_id].measured_eff == pytest.approx(row["efficiency_pct"] / 100)
    # the papers' claims, checked on this measured curve too
    proc = run_cli("paper", "cori", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    assert "efficiency falls as workers grow (torch googlenet allreduce @ 1gbit) " \
           "[measured (emulated)]: x2 " in proc.stdout


def test_holdout_fits_each_curves_link_from_its_own_two_worker_run(tmp_path):
    """Two networks whose allreduce costs differ per byte on the same link (fixed
    per-step costs, per-tensor overheads): the per-curve fit carries each network's own
    2-worker cost to 4 and 8 workers exactly, where one link pooled over both networks
    cannot; `--pooled-links` gives the pooled fit, and the table says which was used."""
    from dataclasses import replace

    from frameworks.contract import RunSpec
    from harness.perfmodel import holdout, network
    from harness.perfmodel.predict import Compute, predict
    from harness.store import RunRecord
    from tests.conftest import run_cli

    db = tmp_path / "h.db"
    truth = {"googlenet": (0.16, 1 / 0.05e9), "resnet50": (0.7, 1 / 0.08e9)}
    with Store(str(db)) as store:
        for model, (t1, beta) in truth.items():
            for nodes in (1, 2, 4, 8):
                spec = RunSpec("torch", model, batch_size=8, image_size=32, num_classes=10,
                               strategy="single" if nodes == 1 else "allreduce",
                               nodes=nodes, link="1gbit", cpus_per_host=0.25, threads=1)
                row = {"run_id": f"{model}{nodes}", "experiment": "e", "started": f"{nodes}",
                       "status": "ok", "config_hash": spec.config_hash(),
                       "spec_json": spec.to_json(), "framework": "torch", "model": model,
                       "mode": "throughput", "workers": nodes, "batch_size": 8,
                       "image_size": 32, "device": "cpu", "strategy": spec.strategy,
                       "link": "1gbit", "cpus_per_host": 0.25, "threads": 1,
                       "cpu_cores_per_worker": 0.25}
                t = t1
                if nodes > 1:
                    sc = holdout._scenario(row)
                    lk = network.Link("truth", 0.0, beta)
                    t = predict(replace(sc, intra=lk, inter=lk),
                                Compute(t1 / 3, 2 * t1 / 3)).t_iter
                row.update(t_iter_s=t, images_per_s=8 / t)
                assert store.add(RunRecord(row))
        own = holdout.validate(store)
        pooled = holdout.validate(store, pooled=True)
    assert len(own.rows) == 4 and all(abs(r.error) < 1e-6 for r in own.rows), own.rows
    assert max(abs(r.error) for r in pooled.rows) > 0.02
    assert "beta from the curve's own run googlenet2" in holdout.table(own)
    proc = run_cli("predict", "--validate", "--holdout", "--pooled-links", "--db", str(db))
    assert proc.returncode in (0, 1) and "links pooled per link family):" in proc.stdout
    bad = run_cli("predict", "--pooled-links", "--db", str(db))
    assert bad.returncode == 2 and "--validate --holdout --pooled-links" in bad.stderr


def _allreduce_runs(db, shapes: list[tuple[int, int, float]], off: float):
    """Allreduce runs of GoogLeNet, one per (nodes, workers per node, CPU per host), made
    from known inputs: worker compute 0.9 s, `off` seconds per step off the wire for any
    run of 2 or more workers, and a run across hosts the model's own step on a 100 MB/s
    wire plus `off`. Returns the held-out validation of them."""
    from dataclasses import replace

    from frameworks.contract import RunSpec
    from harness import collect
    from harness.perfmodel import holdout, network
    from harness.perfmodel.predict import Compute, predict
    from harness.store import RunRecord

    worker = Compute(0.3, 0.6)
    wire = network.Link("1gbit", 0.0, 1 / 0.1e9)
    with Store(db) as store:
        for nodes, per_node, cpus in shapes:
            spec = RunSpec("torch", "googlenet", batch_size=8, image_size=32,
                           num_classes=10, nodes=nodes, devices_per_node=per_node,
                           strategy="single" if nodes * per_node == 1 else "allreduce",
                           link="1gbit", cpus_per_host=cpus, threads=1)
            row = collect.base_row(spec, "e", f"n{nodes}x{per_node}", "ok")
            row.update(threads=1, cpu_cores_per_worker=0.25)
            t = worker.total
            if spec.workers > 1:
                t += off
            if nodes > 1:
                sc = replace(holdout._scenario(row), intra=wire, inter=wire)
                t = predict(sc, worker).t_iter + off
            row.update(t_iter_s=t, images_per_s=8 / t, t_iter_low_s=t, t_iter_high_s=t)
            assert store.add(RunRecord(row))
        return holdout.validate(store)


def test_holdout_fits_the_link_from_a_small_run_that_crosses_it(tmp_path):
    """Nodes of 2 workers at 0.5 CPU: the curve's own 2-worker run is on one host, so it
    measures what the allreduce costs off the wire (here a fixed 50 ms per step, as
    TensorFlow's CPU-bound collectives behaved on shi2017-emulated). A 2-host x 1-worker
    run at 0.25 CPU (the same share per worker) crosses the link and costs that plus the
    wire: the fit must take the link from the difference, carry only the wire's share by
    the ring's bytes and predict the 4- and 8-worker runs exactly. From the 1-host run
    alone it under-predicts them, and says the fitted link is faster than the wire."""
    from harness.perfmodel import holdout

    shapes = [(1, 1, 0.25), (1, 2, 0.5), (2, 2, 0.5), (4, 2, 0.5)]
    crossed = _allreduce_runs(tmp_path / "twin.db", shapes + [(2, 1, 0.25)], 0.05)
    assert {r.workers for r in crossed.rows} == {4, 8}
    for r in crossed.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        assert "beta from n2x1 (2 host(s) x 1, across the link)" in r.fitted_from
        assert "off the wire: 50 ms per step, from the curve's own 1-host run n1x2" \
            in r.fitted_from
    assert "WARNING" not in holdout.table(crossed)
    looped = _allreduce_runs(tmp_path / "loop.db", shapes, 0.05)
    assert all(r.error < -0.2 for r in looped.rows), [r.error for r in looped.rows]
    assert "beta from the curve's own run n1x2" in looped.rows[0].fitted_from
    assert "off the wire" not in looped.rows[0].fitted_from
    # the loopback run's 50 ms, fitted as the link: the table says no wire is that fast
    assert "faster than the 1 Gbit/s wire it crossed" in looped.rows[0].fitted_from


def test_holdout_of_one_worker_per_host_takes_the_cost_off_the_wire_from_a_1_host_run(
        tmp_path):
    """The reverse layout (scaling-emulated-tf-cnn): one worker per host, so the curve's
    own 2-worker run crosses the link and holds both the collectives' own cost (300 ms
    here, fixed per step) and the wire's. A 1-host 2-worker run of the same network says
    how much is off the wire; the fit subtracts it, fits the wire on the rest and predicts
    the 4- and 8-worker runs exactly. Without that run the whole excess is fitted as wire
    and grown with the ring's bytes per worker: every held-out run predicted slow."""
    curve = [(1, 1, 0.25), (2, 1, 0.25), (4, 1, 0.25), (8, 1, 0.25)]
    split = _allreduce_runs(tmp_path / "loop.db", curve + [(1, 2, 0.5)], 0.3)
    assert {r.workers for r in split.rows} == {4, 8}
    for r in split.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        assert "beta from the curve's own run n2x1" in r.fitted_from
        assert ("off the wire: 300 ms per step, from a 1-host 2-worker run of the same "
                "network, step and link n1x2") in r.fitted_from
    whole = _allreduce_runs(tmp_path / "whole.db", curve, 0.3)
    # (+9.8% at x4, +14.1% at x8: the ring's bytes per worker grow 1.5x and 1.75x)
    assert all(r.error > 0.05 for r in whole.rows), [r.error for r in whole.rows]
    assert all("off the wire" not in r.fitted_from for r in whole.rows)


def _ps_curve(store: Store, link: str, bytes_per_s: float, ps_hosts: str,
              slow_baseline: float = 1.0, slow: dict[tuple[int, int], float] | None = None,
              tag: str = "", replicate: int = 0,
              configs: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 2), (1, 4), (2, 4),
                                                      (1, 8), (2, 8)),
              per_request: float = 0.0) -> list[float]:
    """A parameter-server curve (1-8 workers, 1-2 servers) the model itself made from known
    inputs (worker compute 0.75 s, servers 1.4 core-ns per byte held + 0.6 per byte per
    client, the wire at the link's shaped rate), stored as runs with per-process telemetry;
    the 1-worker run's t_iter times `slow_baseline` (a disturbed baseline), and the run of
    (servers, workers) times `slow[(ps, nodes)]`; run ids end in `tag` (one per repeat);
    `configs` (servers, workers) are stored as measurement `replicate` of each; the
    servers' cost gains `per_request` core-seconds per piece per client where given.
    Returns each run's step beyond compute and servers (the wire's share)."""
    from dataclasses import replace

    from frameworks.contract import RunSpec
    from harness import collect
    from harness.perfmodel import network, placement, validate
    from harness.perfmodel.predict import Compute, ServerCost, predict, simulated
    from harness.store import RunRecord
    from models.cost import cost

    worker = Compute(0.25, 0.5)
    truth = ServerCost(1.4e-9, 0.6e-9, per_request)
    lk = network.Link("truth", 0.0, 1 / bytes_per_s)
    shown = []
    for ps, nodes in configs:
        spec = RunSpec(framework="mxnet", model="resnet50", strategy="ps-sync", ps=ps,
                       nodes=nodes, batch_size=8, image_size=32, num_classes=10,
                       link=link, cpus_per_host=0.25, ps_hosts=ps_hosts, replicate=replicate)
        row = collect.base_row(spec, "ps", f"ps{ps}x{nodes}{tag}", "ok")
        row["threads"] = None
        sc = replace(validate.scenario(row, lk, lk), server_cost=truth)
        assert simulated(sc)
        p = predict(sc, worker)
        shown.append(p.t_iter - worker.total - p.t_server)
        t = (p.t_iter * (slow_baseline if nodes == 1 else 1.0)
             * (slow or {}).get((ps, nodes), 1.0))
        # the servers' core-seconds per step, as telemetry would give them
        plc = placement.place([(x.key, x.nbytes) for x in cost("resnet50", 32, 10).tensors],
                              ps, sc.ps_placement, "resnet50")
        cores = {f"server{i}": truth.core_seconds(b, nodes, k) / t
                 for i, (b, k) in enumerate(zip(plc.bytes_per_server, plc.tensors_per_server))}
        row.update(t_iter_s=t, t_iter_low_s=t, t_iter_high_s=t, manifest_json=json.dumps({}),
                   cpu_cores_by_process_json=json.dumps({"worker0": 0.2, **cores}))
        store.add(RunRecord(row))
    return shown


@pytest.mark.parametrize("link, bytes_per_s, ps_hosts", [
    ("1gbit", 1.25e8, "shared"), ("10gbit", 1.25e9, "shared"), ("1gbit", 1.25e8, "own")])
def test_holdout_fits_the_servers_cpu_from_small_runs_and_carries_it_to_8_hosts(
        tmp_path, link, bytes_per_s, ps_hosts):
    """The held-out path run backwards on a parameter-server curve the model made from
    known inputs (_ps_curve): fitted only on the 1- and 2-host runs, it must give those
    inputs back and predict the 4- and 8-host runs exactly; the servers' CPU fit is named
    in the table, and the step is simulated (psstep), at 1 Gbit/s where the wire shows and
    at 10 where the servers' CPU hides it; with servers on hosts of their own, where the
    1-worker run's step holds the wire to its server and back, as the model is run
    backwards."""
    from harness.perfmodel import holdout

    with Store(tmp_path / "ps.db") as store:
        shown = _ps_curve(store, link, bytes_per_s, ps_hosts)
        result = holdout.validate(store)
    # the wire shows beyond compute and the servers at 1 Gbit/s (8 hosts), not at 10
    assert (max(shown) > 0.05) == (link == "1gbit"), shown
    assert {r.workers for r in result.rows} == {4, 8} and len(result.rows) == 4
    for r in result.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        assert ("less its server's measured CPU time" if ps_hosts == "shared" else
                "less the wire to its server on a host of its own") in r.fitted_from
        assert "servers' CPU: fitted on the servers' CPU telemetry" in r.fitted_from
        assert "the step simulated" in r.fitted_from or "step simulated" in r.fitted_from
        assert "scaled by the median over the curve's small runs" in r.fitted_from
        cpu, wire = r.simulated_busy  # the simulated step's busiest host, for the table
        assert 0.0 < cpu <= 1.0 + 1e-9 and 0.0 <= wire <= 1.0 + 1e-9, r.simulated_busy
    (fitted,) = result.servers.values()
    assert fitted.startswith("1.400 core-ns per byte held + 0.600 per byte per client")
    assert "parameter servers' CPU" in holdout.table(result)
    (named,) = result.links.values()
    assert "the wire's shaped rate" in named and f"{bytes_per_s / 1e9:.3f} GB/s" in named, named


def test_holdout_with_server_requests_recovers_a_cost_per_request(tmp_path):
    """The same curve made with a cost per request as well (150 core-us per piece per
    client; MXNet splits ResNet-50's 161 tensors unevenly over 2 servers, so the small
    runs' servers tell it apart): `requests=True` fits it back and predicts the 4- and
    8-host runs exactly; the fit per byte alone cannot, and misses them."""
    from harness.perfmodel import holdout

    with Store(tmp_path / "ps.db") as store:
        _ps_curve(store, "1gbit", 1.25e8, "shared", per_request=150e-6)
        plain, req = holdout.validate(store), holdout.validate(store, requests=True)
    assert len(req.rows) == 4
    assert all(r.error == pytest.approx(0.0, abs=1e-6) for r in req.rows), \
        [(r.label, r.error) for r in req.rows]
    (fitted,) = req.servers.values()
    assert fitted.startswith("1.400 core-ns per byte held + 0.600 per byte per client + "
                             "150.0 core-us per request"), fitted
    assert max(abs(r.error) for r in plain.rows) > 0.02, [r.error for r in plain.rows]


@pytest.mark.parametrize("ps_hosts", ["shared", "own"])
def test_holdout_outvotes_a_disturbed_one_worker_run(tmp_path, ps_hosts):
    """A simulated curve's compute pools its small runs: with the 1-worker run measured
    30% slow (as a disturbed 20-second run can be) and the two 2-worker runs right, the
    median of the three runs' inverted compute is still the true one, so every 4- and
    8-worker run is predicted exactly (the 1-worker run alone would give a compute 1.3x
    too large or more)."""
    from harness.perfmodel import holdout

    with Store(tmp_path / "ps.db") as store:
        _ps_curve(store, "1gbit", 1.25e8, ps_hosts, slow_baseline=1.3)
        result = holdout.validate(store)
    import re

    assert len(result.rows) == 4
    for r in result.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        # the 1-worker run alone gives a compute 1.3x or more too large, and is outvoted
        scales = dict(re.findall(r"(ps\dx\d) (\d\.\d+)", r.fitted_from))
        assert set(scales) == {"ps1x1", "ps1x2", "ps2x2"}, r.fitted_from
        chosen = float(re.search(r"of the 1-worker step: (\d\.\d+)\)", r.fitted_from)[1])
        assert float(scales["ps1x1"]) > 1.3 * chosen, r.fitted_from


def test_holdout_fits_on_each_small_configurations_median_replicate(tmp_path):
    """One sweep whose small configurations were measured three times (the replicate axis,
    harness/replicates.py), made by the model from known inputs (_ps_curve): the first
    measurement of every 1- and 2-worker configuration 30% slow (the machine busy while
    they ran), the replicates undisturbed but for one 20% fast. Fitted on the first
    measurements alone, every large run is predicted more than 10% slow; on each small
    configuration's median replicate, exactly; on replicate 0 (`--replicate 0`) as on the
    first measurements alone. The table names the replicates it used."""
    from harness.perfmodel import holdout
    from tests.conftest import run_cli

    small = ((1, 1), (1, 2), (2, 2))
    db = tmp_path / "replicated.db"
    with Store(db) as store:
        _ps_curve(store, "10gbit", 1.25e9, "shared", tag="r0",
                  slow={c: 1.3 for c in small})
        first = holdout.validate(store)
        _ps_curve(store, "10gbit", 1.25e9, "shared", tag="r1", replicate=1, configs=small,
                  slow={(1, 2): 0.8})
        _ps_curve(store, "10gbit", 1.25e9, "shared", tag="r2", replicate=2, configs=small)
        assert len(store.runs()) == 7 + 6
        result = holdout.validate(store)
        # one replicate of each, as if the sweep had measured them once
        as_first = holdout.validate(store, replicate=0)
        as_third = holdout.validate(store, replicate=2)
    assert all(r.error > 0.1 for r in first.rows), [(r.label, r.error) for r in first.rows]
    assert not first.replicated
    assert len(result.rows) == 4
    for r in result.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        assert r.run_id.endswith("r0")  # the large runs, measured once
    assert len(result.replicated) == 3
    text = holdout.table(result)
    line = next(x for x in text.splitlines() if "more than once" in x and "ps1 x2" in x)
    assert "3 replicates (" in line and "replicate 2 used (the median)" in line, line
    # in replicate order: the slow first, the fast second, the third between them
    t = [float(v) for v in line.split("replicates (")[1].split(" ms")[0].split(", ")]
    assert t[0] > t[2] > t[1], line
    assert [r.error for r in as_first.rows] == pytest.approx([r.error for r in first.rows])
    assert all(r.error == pytest.approx(0.0, abs=1e-6) for r in as_third.rows)
    assert "replicate 0 used (as asked)" in holdout.table(as_first)
    # the CLI: --replicate on one sweep; refused where it means nothing
    proc = run_cli("predict", "--validate", "--holdout", "--replicate", "0", "--db", str(db))
    assert proc.returncode == 1 and "replicate 0 used (as asked)" in proc.stdout, proc.stderr
    assert run_cli("predict", "--validate", "--holdout", "--db", str(db)).returncode == 0
    bad = run_cli("predict", "--validate", "--replicate", "1", "--db", str(db))
    assert bad.returncode == 2 and "--replicate" in bad.stderr, bad.stderr
    bad = run_cli("predict", "--validate", "--holdout", "--replicate", "-1", "--db", str(db))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr


def test_holdout_over_repeats_judges_the_median_sweep(tmp_path):
    """Three repeats of one parameter-server sweep, made by the model from known inputs
    (_ps_curve): the first with its 8-worker, 1-server run measured 40% slow (a disturbed
    large run), the second with its 1- and 2-worker runs 30% slow (the machine slower
    while the small runs ran: the pooled compute is theirs), the third undisturbed. Each repeat alone misses the
    targets but the last; the median sweep takes every configuration from an undisturbed
    repeat, so it predicts every large run exactly, and its verdict is the exit status.
    The table shows each repeat's own errors and the measured spread."""
    from harness.perfmodel import holdout, holdout_repeats
    from tests.conftest import run_cli

    disturbed = [{(1, 8): 1.4}, {(1, 1): 1.3, (1, 2): 1.3, (2, 2): 1.3}, {}]
    dbs = []
    for i, slow in enumerate(disturbed):
        dbs.append(tmp_path / f"r{i + 1}.db")
        with Store(dbs[-1]) as store:
            _ps_curve(store, "10gbit", 1.25e9, "shared", slow=slow, tag=f"r{i + 1}")
    rep = holdout_repeats.validate(dbs)
    assert len(rep.median.rows) == 4
    for r in rep.median.rows:
        assert r.error == pytest.approx(0.0, abs=1e-6), (r.label, r.error)
        assert r.run_id.endswith(("r2", "r3")) if "x8" in r.label else True
    alone = [res.by_strategy()["ps-sync"] for res in rep.each]
    assert [v["pass"] for v in alone] == [False, False, True], alone
    assert alone[0]["worst"] == pytest.approx(1 - 1 / 1.4, abs=1e-6)  # -28.6%, the x8 run
    assert all(r.error > 0.1 for r in rep.each[1].rows)  # compute from slow small runs
    text = holdout_repeats.table(rep)
    assert "ps-sync: each repeat alone meets the targets in 1 of 3" in text
    assert "ps-sync, median sweep: median 0.0%, worst 0.0%: PASS" in text
    row = next(line for line in text.splitlines() if "ps1 x8" in line and "%" in line)
    spread, first, _, third, median = row.split()[-5:]
    assert (spread, first) == ("40.0%", "-28.6%"), row
    assert third in ("+0.0%", "-0.0%") and median in ("+0.0%", "-0.0%"), row
    assert "with the median sweep's fit" not in text  # only when asked
    # the median sweep's small runs fit, each repeat's own large runs judged: repeat 2's
    # failure was its small runs' (now exact), repeat 1's its own large run's (still -28.6%)
    fit = holdout_repeats.validate(dbs, median_fit=True)
    assert [r.by_strategy()["ps-sync"]["pass"] for r in fit.median_fitted] == [
        False, True, True]
    assert all(r.error == pytest.approx(0.0, abs=1e-6) for r in fit.median_fitted[1].rows)
    assert {r.run_id for r in fit.median_fitted[0].rows} == {r.run_id for r in rep.each[0].rows}
    text = holdout_repeats.table(fit)
    assert "ps-sync: with the median sweep's fit each repeat meets the targets in 2 of 3" in text
    row = next(line for line in text.split("median sweep's small runs")[1].splitlines()
               if "ps1 x8" in line)
    cells = row.split()[-3:]
    assert cells[0] == "-28.6%" and [c.lstrip("+-") for c in cells[1:]] == ["0.0%"] * 2, row
    # the CLI: the median sweep's verdict is the exit status; every repeat named
    proc = run_cli("predict", "--validate", "--holdout", "--median-fit",
                   *(f"--db={d}" for d in dbs))
    assert proc.returncode == 0, proc.stderr
    assert f"r3 = {dbs[2]}" in proc.stdout and "the median sweep in full:" in proc.stdout
    assert "ps-sync, r2 with the median sweep's fit: median 0.0%, worst 0.0%: PASS" in proc.stdout
    alone = run_cli("predict", "--validate", "--holdout", "--median-fit", "--db", str(dbs[0]))
    assert alone.returncode == 2 and "two or more" in alone.stderr, alone.stderr
    # one repeat alone fails, and says so through its exit status
    assert run_cli("predict", "--validate", "--holdout", "--db", str(dbs[0])).returncode == 1
    # bad input: the same repeat twice, several databases outside --holdout
    twice = run_cli("predict", "--validate", "--holdout", "--db", str(dbs[0]),
                    "--db", str(dbs[0]))
    assert twice.returncode == 2 and "is given twice" in twice.stderr, twice.stderr
    many = run_cli("predict", "--validate", "--db", str(dbs[0]), "--db", str(dbs[1]))
    assert many.returncode == 2 and "for --validate --holdout only" in many.stderr
    missing = run_cli("predict", "--validate", "--holdout", "--db", str(dbs[0]),
                      "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "none.db does not exist" in missing.stderr
    for i in (1, 2):  # repeats with nothing to validate
        Store(tmp_path / f"e{i}.db").close()
    with pytest.raises(holdout.HoldoutError, match="needs runs at both scales"):
        holdout_repeats.validate([tmp_path / "e1.db", tmp_path / "e2.db"])


def test_median_sweep_copies_each_configuration_from_its_median_repeat(tmp_path):
    """Per configuration the repeat with the lower median t_iter among its ok runs, with
    every raw sample of that run (iterations, trials, telemetry) and nothing of the
    others; a configuration that failed everywhere comes from the first repeat; every
    repeat's microbenchmark rows are kept; repeats sharing run ids are refused."""
    from frameworks.contract import RunSpec
    from harness import collect, median_sweep
    from harness.store import RunRecord, StoreError

    a = RunSpec("torch", "resnet50", batch_size=8, image_size=32, num_classes=10)
    b = RunSpec("torch", "googlenet", batch_size=8, image_size=32, num_classes=10)
    times = {"a": [0.30, 0.10, 0.20, 0.40], "b": [None, None, None, None]}
    dbs = []
    for i in range(4):
        dbs.append(tmp_path / f"r{i}.db")
        with Store(dbs[-1]) as st:
            for name, spec in (("a", a), ("b", b)):
                t = times[name][i]
                row = collect.base_row(spec, "e", f"{name}{i}", "ok" if t else "failed")
                row["t_iter_s"] = t
                st.add(RunRecord(row, iterations=[(0, 0, k, t or 1.0) for k in range(3)],
                                 trials=[(0, None, 0.0, t or 1.0, 1.0, 3)],
                                 telemetry=[("worker0", 0.0, 1.0, 1, None, None, None)]))
            st.add_comm([{"run_id": f"c{i}", "library": "gloo", "op": "allreduce",
                          "ranks": 2, "bytes": 1024, "median_s": 1e-4}])
    med = median_sweep.build(dbs, tmp_path / "m.db")
    with Store(med.path) as st:
        runs = {r["model"]: r for r in st.runs()}
        assert runs["resnet50"]["run_id"] == "a2"  # 0.10 0.20 0.30 0.40: the lower median
        assert runs["googlenet"]["run_id"] == "b0" and runs["googlenet"]["status"] == "failed"
        assert st.iteration_times("a2") == [0.2] * 3
        assert [t["run_id"] for t in st.trials()] == ["a2", "b0"]
        assert len(st.telemetry("a2")) == 1 and not st.telemetry("a0")
        assert len(st.comm()) == 4
    assert med.t_iter[("e", a.config_hash())] == [0.30, 0.10, 0.20, 0.40]
    (tmp_path / "copy.db").write_bytes(dbs[0].read_bytes())  # one sweep under two names
    with pytest.raises(StoreError, match="share run ids"):
        median_sweep.build([dbs[0], tmp_path / "copy.db"], tmp_path / "m2.db")
    other = tmp_path / "other.db"  # another experiment's sweep given as a repeat
    with Store(other) as st:
        st.add(RunRecord({**collect.base_row(a, "f", "x0", "ok"), "t_iter_s": 0.1}))
    with pytest.raises(StoreError, match="holds e and .* holds f: each --db must be a "
                                         "repeat of the same experiment"):
        median_sweep.build([dbs[0], other], tmp_path / "m3.db")
    changed = tmp_path / "changed.db"  # the same experiment's name, other configurations
    with Store(changed) as st:
        spec = RunSpec("torch", "resnet50", batch_size=16, image_size=32, num_classes=10)
        st.add(RunRecord({**collect.base_row(spec, "e", "y0", "ok"), "t_iter_s": 0.1}))
    with pytest.raises(StoreError, match="share no configuration of e"):
        median_sweep.build([dbs[0], changed], tmp_path / "m4.db")


def test_a_median_sweep_names_a_repeat_from_another_machine(tmp_path):
    """Repeats are one machine's: replicated repeat 6 ran on a fresh VM 1.65x slower at the
    workload (its probes 183 GFLOPS against 202-207), and given with repeats 1-5 the
    median sweep took none of its runs. The median sweep says so, naming the repeat and
    how to judge it; the five sweeps of one machine raise nothing."""
    from harness import median_sweep

    five = shipped_copies(tmp_path, "scaling-emulated-ps-replicated-repeats")
    (six,) = shipped_copies(tmp_path, "scaling-emulated-ps-replicated-slow-vm", ("r6.db",))
    assert median_sweep.build(five, tmp_path / "five.db").notes == []
    med = median_sweep.build([*five, six], tmp_path / "six.db")
    assert len(med.notes) == 1 and med.notes[0].startswith(f"r6 ({six}) ran on another "
                                                            "machine"), med.notes
    assert "183 GFLOPS" in med.notes[0] and f"--db {six} by itself" in med.notes[0]
    assert 5 not in med.chosen.values()  # none of its runs, every one slower


def test_traffic_check_allows_start_up_and_nothing_else():
    """The counters over a run's steps may exceed the model's bytes per step by start-up's
    one step at most (plus 2%), and may not fall short of them (less 2%)."""
    from harness.perfmodel.traffic import Traffic, table

    def t(counted: float, tiny: float = 2e4) -> Traffic:  # MB per step, and a tiny host
        return Traffic("mxnet googlenet ps2 x2 on 2 hosts", "r", 7, (100e6, 50e6, 1e4),
                       (counted * 1e6, 50e6, tiny))

    assert t(100.0).ok and t(100.0 * 8 / 7).ok and t(98.5).ok
    assert not t(100.0 * 8 / 7 * 1.03).ok and not t(97.0).ok
    assert not t(150.0).ok and not t(66.7).ok  # a model counting 1.5x, or 2/3, is caught
    # a host the model gives under 64 KiB per step is not judged (control messages
    # dominate it), however far off: a server holding almost none of the keys
    assert t(100.0, tiny=3e4).ok and t(100.0, tiny=0.0).ok and len(t(100.0).ratios) == 2
    text = table([t(100.0), t(150.0)])
    assert "hosts +0.0% to +50.0% over 7 steps: MISMATCH" in text
    assert "hosts +0.0% to +0.0% over 7 steps: ok" in text


#: repeat sets holding a later repeat on another VM kind, judged alone: the repeats
#: judged together (a median sweep over two machines would mix them)
JUDGED_TOGETHER = {"scaling-emulated-ps-async-repeats": ("r1.db", "r2.db", "r3.db")}

#: held-out results of the shipped repeat sets, by folder: a set judged for two strategies
#: (the ps-async sync and async runs, HEP-CNN's DDP and Horovod) is validated once
_VALIDATED: dict[str, object] = {}


def repeat_dbs(folder: str) -> list:
    """A shipped repeat set's databases, experiments/measured/<folder>/r1.db, r2.db, ...,
    in the order they were measured: the scoreboard's order, so the two cannot drift."""
    from pathlib import Path

    from bench.scoreboard import repeat_dbs as in_measurement_order

    return in_measurement_order(Path(__file__).resolve().parent.parent / "experiments"
                                / "measured" / folder)


def shipped_copies(tmp_path, folder: str, names: tuple[str, ...] | None = None) -> list:
    """Copies of a shipped repeat set's databases (experiments/measured/<folder>/r1.db,
    r2.db, ..., or those `names`) under tmp_path: opening a database may migrate it."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "experiments" / "measured" / folder
    (tmp_path / folder).mkdir(exist_ok=True)
    dbs = [src / n for n in names] if names else repeat_dbs(folder)
    return [Path(shutil.copy(db, tmp_path / folder / db.name)) for db in dbs]


@pytest.mark.parametrize("folder, strategy, alone_pass, median, worst, beats_repeats, held, "
                         "hosts", [
    # (numbers with each transfer sharing its sender's egress and its receiver's ingress,
    # psstep since 2026-12-03, transfers queued per connection, each run's step simulated
    # as its trials measured it (psstep `trial`) and MXNet's servers on the hosts ps-lite
    # numbers them by (ps_rules.pslite_server_order), since 2026-12-05; harness/perfmodel/README.md
    # gives the earlier rules' beside them)
    # servers sharing the workers' hosts (2026-12-02, AMD VM): the median sweep passes
    ("cori2017-emulated-repeats", "ps-sync", [False, False, True], 0.0827, 0.1339, True, 12,
     16),
    # the same on the slow VM (2026-12-06, repeats 4 and 5, predictions first): the median
    # sweep passes, repeat 4 fails alone (ResNet-50 1 server x8 +26.4%)
    ("cori2017-emulated-slow-vm", "ps-sync", [False, True], 0.0549, 0.1229, False, 12, 16),
    # the same on the Intel VM (2026-12-07, repeats 6, 7 and 8, predictions first): the
    # median sweep passes, repeat 6 fails alone (ResNet-50 1 server x8 -38.1%, fitted on
    # its 4894 ms 1-worker run; r7's took 2197, r8's 1829)
    ("cori2017-emulated-intel", "ps-sync", [False, True, True], 0.0135, 0.0868, True, 12, 16),
    # servers on hosts of their own (2026-12-03, AMD VM): everything fails, every row high
    ("cori2017-emulated-own-repeats", "ps-sync", [False, False, False], 0.2334, 0.5497, False,
     12, 18),
    # MXNet sync beside async, GoogLeNet (2026-12-03, AMD VM): the sync runs judged
    # (12 runs' bytes per host checked in each repeat: its dist_async runs too, since
    # 2026-12-05)
    ("scaling-emulated-ps-async-repeats", "ps-sync", [True, True, True], 0.0817, 0.1257, True,
     4, 12),
    # its dist_async runs, modelled since 2026-12-04 (an update per push, psstep
    # sync=False, no worker a step ahead: psstep.ASYNC_LEAD), judged on these repeats
    # measured before the model: the median sweep fails, every row fast (unbounded: 51.9 /
    # 61.5%, its worker 0 ending the trial far ahead of the measured rank 0)
    ("scaling-emulated-ps-async-repeats", "ps-async", [False, False, True], 0.1657, 0.2270,
     False, 4, 12),
    # Shi's setup, MXNet (2026-12-03, AMD VM): the egress-only rule failed every repeat
    # (10.0 / 14.7%); the steady step, queued, passed by 0.03 points (9.97%); now the
    # median sweep and repeat 1 alone pass
    ("shi2017-emulated-mxnet-repeats", "ps-sync", [True, False, False], 0.0980, 0.1463, True,
     6, 9),
    # the same at 0.8x every CPU share (2026-12-03, AMD VM): ResNet-50 x4 +25.4% failed it;
    # now +19.6%, and every repeat passes
    ("shi2017-emulated-headroom-repeats", "ps-sync", [True, True, True], 0.0228, 0.1956, True,
     6, 9),
    # Shi's setup, PyTorch DDP allreduce (2026-12-03, AMD VM): every repeat passes
    ("shi2017-emulated-torch-repeats", "allreduce", [True, True, True], 0.0388, 0.0755, True, 6, 9),
    # TensorFlow and JAX allreduce, HEP-CNN (2026-12-03, AMD VM): every repeat passes
    ("scaling-emulated-tf-jax-hepcnn-repeats", "allreduce", [True, True, True], 0.0393, 0.0605,
     True, 4, 6),
    # PyTorch DDP and Horovod, HEP-CNN, the same hosts (2026-12-03, AMD VM): every repeat passes
    ("scaling-emulated-hepcnn-torch-repeats", "allreduce", [True, True, True], 0.0259, 0.0314,
     True, 2, 6),
    ("scaling-emulated-hepcnn-torch-repeats", "horovod", [True, True, True], 0.0280, 0.0518,
     True, 2, 6),
    # MXNet and TensorFlow Horovod, HEP-CNN, the same hosts (2026-12-03, AMD VM): repeat 3
    # fails alone (TensorFlow x4 +23.2%); repeat 2's MXNet x4 failed to launch (Open MPI)
    ("scaling-emulated-hepcnn-horovod-repeats", "horovod", [True, True, False], 0.0772,
     0.0911, False, 4, (6, 5, 6)),
    # TensorFlow allreduce, GoogLeNet and ResNet-50 (2026-12-04, AMD VM): the cost off the
    # wire from the 1-host runs; repeat 3 (after the rule) fails alone, every row fast;
    # without the 1-host runs 12.9 / 21.5%, FAIL
    ("scaling-emulated-tf-cnn-repeats", "allreduce", [True, True, False], 0.0811, 0.2091,
     False, 4, 6),
])
def test_the_readmes_repeated_measurements_recompute(tmp_path_factory, folder, strategy,
                                                     alone_pass, median, worst,
                                                     beats_repeats, held, hosts):
    """harness/perfmodel/README.md's held-out claims over three repeats of cori2017-emulated, of its
    own-hosts layout, of the ps-async experiment and of shi2017-emulated's MXNet runs (at
    its CPU shares and at 0.8x them) and its PyTorch DDP runs, and of TensorFlow's, JAX's
    and PyTorch's allreduce-type strategies with HEP-CNN,
    recomputed from the databases shipped with them (experiments/
    measured/, copied first: opening a database may migrate it): which repeats meet the
    targets alone, the median sweep's median and worst error, and whether its median is
    below the repeats' own. A model change that moves these numbers must move
    harness/perfmodel/README.md too."""
    from harness.perfmodel import holdout_repeats

    if folder not in _VALIDATED:
        _VALIDATED[folder] = holdout_repeats.validate(shipped_copies(
            tmp_path_factory.mktemp("repeats"), folder, JUDGED_TOGETHER.get(folder)))
    rep = _VALIDATED[folder]
    med = rep.median.by_strategy()[strategy]
    alone = [r.by_strategy()[strategy] for r in rep.each]
    assert [v["pass"] for v in alone] == alone_pass, alone
    assert med["pass"] == (median <= 0.10 and worst <= 0.25) and med["n"] == held, med
    assert med["median"] == pytest.approx(median, abs=0.0005), med
    assert med["worst"] == pytest.approx(worst, abs=0.0005), med
    # below the repeats' own median (the lower one of an even count)
    assert (med["median"] < sorted(v["median"] for v in alone)[(len(alone) - 1) // 2]) \
        == beats_repeats
    # every run across hosts of every repeat: the kernel's bytes match the model's
    text = holdout_repeats.table(rep)
    each = hosts if isinstance(hosts, tuple) else (hosts,) * len(alone)
    assert ("bytes per host, the emulated hosts' counters against the model: "
            + ", ".join(f"r{i} {n} of {n} runs ok" for i, n in enumerate(each, 1))) in text


def test_the_intel_repeats_fitted_on_their_median_sweep(tmp_path):
    """harness/perfmodel/README.md, "Whose noise fails a repeat": the seven Intel repeats of the
    ps-async experiment (r4-r10) judged together, each repeat's large runs predicted from its own
    small runs and from the median sweep's (--median-fit). Repeat 10's dist_sync, failed
    by its own small runs, passes on the median's; repeat 9's does not, and repeats 4 and
    5 fail on the median's where they passed on their own: a sweep's small runs carry its
    machine's state to its large ones. The median sweep of all seven passes both."""
    from harness.perfmodel import holdout_repeats

    rep = holdout_repeats.validate(shipped_copies(
        tmp_path, "scaling-emulated-ps-async-repeats", tuple(f"r{i}.db" for i in range(4, 11))),
        median_fit=True)
    verdicts = {s: ([r.by_strategy()[s]["pass"] for r in rep.each],
                    [r.by_strategy()[s]["pass"] for r in rep.median_fitted])
                for s in ("ps-sync", "ps-async")}
    P, F = True, False
    assert verdicts == {"ps-sync": ([P, P, P, P, P, F, F], [F, F, P, P, P, F, P]),
                        "ps-async": ([F, F, P, F, P, P, P], [P, F, P, F, F, P, P])}, verdicts
    r10 = rep.median_fitted[6].by_strategy()["ps-sync"]
    assert (round(100 * r10["median"], 1), round(100 * r10["worst"], 1)) == (3.8, 18.6), r10
    med = rep.median.by_strategy()
    assert [(round(100 * med[s]["median"], 1), round(100 * med[s]["worst"], 1), med[s]["pass"])
            for s in ("ps-sync", "ps-async")] == [(6.0, 18.6, True), (8.4, 13.5, True)], med


def test_the_replicated_sweep_judged_on_each_replicate(tmp_path):
    """harness/perfmodel/README.md, "Replicates within one sweep": the four shipped replicated
    sweeps (their six 1- and 2-worker configurations measured three times, spread through each)
    judged on their median replicates and on each replicate alone (`--replicate J`: what
    the sweep would have said had it measured them once). dist_sync passes on the median
    replicates in all four, on single replicates 8 of 12 times; dist_async 2 of 4 and 5
    of 12. The 1-server synchronous server's CPU per step at 1 and 2 workers, replicate by
    replicate: the second client's cost, the fit's input, 15 to 53 core-ms in one sweep."""
    import json

    from harness.perfmodel import holdout

    P, F = True, False
    want = [
        {None: {"ps-sync": (5.7, 10.6, P), "ps-async": (11.5, 20.5, F)},
         0: {"ps-sync": (13.8, 15.1, F), "ps-async": (14.3, 19.9, F)},
         1: {"ps-sync": (6.0, 10.7, P), "ps-async": (12.5, 22.9, F)},
         2: {"ps-sync": (9.7, 14.5, P), "ps-async": (12.9, 19.3, F)}},
        {None: {"ps-sync": (9.6, 12.2, P), "ps-async": (9.0, 14.7, P)},
         0: {"ps-sync": (13.9, 21.7, F), "ps-async": (8.5, 16.9, P)},
         1: {"ps-sync": (9.6, 12.2, P), "ps-async": (10.3, 18.2, F)},
         2: {"ps-sync": (7.0, 8.3, P), "ps-async": (8.3, 22.3, P)}},
        {None: {"ps-sync": (5.5, 10.0, P), "ps-async": (10.4, 12.9, F)},
         0: {"ps-sync": (5.2, 9.9, P), "ps-async": (5.3, 22.4, P)},
         1: {"ps-sync": (5.5, 10.0, P), "ps-async": (11.3, 13.7, F)},
         2: {"ps-sync": (10.3, 15.7, F), "ps-async": (14.0, 15.8, F)}},
        {None: {"ps-sync": (7.9, 10.5, P), "ps-async": (8.4, 14.4, P)},
         0: {"ps-sync": (8.5, 10.6, P), "ps-async": (8.4, 12.9, P)},
         1: {"ps-sync": (7.0, 10.2, P), "ps-async": (5.1, 18.5, P)},
         2: {"ps-sync": (13.8, 17.1, F), "ps-async": (10.1, 14.9, F)}}]
    servers = [([77, 75, 75], [96, 111, 128]), ([87, 77, 67], [102, 110, 115]),
               ([67, 75, 75], [99, 103, 120]), ([72, 73, 82], [105, 103, 97])]
    # repeats 1-4 (repeat 5 tested the options together: tests/test_packet_work.py)
    dbs = shipped_copies(tmp_path, "scaling-emulated-ps-replicated-repeats",
                         tuple(f"r{i}.db" for i in range(1, 5)))
    assert len(dbs) == 4
    for db, verdicts, (one, two) in zip(dbs, want, servers):
        with Store(db) as store:
            got = {}
            for j in (None, 0, 1, 2):
                res = holdout.validate(store, replicate=j).by_strategy()
                got[j] = {s: (round(100 * v["median"], 1), round(100 * v["worst"], 1),
                              v["pass"]) for s, v in res.items()}
            server = {}
            for r in store.runs("WHERE strategy = 'ps-sync' AND ps = 1 AND workers <= 2"):
                cores = json.loads(r["cpu_cores_by_process_json"])
                server[(r["workers"], r["replicate"])] = round(
                    cores["server0"] * r["t_iter_s"] * 1e3)
        assert got == verdicts, (db.name, got)
        assert [server[(1, j)] for j in range(3)] == one, (db.name, server)
        assert [server[(2, j)] for j in range(3)] == two, (db.name, server)
    for s, median_passes, single_passes in (("ps-sync", 4, 8), ("ps-async", 2, 5)):
        assert sum(w[None][s][2] for w in want) == median_passes
        assert sum(w[j][s][2] for w in want for j in (0, 1, 2)) == single_passes


@pytest.mark.parametrize("folder, want", [
    # the AMD VM: FAIL every way, the median replicates' median |error| (10.6%) the lowest
    # but one and below the single replicates' median (12.0%); with the request term it
    # PASSES
    ("cori2017-emulated-replicated-repeats",
     {None: (10.6, 23.7, False), 0: (13.2, 28.5, False), 1: (12.0, 24.0, False),
      2: (5.5, 29.0, False), "requests": (8.4, 15.3, True), "packet": (10.3, 22.0, False)}),
    # the Intel VM, out of sample: the median replicates PASS where every replicate alone
    # fails (the small runs' replicates spread up to 2x); the request term fails it
    ("cori2017-emulated-replicated-intel",
     {None: (6.5, 19.1, True), 0: (14.6, 36.9, False), 1: (6.7, 37.1, False),
      2: (17.4, 58.6, False), "requests": (9.3, 36.9, False), "packet": (4.8, 17.3, True)}),
])
def test_the_cori_replicated_sweep_judged_on_each_replicate(tmp_path, folder, want):
    """harness/perfmodel/README.md, "cori2017-emulated, its small runs replicated" and "The
    same on the Intel VM": one sweep on each VM (30 runs), dist_sync judged on its median
    replicates, on each replicate alone and with each optional term."""
    from harness.perfmodel import holdout

    (db,) = shipped_copies(tmp_path, folder)
    with Store(db) as store:
        got = {}
        for j in (None, 0, 1, 2, "requests", "packet"):
            v = (holdout.validate(store, requests=True) if j == "requests" else
                 holdout.validate(store, packet_work=True) if j == "packet" else
                 holdout.validate(store, replicate=j)).by_strategy()["ps-sync"]
            assert v["n"] == 12
            got[j] = (round(100 * v["median"], 1), round(100 * v["worst"], 1), v["pass"])
    assert got == want, got


def test_holdout_names_small_configurations_whose_replicates_spread_past_the_worst_target(
        tmp_path):
    """The held-out table says which fitted configurations' replicates spread wider than
    the worst-error target (25%), where one replicate alone could move a prediction past
    it whatever the probes read: five of the Intel VM's six in cori2017-emulated-replicated
    r2 (HEP-CNN with 1 server at 1 worker 206%, none flagged disturbed), none of the AMD
    VM's r1 (1.9-20.8%)."""
    from harness.perfmodel import holdout

    (intel,) = shipped_copies(tmp_path, "cori2017-emulated-replicated-intel")
    with Store(intel) as store:
        res = holdout.validate(store)
    assert sorted(w.split(" @ ")[0] + " " + w.rsplit(" ", 1)[1] for w in res.wide_replicates) == [
        "mxnet hepcnn b8 32px ps-sync ps1 x1 205.7%", "mxnet hepcnn b8 32px ps-sync ps1 x2 36.0%",
        "mxnet hepcnn b8 32px ps-sync ps2 x2 25.1%", "mxnet resnet50 b8 32px ps-sync ps1 x1 104.4%",
        "mxnet resnet50 b8 32px ps-sync ps2 x2 44.0%"], res.wide_replicates
    line = next(ln for ln in holdout.table(res).splitlines() if "spread more than" in ln)
    assert line.startswith("fitted on configurations whose replicates spread more than 25% "
                           "(slowest / fastest - 1; 5): "), line
    assert line.endswith("one replicate alone would be a draw; the fit takes their median")
    (amd,) = shipped_copies(tmp_path, "cori2017-emulated-replicated-repeats")
    with Store(amd) as store:
        res = holdout.validate(store)
    assert res.replicated and not res.wide_replicates
    assert "spread more than" not in holdout.table(res)


def test_holdout_over_repeats_names_fitted_configurations_that_spread_past_the_worst_target(
        tmp_path):
    """Over repeats of a sweep, the table names the median sweep's fitted configurations
    whose runs spread over the repeats wider than the worst-error target (25%): each
    repeat alone was fitted on one draw of them. The Intel VM's two repeats of TensorFlow's
    and JAX's HEP-CNN curves: JAX at 1 and 2 workers (32.0, 25.2%); the AMD VM's three
    (at most 9.0%): none."""
    from harness.perfmodel import holdout_repeats

    rep = holdout_repeats.validate(shipped_copies(tmp_path,
                                                  "scaling-emulated-tf-jax-hepcnn-intel"))
    assert [w.split(" @ ")[0] + " " + w.rsplit(" ", 1)[1] for w in rep.wide_fits] == [
        "jax hepcnn b8 32px allreduce x1 32.0%", "jax hepcnn b8 32px allreduce x2 25.2%"], \
        rep.wide_fits
    line = next(ln for ln in holdout_repeats.table(rep).splitlines()
                if "over the repeats (slowest" in ln)
    assert line.startswith("fitted on configurations whose runs spread more than 25% over "
                           "the repeats (slowest / fastest - 1; 2): jax hepcnn "), line
    assert line.endswith("the median sweep takes their (lower) median"), line
    rep = holdout_repeats.validate(shipped_copies(tmp_path,
                                                  "scaling-emulated-tf-jax-hepcnn-repeats"))
    assert rep.median.fitted and not rep.wide_fits
    assert "over the repeats (slowest" not in holdout_repeats.table(rep)



def test_the_intel_cori_repeats_small_runs_spread_while_the_probes_read_them_backwards(
        tmp_path):
    """experiments/measured/cori2017-emulated-intel/README.md: the two repeats' fitted
    configurations that spread more than 25% (out of sample: the rule came first), led by
    ResNet-50 with 1 server at 1 worker (4894 against 2197 ms), and the probes reading the
    slow runs quiet and the fast ones disturbed: on this VM the machine-wide GEMM probe
    does not say how fast a quota-limited step runs."""
    import sqlite3

    from harness import noise
    from harness.perfmodel import holdout_repeats

    dbs = shipped_copies(tmp_path, "cori2017-emulated-intel", ("r6.db", "r7.db"))
    rep = holdout_repeats.validate(dbs)
    assert [w.split(" @ ")[0] + " " + w.rsplit(" ", 1)[1] for w in rep.wide_fits] == [
        "mxnet hepcnn b8 32px ps-sync ps1 x1 30.6%", "mxnet hepcnn b8 32px ps-sync ps1 x2 26.8%",
        "mxnet resnet50 b8 32px ps-sync ps1 x1 122.8%",
        "mxnet resnet50 b8 32px ps-sync ps1 x2 42.4%"], rep.wide_fits
    got = []
    for db in dbs:
        con = sqlite3.connect(db)
        got.append([(round(1e3 * t), round(n, 2), noise.state({"noise_ratio": n,
                                                                "noise_own_share": o}))
                    for t, n, o in con.execute(
                        "SELECT t_iter_s, noise_ratio, noise_own_share FROM runs WHERE "
                        "model = 'resnet50' AND ps = 1 AND workers <= 2 ORDER BY workers")])
        con.close()
    assert got == [[(4894, 0.88, ""), (3602, 0.86, "")],
                   [(2197, 0.69, "disturbed"), (2530, 0.74, "disturbed")]], got
    # the median sweep (the lower median of two) took r7's run of 17 of the 18
    assert sorted(rep.sweep.chosen.values()).count(1) == 17


def test_the_shipped_async_ranks_keep_one_pace():
    """psstep bounds how far an asynchronous worker may lead (ASYNC_LEAD) because the
    measured ranks keep one pace: in every shipped multi-host dist_async run each rank's
    summed step times lie within 1.12x of every other rank's, rank 0 (beside server 0)
    included, where workers simulated at their own pace spread 1.6-2.9x."""
    import sqlite3
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "experiments" / "measured"
    spreads = []
    for db in sorted(root.glob("scaling-emulated-ps-async-*/r*.db")):
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
        for run_id, nodes in con.execute("SELECT run_id, nodes FROM runs WHERE strategy = "
                                         "'ps-async' AND nodes > 1 AND status = 'ok'"):
            per_rank = dict(con.execute("SELECT rank, SUM(seconds) FROM iterations WHERE "
                                        "run_id = ? GROUP BY rank", (run_id,)))
            assert sorted(per_rank) == list(range(nodes)), (db, run_id, per_rank)
            spreads.append(max(per_rank.values()) / min(per_rank.values()))
        con.close()
    assert len(spreads) >= 18, spreads
    assert max(spreads) < 1.12, sorted(spreads)


def test_holdout_checks_that_asynchronous_ranks_kept_one_pace(tmp_path):
    """The held-out table checks the assumption the asynchronous step rests on (psstep.
    ASYNC_LEAD) on every multi-host dist_async run it reads: repeat 5's six keep one pace;
    the same database with rank 0 of one run made 30% slower (its stored iterations) is
    named as not keeping one."""
    import sqlite3

    from harness.perfmodel import holdout, paces

    (db,) = shipped_copies(tmp_path, "scaling-emulated-ps-async-repeats", ("r5.db",))
    with Store(str(db), readonly=True) as store:
        res = holdout.validate(store)
    assert [(p.label, p.ok) for p in res.rank_paces] == [
        (f"mxnet googlenet ps-async ps{ps} x{n} on {n} hosts", True)
        for n, ps in ((2, 1), (2, 2), (4, 1), (4, 2), (8, 1), (8, 2))], res.rank_paces
    assert max(p.spread for p in res.rank_paces) == pytest.approx(1.082, abs=5e-4)
    assert "ps-async ps1 x4 on 4 hosts         1.034x" in holdout.table(res)
    # the report's table is the same check (harness/analysis.py)
    from harness import analysis

    shown = analysis.rank_paces(res)
    assert [(row["label"], row["verdict"]) for row in shown.rows] == [
        (p.label, "one pace") for p in res.rank_paces]
    con = sqlite3.connect(db)
    (run_id,) = con.execute("SELECT run_id FROM runs WHERE strategy = 'ps-async' AND "
                            "nodes = 4 AND ps = 1").fetchone()
    con.execute("UPDATE iterations SET seconds = 1.3 * seconds WHERE run_id = ? AND "
                "rank = 0", (run_id,))
    con.commit()
    con.close()
    with Store(str(db), readonly=True) as store:
        (ahead,) = [p for p in holdout.validate(store).rank_paces if p.run_id == run_id]
        assert not ahead.ok and ahead.slowest == 0 and ahead.spread > paces.ONE_PACE
        assert paces.check(store, store.runs("WHERE strategy = 'ps-sync'")[0]) is None
    assert "NOT ONE PACE: the model's step does not describe this run" in paces.table([ahead])


@pytest.mark.parametrize("repeat, lead, errors, verdict, sync", [
    # the rule since 2026-12-04 (psstep.ASYNC_LEAD): no worker a step ahead of another;
    # transfers queued per connection, each run's step simulated as its trials measured
    # it, the servers on the hosts ps-lite numbers them by (2026-12-05)
    (4, 1, [-14.1, -19.3, -13.0, -18.8], (False, 16.4, 19.3), (True, 5.6, 12.2)),
    # each worker at its own pace (the rule before): its worker 0, rank 0, far too fast
    (4, None, [-36.3, -63.3, -26.0, -48.1], (False, 42.2, 63.3), (True, 5.6, 12.2)),
    # repeat 5, the machine slower and the servers' fitted cost per byte 1.5x repeat 4's
    (5, 1, [-4.3, 3.3, 29.0, 4.9], (False, 4.6, 29.0), (True, 8.1, 23.5)),
    (5, None, [-8.9, -32.7, 29.0, -30.3], (False, 29.6, 32.7), (True, 8.1, 23.5)),
    # repeat 6, the tie-breaker
    (6, 1, [-2.8, -8.6, 1.8, -0.2], (True, 2.3, 8.6), (True, 4.8, 6.8)),
    (6, None, [-21.0, -54.2, -13.2, -35.7], (False, 28.4, 54.2), (True, 4.8, 6.8)),
    # repeat 7 (2026-12-05), measured after the steady-step rules (its dist_sync failed
    # them by 0.7 points), in sample for the trial and the servers' hosts
    (7, 1, [-13.2, -13.5, 7.2, 5.0], (False, 10.2, 13.5), (True, 8.5, 17.7)),
    (7, None, [-23.1, -60.1, -0.3, -31.8], (False, 27.4, 60.1), (True, 8.5, 17.7)),
    # repeat 8 (2026-12-05), measured after the trial (predictions written first, 6 of 6
    # held under it: dist_async 14.0 / 25.6% FAIL), in sample for the servers' hosts
    (8, 1, [-5.9, -11.0, -1.0, 7.7], (True, 6.8, 11.0), (True, 7.2, 10.6)),
    (8, None, [-20.7, -43.0, -4.5, -30.1], (False, 25.4, 43.0), (True, 7.2, 10.6)),
    # repeat 9 (2026-12-05), the first measured after both the trial and the servers'
    # hosts (predictions written first, 5 of 6 held): its dist_sync rows all too fast
    (9, 1, [-22.3, -6.8, -6.9, 4.5], (True, 6.8, 22.3), (False, 23.6, 29.4)),
    (9, None, [-32.0, -56.2, -18.6, -32.4], (False, 32.2, 56.2), (False, 23.6, 29.4)),
    # repeat 10, a replication of repeat 9 (5 of 6 held): its dist_sync rows all too slow
    (10, 1, [-5.7, -7.6, 15.3, 9.3], (True, 8.4, 15.3), (False, 29.6, 45.8)),
    (10, None, [-10.1, -40.7, 15.3, -28.8], (False, 22.0, 40.7), (False, 29.6, 45.8)),
    # repeat 11, on an AMD VM (2026-12-05, predictions written first, 6 of 8 held): its
    # dist_sync passes, its 2-server dist_async rows 21-22% too slow
    (11, 1, [-8.6, 4.2, 22.2, 21.0], (False, 14.8, 22.2), (True, 9.0, 12.7)),
    (11, None, [-17.8, -53.0, 4.2, -36.6], (False, 27.2, 53.0), (True, 9.0, 12.7)),
])
def test_the_readmes_ps_async_intel_repeats_recompute(tmp_path, monkeypatch, repeat, lead,
                                                      errors, verdict, sync):
    """Repeats 4 to 11 of scaling-emulated-ps-async (4-10 on the Intel VM, 11 on an AMD one,
    2026-12-04 and -05, measured after the asynchronous model, predictions written first,
    each judged alone): the dist_async
    rows (1 server x4, x8, 2 servers x4, x8) under both rules, and the dist_sync verdict."""
    from harness.perfmodel import holdout, psstep

    monkeypatch.setattr(psstep, "ASYNC_LEAD", lead)
    (db,) = shipped_copies(tmp_path, "scaling-emulated-ps-async-repeats", (f"r{repeat}.db",))
    with Store(str(db)) as store:
        res = holdout.validate(store)
    got = [round(100 * r.error, 1) for r in res.rows if r.strategy == "ps-async"]
    assert got == errors, got

    def rounded(v: dict) -> tuple:
        return v["pass"], round(100 * v["median"], 1), round(100 * v["worst"], 1)

    assert rounded(res.by_strategy()["ps-async"]) == verdict
    assert rounded(res.by_strategy()["ps-sync"]) == sync


#: runs of the shipped repeats that are not ok, by (folder, repeat): the notes name each
NOT_OK_RUNS = {
    # MXNet Horovod x4: Open MPI's daemons could not connect over the emulated hosts
    ("scaling-emulated-hepcnn-horovod-repeats", 2): ["failed"],
    # TensorFlow AlexNet x8: a worker killed by the kernel's out-of-memory killer
    ("shi2017-emulated-tensorflow-repeats", 1): ["failed"],
    # the same run, kept as skipped by the memory check that knows it since
    ("shi2017-emulated-tensorflow-repeats", 2): ["skipped"],
}


@pytest.mark.parametrize("experiment, flags, folder, runs", [
    ("shi2017-emulated.toml", {"framework": "mxnet"}, "shi2017-emulated-mxnet-repeats", 15),
    ("shi2017-emulated.toml", {"framework": "mxnet"}, "shi2017-emulated-mxnet-intel", 15),
    ("shi2017-emulated-headroom.toml", {}, "shi2017-emulated-headroom-repeats", 15),
    ("shi2017-emulated.toml", {"framework": "torch"}, "shi2017-emulated-torch-repeats", 15),
    ("shi2017-emulated.toml", {"framework": "torch"}, "shi2017-emulated-torch-intel", 15),
    ("scaling-emulated-tf-jax-hepcnn.toml", {}, "scaling-emulated-tf-jax-hepcnn-repeats", 8),
    ("scaling-emulated-tf-jax-hepcnn.toml", {}, "scaling-emulated-tf-jax-hepcnn-intel", 8),
    ("scaling-emulated-hepcnn-torch.toml", {}, "scaling-emulated-hepcnn-torch-repeats", 8),
    ("scaling-emulated-hepcnn-torch.toml", {}, "scaling-emulated-hepcnn-torch-intel", 8),
    ("scaling-emulated-hepcnn-horovod.toml", {}, "scaling-emulated-hepcnn-horovod-repeats", 8),
    ("scaling-emulated-tf-cnn.toml", {}, "scaling-emulated-tf-cnn-repeats", 10),
    ("shi2017-emulated.toml", {"framework": "tensorflow"}, "shi2017-emulated-tensorflow-repeats",
     15),
    ("scaling-emulated-ps-async.toml", {}, "scaling-emulated-ps-async-repeats", 14),
    ("scaling-emulated-ps-replicated.toml", {}, "scaling-emulated-ps-replicated-repeats", 26),
    ("cori2017-emulated-replicated.toml", {}, "cori2017-emulated-replicated-repeats", 30),
    ("cori2017-emulated-replicated.toml", {}, "cori2017-emulated-replicated-intel", 30),
    ("cori2017-emulated.toml", {}, "cori2017-emulated-intel", 18),
    ("ps-pieces-emulated.toml", {}, "ps-pieces-emulated-repeats", 30),
    ("ps-pieces-emulated.toml", {}, "ps-pieces-emulated-intel", 30),
])
def test_the_shipped_repeats_are_the_experiments_runs(experiment, flags, folder, runs):
    """The shipped repeats hold exactly the runs that `dnnbench run -e
    experiments/<experiment> [flags]` measures (the command harness/perfmodel/README.md
    gives to reproduce them), by run identity, each ok but the failures the notes report."""
    import sqlite3
    from pathlib import Path

    from harness.experiment import load

    root = Path(__file__).resolve().parent.parent
    want = {p.spec.config_hash() for p in load(root / "experiments" / experiment,
                                               flags).runs}
    assert len(want) == runs
    dbs = repeat_dbs(folder)
    assert dbs
    first = int(dbs[0].stem[1:])  # a machine's folder goes on from the set's numbering
    assert [db.name for db in dbs] == [f"r{i}.db" for i in range(first, first + len(dbs))], dbs
    for i, db in enumerate(dbs, first):
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
        stored = dict(con.execute("SELECT config_hash, status FROM runs"))
        con.close()
        assert set(stored) == want, (i, set(stored) ^ want)
        not_ok = sorted(s for s in stored.values() if s != "ok")
        assert not_ok == NOT_OK_RUNS.get((folder, i), []), (i, not_ok)


def test_the_readmes_tf_jax_rows_recompute(tmp_path):
    """harness/perfmodel/README.md's table of TensorFlow's and JAX's held-out rows (HEP-CNN, three
    repeats): each row's error per repeat and on the median sweep, and the x8 efficiencies it
    quotes (TensorFlow about 15%, JAX about 35% of 8 times the 1-worker throughput)."""
    from harness import scaling
    from harness.perfmodel import holdout_repeats

    dbs = shipped_copies(tmp_path, "scaling-emulated-tf-jax-hepcnn-repeats")
    rep = holdout_repeats.validate(dbs)
    table = {"JAX x4": [1.2, -2.8, -7.1, -2.5], "JAX x8": [0.4, -5.1, -8.6, -4.2],
             "TensorFlow x4": [1.2, -6.4, -15.5, -6.1],
             "TensorFlow x8": [-0.4, -2.4, -10.3, -3.7]}
    for name, want in table.items():
        fw, x = name.split()
        fw = {"JAX": "jax", "TensorFlow": "tensorflow"}[fw]
        got = [next(round(100 * r.error, 1) for r in res.rows
                    if r.label.startswith(f"{fw} hepcnn") and f"allreduce {x} " in r.label)
               for res in (*rep.each, rep.median)]
        assert got == want, (name, got)
    eff = {"tensorflow": [], "jax": []}
    for db in dbs:
        with Store(str(db)) as store:
            runs = store.runs("WHERE status = 'ok'")
        for r in runs:
            if r["workers"] == 8:
                eff[r["framework"]].append(round(100 * scaling.efficiency(
                    r, scaling.baseline(runs, r)), 1))
    assert eff == {"tensorflow": [15.0, 15.9, 14.9], "jax": [34.4, 35.5, 34.7]}, eff


def test_the_readmes_tf_cnn_rows_recompute_and_need_the_1_host_runs(tmp_path):
    """harness/perfmodel/README.md's held-out rows of TensorFlow's GoogLeNet and ResNet-50 curves
    (three repeats, one worker per host): each row's error per repeat and on the median sweep,
    with the cost off the wire taken from the 1-host 2-worker runs; and the column
    without those runs (the whole 2-host excess fitted as wire and grown with the ring's
    bytes): repeat 1 then predicted slow on every row, repeat 2 on three of four, the
    median sweep FAIL."""
    import sqlite3

    from harness.perfmodel import holdout_repeats

    dbs = shipped_copies(tmp_path, "scaling-emulated-tf-cnn-repeats")

    def rows(rep) -> dict[str, list[float]]:
        return {f"{m} x{x}": [next(round(100 * r.error, 1) for r in res.rows
                                   if r.label.startswith(f"tensorflow {m} ")
                                   and f"allreduce x{x} " in r.label)
                              for res in (*rep.each, rep.median)]
                for m in ("googlenet", "resnet50") for x in (4, 8)}

    rep = holdout_repeats.validate(dbs)
    assert rows(rep) == {
        "googlenet x4": [1.3, -18.0, -33.3, -20.9], "googlenet x8": [-3.3, -8.2, -30.5, -10.6],
        "resnet50 x4": [9.0, 7.8, -11.6, 4.7], "resnet50 x8": [2.7, -1.5, -15.5, -5.6]}
    # the errors of runs the probes flagged carry a *, as the README says: every held-out
    # run of repeat 3, and the fitted runs so flagged are named under the verdict
    assert [r.disturbed for r in rep.each[2].rows] == [True] * 4
    text = holdout_repeats.table(rep)
    line = next(ln for ln in text.splitlines() if ln.startswith("tensorflow googlenet")
                and "allreduce x4 " in ln)
    assert line.split()[-5:] == ["30.1%", "+1.3%", "-18.0%*", "-33.3%*", "-20.9%*"], line
    assert "* the measured run's probes read the machine disturbed (below 85%" in text
    assert ("fitted from runs the probes read disturbed (1): tensorflow googlenet b8 32px "
            "allreduce x1 @ 1gbit, 0.25 CPU/host") in text
    for db in dbs:
        con = sqlite3.connect(db)
        gone = con.execute("DELETE FROM runs WHERE workers = 2 AND "
                           "json_extract(spec_json, '$.nodes') = 1").rowcount
        con.commit()
        con.close()
        assert gone == 2, (db, gone)
    rep = holdout_repeats.validate(dbs)
    assert rows(rep) == {
        "googlenet x4": [10.9, -2.7, -23.3, -9.4], "googlenet x8": [9.5, 16.6, -15.4, 8.0],
        "resnet50 x4": [27.7, 21.6, -1.4, 21.5], "resnet50 x8": [28.2, 16.5, -1.3, 16.4]}
    assert [r.by_strategy()["allreduce"]["pass"] for r in rep.each] == [False, False, True]
    med = rep.median.by_strategy()["allreduce"]
    assert not med["pass"] and round(100 * med["median"], 1) == 12.9, med
    assert round(100 * med["worst"], 1) == 21.5, med


#: the rows of the side-by-side tables of HEP-CNN's curves (harness/perfmodel/README.md)
HEPCNN_ROWS = {"TensorFlow MultiWorkerMirrored": ("tensorflow", "allreduce"),
               "PyTorch DDP": ("torch", "allreduce"), "JAX pmean (gloo)": ("jax", "allreduce"),
               "PyTorch Horovod": ("torch", "horovod"), "MXNet Horovod": ("mxnet", "horovod"),
               "TensorFlow Horovod": ("tensorflow", "horovod")}


def _hepcnn_side_by_side(tmp_path, folders: tuple[str, ...]) -> dict:
    """Each curve's 1-worker step, time beyond it at 2 workers, images/s and efficiency at
    8 hosts, one value per shipped repeat."""
    from harness import scaling

    cells: dict[tuple, list[list[float]]] = {k: [[], [], [], []] for k in HEPCNN_ROWS.values()}
    for folder in folders:
        for db in shipped_copies(tmp_path, folder):
            with Store(str(db)) as store:
                runs = store.runs("WHERE status = 'ok'")
            by = {(r["framework"], r["strategy"], r["workers"]): r for r in runs}
            for key in {(fw, st) for fw, st, _ in by}:
                one, two, eight = (by[(*key, n)] for n in (1, 2, 8))
                c = cells[key]
                c[0].append(1e3 * one["t_iter_s"])
                c[1].append(1e3 * (two["t_iter_s"] - one["t_iter_s"]))
                c[2].append(eight["images_per_s"])
                c[3].append(100 * scaling.efficiency(eight, scaling.baseline(runs, eight)))
    return cells


def _table_rows_after(marker: str) -> dict[str, str]:
    """The rows of the first table after `marker` in harness/perfmodel/README.md, by name."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "harness" / "perfmodel" /
              "README.md").read_text()
    lines = readme[readme.index(marker):].splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    rows = {}
    for ln in lines[first:]:
        if not ln.startswith("|"):
            break
        rows[ln.split("|")[1].strip()] = ln
    return rows


@pytest.mark.parametrize("marker, folders, repeats", [
    # the AMD VM, 2026-12-03: six curves, three repeats each
    ("**HEP-CNN's curves, four frameworks**",
     ("scaling-emulated-tf-jax-hepcnn-repeats", "scaling-emulated-hepcnn-torch-repeats",
      "scaling-emulated-hepcnn-horovod-repeats"), 3),
    # the Intel VM, 2026-12-07: the four curves of TensorFlow, PyTorch and JAX, twice
    ("**HEP-CNN's curves on the Intel VM**",
     ("scaling-emulated-tf-jax-hepcnn-intel", "scaling-emulated-hepcnn-torch-intel"), 2),
])
def test_the_readmes_hepcnn_side_by_side_table_recomputes(tmp_path, marker, folders, repeats):
    """Every cell of a table of HEP-CNN's curves (harness/perfmodel/README.md, "HEP-CNN's
    curves, four frameworks" and "HEP-CNN's curves on the Intel VM": each framework's
    strategies on the same hosts and link): the range over the repeats of the 1-worker
    step, the time beyond it at 2 workers, images/s and efficiency at 8 hosts, as the
    shipped sets' databases give them (each end within rounding)."""
    cells = _hepcnn_side_by_side(tmp_path, folders)
    table = _table_rows_after(marker)
    names = [name for name, key in HEPCNN_ROWS.items() if cells[key][0]]
    assert sorted(names) == sorted(n for n in table if n in HEPCNN_ROWS), table
    for name in names:
        line = table[name]
        ranges = re.findall(r"(\d+)-(\d+)", line)
        assert len(ranges) == 4, line
        for (lo, hi), values in zip(ranges, cells[HEPCNN_ROWS[name]]):
            assert len(values) == repeats
            assert abs(min(values) - int(lo)) <= 0.6 and abs(max(values) - int(hi)) <= 0.6, \
                (name, lo, hi, values)


@pytest.mark.parametrize("index, errors, passed, not_ok, reason, twins", [
    # AMD VM, 2026-12-04: the off-the-wire rule chosen on an Intel sweep FAILS, every
    # prediction high; AlexNet x8 killed for memory (its curve judged at x4 only)
    (0, {"alexnet x4": 17.7, "googlenet x4": 17.1, "googlenet x8": 21.0, "resnet50 x4": 22.9,
         "resnet50 x8": 8.5}, (False, 17.7, 22.9), "failed", "out-of-memory",
     {"alexnet": 12.6, "googlenet": 63.4, "resnet50": 23.3}),
    # Intel VM, the same day, predictions written first: PASS; AlexNet x8 kept as skipped
    # by the memory check; every twin within 8% of its 1-host cost plus the wire's time
    (1, {"alexnet x4": 15.3, "googlenet x4": -1.8, "googlenet x8": -12.1, "resnet50 x4": 3.2,
         "resnet50 x8": 4.2}, (True, 4.2, 15.3), "skipped", "more than this host's",
     {"alexnet": 5.9, "googlenet": -7.3, "resnet50": -1.6}),
])
def test_the_readmes_shi_tensorflow_sweeps_recompute(tmp_path, index, errors, passed, not_ok,
                                                     reason, twins):
    """harness/perfmodel/README.md's two sweeps of TensorFlow's share of shi2017-emulated, each
    judged on its own (two VM kinds): the held-out rows and verdict; AlexNet's x8 run, the one not
    ok; each 2-host twin's cost beyond compute against its 1-host run's plus the wire's
    time at 1 Gbit/s; the measured claims PASS; every run across hosts carries the
    modelled bytes."""
    from harness.perfmodel import holdout, papers, traffic
    from models.cost import cost

    db = shipped_copies(tmp_path, "shi2017-emulated-tensorflow-repeats")[index]
    with Store(str(db)) as store:
        res = holdout.validate(store)
        runs = store.runs("WHERE status = 'ok'")
        other = store.runs("WHERE status != 'ok'")
    got = {r.label.split(" allreduce ")[0].removeprefix("tensorflow ").split(" b8")[0]
           + " x" + r.label.split(" allreduce x")[1].split(" ")[0]: round(100 * r.error, 1)
           for r in res.rows}
    assert got == errors, got
    v = res.by_strategy()["allreduce"]
    assert (v["pass"], round(100 * v["median"], 1), round(100 * v["worst"], 1)) == passed, v
    assert v["n"] == 5, v
    assert [(r["model"], r["workers"], r["status"]) for r in other] == [("alexnet", 8, not_ok)]
    assert reason in other[0]["reason"], other[0]["reason"]
    by = {(r["model"], r["workers"], r["cpus_per_host"]): r["t_iter_s"] for r in runs}
    got = {}
    for m in ("alexnet", "googlenet", "resnet50"):
        x1, one, twin = by[m, 1, 0.25], by[m, 2, 0.5], by[m, 2, 0.25]
        wire = cost(m, 64, 10).gradient_bytes / 125e6
        got[m] = round(100 * ((twin - x1) / (one - x1 + wire) - 1), 1)
    assert got == twins, got
    claims = papers.measured_claims(runs)
    assert claims and all(c.passed for c in claims), claims
    checked = [t for t in map(traffic.check, runs) if t is not None]
    assert len(checked) == 8 and all(t.ok for t in checked), checked


def test_the_readmes_shi_ddp_claims_recompute(tmp_path):
    """harness/perfmodel/README.md's verdicts on Shi's measured claims in the three DDP repeats:
    efficiency falls with workers on every curve of every repeat, and "more gradient bytes per FLOP
    scale worse" at x8 holds in repeat 1 only within the noise allowance and fails in
    repeats 2 and 3 (ResNet-50 scaled better than GoogLeNet in all three)."""
    from harness.perfmodel import papers

    x8 = []
    for db in shipped_copies(tmp_path, "shi2017-emulated-torch-repeats"):
        with Store(str(db)) as store:
            claims = papers.measured_claims(store.runs("WHERE status = 'ok'"))
        falls = [c for c in claims if c.text.startswith("efficiency falls")]
        assert len(falls) == 3 and all(c.passed for c in falls), falls
        (order,) = [c for c in claims if "bytes per FLOP" in c.text and "x8" in c.evidence]
        effs = dict(part.rsplit(" ", 1) for part in
                    order.evidence.split(": ", 1)[1].split(" (")[0].split(", "))
        assert float(effs["resnet50"][:-1]) > float(effs["googlenet"][:-1]), order.evidence
        x8.append((order.passed, "noise allowance" in order.evidence))
    assert x8 == [(True, True), (False, False), (False, False)], x8


def test_asynchronous_runs_bytes_per_host_are_checked_too(tmp_path):
    """traffic.check covers MXNet's dist_async runs (an asynchronous worker pushes and
    pulls the whole gradient once per step, as a synchronous one): every multi-host run of
    ps-async repeat 1, both strategies, within the allowance; a TensorFlow ps-async run
    (not modelled) is still left out."""
    from harness.perfmodel import traffic

    (db,) = shipped_copies(tmp_path, "scaling-emulated-ps-async-repeats", ("r1.db",))
    with Store(str(db)) as store:
        runs = store.runs("WHERE status = 'ok'")
    checked = {r["strategy"]: [] for r in runs}
    for r in runs:
        t = traffic.check(r)
        if t is not None:
            checked[r["strategy"]].append(t)
    assert len(checked["ps-async"]) == len(checked["ps-sync"]) == 6, checked
    assert all(t.ok for ts in checked.values() for t in ts), checked
    assert max(max(t.ratios) for t in checked["ps-async"]) < 1.04
    mx = next(r for r in runs if r["strategy"] == "ps-async" and r["nodes"] > 1)
    assert traffic.check(mx) is not None
    assert traffic.check(dict(mx, framework="tensorflow")) is None
