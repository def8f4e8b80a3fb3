"""Translate a models/ Network spec into a Gluon HybridBlock, layer for layer.

Layout is NCHW (MXNet's oneDNN CPU kernels and cuDNN both take it); Dense weights are
(out, in) as in PyTorch; max pools with ceil mode use MXNet's "full" convention, checked
against the cost model's shape so a mismatch fails loudly instead of computing
something else.
"""

from __future__ import annotations

import math

from mxnet import gluon
from mxnet.gluon import nn

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

block_name = safe_name


class AdaptivePoolBlock(gluon.HybridBlock):
    def __init__(self, out: int, **kw) -> None:
        super().__init__(**kw)
        self.out = out

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.out)


class SpecNet(gluon.HybridBlock):
    """Runs the spec's layers in order (HybridBlock: hybridize() turns it into a graph)."""

    def __init__(self, net: Network, cost: NetworkCost, dropout: bool = True, **kw) -> None:
        super().__init__(**kw)
        shapes = {INPUT: (net.in_channels, cost.image_size, cost.image_size)}
        shapes.update({lc.name: lc.out_shape for lc in cost.layers})
        self.plan: list[tuple[str, tuple[str, ...], str]] = []  # (spec name, inputs, kind)
        self.owners: dict[str, gluon.Block] = {}  # spec name -> block holding parameters
        self.blocks: dict[str, gluon.Block] = {}
        self.output = net.output
        with self.name_scope():
            for layer in net.layers:
                op, x_shape = layer.op, shapes[layer.inputs[0]]
                block = None
                kind = "block"
                if isinstance(op, Conv):
                    block = nn.Conv2D(op.out_channels, op.kernel, op.stride, op.padding,
                                      groups=op.groups, use_bias=op.bias,
                                      in_channels=x_shape[0], prefix=block_name(layer.name) + "_")
                elif isinstance(op, BatchNorm):
                    block = nn.BatchNorm(axis=1, epsilon=op.eps, momentum=1 - op.momentum,
                                         in_channels=x_shape[0],
                                         prefix=block_name(layer.name) + "_")
                elif isinstance(op, ReLU):
                    block = nn.Activation("relu")
                elif isinstance(op, MaxPool):
                    out_h = shapes[layer.name][1]
                    span = x_shape[1] + 2 * op.padding - op.kernel
                    mx_out = (math.ceil(span / op.stride) if op.ceil_mode
                              else span // op.stride) + 1
                    if mx_out != out_h:
                        raise ValueError(f"{layer.name}: MXNet pooling gives {mx_out} rows, the "
                                         f"spec {out_h}")
                    block = nn.MaxPool2D(op.kernel, op.stride, op.padding, ceil_mode=op.ceil_mode)
                elif isinstance(op, AdaptiveAvgPool):
                    if x_shape[1:] == (op.output_size, op.output_size):
                        kind = "identity"
                    elif op.output_size == 1:
                        block = nn.GlobalAvgPool2D()
                    else:
                        block = AdaptivePoolBlock(op.output_size)
                elif isinstance(op, Flatten):
                    block = nn.Flatten()
                elif isinstance(op, Dense):
                    block = nn.Dense(op.out_features, use_bias=op.bias, in_units=x_shape[0],
                                     flatten=False, prefix=block_name(layer.name) + "_")
                elif isinstance(op, Dropout):
                    block = nn.Dropout(op.p if dropout else 0.0)
                elif isinstance(op, Concat):
                    kind = "concat"
                elif isinstance(op, Add):
                    kind = "add"
                elif isinstance(op, LRN):
                    raise NotImplementedError("LRN has no MXNet translation yet (no shipped "
                                              "network uses it)")
                else:
                    raise TypeError(f"no Gluon translation for {op!r}")
                if block is not None:
                    self.register_child(block, block_name(layer.name))
                    self.blocks[layer.name] = block
                    if isinstance(op, (Conv, BatchNorm, Dense)):
                        self.owners[layer.name] = block
                self.plan.append((layer.name, layer.inputs, kind))

    def hybrid_forward(self, F, x):  # noqa: N803 - Gluon's signature
        values = {INPUT: x}
        blocks = self.blocks
        for name, inputs, kind in self.plan:
            if kind == "block":
                y = blocks[name](values[inputs[0]])
            elif kind == "concat":
                y = F.concat(*[values[s] for s in inputs], dim=1)
            elif kind == "add":
                y = F.elemwise_add(values[inputs[0]], values[inputs[1]])
            else:
                y = values[inputs[0]]
            values[name] = y
        return values[self.output]
