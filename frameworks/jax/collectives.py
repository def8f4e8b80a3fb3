"""JAX collectives for commbench: a psum across processes joined by jax.distributed (gloo
on CPU: jax-gloo; NCCL on GPUs: jax-nccl), one device per process, as training uses."""

from __future__ import annotations

import os

import numpy as np

OP = "allreduce"
_state: dict = {}


def setup(job: dict) -> tuple[int, int]:
    import jax

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    threads = int(os.environ.get("DNNBENCH_THREADS", "1"))
    cores = sorted(os.sched_getaffinity(0))
    if job["library"] == "jax-gloo":
        if threads < len(cores):
            os.sched_setaffinity(0, [cores[(rank * threads + i) % len(cores)]
                                     for i in range(threads)])
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                               num_processes=world, process_id=rank,
                               initialization_timeout=int(job.get("timeout_s", 300)))
    from jax import shard_map
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = Mesh(np.array(jax.devices()), ("data",))
    _state.update(jax=jax, sharding=NamedSharding(mesh, P("data")),
                  psum=jax.jit(shard_map(lambda x: jax.lax.psum(x, "data"), mesh=mesh,
                                         in_specs=P("data"), out_specs=P("data"))))
    return rank, world


def buffer(nbytes: int, fill: float):
    """This rank's buffer as its row of a (ranks, n) global array."""
    jax = _state["jax"]
    local = np.full((1, max(1, nbytes // 4)), fill, dtype=np.float32)
    return [jax.make_array_from_process_local_data(_state["sharding"], local)]


def allreduce(buf: list) -> None:
    """Every rank's row becomes the sum of all rows (the result replaces the buffer)."""
    buf[0] = _state["psum"](buf[0])
    buf[0].block_until_ready()


def barrier() -> None:
    from jax.experimental import multihost_utils

    multihost_utils.sync_global_devices("commbench")


def check(buf: list, expected: float) -> bool:
    return bool(np.all(np.asarray(buf[0].addressable_data(0)) == expected))


def teardown() -> None:
    if "jax" in _state:
        _state["jax"].distributed.shutdown()
