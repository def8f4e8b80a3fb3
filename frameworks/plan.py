"""Which processes a RunSpec needs: plain Python, no deep-learning framework imported.

The harness asks for the plan and hands the ProcessSpecs to a runner; runners never look
inside. Distributed strategies add their roles and rendezvous variables here (per
framework) without any runner learning about frameworks.
"""

from __future__ import annotations

import os

from frameworks.contract import RunSpec
from runners.spec import ProcessSpec

WORKER_MODULE = "frameworks.worker"


def worker_env(spec: RunSpec, rank: int, local_rank: int, procs_on_host: int,
               source_root: str, run_id: str) -> dict[str, str]:
    """The environment is the whole launcher-to-worker contract."""
    cores = os.cpu_count() or 1
    threads = spec.threads or max(1, cores // procs_on_host)
    return {
        "DNNBENCH_SPEC": spec.to_json(),
        "DNNBENCH_RUN_ID": run_id,
        "DNNBENCH_RANK": str(rank),
        "DNNBENCH_LOCAL_RANK": str(local_rank),
        "DNNBENCH_WORLD_SIZE": str(spec.workers),
        "DNNBENCH_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONPATH": source_root,
        "PYTHONUNBUFFERED": "1",
        "PYTHONNOUSERSITE": "1",
    }


def plan(spec: RunSpec, python: str, source_root: str, run_id: str) -> list[ProcessSpec]:
    """Processes for one run on this host (single device)."""
    env = worker_env(spec, 0, 0, 1, source_root, run_id)
    return [ProcessSpec("worker", 0, (python, "-m", WORKER_MODULE), env)]
