"""Does the kernel's packet work grow with the bytes on the wire alone, or with the
shapers' waits too? (`python -m bench.packet_work`; issue #17).

On the emulated cluster a packet's softirq work is charged to whichever process runs
(harness/perfmodel/packetwork.py; harness/perfmodel/README.md, "Neighbours that move bytes"). For
every stored parameter-server run on quota-limited hosts whose telemetry has the machine's softirq
time, prints the medians by worker count of the softirq cores, the bytes per second
crossing the link and the shapers' waits per second (tbf overlimits, every host, both
ways), then three fits on the runs with <= 2 workers, each judged on the larger runs'
softirq cores (median |error| and median signed error): the bytes alone, every host's
TCP segments sent alone (loopback included), and the bytes with a term per wait; first
with every set pooled, then each set (a folder of databases: one machine, one sweep)
fitted on its own small runs. Last, on the runs that stored the machine's softirqs raised
by kind (telemetry's machine_softirqs_json): which kinds grow with the workers, and fits
on the network's softirqs (NET_RX, NET_TX) in place of the bytes, and with every other
kind beside them. The pooled fits mix machines and links, so the per-set
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
from harness.stats import error_medians, least_squares  # noqa: E402

#: experiments whose runs shared the machine with traffic of their own making (the
#: neighbour benches): their softirq time is mostly their neighbours'
NOT_ALONE = ("neighbour-cpu",)


def points(dbs: list[Path]) -> list[dict]:
    """(workers, bytes per second, waits per second, TCP segments per second, softirq
    cores, the set: the database's folder, softirqs raised per second by kind or None) of
    every run that has them (NOT_ALONE's left
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
                            "waits": w, "segs": segs, "s": s, "set": db.parent.name,
                            "kinds": packetwork.softirqs_per_s(r)})
    return out


def _one_term(name: str, small: list[dict], large: list[dict], x, unit: str,
              scale: float) -> tuple[str, str, list[float]] | None:
    """s = s0 + sigma x `x`(run), fitted on `small` (packetwork.fit), with its relative
    error on each of `large`'s softirq cores; None where `small` cannot make it."""
    f = packetwork.fit([(x(p), p["s"]) for p in small])
    if f is None:
        return None
    return (name, f"s0 {f.s0 * 1e3:.1f} milli-cores, {f.sigma * scale:.3f} {unit}",
            [(f.s0 + f.sigma * x(p)) / p["s"] - 1 for p in large])


def _split(pts: list[dict]) -> tuple[list[dict], list[dict]]:
    return ([p for p in pts if p["workers"] <= servercost.FIT_MAX_WORKERS],
            [p for p in pts if p["workers"] > servercost.FIT_MAX_WORKERS])


def errors(pts: list[dict]) -> list[tuple[str, str, list[float]]]:
    """Each fit on the small runs of `pts`: (name, its terms, its relative error on each
    larger run's softirq cores); a fit the small runs cannot make is left out."""
    small, large = _split(pts)
    if not large:
        return []
    out = [f for f in (
        _one_term("bytes", small, large, lambda p: p["bps"], "core-ns per byte", 1e9),
        _one_term("segments", small, large, lambda p: p["segs"], "core-us per segment",
                  1e6)) if f is not None]
    g = packetwork.fit_with_waits([(p["bps"], p["waits"], p["s"]) for p in small])
    if g is not None:
        out.append(("bytes + waits", f"s0 {g.s0 * 1e3:.1f} milli-cores, {g.sigma * 1e9:.3f} "
                                     f"core-ns per byte, {g.tau * 1e6:.2f} core-us per wait",
                    [(g.s0 + g.sigma * p["bps"] + g.tau * p["waits"]) / p["s"] - 1
                     for p in large]))
    return out


def net_softirqs(p: dict) -> float:
    """The network's softirqs raised per second (NET_RX and NET_TX) of point `p`."""
    return sum(p["kinds"].get(k, 0.0) for k in packetwork.NET_KINDS)


