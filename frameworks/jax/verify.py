"""JAX side of `dnnbench verify`: kernels OIHW <-> HWIO, dense weights transposed, BN
gamma/beta/running statistics as scale/bias/mean/var, images NCHW -> NHWC."""

from __future__ import annotations

import numpy as np

import models
from frameworks.jax.build import SpecNet, attr_name
from models.cost import cost
from models.weights import INPUT_KEY, LABELS_KEY, trainable_keys

#: spec parameter name -> the Flax variable holding it
NAMES = {"weight": "kernel", "bias": "bias", "gamma": "scale", "beta": "bias",
         "running_mean": "mean", "running_var": "var"}


def to_flax(name: str, value: np.ndarray) -> np.ndarray:
    if name == "weight" and value.ndim == 4:
        return value.transpose(2, 3, 1, 0)  # OIHW -> HWIO
    if name == "weight" and value.ndim == 2:
        return value.T  # (out, in) -> (in, out)
    return value


def to_spec(name: str, value: np.ndarray) -> np.ndarray:
    if name == "weight" and value.ndim == 4:
        return np.ascontiguousarray(value.transpose(3, 2, 0, 1))
    if name == "weight" and value.ndim == 2:
        return np.ascontiguousarray(value.T)
    return value


def run(job: dict, weights: dict[str, np.ndarray]) -> dict:
    import os

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])  # one thread, as the others
    import jax

    jax.config.update("jax_platforms", "cpu")
    if job.get("dtype") == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import optax
    from flax import nnx

    dtype = jnp.float64 if job.get("dtype") == "float64" else jnp.float32
    net = models.build(job["model"], job["num_classes"])
    # shapes only: every variable is then set from the shared weights, so a random
    # initialisation would be thrown away (eagerly, it compiles each initialiser per shape:
    # ~30 s for ResNet-50 here)
    model = nnx.eval_shape(lambda: SpecNet(
        net, cost(job["model"], job["image_size"], job["num_classes"]), nnx.Rngs(0),
        dropout=False))
    for key, value in weights.items():
        if key.startswith("__"):
            continue
        layer, name = key.rsplit(".", 1)
        var = getattr(getattr(model, attr_name(layer)), NAMES[name])
        var.value = jnp.asarray(to_flax(name, value), dtype=dtype)
    unset = [jax.tree_util.keystr(path) for path, leaf in
             jax.tree_util.tree_leaves_with_path(nnx.state(model))
             if isinstance(leaf, jax.ShapeDtypeStruct)]
    if unset:  # a variable the shared weights do not name would stay a shape
        raise ValueError(f"{job['model']}: the shared weights set no value for {unset[:5]}")
    x = jnp.asarray(weights[INPUT_KEY].transpose(0, 2, 3, 1), dtype=dtype)
    y = jnp.asarray(weights[LABELS_KEY])
    # jitted: op by op, JAX compiles every primitive on its own (minutes per network)
    model.eval()
    g_eval, params, rest = nnx.split(model, nnx.Param, ...)
    logits = np.asarray(jax.jit(lambda p, r: nnx.merge(g_eval, p, r, copy=True)(x))(
        params, rest))
    model.train()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss_fn(params):
        m = nnx.merge(graphdef, params, rest, copy=True)
        return optax.softmax_cross_entropy_with_integer_labels(m(x), y).mean()

    loss, grads = jax.jit(jax.value_and_grad(loss_fn))(params)
    tx = optax.sgd(job["lr"], momentum=job["momentum"])
    updates, _ = tx.update(grads, tx.init(params), params)
    model = nnx.merge(graphdef, optax.apply_updates(params, updates), rest)
    updated = {}
    for key in trainable_keys(job["model"], job["image_size"], job["num_classes"]):
        layer, name = key.rsplit(".", 1)
        value = np.asarray(getattr(getattr(model, attr_name(layer)), NAMES[name]).value)
        updated[key] = to_spec(name, value)
    return {"logits": logits, "loss": float(loss), "updated": updated}
