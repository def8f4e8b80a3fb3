"""TensorFlow process plans (no TensorFlow import).

MultiWorkerMirroredStrategy ("allreduce") reads the cluster from TF_CONFIG: every worker
gets the same list of worker addresses and its own task index. ParameterServerStrategy
("ps-async") adds a chief and ps tasks to the cluster.
"""

from __future__ import annotations

import json

from frameworks.contract import RunSpec
from frameworks.plan import WORKER_MODULE, PlanContext, free_port, spec_node_of, worker_env, workers
from runners.spec import ProcessSpec

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # keep TF's C++ start-up chatter out of the logs


def tf_config(addresses: list[str], index: int) -> str:
    return json.dumps({"cluster": {"worker": addresses},
                       "task": {"type": "worker", "index": index}})


def cluster_config(cluster: dict[str, list[str]], job: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})


def ps_plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    """ParameterServerStrategy: a chief (the timed loop, rank 0 of the events), the
    workers and the ps tasks as services the runner stops when the chief is done."""
    def host(role: str, index: int) -> str:
        return ctx.host_of(spec_node_of(spec, role, index))

    cluster = {"chief": [f"{host('chief', 0)}:{free_port()}"],
               "worker": [f"{host('worker', r)}:{free_port()}" for r in range(spec.workers)],
               "ps": [f"{host('ps', i)}:{free_port()}" for i in range(spec.ps)]}
    chief_env = worker_env(spec, ctx, 0, 0, spec.devices_per_node)
    chief_env.update(QUIET, TF_CONFIG=cluster_config(cluster, "chief", 0), DNNBENCH_THREADS="1",
                     OMP_NUM_THREADS="1")
    procs = [ProcessSpec("chief", 0, (ctx.python, "-m", WORKER_MODULE), chief_env,
                         host=host("chief", 0))]
    serve = (ctx.python, "-m", "frameworks.tensorflow.ps_server")
    for w in workers(spec, ctx):
        env = {**w.env, **QUIET, "TF_CONFIG": cluster_config(cluster, "worker", w.rank)}
        procs.append(ProcessSpec("worker", w.rank, serve, env, host=w.host, service=True))
    for i in range(spec.ps):
        env = {**QUIET, "PYTHONPATH": ctx.source_root, "PYTHONUNBUFFERED": "1",
               "PYTHONNOUSERSITE": "1", "DNNBENCH_THREADS": "1", "OMP_NUM_THREADS": "1",
               "TF_CONFIG": cluster_config(cluster, "ps", i)}
        procs.append(ProcessSpec("ps", i, serve, env, service=True,
                                 host=host("ps", i)))
    return procs


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    if spec.strategy == "ps-async":
        return ps_plan(spec, ctx)
    if spec.strategy != "allreduce":
        return workers(spec, ctx, lambda rank, local, node: dict(QUIET))
    addresses = [f"{ctx.host_of(rank // spec.devices_per_node)}:{free_port()}"
                 for rank in range(spec.workers)]
    return workers(spec, ctx, lambda rank, local, node: {
        **QUIET, "TF_CONFIG": tf_config(addresses, rank)})
