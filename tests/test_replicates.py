"""The replicate axis (harness/replicates.py): a configuration measured several times within
one sweep, spread through it, and analysed as its median replicate."""

import json
import sqlite3
from pathlib import Path

import pytest

from frameworks.contract import RunSpec
from harness import replicates
from harness.experiment import ExperimentError, from_dict, load
from harness.store import Store
from tests.conftest import run_cli, stored_tails

REPO = Path(__file__).resolve().parent.parent
REPLICATED = REPO / "experiments" / "scaling-emulated-ps-replicated.toml"


def test_replicate_zero_is_the_run_every_older_database_holds():
    """Adding the field changed no stored run's identity: a results database made before
    replicates existed resumes, and replicate 0 of the replicated experiment is the same
    run as scaling-emulated-ps-async's (so the two sweeps' runs compare one to one)."""
    spec = RunSpec(framework="torch", model="googlenet")
    assert RunSpec.from_dict({**json.loads(spec.to_json()), "replicate": 0}).config_hash() \
        == spec.config_hash()
    assert RunSpec(framework="torch", model="googlenet", replicate=1).config_hash() \
        != spec.config_hash()
    rep = load(REPLICATED)
    plain = load(REPO / "experiments" / "scaling-emulated-ps-async.toml")
    first = {p.spec.config_hash() for p in rep.runs if p.spec.replicate == 0}
    assert first == {p.spec.config_hash() for p in plain.runs}
    assert len(rep.runs) == len(plain.runs) + 12  # 6 small configurations, 2 more each
    assert {p.spec.workers for p in rep.runs if p.spec.replicate} == {1, 2}


def test_replicates_are_spread_through_the_sweep():
    """Replicate j of n runs j/n of the sweep after the first: in the shipped replicated
    sweep of 26 runs, a small configuration's measurements are 6 to 14 runs apart (never
    back to back, which would measure one minute of the machine three times), and the
    sweep's runs are the matrix's, each once."""
    rep = load(REPLICATED)
    order = [p.spec for p in rep.runs]
    at: dict[str, list[int]] = {}
    for i, s in enumerate(order):
        at.setdefault(RunSpec.from_dict({**json.loads(s.to_json()), "replicate": 0})
                      .config_hash(), []).append(i)
    thrice = [sorted(v) for v in at.values() if len(v) == 3]
    assert len(thrice) == 6
    for pos in thrice:
        gaps = [b - a for a, b in zip(pos, pos[1:])] + [pos[0] + len(order) - pos[-1]]
        assert min(gaps) >= 6 and max(gaps) <= 14, pos
    assert len({s.config_hash() for s in order}) == len(order) == 26
    # without a replicate axis the matrix order is untouched
    plain = from_dict({"name": "plain", "defaults": {"framework": "torch", "image_size": 32},
                       "matrix": {"model": ["googlenet", "resnet50"], "batch_size": [2, 4]}})
    assert [(p.spec.model, p.spec.batch_size) for p in plain.runs] == [
        ("googlenet", 2), ("googlenet", 4), ("resnet50", 2), ("resnet50", 4)]


@pytest.mark.parametrize("value, words", [(-1, "must be a whole number >= 0"),
                                          (1.5, "must be a whole number"),
                                          ("two", "must be a whole number"),
                                          (100, "<= 99")])
def test_a_bad_replicate_names_the_field_and_the_rule(value, words):
    with pytest.raises(ExperimentError) as exc:
        from_dict({"name": "bad", "defaults": {"framework": "torch", "model": "googlenet"},
                   "matrix": {"replicate": [0, value]}}, "x.toml")
    assert "replicate" in str(exc.value) and words in str(exc.value), exc.value


def _row(exp: str, rep: int, t: float | None, status: str = "ok", nodes: int = 1) -> dict:
    spec = RunSpec(framework="mxnet", model="googlenet", nodes=nodes, replicate=rep)
    return {"run_id": f"{nodes}-{rep}", "experiment": exp, "config_hash": spec.config_hash(),
            "replicate": rep, "spec_json": spec.to_json(), "status": status, "t_iter_s": t}


