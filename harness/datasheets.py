"""Vendors' dense peak throughput of common GPUs, to show next to the peak a run measured.

Why both: the measured dense-matmul peak (frameworks/peak.py) is what MFU divides by,
because it is what the device reaches with this software stack, clocks and power limit;
the datasheet figure says how far that is from the vendor's number (a throttled or
misconfigured device shows here). Dense figures, without structured sparsity, in TFLOP/s,
per GPU (a K80 board holds two), boost clocks; SXM parts unless the name says PCIe.
The first pattern found in the device's name wins, so more specific names come first.
"""

from __future__ import annotations

#: (name pattern, {math mode: dense TFLOP/s}), from NVIDIA's product datasheets
GPUS: list[tuple[str, dict[str, float]]] = [
    ("H200", {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4}),
    ("H100 PCIe", {"float32": 51.2, "tf32": 378.0, "bfloat16": 756.0, "float16": 756.0}),
    ("H100", {"float32": 67.0, "tf32": 494.7, "bfloat16": 989.4, "float16": 989.4}),
    ("A100", {"float32": 19.5, "tf32": 156.0, "bfloat16": 312.0, "float16": 312.0}),
    ("L40S", {"float32": 91.6, "tf32": 183.0, "bfloat16": 362.0, "float16": 362.0}),
    ("L4", {"float32": 30.3, "tf32": 60.0, "bfloat16": 121.0, "float16": 121.0}),
    ("A10", {"float32": 31.2, "tf32": 62.5, "bfloat16": 125.0, "float16": 125.0}),
    ("V100 PCIe", {"float32": 14.0, "float16": 112.0}),
    ("V100", {"float32": 15.7, "float16": 125.0}),
    ("T4", {"float32": 8.1, "float16": 65.0}),
    ("P100 PCIe", {"float32": 9.3, "float16": 18.7}),
    ("P100", {"float32": 10.6, "float16": 21.2}),
    ("K80", {"float32": 4.37}),
]


def peak_gflops(device: str, mode: str) -> float | None:
    """The datasheet's dense peak of `device` (its own name, e.g. from nvidia-smi) in math
    mode `mode` (float32 | tf32 | bfloat16 | float16), GFLOP/s; None when unknown."""
    name = device.lower().replace("-", " ")  # "Tesla P100-PCIE-16GB"
    for pattern, modes in GPUS:
        if pattern.lower() in name:
            tflops = modes.get(mode)
            return tflops * 1e3 if tflops else None
    return None
