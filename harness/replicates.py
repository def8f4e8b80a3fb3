"""Replicates: one configuration measured several times within one sweep, and the one run
per configuration that the analyses use (its median replicate).

Why this exists: the held-out check of #17 fits the performance model on a sweep's few
runs at 1 and 2 workers, and one run of 20 seconds is one draw of a minute of a shared
machine. Fitting on other sweeps' small runs was worse, not better (harness/perfmodel/README.md,
"Whose noise fails a repeat": a sweep's small runs share its hour of the machine with its large
runs, r = 0.61 between their deviations over 22 repeats). Measuring the small configurations
several times *within* the sweep keeps the hour and takes out the minute.

- An experiment asks for it with the `replicate` axis: `replicate = [0, 1, 2]` under
  [matrix] measures every configuration three times; [[exclude]] rules with `replicate`
  limit it to some (the small runs a fit uses). Each replicate is a run of its own (its
  config hash includes the replicate), so a resumed sweep measures only the missing ones.
- `spread` orders the sweep: replicate j of a configuration measured n times runs j/n of
  the sweep after its first replicate (wrapping around), so its replicates see different
  parts of the sweep's hour, not one minute twice.
- `medians` gives each configuration one run: the ok replicate with the median t_iter
  (the lower median for an even count: a real run with its own telemetry, never an
  average, as in harness/median_sweep.py), with every ok replicate's t_iter in
  `replicates_t_iter`. Configurations measured once pass through unchanged. `prefer`
  picks one replicate instead (`dnnbench predict --validate --holdout --replicate J`):
  what the same sweep would have said with each configuration measured once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from frameworks.contract import RunSpec

T = TypeVar("T")


def _spec(row: dict) -> RunSpec:
    """The run's RunSpec from a store row (`spec_json`) or a results frame's (`spec`)."""
    spec = row.get("spec_json") or row.get("spec")
    return RunSpec.from_dict(spec if isinstance(spec, dict) else json.loads(spec))


def replicate_of(row: dict) -> int:
    """0 for rows stored before replicates existed (None, or NaN in a pandas frame)."""
    rep = row.get("replicate")
    return 0 if rep is None or rep != rep else int(rep)


def configuration(row: dict) -> tuple[str, str]:
    """A stored run's configuration: its experiment and config hash with the replicate
    left out."""
    if not replicate_of(row):
        return row["experiment"], row["config_hash"]
    return row["experiment"], replace(_spec(row), replicate=0).config_hash()


def medians(rows: list[dict], prefer: int | None = None) -> list[dict]:
    """One row per configuration, in order of first appearance: its median ok replicate
    (with `replicates_t_iter`, every ok replicate's t_iter in replicate order, and
    `replicate_chosen`, why this one), or, where no replicate is ok, its first replicate's
    row. `prefer`: replicate `prefer` instead of the median where it is ok (what the sweep
    would have said had it measured each configuration once)."""
    by_config: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        by_config.setdefault(configuration(r), []).append(r)
    out = []
    for members in by_config.values():
        if len(members) == 1:
            out.append(members[0])
            continue
        members = sorted(members, key=replicate_of)
        ok = [m for m in members if m["status"] == "ok" and m.get("t_iter_s") is not None]
        if not ok:
            out.append(members[0])
            continue
        chosen = [m for m in ok if replicate_of(m) == prefer]
        if chosen:
            pick, why = dict(chosen[0]), "as asked"
        else:
            pick = dict(sorted(ok, key=lambda m: m["t_iter_s"])[(len(ok) - 1) // 2])
            why = "the median"
        pick["replicates_t_iter"] = [m["t_iter_s"] for m in ok]
        pick["replicate_chosen"] = why
        out.append(pick)
    return out


def spread(planned: list[T], spec_of: Callable[[T], RunSpec] = lambda p: p.spec) -> list[T]:
    """`planned` in the order a sweep should measure it: replicate j of n of a configuration
    placed j/n of the sweep after its first replicate (module docstring); a plan without
    replicates is returned as it is."""
    specs = [spec_of(p) for p in planned]
    if not any(s.replicate for s in specs):
        return planned
    ident = [replace(s, replicate=0).config_hash() for s in specs]
    reps: dict[str, list[int]] = {}
    for s, i in zip(specs, ident):
        reps.setdefault(i, []).append(s.replicate)
    first: dict[str, int] = {}
    for i in ident:
        first.setdefault(i, len(first))  # the configurations in the plan's order
    n_configs = len(first)

    def position(k: int) -> tuple[float, int]:
        mine = sorted(reps[ident[k]])
        j = mine.index(specs[k].replicate)
        return (first[ident[k]] + j * n_configs / len(mine)) % n_configs, j

    order = sorted(range(len(planned)), key=position)
    return [planned[k] for k in order]
