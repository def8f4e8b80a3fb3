"""MXNet side of `dnnbench verify`: spec layouts are MXNet's (NCHW, OIHW, dense (out, in)),
BN parameters are gamma/beta/running_mean/running_var."""

from __future__ import annotations

import os

import numpy as np

import models
from models.cost import cost
from models.weights import INPUT_KEY, LABELS_KEY, trainable_keys


def _param(block, name: str):
    return getattr(block, name)


def run(job: dict, weights: dict[str, np.ndarray]) -> dict:
    from frameworks.mxnet.adapter import _mxnet

    # Every operator in this thread, one after another: the threaded engine raced here
    # (below: a segfault under static allocation; and once in CI, 2026-12-07, HEP-CNN's
    # updated weights failed to copy out, "could not create a primitive descriptor for a
    # reorder primitive", in none of 100 reruns). The check compares arithmetic, which
    # the schedule does not change; the benchmark keeps the threaded engine. Read once,
    # when MXNet loads: this process loads it here.
    os.environ.setdefault("MXNET_ENGINE_TYPE", "NaiveEngine")
    mx = _mxnet()
    from mxnet import autograd, gluon

    from frameworks.mxnet.build import SpecNet

    net = models.build(job["model"], job["num_classes"])
    model = SpecNet(net, cost(job["model"], job["image_size"], job["num_classes"]),
                    dropout=False, prefix=f"{job['model']}_")
    model.initialize(mx.init.Zero(), ctx=mx.cpu())
    for key, value in weights.items():
        if key.startswith("__"):
            continue
        layer, name = key.rsplit(".", 1)
        _param(model.owners[layer], name).set_data(mx.nd.array(value))
    # Not static_alloc/static_shape as the benchmark does: one process that runs the
    # cached graph for inference and then under autograd.record with static allocation
    # segfaulted in about 1 of 17 runs here (MXNet 1.9.1; hepcnn, 2/25 and 1/40 runs), never
    # in 80 runs without it (nor in 80 with it under MXNET_ENGINE_TYPE=NaiveEngine). Memory
    # planning does not change the arithmetic compared.
    model.hybridize()
    x = mx.nd.array(weights[INPUT_KEY])
    y = mx.nd.array(weights[LABELS_KEY])
    logits = model(x).asnumpy()
    trainer = gluon.Trainer(model.collect_params(), "sgd",
                            {"learning_rate": job["lr"], "momentum": job["momentum"]},
                            kvstore=None)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(model(x), y)
    loss.backward()
    trainer.step(x.shape[0])
    updated = {}
    for key in trainable_keys(job["model"], job["image_size"], job["num_classes"]):
        layer, name = key.rsplit(".", 1)
        updated[key] = _param(model.owners[layer], name).data().asnumpy()
    return {"logits": logits, "loss": float(loss.mean().asscalar()), "updated": updated}
