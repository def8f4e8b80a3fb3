"""``python -m frameworks.verify``: run one framework on the shared weights and batch.

Reads DNNBENCH_VERIFY (JSON: framework, model, image_size, num_classes, lr, momentum,
weights, out), loads the weights into the framework's model (dropout off, so the training
step is deterministic), and writes to `out` (.npz): the inference-mode logits, the loss
of one training step, and every trainable tensor after that SGD step, all in spec names
and spec layouts. The harness compares frameworks from these files.
"""

from __future__ import annotations

import importlib
import json
import os
import sys

import numpy as np

from frameworks import events


def main() -> int:
    job = json.loads(os.environ["DNNBENCH_VERIFY"])
    try:
        adapter = importlib.import_module(f"frameworks.{job['framework']}.verify")
        with np.load(job["weights"]) as data:
            weights = {k: data[k] for k in data.files}
        result = adapter.run(job, weights)
        np.savez(job["out"], logits=result["logits"], loss=np.float64(result["loss"]),
                 **{f"updated/{k}": v for k, v in result["updated"].items()})
        events.done(0, framework=job["framework"])
    except Exception as exc:  # noqa: BLE001 - reported to the harness as one line
        events.report_exception(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
