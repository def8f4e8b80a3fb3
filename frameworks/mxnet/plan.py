"""MXNet process plans (no MXNet import).

Parameter-server strategies start one scheduler, `ps` servers and the workers, all with
DMLC_* variables (ps-lite's contract). Scheduler and servers run `import mxnet`, which
serves until the workers finish. A missing scheduler makes workers hang in kv.create, so
every such job relies on the runner's timeout (which tears all roles down together).
"""

from __future__ import annotations

from frameworks import ps_rules
from frameworks.contract import PS_STRATEGIES, RunSpec
from frameworks.plan import PlanContext, free_port, spec_node_of, workers
from runners.spec import ProcessSpec

KVSTORE = {"ps-sync": "dist_sync", "ps-async": "dist_async"}


def dmlc_env(spec: RunSpec, ctx: PlanContext, role: str, port: str) -> dict[str, str]:
    return {"DMLC_ROLE": role, "DMLC_PS_ROOT_URI": ctx.host_of(spec_node_of(spec, "scheduler", 0)),
            "DMLC_PS_ROOT_PORT": port,
            "DMLC_NUM_SERVER": str(spec.ps), "DMLC_NUM_WORKER": str(spec.workers),
            "PS_VERBOSE": "0"}


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    if spec.strategy not in PS_STRATEGIES:
        return workers(spec, ctx)
    port = str(free_port())
    # the workers split arrays by it (and record the placement it gives); every role gets
    # the same value so a server never disagrees with a worker about a key
    bound = str(spec.ps_split_bound or ps_rules.MXNET_BIGARRAY_BOUND)
    service_env = {"OMP_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1",
                   "MXNET_KVSTORE_BIGARRAY_BOUND": bound}
    serve = (ctx.python, "-c", "import mxnet")
    procs = [ProcessSpec("scheduler", 0, serve, {**service_env,
                                                 **dmlc_env(spec, ctx, "scheduler", port)},
                         host=ctx.host_of(spec_node_of(spec, "scheduler", 0)))]
    procs += [ProcessSpec("server", i, serve, {**service_env,
                                               **dmlc_env(spec, ctx, "server", port)},
                          host=ctx.host_of(spec_node_of(spec, "server", i)))
              for i in range(spec.ps)]
    procs += workers(spec, ctx, lambda rank, local, node: {
        **dmlc_env(spec, ctx, "worker", port),
        "MXNET_KVSTORE_BIGARRAY_BOUND": bound, "DNNBENCH_KVSTORE": KVSTORE[spec.strategy]})
    return procs
