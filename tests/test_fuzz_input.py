"""Property-based: whatever a user or a hostile file feeds the CLI, dnnbench either does
its job or ends with exit 2 and one line naming the problem: never a traceback, never a
script line it did not write. Runs in-process (no framework, no root), under a minute."""

from __future__ import annotations

import io
import json
import math
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frameworks.contract import FIELDS
from harness.cli import main
from runners.slurm import SlurmError, SlurmOptions, sbatch_script
from runners.spec import ProcessSpec

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
HOSTILE_TEXT = st.sampled_from(["x\ntouch PWNED\n#", "../../etc", "a/b", "-rf", "", " ",
                                "ünïcødé", "\x00", "$(id)", "`id`", "a;b", "--x=y", "a" * 500])
TEXT = st.one_of(HOSTILE_TEXT, st.text(max_size=30))
NUMBER = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0, 1, 2, -1, 10**6, 2**63 - 1, 0.5]))


def _value(name: str):
    f = FIELDS[name]
    good = (st.sampled_from(f.choices) if f.choices else st.booleans() if f.type is bool
            else st.integers(int(f.low or 0), int(min(f.high or 8, 8)) or 1)
            if f.type is int else st.floats(0.001, 1.0) if f.type is float else TEXT)
    return st.one_of(good, good, NUMBER, TEXT, st.booleans(), st.lists(good, max_size=3))


@st.composite
def experiments(draw):
    keys = st.sampled_from(sorted(FIELDS) + ["bogus_key"])
    defaults = {k: draw(_value(k)) if k in FIELDS else 1
                for k in draw(st.lists(keys, max_size=6, unique=True))}
    matrix = {k: draw(st.lists(_value(k), min_size=0, max_size=3)) if k in FIELDS else [1]
              for k in draw(st.lists(keys, max_size=3, unique=True))}
    base = {"framework": draw(st.one_of(st.just("torch"), TEXT)),
            "model": draw(st.sampled_from(["alexnet", "resnet50", "googlenet", "vgg"]))}
    data = {"defaults": {**base, **defaults}, "matrix": matrix}
    if draw(st.booleans()):
        data["name"] = draw(st.one_of(TEXT, NUMBER, st.just("ok-name")))
    if draw(st.booleans()):
        data["exclude"] = draw(st.one_of(st.just([{"model": "alexnet"}]), NUMBER, TEXT))
    return data


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, int):
        return str(v) if -2**63 <= v < 2**63 else f'"{v}"'  # TOML ints are 64-bit
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


def _toml(data: dict) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for table in ("defaults", "matrix"):
        lines.append(f"[{table}]")
        lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in data[table].items()]
    return "\n".join(lines) + "\n"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse's own exits (--help, bad flags)
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _one_line_or_ok(code, err):
    assert code in (0, 2), err
    if code == 2:
        assert err.startswith("dnnbench: error:") and err.count("\n") == 1, err


@SETTINGS
@given(experiments())
def test_experiment_files_plan_or_fail_in_one_line(tmp_path, data):
    path = tmp_path / "e.toml"
    path.write_text(_toml(data))
    code, out, err = _cli("plan", str(path))
    _one_line_or_ok(code, err)


FLAG_VALUES = st.one_of(TEXT, NUMBER.map(str), st.sampled_from(["0", "-1", "nan", "inf",
                                                                 "1..5000000", "0,-1", "1e300"]))
COMMANDS = {
    "models": ["--image-size", "--classes", "--layers"],
    "predict": ["--batch", "--image-size", "--nodes", "--devices-per-node", "--workers",
                "--ps", "--link", "--intra", "--fusion-mb", "--t-forward", "--t-backward",
                "--t-update", "--model", "--framework", "--device-preset"],
    "ps-placement": ["--ps", "--detail", "--model"],
    "results": ["--framework", "--trace", "--db"],
    "report": ["--experiment", "--db"],
    # an experiment file's matrix narrowed by run flags (experiments/shi2017-emulated.toml)
    "plan": ["--framework", "--model", "--nodes", "--ps", "--link", "--cpus-per-host",
             "--devices-per-node", "--db"],
}


