"""The report's sentences: a winner only when the 95% intervals say so."""

import math

from harness.analysis import Table, findings, shootout


def row(fw, ips, low, high):
    return {"framework": fw, "model": "resnet50", "mode": "throughput", "workers": 1,
            "batch_size": 16, "image_size": 64, "device": "cpu", "precision": "fp32",
            "images_per_s": ips, "images_per_s_low": low, "images_per_s_high": high,
            "t_iter_s": 16 / ips, "jitter": 0.01, "settling": None}


def sentences(*rows, rounds=None):
    return findings(shootout(list(rows)), Table("scaling", "", []), rounds)


def paired(fw, run_id, times):
    """A run measured in an interleaved group: its trial time per round."""
    med = sorted(times)[len(times) // 2]
    r = row(fw, 16 / med, 16 / max(times), 16 / min(times))
    r.update(run_id=run_id, group_id="g1")
    return r, dict(enumerate(times))


def test_drift_shared_by_both_sides_cancels_in_the_paired_verdict():
    """The machine slows down over the group (every round slower than the last): alone,
    each run's interval is wide and they overlap; round by round torch is 5% faster every
    time, and the paired interval says so."""
    drift = [1.0 + 0.04 * k for k in range(8)]
    a, ta = paired("torch", "a", [0.100 * d for d in drift])
    b, tb = paired("mxnet", "b", [0.105 * d for d in drift])
    assert a["images_per_s_low"] < b["images_per_s_high"]  # independent: overlap
    (s,) = sentences(a, b, rounds={"a": ta, "b": tb})
    assert "PyTorch is fastest, 5.0% ahead of MXNet" in s
    assert "paired over 8 interleaved rounds" in s


def test_paired_rounds_that_disagree_refuse_to_rank():
    a, ta = paired("torch", "a", [0.100, 0.104, 0.099, 0.103, 0.100, 0.102, 0.101, 0.098])
    b, tb = paired("mxnet", "b", [0.103, 0.100, 0.102, 0.099, 0.104, 0.098, 0.101, 0.1015])
    (s,) = sentences(a, b, rounds={"a": ta, "b": tb})
    assert "too close to rank" in s and "paired over 8 interleaved rounds" in s


def test_separated_intervals_name_a_winner_with_its_margin():
    (s,) = sentences(row("torch", 110, 108, 112), row("mxnet", 100, 98, 102))
    assert "PyTorch is fastest, 10.0% ahead of MXNet" in s


def test_overlapping_intervals_refuse_to_rank():
    (s,) = sentences(row("torch", 110, 95, 115), row("mxnet", 100, 98, 112))
    assert "too close to rank (+10.0%" in s


def test_a_missing_interval_is_said_not_treated_as_overlap():
    (s,) = sentences(row("torch", 110, 108, 112), row("mxnet", 150, math.nan, math.nan))
    assert "MXNet measured +36.4% over PyTorch, but this cannot be ranked" in s
    assert "no 95% interval" in s


def test_a_single_framework_is_reported_as_such():
    (s,) = sentences(row("tensorflow", 50, 49, 51))
    assert s == "resnet50 (b16 64px cpu fp32): only TensorFlow measured, 50.0 images/s."


def test_venv_vs_container_is_judged_like_the_findings():
    """The environments table and the findings call the same verdict: a container 3%
    slower in every interleaved round is 'container slower' although the two runs' own
    intervals overlap; rounds that disagree are 'within noise'."""
    from harness.analysis import environments

    drift = [1.0 + 0.04 * k for k in range(8)]
    venv, tv = paired("torch", "v", [0.100 * d for d in drift])
    ctr, tc = paired("torch", "c", [0.103 * d for d in drift])
    for r, env in ((venv, "venv"), (ctr, "container")):
        r.update(strategy="single", env=env)
    assert venv["images_per_s_low"] < ctr["images_per_s_high"]  # independent: overlap
    (row,) = environments([venv, ctr], {"v": tv, "c": tc}).rows
    assert row["verdict"] == "container slower", row
    assert "paired over 8 interleaved rounds" in row["interval"]
    (row,) = environments([venv, ctr]).rows  # no rounds: the runs' own intervals
    assert row["verdict"] == "within noise" and "independent runs" in row["interval"]
