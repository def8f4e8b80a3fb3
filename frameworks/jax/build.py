"""Translate a models/ Network spec into a Flax NNX module, layer for layer.

Exactness over convenience, as in the Keras translation: explicit symmetric padding
(PyTorch's), max pools padded with -inf (PyTorch semantics, and ceil mode), adaptive
average pooling with PyTorch's bin edges, and the NHWC tensor put back in NCHW order
before Flatten so that dense weights mean the same thing in every framework. Dropout
takes an explicit key, so a jitted step is a pure function of (weights, statistics, key,
batch).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from models.cost import NetworkCost
from models.ir import (
    INPUT,
    AdaptiveAvgPool,
    Add,
    BatchNorm,
    Concat,
    Conv,
    Dense,
    Dropout,
    Flatten,
    MaxPool,
    Network,
    ReLU,
    safe_name,
)

attr_name = safe_name


def _bins(n: int, out: int) -> list[tuple[int, int]]:
    return [(math.floor(i * n / out), math.ceil((i + 1) * n / out)) for i in range(out)]


def adaptive_avg_pool(x: jax.Array, out: int) -> jax.Array:
    """PyTorch's adaptive average pooling on NHWC: bin i spans [floor(iH/o), ceil((i+1)H/o))."""
    h, w = x.shape[1], x.shape[2]
    if (h, w) == (out, out):
        return x
    if out == 1:
        return x.mean(axis=(1, 2), keepdims=True)
    rows = [jnp.concatenate([x[:, h0:h1, w0:w1, :].mean(axis=(1, 2), keepdims=True)
                             for w0, w1 in _bins(w, out)], axis=2)
            for h0, h1 in _bins(h, out)]
    return jnp.concatenate(rows, axis=1)


def max_pool(x: jax.Array, kernel: int, stride: int, pads: tuple[int, int]) -> jax.Array:
    lo, hi = pads
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, kernel, kernel, 1),
                                 (1, stride, stride, 1),
                                 ((0, 0), (lo, hi), (lo, hi), (0, 0)))


def dropout(x: jax.Array, p: float, key: jax.Array | None) -> jax.Array:
    """Inverted dropout, as torch.nn.Dropout (no-op in inference or with p = 0)."""
    if key is None or p == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - p, x.shape)
    return jnp.where(keep, x / (1.0 - p), jnp.zeros_like(x))


class SpecNet(nnx.Module):
    """Runs the spec's layers in order on NHWC input. `dtype` is the compute type of
    convolutions and dense layers (bfloat16 under precision 'amp'); weights, batch
    statistics and the loss stay float32."""

    def __init__(self, net: Network, cost: NetworkCost, rngs: nnx.Rngs,
                 dtype=jnp.float32, dropout: bool = True) -> None:
        shapes = {INPUT: (net.in_channels, cost.image_size, cost.image_size)}
        shapes.update({lc.name: lc.out_shape for lc in cost.layers})
        plan = []
        for layer in net.layers:
            op, name = layer.op, attr_name(layer.name)
            in_shape = shapes[layer.inputs[0]]
            if isinstance(op, Conv):
                p = op.padding
                setattr(self, name, nnx.Conv(
                    in_shape[0], op.out_channels, (op.kernel, op.kernel),
                    strides=(op.stride, op.stride), padding=((p, p), (p, p)),
                    feature_group_count=op.groups, use_bias=op.bias, dtype=dtype,
                    param_dtype=jnp.float32, rngs=rngs))
                plan.append(("module", layer.name, layer.inputs, None))
            elif isinstance(op, BatchNorm):
                setattr(self, name, nnx.BatchNorm(in_shape[0], momentum=1 - op.momentum,
                                                  epsilon=op.eps, param_dtype=jnp.float32,
                                                  rngs=rngs))
                plan.append(("module", layer.name, layer.inputs, None))
            elif isinstance(op, Dense):
                setattr(self, name, nnx.Linear(in_shape[0], op.out_features,
                                               use_bias=op.bias, dtype=dtype,
                                               param_dtype=jnp.float32, rngs=rngs))
                plan.append(("module", layer.name, layer.inputs, None))
            elif isinstance(op, ReLU):
                plan.append(("relu", layer.name, layer.inputs, None))
            elif isinstance(op, MaxPool):
                out_h, h = shapes[layer.name][1], in_shape[1]
                extra = max(0, (out_h - 1) * op.stride + op.kernel - (h + 2 * op.padding))
                plan.append(("maxpool", layer.name, layer.inputs,
                             (op.kernel, op.stride, (op.padding, op.padding + extra))))
            elif isinstance(op, AdaptiveAvgPool):
                plan.append(("avgpool", layer.name, layer.inputs, op.output_size))
            elif isinstance(op, Flatten):
                plan.append(("flatten", layer.name, layer.inputs, None))
            elif isinstance(op, Dropout):
                plan.append(("dropout", layer.name, layer.inputs, op.p if dropout else 0.0))
            elif isinstance(op, Concat):
                plan.append(("concat", layer.name, layer.inputs, None))
            elif isinstance(op, Add):
                plan.append(("add", layer.name, layer.inputs, None))
            else:
                raise TypeError(f"no Flax translation for {op!r} (no shipped network uses it)")
        self.plan = tuple(plan)
        self.output = net.output
        self.n_dropout = sum(1 for kind, *_ in plan if kind == "dropout")

    def __call__(self, x: jax.Array, key: jax.Array | None = None) -> jax.Array:
        """Logits; `key` draws the dropout masks (None: inference, no dropout)."""
        keys = list(jax.random.split(key, self.n_dropout)) if key is not None and \
            self.n_dropout else []
        values = {INPUT: x}
        for kind, name, inputs, arg in self.plan:
            v = values[inputs[0]]
            if kind == "module":
                y = getattr(self, attr_name(name))(v)
            elif kind == "relu":
                y = jax.nn.relu(v)
            elif kind == "maxpool":
                y = max_pool(v, *arg)
            elif kind == "avgpool":
                y = adaptive_avg_pool(v, arg)
            elif kind == "flatten":
                if v.shape[1] * v.shape[2] > 1:
                    v = v.transpose(0, 3, 1, 2)  # C, H, W order, as the spec's dense weights
                y = v.reshape(v.shape[0], -1)
            elif kind == "dropout":
                y = dropout(v, arg, keys.pop() if keys else None)
            elif kind == "concat":
                y = jnp.concatenate([values[s] for s in inputs], axis=-1)
            else:
                y = v
                for s in inputs[1:]:
                    y = y + values[s]
            values[name] = y
        return values[self.output]


def trainable_parameters(model: nnx.Module) -> int:
    return sum(int(x.size) for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
