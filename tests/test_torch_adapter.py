"""The PyTorch adapter in its real environment, through the real worker and runner."""

import pytest

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, plan
from harness import collect
from harness.manifest import host_manifest
from harness.sweep import worker_source_root
from runners.local import launch


def run(torch_env, **kw):
    spec = RunSpec(**{"framework": "torch", "model": "resnet50", "image_size": 32,
                      "batch_size": 4, "steps": 2, "warmup": 1, "trials": 1, "num_classes": 10,
                      **kw})
    job = launch(plan(spec, PlanContext(torch_env.python, worker_source_root(), "t")),
                 timeout=300)
    return collect.record(spec, "test", "t", job, host_manifest()), job


@pytest.mark.parametrize("model, size", [("alexnet", 64), ("googlenet", 32), ("resnet50", 32)])
def test_parameter_count_equals_cost_model(torch_env, model, size):
    from models.cost import cost

    rec, job = run(torch_env, model=model, image_size=size, num_classes=1000, steps=1, warmup=0)
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    assert rec.row["parameters"] == cost(model, size, 1000).params


def test_loss_falls_on_a_fixed_batch(torch_env):
    rec, _ = run(torch_env, model="googlenet", steps=20, warmup=0, loss_every=1, lr=0.01)
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    from frameworks import events
    losses = [v for ev in collect.job_events(_) if ev["event"] == events.LOSS for v in ev["values"]]
    assert len(losses) == 20
    assert sum(losses[-3:]) / 3 < 0.5 * sum(losses[:3]) / 3, losses


def test_breakdown_mode_records_every_phase(torch_env):
    rec, _ = run(torch_env, mode="breakdown", steps=3)
    row = rec.row
    assert row["status"] == "ok"
    assert row["t_forward_s"] > 0 and row["t_backward_s"] > 0 and row["t_update_s"] > 0
    assert row["t_io_s"] < 0.01 and row["t_comm_s"] < 0.01
    assert {p[3] for p in rec.phases} == {"io", "h2d", "forward", "backward", "comm", "update"}
    parts = sum(row[k] for k in ("t_io_s", "t_h2d_s", "t_forward_s", "t_backward_s",
                                 "t_comm_s", "t_update_s"))
    assert parts == pytest.approx(row["t_iter_s"], rel=0.5)


def test_manifest_names_versions_and_settings(torch_env):
    rec, _ = run(torch_env)
    m = rec.row["manifest_json"]
    rank0 = m["ranks"]["0"]
    assert rank0["framework_version"].startswith("2.13")
    assert rank0["settings"]["threads"] >= 1 and rank0["settings"]["layout"] == "channels_first"
    assert m["host"]["cores"] >= 1


def test_worker_reports_a_crash_as_a_clean_reason(torch_env):
    # 200,000 images of 224 px cannot be allocated on this machine: a real failure.
    rec, _ = run(torch_env, batch_size=200_000, image_size=224)
    assert rec.row["status"] == "failed"
    assert "memory" in rec.row["reason"].lower() or "alloc" in rec.row["reason"].lower()
