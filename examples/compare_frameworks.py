"""Load a results database and compare frameworks: a notebook-style walk-through.

    python examples/compare_frameworks.py [results/default.db] [--plot out.png]

Runs in the harness's environment (`harness/bootstrap.sh` prints it), which has pandas;
the plot needs matplotlib (`pip install matplotlib`) and is skipped without it.
"""

from __future__ import annotations

import argparse
import sys

from dnnbench import results

ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("db", nargs="?", default="results/default.db")
ap.add_argument("--plot", metavar="FILE.png", help="bar chart of images/s with intervals")
a = ap.parse_args()

# 1. Every table of the database as a pandas frame.
try:
    r = results.load(a.db)
except results.ResultsError as exc:
    sys.exit(f"{exc} (run `make demo` first)")
ok = r.runs[(r.runs.status == "ok") & (r.runs["mode"] == "throughput")]
print(f"{len(r.runs)} runs, {len(r.trials)} trials, {len(r.iterations)} iterations in {a.db}\n")

# 2. Throughput per framework and network, with the 95% interval and the machine's share.
table = ok.pivot_table(index="model", columns="framework", values="images_per_s")
print("images/s (median over trials):")
print(table.round(1).to_string(), "\n")
print("model FLOPs utilisation (% of the noise meter's GEMM peak):")
print((ok.pivot_table(index="model", columns="framework", values="mfu") * 100).round(1)
      .to_string(), "\n")

# 3. Trial by trial: how much the machine drifted while the group was measured.
trials = r.trials.merge(ok[["run_id", "framework", "model"]], on="run_id")
drift = trials.groupby(["model", "framework"])["seconds"].agg(["count", "min", "median", "max"])
print("per-trial seconds per iteration:")
print(drift.round(4).to_string(), "\n")

# 4. The verdicts the report states: paired over interleaved rounds.
print("who is faster, and can it be said:")
print(results.verdicts(r).to_string(index=False, float_format=lambda x: f"{x:+.3f}"))

# 5. A chart, when matplotlib is installed.
if a.plot:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("\n--plot skipped: matplotlib is not installed (pip install matplotlib)")
    else:
        fig, ax = plt.subplots(figsize=(7, 3.5))
        labels = [f"{f}\n{m}" for f, m in zip(ok.framework, ok.model)]
        err = [ok.images_per_s - ok.images_per_s_low, ok.images_per_s_high - ok.images_per_s]
        ax.bar(labels, ok.images_per_s, yerr=err, capsize=3)
        ax.set_ylabel("images/s (95% interval)")
        fig.tight_layout()
        fig.savefig(a.plot)
        print(f"\nplot: {a.plot}")
