"""JAX input pipeline: Grain (JAX's data loader) over the JPEG folder, decoding with Pillow.

The same rules as every other framework's loader: frameworks.datasets lists and shards
the files, RandomResizedCrop's window comes from frameworks.datasets.crop_box, then a
horizontal flip with probability 1/2 and ImageNet normalisation. Grain's MapDataset
shuffles (a new order each epoch) and batches; its read threads decode in parallel
(`loader_workers` threads; Pillow releases the GIL while it decodes and resizes). Batches
are NHWC float32, JAX's native layout.
"""

from __future__ import annotations

import random

import numpy as np

from frameworks.contract import RunSpec
from frameworks.datasets import Listing, decode_augment, scan


class Decode:
    """One (path, label, index) -> (image HWC float32, label, index), drawing the crop and
    flip from the generator Grain hands each element (reproducible per seed and epoch)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __call__(self, item, gen: np.random.Generator):
        path, label, index = item
        rng = random.Random(int(gen.integers(2**63)))
        return decode_augment(path, self.size, rng), np.int32(label), np.int64(index)


def pipeline(listing: Listing, spec: RunSpec, rank: int, once: bool):
    """The Grain dataset: shuffled and repeated for training, one ordered pass with `once`
    (the `dnnbench data check` path, the last batch kept)."""
    import grain

    ds = grain.MapDataset.source(listing.items)
    if not once:
        ds = ds.shuffle(seed=spec.seed + rank).repeat(None)
    ds = ds.random_map(Decode(spec.image_size), seed=spec.seed + 1000 * rank)
    ds = ds.batch(spec.batch_size, drop_remainder=not once)
    threads = spec.loader_workers
    return ds.to_iter_dataset(grain.ReadOptions(num_threads=threads,
                                                prefetch_buffer_size=2 * max(1, threads)))


class Feed:
    """Host batches from Grain; `to_device` places them (through the trainer: as this
    process's shard of the global batch)."""

    def __init__(self, spec: RunSpec, rank: int, world: int, trainer=None,
                 once: bool = False) -> None:
        self.listing = scan(spec.data, rank, world, 0 if once else spec.batch_size)
        self.threads = spec.loader_workers
        self.trainer = trainer
        self._it = iter(pipeline(self.listing, spec, rank, once))
        self.batch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._placed = None

    def next_batch(self) -> None:
        """Wait for the next host batch (t_io); StopIteration ends a `once` pass."""
        self.batch = next(self._it)

    def to_device(self):
        """Copy the batch to the device (t_h2d)."""
        images, labels, _ = self.batch
        if self.trainer is not None:
            self._placed = self.trainer.put_batch(images, labels)
        else:
            import jax

            self._placed = jax.device_put((images, labels), jax.local_devices()[0])
        return self._placed

    def synchronize(self) -> None:
        if self._placed is not None:
            import jax

            jax.block_until_ready(self._placed)

    def batch_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.batch

    def settings(self) -> dict:
        return {"loader": "grain.MapDataset + Pillow", "loader_workers": self.threads,
                "loader_kind": "threads"}

    def close(self) -> None:
        self._it = iter(())


def build_feed(spec: RunSpec, rank: int = 0, world: int = 1, once: bool = False) -> Feed:
    """The pipeline alone (loader mode, data check): no model is built."""
    from frameworks.jax.adapter import _configure

    _configure(spec, rank, world)
    return Feed(spec, rank, world, once=once)
