"""The OpenBLAS kernel MXNet's wheel uses, chosen before MXNet loads it.

Why: MXNet 1.9.1's pip wheel links an OpenBLAS that predates recent Intel processors and
falls back to its generic "Prescott" (SSE) kernels on them. Measured on an Intel Xeon
with AVX-512 and AMX (2 cores, 2026-12-01): a 1024 x 1024 float32 `mx.nd.dot` at 84
GFLOP/s as detected, 202 with OPENBLAS_CORETYPE=Haswell, against NumPy's 346 on the same
cores. That wheel has no newer x86 kernel (asking for SkylakeX loads Haswell), and on AMD
Zen it picks the Haswell kernels itself. oneDNN, not OpenBLAS, runs MXNet's convolutions
and dense layers, so training moves within noise (64 px, batch 16: AlexNet 65.4 against
62.3 images/s under the SSE kernels, ResNet-50 42.0 against 43.9); `mx.nd.dot` (the
device-peak probe) does not.

OpenBLAS reads OPENBLAS_CORETYPE once, when the library loads, so this runs in the worker
before the first `import mxnet`, on the host that computes (a Slurm node may differ from
the harness's). A value the user set is kept. What was used is recorded in the run's
environment (`openblas_coretype`, `openblas_coretype_by`).
"""

from __future__ import annotations

import os
import platform

#: OpenBLAS's AVX2 + FMA kernels, the newest the MXNet 1.9.1 wheel carries
KERNEL = "Haswell"
#: what this process set, so a second call reports the same chooser
_SET_HERE: list[str] = []


def _cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def choose(flags: set[str] | None = None) -> tuple[str, str]:
    """(kernel, who chose it): sets OPENBLAS_CORETYPE to KERNEL on an x86-64 with AVX2 and
    FMA unless the user set it; ("", "") where OpenBLAS is left to detect the CPU."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        value = os.environ["OPENBLAS_CORETYPE"]
        return value, "dnnbench" if _SET_HERE == [value] else "user"
    if platform.machine() not in ("x86_64", "AMD64"):
        return "", ""
    if not {"avx2", "fma"} <= (_cpu_flags() if flags is None else flags):
        return "", ""
    os.environ["OPENBLAS_CORETYPE"] = KERNEL
    _SET_HERE.append(KERNEL)
    return KERNEL, "dnnbench"
