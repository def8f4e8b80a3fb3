"""Bad input ends in one line naming the field, the value and the fix (exit 2), never in a
traceback, a script line the harness did not write, or a duplicated result. The field
rules come from the declarations (frameworks/contract.py FIELDS), so these tests are
generated from them."""

from __future__ import annotations

import math
import sqlite3
import subprocess
from dataclasses import replace

import pytest

from frameworks.contract import FIELDS, RunSpec, SpecError, check_field, validate
from harness import experiment
from harness.store import Store, StoreError
from runners.container import ContainerError, container_command
from runners.slurm import SlurmError, SlurmOptions, sbatch_script
from runners.spec import ProcessSpec
from tests.conftest import run_cli

BASE = RunSpec("torch", "alexnet", image_size=64)


def _bad_values(name, f):
    if f.type is bool:
        return [1, "yes"]
    if f.choices:
        return ["nope", 3]
    if f.type is str:
        return ["a\nb", "x\x00", 5]
    bad = [math.nan, math.inf, "1", True]
    if f.low is not None:
        bad.append(f.low if f.low_open else f.low - 1)
    if f.high is not None:
        bad.append(f.high * 2 + 1)
    if f.type is int:
        bad.append(1.5)
    return bad


CASES = [(name, value) for name, f in FIELDS.items() for value in _bad_values(name, f)]


def test_every_runspec_field_is_declared():
    assert set(FIELDS) == set(RunSpec.__dataclass_fields__)


@pytest.mark.parametrize("name, value", CASES, ids=[f"{n}={v!r}" for n, v in CASES])
def test_each_rule_refuses_with_the_field_named(name, value):
    with pytest.raises(SpecError, match=rf"^{name} = "):
        check_field(name, value)
    with pytest.raises(SpecError, match=name):
        validate(replace(BASE, **{name: value}))


@pytest.mark.parametrize("name", [n for n, f in FIELDS.items() if f.low is not None])
def test_bounds_themselves_are_accepted(name):
    f = FIELDS[name]
    if not f.low_open:
        check_field(name, f.type(f.low))
    check_field(name, f.type(f.high))


def test_non_axis_fields_cannot_be_swept():
    for name in [n for n, f in FIELDS.items() if not f.axis]:
        value = [1.0, 2.0] if FIELDS[name].type is float else (
            [1, 2] if FIELDS[name].type is int else ["a", "b"])
        with pytest.raises(experiment.ExperimentError, match="not a sweep axis"):
            experiment.from_dict({"name": "x", "matrix": {"framework": "torch",
                                                          "model": "alexnet", name: value}})


def test_too_many_processes_for_this_host():
    spec = replace(BASE, strategy="allreduce", devices_per_node=200)
    with pytest.raises(SpecError, match="more than this host runs"):
        validate(spec)
    validate(replace(spec, launcher="slurm", devices_per_node=1, nodes=200))  # a cluster
    loaders = replace(spec, devices_per_node=4, data="/tmp", loader_workers=256)
    with pytest.raises(SpecError, match="loader processes"):
        validate(loaders)
    validate(replace(loaders, data=""))  # synthetic data forks no loaders


@pytest.mark.parametrize("name", ["x\ntouch PWNED\n#", "../up", "a/b", "-x", ".hidden", "",
                                  "a b", "x" * 101, 7])
def test_unsafe_experiment_names(name):
    with pytest.raises(experiment.ExperimentError, match="letters, digits"):
        experiment.from_dict({"name": name, "defaults": {"framework": "torch",
                                                         "model": "alexnet"}})


def _script(**options):
    procs = [ProcessSpec("worker", 0, ("python", "-m", "frameworks.worker"),
                         {"DNNBENCH_THREADS": "1"})]
    return sbatch_script(procs, 1, options.pop("job_name", "dnnbench-x"),
                         options.pop("output", "/tmp/o-%j.out"), 60,
                         SlurmOptions(**options))


@pytest.mark.parametrize("options", [
    {"partition": "debug\ntouch PWNED"}, {"account": "a;rm -rf /"}, {"partition": "a b"},
    {"extra": ["--qos=x\ntouch PWNED"]}, {"extra": ["qos=x"]}, {"job_name": "x\ny"},
    {"job_name": "../x"}, {"output": "/tmp/a\nb"}, {"output": "/tmp/a b"}])
def test_sbatch_text_cannot_leave_its_line(options):
    with pytest.raises(SlurmError):
        _script(**options)


def test_sbatch_script_is_only_what_the_harness_writes():
    text = _script(partition="gpu", account="proj-1", extra=["--qos=debug"])
    lines = text.splitlines()
    sbatch = [ln for ln in lines if ln.startswith("#SBATCH ")]
    assert sbatch[-3:] == ["#SBATCH --partition=gpu", "#SBATCH --account=proj-1",
                           "#SBATCH --qos=debug"]
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


