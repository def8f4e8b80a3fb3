"""Does the kernel's packet work grow with the bytes on the wire alone, or with the
shapers' waits too? (`python -m bench.packet_work`; issue #17).

On the emulated cluster a packet's softirq work is charged to whichever process runs
(harness/perfmodel/packetwork.py; README, "Neighbours that move bytes"). For every stored
parameter-server run on quota-limited hosts whose telemetry has the machine's softirq
time, prints the medians by worker count of the softirq cores, the bytes per second
crossing the link and the shapers' waits per second (tbf overlimits, every host, both
ways), then three fits on the runs with <= 2 workers, each judged on the larger runs'
softirq cores (median |error| and median signed error): the bytes alone, every host's
TCP segments sent alone (loopback included), and the bytes with a term per wait; first
with every set pooled, then each set (a folder of databases: one machine, one sweep)
fitted on its own small runs. The pooled fits mix machines and links, so the per-set
ones are the test (2026-12-06: pooled, the waits look like the missing term, 21.1% ->
13.9%; per set they make it worse, 18.3% -> 31.5%). Measures nothing (seconds); the
databases are copied first.

    python -m bench.packet_work [--db A.db --db B.db ...]
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import shipped  # noqa: E402
from harness.perfmodel import packetwork, servercost, workercost  # noqa: E402
from harness.stats import error_medians  # noqa: E402

#: experiments whose runs shared the machine with traffic of their own making (the
#: neighbour benches): their softirq time is mostly their neighbours'
NOT_ALONE = ("neighbour-cpu",)


def points(dbs: list[Path]) -> list[dict]:
    """(workers, bytes per second, waits per second, TCP segments per second, softirq
    cores, the set: the database's folder) of every run that has them (NOT_ALONE's left
    out), read from copies."""
    out = []
    for db in dbs:
        for r in shipped.runs_of(db):
            if r.get("status") != "ok" or not r.get("cpus_per_host") or \
                    r["strategy"] not in ("ps-sync", "ps-async") or not workercost.points(r) \
                    or r.get("experiment") in NOT_ALONE:
                continue
            s, w = packetwork.softirq_cores(r), packetwork.shaper_waits_per_s(r)
            segs = packetwork.segments_per_s(r)
            if s is not None and w is not None and segs is not None:
                out.append({"workers": r["workers"], "bps": workercost.bytes_per_s(r),
                            "waits": w, "segs": segs, "s": s, "set": db.parent.name})
    return out


def errors(pts: list[dict]) -> list[tuple[str, str, list[float]]]:
    """Each fit on the small runs of `pts`: (name, its terms, its relative error on each
    larger run's softirq cores); a fit the small runs cannot make is left out."""
    small = [p for p in pts if p["workers"] <= servercost.FIT_MAX_WORKERS]
    large = [p for p in pts if p["workers"] > servercost.FIT_MAX_WORKERS]
    out: list[tuple[str, str, list[float]]] = []
    if not large:
        return out
    f = packetwork.fit([(p["bps"], p["s"]) for p in small])
    if f is not None:
        out.append(("bytes", f"s0 {f.s0 * 1e3:.1f} milli-cores, {f.sigma * 1e9:.3f} "
                             "core-ns per byte",
                    [(f.s0 + f.sigma * p["bps"]) / p["s"] - 1 for p in large]))
    k = packetwork.fit([(p["segs"], p["s"]) for p in small])
    if k is not None:
        out.append(("segments", f"s0 {k.s0 * 1e3:.1f} milli-cores, {k.sigma * 1e6:.3f} "
                                "core-us per segment",
                    [(k.s0 + k.sigma * p["segs"]) / p["s"] - 1 for p in large]))
    g = packetwork.fit_with_waits([(p["bps"], p["waits"], p["s"]) for p in small])
    if g is not None:
        out.append(("bytes + waits", f"s0 {g.s0 * 1e3:.1f} milli-cores, {g.sigma * 1e9:.3f} "
                                     f"core-ns per byte, {g.tau * 1e6:.2f} core-us per wait",
                    [(g.s0 + g.sigma * p["bps"] + g.tau * p["waits"]) / p["s"] - 1
                     for p in large]))
    return out


def judged(pts: list[dict]) -> list[tuple[str, str, float, float]]:
    """Each fit on the small runs of all `pts` pooled: (name, its terms, median |error|,
    bias) on the larger runs' softirq cores."""
    return [(name, terms, *error_medians(errs)) for name, terms, errs in errors(pts)]


def judged_by_set(pts: list[dict]) -> tuple[dict[str, list[tuple[str, str, float, float]]],
                                            dict[str, tuple[float, float, int]], list[str]]:
    """Each set fitted on its own small runs and judged on its own larger runs (the sets
    ran on different machines and links: pooled, one set's small runs speak for another's
    large ones): per set as `judged`; each fit's median |error|, bias and runs over the
    larger runs of every set that could make all the fits, together; and those sets."""
    per: dict[str, list[tuple[str, str, list[float]]]] = {}
    for name in sorted({p["set"] for p in pts}):
        fits = errors([p for p in pts if p["set"] == name])
        if fits:
            per[name] = fits
    names = {f for fits in per.values() for f, _, _ in fits}
    common = [n for n, fits in per.items() if {f for f, _, _ in fits} == names]
    together: dict[str, list[float]] = {}
    for n in common:
        for f, _, errs in per[n]:
            together.setdefault(f, []).extend(errs)
    return ({n: [(f, terms, *error_medians(errs)) for f, terms, errs in fits]
             for n, fits in per.items()},
            {f: (*error_medians(errs), len(errs)) for f, errs in together.items()}, common)


def main(argv: list[str] | None = None) -> int:
    ap = shipped.parser(__doc__)
    args = ap.parse_args(argv)
    dbs = shipped.databases(ap, args.db, "a parameter-server sweep on emulated hosts")
    pts = points(dbs)
    if not any(p["workers"] > servercost.FIT_MAX_WORKERS for p in pts) or \
            not any(p["workers"] <= servercost.FIT_MAX_WORKERS for p in pts):
        ap.error("no parameter-server runs with the machine's softirq time at both scales "
                 f"(<= {servercost.FIT_MAX_WORKERS} workers and more) in "
                 + ", ".join(map(str, dbs)))
    print(f"{'workers':>7} {'runs':>5} {'softirq cores':>14} {'MB/s across':>12} "
          f"{'waits/s':>8} {'core-ns/B over 1 worker':>24}")
    base = statistics.median(p["s"] for p in pts if p["workers"] == 1) \
        if any(p["workers"] == 1 for p in pts) else None
    for n in sorted({p["workers"] for p in pts}):
        mine = [p for p in pts if p["workers"] == n]
        s = statistics.median(p["s"] for p in mine)
        bps = statistics.median(p["bps"] for p in mine)
        per = (f"{(s - base) / bps * 1e9:.3f}" if base is not None and bps > 0 else "-")
        print(f"{n:>7} {len(mine):>5} {s:>14.4f} {bps / 1e6:>12.0f} "
              f"{statistics.median(p['waits'] for p in mine):>8.0f} {per:>24}")
    print()
    print("fitted on the runs with <= 2 workers, the larger runs' softirq cores:")
    print("  every set pooled:")
    for name, terms, err, bias in judged(pts):
        print(f"    {name:<14} median |error| {err:.1%} (bias {bias:+.1%}): {terms}")
    per, together, common = judged_by_set(pts)
    print("  each set on its own small runs:")
    for name, fits in per.items():
        print(f"    {name}:")
        for f, terms, err, bias in fits:
            print(f"      {f:<14} median |error| {err:.1%} (bias {bias:+.1%}): {terms}")
    print(f"  each set on its own, the larger runs of the {len(common)} that make every fit "
          "together:")
    for f, (err, bias, n) in together.items():
        print(f"    {f:<14} median |error| {err:.1%} (bias {bias:+.1%}) over {n} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
