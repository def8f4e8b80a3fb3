"""PyTorch process plans (no torch import): one process per device, env:// rendezvous.

DDP reads MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK, the variables torchrun and
srun-based launchers also provide, so the same worker runs under any runner.
"""

from __future__ import annotations

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, free_port, workers
from runners.spec import ProcessSpec


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    if spec.strategy == "single":
        return workers(spec, ctx)
    port = str(free_port())
    master = ctx.host_of(0)

    def env(rank: int, local: int, node: int) -> dict[str, str]:
        return {"MASTER_ADDR": master, "MASTER_PORT": port, "RANK": str(rank),
                "WORLD_SIZE": str(spec.workers), "LOCAL_RANK": str(local),
                "LOCAL_WORLD_SIZE": str(spec.devices_per_node)}

    return workers(spec, ctx, env)
