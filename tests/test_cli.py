"""`dnnbench` end to end, as a user runs it: results DB, CSV, HTML; bad input in one line."""

import csv
import json
import sqlite3
from contextlib import closing

import pytest

from tests.conftest import PLUMBING_MODEL, run_cli


def test_run_end_to_end_writes_db_csv_and_report(tmp_path, torch_env):
    db, out_csv, html = tmp_path / "r.db", tmp_path / "r.csv", tmp_path / "r.html"
    exp = tmp_path / "e.toml"
    exp.write_text("""
name = "e2e"
[defaults]
image_size = 32
batch_size = 4
steps = 3
warmup = 1
trials = 2
target_width = 0
num_classes = 10
label = "<script>alert(1)</script>"
[matrix]
framework = ["torch"]
model = ["googlenet", "resnet50", "alexnet"]
mode = ["throughput", "breakdown"]
[[exclude]]
model = "googlenet"
mode = "breakdown"
""")
    r = run_cli("run", "-e", str(exp), "--db", str(db), "--csv", str(out_csv),
                "--report", str(html))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "skipped: image_size = 32" in r.stdout  # alexnet cannot run at 32 px
    con = sqlite3.connect(db)
    rows = con.execute("SELECT model, mode, status, images_per_s, n_iters FROM runs").fetchall()
    assert len(rows) == 5
    ok = [r for r in rows if r[2] == "ok"]
    assert len(ok) == 3 and all(r[3] > 0 and r[4] == 6 for r in ok)
    assert con.execute("SELECT count(*) FROM iterations").fetchone()[0] == 3 * 6
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with open(out_csv) as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 5
    page = html.read_text()
    for *_, ips, _ in ok:
        assert f"{ips:.3g}" in page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "http://" not in page and "https://" not in page  # self-contained

    # Re-running resumes: nothing is measured twice, no duplicate rows.
    r2 = run_cli("run", "-e", str(exp), "--db", str(db))
    assert r2.returncode == 0 and "5 already stored" in r2.stdout
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 5
    # A run flag narrows the file's matrix to its value: the same runs, by the same keys.
    r3 = run_cli("run", "-e", str(exp), "--db", str(db), "--model", "resnet50")
    assert r3.returncode == 0 and "2 already stored" in r3.stdout, r3.stdout
    assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 5
    plan = run_cli("plan", str(exp), "--db", str(db), "--model", "resnet50")
    # "2 to measure" here until 2026-12-04: the header ignored --db
    assert plan.returncode == 0 and ": 2 runs, 0 to measure, 2 already stored" in plan.stdout, \
        plan.stdout
    assert "whole timeout: 0 min" in plan.stdout, plan.stdout
    # -e as `run` takes it; a failure stays stored unless --retry-failed, as for `run`
    with con:
        con.execute("UPDATE runs SET status = 'failed' WHERE model = 'resnet50' AND rowid = "
                    "(SELECT min(rowid) FROM runs WHERE model = 'resnet50')")
    plan = run_cli("plan", "-e", str(exp), "--db", str(db), "--model", "resnet50")
    assert ": 2 runs, 0 to measure, 2 already stored" in plan.stdout, plan.stdout
    assert plan.stdout.count("[stored (failed)]") == 1, plan.stdout
    plan = run_cli("plan", "-e", str(exp), "--db", str(db), "--model", "resnet50",
                   "--retry-failed")
    assert ": 2 runs, 1 to measure, 1 already stored" in plan.stdout, plan.stdout
    assert plan.stdout.count("[stored (failed), runs again]") == 1, plan.stdout


def test_single_run_from_flags_and_results_export(tmp_path, torch_env):
    db = tmp_path / "r.db"
    r = run_cli("run", "--framework", "torch", "--model", "resnet50", "--batch", "2",
                "--image-size", "32", "--steps", "2", "--warmup", "0", "--trials", "1", "--target-width", "0",
                "--db", str(db))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "r.json"
    assert run_cli("results", "--db", str(db), "--json", str(out)).returncode == 0
    data = json.loads(out.read_text())
    assert data[0]["spec"]["batch_size"] == 2 and data[0]["status"] == "ok"
    # a filter that matches nothing says so ("no runs stored" until 2026-12-04)
    r = run_cli("results", "--db", str(db), "--model", "alexnet")
    assert r.returncode == 0 and "no stored run matches --model alexnet" in r.stdout, r.stdout


