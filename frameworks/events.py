"""One-line JSON events from workers to the harness (the MLPerf-logging idea).

Every event is a single line ``:::DNNBENCH {"event": KIND, "v": VERSION, "t": UNIX_S, ...}``
so output interleaved from many ranks, or mixed with a framework's own chatter, still
parses; the harness never scrapes prose, nor substrings of the JSON: it reads events with
`parse`. The kinds and their keys live here, once, for both sides. `v` is the format's
version (a reader can refuse a newer one), `t` the worker's wall clock when it spoke (so
a worker output file read long after the run, as under Slurm, still has the timeline).

Workers make events with the typed constructors below (`trial(...)`, `done(...)`, one per
kind); REQUIRED says which keys each kind always carries and their types, checked where an
event is made (a worker bug fails there, by name) and where it is read (a line that breaks
it is not an event), so the harness can index those keys without guessing.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
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


_NUMBER = (int, float)
#: the keys every event of a kind carries, with their types (others are optional)
REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    ENVIRONMENT: {"rank": int},
    MODEL: {"rank": int, "settings": dict},
    TRIAL: {"rank": int, "trial": int, "iter_times": list, "wall": _NUMBER, "phases": dict},
    LOSS: {"rank": int, "trial": int, "values": list},
    ERROR: {"reason": str, "error_type": str},
    DONE: {"rank": int},
    COMM: {"rank": int, "op": str, "library": str, "ranks": int, "bytes": int,
           "times": list, "median": _NUMBER, "wrong": int},
    DATA: {"rank": int},
    WARMUP: {"rank": int, "steps": int, "settled": bool, "times": list},
    PEAK: {"rank": int},
    TELEMETRY: {"rank": int},
}


def broken_key(kind: str, event: dict[str, Any]) -> str | None:
    """The first required key of `kind` that `event` lacks or holds with the wrong type."""
    for key, types in REQUIRED[kind].items():
        value = event.get(key)
        if value is None or not isinstance(value, types) or (
                isinstance(value, bool) and bool not in (types if isinstance(types, tuple)
                                                         else (types,))):
            return key
    return None


def emit(kind: str, stream: TextIO | None = None, **payload: Any) -> None:
    """Write one event; prefer the kind's constructor (`trial`, `done`, ...)."""
    if kind not in KINDS:
        raise ValueError(f"unknown event kind {kind!r}")
    bad = broken_key(kind, payload)
    if bad is not None:
        want = REQUIRED[kind][bad]
        names = "/".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
        raise ValueError(f"{kind} event: {bad} must be {names}, got {payload.get(bad)!r}")
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
    error(f"{type(exc).__name__}: {first}"[:500], type(exc).__name__)


# -- one constructor per kind: what a worker says, with the keys the harness relies on --

def environment(rank: int, **facts: Any) -> None:
    """Framework versions, device, threads, placement and node facts of one rank."""
    emit(ENVIRONMENT, rank=rank, **facts)


def model(rank: int, settings: dict[str, Any], **counts: Any) -> None:
    """The network as built (parameters, tensors, gradient bytes) and the run's settings."""
    emit(MODEL, rank=rank, settings=settings, **counts)


def trial(rank: int, trial: int, iter_times: Sequence[float], wall: float,
          phases: dict[str, list[float]], **extra: Any) -> None:
    """One trial's raw per-iteration times (and per-phase ones in breakdown mode)."""
    emit(TRIAL, rank=rank, trial=trial, iter_times=list(iter_times), wall=wall,
         phases=phases, **extra)


def loss(rank: int, trial: int, values: Sequence[float]) -> None:
    emit(LOSS, rank=rank, trial=trial, values=list(values))


def error(reason: str, error_type: str, rank: int | None = None) -> None:
    """A clean, one-line reason the worker could not finish."""
    emit(ERROR, reason=reason, error_type=error_type,
         **({} if rank is None else {"rank": rank}))


def done(rank: int, **summary: Any) -> None:
    """The rank finished; `summary`: its final state digest, peak memory, ..."""
    emit(DONE, rank=rank, **summary)


def comm(rank: int, op: str, library: str, ranks: int, nbytes: int,
         times: Sequence[float], wrong: int) -> None:
    """One message size of a communication benchmark: its timings and whether the
    result was wrong."""
    import statistics

    emit(COMM, rank=rank, op=op, library=library, ranks=ranks, bytes=nbytes,
         times=list(times), median=statistics.median(times), wrong=wrong)


def data(rank: int, **summary: Any) -> None:
    """The input pipeline: dataset, this rank's shard, skipped files."""
    emit(DATA, rank=rank, **summary)


def warmup(rank: int, steps: int, settled: bool, times: Sequence[float],
           **extra: Any) -> None:
    emit(WARMUP, rank=rank, steps=steps, settled=settled, times=list(times), **extra)


def peak(rank: int, **result: Any) -> None:
    """The device's dense-matmul peak, or the reason it could not be measured."""
    emit(PEAK, rank=rank, **result)


def telemetry(rank: int, **samples: Any) -> None:
    """The rank's own CPU and memory samples (frameworks/selfsample.py)."""
    emit(TELEMETRY, rank=rank, **samples)


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
    if broken_key(event["event"], event) is not None:
        return None  # it looks like an event but lacks what every event of its kind has
    return event
