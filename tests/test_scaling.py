"""harness/scaling.py: the one rule for which 1-worker run a scaling point is measured
against (the report's table, the in-sample and the held-out validation all use it)."""

import json

from harness.scaling import baseline, cpus_per_worker, efficiency


def run(run_id, workers, t, link="1gbit", cpus=0.25, per_node=1, threads=1, **kw):
    return {"run_id": run_id, "status": "ok", "mode": "throughput", "framework": "torch",
            "model": "googlenet", "batch_size": 8, "image_size": 32, "device": "cpu",
            "threads": threads, "data": None, "workers": workers, "t_iter_s": t,
            "link": link, "cpus_per_host": cpus,
            "spec_json": json.dumps({"devices_per_node": per_node}), **kw}


def test_limited_hosts_are_compared_with_a_worker_of_the_same_cpu_share():
    x1_quarter, x1_half = run("q", 1, 1.0, cpus=0.25), run("h", 1, 0.5, cpus=0.5)
    x1_whole = run("w", 1, 0.2, link="", cpus=0.0)
    two_per_half = run("m", 4, 1.25, cpus=0.5, per_node=2)  # 2 workers on 0.5 CPU each
    one_per_quarter = run("o", 4, 1.25, cpus=0.25)
    runs = [x1_quarter, x1_half, x1_whole]
    assert cpus_per_worker(two_per_half) == 0.25
    assert baseline(runs, two_per_half) is x1_quarter
    assert baseline(runs, one_per_quarter) is x1_quarter
    assert efficiency(two_per_half, x1_quarter) == 0.8
    # no run under the same share: no baseline, never the whole machine's
    assert baseline([x1_half, x1_whole], one_per_quarter) is None
    # other threads per worker are another configuration
    assert baseline([run("t", 1, 1.0, threads=2)], one_per_quarter) is None


def test_without_limits_the_same_link_is_preferred_then_any():
    local, shaped = run("l", 1, 0.3, link="", cpus=0.0), run("s", 1, 0.31, cpus=0.0)
    r = run("r", 2, 0.4, cpus=0.0)
    assert baseline([shaped, local], r) is shaped
    assert baseline([local], r) is local
    assert efficiency(r, None) is None


def test_a_curve_is_compared_with_its_own_first_point():
    """A 1-worker Horovod run carries Horovod's overhead: the DDP curve must not use it
    (it once made DDP's 2-worker efficiency 76% instead of 50%)."""
    ddp1 = run("d1", 1, 0.160, strategy="allreduce")
    single = run("s1", 1, 0.158, strategy="single")
    hvd1 = run("h1", 1, 0.245, strategy="horovod")
    ddp2, hvd2 = run("d2", 2, 0.322, strategy="allreduce"), run("h2", 2, 0.75, strategy="horovod")
    runs = [ddp1, single, hvd1]  # the Horovod point is the newest
    assert baseline(runs, ddp2) is ddp1 and baseline(runs, hvd2) is hvd1
    assert baseline([single, hvd1], ddp2) is single  # no own point: a plain single run
