"""The framework-neutral worker: ``python -m frameworks.worker``.

Runs inside a framework's own environment. Reads the RunSpec from DNNBENCH_SPEC and its
place in the job from DNNBENCH_RANK / DNNBENCH_WORLD_SIZE, asks the framework's adapter
for a Trainer, checks that the built network has exactly the cost model's parameter
count (the fairness guarantee), then warms up, runs the trials and emits one event line
per result. Failures end with one ERROR event carrying a one-line reason.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable

from frameworks import events, peak
from frameworks.contract import RunSpec, SpecError, worker_threads
from frameworks.datasets import DatasetError
from frameworks.gate import Gate
from frameworks.selfsample import SelfSampler
from frameworks.timing import FeedOnly, run_trial, warm_up

#: Loader mode times at least this many batches per trial (see _measure_loader).
LOADER_MIN_STEPS = 50


class WorkerError(RuntimeError):
    """A failure with a reason fit to show the user as is."""


def _first(*names: str, default: str) -> int:
    for name in names:
        if os.environ.get(name):
            return int(os.environ[name])
    return int(default)


def rank_info() -> tuple[int, int, int]:
    """(rank, local rank, world size), from our launcher's variables or, under horovodrun /
    mpirun / srun, from Horovod's, Open MPI's, PMI's or Slurm's (one place, as Horovod
    does)."""
    rank = _first("DNNBENCH_RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                  "SLURM_PROCID", default="0")
    local = _first("DNNBENCH_LOCAL_RANK", "HOROVOD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "MPI_LOCALRANKID", "SLURM_LOCALID", default="0")
    world = _first("DNNBENCH_WORLD_SIZE", "HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                   "SLURM_NTASKS", default="1")
    for key, value in (("DNNBENCH_RANK", rank), ("DNNBENCH_LOCAL_RANK", local),
                       ("RANK", rank), ("LOCAL_RANK", local), ("WORLD_SIZE", world)):
        os.environ.setdefault(key, str(value))
    return rank, local, world


def _rank() -> tuple[int, int]:
    rank, _, world = rank_info()
    return rank, world


def _placement() -> dict:
    """Where this process may run: its cores and its cpu cgroup (an emulated host's
    limits show here, runners/cgroups.py), so the manifest proves the placement."""
    group = ""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpu" in controllers.split(",") or (not controllers and not group):
                    group = path
    except OSError:
        pass
    return {"cores": sorted(os.sched_getaffinity(0)), "cgroup": group}


def allocated_threads(spec: RunSpec) -> None:
    """Inside a Slurm job, threads left to dnnbench follow the allocation
    (SLURM_CPUS_PER_TASK) rather than the plan's guess from `sinfo`: a site's defaults
    or an sbatch option may have changed it. Before any framework reads them."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if not spec.threads and os.environ.get("SLURM_JOB_ID") and cpus.isdigit() \
            and int(cpus) > 0:
        for key in ("DNNBENCH_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[key] = cpus


def node_facts() -> dict:
    """The machine this worker runs on, for the manifest of every node (not only the
    harness's host): name, CPU model, cores, memory, and its Slurm node when there."""
    import platform

    facts: dict = {"node": platform.node(), "node_cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            facts["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in fh
                                       if ln.startswith("model name")), "")
        with open("/proc/meminfo") as fh:
            facts["node_mem_gib"] = round(int(fh.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    for key in ("SLURMD_NODENAME", "SLURM_JOB_ID", "SLURM_NODEID", "SLURM_CPUS_PER_TASK"):
        if os.environ.get(key):
            facts[key.lower()] = os.environ[key]
    return facts


def _done(rank: int, sampler: SelfSampler | None, **payload) -> None:
    if sampler is not None:
        events.telemetry(rank, **sampler.result())
    events.done(rank, **payload)


def run(spec: RunSpec) -> None:
    from models.cost import cost

    rank, world = _rank()
    sampler = SelfSampler.from_env()
    adapter = importlib.import_module(f"frameworks.{spec.framework}.adapter")
    events.environment(rank, executable=sys.executable,
                **_placement(), **node_facts(), **adapter.environment(spec))
    if spec.mode == "loader":
        _measure_loader(spec, rank, world, sampler)
        return
    trainer = adapter.build_trainer(spec, rank=rank, world_size=world)
    feed = getattr(trainer, "feed", None)
    if feed is not None:
        events.data(rank, **feed.listing.summary())
    expected = cost(spec.model, spec.image_size, spec.num_classes)
    built = trainer.parameter_count()
    placement = getattr(trainer, "placement", None)
    events.model(rank, trainer.settings(), parameters=built,
                 expected_parameters=expected.params, tensors=len(expected.tensors),
                 gradient_bytes=expected.gradient_bytes,
                 **({"placement": placement} if placement and rank == 0 else {}))
    if built != expected.params:
        raise WorkerError(f"{spec.framework} built {spec.model} with {built:,} trainable "
                          f"parameters but the spec has {expected.params:,}: the networks "
                          "would not be comparable")
    # the device's peak is measured in this worker's first turn, before its warm-up: in an
    # interleaved group the others are still starting up before then
    first_turn = (lambda: _device_peak(spec, adapter, rank)) if peak.wanted(spec) else None
    try:
        _measure(spec, trainer, rank, world, first_turn,
                 sampler.measuring if sampler is not None else None)
        digest = trainer.state_digest()
    finally:
        trainer.close()  # loader processes exit first, so their peak memory is counted
    _done(rank, sampler, state_digest=digest, **peak_rss_bytes())


def _device_peak(spec: RunSpec, adapter, rank: int) -> None:
    """The device's dense-matmul peak (frameworks/peak.py). A probe that
    fails costs the run its MFU, never its result: the event then carries the reason."""
    try:
        result = peak.measure(adapter.matmul_probe(spec, peak.size(spec)))
    except Exception as exc:  # noqa: BLE001 - any framework error; the run goes on
        result = {"error": f"{type(exc).__name__}: {str(exc).strip()[:200]}"}
    events.peak(rank, **result)


def peak_rss_bytes() -> dict[str, int]:
    """Peak resident memory of this process and of its finished children (loader
    workers), from the kernel's own high-water mark: exact, and free to read."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return {"peak_rss_bytes": own, "peak_rss_children_bytes": children}


def _measure_loader(spec: RunSpec, rank: int, world: int,
                    sampler: SelfSampler | None = None) -> None:
    """Loader mode: the input pipeline's images/s with no model at all."""
    data = importlib.import_module(f"frameworks.{spec.framework}.data")
    feed = data.build_feed(spec, rank, world)
    events.data(rank, **feed.listing.summary())
    events.model(rank, {"threads": worker_threads(spec),
                                                   **feed.settings()})
    trainer = FeedOnly(feed)
    # Prefetched batches (about 2 per loader worker) come out at memory speed: enough
    # batches per trial that the pipeline's sustained rate, not its buffer, is measured.
    steps = max(spec.steps, LOADER_MIN_STEPS)
    try:
        for trial in _trials(spec, trainer, rank, world, steps=spec.warmup,
                             measuring=sampler.measuring if sampler is not None else None):
            started = time.time()
            result = run_trial(trainer, steps, "throughput")
            events.trial(rank, trial, result.iter_times, result.wall, {}, started=started)
    finally:
        feed.close()
    _done(rank, sampler, **peak_rss_bytes())


def _trials(spec: RunSpec, trainer, rank: int, world: int, steps: int,
            first_turn: Callable[[], None] | None = None,
            measuring: Callable[[], None] | None = None):
    """The trial numbers this worker runs: as the harness grants them (interleaved with
    other configurations, frameworks/gate.py), else the spec's fixed count. Warm-up runs
    when the first trial is granted (by detection for a single worker); a worker that
    waited for its turn takes one untimed step first, so caches and thread pools idle
    while others ran are awake again."""
    gate = Gate.from_env(spec.trials)
    trial = 0
    while gate.may_run(trial):
        if trial == 0:
            if first_turn is not None:
                first_turn()
            w = warm_up(trainer, steps, detect=world == 1)
            if spec.mode == "breakdown" and steps:
                # the per-phase path is separate code (TensorFlow traces a function per
                # phase on first call): warm it too, or trial 0 times the tracing
                run_trial(trainer, 1, "breakdown")
            events.warmup(rank, w.steps, w.settled, w.times, interleaved=gate.interleaved)
            if measuring is not None:
                measuring()
        elif gate.interleaved:
            warm_up(trainer, 1)
        yield trial
        trial += 1


def _measure(spec: RunSpec, trainer, rank: int, world: int = 1,
             first_turn: Callable[[], None] | None = None,
             measuring: Callable[[], None] | None = None) -> None:
    for trial in _trials(spec, trainer, rank, world, spec.warmup, first_turn, measuring):
        started = time.time()
        if spec.mode == "breakdown":
            # A paired throughput trial in the same process, right before each breakdown
            # trial: the cost of breakdown's syncs, measured free of between-run noise.
            paired = run_trial(trainer, spec.steps, "throughput")
            events.trial(rank, trial, paired.iter_times, paired.wall, {}, paired=True,
                         started=started)
            started = time.time()
        result = run_trial(trainer, spec.steps, spec.mode, spec.loss_every)
        events.trial(rank, trial, result.iter_times, result.wall, result.phases,
                     started=started)
        events.loss(rank, trial, result.losses)


def main() -> int:
    text = os.environ.get("DNNBENCH_SPEC")
    if not text:
        print("frameworks.worker: DNNBENCH_SPEC (the RunSpec as JSON) is not set; the "
              "harness sets it, see `dnnbench run --help`", file=sys.stderr)
        return 2
    try:
        spec = RunSpec.from_json(text)
        allocated_threads(spec)
        run(spec)
    except (WorkerError, SpecError, DatasetError) as exc:
        events.error(str(exc), type(exc).__name__)
        return 1
    except MemoryError:
        events.error("out of memory", "MemoryError")
        return 1
    except Exception as exc:  # noqa: BLE001 - any framework failure becomes a record
        events.report_exception(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
