"""Translate a models/ Network spec into a Keras 3 functional model, layer for layer.

Exactness over convenience: padding is explicit (Keras "same" pads asymmetrically at
stride 2, PyTorch does not), max pools pad with -inf (PyTorch semantics; this also
emulates ceil mode), adaptive average pooling uses PyTorch's bin edges, and a
channels-last tensor is put back in channels-first order before Flatten so that dense
weights mean the same thing in every framework.
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops

from models.cost import NetworkCost
from models.ir import (
    INPUT,
    LRN,
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

layer_name = safe_name


class Pad2D(layers.Layer):
    """Pad H and W by (top, bottom, left, right) with a constant (-inf for max pools)."""

    def __init__(self, pads: tuple[int, int, int, int], value: float, channels_last: bool,
                 **kw) -> None:
        super().__init__(**kw)
        self.pads, self.value, self.channels_last = pads, value, channels_last

    def call(self, x):
        t, b, left, r = self.pads
        spatial = [[t, b], [left, r]]
        width = [[0, 0]] + (spatial + [[0, 0]] if self.channels_last else [[0, 0]] + spatial)
        return ops.pad(x, width, constant_values=self.value)

    def get_config(self):
        return {**super().get_config(), "pads": self.pads, "value": self.value,
                "channels_last": self.channels_last}


class AdaptiveAvgPool2D(layers.Layer):
    """PyTorch's adaptive average pooling: bin i spans [floor(iH/o), ceil((i+1)H/o))."""

    def __init__(self, out: int, in_hw: tuple[int, int], channels_last: bool, **kw) -> None:
        super().__init__(**kw)
        self.out, self.in_hw, self.channels_last = out, tuple(in_hw), channels_last

    def _bins(self, n: int) -> list[tuple[int, int]]:
        return [(math.floor(i * n / self.out), math.ceil((i + 1) * n / self.out))
                for i in range(self.out)]

    def call(self, x):
        h, w = self.in_hw
        ha, wa = (1, 2) if self.channels_last else (2, 3)
        if self.out == 1:
            return ops.mean(x, axis=(ha, wa), keepdims=True)
        rows = []
        for h0, h1 in self._bins(h):
            cols = []
            for w0, w1 in self._bins(w):
                if self.channels_last:
                    cell = x[:, h0:h1, w0:w1, :]
                else:
                    cell = x[:, :, h0:h1, w0:w1]
                cols.append(ops.mean(cell, axis=(ha, wa), keepdims=True))
            rows.append(ops.concatenate(cols, axis=wa))
        return ops.concatenate(rows, axis=ha)

    def get_config(self):
        return {**super().get_config(), "out": self.out, "in_hw": self.in_hw,
                "channels_last": self.channels_last}


def build_model(net: Network, cost: NetworkCost, channels_last: bool,
                dropout: bool = True) -> tuple[keras.Model, dict[str, layers.Layer]]:
    """The Keras model and a map from spec layer name to the Keras layer holding its
    parameters (for weight loading and verification)."""
    fmt = "channels_last" if channels_last else "channels_first"
    axis = -1 if channels_last else 1
    size = cost.image_size
    shape = (size, size, net.in_channels) if channels_last else (net.in_channels, size, size)
    inputs = keras.Input(shape=shape, name="images")
    shapes = {INPUT: (net.in_channels, size, size)}
    shapes.update({lc.name: lc.out_shape for lc in cost.layers})
    values = {INPUT: inputs}
    owners: dict[str, layers.Layer] = {}
    for layer in net.layers:
        op, name = layer.op, layer_name(layer.name)
        x = values[layer.inputs[0]]
        in_shape = shapes[layer.inputs[0]]
        if isinstance(op, Conv):
            if op.padding:
                p = op.padding
                x = layers.ZeroPadding2D(p, data_format=fmt, name=f"{name}__pad")(x)
            lyr = layers.Conv2D(op.out_channels, op.kernel, strides=op.stride, padding="valid",
                                groups=op.groups, use_bias=op.bias, data_format=fmt, name=name)
            y = lyr(x)
            owners[layer.name] = lyr
        elif isinstance(op, BatchNorm):
            lyr = layers.BatchNormalization(axis=axis, epsilon=op.eps, momentum=1 - op.momentum,
                                            name=name)
            y = lyr(x)
            owners[layer.name] = lyr
        elif isinstance(op, ReLU):
            y = layers.ReLU(name=name)(x)
        elif isinstance(op, MaxPool):
            out_h = shapes[layer.name][1]
            h = in_shape[1]
            extra = max(0, (out_h - 1) * op.stride + op.kernel - (h + 2 * op.padding))
            pads = (op.padding, op.padding + extra, op.padding, op.padding + extra)
            if any(pads):
                x = Pad2D(pads, float("-inf"), channels_last, name=f"{name}__pad")(x)
            y = layers.MaxPooling2D(op.kernel, op.stride, padding="valid", data_format=fmt,
                                    name=name)(x)
        elif isinstance(op, AdaptiveAvgPool):
            if in_shape[1] == op.output_size and in_shape[2] == op.output_size:
                y = x
            else:
                y = AdaptiveAvgPool2D(op.output_size, in_shape[1:], channels_last, name=name)(x)
        elif isinstance(op, Flatten):
            if channels_last and in_shape[1] * in_shape[2] > 1:
                x = layers.Permute((3, 1, 2), name=f"{name}__nchw")(x)  # C, H, W order
            y = layers.Flatten(name=name)(x)
        elif isinstance(op, Dense):
            lyr = layers.Dense(op.out_features, use_bias=op.bias, name=name)
            y = lyr(x)
            owners[layer.name] = lyr
        elif isinstance(op, Dropout):
            y = layers.Dropout(op.p if dropout else 0.0, name=name)(x)
        elif isinstance(op, Concat):
            y = layers.Concatenate(axis=axis, name=name)([values[s] for s in layer.inputs])
        elif isinstance(op, Add):
            y = layers.Add(name=name)([values[s] for s in layer.inputs])
        elif isinstance(op, LRN):
            raise NotImplementedError("LRN has no TensorFlow translation yet (no shipped "
                                      "network uses it)")
        else:
            raise TypeError(f"no Keras translation for {op!r}")
        values[layer.name] = y
    model = keras.Model(inputs, values[net.output], name=net.name)
    return model, owners
