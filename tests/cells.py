"""Which cells of the launcher table (framework x strategy x launcher x env x link) this
test session ran to an ok row: read back from every results database the session's tests
wrote under pytest's base temporary folder, against every cell the contract accepts.

Printed at the end of `make test`, so the claim "every cell is either run by a test or
refused with a reason a test checks" (tests/test_hardening.py checks the reasons) is a
measurement of the session, not a list kept by hand.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

Cell = tuple[str, str, str, str, str]  # framework, strategy, launcher, env, link


def accepted() -> set[Cell]:
    """Every cell the contract validates (launcher resolved, link '' or shaped)."""
    from frameworks.contract import (
        ENVS,
        LAUNCHERS,
        STRATEGIES,
        SUPPORT,
        RunSpec,
        SpecError,
        validate,
    )

    out: set[Cell] = set()
    for fw in sorted(SUPPORT):
        for strategy in STRATEGIES:
            for launcher in LAUNCHERS:
                for env in ENVS:
                    for link in ("", "1gbit"):
                        spec = RunSpec(fw, "alexnet", image_size=64, strategy=strategy,
                                       nodes=2 if strategy != "single" else 1,
                                       launcher=launcher, env=env, link=link,
                                       ps=1 if strategy.startswith("ps") else 0)
                        try:
                            validate(spec)
                        except SpecError:
                            continue
                        out.add(cell_of(spec))
    return out


def cell_of(spec) -> Cell:
    return (spec.framework, spec.strategy, spec.resolved_launcher, spec.env,
            "shaped" if spec.link else "")


def ran(base: Path) -> set[Cell]:
    """Cells of the ok rows in every results database under `base`."""
    from frameworks.contract import RunSpec

    out: set[Cell] = set()
    for db in base.rglob("*.db"):
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            rows = conn.execute("SELECT spec_json FROM runs WHERE status = 'ok'").fetchall()
            conn.close()
        except sqlite3.Error:
            continue  # not a results database (a history, a Slurm state file)
        for (text,) in rows:
            try:
                out.add(cell_of(RunSpec.from_json(text)))
            except (ValueError, TypeError, KeyError):
                continue
    return out


def summary(base: Path) -> list[str]:
    want, got = accepted(), ran(base)
    lines = [f"launcher table: {len(want & got)} of {len(want)} accepted cells ran to an ok "
             f"row in this session (framework, strategy, launcher, env, link); not run:"]
    by_key: dict[tuple[str, ...], list[str]] = {}
    for fw, strategy, launcher, env, link in sorted(want - got):
        by_key.setdefault((strategy, launcher, env, link), []).append(fw)
    for (strategy, launcher, env, link), fws in sorted(by_key.items()):
        lines.append(f"  {strategy:<9} {launcher:<10} {env:<9} {link or 'unshaped':<8} "
                     f"{', '.join(fws)}")
    return lines
