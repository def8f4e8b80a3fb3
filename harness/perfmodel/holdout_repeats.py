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

`median_fit` splits a repeat's error further: each repeat's large runs predicted from the
median sweep's small runs (median_sweep.build's `keep`), the fit's noise taken out and the
large runs' own left in. Where a repeat fails alone and passes so, what failed it was the
few small runs its inputs were fitted on (the parameter servers' CPU per client, for
instance, is the difference between a 1- and a 2-worker run: README, "Performance
model"). On the shipped repeat sets fewer verdicts pass so than on each repeat's own
small runs (16 of 32 against 18, harness/perfmodel/README.md "Whose noise fails a repeat"): a
sweep's small runs share its hour of the machine with its large ones, which another sweep's do not.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from harness import median_sweep
from harness.perfmodel import holdout
from harness.stats import median, spread
from harness.store import Store


@dataclass
class Repeats:
    sweep: median_sweep.MedianSweep
    median: holdout.Result  # the median sweep's held-out result
    #: each repeat's own result, or why it could not be validated alone
    each: list[holdout.Result | str] = field(default_factory=list)
    #: run_id -> (experiment, config_hash), over every repeat and the median sweep
    config_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: with `median_fit`: each repeat's large runs predicted from the median sweep's small
    #: runs, or why that could not be validated (empty without `median_fit`)
    median_fitted: list[holdout.Result | str] = field(default_factory=list)
    #: the median sweep's fitted configurations whose runs spread over the repeats wider
    #: than the worst-error target (slowest / fastest - 1 above holdout.TARGET_WORST),
    #: labelled with that spread: one repeat's small runs alone could move a prediction
    #: past the target (the Intel VM's HEP-CNN curves: JAX at 1 worker 32%)
    wide_fits: list[str] = field(default_factory=list)


def _configs(st: Store) -> dict[str, tuple[str, str]]:
    return {r["run_id"]: (r["experiment"], r["config_hash"]) for r in st.runs()}


def _large(r: dict) -> bool:
    return r["workers"] > holdout.FIT_MAX_WORKERS


def validate(repeats: list[str | Path], experiment: str | None = None,
             pooled: bool = False, median_fit: bool = False, requests: bool = False,
             worker_wire: bool = False, packet_work: bool = False) -> Repeats:
    """Each repeat's held-out result and the median sweep's (with `median_fit`, also each
    repeat's large runs predicted from the median sweep's small ones). HoldoutError where
    the median sweep itself cannot be validated (a repeat that cannot is reported, not
    fatal). `requests`, `worker_wire`, `packet_work`: holdout.validate's."""
    fit = {"pooled": pooled, "requests": requests, "worker_wire": worker_wire,
           "packet_work": packet_work}
    with tempfile.TemporaryDirectory(prefix="dnnbench-median-sweep-") as tmp:
        sweep = median_sweep.build(repeats, Path(tmp) / "median.db")
        with Store(sweep.path) as st:
            med = holdout.validate(st, experiment, **fit)
            config_of = _configs(st)
        fitted: list[holdout.Result | str] = []
        for i in range(len(sweep.repeats) if median_fit else 0):
            hybrid = median_sweep.build(repeats, Path(tmp) / f"fit{i}.db", i, _large)
            with Store(hybrid.path) as st:
                try:
                    fitted.append(holdout.validate(st, experiment, **fit))
                except holdout.HoldoutError as exc:
                    fitted.append(str(exc))
    out = Repeats(sweep, med, config_of=config_of, median_fitted=fitted)
    for run_id, label in sorted(med.fitted.items(), key=lambda kv: kv[1]):
        ts = [t for t in sweep.t_iter.get(config_of[run_id], []) if t is not None]
        if spread(ts) > holdout.TARGET_WORST:
            out.wide_fits.append(f"{label} {spread(ts):.1%}")
    for p in sweep.repeats:
        with Store(p, readonly=True) as st:
            out.config_of.update(_configs(st))
            try:
                out.each.append(holdout.validate(st, experiment, **fit))
            except holdout.HoldoutError as exc:
                out.each.append(str(exc))
    return out


def _median_fit_lines(rep: Repeats, names: list[str], w: int) -> list[str]:
    """The `median_fit` block: per held-out configuration, each repeat's error with the
    median sweep's fit, and per strategy each repeat's verdict so."""
    if not rep.median_fitted:
        return []
    errors: dict[tuple[str, str], list[tuple[float, bool] | None]] = {}
    for i, res in enumerate(rep.median_fitted):
        for row in [] if isinstance(res, str) else res.rows:
            errors.setdefault(rep.config_of[row.run_id], [None] * len(names))[i] = (
                row.error, row.disturbed)
    lines = ["", "each repeat's large runs predicted from the median sweep's small runs "
             "(the fit's noise taken out, each repeat's large runs' own left in):",
             f"{'configuration (held out)':<{w}} " + "".join(f"{x:>7} " for x in names)]
    for row in rep.median.rows:
        errs = errors.get(rep.config_of[row.run_id], [None] * len(names))
        lines.append((f"{row.label:<{w}} "
                      + "".join(f"{e[0]:>+7.1%}{holdout.DISTURBED_MARK[e[1]]}"
                                if e is not None else f"{'-':>7} " for e in errs)).rstrip())
    alone = [res if isinstance(res, str) else res.by_strategy() for res in rep.median_fitted]
    for s in rep.median.by_strategy():
        verdicts = [(name, res.get(s)) for name, res in zip(names, alone)
                    if not isinstance(res, str) and res.get(s) is not None]
        lines += [f"{s}, {name} with the median sweep's fit: {_verdict(v)}"
                  for name, v in verdicts]
        lines.append(f"{s}: with the median sweep's fit each repeat meets the targets in "
                     f"{sum(bool(v['pass']) for _, v in verdicts)} of {len(verdicts)}")
    lines += [f"not validated with the median sweep's fit, {name}: {res}"
              for name, res in zip(names, alone) if isinstance(res, str)]
    return lines


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
    lines += [f"  warning: {note}" for note in rep.sweep.notes]
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
        wide = f"{spread(ts):>7.1%}" if len(ts) > 1 else f"{'-':>7}"
        errs = errors.get(key, [None] * n)
        lines.append((f"{row.label:<{w}} {wide} "
                      + "".join(f"{e[0]:>+7.1%}{holdout.DISTURBED_MARK[e[1]]}"
                                if e is not None else f"{'-':>7} " for e in errs)
                      + f"{row.error:>+7.1%}{holdout.DISTURBED_MARK[row.disturbed]}").rstrip())
    marked = any(e is not None and e[1] for errs in errors.values() for e in errs)
    lines += holdout.disturbed_notes(marked, [])
    lines += holdout.fits_note(
        f"on configurations whose runs spread more than {holdout.TARGET_WORST:.0%} over "
        "the repeats", rep.wide_fits, "slowest / fastest - 1; ",
        "each repeat alone fits on one draw of them; the median sweep takes their (lower) "
        "median")
    for name, res in zip(names, rep.each):
        if not isinstance(res, str) and res.slow_fits:
            lines += [f"{name}: " + ln for ln in holdout.slow_fits_note(res.slow_fits)]
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
    lines += _median_fit_lines(rep, names, w)
    checked = [(name, res.traffic) for name, res in zip(names, rep.each)
               if not isinstance(res, str) and res.traffic]
    if checked:
        lines.append("bytes per host, the emulated hosts' counters against the model: "
                     + ", ".join(f"{name} {sum(t.ok for t in ts)} of {len(ts)} runs ok"
                                 for name, ts in checked))
    lines += ["", "the median sweep in full:", holdout.table(rep.median)]
    return "\n".join(lines)
