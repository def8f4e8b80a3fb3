"""`from dnnbench import results`: a real sweep's database as frames with the documented
columns; the example script and `dnnbench results --verdicts` run on it."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent

EXPERIMENT = """name = "api"
[defaults]
framework = "torch"
model = "googlenet"
image_size = 32
batch_size = 2
steps = 2
warmup = 1
trials = 6
target_width = 0
num_classes = 10
[matrix]
mode = ["throughput", "breakdown"]
"""


def test_a_sweep_as_frames_interleaved_and_documented(torch_env, tmp_path):
    from dnnbench import results

    exp = tmp_path / "api.toml"
    exp.write_text(EXPERIMENT)
    db = tmp_path / "api.db"
    proc = run_cli("run", "--experiment", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = results.load(db)
    for table, cols in results.COLUMNS.items():
        frame = getattr(r, table)
        names = [c for c, _, _ in cols if not (table == "runs" and c.endswith("_json"))]
        assert set(names) <= set(frame.columns), (table, set(names) - set(frame.columns))
    assert list(r.runs["status"]) == ["ok", "ok"]
    assert {type(s) for s in r.runs["spec"]} == {dict}
    # the two modes of one configuration were measured together, trial by trial
    assert set(r.runs["trial_order"]) == {"interleaved"} and r.runs["group_id"].nunique() == 1
    assert list(r.runs["n_trials"]) == [6, 6] and set(r.runs["stopped_by"]) == {"fixed trials"}
    order = r.trials.sort_values("started")
    assert list(order["round"]) == [k for k in range(6) for _ in (0, 1)]
    assert set(order.groupby("round")["run_id"].nunique()) == {2}
    assert (r.runs["warmup_steps"] >= 1).all()
    assert len(r.iterations) == 2 * 6 * 2 and set(r.phases["phase"]) >= {"forward", "backward"}
    assert set(results.describe("trials")["column"]) == {c for c, _, _ in results.COLUMNS["trials"]}

    example = subprocess.run([sys.executable, str(ROOT / "examples" / "compare_frameworks.py"),
                              str(db), "--plot", str(tmp_path / "p.png")],
                             capture_output=True, text=True, cwd=tmp_path)
    assert example.returncode == 0, example.stderr
    assert "images/s (median over trials)" in example.stdout and "googlenet" in example.stdout
    assert "plot: " in example.stdout or "--plot skipped: matplotlib" in example.stdout

    proc = run_cli("results", "--db", str(db), "--verdicts")
    assert proc.returncode == 0 and "no pair of frameworks" in proc.stdout

    # the sweep entered the host history (harness/repeat.py) as one sweep
    from harness import repeat

    with repeat.History() as h:
        assert len(h.sweep_of(r.runs["run_id"])) == 1
    iv = results.intervals(r)
    assert list(iv["run_id"]) == list(r.runs["run_id"])
    assert list(iv["low"]) == list(r.runs["images_per_s_low"])
    assert results.scaling(r).empty and list(results.scaling(r).columns)[:2] == [
        "run_id", "framework"]
    proc = run_cli("results", "--db", str(db), "--scaling", "--intervals")
    assert proc.returncode == 0 and "no multi-worker runs" in proc.stdout
    assert "repeat_low" in proc.stdout, proc.stdout
