"""Every adapter in its real environment, through the real worker and runner."""

import math

import pytest

from frameworks import events
from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, plan
from harness import collect
from harness.jobs import worker_source_root
from harness.manifest import host_manifest
from models.cost import cost
from runners.local import launch
from tests.conftest import FRAMEWORKS, PLUMBING_MODEL, training_model


def run(env, **kw):
    spec = RunSpec(**{"model": "resnet50", "image_size": 32, "batch_size": 4, "steps": 2,
                      "warmup": 1, "trials": 1, "num_classes": 10, **kw})
    job = launch(plan(spec, PlanContext(env.python, worker_source_root(), "t")), timeout=300)
    return collect.record(spec, "test", "t", job, host_manifest()), job


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model, size", [
    ("alexnet", 64), ("googlenet", 32),
    # the default tier's verify loads ResNet-50's every tensor into every framework
    pytest.param("resnet50", 32, marks=pytest.mark.extended)])
def test_parameter_count_equals_cost_model(all_envs, framework, model, size):
    rec, _ = run(all_envs[framework], framework=framework, model=model, image_size=size,
                 num_classes=1000, steps=1, warmup=0)
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    assert rec.row["parameters"] == cost(model, size, 1000).params


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_loss_falls_on_a_fixed_batch(all_envs, framework):
    rec, job = run(all_envs[framework], framework=framework,
                   model=training_model(framework), steps=20, warmup=0, loss_every=1,
                   lr=0.01)
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    losses = [v for ev in collect.job_events(job) if ev["event"] == events.LOSS
              for v in ev["values"]]
    assert len(losses) == 20
    # against the untrained loss, ln(10) for 10 classes: single-worker warm-up runs until
    # the step times settle, and on a slow machine it can fit the batch before the first
    # recorded step (MXNet's first recorded loss was 0.0015 here), so the recorded steps
    # alone need not fall any more
    assert sum(losses[-3:]) / 3 < 0.5 * math.log(10), losses


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_breakdown_mode_records_every_phase(all_envs, framework):
    rec, _ = run(all_envs[framework], framework=framework, model=PLUMBING_MODEL,
                 mode="breakdown", steps=3)
    row = rec.row
    assert row["status"] == "ok", row["output_tail"]
    assert row["t_forward_s"] > 0 and row["t_backward_s"] > 0 and row["t_update_s"] > 0
    assert row["t_io_s"] < 0.01 and row["t_comm_s"] < 0.01
    assert {p[3] for p in rec.phases} == {"io", "h2d", "forward", "backward", "comm", "update"}
    parts = sum(row[k] for k in ("t_io_s", "t_h2d_s", "t_forward_s", "t_backward_s",
                                 "t_comm_s", "t_update_s"))
    # the phases are medians over the steps, so they add up to the median step, not to
    # t_iter (the trial's wall over its 3 steps), which one stalled step can double (JAX
    # in CI, 2026-12-02: phases 0.197 s, t_iter 0.517 s; the same test passes alone)
    steps = sorted(t for rank, _, _, t in rec.iterations if rank == 0)
    assert len(steps) == 3
    assert parts == pytest.approx(steps[1], rel=0.5)
    assert row["t_iter_paired_s"] > 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_manifest_names_versions_and_settings(all_envs, framework):
    rec, _ = run(all_envs[framework], framework=framework, model=PLUMBING_MODEL)
    rank0 = rec.row["manifest_json"]["ranks"]["0"]
    # the version the environment was built with (its marker file), as the worker saw it
    assert rank0["framework_version"] == all_envs[framework].info()["version"]
    assert rank0["settings"]["threads"] >= 1
    assert rec.row["manifest_json"]["host"]["cores"] >= 1
    # the kernel's memory policy beside it, as this machine reads it now
    policy = rec.row["manifest_json"]["host"]["memory_policy"]
    assert policy.get("thp") in (None, "always", "madvise", "never"), policy


def test_the_memory_policy_reads_thp_and_running_damon_schemes(tmp_path):
    """memory_policy over a /sys laid out as the kernel lays it out: the bracketed THP
    choices, and the actions of the DAMON daemons that are on (an idle one's are not
    running); a kernel without either gives what it has."""
    from harness.manifest import memory_policy

    mm = tmp_path / "kernel" / "mm"
    (mm / "transparent_hugepage").mkdir(parents=True)
    (mm / "transparent_hugepage" / "enabled").write_text("always [madvise] never\n")
    (mm / "transparent_hugepage" / "defrag").write_text(
        "always defer defer+madvise [madvise] never\n")
    for k, state, actions in (("0", "on", ["pageout", "lru_prio"]), ("1", "off", ["stat"])):
        for i, action in enumerate(actions):
            d = mm / "damon" / "admin" / "kdamonds" / k / "contexts" / "0" / "schemes" / str(i)
            d.mkdir(parents=True)
            (d / "action").write_text(action + "\n")
        (mm / "damon" / "admin" / "kdamonds" / k / "state").write_text(state + "\n")
    assert memory_policy(tmp_path) == {"thp": "madvise", "thp_defrag": "madvise",
                                       "damon_schemes": ["pageout", "lru_prio"]}
    (mm / "transparent_hugepage" / "enabled").unlink()
    assert memory_policy(tmp_path)["damon_schemes"] == ["pageout", "lru_prio"]
    assert memory_policy(tmp_path / "none") == {}