@SETTINGS
@given(st.sampled_from(sorted(COMMANDS)), st.data())
def test_command_lines_work_or_fail_in_one_line(tmp_path, command, data):
    flags = data.draw(st.lists(st.sampled_from(COMMANDS[command]), max_size=3, unique=True))
    argv = [command] + (["experiments/shi2017-emulated.toml"] if command == "plan" else [])
    for flag in flags:
        argv += [f"{flag}={data.draw(FLAG_VALUES)}"]
    if command == "predict" and "--t-forward" not in flags:
        argv += ["--t-forward", "0.1", "--t-backward", "0.2"]
    if command in ("results", "report") and "--db" not in flags:
        argv += ["--db", str(tmp_path / "none.db")]
    code, _, err = _cli(*argv)
    _one_line_or_ok(code, err)


RUN_FLAGS = sorted({f"--{n.replace('_', '-')}" if not f.flag else f.flag
                    for n, f in FIELDS.items() if f.type is not bool}
                   | {"--name", "--partition", "--account", "--sbatch-option", "--slurm-dir"})


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_dry_run_scripts_hold_only_harness_lines(tmp_path, data):
    """`run --launcher slurm --dry-run` with hostile flag values: exit 2 in one line, or
    sbatch scripts whose every #SBATCH line is one option the harness wrote."""
    import shutil

    out = tmp_path / f"scripts-{data.draw(st.integers(0, 10**9))}"
    argv = ["run", "--framework", "torch", "--model", "alexnet", "--image-size", "64",
            "--launcher", "slurm", "--dry-run", str(out)]
    for flag in data.draw(st.lists(st.sampled_from(RUN_FLAGS), max_size=3, unique=True)):
        argv.append(f"{flag}={data.draw(FLAG_VALUES)}")
    code, _, err = _cli(*argv)
    _one_line_or_ok(code, err)
    for script in out.glob("*.sbatch") if code == 0 else ():
        lines = script.read_text().splitlines()
        assert all(SBATCH_LINE.match(ln) for ln in lines if ln.startswith("#SBATCH")), lines
        assert lines[0] == "#!/bin/bash"
    shutil.rmtree(out, ignore_errors=True)


SBATCH_LINE = re.compile(r"#SBATCH --[a-z-]+=\S+$|#SBATCH -\S*$")


@settings(max_examples=300, deadline=None, derandomize=True)
@given(name=TEXT, partition=TEXT, account=TEXT, extra=st.lists(TEXT, max_size=3),
       output=TEXT, timeout=NUMBER)
def test_sbatch_scripts_hold_only_what_the_harness_writes(name, partition, account, extra,
                                                          output, timeout):
    procs = [ProcessSpec("worker", r, ("python", "-m", "frameworks.worker"),
                         {"DNNBENCH_THREADS": "1", "X": name}) for r in range(2)]
    try:
        text = sbatch_script(procs, 2, name, output, timeout,
                             SlurmOptions(partition=partition, account=account, extra=extra))
    except (SlurmError, TypeError):
        return
    lines = text.splitlines()
    header = [ln for ln in lines if ln.startswith("#SBATCH")]
    assert all(SBATCH_LINE.match(ln) for ln in header), header
    assert len(header) == 7 + bool(partition) + bool(account) + len(extra)
    # after the header, only lines the harness writes: comments, exports, srun and the exit
    for ln in lines[len(header) + 1:]:
        assert (ln.startswith(("# ", "export ", "srun ", 'echo ":::DNNBENCH_SLURM_EXIT'))
                or ln in ("set -u", "rc=$?", "exit $rc")), ln


def test_the_generators_reach_valid_plans(tmp_path):
    """The property above is only worth something if valid files get through too."""
    path = tmp_path / "e.toml"
    path.write_text(_toml({"name": "ok", "defaults": {"framework": "torch", "model": "alexnet",
                                                      "image_size": 64},
                           "matrix": {"batch_size": [1, 2]}}))
    code, out, err = _cli("plan", str(path))
    assert code == 0 and "2 runs" in out or "[run]" in out, out + err


@pytest.fixture
def tmp_path(tmp_path_factory):  # one folder per example would be thousands
    return Path(tmp_path_factory.mktemp("fuzz"))
