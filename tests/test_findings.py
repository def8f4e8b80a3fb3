"""The report's sentences: a winner only when the 95% intervals say so."""

import math

from reports.tables import Table, findings, shootout


def row(fw, ips, low, high):
    return {"framework": fw, "model": "resnet50", "mode": "throughput", "workers": 1,
            "batch_size": 16, "image_size": 64, "device": "cpu", "precision": "fp32",
            "images_per_s": ips, "images_per_s_low": low, "images_per_s_high": high,
            "t_iter_s": 16 / ips, "jitter": 0.01, "settling": None}


def sentences(*rows):
    return findings(shootout(list(rows)), Table("scaling", "", []))


def test_separated_intervals_name_a_winner_with_its_margin():
    (s,) = sentences(row("torch", 110, 108, 112), row("mxnet", 100, 98, 102))
    assert "PyTorch is fastest, 10.0% ahead of MXNet" in s


def test_overlapping_intervals_refuse_to_rank():
    (s,) = sentences(row("torch", 110, 95, 115), row("mxnet", 100, 98, 112))
    assert "too close to rank (+10.0%" in s


def test_a_missing_interval_is_said_not_treated_as_overlap():
    (s,) = sentences(row("torch", 110, 108, 112), row("mxnet", 150, math.nan, math.nan))
    assert "MXNet measured +36.4% over PyTorch, but this cannot be ranked" in s
    assert "no 95% interval for MXNet" in s


def test_a_single_framework_is_reported_as_such():
    (s,) = sentences(row("tensorflow", 50, 49, 51))
    assert s == "resnet50 (b16 64px cpu fp32): only TensorFlow measured, 50.0 images/s."
