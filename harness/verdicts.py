"""Which framework is faster, said only when the data can say it.

Two configurations measured in one interleaved group (harness/interleave.py) took turns
round by round, so each round gives a paired ratio of their trial times: drift of the
machine between rounds hits both sides of a ratio alike and cancels. The verdict is the
median ratio over the rounds both ran, with its distribution-free 95% interval (order
statistics, >= 6 rounds): confident only when the interval excludes 1. Runs that were not
measured together (older databases, `order = "sequential"`, Slurm) fall back to their
independent 95% intervals: confident only when those do not overlap.

The report's summary, `dnnbench results --verdicts`, the Python API
(`dnnbench.results.verdicts`) and bench/repeatability.py all call `compare_pair`, so a
statement and its check are the same function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.stats import median, median_ci

PAIRED = "paired"
INDEPENDENT = "independent"


@dataclass(frozen=True)
class Verdict:
    """`fast` against `slow` (run rows): how much faster, and whether it can be said."""

    fast: dict
    slow: dict
    speedup: float  # fast's images/s over slow's, minus 1 (the point estimate)
    low: float | None  # 95% interval of the speedup (None: too few samples)
    high: float | None
    method: str  # PAIRED (n rounds) | INDEPENDENT (two runs' intervals)
    n: int  # paired rounds, or 0

    @property
    def confident(self) -> bool:
        """The interval excludes "equal": a statement that should repeat."""
        return self.low is not None and self.low > 0

    def interval_text(self) -> str:
        if self.low is None:
            return "no 95% interval"
        how = (f"paired over {self.n} interleaved rounds" if self.method == PAIRED
               else "independent runs")
        return f"95% interval [{self.low:+.1%}, {self.high:+.1%}], {how}"


def round_times(trials: list[dict]) -> dict[str, dict[int, float]]:
    """run_id -> {round: seconds per iteration} from the trials table's rows."""
    out: dict[str, dict[int, float]] = {}
    for t in trials:
        if t.get("round") is not None:
            out.setdefault(t["run_id"], {})[int(t["round"])] = float(t["seconds"])
    return out


def compare_pair(a: dict, b: dict, rounds: dict[str, dict[int, float]]) -> Verdict:
    """a and b (run rows of the same network and settings), the faster one first."""
    fast, slow = (a, b) if a["images_per_s"] >= b["images_per_s"] else (b, a)
    ra, rb = rounds.get(fast.get("run_id"), {}), rounds.get(slow.get("run_id"), {})
    together = fast.get("group_id") and fast.get("group_id") == slow.get("group_id")
    common = sorted(set(ra) & set(rb)) if together else []
    if common:
        # per round: how much faster `fast` ran than `slow` (time ratio), per-image
        # throughput being global batch / time; both share the batch here
        ratios = [rb[r] / ra[r] * _batch_ratio(fast, slow) for r in common]
        lo, hi = median_ci(ratios)
        ok = lo == lo
        return Verdict(fast, slow, median(ratios) - 1, lo - 1 if ok else None,
                       hi - 1 if ok else None, PAIRED, len(common))
    speedup = fast["images_per_s"] / slow["images_per_s"] - 1
    lows = (fast.get("images_per_s_low"), slow.get("images_per_s_high"))
    highs = (fast.get("images_per_s_high"), slow.get("images_per_s_low"))
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (*lows, *highs)):
        return Verdict(fast, slow, speedup, None, None, INDEPENDENT, 0)
    # the most and the least `fast` could lead by, given both intervals
    return Verdict(fast, slow, speedup, lows[0] / lows[1] - 1, highs[0] / highs[1] - 1,
                   INDEPENDENT, 0)


def _batch_ratio(fast: dict, slow: dict) -> float:
    gf = (fast.get("batch_size") or 1) * (fast.get("workers") or 1)
    gs = (slow.get("batch_size") or 1) * (slow.get("workers") or 1)
    return gf / gs


def sentence(model: str, cfg: str, v: Verdict, name) -> str:
    """The report's words for a verdict (`name` maps a run row to a display name)."""
    if v.low is None:
        return (f"{model} ({cfg}): {name(v.fast)} measured {v.speedup:+.1%} over "
                f"{name(v.slow)}, but this cannot be ranked with confidence: no 95% interval "
                "(fewer than 6 trials or rounds).")
    if v.confident:
        return (f"{model} ({cfg}): {name(v.fast)} is fastest, {v.speedup:.1%} ahead of "
                f"{name(v.slow)} ({v.fast['images_per_s']:.1f} vs "
                f"{v.slow['images_per_s']:.1f} images/s; {v.interval_text()}).")
    return (f"{model} ({cfg}): {name(v.fast)} and {name(v.slow)} are too close to rank "
            f"({v.speedup:+.1%}; {v.interval_text()} includes 0).")
