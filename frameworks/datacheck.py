"""``python -m frameworks.datacheck``: one ordered pass over a worker's shard through a
framework's own loader, reporting what it produced (labels, sample indices, shapes,
pixel statistics) as one DATA event.

It is how `dnnbench data check` proves a dataset decodes in every framework with the same
label counts, and that shards are disjoint, using exactly the pipeline training uses.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter

from frameworks import events
from frameworks.contract import RunSpec
from frameworks.datasets import DatasetError
from frameworks.worker import rank_info


def check(spec: RunSpec, rank: int, world: int) -> dict:
    data = importlib.import_module(f"frameworks.{spec.framework}.data")
    feed = data.build_feed(spec, rank, world, once=True)
    labels: Counter[int] = Counter()
    indices: list[int] = []
    shape = None
    total = 0.0
    total_sq = 0.0
    count = 0
    try:
        while True:
            try:
                feed.next_batch()
            except StopIteration:
                break
            images, batch_labels, batch_index = feed.batch_numpy()
            shape = list(images.shape[1:])
            labels.update(int(v) for v in batch_labels)
            indices.extend(int(v) for v in batch_index)
            total += float(images.sum(dtype="float64"))
            total_sq += float((images.astype("float64") ** 2).sum())
            count += images.size
    finally:
        feed.close()
    mean = total / count if count else float("nan")
    std = (total_sq / count - mean * mean) ** 0.5 if count else float("nan")
    return {**feed.listing.summary(), "images": len(indices), "sample_shape": shape,
            "label_counts": {str(k): v for k, v in sorted(labels.items())},
            "indices": sorted(indices), "pixel_mean": mean, "pixel_std": std,
            **feed.settings()}


def main() -> int:
    text = os.environ.get("DNNBENCH_SPEC")
    if not text:
        print("frameworks.datacheck: DNNBENCH_SPEC is not set; run `dnnbench data check`",
              file=sys.stderr)
        return 2
    rank, _, world = rank_info()
    try:
        events.data(rank, **check(RunSpec.from_json(text), rank, world))
    except DatasetError as exc:
        events.error(str(exc), "DatasetError", rank=rank)
        return 1
    except Exception as exc:  # noqa: BLE001 - a framework's decode failure becomes a record
        events.report_exception(exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
