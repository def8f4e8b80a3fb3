"""Render the results database into one self-contained HTML file.

Everything the page needs is inline (CSS, SVG charts, a few lines of sort script): it
opens from a laptop, an e-mail attachment or an air-gapped cluster login node alike.
jinja2 autoescaping is on, so any text that comes from data shows as text.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import jinja2

from frameworks.contract import SUPPORT
from harness.perfmodel import validate
from harness.stats import intervals_overlap
from harness.store import PHASE_COLUMNS, RUN_COLUMNS, Store
from reports.svg import Bar, GroupedBars, grouped_bars, stacked_bars

TEMPLATES = Path(__file__).resolve().parent / "templates"
PHASES = list(PHASE_COLUMNS)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = _num
    return env


def _num(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}" if abs(v) < 10 ** digits else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _display(fw: str) -> str:
    return SUPPORT[fw].display if fw in SUPPORT else fw


def _config(r: dict) -> str:
    return f"b{r['batch_size']} {r['image_size']}px {r['device']} {r['precision']}"


def findings(ok: list[dict]) -> list[str]:
    """Plain sentences from the data: who is fastest per network, and is it significant."""
    out: list[str] = []
    by_key: dict[tuple, list[dict]] = defaultdict(list)
    for r in ok:
        if r["mode"] == "throughput" and r["workers"] == 1:
            by_key[(r["model"], _config(r))].append(r)
    for (model, config), rows in sorted(by_key.items()):
        best: dict[str, dict] = {}
        for r in rows:
            if r["framework"] not in best or r["images_per_s"] > best[r["framework"]][
                    "images_per_s"]:
                best[r["framework"]] = r
        ranked = sorted(best.values(), key=lambda r: -r["images_per_s"])
        top = ranked[0]
        if len(ranked) == 1:
            out.append(f"{model} ({config}): only {_display(top['framework'])} measured, "
                       f"{top['images_per_s']:.1f} images/s.")
            continue
        second = ranked[1]
        margin = top["images_per_s"] / second["images_per_s"] - 1
        ci = lambda r: (r["images_per_s_low"] or math.nan, r["images_per_s_high"] or math.nan)  # noqa: E731
        if intervals_overlap(ci(top), ci(second)):
            out.append(f"{model} ({config}): {_display(top['framework'])} and "
                       f"{_display(second['framework'])} are too close to rank "
                       f"({margin:+.1%}, 95% intervals overlap).")
        else:
            out.append(f"{model} ({config}): {_display(top['framework'])} is fastest, "
                       f"{margin:.1%} ahead of {_display(second['framework'])} "
                       f"({top['images_per_s']:.1f} vs {second['images_per_s']:.1f} images/s; "
                       "intervals do not overlap).")
    return out


def context(store: Store, experiment: str | None = None) -> dict[str, Any]:
    runs = store.runs("WHERE experiment = ?", (experiment,)) if experiment else store.runs()
    ok = [r for r in runs if r["status"] == "ok"]
    bad = [r for r in runs if r["status"] != "ok"]
    tp = [r for r in ok if r["mode"] == "throughput" and r["workers"] == 1]
    charts = []
    for config in sorted({_config(r) for r in tp}):
        rows = [r for r in tp if _config(r) == config]
        models = sorted({r["model"] for r in rows})
        series: dict[str, list] = {}
        for fw in sorted({r["framework"] for r in rows}):
            bars = []
            for m in models:
                match = [r for r in rows if r["framework"] == fw and r["model"] == m]
                r = max(match, key=lambda r: r["images_per_s"]) if match else None
                bars.append(Bar(r["images_per_s"], r["images_per_s_low"], r["images_per_s_high"])
                            if r else None)
            series[_display(fw)] = bars
        charts.append(grouped_bars(GroupedBars(f"Training throughput, {config}", "images/s",
                                               models, series)))
    bd = [r for r in ok if r["mode"] == "breakdown"]
    breakdown_chart = None
    if bd:
        rows = [(f"{_display(r['framework'])} {r['model']} {_config(r)}",
                 {p: (r[PHASE_COLUMNS[p]] or 0.0) * 1e3 for p in PHASES}) for r in bd]
        breakdown_chart = stacked_bars("Time per iteration by phase", "ms", rows, PHASES)
    manifests = []
    seen = set()
    for r in ok:
        m = json.loads(r["manifest_json"] or "{}")
        key = json.dumps(m.get("host", {}), sort_keys=True) + r["framework"]
        if key in seen:
            continue
        seen.add(key)
        rank0 = m.get("ranks", {}).get("0", {})
        manifests.append({"framework": _display(r["framework"]), "host": m.get("host", {}),
                          "worker": {k: v for k, v in rank0.items() if k != "settings"},
                          "settings": rank0.get("settings", {})})
    model_checks = validate.checks(store, experiment)
    columns = [c for c in RUN_COLUMNS if c[0] not in ("spec_json", "manifest_json",
                                                        "output_tail", "config_hash")]
    return {"runs": runs, "ok": ok, "bad": bad, "charts": charts,
            "breakdown_chart": breakdown_chart, "breakdown": bd, "phases": PHASES,
            "phase_columns": PHASE_COLUMNS, "findings": findings(ok), "manifests": manifests,
            "columns": columns, "experiment": experiment,
            "experiments": sorted({r["experiment"] for r in runs}),
            "frameworks": sorted({_display(r["framework"]) for r in runs}),
            "display": _display, "checks": model_checks,
            "model_error": validate.median_abs_error(model_checks)}


def render(store: Store, experiment: str | None = None) -> str:
    return _env().get_template("report.html.j2").render(**context(store, experiment))


def render_file(db: str | Path, output: str | Path, experiment: str | None = None) -> Path:
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    with Store(db) as store:
        out.write_text(render(store, experiment), encoding="utf-8")
    return out.resolve()
