"""bench/holdout.py as a user runs it: a real (tiny) sweep, then its held-out summary."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_summary_lands_beside_the_databases_it_judges(tmp_path, torch_env):
    """With --results elsewhere, the sweep's database and the JSON summary both go there
    (the summary once went to the checkout's results/ whatever --results said, where the
    next bench overwrote it). One 1-worker run cannot be held out: the summary says why
    instead of failing, and the run stays stored."""
    exp = tmp_path / "tiny.toml"
    exp.write_text("""
name = "bench-holdout-tiny"
[defaults]
framework = "torch"
model = "googlenet"
image_size = 32
batch_size = 4
steps = 2
warmup = 1
trials = 1
target_width = 0
num_classes = 10
""")
    checkout = REPO / "results" / "bench-holdout.json"
    before = checkout.stat().st_mtime_ns if checkout.exists() else None
    res = tmp_path / "res"
    proc = subprocess.run([sys.executable, "-m", "bench.holdout", "--experiments", str(exp),
                           "--results", str(res)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (res / "bench-holdout-tiny.db").is_file()
    (entry,) = json.loads((res / "bench-holdout.json").read_text())
    assert entry["experiment"] == "bench-holdout-tiny"
    assert entry["db"] == [str(res / "bench-holdout-tiny.db")]
    assert "needs runs at both scales" in entry["error"], entry
    assert f"written: {res / 'bench-holdout.json'}" in proc.stdout
    assert (checkout.stat().st_mtime_ns if checkout.exists() else None) == before
