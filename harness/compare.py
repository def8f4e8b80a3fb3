"""`dnnbench compare A.db B.db`: the same configurations in two results databases, side by
side: two machines, two framework versions, before and after a change.

Configurations are matched by their identity (config_hash: every measured field of the
RunSpec, not the label or limits); where a database holds several ok runs of one
configuration (several experiments), the newest counts. A difference is called a change
only when the two runs' 95% intervals of images/s do not overlap; otherwise it is within
noise. When both were measured on one host whose history knows how far it moves between
sweeps (harness/repeat.py, `dnnbench history`), those are the repeat intervals, with the
drift estimated without either database's sweeps: a shared machine drifts between sweeps
far more than within one. Otherwise (two machines, or a host with no history) they are the
runs' own within-sweep intervals, and a change on a noisy machine deserves a repeat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness import repeat
from harness.store import Store


class CompareError(ValueError):
    """A database cannot be compared; the message names it."""


@dataclass(frozen=True)
class Pair:
    config_hash: str
    description: str
    a: dict | None  # the run row in A (None: not measured there)
    b: dict | None
    drift: repeat.Drift | None = None  # both on one host with a known between-sweep drift

    @property
    def ratio(self) -> float | None:
        """B's images/s over A's."""
        if not self.a or not self.b or not self.a["images_per_s"]:
            return None
        return self.b["images_per_s"] / self.a["images_per_s"]

    @property
    def verdict(self) -> str:
        if self.a is None:
            return "only in B"
        if self.b is None:
            return "only in A"
        if None in (self.a.get("images_per_s_low"), self.b.get("images_per_s_low")):
            return "no interval (too few samples)"
        lo_a, hi_a = self.interval(self.a)
        lo_b, hi_b = self.interval(self.b)
        if hi_b < lo_a:
            return "slower"
        if lo_b > hi_a:
            return "faster"
        return "within noise"

    def interval(self, row: dict) -> tuple[float, float]:
        """The repeat interval where the host's drift is known, else the run's own."""
        rep = repeat.interval(row, self.drift)
        if rep:
            return rep
        v = row["images_per_s"]
        return (row.get("images_per_s_low") or v, row.get("images_per_s_high") or v)


def _newest_ok(path: str, experiment: str | None) -> dict[str, dict]:
    if not Path(path).is_file():
        raise CompareError(f"results database {path} does not exist")
    where, params = "WHERE status = 'ok' AND images_per_s IS NOT NULL", []
    if experiment:
        where += " AND experiment = ?"
        params.append(experiment)
    with Store(path, readonly=True) as store:
        rows = store.runs(where, params)  # oldest first: the newest wins below
    return {r["config_hash"]: r for r in rows}


def compare(a_path: str, b_path: str, experiment: str | None = None) -> list[Pair]:
    from frameworks.contract import RunSpec
    from harness.sweep import describe

    a, b = _newest_ok(a_path, experiment), _newest_ok(b_path, experiment)
    drifts = repeat.drifts_for(list(a.values()) + list(b.values()))
    pairs = []
    for key in sorted(set(a) | set(b)):
        row = a.get(key) or b[key]
        try:
            text = describe(RunSpec.from_json(row["spec_json"]))
        except (TypeError, ValueError, KeyError):  # a row written by another version
            spec = json.loads(row["spec_json"] or "{}")
            text = f"{spec.get('framework', '?')} {spec.get('model', '?')} ({key})"
        ra, rb = a.get(key), b.get(key)
        same_host = ra and rb and repeat.host_key(ra) == repeat.host_key(rb)
        pairs.append(Pair(key, text, ra, rb,
                          drifts.get(repeat.host_key(ra)) if same_host else None))
    return sorted(pairs, key=lambda p: p.description)


def machine(pairs: list[Pair], side: str) -> str:
    """What the noise meter saw on one side (median over its matched runs): two results
    far apart on a machine whose own probes moved too are a machine change, not a code
    change."""
    from harness.stats import median

    rows = [getattr(p, side) for p in pairs if getattr(p, side)]
    g = [r["machine_gflops"] for r in rows if r.get("machine_gflops")]
    c = [r["machine_copy_gbs"] for r in rows if r.get("machine_copy_gbs")]
    n = [r["noise_ratio"] for r in rows if r.get("noise_ratio")]
    if not g:
        return "no noise-meter probes stored"
    return (f"noise meter: GEMM peak {median(g):.0f} GFLOP/s, copy {median(c):.1f} GB/s, "
            f"median probe at {median(n):.0%} of its sweep's usual best")


def table(pairs: list[Pair], a_name: str, b_name: str) -> str:
    def cell(p: Pair, row: dict | None) -> str:
        if row is None:
            return "-"
        lo, hi = p.interval(row)
        return f"{row['images_per_s']:.1f} [{lo:.1f}, {hi:.1f}]"

    width = max([len(p.description) for p in pairs] + [13])
    lines = [f"A = {a_name} ({machine(pairs, 'a')})", f"B = {b_name} ({machine(pairs, 'b')})",
             f"{'configuration':<{width}}  {'A images/s [95%]':>24}  {'B images/s [95%]':>24}  "
             f"{'B vs A':>7}  verdict"]
    known = {p.drift for p in pairs if p.drift}
    lines.insert(2, "intervals: repeat, with the " + "; ".join(d.text() for d in known)
                 + " (neither database's sweeps included)" if known else
                 "intervals: each run's own, over its sweep (no host history of other sweeps "
                 "of these configurations: `dnnbench history`)")
    for p in pairs:
        change = f"{p.ratio - 1:+.1%}" if p.ratio is not None else "-"
        lines.append(f"{p.description:<{width}}  {cell(p, p.a):>24}  {cell(p, p.b):>24}  "
                     f"{change:>7}  {p.verdict}")
    return "\n".join(lines)
