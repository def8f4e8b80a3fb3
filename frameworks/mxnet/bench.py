"""MXNet's side of `bench/overhead.py`: the minimal training loop anyone would write by
hand in MXNet, over the adapter's own built model, and the variants behind the
adapter's defaults (measured side by side)."""

from __future__ import annotations

import time


def hand_written(trainer, steps: int) -> float:
    from mxnet import autograd, nd

    net, tr, loss_fn = trainer.net, trainer.trainer, trainer.loss_fn
    x, y, bs = trainer.images, trainer.labels, trainer.spec.batch_size
    nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(bs)
    nd.waitall()
    return time.perf_counter() - start


#: (fact name, spec changes, trainer keyword arguments)
VARIANTS = [("hybridized", {}, {"hybridize": True}), ("imperative", {}, {"hybridize": False})]


def trainer(spec, **kw):
    """The adapter's trainer, with keyword arguments only a bench variant sets."""
    from frameworks.mxnet.adapter import MXNetTrainer

    return MXNetTrainer(spec, **kw)
