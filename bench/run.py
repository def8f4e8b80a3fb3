"""Benchmarks of dnnbench itself (`make bench`). Each reports a ratio measured side by side
against a reference in the same run; targets are stated, not asserted (noisy machine).

    python bench/run.py [--model resnet50 --image-size 64 --batch 16 --steps 8 --rounds 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import envs  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(REPO / "results" / "bench.json"))
    a = ap.parse_args()
    env = envs.find("torch")
    cmd = [env.python, "-m", "bench.torch_overhead", a.model, str(a.image_size), str(a.batch),
           str(a.steps), str(a.rounds)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
        return 1
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"torch loop overhead ({a.model} {a.image_size}px b{a.batch}, {a.rounds} rounds): "
          f"adapter/hand-written images/s = {result['throughput_ratio_median']:.3f} "
          f"(target >= 0.98); breakdown/throughput time = "
          f"{result['breakdown_slowdown_median']:.3f}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
