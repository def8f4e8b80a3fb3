"""The `local` launcher: every process of the job on this host (rendezvous on 127.0.0.1)."""

from __future__ import annotations

import threading

from runners.process import LineCallback, StartCallback, run_job
from runners.spec import JobResult, ProcessSpec

NAME = "local"


def launch(specs: list[ProcessSpec], timeout: float, on_line: LineCallback | None = None,
           on_start: StartCallback | None = None,
           cancel: threading.Event | None = None) -> JobResult:
    return run_job(specs, timeout, on_line=on_line, on_start=on_start, cancel=cancel)
