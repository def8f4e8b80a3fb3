"""Experiment files (TOML): a named sweep expanded to a list of RunSpecs.

    name = "default"
    description = "what this sweep answers"
    [defaults]            # scalar RunSpec fields shared by every run
    steps = 10
    [matrix]              # lists: every combination becomes one run
    model = ["alexnet", "resnet50"]
    mode = ["throughput", "breakdown"]
    [[exclude]]           # drop combinations matching all the given fields
    model = "alexnet"
    mode = "breakdown"

A `replicate` axis measures configurations more than once in the sweep (replicate =
[0, 1, 2], with [[exclude]] to replicate only some): the replicates are spread through the
sweep's order and analyses use each configuration's median one (harness/replicates.py).

Parsed and checked once, before anything runs; every error names the file, the key and
the allowed values. Combinations the frameworks cannot run are kept as *skipped* runs
with their reason (see `validate`), so the sweep reports them instead of hiding them.
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from frameworks.contract import FIELDS, RunSpec, SpecError, UnsupportedError, check_field, validate
from harness import replicates

SPEC_FIELDS = {f.name: f for f in fields(RunSpec)}
TOP_KEYS = {"name", "description", "defaults", "matrix", "exclude", "slurm"}
#: [slurm]: site settings for `--launcher slurm` (not part of any run's identity; the
#: command line's flags override them): key -> (type, what it becomes)
SLURM_KEYS: dict[str, tuple[type, str]] = {
    "partition": (str, "#SBATCH --partition"), "account": (str, "#SBATCH --account"),
    "qos": (str, "#SBATCH --qos"), "constraint": (str, "#SBATCH --constraint"),
    "gpus_per_node": (int, "#SBATCH --gpus-per-node"),
    "sbatch_options": (list, "extra #SBATCH lines, e.g. [\"--exclusive\"]"),
    "queue_wait_s": (float, "how long a job may wait in the queue before it is cancelled")}
#: Experiment names become file names, Slurm job names and report titles: a safe alphabet.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
#: The most runs one experiment may expand to (after [[exclude]]): larger sweeps are
#: almost always a matrix typo, and expanding millions of specs would hang the planner.
MAX_RUNS = 10_000


def check_name(name: object, where: str = "name") -> str:
    """An experiment name, or ExperimentError: it is written into file names and sbatch
    scripts, so only letters, digits, '.', '_' and '-' (up to 100, not starting with '.'
    or '-')."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise ExperimentError(f"{where} = {name!r}: use 1-100 letters, digits, '.', '_' or "
                              "'-', starting with a letter or digit (it becomes file and "
                              "Slurm job names)")
    return name


class ExperimentError(ValueError):
    """The experiment file is malformed; the message names file, key and fix."""


@dataclass(frozen=True)
class Planned:
    spec: RunSpec
    skip_reason: str = ""  # non-empty: recorded as skipped, never run


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    runs: tuple[Planned, ...]
    source: str
    slurm: dict[str, Any] = field(default_factory=dict)  # the file's [slurm], checked

    @property
    def runnable(self) -> list[RunSpec]:
        return [p.spec for p in self.runs if not p.skip_reason]