@pytest.mark.parametrize("args, message", [
    (["run", "--framework", "caffe", "--model", "resnet50"], "framework = 'caffe' is not one of"),
    (["run", "--framework", "torch", "--model", "vgg"], "model = 'vgg' is not one of"),
    (["run", "--framework", "torch"], "give --experiment FILE, or both --framework and --model"),
    (["run", "-e", "missing.toml"], "does not exist"),
    (["models", "--layers", "vgg"], "unknown model 'vgg'"),
    (["report", "--db", "nope.db"], "does not exist"),
    (["env", "setup", "caffe"], "unknown framework 'caffe'"),
    # every other argument naming a framework (these three raised KeyError until 2026-12-03)
    (["env", "path", "caffe"], "framework = 'caffe' is not one of"),
    (["image", "build", "caffe", "--dry-run"], "framework = 'caffe' is not one of"),
    (["predict", "--framework", "caffe"], "framework = 'caffe' is not one of"),
    # an experiment file that is not UTF-8 (a UnicodeDecodeError until 2026-12-03)
    (["plan", "latin1.toml"], "latin1.toml: not a text file in UTF-8 (byte 11"),
    (["plan", "-e", "latin1.toml"], "latin1.toml: not a text file in UTF-8 (byte 11"),
    # plan took only a positional file until 2026-12-04, while run takes -e
    (["plan"], "plan: give one experiment file, as `dnnbench plan FILE` or"),
    (["plan", "a.toml", "-e", "b.toml"], "(got a.toml and b.toml)"),
    # a flag the subcommand does not take: argparse blamed the top level until 2026-12-04
    (["history", "--db", "x.db"], "history: unrecognized arguments: --db x.db (see dnnbench "
                                  "history --help)"),
    (["cluster", "down", "--hosts", "2"], "cluster down: unrecognized arguments: --hosts 2"),
    (["--bogus"], "error: unrecognized arguments: --bogus (see dnnbench --help)"),
    # a base image no registry names: passed to the engine until 2026-12-04
    (["image", "build", "torch", "--base-image", "x; rm -rf /", "--dry-run"],
     "image build: argument --base-image: 'x; rm -rf /' is not an image reference"),
    # a folder given for a results database: reported as missing until 2026-12-04
    (["results", "--db", "."], "results database . is a folder"),
    (["paper", "cori", "--db", "."], "results database . is a folder"),
    (["run", "-e", "latin1.toml"], "latin1.toml: not a text file in UTF-8 (byte 11"),
    # another program's SQLite file, or an empty one: report wrote an empty page with exit 0
    # until 2026-12-03
    (["report", "--db", "other.db"], "other.db: an SQLite file but not one `dnnbench run` "
                                      "wrote (its tables: notes; no `runs` table)"),
    (["results", "--db", "other.db"], "not one `dnnbench run` wrote"),
    (["predict", "--validate", "--db", "other.db"], "not one `dnnbench run` wrote"),
    (["compare", "other.db", "other.db"], "not one `dnnbench run` wrote"),
    (["report", "--db", "empty.db"], "empty.db: an SQLite file but not one `dnnbench run` "
                                      "wrote (it holds no tables"),
])
def test_bad_input_gives_one_line_and_exit_2(tmp_path, args, message):
    (tmp_path / "latin1.toml").write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    with closing(sqlite3.connect(tmp_path / "other.db")) as con, con:
        con.execute("CREATE TABLE notes (t TEXT)")
    (tmp_path / "empty.db").touch()
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("dnnbench: error:") and message in r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("text, ok", [
    ("python:3.11-slim-bookworm", True), ("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", True),
    ("localhost:5000/team/dnnbench-base:bookworm", True), ("local", True),
    ("docker.io/library/python@sha256:" + "0a" * 32, True), ("Python:3.11", False),
    ("python:3.11 --privileged", False), ("", False), ("a/b:c:d", False), ("../x", False),
])
def test_base_image_references(text, ok):
    """`image build --base-image` takes what a registry accepts, and nothing else."""
    import argparse

    from harness.cli_input import image_reference

    if ok:
        assert image_reference(text) == text
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="is not an image reference"):
            image_reference(text)


