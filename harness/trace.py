"""Chrome-trace / Perfetto JSON of a breakdown run: one track per rank, one slice per phase.

Open the file at ui.perfetto.dev or chrome://tracing (both load local files; nothing is
uploaded) to see each iteration's io, h2d, forward, backward, comm and update in time.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.store import Store

PHASE_ORDER = ("io", "h2d", "forward", "backward", "comm", "update")


class TraceError(LookupError):
    pass


def chrome_trace(store: Store, run_id: str) -> dict:
    runs = store.runs("WHERE run_id = ?", (run_id,))
    if not runs:
        raise TraceError(f"no run {run_id!r} in {store.path} (see dnnbench results)")
    rows = store.conn.execute("SELECT rank, trial, iter, phase, seconds FROM phases WHERE "
                              "run_id = ? ORDER BY rank, trial, iter", (run_id,)).fetchall()
    if not rows:
        raise TraceError(f"run {run_id} has no phase times: only breakdown-mode runs do")
    samples: dict[tuple[int, int, int], dict[str, float]] = {}
    for rank, trial, it, phase, sec in rows:
        samples.setdefault((rank, trial, it), {})[phase] = sec
    events = []
    clock: dict[int, float] = {}
    for (rank, trial, it), phases in sorted(samples.items()):
        t = clock.get(rank, 0.0)
        for phase in PHASE_ORDER:
            dur = phases.get(phase, 0.0) * 1e6
            events.append({"name": phase, "cat": "phase", "ph": "X", "ts": round(t, 3),
                           "dur": round(dur, 3), "pid": 0, "tid": rank,
                           "args": {"trial": trial, "iteration": it}})
            t += dur
        clock[rank] = t
    r = runs[0]
    for rank in clock:
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": rank,
                       "args": {"name": f"rank {rank}"}})
    events.append({"name": "process_name", "ph": "M", "pid": 0, "args": {
        "name": f"{r['framework']} {r['model']} b{r['batch_size']} {r['image_size']}px "
                f"{r['strategy']} x{r['workers']}"}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"run_id": run_id, "note": "phases laid end to end per rank; "
                          "breakdown mode synchronises after each phase"}}


def write(store: Store, run_id: str, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(store, run_id)))
    return path
