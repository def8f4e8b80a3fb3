"""Sweep progress: a live status line on a terminal, plain lines everywhere else.

On a TTY the current run's line is redrawn in place (elapsed time, trial k/n, ETA from the
runs completed so far); in CI logs and pipes every event is one plain, complete line, so
the log reads top to bottom without control characters.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def fmt_duration(seconds: float) -> str:
    seconds = int(round(max(seconds, 0)))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, live: bool | None = None,
                 interval: float = 0.5) -> None:
        self.total = total
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.interval = interval
        self.t0 = time.monotonic()
        self.finished = 0
        self.measured_time = 0.0
        self.measured = 0
        self.remaining_runs = total
        self._head = ""
        self._run_start = 0.0
        self._trial = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- lines ------------------------------------------------------------------------
    def _write(self, text: str, final: bool = True) -> None:
        with self._lock:
            if self.live:
                self.stream.write("\r\033[K" + text + ("\n" if final else ""))
            elif final:
                self.stream.write(text + "\n")
            self.stream.flush()

    def eta(self) -> float | None:
        if not self.measured:
            return None
        return self.measured_time / self.measured * self.remaining_runs

    def _status(self) -> str:
        eta = self.eta()
        return (f"elapsed {fmt_duration(time.monotonic() - self.t0)}, "
                f"ETA {fmt_duration(eta) if eta is not None else '?'}")

    # -- run lifecycle ----------------------------------------------------------------
    def start(self, index: int, head: str, runs: int = 1) -> None:
        """Runs index..index+runs-1 begin (an interleaved group measures several at once)."""
        span = f"{index}-{index + runs - 1}" if runs > 1 else f"{index}"
        self._head = f"[{span}/{self.total}] {head}"
        self._run_start = time.monotonic()
        self._trial = ""
        if self.live:
            self._stop.clear()
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        else:
            self._write(f"{self._head}: started; {self._status()}")

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._write(f"{self._head}: running {fmt_duration(time.monotonic() - self._run_start)}"
                        f"{self._trial}; {self._status()}", final=False)

    def trial(self, done: int, total: int | None, active: int | None = None) -> None:
        """Trial `done` of `total` finished (total None: adaptive sampling decides; with
        `active`, the round of an interleaved group and how many still sample)."""
        if active is not None:
            self._trial = f", round {done} done, {active} still sampling"
        else:
            self._trial = f", trial {done}" + (f"/{total}" if total else "")
        if not self.live and active is not None:
            self._write(f"{self._head}: round {done} done, {active} still sampling; "
                        f"{self._status()}")

    def skip_run(self) -> None:
        """A run that needed no measuring (stored meanwhile, skipped)."""
        self.remaining_runs -= 1

    def end(self, message: str, measured: bool = True, runs: int = 1) -> None:
        self._stop.set()
        if self._ticker:
            self._ticker.join()
            self._ticker = None
        took = time.monotonic() - self._run_start
        if measured:
            self.measured += runs
            self.measured_time += took
        self.remaining_runs -= runs
        self._write(f"{self._head}: {message} ({fmt_duration(took)}); {self._status()}")

    def note(self, message: str) -> None:
        self._write(message)
