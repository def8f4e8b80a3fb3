"""torch.distributed collectives for commbench (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

_device = torch.device("cpu")


def setup(job: dict) -> tuple[int, int]:
    global _device
    backend = "nccl" if job["library"] == "torch-nccl" else "gloo"
    threads = int(os.environ.get("DNNBENCH_THREADS", "1"))
    torch.set_num_threads(threads)
    if backend == "nccl":
        _device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}")
        torch.cuda.set_device(_device)
    dist.init_process_group(backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=job.get("timeout_s", 300)))
    return dist.get_rank(), dist.get_world_size()


def buffer(nbytes: int, fill: float) -> torch.Tensor:
    return torch.full((max(1, nbytes // 4),), fill, dtype=torch.float32, device=_device)


def allreduce(buf: torch.Tensor) -> None:
    dist.all_reduce(buf)
    if _device.type == "cuda":
        torch.cuda.synchronize(_device)


def barrier() -> None:
    dist.barrier()


def check(buf: torch.Tensor, expected: float) -> bool:
    return bool(torch.all(buf == expected).item())


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