def test_missing_environment_names_the_fix(tmp_path):
    r = run_cli("run", "--framework", "torch", "--model", "resnet50", "--image-size", "32",
                "--db", str(tmp_path / "r.db"), env={"DNNBENCH_CACHE": str(tmp_path / "empty")})
    assert r.returncode == 2 and "run: dnnbench env setup torch" in r.stderr


def test_failed_worker_is_stored_and_earlier_results_kept(tmp_path, torch_env):
    db = tmp_path / "r.db"
    common = ["--framework", "torch", "--model", "resnet50", "--steps", "1", "--warmup", "0",
              "--trials", "1", "--target-width", "0", "--db", str(db)]
    assert run_cli("run", *common, "--image-size", "32", "--batch", "2").returncode == 0
    # a worker that cannot allocate its model: 200 MB of address space
    r = run_cli("run", *common, "--image-size", "32", "--batch", "3", "--memory-limit-mb",
                "200")
    assert r.returncode == 1 and "failed" in r.stdout
    con = sqlite3.connect(db)
    assert sorted(s for (s,) in con.execute("SELECT status FROM runs")) == ["failed", "ok"]


def test_three_frameworks_one_comparable_table(tmp_path, all_envs):
    db, md = tmp_path / "r.db", tmp_path / "r.md"
    r = run_cli("run", "--framework", "torch", "--model", PLUMBING_MODEL, "--db", str(db),
                "--image-size", "32", "--batch", "4", "--steps", "3", "--warmup", "1",
                "--trials", "2", "--target-width", "0")
    assert r.returncode == 0, r.stderr
    for fw in ("tensorflow", "mxnet"):
        r = run_cli("run", "--framework", fw, "--model", PLUMBING_MODEL, "--db", str(db),
                    "--image-size", "32", "--batch", "4", "--steps", "3", "--warmup", "1",
                    "--trials", "2", "--target-width", "0")
        assert r.returncode == 0, r.stdout + r.stderr
    assert run_cli("report", "--db", str(db), "--format", "md", "-o", str(md)).returncode == 0
    table = md.read_text().split("## Single-device throughput", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if f"| {PLUMBING_MODEL} |" in line]
    assert sorted(row.split("|")[1].strip() for row in rows) == ["MXNet", "PyTorch",
                                                                  "TensorFlow"]
    summary = md.read_text().split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert f"{PLUMBING_MODEL} (b4 32px cpu fp32):" in summary
    # one of the three honest verdicts, whatever the ranking on this machine
    verdicts = ("fastest", "too close to rank", "cannot be ranked with confidence")
    assert sum(v in summary for v in verdicts) == 1, summary


def test_models_table(tmp_path):
    r = run_cli("models")
    assert r.returncode == 0 and "61,100,840" in r.stdout and "4.089" in r.stdout


def test_a_sweep_with_nothing_left_to_measure_needs_no_environment(tmp_path):
    """Resuming a sweep whose runs are all stored (a bench rerun, a copied DB) checks no
    framework environment; one run left to measure still names the missing one first."""
    from harness import collect
    from harness.experiment import load
    from harness.store import RunRecord, Store

    exp = tmp_path / "e.toml"
    exp.write_text('name = "stored"\n[defaults]\nframework = "mxnet"\nimage_size = 32\n'
                   'batch_size = 4\nnum_classes = 10\n[matrix]\nmodel = ["resnet50"]\n')
    db = tmp_path / "r.db"
    (spec,) = load(exp).runnable
    with Store(str(db)) as store:
        store.add(RunRecord(collect.base_row(spec, "stored", "r1", "ok")))
    empty = {"DNNBENCH_CACHE": str(tmp_path / "no-envs")}
    r = run_cli("run", "-e", str(exp), "--db", str(db), env=empty)
    assert r.returncode == 0, r.stderr
    assert "1 of 1 runs already stored" in r.stdout + r.stderr
    exp.write_text(exp.read_text().replace('["resnet50"]', '["resnet50", "googlenet"]'))
    r = run_cli("run", "-e", str(exp), "--db", str(db), env=empty)
    assert r.returncode == 2 and "run: dnnbench env setup mxnet" in r.stderr