@pytest.mark.parametrize("args, message", [
    (["--partition", "x\ntouch PWNED"], "--partition"),
    (["--sbatch-option", "--qos=a\nrm -rf /"], "--sbatch-option"),
    (["--name", "x\ny"], "name = "),
    (["--container-image=--privileged"], "--container-image"),
    (["--gpus-per-node", "-3"], "--gpus-per-node"),
    (["--lr", "nan"], "lr = nan"),
    (["--timeout", "1e300"], "timeout_s = 1e+300"),
])
def test_cli_refuses_in_one_line(tmp_path, args, message):
    out = tmp_path / "scripts"
    r = run_cli("run", "--framework", "torch", "--model", "alexnet", "--launcher", "slurm",
                "--dry-run", str(out), *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


def test_dry_run_into_a_file_and_all_skipped(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run_cli("run", "--framework", "torch", "--model", "alexnet", "--launcher", "slurm",
                "--dry-run", str(f))
    assert r.returncode == 2 and "not a folder" in r.stderr, r.stderr
    exp = tmp_path / "e.toml"
    exp.write_text('name = "e"\n[defaults]\nframework = "torch"\nmodel = "alexnet"\n'
                   'strategy = "ps-sync"\nps = 1\nnodes = 2\nlauncher = "slurm"\n')
    r = run_cli("run", "-e", str(exp), "--dry-run", str(tmp_path / "d"))
    assert r.returncode == 2 and "every run is skipped" in r.stderr, r.stderr


@pytest.mark.parametrize("command", [["results"], ["report", "-o", "/tmp/x.html"],
                                     ["plan", "experiments/default.toml"]])
def test_a_db_that_is_not_sqlite(tmp_path, command):
    db = tmp_path / "not.db"
    db.write_text("hello, I am not a database\n" * 100)
    r = run_cli(*command, "--db", str(db))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert str(db) in r.stderr and r.stderr.count("\n") == 1


def test_container_image_and_mounts_cannot_become_options():
    spec = ProcessSpec("worker", 0, ("python", "-V"), {})
    with pytest.raises(ContainerError, match="read as an option"):
        container_command(spec, "--privileged", "podman")
    with pytest.raises(ContainerError, match="':'"):
        container_command(spec, "img", "podman", mounts=("/data/a:b",))
    cmd = container_command(spec, "img", "podman", mounts=("/w", "/d:/data:ro"))
    assert "/w:/w:ro" in cmd.argv and "/d:/data:ro" in cmd.argv


WRITER = """
import sys
from frameworks.contract import RunSpec
from harness.store import RunRecord, Store
spec = RunSpec("torch", "alexnet", image_size=64)
stored = 0
for i in range(int(sys.argv[2])):
    row = {"run_id": f"{sys.argv[3]}-{i}", "experiment": "e", "config_hash": spec.config_hash(),
           "status": "ok", "spec_json": spec.to_json()}
    with Store(sys.argv[1]) as store:
        stored += store.add(RunRecord(row))
print(stored)
"""


def test_two_writers_store_each_configuration_once(tmp_path):
    """Two processes (two sweeps) store the same configuration 20 times each, at once."""
    import sys

    db = str(tmp_path / "r.db")
    Store(db).conn.close()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, db, "20", tag],
                              stdout=subprocess.PIPE, text=True) for tag in ("a", "b")]
    stored = [int(p.communicate(timeout=60)[0]) for p in procs]
    assert sum(stored) == 1
    rows = sqlite3.connect(db).execute("SELECT COUNT(*) FROM runs").fetchone()
    assert rows == (1,)


def test_reading_a_database_never_writes_it(tmp_path):
    """A database made before today's columns (a shipped repeat), read by the store's
    read-only open and by `dnnbench report`: same bytes after, no WAL files, today's
    columns in the rows read, writes refused; a mistyped path creates nothing."""
    import hashlib
    import shutil
    from pathlib import Path

    from reports.render import run_cell

    shipped = (Path(__file__).resolve().parent.parent / "experiments" / "measured"
               / "cori2017-emulated-repeats" / "r1.db")
    db = Path(shutil.copy(shipped, tmp_path / "old.db"))
    con = sqlite3.connect(db)
    assert "ctx_switches_by_process_json" not in {
        r[1] for r in con.execute("PRAGMA table_info(runs)")}
    con.close()  # the last connection gone, its -wal and -shm files go too
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with Store(db, readonly=True) as st:
        rows = st.runs("WHERE status = 'ok'")
        assert rows and all(r["ctx_switches_by_process_json"] is None for r in rows)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            st.conn.execute("DELETE FROM runs")
    r = run_cli("report", "--db", str(db), "-o", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db", "r.html"]
    page = (tmp_path / "r.html").read_text()  # per-process columns as tag-value pairs
    assert "worker0: 0." in page and "{&#34;" not in page
    assert run_cell('{"worker0": {"voluntary_per_s": 402.0, "involuntary_per_s": 31.0}}',
                    "ctx_switches_by_process_json") == "worker0: voluntary 402, involuntary 31"
    with pytest.raises(StoreError, match="does not exist"):
        Store(tmp_path / "typo" / "x.db", readonly=True)
    assert not (tmp_path / "typo").exists()


from frameworks.contract import (  # noqa: E402
    LAUNCH_RULES,
    SUPPORT,
    UnsupportedError,
)


@pytest.mark.parametrize("rule", LAUNCH_RULES, ids=[r.message[:40] for r in LAUNCH_RULES])
def test_each_launch_rule_is_reachable_and_says_why(rule):
    spec = RunSpec(**{"framework": "torch", "model": "alexnet", "image_size": 64,
                      **rule.example})
    with pytest.raises(SpecError) as err:
        validate(spec)
    assert str(err.value) == rule.text(spec)
    assert isinstance(err.value, UnsupportedError) == rule.unsupported


@pytest.mark.parametrize("framework", sorted(SUPPORT))
def test_every_launcher_cell_runs_or_gives_a_reason(framework):
    """The whole table as data: every strategy x launcher x env x link either validates or
    is refused with a one-line reason (no other exception, no empty message)."""
    from tests.cells import candidates

    for spec in candidates(framework):
        try:
            validate(spec)
        except SpecError as exc:
            assert str(exc) and "\n" not in str(exc)
