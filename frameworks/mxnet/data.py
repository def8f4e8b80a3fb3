"""MXNet input pipeline: a Gluon Dataset decoding with MXNet's own image ops (OpenCV
inside `mx.image.imread`), Gluon's transforms (RandomResizedCrop with the same area and
aspect-ratio ranges as the other frameworks, RandomFlipLeftRight, ToTensor, Normalize)
and gluon.data.DataLoader with `loader_workers` worker processes.
"""

from __future__ import annotations

import numpy as np

from frameworks.contract import RunSpec
from frameworks.datasets import MEAN, RATIO, SCALE, STD, DatasetError, scan


def _dataset_class():
    from mxnet import gluon, image

    class JpegItems(gluon.data.Dataset):
        def __init__(self, items):
            self.items = items

        def __len__(self):
            return len(self.items)

        def __getitem__(self, i):
            path, label, index = self.items[i]
            try:
                img = image.imread(path)  # HWC uint8, RGB
            except Exception as exc:  # noqa: BLE001 - name the file whatever OpenCV says
                raise DatasetError(f"cannot decode {path}: {exc}") from None
            return img, np.int64(label), np.int64(index)

    return JpegItems


class Feed:
    def __init__(self, spec: RunSpec, rank: int, world: int, ctx=None,
                 once: bool = False) -> None:
        import mxnet as mx
        from mxnet.gluon.data import DataLoader
        from mxnet.gluon.data.vision import transforms

        self.mx = mx
        self.listing = scan(spec.data, rank, world, 0 if once else spec.batch_size)
        items = self.listing.items
        self.ctx = ctx or mx.cpu()
        self.workers = spec.loader_workers
        augment = transforms.Compose([
            transforms.RandomResizedCrop(spec.image_size, scale=SCALE, ratio=RATIO),
            transforms.RandomFlipLeftRight(),
            transforms.ToTensor(),
            transforms.Normalize(MEAN, STD),
        ])
        np.random.seed(spec.seed + 1000 * rank)  # Gluon's augmenters draw from numpy
        dataset = _dataset_class()(items).transform_first(augment)
        self.loader = DataLoader(dataset, batch_size=spec.batch_size, shuffle=not once,
                                 last_batch="keep" if once else "discard",
                                 num_workers=self.workers)
        self._once = once
        self._it = iter(self.loader) if once else self._forever()
        self.batch = None

    def _forever(self):
        while True:
            yield from self.loader

    def next_batch(self) -> None:
        """Wait for the next host batch (t_io); StopIteration ends a `once` pass."""
        self.batch = next(self._it)

    def to_device(self):
        """Copy the batch to the training context (t_h2d; a no-op on CPU)."""
        images, labels, _ = self.batch
        return (images.as_in_context(self.ctx),
                labels.astype("float32").as_in_context(self.ctx))

    def synchronize(self) -> None:
        self.mx.nd.waitall()

    def batch_numpy(self):
        images, labels, index = self.batch
        return images.asnumpy(), labels.asnumpy(), index.asnumpy()

    def settings(self) -> dict:
        return {"loader": "gluon.data.DataLoader + mx.image (OpenCV)",
                "loader_workers": self.workers}

    def close(self) -> None:
        self._it = iter(())


def build_feed(spec: RunSpec, rank: int = 0, world: int = 1, once: bool = False) -> Feed:
    """The pipeline alone (loader mode, data check): no model is built."""
    import os

    import mxnet as mx

    if spec.device == "cuda":
        ctx = mx.gpu(int(os.environ.get("DNNBENCH_LOCAL_RANK", "0")))
    else:
        ctx = mx.cpu()
    return Feed(spec, rank, world, ctx, once=once)
