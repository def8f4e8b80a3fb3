"""Self-sampling overhead: does a worker that samples itself (Slurm jobs, where the harness
cannot see the compute nodes' /proc) train slower?

The self-sampler lives for the whole worker process, so it cannot be switched per trial as
bench/telemetry.py does from outside. Instead whole processes alternate, ABBA (off on on
off, repeated), and their median iteration times are compared: that carries
between-process noise (a few % here). The sampling thread's own CPU time, which each
worker reports with its samples, is the low-noise upper bound of what sampling can take
from training. Target: <= 1% at the default (1 s) interval.
Run: python -m bench.selfsample [--intervals 1.0,0.1] [--rounds 2]
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.measure import over_intervals, sampling_line, sampling_parser  # noqa: E402
from frameworks import events  # noqa: E402
from frameworks.contract import RunSpec  # noqa: E402
from frameworks.plan import PlanContext, plan  # noqa: E402
from frameworks.selfsample import ENV  # noqa: E402
from harness import envs, jobs  # noqa: E402
from harness.jobs import worker_source_root  # noqa: E402


def one_process(spec: RunSpec, interval: float) -> dict:
    """Median seconds per iteration of one worker process, and its sampler's report."""
    env = envs.find(spec.framework)
    procs = plan(spec, PlanContext(env.python, worker_source_root(), "bench"))
    if interval > 0:
        procs = [replace(p, env={**p.env, ENV: f"{interval:g}"}) for p in procs]
    got: dict = {"iters": [], "telemetry": None}

    def on_line(tag: str, line: str) -> None:
        ev = events.parse(line)
        if ev is None:
            return
        if ev["event"] == events.TRIAL:
            got["iters"].append(ev["wall"] / len(ev["iter_times"]))
        elif ev["event"] == events.TELEMETRY:
            got["telemetry"] = ev

    job = jobs.run(jobs.Job(procs, "local"), spec.timeout_s, on_line=on_line)
    if not job.ok:
        raise SystemExit("\n".join(job.failure_tail(20)))
    return {"t_iter_s": statistics.median(got["iters"]), "telemetry": got["telemetry"]}


def measure(spec: RunSpec, interval: float, rounds: int) -> dict:
    on, off, cpu, wall = [], [], 0.0, 0.0
    for _ in range(rounds):
        for sampling in (False, True, True, False):  # ABBA: drift cancels in the medians
            r = one_process(spec, interval if sampling else 0.0)
            (on if sampling else off).append(r["t_iter_s"])
            if sampling:
                tel = r["telemetry"] or {}
                cpu += float(tel.get("sampler_cpu_s", 0.0))
                wall += float(tel.get("sampled_s", 0.0))
    return {"framework": spec.framework, "model": spec.model, "interval_s": interval,
            "processes_on": len(on), "processes_off": len(off),
            "t_iter_on_s": statistics.median(on), "t_iter_off_s": statistics.median(off),
            "overhead": statistics.median(on) / statistics.median(off) - 1,
            "spread_off": (max(off) - min(off)) / statistics.median(off),
            "sampler_cpu_share": cpu / wall / (os.cpu_count() or 1) if wall else None,
            "sampler_cpu_per_worker": cpu / wall if wall else None}


def main() -> int:
    ap = sampling_parser(__doc__, trials=8, rounds=2)  # ABBA rounds, 4 processes each
    a = ap.parse_args()
    spec = RunSpec(a.framework, a.model, batch_size=a.batch, image_size=a.image_size,
                   steps=a.steps, warmup=2, trials=a.trials, target_width=0, timeout_s=1800)
    return over_intervals(a.intervals, lambda i: measure(spec, i, a.rounds), lambda i, r: (
        sampling_line("self-sampling", a, i, r, f"off processes spread {r['spread_off']:.1%}",
                      f"the sampling thread's own CPU = {r['sampler_cpu_per_worker']:.3%} "
                      "of one core (target <= 1% at 1 s)")))


if __name__ == "__main__":
    sys.exit(main())
