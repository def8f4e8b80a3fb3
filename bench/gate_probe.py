"""Do idle workers waiting at the gate slow the harness's noise probe?

Between the rounds of a run the harness probes the machine (harness/noise.py) while every
worker of the run waits for its next trial (frameworks/gate.py). A waiting worker must not
take the CPU the probe measures, or every many-worker run reads as "machine disturbed".
This starts 8 real waiting processes (the worker's own Gate) and alternates, in one
process, probes with them waiting against probes alone (ABBA, so drifts of a shared
machine hit both alike), for the gate as shipped and for the fixed 4 ms poll it replaced.
Prints one JSON line: the median probe GEMM GFLOP/s of each side and their ratio.

    python -m bench.gate_probe [--waiters 8] [--rounds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.overhead import interleaved
from frameworks import gate
from harness.noise import probe
from harness.stats import median

REPO = Path(__file__).resolve().parents[1]
PROBE_S = 0.1  # the probe the harness takes between rounds (interleave.ROUND_PROBE_S)


def _waiters(n: int, path: str, fixed_poll_s: float | None) -> list[subprocess.Popen]:
    """n processes blocked in Gate.may_run(0) until the gate says stop; `fixed_poll_s`
    pins the old behaviour (no back-off)."""
    pin = (f"gate.POLL_S = gate.POLL_MAX_S = {fixed_poll_s}; " if fixed_poll_s else "")
    code = f"from frameworks import gate; {pin}gate.Gate({path!r}, 0).may_run(0)"
    return [subprocess.Popen([sys.executable, "-c", code], cwd=REPO) for _ in range(n)]


def _probes(k: int) -> float:
    """The median GEMM rate of k probes taken back to back."""
    return median([probe(PROBE_S).gemm_gflops for _ in range(k)])


def measure(waiters: int, rounds: int, fixed_poll_s: float | None) -> dict[str, float]:
    def with_waiters() -> float:
        gate.write(path, 0)
        procs = _waiters(waiters, path, fixed_poll_s)
        time.sleep(1.0)  # started, imported, waiting
        try:
            return _probes(5)
        finally:
            gate.write(path, 0, stop=True)
            for p in procs:
                p.wait(timeout=30)

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gate")
        got = interleaved({"alone": lambda: _probes(5), "waiting": with_waiters}, rounds)
    a, w = median(got["alone"]), median(got["waiting"])
    return {"alone_gflops": round(a, 1), "waiting_gflops": round(w, 1),
            "ratio": round(w / a, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--waiters", type=int, default=8, help="idle workers (default 8)")
    ap.add_argument("--rounds", type=int, default=6, help="ABBA rounds (default 6)")
    args = ap.parse_args()
    out = {"waiters": args.waiters,
           "shipped": measure(args.waiters, args.rounds, None),
           "fixed_4ms_poll": measure(args.waiters, args.rounds, 0.004)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
