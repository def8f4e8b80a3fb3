"""`dnnbench compare A.db B.db`: the same configurations side by side; a change is called
only where the two 95% intervals do not overlap."""

import shutil
import sqlite3

from frameworks.contract import RunSpec
from harness.store import RunRecord, Store
from tests.conftest import run_cli


def _row(spec: RunSpec, run_id: str, ips: float, half: float | None, experiment="e"):
    return RunRecord({"run_id": run_id, "experiment": experiment, "started": run_id,
                      "config_hash": spec.config_hash(), "status": "ok",
                      "spec_json": spec.to_json(), "images_per_s": ips,
                      "images_per_s_low": None if half is None else ips - half,
                      "images_per_s_high": None if half is None else ips + half})


def _db(path, rows):
    with Store(path) as store:
        for r in rows:
            assert store.add(r)
    return str(path)


SPECS = [RunSpec("torch", m, image_size=64) for m in ("alexnet", "googlenet", "resnet50")]


def test_one_changed_result_is_flagged_and_nothing_else(tmp_path):
    a = _db(tmp_path / "a.db", [_row(s, f"a{i}", 100.0 + i, 3.0) for i, s in enumerate(SPECS)]
            + [_row(RunSpec("mxnet", "alexnet", image_size=64), "a9", 50, 1)])
    b = _db(tmp_path / "b.db", [_row(SPECS[0], "b0", 101.0, 3.0),     # within noise
                                _row(SPECS[1], "b1", 80.0, 3.0),      # slower
                                _row(SPECS[2], "b2", 104.0, None),    # no interval
                                _row(RunSpec("tensorflow", "alexnet", image_size=64), "b9",
                                     70, 1)])
    r = run_cli("compare", a, b)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(ln.startswith("torch googlenet") and ln.endswith("slower") and "-20.8%" in ln
               for ln in lines), r.stdout
    assert any(ln.startswith("torch alexnet") and ln.endswith("within noise") for ln in lines)
    assert any(ln.startswith("torch resnet50") and ln.endswith("(too few samples)")
               for ln in lines)
    assert any(ln.startswith("mxnet alexnet") and ln.endswith("only in A") for ln in lines)
    assert any(ln.startswith("tensorflow alexnet") and ln.endswith("only in B")
               for ln in lines)
    assert sum(ln.endswith(("slower", "faster")) for ln in lines) == 1
    r = run_cli("compare", a, b, "--fail-on-slower")
    assert r.returncode == 1
    r = run_cli("compare", b, a, "--fail-on-slower")  # the other way round: faster
    assert r.returncode == 0 and "1 faster" in r.stdout


def test_newest_run_of_a_configuration_counts(tmp_path):
    a = _db(tmp_path / "a.db", [_row(SPECS[0], "2026-01-01", 100.0, 1.0, "old"),
                                _row(SPECS[0], "2026-02-01", 50.0, 1.0, "new")])
    b = _db(tmp_path / "b.db", [_row(SPECS[0], "2026-03-01", 50.5, 1.0)])
    r = run_cli("compare", a, b)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("1 within noise"), r.stdout
    r = run_cli("compare", a, b, "--experiment", "old")
    assert "only in A" in r.stdout and "only in B" not in r.stdout  # b's is experiment e


def test_compare_errors_are_one_line(tmp_path):
    a = _db(tmp_path / "a.db", [_row(SPECS[0], "a", 1.0, 0.1)])
    for args in (["compare", a, str(tmp_path / "missing.db")],
                 ["compare", str(tmp_path / "empty.db"), str(tmp_path / "empty.db")]):
        if "empty" in args[1]:
            sqlite3.connect(args[1]).close()
        r = run_cli(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr


def test_compare_real_runs_copied_with_one_change(torch_env, tmp_path):
    """Two real runs measured once, the DB copied and one result changed: exactly that
    one is flagged."""
    a = tmp_path / "a.db"
    common = ["--framework", "torch", "--image-size", "32", "--batch", "2", "--steps", "6",
              "--warmup", "1", "--trials", "6", "--target-width", "0", "--threads", "1", "--db", str(a)]
    for model in ("googlenet", "resnet50"):
        assert run_cli("run", "--model", model, *common).returncode == 0
    b = tmp_path / "b.db"
    shutil.copy(a, b)
    con = sqlite3.connect(b)
    assert con.execute("SELECT COUNT(*) FROM runs WHERE images_per_s_low IS NULL"
                       ).fetchone() == (0,)
    con.execute("UPDATE runs SET images_per_s = images_per_s / 2, images_per_s_low = "
                "images_per_s_low / 2, images_per_s_high = images_per_s_high / 2 "
                "WHERE model = 'resnet50'")
    con.commit()
    r = run_cli("compare", str(a), str(b))
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("torch ")]
    assert [ln.split()[1] for ln in lines if ln.endswith("slower")] == ["resnet50"], r.stdout
    assert [ln.split()[1] for ln in lines if ln.endswith("within noise")] == ["googlenet"]
