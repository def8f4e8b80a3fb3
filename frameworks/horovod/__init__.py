"""Horovod: how it is built into each framework's environment (build.sh) and what a run
records about the build."""

from __future__ import annotations

import importlib
from typing import Any


def build_info(module: str) -> dict[str, Any]:
    """Version and compiled-in controllers/collectives of the Horovod a worker imports,
    for the run's manifest (`module` is horovod.torch, horovod.tensorflow or
    horovod.mxnet)."""
    import horovod

    hvd = importlib.import_module(module)
    return {"horovod": horovod.__version__,
            "horovod_build": {"gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built()),
                              "nccl": bool(hvd.nccl_built()), "cuda": bool(hvd.cuda_built())}}
