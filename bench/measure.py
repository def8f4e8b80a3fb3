"""One measured run for the harness benchmarks: launch planned processes, collect the
record exactly as a sweep does, return t_iter (a failed run stops the benchmark with the
worker's own output, so a broken configuration is never reported as a number)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from frameworks.contract import RunSpec
from harness import collect, jobs
from runners.spec import ProcessSpec


def t_iter(spec: RunSpec, procs: list[ProcessSpec], launcher: str, what: str,
           **options) -> float:
    job = jobs.run(jobs.Job(procs, launcher, options), spec.timeout_s)
    row = collect.record(spec, "bench", "b", job, {}).row
    if row["status"] != "ok":
        raise SystemExit(f"{what}: {row['reason']}\n{row.get('output_tail')}")
    return row["t_iter_s"]


def parser(doc: str, steps: int, rounds: int | None) -> argparse.ArgumentParser:
    """The options every side-by-side benchmark takes (ResNet-50 at 64 px, batch 16)."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=steps)
    if rounds is not None:
        ap.add_argument("--rounds", type=int, default=rounds,
                        help=f"side-by-side rounds ({rounds})")
    return ap


def sampling_parser(doc: str, trials: int, rounds: int | None = None
                    ) -> argparse.ArgumentParser:
    """The telemetry benchmarks' options: one framework's worker, sampled at intervals."""
    ap = parser(doc, steps=3, rounds=rounds)
    ap.add_argument("--framework", default="torch")
    ap.add_argument("--trials", type=int, default=trials)
    ap.add_argument("--intervals", default="1.0,0.1",
                    help="sampling intervals to measure (the default, and a 10x stress)")
    return ap


def over_intervals(intervals: str, measure: Callable[[float], dict],
                   line: Callable[[float, dict], str]) -> int:
    """Measure at each comma-separated sampling interval: a line each, then all as JSON."""
    out = []
    for interval in [float(x) for x in intervals.split(",")]:
        r = measure(interval)
        out.append(r)
        print(line(interval, r), flush=True)
    print(json.dumps(out))
    return 0


def sampling_line(what: str, a: argparse.Namespace, interval: float, r: dict, noise: str,
                  cpu: str) -> str:
    """One sampling benchmark's result in words: on/off iteration times, the overhead and
    the noise it must be read against, the sampler's own CPU."""
    return (f"{what} every {interval:g} s, {a.framework} {a.model} {a.image_size}px "
            f"b{a.batch}: t_iter on/off = {r['t_iter_on_s'] * 1e3:.1f}/"
            f"{r['t_iter_off_s'] * 1e3:.1f} ms, measured overhead {r['overhead']:+.2%} "
            f"({noise}); {cpu}")
