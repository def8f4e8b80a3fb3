"""Render the results database into a self-contained HTML file, Markdown, or CSV files.

Everything the page needs is inline (CSS, SVG charts, a few lines of sort script): it
opens from a laptop, an e-mail attachment or an air-gapped cluster login node alike.
jinja2 autoescaping is on, so any text that comes from data shows as text. The same
Table objects (harness/analysis.py) feed all three formats.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jinja2

from harness import analysis as T
from harness import repeat, replicates, verdicts
from harness.perfmodel import holdout, validate
from harness.perfmodel.predict import predict
from harness.store import RUN_COLUMNS, Store
from reports.svg import Bar, GroupedBars, Series, grouped_bars, line_chart, stacked_bars

TEMPLATES = Path(__file__).resolve().parent / "templates"
FORMATS = ("html", "md", "csv")
RUN_TABLE_COLUMNS = [c for c in RUN_COLUMNS if c[0] not in (
    "spec_json", "manifest_json", "output_tail", "config_hash")]


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = T.fmt
    env.filters["cell"] = run_cell
    return env


def run_cell(value: Any, column: str) -> str:
    """A cell of the all-runs table. A per-process column (JSON by tag) reads as `tag
    value` pairs, nested counts named (`worker0: voluntary 402, involuntary 31`): raw JSON
    in a table cell is unreadable and, unbroken, widens the table past the page."""
    if not column.endswith("_json") or not value:
        return T.fmt(value)
    try:
        obj = json.loads(value)
    except ValueError:
        return str(value)
    if not isinstance(obj, dict):
        return str(value)

    def one(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{k.removesuffix('_per_s')} {T.fmt(x)}" for k, x in v.items())
        return T.fmt(v)

    return "; ".join(f"{tag}: {one(v)}" for tag, v in obj.items())


def _shootout_charts(shoot: T.Table) -> list:
    charts = []
    for cfg in sorted({row["config"] for row in shoot.rows}):
        rows = [row["_row"] for row in shoot.rows if row["config"] == cfg]
        models = sorted({r["model"] for r in rows})
        series: dict[str, list] = {}
        for fw in sorted({r["framework"] for r in rows}):
            bars = []
            for m in models:
                match = [r for r in rows if r["framework"] == fw and r["model"] == m]
                r = max(match, key=lambda r: r["images_per_s"]) if match else None
                bars.append(Bar(r["images_per_s"], r["images_per_s_low"],
                                r["images_per_s_high"]) if r else None)
            series[T.display(fw)] = bars
        charts.append(grouped_bars(GroupedBars(f"Training throughput, {cfg}", "images/s",
                                               models, series)))
    return charts


def _scaling_charts(store: Store, scale: T.Table, held: T.Table | None = None) -> list:
    """Measured throughput/efficiency vs workers, with the model's curve (dashed) beyond,
    and the held-out prediction (dotted markers) where runs at both scales exist."""
    held_by_run = {row["_held"].run_id: row["_held"] for row in (held.rows if held else [])}
    groups: dict[tuple, list[dict]] = {}
    for row in scale.rows:
        key = (row["framework"], row["model"], row["strategy"], row["config"])
        groups.setdefault(key, []).append(row)
    tp: list[Series] = []
    eff: list[Series] = []
    for (fw, model, strategy, cfg), rows in sorted(groups.items()):
        name = f"{fw} {model} {strategy} ({cfg})"
        base = rows[0]["_base"]
        pts = sorted((row["workers"], row["images_per_s"]) for row in rows)
        effs = sorted((row["workers"], row["efficiency_pct"]) for row in rows
                      if row["efficiency_pct"] is not None)
        if base:
            pts = [(1, base["images_per_s"])] + pts
            effs = [(1, 100.0)] + effs
        tp.append(Series(f"{name} measured", pts))
        eff.append(Series(f"{name} measured", effs))
        held_pts = sorted((row["workers"], row["_row"]["batch_size"] * row["workers"]
                           / held_by_run[row["_row"]["run_id"]].predicted)
                          for row in rows if row["_row"]["run_id"] in held_by_run)
        if held_pts:
            tp.append(Series(f"{name} held-out prediction", held_pts, dashed=True,
                             color_of=f"{name} measured"))
        largest = max(rows, key=lambda row: row["workers"])
        model_in = validate.scenario_for(store, largest["_row"])
        if model_in:
            sc, compute, _ = model_in
            top = max(64, 8 * largest["workers"])
            counts = [2 ** k for k in range(0, top.bit_length()) if 2 ** k <= top]
            preds = [predict(replace(sc, nodes=1, devices_per_node=n) if sc.nodes == 1
                             else replace(sc, nodes=max(1, n // sc.devices_per_node)), compute)
                     for n in counts]
            tp.append(Series(f"{name} model", [(p.scenario.workers, p.throughput)
                                               for p in preds], dashed=True, markers=False,
                             color_of=f"{name} measured"))
            eff.append(Series(f"{name} model", [(p.scenario.workers, p.efficiency * 100)
                                                for p in preds], dashed=True, markers=False,
                              color_of=f"{name} measured"))
    if not tp:
        return []
    return [line_chart("Throughput vs workers (model dashed)", "workers", "images/s", tp,
                       log_x=True, log_y=True),
            line_chart("Scaling efficiency vs workers (model dashed)", "workers", "efficiency %",
                       eff, log_x=True)]


def _comm_chart(comm: T.Table, fits: T.Table):
    if not comm:
        return None
    series = []
    for f in fits.rows:
        name = f"{f['library']} x{f['ranks']} {f['link']}"
        rows = [r for r in comm.rows if (r["library"], r["ranks"], r["link"]) ==
                (f["library"], f["ranks"], f["link"])]
        series.append(Series(f"{name} measured", [(r["bytes"], r["_seconds"]) for r in rows]))
        n = f["ranks"]
        series.append(Series(f"{name} alpha-beta fit", [
            (r["bytes"], f["_alpha"] + f["_beta"] * r["bytes"]) for r in rows],
            dashed=True, markers=False, color_of=f"{name} measured"))
        del n
    return line_chart("Allreduce time vs message size", "bytes", "seconds", series,
                      log_x=True, log_y=True)


def _ps_chart(ps: T.Table):
    if not ps:
        return None
    series = []
    for model in sorted({r["model"] for r in ps.rows}):
        rows = [r for r in ps.rows if r["model"] == model]
        series.append(Series(f"{model} greedy", [(r["ps"], r["greedy_imbalance"]) for r in rows]))
        series.append(Series(f"{model} round-robin", [(r["ps"], r["rr_imbalance"]) for r in rows],
                             dashed=True))
    return line_chart("Busiest server / mean vs number of servers", "parameter servers",
                      "imbalance (x)", series, log_x=True)


def _manifests(ok: list[dict]) -> list[dict]:
    out, seen = [], set()
    for r in ok:
        m = json.loads(r["manifest_json"] or "{}")
        key = json.dumps(m.get("host", {}), sort_keys=True) + r["framework"]
        if key in seen:
            continue
        seen.add(key)
        rank0 = m.get("ranks", {}).get("0", {})
        out.append({"framework": T.display(r["framework"]), "host": m.get("host", {}),
                    "worker": {k: v for k, v in rank0.items()
                               if k not in ("settings", "state_digest")},
                    "settings": rank0.get("settings", {})})
    return out


def repeat_text(drifts: dict[str, repeat.Drift | None]) -> str:
    """One sentence on what the repeat intervals include, for the report's header."""
    known = [d for d in drifts.values() if d]
    if not drifts:
        return ""
    if not known:
        return ("Repeat intervals: not yet known for this host (its history holds fewer "
                "than two other sweeps of these configurations); the intervals shown cover "
                "only the minutes this sweep took. Run the experiment again (twice) to "
                "calibrate them.")
    return "Repeat intervals include the " + "; ".join(d.text() for d in known) + "."


