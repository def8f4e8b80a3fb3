"""Held-out validation over repeats of one sweep: the verdict on the median sweep, and the
error each repeat gives alone.

One sweep's held-out error mixes the model's error with that sweep's noise: a run at 1 or
2 workers measured during a busy minute shifts a whole predicted curve, and a run at 8
measured during a quiet one moves its own error. On this project's 2-core VM the same
experiment's verdict flipped between repeats measured hours apart (README, "Held-out
validation"). So `dnnbench predict --validate --holdout --db A --db B --db C` validates
each repeat on its own (what one sweep would have said) and the median sweep
(harness/median_sweep.py: each configuration by its median run over the repeats), whose
verdict is the one printed last and the exit status: the model judged on what the
machine usually does, not on one draw. Between the two, each held-out configuration's
measured spread over the repeats says how much of an error the machine alone could make.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness import median_sweep
from harness.perfmodel import holdout
from harness.stats import median
from harness.store import Store


@dataclass
class Repeats:
    sweep: median_sweep.MedianSweep
    median: holdout.Result  # the median sweep's held-out result
    #: each repeat's own result, or why it could not be validated alone
    each: list[holdout.Result | str] = field(default_factory=list)
    #: run_id -> (experiment, config_hash), over every repeat and the median sweep
    config_of: dict[str, tuple[str, str]] = field(default_factory=dict)


def _configs(st: Store) -> dict[str, tuple[str, str]]:
    return {r["run_id"]: (r["experiment"], r["config_hash"]) for r in st.runs()}


def validate(repeats: list[str | Path], experiment: str | None = None,
             pooled: bool = False) -> Repeats:
    """Each repeat's held-out result and the median sweep's. HoldoutError where the median
    sweep itself cannot be validated (a repeat that cannot is reported, not fatal)."""
    with tempfile.TemporaryDirectory(prefix="dnnbench-median-sweep-") as tmp:
        sweep = median_sweep.build(repeats, Path(tmp) / "median.db")
        with Store(sweep.path) as st:
            med = holdout.validate(st, experiment, pooled=pooled)
            config_of = _configs(st)
    out = Repeats(sweep, med, config_of=config_of)
    for p in sweep.repeats:
        with Store(p, readonly=True) as st:
            out.config_of.update(_configs(st))
            try:
                out.each.append(holdout.validate(st, experiment, pooled=pooled))
            except holdout.HoldoutError as exc:
                out.each.append(str(exc))
    return out


def _verdict(v: dict) -> str:
    return (f"median {v['median']:.1%}, worst {v['worst']:.1%}: "
            + ("PASS" if v["pass"] else "FAIL"))


def table(rep: Repeats) -> str:
    """Per held-out configuration: its measured spread over the repeats and the error each
    repeat's own fit gives it; per strategy, each repeat's verdict; then the median
    sweep's full held-out table, whose verdict counts."""
    n = len(rep.sweep.repeats)
    names = [f"r{i + 1}" for i in range(n)]
    lines = [f"{n} repeats of the sweep; the median sweep takes each configuration from "
             "the repeat with its median t_iter (the lower median for an even count):"]
    lines += [f"  {name} = {p}" for name, p in zip(names, rep.sweep.repeats)]
    lines.append("")
    errors: dict[tuple[str, str], list[tuple[float, bool] | None]] = {}
    for i, res in enumerate(rep.each):
        if isinstance(res, str):
            continue
        for row in res.rows:
            key = rep.config_of[row.run_id]
            errors.setdefault(key, [None] * n)[i] = (row.error, row.disturbed)
    w = max([58] + [len(r.label) for r in rep.median.rows])
    head = (f"{'configuration (held out)':<{w}} {'spread':>7} "
            + "".join(f"{x:>7} " for x in names) + f"{'median':>7}")
    lines += ["held-out error of each repeat fitted on its own small runs, and of the "
              "median sweep (spread: slowest / fastest measured t_iter over the repeats - 1):",
              head]
    for row in rep.median.rows:
        key = rep.config_of[row.run_id]
        ts = [t for t in rep.sweep.t_iter.get(key, []) if t is not None]
        spread = f"{max(ts) / min(ts) - 1:>7.1%}" if len(ts) > 1 else f"{'-':>7}"
        errs = errors.get(key, [None] * n)
        lines.append((f"{row.label:<{w}} {spread} "
                      + "".join(f"{e[0]:>+7.1%}{holdout.DISTURBED_MARK[e[1]]}"
                                if e is not None else f"{'-':>7} " for e in errs)
                      + f"{row.error:>+7.1%}{holdout.DISTURBED_MARK[row.disturbed]}").rstrip())
    marked = any(e is not None and e[1] for errs in errors.values() for e in errs)
    lines += holdout.disturbed_notes(marked, [])
    lines.append("")
    med = rep.median.by_strategy()
    alone = [res if isinstance(res, str) else res.by_strategy() for res in rep.each]
    for s in med:
        passed, judged, worsts = 0, 0, []
        for name, res in zip(names, alone):
            if isinstance(res, str):
                lines.append(f"{s}, {name}: not validated alone ({res})")
                continue
            v = res.get(s)
            if v is None:
                continue
            judged += 1
            passed += bool(v["pass"])
            worsts.append(v["worst"])
            lines.append(f"{s}, {name} alone: {_verdict(v)}")
        lines.append(f"{s}: each repeat alone meets the targets in {passed} of {judged}"
                     + (f" (median of their worst errors {median(worsts):.1%})"
                        if worsts else ""))
        lines.append(f"{s}, median sweep: {_verdict(med[s])}")
    checked = [(name, res.traffic) for name, res in zip(names, rep.each)
               if not isinstance(res, str) and res.traffic]
    if checked:
        lines.append("bytes per host, the emulated hosts' counters against the model: "
                     + ", ".join(f"{name} {sum(t.ok for t in ts)} of {len(ts)} runs ok"
                                 for name, ts in checked))
    lines += ["", "the median sweep in full:", holdout.table(rep.median)]
    return "\n".join(lines)
