"""Runs inside the torch environment: does the harness's timing loop cost throughput?

Alternates, in one process over the same nn.Module and optimizer, (a) the worker's
throughput-mode loop (frameworks.timing) and (b) the minimal loop anyone would write by
hand; reports the per-round ratio (a)/(b), plus breakdown-mode slowdown vs throughput
mode. Alternation cancels slow drifts of a shared, noisy machine.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from frameworks.contract import RunSpec
from frameworks.timing import breakdown_trial, throughput_trial, warm_up
from frameworks.torch.adapter import build_trainer


def hand_written(trainer, steps: int) -> float:
    model, opt, crit = trainer.model, trainer.optimizer, trainer.criterion
    x, y = trainer.images, trainer.labels
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def main() -> None:
    model, size, batch, steps, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    spec = RunSpec("torch", model, batch_size=batch, image_size=size)
    trainer = build_trainer(spec)
    warm_up(trainer, 3)
    ratios, slowdowns = [], []
    for _ in range(rounds):
        ref = hand_written(trainer, steps)
        ours = throughput_trial(trainer, steps).wall
        bd = breakdown_trial(trainer, steps).wall
        ratios.append(ref / ours)  # images/s ours / images/s reference
        slowdowns.append(bd / ours)
    print(json.dumps({"bench": "torch_loop_overhead", "model": model, "image_size": size,
                      "batch": batch, "steps": steps, "rounds": rounds,
                      "throughput_ratio_median": statistics.median(ratios),
                      "throughput_ratios": ratios,
                      "breakdown_slowdown_median": statistics.median(slowdowns),
                      "target": ">= 0.98"}))


if __name__ == "__main__":
    main()
