"""Turn-taking between the harness and a worker: which trial may run now, or stop.

The harness measures compared configurations in interleaved trials (harness/interleave.py):
all of them are started and built first, then each gets its trial 1 before any gets
trial 2, so a busy minute on a shared machine hits every side alike. A worker learns
whose turn it is from one small file the harness rewrites atomically (path in
DNNBENCH_GATE): ``"<granted> <stop>"``: trials 0..granted-1 may run; stop = 1 ends the
run after the trials already granted. The grant only grows and is only changed after the
harness has seen the previous trial, so every rank of a multi-process job reads the same
decision. Without DNNBENCH_GATE (a Slurm job, a worker started by hand) the worker runs
the spec's fixed number of trials.

Waiting costs one small read every few milliseconds, backing off to one every POLL_MAX_S:
an idle worker takes no measurable CPU from the configuration being measured, and the
harness's noise probe between rounds (harness/noise.py) is not slowed by the waiting
workers. Polling every 4 ms without backing off, 8 idle workers cut the probe's GEMM to
0.80-0.83 of its rate alone (2026-12-02, this 2-core VM, bench/gate_probe.py; 2 such
workers or 8 polling every 50 ms: no change): 8 of the 9 8-worker runs of that day's
shi2017-emulated sweeps were flagged "machine disturbed"."""

from __future__ import annotations

import os
import time
from pathlib import Path

POLL_S = 0.004  # the first waits: a grant that follows soon is seen soon
POLL_MAX_S = 0.05  # the wait doubles up to this
ENV = "DNNBENCH_GATE"


def write(path: str | Path, granted: int, stop: bool = False) -> None:
    """The harness's side: grant trials 0..granted-1 (and stop after them)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(f"{granted} {int(stop)}\n")
    os.replace(tmp, p)  # atomic: a reader sees the old or the new state, never half


def read(path: str | Path) -> tuple[int, bool]:
    try:
        granted, stop = Path(path).read_text().split()
        return int(granted), stop == "1"
    except (OSError, ValueError):  # not written yet
        return 0, False


class Gate:
    """The worker's side: `may_run(trial)` blocks until the harness grants `trial` (True)
    or says stop (False)."""

    def __init__(self, path: str | None, fixed_trials: int) -> None:
        self.path = path
        self.fixed_trials = fixed_trials

    @classmethod
    def from_env(cls, fixed_trials: int) -> Gate:
        return cls(os.environ.get(ENV) or None, fixed_trials)

    @property
    def interleaved(self) -> bool:
        return self.path is not None

    def may_run(self, trial: int) -> bool:
        if self.path is None:
            return trial < self.fixed_trials
        wait = POLL_S
        while True:
            granted, stop = read(self.path)
            if trial < granted:
                return True
            if stop:
                return False
            time.sleep(wait)
            wait = min(2 * wait, POLL_MAX_S)
