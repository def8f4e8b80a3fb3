"""Resource telemetry a worker takes of itself, for jobs whose processes the harness
cannot see: on a Slurm compute node they are slurmd's children on another machine.

A daemon thread reads /proc/self (and the worker's live child processes, e.g. data
loaders) every interval: CPU time over wall time, and resident memory. The samples stay
in memory and leave in one TELEMETRY event at the end, so nothing is written while the
worker is timed; the harness turns them into the same telemetry rows and columns its own
sampler gives local runs (harness/telemetry.py `Telemetry.from_events`). Standard
library only: it runs in every framework's environment.
"""

from __future__ import annotations

import os
import threading
import time

#: seconds between samples; unset or 0: off (the harness samples from outside)
ENV = "DNNBENCH_SELF_TELEMETRY"
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _stat(pid: str) -> tuple[int, int] | None:
    """(CPU ticks, RSS pages) of one process; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12]), int(fields[21])


def _children() -> list[str]:
    out: list[str] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children") as fh:
                out += fh.read().split()
    except OSError:
        pass
    return out


def _reading() -> tuple[float, int]:
    """(CPU seconds, RSS bytes) of this process and its live children."""
    ticks = pages = 0
    for pid in ["self", *_children()]:
        got = _stat(pid)
        if got is not None:
            ticks, pages = ticks + got[0], pages + got[1]
    return ticks / _TICK, pages * _PAGE


class SelfSampler:
    """Start it early, mark `measuring()` at the first timed trial, `result()` at the end."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.samples: list[list[float]] = []  # [unix time, CPU cores, RSS bytes]
        self.measuring_from: float | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._last: tuple[float, float] | None = None  # (time, CPU s) at the last sample
        self._started = time.time()
        self._own_cpu_s = 0.0  # the sampling thread's own CPU time: what sampling costs
        self._thread = threading.Thread(target=self._loop, name="dnnbench-selfsample",
                                        daemon=True)

    @classmethod
    def from_env(cls) -> SelfSampler | None:
        try:
            interval = float(os.environ.get(ENV, "0") or 0)
        except ValueError:
            return None
        if not interval > 0:
            return None
        sampler = cls(interval)
        sampler._thread.start()
        return sampler

    def _take(self) -> None:
        """One sample: CPU cores used since the previous one, and RSS now."""
        with self._lock:
            now = time.time()
            cpu, rss = _reading()
            if self._last is not None and now > self._last[0]:
                cores = max(0.0, (cpu - self._last[1]) / (now - self._last[0]))
                self.samples.append([round(now, 3), round(cores, 3), rss])
            self._last = (now, cpu)

    def _loop(self) -> None:
        self._take()
        while not self._stop.wait(self.interval_s):
            self._take()
            self._own_cpu_s = time.thread_time()

    def measuring(self) -> None:
        """The first timed trial starts: a sample now closes the start-up's interval, so
        the next ones describe measuring only (a run shorter than one interval still
        gets one, from `result`)."""
        if self.measuring_from is None:
            self._take()
            self.measuring_from = time.time()

    def result(self) -> dict:
        """Stop sampling; the TELEMETRY event's payload."""
        self._stop.set()
        self._thread.join(timeout=2 * self.interval_s + 1)
        self._take()
        return {"interval_s": self.interval_s, "measuring_from": self.measuring_from,
                "samples": self.samples, "sampler_cpu_s": round(self._own_cpu_s, 6),
                "sampled_s": round(time.time() - self._started, 3)}
