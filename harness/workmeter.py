"""A work meter: how much CPU a run's workers spent per step, against what the same work
cost in the rest of its sweep. It sees what the noise meter's probe (noise.py) does not.

The probe reports the best of short GEMMs on the whole machine: what the machine can do
now. On this project's 2-core Intel VM a quota-limited step ran 2.2x slower in one sweep
than in the next while the probes read the slow run quiet (0.88) and the fast one
disturbed (0.69; experiments/measured/cori2017-emulated-intel, ResNet-50 with 1 server at
1 worker, 4894 against 2197 ms): the slow run's compute thread spent 2.7x the CPU per step
on the same forward and backward. A worker's CPU per step is its work, whatever the
probe said, where its waits block: a parameter-server worker's forward, backward and
serialisation are the same at every worker and server count of a curve, and it sleeps
while it waits for the servers. In r7 of that set, MXNet ResNet-50's workers spent 0.25
to 0.29 core-s per step in all nine configurations (1 to 8 workers, 1 to 4 servers); in
r6, 0.27 to 0.30 in six and 0.75, 0.45 and 0.37 in the three it measured slow.

Not for allreduce: there waiting spends CPU (Horovod's rank main thread used 0.20 cores
at 8 workers, 4x its CPU per step at 1 worker, scaling-emulated-hepcnn-torch-intel r5),
so CPU per step grows with the wait, not the work.

The meter compares runs within one sweep, so it finds a sweep's slow stretch, not a sweep
that ran slow throughout: only repeats see that (holdout_repeats.py). And a worker's CPU
per step also grows when many processes share the machine's cores: runs at 8 workers read
up to 1.47x with no slowdown against their repeats, which is why the held-out validation
applies it to the small runs a fit rests on (see SLOW).
"""

from __future__ import annotations

import math

from harness.stats import median

#: A run whose workers spent more than this multiple of their workload's usual CPU per
#: step (its median over the sweep) ran on a slow CPU. Over every shipped sweep
#: (2026-12-07), 8 parameter-server runs with at most 2 workers are above it; each of the
#: 5 with repeats ran 1.29-2.43x its repeats' median t_iter, and none of the 297 small
#: runs within 10% of their repeats is (tests/test_workmeter.py).
SLOW = 1.3
#: Strategies whose workers block while they wait (see the module docstring).
BLOCKING = ("ps-sync", "ps-async")
#: Fewer runs of a workload than this give no usual to compare with.
MIN_RUNS = 3

#: Runs with at most this many workers are the ones it reads (the held-out fit's scale,
#: harness/perfmodel/holdout.FIT_MAX_WORKERS): see the module docstring.
SMALL_WORKERS = 2

_WORKLOAD = ("experiment", "mode", "framework", "model", "batch_size", "image_size",
             "precision", "threads", "cpus_per_host", "device", "strategy")


def cpu_per_step(row: dict) -> float | None:
    """Core-seconds one worker's process tree spent per step while measuring (None where
    either is missing: None, or NaN in a pandas frame's records)."""
    try:
        c = float(row.get("cpu_cores_per_worker")) * float(row.get("t_iter_s"))
    except (TypeError, ValueError):
        return None
    return c if math.isfinite(c) and c > 0 else None


def ratios(rows: list[dict]) -> dict[str, float]:
    """run_id -> the run's workers' CPU per step over the median of its workload's (the
    same experiment, mode, network, batch, image, precision, threads, quota, device and
    strategy) in `rows`, for runs of a BLOCKING strategy whose workload has MIN_RUNS."""
    groups: dict[tuple, list[tuple[str, float]]] = {}
    for r in rows:
        c = cpu_per_step(r) if r.get("strategy") in BLOCKING else None
        if c is not None:
            key = tuple(None if v != v else v for v in (r.get(k) for k in _WORKLOAD))  # NaN
            groups.setdefault(key, []).append((r["run_id"], c))
    out: dict[str, float] = {}
    for members in groups.values():
        if len(members) >= MIN_RUNS:
            usual = median([c for _, c in members])
            out.update((run_id, c / usual) for run_id, c in members)
    return out


def slow(rows: list[dict]) -> dict[str, float]:
    """The runs of `ratios` above SLOW."""
    return {k: v for k, v in ratios(rows).items() if v > SLOW}


def slow_small(rows: list[dict]) -> dict[str, float]:
    """The runs of `slow` with at most SMALL_WORKERS workers: what a sweep offers to
    measure again (`dnnbench run --remeasure-disturbed`)."""
    small = {r["run_id"] for r in rows if (r.get("workers") or 0) <= SMALL_WORKERS}
    return {k: v for k, v in slow(rows).items() if k in small}


def words() -> str:
    """What a run the meter reads slow is, in the words every message uses."""
    return (f"its workers spent more than {SLOW:.1f}x their workload's usual CPU per step "
            "in the sweep: the same work on a slow CPU, which the probes do not see")
