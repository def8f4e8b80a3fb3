"""The HTML report in a real browser (headless Chromium), from a DB made by real runs.

Checks what a reader depends on: nothing fetched from the network, no script errors,
charts with the expected series and points, a table that sorts, injected markup shown as
text and never executed; and that the Markdown export carries the same numbers.
"""

import io
import shutil
from pathlib import Path

import pytest

from frameworks.contract import RunSpec
from harness import commbench
from harness.analysis import fmt
from harness.experiment import Experiment, Planned
from harness.store import Store
from harness.sweep import run_experiment
from reports.render import build, render_file, render_markdown

INJECT = "<script>alert(1)</script>"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="chromium not installed (harness/system-deps.sh)")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def report_db(tmp_path_factory, torch_env):
    db = tmp_path_factory.mktemp("report") / "r.db"
    base = RunSpec("torch", "googlenet", batch_size=4, image_size=32, steps=4, warmup=1,
                   trials=2, target_width=0, num_classes=10, threads=1, label=INJECT)
    from dataclasses import replace
    specs = [base, replace(base, mode="breakdown"), replace(base, model="resnet50"),
             replace(base, model="resnet50", mode="breakdown"),
             replace(base, strategy="allreduce", devices_per_node=2),
             # a failure with a tail (another configuration: a result is stored once)
             replace(base, model="resnet50", batch_size=5, timeout_s=0.5)]
    with Store(db) as store:
        commbench.run("torch-gloo", 2, commbench.parse_sizes("4..4M"), store, iters=3)
        run_experiment(Experiment("browser", "", tuple(Planned(s) for s in specs), "test"),
                       store, out=io.StringIO())
    return db


def test_report_in_headless_chromium(report_db, tmp_path):
    from playwright.sync_api import sync_playwright

    html = render_file(report_db, tmp_path / "report.html")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, problems, dialogs = [], [], []
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(html.as_uri())
        page.wait_for_load_state("load")

        assert requests == [html.as_uri()], requests  # nothing but the file itself
        assert problems == [] and dialogs == []
        # the injected label is shown as text, never run
        assert INJECT in page.inner_text("body")
        assert page.locator("script").count() == 1  # only the sort script

        charts = page.locator("svg.chart")
        shoot = page.locator("#shootout svg.chart").first
        assert shoot.get_attribute("data-series") == "1"  # one framework
        assert shoot.get_attribute("data-points") == "2"  # two networks
        assert page.locator("#shootout svg.chart rect.bar").count() == 2
        scaling = page.locator("#scaling svg.chart")
        assert scaling.count() == 2
        assert scaling.first.get_attribute("data-series") == "2"  # measured + model
        assert scaling.first.locator("path.line").count() == 2
        comm = page.locator("#communication svg.chart")
        assert comm.get_attribute("data-series") == "2"  # measured + fit
        assert int(comm.get_attribute("data-points")) == 2 * len(commbench.parse_sizes("4..4M"))
        assert page.locator("#breakdown svg.chart rect.bar").count() == 6 * 2  # 2 breakdown runs x 6 phases
        assert charts.count() == 1 + 1 + 2 + 1

        # the full results table sorts by throughput, both ways
        table = page.locator("#results-table")
        heads = table.locator("th")
        col = [heads.nth(i).inner_text().split()[0] for i in range(heads.count())
               ].index("images_per_s")

        def column() -> list[float]:
            vals = table.locator(f"tbody tr td:nth-child({col + 1})").evaluate_all(
                "tds => tds.map(td => td.getAttribute('data-v'))")
            return [float(v) for v in vals if v]

        heads.nth(col).click()
        up = column()
        assert up == sorted(up) and len(up) >= 4
        heads.nth(col).click()
        assert column() == sorted(up, reverse=True)
        assert page.locator("#failures").count() == 1
        assert "no progress within timeout_s = 0.5 s" in page.inner_text("#failures")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def test_markdown_round_trips_the_numbers(report_db):
    with Store(report_db) as store:
        ctx = build(store)
        runs = store.runs("WHERE status = 'ok' AND mode = 'throughput' AND workers = 1")
    md = render_markdown(ctx)
    section = md.split("## Single-device throughput", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| PyTorch")]
    assert len(rows) == 2
    for r in runs:
        line = next(x for x in rows if f"| {r['model']} |" in x)
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[3] == fmt(r["images_per_s"])
        assert float(cells[3].replace(",", "")) == pytest.approx(r["images_per_s"], rel=5e-3)
    assert INJECT not in md and "&lt;script&gt;alert(1)&lt;/script&gt;" in md


def test_csv_export_has_one_file_per_table(report_db, tmp_path):
    out = render_file(report_db, tmp_path / "csv", fmt="csv")
    names = sorted(p.name for p in out.iterdir())
    assert {"shootout.csv", "breakdown.csv", "scaling.csv", "comm.csv", "comm_fit.csv",
            "model.csv", "failures.csv"} <= set(names)
    assert (out / "shootout.csv").read_text().splitlines()[0].startswith(
        "framework,model,config,images_per_s_images/s")
