"""Telemetry overhead: does sampling /proc (and NVML) slow training down?

One worker process trains for many short trials; the harness switches the sampler on and
off between trials in an ABBA pattern, so on- and off-trials are measured side by side in
the same process (no between-process noise). The sampler thread's own CPU time is
reported too: a low-noise upper bound of what it can take from training. Target:
overhead <= 1% at the default (1 s) interval.
Run: python -m bench.telemetry [--intervals 1.0,0.1] [--trials 24]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.measure import over_intervals, sampling_line, sampling_parser  # noqa: E402
from frameworks import events  # noqa: E402
from frameworks.contract import RunSpec  # noqa: E402
from frameworks.plan import PlanContext, plan  # noqa: E402
from harness import envs, jobs  # noqa: E402
from harness.jobs import worker_source_root  # noqa: E402
from harness.telemetry import Sampler  # noqa: E402


def on_for(trial: int) -> bool:
    return trial % 4 in (1, 2)  # ABBA: off on on off


def measure(framework: str, model: str, image_size: int, batch: int, steps: int,
            trials: int, interval: float) -> dict:
    env = envs.find(framework)
    spec = RunSpec(framework, model, batch_size=batch, image_size=image_size, steps=steps,
                   warmup=2, trials=trials, timeout_s=1800)
    procs = plan(spec, PlanContext(env.python, worker_source_root(), "bench"))
    state: dict = {"sampler": None, "pid": None, "walls": {}, "cpu": 0.0, "on_s": 0.0,
                   "since": 0.0}

    def switch(trial_next: int) -> None:
        if state["sampler"] is not None:
            state["cpu"] += state["sampler"].stop().cpu_seconds
            state["on_s"] += time.monotonic() - state["since"]
            state["sampler"] = None
        state["since"] = time.monotonic()
        if on_for(trial_next):
            s = Sampler(interval, gpu=True)
            s.add("worker0", state["pid"])
            state["sampler"] = s.start()

    def on_line(tag: str, line: str) -> None:
        ev = events.parse(line)
        if ev is None:
            return
        if ev["event"] == events.MODEL:
            switch(0)
        elif ev["event"] == events.TRIAL:
            state["walls"][ev["trial"]] = ev["wall"] / len(ev["iter_times"])
            switch(ev["trial"] + 1)

    job = jobs.run(jobs.Job(procs, "local"), spec.timeout_s, on_line=on_line,
                   on_start=lambda tag, pid: state.__setitem__("pid", pid))
    if state["sampler"] is not None:
        state["sampler"].stop()
    if not job.ok:
        raise SystemExit("\n".join(job.failure_tail(20)))
    on = [w for t, w in state["walls"].items() if on_for(t)]
    off = [w for t, w in state["walls"].items() if not on_for(t)]
    ratio = statistics.median(on) / statistics.median(off)
    cores = os.cpu_count() or 1
    return {"framework": framework, "model": model, "interval_s": interval,
            "sampler_cpu_share": state["cpu"] / (state["on_s"] * cores),
            "trials_on": len(on), "trials_off": len(off),
            "t_iter_on_s": statistics.median(on), "t_iter_off_s": statistics.median(off),
            "overhead": ratio - 1}


def main() -> int:
    ap = sampling_parser(__doc__, trials=24)
    a = ap.parse_args()
    return over_intervals(a.intervals, lambda i: measure(
        a.framework, a.model, a.image_size, a.batch, a.steps, a.trials, i), lambda i, r: (
        sampling_line("telemetry", a, i, r, "between-trial noise is +-5-8% here",
                      f"the sampler's own CPU = {r['sampler_cpu_share']:.3%} of the machine "
                      "(target <= 1% at the default 1 s)")))


if __name__ == "__main__":
    sys.exit(main())
