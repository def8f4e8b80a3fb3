"""Experiment files: matrix expansion, exclusion, and one clear line per malformed file."""

import pytest

from harness.experiment import ExperimentError, load

GOOD = """
name = "t"
[defaults]
image_size = 64
steps = 2
[matrix]
framework = ["torch"]
model = ["alexnet", "resnet50"]
mode = ["throughput", "breakdown"]
strategy = ["single", "ps-sync"]
[[exclude]]
model = "alexnet"
mode = "breakdown"
"""


def write(tmp_path, text):
    p = tmp_path / "exp.toml"
    p.write_text(text)
    return p


def test_matrix_expands_excludes_and_keeps_unsupported_as_skipped(tmp_path):
    exp = load(write(tmp_path, GOOD))
    assert exp.name == "t" and len(exp.runs) == 6  # 2 x 2 x 2 minus 2 excluded
    skipped = [p for p in exp.runs if p.skip_reason]
    assert len(skipped) == 3 and all("parameter server" in p.skip_reason for p in skipped)
    assert {s.image_size for s in exp.runnable} == {64}


@pytest.mark.parametrize("text, message", [
    ("name = 'x'\n[matrix\nmodel = 1", "not valid TOML"),
    ("[matrix]\nmodl = ['resnet50']\nframework=['torch']", "unknown key 'modl' (did you mean 'model'?)"),
    ("[matrix]\nmodel = ['resnet50']", "no 'framework' given"),
    ("[matrix]\nframework=['torch']\nmodel = ['resnet50']\nbatch_size = ['big']", "batch_size = 'big' must be a whole number"),
    ("[matrix]\nframework=['torch']\nmodel = []", "matrix.model is an empty list"),
    ("[defaults]\nsteps = true\n[matrix]\nframework=['torch']\nmodel=['resnet50']", "steps = True must be a whole number"),
    ("sweep = 1\n[matrix]\nframework=['torch']", "unknown top-level key 'sweep'"),
    ("[matrix]\nframework=['torch']\nmodel=['resnet50']\n[[exclude]]\nmodel='resnet50'", "expands to no runs"),
    # a stray [[exclude]] header: "expands to no runs" until 2026-12-04, naming no rule
    ("[matrix]\nframework=['torch']\nmodel=['resnet50']\n[[exclude]]\n[[exclude]]\nmodel='alexnet'",
     "exclude[0] is empty, so it excludes every run"),
    # a repeated value was dropped without a word until 2026-12-04
    ("[matrix]\nframework=['torch']\nmodel=['resnet50', 'alexnet', 'resnet50']",
     "matrix.model lists 'resnet50' more than once"),
    ("[matrix]\nframework=['torch']\nmodel=['resnet50']\nbatch_size=[8, 16, 8]",
     "matrix.batch_size lists 8 more than once"),
    # 101 x 100 combinations: refused before any spec is built (until 2026-12-04 any
    # size expanded; plan showed 65,536 runs and 655,360 minutes of timeouts)
    ("[matrix]\nframework=['torch']\nmodel=['resnet50']\nbatch_size=[" +
     ", ".join(map(str, range(1, 102))) + "]\nnum_classes=[" +
     ", ".join(map(str, range(2, 102))) + "]",
     "expands to 10,100 combinations (batch_size 101 x num_classes 100): a sweep holds "
     "at most 10,000 runs"),
    ("[matrix]\nframework=['torch']\nmodel=['resnet50']\nbatch_size=[" +
     ", ".join(map(str, range(1, 103))) + "]\nnum_classes=[" +
     ", ".join(map(str, range(2, 102))) + "]\n[[exclude]]\nbatch_size=1",
     "more than 10,000 remain after its 1 [[exclude]] rule(s)"),
])
def test_malformed_files_give_one_line_naming_file_and_key(tmp_path, text, message):
    with pytest.raises(ExperimentError) as info:
        load(write(tmp_path, text))
    msg = str(info.value)
    assert str(tmp_path / "exp.toml") in msg and message in msg and "\n" not in msg


def test_a_run_flag_holds_over_the_matrix_and_keeps_the_sweeps_run_keys(tmp_path):
    full = load(write(tmp_path, GOOD))
    only = load(write(tmp_path, GOOD), {"model": "resnet50"})
    assert {p.spec.model for p in only.runs} == {"resnet50"} and len(only.runs) == 4
    assert ({p.spec.config_hash() for p in only.runs}
            < {p.spec.config_hash() for p in full.runs})  # resumes the full sweep's runs
    assert {p.spec.steps for p in load(write(tmp_path, GOOD), {"steps": 5}).runs} == {5}
    new = load(write(tmp_path, GOOD), {"model": "googlenet"})  # one the file did not list
    assert {p.spec.model for p in new.runs} == {"googlenet"} and len(new.runs) == 4


def test_missing_file(tmp_path):
    with pytest.raises(ExperimentError, match="does not exist"):
        load(tmp_path / "nope.toml")


def test_shipped_experiments_are_valid():
    from pathlib import Path
    for path in sorted((Path(__file__).parent.parent / "experiments").glob("*.toml")):
        assert load(path).runs
