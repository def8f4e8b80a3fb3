"""Horovod allreduce (through horovod.torch) for commbench: gloo or MPI controller,
whichever launched it (horovodrun --gloo / --mpi, or mpirun). In place, as training uses
it (out-of-place is 2-4x slower on CPU here)."""

from __future__ import annotations

import os

import horovod.torch as hvd
import torch

from frameworks.horovod.rendezvous import wait_then_init


def setup(job: dict) -> tuple[int, int]:
    torch.set_num_threads(int(os.environ.get("DNNBENCH_THREADS", "1")))
    wait_then_init(hvd)
    return hvd.rank(), hvd.size()


def buffer(nbytes: int, fill: float) -> torch.Tensor:
    return torch.full((max(1, nbytes // 4),), fill, dtype=torch.float32)


def allreduce(buf: torch.Tensor) -> None:
    hvd.allreduce_(buf, op=hvd.Sum)


def barrier() -> None:
    hvd.barrier()


def check(buf: torch.Tensor, expected: float) -> bool:
    return bool(torch.all(buf == expected).item())


def teardown() -> None:
    hvd.shutdown()
