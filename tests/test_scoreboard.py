"""bench.scoreboard: the model's held-out verdict on every shipped set, as the README's
table gives it (issue #17, item 4). Recomputed from the databases under
experiments/measured/ (read from copies)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from bench import scoreboard

REPO = Path(__file__).resolve().parent.parent
MEASURED = REPO / "experiments" / "measured"
#: the sets whose judging simulates many parameter-server steps (4-25 s each here): their
#: rows are recomputed in the extended tier; their numbers are pinned in the default tier
#: by the tests of each set (test_model_validation, test_ps_pieces, test_replicates,
#: test_server_requests)
HEAVY = ("scaling-emulated-ps-async-repeats", "scaling-emulated-ps-replicated-repeats",
         "ps-pieces-emulated-repeats", "cori2017-emulated-repeats",
         "cori2017-emulated-own-repeats", "shi2017-emulated-mxnet-repeats",
         "shi2017-emulated-headroom-repeats", "cori2017-emulated-slow-vm",
         "cori2017-emulated-intel", "ps-pieces-emulated-intel")


def _readme_rows() -> list[str]:
    """The README's scoreboard table, its header and every row."""
    lines = (REPO / "README.md").read_text().splitlines()
    start = lines.index("| set | repeats | machine | strategy | held out | each alone | "
                        "median / worst | verdict |")
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _folders(names=None) -> list[Path]:
    every = sorted({p.parent for p in MEASURED.glob("*/r[0-9]*.db")})
    return [f for f in every if names is None or f.name in names]


def test_repeats_are_judged_together_only_when_one_machine_measured_them(tmp_path):
    """The groups come from what each run recorded, not from a list: the ps-async set's
    AMD repeats 1-3, Intel repeats 4-10 and AMD repeat 11 (a newer kernel build), and
    shi2017-emulated-tensorflow's two machines; a copy whose manifest names another kernel
    starts a group of its own."""
    def names(folder: str) -> list[list[str]]:
        dbs = scoreboard.repeat_dbs(MEASURED / folder)
        return [[db.stem for db in g] for g in scoreboard.machine_groups(dbs)]

    assert names("scaling-emulated-ps-async-repeats") == [
        ["r1", "r2", "r3"], [f"r{i}" for i in range(4, 11)], ["r11"]]
    assert names("shi2017-emulated-tensorflow-repeats") == [["r1"], ["r2"]]
    assert names("cori2017-emulated-repeats") == [["r1", "r2", "r3"]]
    assert scoreboard.machine_of(MEASURED / "cori2017-emulated-repeats" / "r1.db") == (
        "AMD EPYC", "Linux-6.18.44-fc-v1098-x86_64-with-glibc2.36")
    # the same experiment on the slow VM, another kernel build: a folder of its own
    assert names("cori2017-emulated-slow-vm") == [["r4", "r5"]]
    assert scoreboard.machine_of(MEASURED / "cori2017-emulated-slow-vm" / "r4.db") == (
        "AMD EPYC", "Linux-6.18.44-fc-v1272-x86_64-with-glibc2.36")
    assert names("server-load-own-slow-vm") == [["r4"]]
    assert scoreboard.machine_of(MEASURED / "server-load-own-slow-vm" / "r4.db") == (
        "AMD EPYC", "Linux-6.18.44-fc-v1272-x86_64-with-glibc2.36")
    assert names("cori2017-emulated-own-third-vm") == [["r4"]]
    assert scoreboard.machine_of(MEASURED / "cori2017-emulated-own-third-vm" / "r4.db") == (
        "AMD EPYC", "Linux-6.18.44-fc-v1300-x86_64-with-glibc2.36")
    assert names("server-load-own-third-vm") == [["r5"]]
    assert scoreboard.machine_of(MEASURED / "server-load-own-third-vm" / "r5.db") == (
        "AMD EPYC", "Linux-6.18.44-fc-v1300-x86_64-with-glibc2.36")
    # a fourth AMD VM (2026-12-08) records the same CPU and kernel build, but ran every
    # configuration slower: its sweeps are kept in folders of their own, judged alone
    assert names("server-load-own-fourth-vm") == [["r9"]]
    assert names("cori2017-emulated-own-fourth-vm") == [["r8"]]
    assert scoreboard.machine_of(MEASURED / "server-load-own-fourth-vm" / "r9.db") == (
        scoreboard.machine_of(MEASURED / "server-load-own-third-vm" / "r5.db"))
    # the same kernel build on an Intel VM (2026-12-07): another machine, by its CPU
    assert names("server-load-own-intel") == [["r6", "r7", "r8"]]
    assert names("cori2017-emulated-own-intel") == [["r5", "r6", "r7"]]
    assert names("shi2017-emulated-mxnet-intel") == [["r4"]]
    assert names("scaling-emulated-ps-replicated-intel") == [["r8"]]
    assert names("cori2017-emulated-replicated-intel") == [["r2"]]
    assert names("cori2017-emulated-intel") == [["r6", "r7", "r8"]]
    assert names("scaling-emulated-hepcnn-torch-intel") == [["r4", "r5"]]
    assert names("scaling-emulated-tf-jax-hepcnn-intel") == [["r4", "r5"]]
    assert names("ps-pieces-emulated-intel") == [["r3", "r4"]]
    assert names("shi2017-emulated-torch-intel") == [["r4"]]
    assert scoreboard.machine_of(MEASURED / "server-load-own-intel" / "r7.db") == (
        "Intel(R) Xeon(R) Processor", "Linux-6.18.44-fc-v1300-x86_64-with-glibc2.36")

    dbs = [Path(shutil.copy(db, tmp_path / db.name))
           for db in scoreboard.repeat_dbs(MEASURED / "cori2017-emulated-repeats")]
    with sqlite3.connect(dbs[1]) as conn:  # r2 "measured" on another kernel build
        for run_id, manifest in conn.execute("SELECT run_id, manifest_json FROM runs").fetchall():
            m = json.loads(manifest)
            m["host"]["os"] = "Linux-another-build"
            conn.execute("UPDATE runs SET manifest_json = ? WHERE run_id = ?",
                         (json.dumps(m), run_id))
    assert [[db.stem for db in g] for g in scoreboard.machine_groups(dbs)] == [
        ["r1"], ["r2"], ["r3"]]