def build(store: Store, experiment: str | None = None) -> dict[str, Any]:
    runs = store.runs("WHERE experiment = ?", (experiment,)) if experiment else store.runs()
    ok_runs = [r for r in runs if r["status"] == "ok"]
    # a configuration measured more than once in the sweep is analysed as its median
    # replicate (harness/replicates.py); the run table still lists every replicate
    ok = replicates.medians(ok_runs)
    bad = [r for r in runs if r["status"] != "ok"]
    checks = validate.checks(store, experiment)
    try:
        held = holdout.validate(store, experiment)
    except holdout.HoldoutError:
        held = None  # no runs at both scales: no held-out section
    drifts = repeat.drifts_for(ok)
    shoot, bd = T.shootout(ok, drifts), T.breakdown(ok)
    scale = T.scaling(ok, checks)
    held_table = T.holdout(held)
    moved, bound, paced = T.traffic(ok), T.bottlenecks(ok), T.rank_paces(held)
    comm, fits = T.communication(store)
    ps = T.ps_placement(runs)
    ps_rec = T.ps_recorded(ok)
    acc, fail = T.model_accuracy(checks), T.failures(bad)
    rounds = verdicts.round_times(store.trials(r["run_id"] for r in ok))
    pipe, res, envs = T.pipeline(ok), T.resources(ok), T.environments(ok, rounds)
    bd_chart = stacked_bars(
        "Time per iteration by phase", "ms",
        [(f"{r['framework']} {r['model']} {r['config']} x{r['workers']}",
          {p: r[p] for p in T.PHASES}) for r in bd.rows], T.PHASES) if bd else None
    return {
        "experiment": experiment, "runs": runs, "ok": ok_runs, "bad": bad,
        "replicated": len(ok_runs) - len(ok),
        "frameworks": sorted({T.display(r["framework"]) for r in runs}),
        "experiments": sorted({r["experiment"] for r in runs}),
        "findings": T.findings(shoot, scale, rounds) + T.pipeline_findings(pipe),
        "model_error": validate.median_abs_error(checks), "n_checks": len(checks),
        "repeat": repeat_text(drifts),
        "holdout": held.by_strategy() if held else {},
        "sections": [
            ("shootout", "Single-device shoot-out", _shootout_charts(shoot) if shoot else [],
             [shoot]),
            ("breakdown", "Where the time goes", [bd_chart] if bd_chart else [], [bd]),
            ("scaling", "Scaling", _scaling_charts(store, scale, held_table) if scale else [],
             [scale]),
            ("communication", "Communication", [c for c in [_comm_chart(comm, fits)] if c],
             [fits, comm]),
            ("ps", "Parameter servers", [c for c in [_ps_chart(ps)] if c], [ps_rec, ps]),
            ("pipeline", "Input pipeline", [], [pipe]),
            ("resources", "Resources", [], [res]),
            ("environments", "Venv vs container", [], [envs]),
            ("model", "Performance model: predicted vs measured", [],
             [held_table, moved, bound, paced, acc]),
            ("failures", "Failed and skipped runs", [], [fail]),
        ],
        "run_columns": RUN_TABLE_COLUMNS, "manifests": _manifests(ok),
    }


