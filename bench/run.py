"""Benchmarks of dnnbench itself (`make bench`). Each is a ratio measured side by side
against a reference in the same run; targets are stated and reported, not asserted (the
machine is shared and noisy).

    python bench/run.py [--frameworks torch,jax] [--model resnet50]
                        [--image-size 64] [--batch 16] [--steps 3] [--rounds 24]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import write_json  # noqa: E402
from frameworks.contract import SUPPORT  # noqa: E402
from harness import envs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frameworks", default=",".join(SUPPORT),
                    help="comma-separated (default: every registered framework)")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3, help="steps per timed block")
    ap.add_argument("--rounds", type=int, default=24, help="interleaved blocks per loop")
    ap.add_argument("--out", default=str(REPO / "results" / "bench.json"))
    a = ap.parse_args()
    results = []
    for fw in [f.strip() for f in a.frameworks.split(",") if f.strip()]:
        env = envs.find(fw)
        cmd = [env.python, "-m", "bench.overhead", fw, a.model, str(a.image_size),
               str(a.batch), str(a.steps), str(a.rounds)]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                              env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                   "TF_CPP_MIN_LOG_LEVEL": "2"})
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        results.append(r)
        print(f"{fw:<11} {a.model} {a.image_size}px b{a.batch}: adapter/hand-written images/s "
              f"= {r['throughput_ratio_median']:.3f} (IQR {r['throughput_ratio_iqr'][0]:.3f}-"
              f"{r['throughput_ratio_iqr'][1]:.3f}; target >= 0.98); breakdown/throughput "
              f"time = {r['breakdown_slowdown_median']:.3f}")
        for name, value in r["variants_images_per_s"].items():
            shown = f"{value:.1f} images/s" if isinstance(value, float) else value
            print(f"{'':<11} {name:<22} {shown}")
    write_json(a.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