def test_the_readmes_scoreboard_names_every_shipped_group():
    """Every machine group of every shipped set is a row of the README's table (one per
    strategy it judged), or named under it as not judged, and nothing else is."""
    rows = _readme_rows()[2:]
    in_readme = {tuple(c.strip() for c in r.strip("|").split("|")[:3]) for r in rows}
    expected = set()
    for folder in _folders():
        for g in scoreboard.machine_groups(scoreboard.repeat_dbs(folder)):
            name = g[0].stem if len(g) == 1 else f"{g[0].stem}-{g[-1].stem}"
            expected.add((folder.name, name, scoreboard.machine_of(g[0])[0]))
    not_judged = {("tensorflow-ps-memory", "r1", "Intel(R) Xeon(R) Processor")}
    assert in_readme == expected - not_judged
    assert expected >= not_judged
    text = (REPO / "README.md").read_text()
    assert "not judged: tensorflow-ps-memory r1" in text


def test_the_readmes_scoreboard_rows_recompute():
    """The README's rows of every set but the ten heaviest, recomputed (`python -m
    bench.scoreboard --markdown`): a model change that moves a verdict must move the
    table."""
    verdicts, skipped = scoreboard.board(
        [f for f in _folders() if f.name not in HEAVY], {})
    rows = _readme_rows()
    for line in scoreboard.markdown(verdicts).splitlines():
        assert line in rows, line
    assert [s.split(":")[0] for s in skipped] == ["tensorflow-ps-memory r1"]
    assert "experiments/measured/tensorflow-ps-memory/r1.db" in skipped[0]  # not the copy


@pytest.mark.extended
def test_the_readmes_whole_scoreboard_recomputes():
    """Every row of the README's table and its totals, recomputed (about 70 s here)."""
    verdicts, _ = scoreboard.board(_folders(), {})
    assert scoreboard.markdown(verdicts).splitlines() == _readme_rows()
    text = (REPO / "README.md").read_text()
    for line in scoreboard.summary(verdicts):
        assert line in text, line
    passed, flat = sum(v.passed for v in verdicts), " ".join(text.split())
    assert f"on {passed} of the {len(verdicts)} verdicts" in flat  # the README's lead
    assert f"({passed} of {len(verdicts)} verdicts in all" in flat


def test_the_scoreboard_refuses_a_set_it_does_not_know(capsys):
    with pytest.raises(SystemExit) as exc:
        scoreboard.main(["--set", "no-such-set"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--set no-such-set: no repeat set of that name" in err
    assert "scaling-emulated-ps-async-repeats" in err  # the known ones, to pick from
    with pytest.raises(SystemExit):  # a folder of that name elsewhere is not the set
        scoreboard.main(["--set", "/tmp/scaling-emulated-ps-async-repeats"])
    assert "--set /tmp/scaling-emulated-ps-async-repeats: no repeat set" in (
        capsys.readouterr().err)
