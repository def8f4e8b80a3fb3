"""The run log behind `make test`'s launcher-table summary (tests/cells.py): every run the
harness records leaves one line with its cell and status, failed runs included, and only
ok runs count as a cell run."""

from __future__ import annotations

import sys

from frameworks.contract import RunSpec
from harness import collect, jobs
from runners.spec import ProcessSpec
from tests import cells


def test_every_recorded_run_leaves_its_cell_and_only_ok_ones_count(tmp_path, monkeypatch):
    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(collect.AUDIT_ENV, str(log))
    spec = RunSpec("mxnet", "alexnet", strategy="ps-sync", ps=1, nodes=2, link="1gbit")
    collect.audit(spec, "ok")
    # a real job that fails: record() writes its line too, as failed
    failing = RunSpec("torch", "alexnet", env="container")
    job = jobs.run(jobs.Job([ProcessSpec("worker", 0, (sys.executable, "-c",
                                                       "raise SystemExit(3)"), {})],
                            "local"), 30)
    assert collect.record(failing, "t", "r1", job, {}).row["status"] == "failed"
    lines = log.read_text().splitlines()
    assert len(lines) == 2 and '"status": "failed"' in lines[1]
    assert cells.ran(log) == {("mxnet", "ps-sync", "local", "venv", "shaped")}
    assert ("mxnet", "ps-sync", "local", "venv", "shaped") in cells.accepted()
    summary = cells.summary(log)
    assert summary[0].startswith("launcher table: 1 of ") and "ps-sync local container" in (
        summary[0])
    monkeypatch.delenv(collect.AUDIT_ENV)
    collect.audit(spec, "ok")  # unset: nothing written
    assert len(log.read_text().splitlines()) == 2


def test_make_test_runs_the_default_tier_once_and_prints_the_table_after_it():
    """`make test` runs pytest twice: the `parallel` tests of the default tier beside one
    another, then the rest alone. The two expressions split the tier (A and not B, not A
    and not B), and the second is the one after which conftest prints the launcher table
    (it printed after no `make test` before 2026-12-06: `-m`'s value read as a path)."""
    import re

    from tests.conftest import ALONE, REPO

    text = (REPO / "Makefile").read_text()
    assert re.search(r"^ALONE = (.*)$", text, re.M).group(1) == ALONE
    recipe = text.split("\ntest:\n", 1)[1].split("\n\n", 1)[0]
    assert '-m "parallel and not extended"' in recipe and '-m "$(ALONE)"' in recipe
    assert ALONE == "not parallel and not extended"
