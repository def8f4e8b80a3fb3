"""The dense-matmul peak of the device a worker trains on, measured by the worker itself.

Why in the worker: the harness's noise meter (harness/noise.py) measures the host's CPUs
with NumPy, but it cannot see a GPU, nor the CPUs of a Slurm compute node. A run's model
FLOPs utilisation needs the peak of the device that ran it, in the run's precision, and
only the worker's framework can drive that device. Each adapter gives `matmul_probe(spec,
n)`: one n x n matmul on its device in the run's math mode, and a way to wait for it;
this module times it the same way for every framework and reports GFLOP/s.

Measured on GPU devices and under Slurm (compute nodes the harness cannot probe) always,
and elsewhere on CPU when DNNBENCH_DEVICE_PEAK=1 (the cross-check against the harness's
probe that runs where no GPU exists).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: matrix size: large enough to reach a GPU's peak (~1 TFLOP per call), small enough for a
#: CPU to finish several calls in the budget
N_GPU, N_CPU = 8192, 1024


@dataclass
class MatmulProbe:
    """What an adapter hands over: `run()` starts one matmul and returns its result,
    `wait(result)` blocks until the device has finished it."""

    run: Callable[[], Any]
    wait: Callable[[Any], None]
    device: str  # the device's own name, e.g. "NVIDIA H100 80GB HBM3" or "cpu"
    dtype: str  # the math mode the run uses: float32 | tf32 | float16 | bfloat16
    n: int


def wanted(spec) -> bool:
    return (spec.device != "cpu" or spec.resolved_launcher == "slurm"
            or os.environ.get("DNNBENCH_DEVICE_PEAK") == "1")


def size(spec) -> int:
    return N_CPU if spec.device == "cpu" else N_GPU


def measure(probe: MatmulProbe, seconds: float = 0.5, calls: int = 4) -> dict[str, Any]:
    """Best-of timing of `calls` back-to-back matmuls (launch overhead amortised), repeated
    until `seconds` are spent, after two warm-up calls (kernel selection, clocks)."""
    for _ in range(2):
        probe.wait(probe.run())
    best = float("inf")
    spent = 0.0
    while spent < seconds or best == float("inf"):
        t0 = time.perf_counter()
        outs = [probe.run() for _ in range(calls)]
        for out in outs:  # every one: an asynchronous runtime may finish them out of order
            probe.wait(out)
        dt = time.perf_counter() - t0
        best = min(best, dt / calls)
        spent += dt
    return {"device": probe.device, "dtype": probe.dtype, "n": probe.n,
            "gflops": 2 * probe.n ** 3 / best / 1e9}
