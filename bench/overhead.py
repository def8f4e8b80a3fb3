"""Runs inside one framework's environment: ``python -m bench.overhead FRAMEWORK ...``.

1. Does the harness's timing loop cost throughput? Alternates, in one process over the
   same built model, the worker's throughput loop (frameworks.timing) and the minimal
   training loop anyone would write by hand in that framework; reports images/s ratios.
2. Breakdown mode's cost: its iteration time over throughput mode's.
3. The facts behind each adapter's defaults, measured side by side (see VARIANTS).
Alternation cancels slow drifts of a shared, noisy machine. Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys

from frameworks.contract import RunSpec
from frameworks.timing import breakdown_trial, throughput_trial, warm_up


def _bench(framework: str):
    """The framework's own bench side (frameworks/<fw>/bench.py): `hand_written(trainer,
    steps)`, `VARIANTS` and `trainer(spec, **kw)`."""
    import importlib

    return importlib.import_module(f"frameworks.{framework}.bench")


def interleaved(runners: dict, rounds: int) -> dict[str, list[float]]:
    """Each runner's result per block (here seconds), blocks interleaved round-robin with
    the order reversed every other round (ABBA), so drifts on a shared machine hit all
    alike. Imports no framework: harness-side benchmarks use it too."""
    names = list(runners)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        for n in (names if i % 2 == 0 else names[::-1]):
            times[n].append(runners[n]())
    return times


def main() -> None:
    framework, model = sys.argv[1], sys.argv[2]
    size, batch, steps, rounds = (int(v) for v in sys.argv[3:7])
    spec = RunSpec(framework, model, batch_size=batch, image_size=size)
    side = _bench(framework)
    trainer = side.trainer(spec)
    warm_up(trainer, 3)
    hand = side.hand_written
    hand(trainer, 1)
    t = interleaved({"hand": lambda: hand(trainer, steps),
                      "ours": lambda: throughput_trial(trainer, steps).wall,
                      "breakdown": lambda: breakdown_trial(trainer, steps).wall}, rounds)
    ratios = [h / o for h, o in zip(t["hand"], t["ours"])]  # images/s ours / hand-written
    slowdowns = [b / o for b, o in zip(t["breakdown"], t["ours"])]
    runners, facts = {}, {}
    for name, change, kw in side.VARIANTS:
        s = RunSpec(framework, model, **{"batch_size": batch, "image_size": size, **change})
        try:
            tr = side.trainer(s, **kw)
            warm_up(tr, 2)
            runners[name] = (lambda tr=tr: throughput_trial(tr, steps).wall)
            facts[name] = s.batch_size * steps
        except Exception as exc:  # noqa: BLE001 - an unsupported variant is a fact too
            facts[name] = f"not runnable: {str(exc).splitlines()[0][:120]}"
    if runners:
        vt = interleaved(runners, max(4, rounds // 2))
        for name, walls in vt.items():
            facts[name] = round(facts[name] / statistics.median(walls), 2)
    q = statistics.quantiles(ratios, n=4)
    print(json.dumps({"framework": framework, "model": model, "image_size": size,
                      "batch": batch, "steps": steps, "rounds": rounds,
                      "throughput_ratio_median": statistics.median(ratios),
                      "throughput_ratio_iqr": [q[0], q[2]], "throughput_ratios": ratios,
                      "breakdown_slowdown_median": statistics.median(slowdowns),
                      "variants_images_per_s": facts, "target": ">= 0.98"}))


if __name__ == "__main__":
    main()
