"""One-line JSON events from workers to the harness (the MLPerf-logging idea).

Every event is a single line ``:::DNNBENCH {"event": KIND, "v": VERSION, "t": UNIX_S, ...}``
so output interleaved from many ranks, or mixed with a framework's own chatter, still
parses; the harness never scrapes prose, nor substrings of the JSON: it reads events with
`parse`. The kinds and their keys live here, once, for both sides. `v` is the format's
version (a reader can refuse a newer one), `t` the worker's wall clock when it spoke (so
a worker output file read long after the run, as under Slurm, still has the timeline).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

PREFIX = ":::DNNBENCH "
#: the event format's version: 1 added "v" and "t" (events without them are version 0)
VERSION = 1

ENVIRONMENT = "environment"  # framework versions, device, threads, settings
MODEL = "model"  # parameter counts (framework and cost model), tensors
TRIAL = "trial"  # one trial's raw per-iteration times (+ phases in breakdown mode)
LOSS = "loss"  # loss values observed during a trial
ERROR = "error"  # a clean, one-line reason the worker could not finish
DONE = "done"
COMM = "comm"  # commbench: one message size's timings and correctness
DATA = "data"  # the input pipeline: dataset, this worker's shard, skipped files
WARMUP = "warmup"  # untimed steps before the first trial, and whether they settled
PEAK = "peak"  # the dense-matmul peak of this worker's device (frameworks/peak.py)
TELEMETRY = "telemetry"  # the worker's own CPU/memory samples (frameworks/selfsample.py)

KINDS = (ENVIRONMENT, MODEL, TRIAL, LOSS, ERROR, DONE, COMM, DATA, WARMUP, PEAK, TELEMETRY)


def emit(kind: str, stream: TextIO | None = None, **payload: Any) -> None:
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    out = stream or sys.stdout
    head = {"event": kind, "v": VERSION, "t": round(time.time(), 6)}
    out.write(PREFIX + json.dumps({**head, **payload}, separators=(",", ":")) + "\n")
    out.flush()


def report_exception(exc: BaseException) -> None:
    """A worker's last word on an unexpected failure: traceback to stderr (it lands in the
    run's output tail), one ERROR event with a one-line reason for the results table."""
    import traceback

    traceback.print_exc()
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first == "in user code:" and len(lines) > 1:  # TensorFlow: the cause is last
        first = lines[-1]
    emit(ERROR, reason=f"{type(exc).__name__}: {first}"[:500], error_type=type(exc).__name__)


def parse(line: str) -> dict[str, Any] | None:
    """The event on this line, or None for any other output (rank prefixes allowed)."""
    pos = line.find(PREFIX)
    if pos < 0:
        return None
    try:
        event = json.loads(line[pos + len(PREFIX):])
    except json.JSONDecodeError:
        return None
    if not isinstance(event, dict) or event.get("event") not in KINDS:
        return None
    if int(event.get("v", 0)) > VERSION:
        return None  # a newer worker's format: not guessed at
    return event
