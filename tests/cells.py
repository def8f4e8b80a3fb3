"""Which cells of the launcher table (framework x strategy x launcher x env x link) this
test session ran to an ok row: read from the run log every recorded run of the session
appends to (DNNBENCH_RUN_LOG, harness/collect.py `audit`: sweeps in CLI subprocesses,
tests and helpers that record directly), against every cell the contract accepts.

Printed at the end of `make test`, so the claim "every (strategy, launcher, env) cell is
either run by a test or refused with a reason a test checks" (tests/test_hardening.py
checks the reasons) is a measurement of the session, not a list kept by hand.
"""

from __future__ import annotations

from pathlib import Path

Cell = tuple[str, str, str, str, str]  # framework, strategy, launcher, env, link


def candidates(framework: str):
    """One RunSpec per cell of the table for `framework`, accepted or not: every strategy,
    launcher and env, unshaped and on a shaped link (tests/test_hardening.py checks that
    each refused one says why)."""
    from frameworks.contract import ENVS, LAUNCHERS, STRATEGIES, RunSpec

    for strategy in STRATEGIES:
        for launcher in LAUNCHERS:
            for env in ENVS:
                for link in ("", "1gbit"):
                    yield RunSpec(framework, "alexnet", image_size=64, strategy=strategy,
                                  nodes=2 if strategy != "single" else 1, launcher=launcher,
                                  env=env, link=link, ps=1 if strategy.startswith("ps") else 0)


def accepted() -> set[Cell]:
    """Every cell the contract validates (launcher resolved, link '' or shaped)."""
    from frameworks.contract import SUPPORT, SpecError, validate

    out: set[Cell] = set()
    for fw in sorted(SUPPORT):
        for spec in candidates(fw):
            try:
                validate(spec)
            except SpecError:
                continue
            out.add(cell_of(spec))
    return out


def cell_of(spec) -> Cell:
    return (spec.framework, spec.strategy, spec.resolved_launcher, spec.env,
            "shaped" if spec.link else "")


def ran(log: Path) -> set[Cell]:
    """Cells of the ok runs in the session's run log (harness/collect.py `audit`)."""
    import json

    out: set[Cell] = set()
    if not log.is_file():
        return out
    for line in log.read_text().splitlines():
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if r.get("status") == "ok":
            out.add((r["framework"], r["strategy"], r["launcher"], r["env"],
                     "shaped" if r["link"] else ""))
    return out


def summary(log: Path) -> list[str]:
    """The issue's table, (strategy, launcher, env) run by any framework on any link, then
    the finer one with framework and link."""
    want, got = accepted(), ran(log)
    coarse_want = {(c[1], c[2], c[3]) for c in want}
    coarse_got = {(c[1], c[2], c[3]) for c in got}
    lines = [f"launcher table: {len(coarse_want & coarse_got)} of {len(coarse_want)} accepted "
             f"(strategy, launcher, env) cells ran to an ok row in this session"
             + (", not run: " + "; ".join(" ".join(c) for c in sorted(coarse_want - coarse_got))
                if coarse_want - coarse_got else ""),
             f"  with framework and link (shaped or not): {len(want & got)} of {len(want)}; "
             f"not run:"]
    by_key: dict[tuple[str, ...], list[str]] = {}
    for fw, strategy, launcher, env, link in sorted(want - got):
        by_key.setdefault((strategy, launcher, env, link), []).append(fw)
    for (strategy, launcher, env, link), fws in sorted(by_key.items()):
        lines.append(f"  {strategy:<9} {launcher:<10} {env:<9} {link or 'unshaped':<8} "
                     f"{', '.join(fws)}")
    return lines