def test_medians_keep_one_real_run_per_configuration():
    """The median ok replicate (the lower one for an even count), never an average; failed
    replicates are left out, a configuration with none ok keeps its first row, and rows of
    configurations measured once (or stored before replicates, with no replicate column)
    pass through in their order."""
    old = {"run_id": "old", "experiment": "e", "config_hash": "abc", "status": "ok",
           "t_iter_s": 9.0, "spec_json": "{}"}
    rows = [_row("e", 0, 3.0), old, _row("e", 1, 1.0), _row("e", 2, 2.0),
            _row("e", 0, 5.0, nodes=2), _row("e", 1, None, "failed", nodes=2),
            _row("e", 2, 4.0, nodes=2), _row("e", 0, None, "failed", nodes=4),
            _row("e", 1, None, "timeout", nodes=4), _row("f", 1, 7.0)]
    out = replicates.medians(rows)
    assert [r["run_id"] for r in out] == ["1-2", "old", "2-2", "4-0", "1-1"]
    assert out[0]["replicates_t_iter"] == [3.0, 1.0, 2.0]
    assert out[2]["replicates_t_iter"] == [5.0, 4.0]  # lower median of two: 4.0
    assert "replicates_t_iter" not in out[1] and "replicates_t_iter" not in out[3]
    assert out[4]["experiment"] == "f"  # another experiment's replicate is its own
    assert rows[0].get("replicates_t_iter") is None  # the caller's rows are not changed
    # one replicate asked for (--replicate 1): taken where it is ok, else the median
    picked = replicates.medians(rows, prefer=1)
    assert [r["run_id"] for r in picked] == ["1-1", "old", "2-2", "4-0", "1-1"]
    assert [r.get("replicate_chosen") for r in picked] == ["as asked", None, "the median",
                                                           None, None]


def test_scaling_compares_with_the_baselines_median_replicate():
    """A 1-worker baseline measured three times (the slowest first): the 2-worker run's
    efficiency is against the median replicate, in the report's rows and results.scaling
    alike (one function), and the replicates are not scaling points of their own."""
    from harness import collect, scaling

    rows = []
    for rep, nodes, t in ((0, 1, 1.5), (1, 1, 1.0), (2, 1, 1.2), (0, 2, 1.6)):
        spec = RunSpec(framework="torch", model="googlenet", strategy="allreduce",
                       nodes=nodes, replicate=rep if nodes == 1 else 0)
        row = collect.base_row(spec, "e", f"x{nodes}r{rep}", "ok")
        row.update(t_iter_s=t, threads=1, images_per_s=32 * nodes / t)
        rows.append(row)
    (pt,) = scaling.points(rows)
    assert pt["baseline_run_id"] == "x1r2" and pt["efficiency"] == pytest.approx(1.2 / 1.6)


def test_a_replicated_sweep_stores_each_replicate_resumes_and_reports_the_median(
        tmp_path, torch_env):
    """A real (tiny) sweep with replicate = [0, 1, 2]: three runs stored, each with its
    replicate; a rerun measures nothing; the report's tables show the configuration once
    (its median replicate) and say why, while its run table lists all three."""
    from harness import results
    from reports import render

    exp = tmp_path / "rep.toml"
    exp.write_text("""
name = "replicated-tiny"
[defaults]
framework = "torch"
model = "googlenet"
image_size = 32
batch_size = 4
steps = 2
warmup = 1
trials = 1
target_width = 0
num_classes = 10
[matrix]
replicate = [0, 1, 2]
""")
    db = tmp_path / "rep.db"
    first = run_cli("run", "-e", str(exp), "--db", str(db))
    assert first.returncode == 0, first.stderr[-3000:] + stored_tails(db)
    assert "replicate=2" in first.stdout + first.stderr
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT replicate, status, t_iter_s FROM runs "
                              "ORDER BY replicate").fetchall()
    assert [(r, s) for r, s, _ in stored] == [(0, "ok"), (1, "ok"), (2, "ok")], stored
    again = run_cli("run", "-e", str(exp), "--db", str(db))
    assert again.returncode == 0 and "3 of 3 runs already" in again.stdout + again.stderr, \
        again.stdout + again.stderr
    with Store(db, readonly=True) as store:
        ctx = render.build(store)
    assert len(ctx["ok"]) == 3 and ctx["replicated"] == 2
    (shown,) = [r for r in ctx["sections"][0][3][0].rows]  # the shoot-out: one row
    median = sorted(t for _, _, t in stored)[1]
    assert shown["t_iter_ms"] == pytest.approx(median * 1e3), (shown, stored)
    # the results API compares frameworks, not a framework's replicates with each other
    res = results.load(db)
    assert len(res.runs) == 3 and results.verdicts(res).empty
    html = render.render_html(ctx)
    assert "2 ok runs are replicates" in html
    assert "replicates of configurations" in render.render_markdown(ctx)