@pytest.mark.parametrize("framework, auto, explicit", [
    ("torch", "channels_last", "channels_first"), ("mxnet", "channels_first", None),
    pytest.param("jax", "channels_last", "channels_last", marks=pytest.mark.extended)])
def test_layout_auto_and_explicit_are_recorded(all_envs, framework, auto, explicit):
    rec, _ = run(all_envs[framework], framework=framework, model=PLUMBING_MODEL)
    assert rec.row["manifest_json"]["ranks"]["0"]["settings"]["layout"] == auto
    if explicit:
        rec, _ = run(all_envs[framework], framework=framework, model=PLUMBING_MODEL,
                     layout=explicit)
        assert rec.row["manifest_json"]["ranks"]["0"]["settings"]["layout"] == explicit


def test_tensorflow_xla_is_selectable_and_recorded(all_envs):
    rec, _ = run(all_envs["tensorflow"], framework="tensorflow", model=PLUMBING_MODEL, xla=True,
                 steps=1, warmup=0)
    assert rec.row["status"] == "ok", rec.row["output_tail"]
    assert rec.row["manifest_json"]["ranks"]["0"]["settings"]["xla"] is True


def test_unsupported_layout_is_a_clear_failure(all_envs):
    rec, _ = run(all_envs["tensorflow"], framework="tensorflow", layout="channels_first")
    assert rec.row["status"] == "failed"
    assert "channels_first' is unsupported by TensorFlow on CPU" in rec.row["reason"]


def test_worker_reports_a_crash_as_a_clean_reason(all_envs):
    # 200,000 images of 224 px cannot be allocated on this machine: a real failure.
    rec, _ = run(all_envs["torch"], framework="torch", batch_size=200_000, image_size=224)
    assert rec.row["status"] == "failed"
    assert "allocate" in rec.row["reason"].lower()


def test_jax_compile_time_is_stored_and_never_timed(all_envs, tmp_path, monkeypatch):
    """Compiled before the first trial, its seconds stored; a second run of the same spec
    loads the executables from XLA's persistent cache instead of compiling them again."""
    monkeypatch.setenv("DNNBENCH_XLA_CACHE", str(tmp_path / "xla"))
    rows, walls = [], []
    for _ in range(2):
        rec, _ = run(all_envs["jax"], framework="jax", model="resnet50", steps=2, trials=2,
                     target_width=0)
        assert rec.row["status"] == "ok", rec.row["output_tail"]
        rows.append(rec.row)
        walls.append([t[3] * t[5] for t in rec.trials])  # per iteration x iterations
    cold, warm = rows
    settings = [r["manifest_json"]["ranks"]["0"]["settings"] for r in rows]
    assert cold["compile_s"] == pytest.approx(sum(settings[0]["compile_s"].values()), abs=1e-3)
    assert cold["compile_s"] > 0.2
    assert cold["compile_s"] > 5 * cold["t_iter_s"]
    # compiled before the first trial: had the compile run inside it, the first trial would
    # be longer than the next by about compile_s. Judged in seconds, not as a ratio: one
    # busy second of a shared machine makes a 2-step trial several times its neighbour (CI
    # once read a first trial 7.2x the second, settling 6.2, with the compile outside it)
    first, second = walls[0]
    assert cold["settling"] == pytest.approx(first / second - 1)
    assert first - second < cold["compile_s"] / 2, (walls[0], cold["compile_s"])
    caches = [s["compile_cache"] for s in settings]
    assert caches[0]["dir"] == caches[1]["dir"] == str(tmp_path / "xla")
    assert caches[0]["requests"] > 0 and caches[0]["hits"] == 0, caches[0]
    # every compile is kept, the train step's and the small per-shape ones of Flax's
    # initialisation alike (JAX's default keeps only compiles over a second)
    assert caches[1]["hits"] == caches[1]["requests"] == caches[0]["requests"], caches
    assert warm["compile_s"] < cold["compile_s"] / 2, (cold["compile_s"], warm["compile_s"])
