"""PyTorch input pipeline: a map-style Dataset decoding JPEGs with Pillow, fed through
torch.utils.data.DataLoader (worker processes, pinned memory on CUDA).

This is torchvision's ImageFolder + RandomResizedCrop + RandomHorizontalFlip + Normalize
written out, because torchvision cannot be installed here without pulling a CUDA build;
the crop window comes from frameworks.datasets.crop_box (torchvision's algorithm) and
Pillow does the resize, as torchvision does on PIL images.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

from frameworks.contract import RunSpec
from frameworks.datasets import DatasetError, Listing, decode_augment, scan


class JpegFolder(Dataset):
    def __init__(self, listing: Listing, size: int, seed: int) -> None:
        self.items = listing.items
        self.size = size
        self.seed = seed
        self._rng: random.Random | None = None

    def __len__(self) -> int:
        return len(self.items)

    def _random(self) -> random.Random:
        if self._rng is None:  # one stream per loader worker process, seeded by torch
            info = get_worker_info()
            self._rng = random.Random(info.seed if info else self.seed)
        return self._rng

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int]:
        path, label, index = self.items[i]
        arr = decode_augment(path, self.size, self._random())
        return torch.from_numpy(arr.transpose(2, 0, 1).copy()), label, index


class Feed:
    """Batches from the DataLoader, forever (one reshuffled epoch after another), or one
    ordered pass with `once` (the `dnnbench data check` path)."""

    def __init__(self, spec: RunSpec, rank: int, world: int, device: torch.device,
                 memory_format: torch.memory_format = torch.contiguous_format,
                 once: bool = False) -> None:
        self.listing = scan(spec.data, rank, world, 0 if once else spec.batch_size)
        self.device = device
        self.memory_format = memory_format
        workers = spec.loader_workers
        self.loader = DataLoader(
            JpegFolder(self.listing, spec.image_size, spec.seed + 1000 * rank),
            batch_size=spec.batch_size, shuffle=not once, drop_last=not once,
            num_workers=workers, pin_memory=device.type == "cuda",
            persistent_workers=workers > 0 and not once,
            prefetch_factor=2 if workers else None,
            generator=torch.Generator().manual_seed(spec.seed + rank))
        self._batches: Iterator = iter(self.loader) if once else self._forever()
        self.batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    def _forever(self) -> Iterator:
        while True:
            yield from self.loader

    def next_batch(self) -> None:
        """Wait for the next host batch (t_io); StopIteration ends a `once` pass."""
        try:
            self.batch = next(self._batches)
        except DatasetError as exc:  # re-raised from a loader process with its traceback
            raise DatasetError(str(exc).strip().splitlines()[-1].split(": ", 1)[-1]) from None

    def to_device(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Copy the batch to the device (t_h2d; on CPU the tensors are already there)."""
        images, labels, _ = self.batch
        return (images.to(self.device, non_blocking=True).contiguous(
            memory_format=self.memory_format), labels.to(self.device, non_blocking=True))

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def batch_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        images, labels, index = self.batch
        return images.numpy(), labels.numpy(), index.numpy()

    def settings(self) -> dict:
        return {"loader": "torch.utils.data.DataLoader + Pillow",
                "loader_workers": self.loader.num_workers,
                "pin_memory": self.loader.pin_memory}

    def close(self) -> None:
        self._batches = iter(())  # drops the loader iterator: worker processes exit


def build_feed(spec: RunSpec, rank: int = 0, world: int = 1, once: bool = False) -> Feed:
    """The pipeline alone (loader mode, data check): no model is built."""
    import os

    from frameworks.contract import worker_threads

    torch.set_num_threads(worker_threads(spec))
    local_rank = int(os.environ.get("DNNBENCH_LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local_rank}" if spec.device == "cuda" else "cpu")
    return Feed(spec, rank, world, device, once=once)