def all_tables(ctx: dict[str, Any]) -> list[T.Table]:
    return [t for _, _, _, tables in ctx["sections"] for t in tables if t]


def render_html(ctx: dict[str, Any]) -> str:
    return _env().get_template("report.html.j2").render(**ctx)


def _md_cell(value: Any, digits: int) -> str:
    """Markdown renderers pass raw HTML through: escape it, and the cell separators."""
    text = T.fmt(value, digits).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(ctx: dict[str, Any]) -> str:
    out = [f"# dnnbench report{': ' + ctx['experiment'] if ctx['experiment'] else ''}", ""]
    out.append(f"{len(ctx['runs'])} runs ({len(ctx['ok'])} ok) of "
               f"{', '.join(ctx['frameworks'])}.")
    if ctx["replicated"]:
        out.append(f"{ctx['replicated']} ok runs are replicates of configurations measured "
                   "more than once in their sweep: the tables use each configuration's "
                   "median replicate.")
    for strategy, v in ctx["holdout"].items():
        out.append(f"Held-out prediction ({strategy}; every input fitted on runs with <= 2 "
                   f"workers): median absolute error {v['median'] * 100:.1f}%, worst "
                   f"{v['worst'] * 100:.1f}%, over {v['n']} larger runs (targets <= 10% and "
                   f"<= 25%: {'met' if v['pass'] else 'not met'}).")
    if ctx["model_error"] is not None:
        out.append("Performance model, in-sample check: median absolute error "
                   f"{ctx['model_error'] * 100:.1f}% "
                   f"over {ctx['n_checks']} measured configurations.")
    if ctx.get("repeat"):
        out.append(ctx["repeat"])
    out += ["", "## Summary", ""] + [f"- {f}" for f in ctx["findings"]]
    for t in all_tables(ctx):
        out += ["", f"## {t.title}", ""]
        if t.note:
            out += [t.note, ""]
        heads = [c.label + (f" ({c.unit})" if c.unit else "") for c in t.columns]
        out.append("| " + " | ".join(heads) + " |")
        out.append("|" + "|".join("---" if c.digits == 0 else "---:" for c in t.columns) + "|")
        for row in t.rows:
            out.append("| " + " | ".join(_md_cell(row.get(c.key), c.digits)
                                         for c in t.columns) + " |")
    return "\n".join(out) + "\n"


def write_csvs(ctx: dict[str, Any], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for t in all_tables(ctx):
        path = directory / f"{t.name}.csv"
        with open(path, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow([c.key + (f"_{c.unit}" if c.unit else "") for c in t.columns])
            for row in t.rows:
                w.writerow([row.get(c.key) for c in t.columns])
        paths.append(path)
    return paths


def render_file(db: str | Path, output: str | Path, experiment: str | None = None,
                fmt: str = "html") -> Path:
    """Write the report; for `csv`, `output` is a directory of one CSV per table."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown report format {fmt!r}; known: {', '.join(FORMATS)}")
    out = Path(output)
    with Store(db, readonly=True) as store:
        ctx = build(store, experiment)
    if fmt == "csv":
        write_csvs(ctx, out)
        return out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(ctx) if fmt == "html" else render_markdown(ctx), encoding="utf-8")
    return out.resolve()
