"""MPI collectives through mpi4py + NumPy for commbench: framework-neutral, runs in any
framework environment that has mpi4py (the reference every library is compared with)."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

_comm = MPI.COMM_WORLD


def setup(job: dict) -> tuple[int, int]:
    return _comm.Get_rank(), _comm.Get_size()


def buffer(nbytes: int, fill: float) -> np.ndarray:
    return np.full(max(1, nbytes // 4), fill, dtype=np.float32)


def allreduce(buf: np.ndarray) -> None:
    _comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)


def barrier() -> None:
    _comm.Barrier()


def check(buf: np.ndarray, expected: float) -> bool:
    return bool(np.all(buf == expected))


def teardown() -> None:
    pass
