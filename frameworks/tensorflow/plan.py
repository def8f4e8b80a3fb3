"""TensorFlow process plans (no TensorFlow import).

MultiWorkerMirroredStrategy ("allreduce") reads the cluster from TF_CONFIG: every worker
gets the same list of worker addresses and its own task index.
"""

from __future__ import annotations

import json

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, free_port, workers
from runners.spec import ProcessSpec

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # keep TF's C++ start-up chatter out of the logs


def tf_config(addresses: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": addresses},
                       "task": {"type": "worker", "index": index}})


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    if spec.strategy != "allreduce":
        return workers(spec, ctx, lambda rank, local, node: dict(QUIET))
    addresses = [f"{ctx.host_of(rank // spec.devices_per_node)}:{free_port()}"
                 for rank in range(spec.workers)]
    return workers(spec, ctx, lambda rank, local, node: {
        **QUIET, "TF_CONFIG": tf_config(addresses, rank)})
