"""JAX process plans (no jax import): one process per device; rank 0's host runs the
jax.distributed coordinator at MASTER_ADDR:MASTER_PORT, the variables every launcher
already provides (under Slurm the job script sets MASTER_ADDR to the first node)."""

from __future__ import annotations

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, free_port, workers
from runners.spec import ProcessSpec


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    if spec.strategy == "single":
        return workers(spec, ctx)
    address = {"MASTER_ADDR": ctx.host_of(0), "MASTER_PORT": str(free_port())}
    return workers(spec, ctx, lambda rank, local, node: address)