def other_softirqs(p: dict) -> float:
    """Every other kind's per second (timers, scheduler, RCU, ...: they grow with the
    busy cores and the wake-ups, not with the bytes)."""
    return sum(v for k, v in p["kinds"].items() if k not in packetwork.NET_KINDS)


def kind_errors(pts: list[dict]) -> list[tuple[str, str, list[float]]]:
    """As `errors`, on the runs of `pts` that stored the softirqs raised by kind: the
    bytes alone (the same runs, to compare), the network's softirqs alone, and the
    network's with every other kind's as a second term."""
    small, large = _split([p for p in pts if p.get("kinds")])
    if not large:
        return []
    out = [f for f in (
        _one_term("bytes", small, large, lambda p: p["bps"], "core-ns per byte", 1e9),
        _one_term("net softirqs", small, large, net_softirqs, "core-us per softirq",
                  1e6)) if f is not None]
    c = least_squares([[1.0, net_softirqs(p), other_softirqs(p)] for p in small],
                      [p["s"] for p in small])
    if c is not None:
        out.append(("net + others", f"s0 {c[0] * 1e3:.1f} milli-cores, {c[1] * 1e6:.3f} "
                                    f"core-us per net softirq, {c[2] * 1e6:.3f} per other",
                    [(c[0] + c[1] * net_softirqs(p) + c[2] * other_softirqs(p)) / p["s"] - 1
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
    kinds = [p for p in pts if p.get("kinds")]
    if not kinds:
        print()
        print_kinds([])
    for name in sorted({p["set"] for p in kinds}):  # each set on its own, as judged_by_set
        print()
        print_kinds([p for p in kinds if p["set"] == name])
    return 0


#: the kinds printed by worker count (the rest are rare here: HI, BLOCK, TASKLET, ...)
SHOWN_KINDS = ("NET_RX", "NET_TX", "TIMER", "HRTIMER", "SCHED", "RCU")


def print_kinds(pts: list[dict]) -> None:
    """Which softirqs grow with the workers, medians by worker count of the runs that
    stored them, then `kind_errors` on those runs. `main` gives it one set at a time: the
    sets ran on different machines and workloads, so pooled, one set's small runs would
    speak for another's large ones."""
    if not pts:
        print("softirqs by kind: no run stored them (machine_softirqs_json, runs from "
              "2026-12-06 on)")
        return
    print(f"softirqs raised per second by kind, {len(pts)} runs that stored them "
          f"({', '.join(sorted({p['set'] for p in pts}))}):")
    cols = {"softirq cores": lambda p: p["s"], "MB/s across": lambda p: p["bps"] / 1e6,
            "waits/s": lambda p: p["waits"],
            **{k: (lambda p, k=k: p["kinds"].get(k, 0.0)) for k in SHOWN_KINDS}}
    print(f"{'workers':>7} {'runs':>5} " + " ".join(f"{c:>{max(len(c), 8)}}" for c in cols)
          + f" {'core-us per net':>16}")
    med: dict[int, dict[str, float]] = {}
    for n in sorted({p["workers"] for p in pts}):
        mine = [p for p in pts if p["workers"] == n]
        med[n] = {c: statistics.median(map(f, mine)) for c, f in cols.items()}
        net = statistics.median(net_softirqs(p) for p in mine)
        print(f"{n:>7} {len(mine):>5} " + " ".join(
            f"{v:>{max(len(c), 8)}.{4 if c == 'softirq cores' else 0}f}"
            for c, v in med[n].items())
            + f" {med[n]['softirq cores'] / net * 1e6 if net else float('nan'):>16.2f}")
    top = max(med)
    if 2 in med and top > 2:
        print(f"{f'x{top}/x2':>13} " + " ".join(
            f"{med[top][c] / med[2][c] if med[2][c] else float('nan'):>{max(len(c), 8)}.2f}"
            for c in cols))
    print("  fitted on those runs with <= 2 workers, their larger runs' softirq cores:")
    for name, terms, errs in kind_errors(pts):
        err, bias = error_medians(errs)
        print(f"    {name:<14} median |error| {err:.1%} (bias {bias:+.1%}): {terms}")


if __name__ == "__main__":
    sys.exit(main())
