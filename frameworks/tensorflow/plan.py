"""TensorFlow process plans (no TensorFlow import)."""

from __future__ import annotations

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, workers
from runners.spec import ProcessSpec

QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # keep TF's C++ start-up chatter out of the logs


def plan(spec: RunSpec, ctx: PlanContext) -> list[ProcessSpec]:
    return workers(spec, ctx, lambda rank, local, node: dict(QUIET))