def _suggest(key: str, known) -> str:
    close = difflib.get_close_matches(key, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _check_value(src: str, where: str, name: str, value: Any) -> Any:
    if name not in SPEC_FIELDS:
        raise ExperimentError(f"{src}: {where}: unknown key {name!r}{_suggest(name, SPEC_FIELDS)}"
                              f"; known keys: {', '.join(SPEC_FIELDS)}")
    try:
        return check_field(name, value)
    except SpecError as exc:
        raise ExperimentError(f"{src}: {where}.{exc}") from None


def _checked_data(src: str, root: str, cache: dict[str, str]) -> str:
    """The dataset folder as an absolute path (workers may start elsewhere), checked once
    per experiment so a typo fails before the first run, not in every worker."""
    if root not in cache:
        from frameworks.datasets import DatasetError, list_files

        try:
            list_files(root)
        except DatasetError as exc:
            raise ExperimentError(f"{src}: {exc}") from None
        cache[root] = os.path.abspath(root)
    return cache[root]


def from_dict(data: dict[str, Any], src: str = "<experiment>",
              overrides: dict[str, Any] | None = None, strict: bool = False) -> Experiment:
    """Expand `data`; with strict=True an unsupported combination is an error, not a skip.

    `overrides` (the command line's run flags) hold over [defaults] and [matrix] alike,
    so a flag narrows a sweep to its value and the narrowed runs keep the full sweep's
    identities (a database of the whole sweep resumes them)."""
    unknown = set(data) - TOP_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise ExperimentError(f"{src}: unknown top-level key {key!r}{_suggest(key, TOP_KEYS)}; "
                              f"allowed: {', '.join(sorted(TOP_KEYS))}")
    name = check_name(data.get("name") or Path(src).stem, f"{src}: name")
    if not isinstance(data.get("description", ""), str):
        raise ExperimentError(f"{src}: description must be text")
    defaults = data.get("defaults", {})
    matrix = data.get("matrix", {})
    excludes = data.get("exclude", [])
    if not isinstance(defaults, dict) or not isinstance(matrix, dict):
        raise ExperimentError(f"{src}: [defaults] and [matrix] must be tables")
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise ExperimentError(f"{src}: exclude must be an array of tables ([[exclude]])")
    base = {k: _check_value(src, "defaults", k, v) for k, v in defaults.items()}
    base.update(overrides or {})
    axes: dict[str, list[Any]] = {}
    for key, values in matrix.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ExperimentError(f"{src}: matrix.{key} is an empty list")
        if key in FIELDS and not FIELDS[key].axis and len(values) > 1:
            raise ExperimentError(f"{src}: matrix.{key}: {key} is not a sweep axis (it is "
                                  "not part of a run's identity, so its values would collapse "
                                  "into one run); set one value under [defaults]")
        axes[key] = [_check_value(src, "matrix", key, v) for v in values]
        repeated = next((v for i, v in enumerate(axes[key]) if v in axes[key][:i]), None)
        if repeated is not None:
            raise ExperimentError(
                f"{src}: matrix.{key} lists {repeated!r} more than once; each value gives "
                "one run, so a repeat would add nothing. List it once; to measure a "
                "configuration more often raise trials, add an axis replicate = [0, 1, 2] "
                "(each configuration measured 3 times in this sweep), or run the sweep "
                "again into another database and judge the repeats together (--db A --db B)")
    for key, value in (overrides or {}).items():
        if key in axes:  # a flag holds over the sweep too: the file's runs narrowed to it
            axes[key] = [value]
    for i, rule in enumerate(excludes):
        if not rule:  # matches every run: the sweep would be empty for a stray header
            raise ExperimentError(f"{src}: exclude[{i}] is empty, so it excludes every run; "
                                  "give it the fields to match (e.g. model = \"alexnet\") "
                                  "or delete the [[exclude]] line")
        for key, value in rule.items():
            _check_value(src, f"exclude[{i}]", key, value)
    for required in ("framework", "model"):
        if required not in axes and required not in base:
            raise ExperimentError(f"{src}: no {required!r} given; add it under [matrix] "
                                  "or [defaults]")
    runs: list[Planned] = []
    seen: set[str] = set()
    datasets: dict[str, str] = {}
    points: list[dict[str, Any]] = []
    for combo in itertools.product(*axes.values()):  # the points first: cheap to count
        point = dict(zip(axes, combo))
        if any(all(point.get(k, base.get(k)) == v for k, v in rule.items())
               for rule in excludes):
            continue
        points.append(point)
        if len(points) > MAX_RUNS:
            raise ExperimentError(_too_many(src, axes, excludes))
    for point in points:
        spec = RunSpec.from_dict({**base, **point})
        if spec.data:
            spec = replace(spec, data=_checked_data(src, spec.data, datasets))
        if spec.config_hash() in seen:
            continue
        seen.add(spec.config_hash())
        try:
            validate(spec)
            runs.append(Planned(spec))
        except UnsupportedError as exc:
            if strict:
                raise
            runs.append(Planned(spec, str(exc)))
        except SpecError as exc:
            raise ExperimentError(f"{src}: {exc}") from None
    if not runs:
        raise ExperimentError(f"{src}: the matrix expands to no runs (check [[exclude]])")
    return Experiment(name, data.get("description", ""), tuple(replicates.spread(runs)), src,
                      _checked_slurm(src, data.get("slurm", {})))


def _too_many(src: str, axes: dict[str, list[Any]], excludes: list) -> str:
    """Why a sweep this large is refused, with the sizes that made it: each axis
    multiplies the others, so the fix is usually one axis fewer or a few [[exclude]]s."""
    sizes = " x ".join(f"{k} {len(v)}" for k, v in axes.items() if len(v) > 1)
    total = math.prod(len(v) for v in axes.values())
    after = (f"; more than {MAX_RUNS:,} remain after its {len(excludes)} [[exclude]] "
             "rule(s)") if excludes else ""
    return (f"{src}: the matrix expands to {total:,} combinations ({sizes}){after}: a "
            f"sweep holds at most {MAX_RUNS:,} runs (at a minute each, a week of "
            "measuring). Split it into several experiment files, narrow an axis, or "
            "exclude combinations with [[exclude]]")


def _checked_slurm(src: str, table: Any) -> dict[str, Any]:
    """The [slurm] table, each value checked as it will be written into a batch script."""
    from runners.slurm import SlurmError, check_script_text

    if not isinstance(table, dict):
        raise ExperimentError(f"{src}: [slurm] must be a table")
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in SLURM_KEYS:
            raise ExperimentError(f"{src}: slurm: unknown key {key!r}{_suggest(key, SLURM_KEYS)}"
                                  f"; allowed: {', '.join(sorted(SLURM_KEYS))}")
        kind, what = SLURM_KEYS[key]
        ok = (isinstance(value, kind) and not isinstance(value, bool)) or (
            kind is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok or (kind is list and not all(isinstance(v, str) for v in value)):
            raise ExperimentError(f"{src}: slurm.{key} = {value!r}: expected "
                                  f"{'a list of strings' if kind is list else kind.__name__} "
                                  f"({what})")
        if kind in (int, float) and not 0 <= value <= (64 if key == "gpus_per_node" else 1e7):
            raise ExperimentError(f"{src}: slurm.{key} = {value!r}: out of range ({what})")
        try:
            if kind is str:
                check_script_text(f"slurm.{key}", value)
            elif kind is list:
                for v in value:
                    check_script_text(f"slurm.{key}", v, option=True)
        except SlurmError as exc:
            raise ExperimentError(f"{src}: {exc}") from None
        out[key] = value
    return out


def load(path: str | Path, overrides: dict[str, Any] | None = None) -> Experiment:
    p = Path(path)
    if not p.is_file():
        raise ExperimentError(f"experiment file {p} does not exist (see experiments/ for "
                              "examples)")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ExperimentError(f"{p}: not a text file in UTF-8 (byte {exc.start}: "
                              f"{exc.object[exc.start:exc.start + 1]!r}); TOML files are "
                              "UTF-8, save it as such") from None
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"{p}: not valid TOML: {exc}") from None
    return from_dict(data, str(p), overrides)
