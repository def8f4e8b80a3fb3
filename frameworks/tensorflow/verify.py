"""TensorFlow side of `dnnbench verify`: kernels OIHW <-> HWIO, dense weights transposed,
BN gamma/beta/moving statistics, images NCHW -> NHWC."""

from __future__ import annotations

import numpy as np

import models
from frameworks.tensorflow.build import build_model
from models.cost import cost
from models.weights import INPUT_KEY, LABELS_KEY, trainable_keys

BN = {"gamma": "gamma", "beta": "beta", "running_mean": "moving_mean",
      "running_var": "moving_variance"}


def _to_tf(key_name: str, ndim: int, value: np.ndarray) -> np.ndarray:
    if key_name == "weight" and ndim == 4:
        return value.transpose(2, 3, 1, 0)  # OIHW -> HWIO
    if key_name == "weight" and ndim == 2:
        return value.T  # (out, in) -> (in, out)
    return value


def _variable(layer, name: str):
    if name in BN:
        return getattr(layer, BN[name])
    return layer.kernel if name == "weight" else layer.bias


def run(job: dict, weights: dict[str, np.ndarray]) -> dict:
    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    net = models.build(job["model"], job["num_classes"])
    model, owners = build_model(net, cost(job["model"], job["image_size"], job["num_classes"]),
                                channels_last=True, dropout=False)
    for key, value in weights.items():
        if key.startswith("__"):
            continue
        layer, name = key.rsplit(".", 1)
        _variable(owners[layer], name).assign(_to_tf(name, value.ndim, value))
    x = tf.constant(weights[INPUT_KEY].transpose(0, 2, 3, 1))
    y = tf.constant(weights[LABELS_KEY])
    logits = model(x, training=False).numpy()
    opt = keras.optimizers.SGD(learning_rate=job["lr"], momentum=job["momentum"])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    updated = {}
    for key in trainable_keys(job["model"], job["image_size"], job["num_classes"]):
        layer, name = key.rsplit(".", 1)
        v = _variable(owners[layer], name).numpy()
        if name == "weight" and v.ndim == 4:
            v = v.transpose(3, 2, 0, 1)
        elif name == "weight" and v.ndim == 2:
            v = v.T
        updated[key] = np.ascontiguousarray(v)
    return {"logits": logits, "loss": float(loss), "updated": updated}
