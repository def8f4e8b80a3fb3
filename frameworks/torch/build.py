"""Translate a models/ Network spec into a torch.nn.Module, layer for layer."""

from __future__ import annotations

import torch
from torch import nn

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

module_key = safe_name


def _module(op, in_shape: tuple[int, ...], inplace: bool, dropout: bool) -> nn.Module | None:
    if isinstance(op, Conv):
        return nn.Conv2d(in_shape[0], op.out_channels, op.kernel, op.stride, op.padding,
                         groups=op.groups, bias=op.bias)
    if isinstance(op, BatchNorm):
        return nn.BatchNorm2d(in_shape[0], eps=op.eps, momentum=op.momentum)
    if isinstance(op, ReLU):
        return nn.ReLU(inplace=inplace)
    if isinstance(op, MaxPool):
        return nn.MaxPool2d(op.kernel, op.stride, op.padding, ceil_mode=op.ceil_mode)
    if isinstance(op, AdaptiveAvgPool):
        return nn.AdaptiveAvgPool2d(op.output_size)
    if isinstance(op, LRN):
        return nn.LocalResponseNorm(op.size, op.alpha, op.beta, op.k)
    if isinstance(op, Flatten):
        return nn.Flatten(1)
    if isinstance(op, Dense):
        return nn.Linear(in_shape[0], op.out_features, bias=op.bias)
    if isinstance(op, Dropout):
        return nn.Dropout(op.p if dropout else 0.0)
    if isinstance(op, (Concat, Add)):
        return None
    raise TypeError(f"no torch translation for {op!r}")


class SpecNet(nn.Module):
    """Runs the spec's layers in order, keeping each output only until its last use."""

    def __init__(self, net: Network, cost: NetworkCost, dropout: bool = True) -> None:
        super().__init__()
        shapes = {INPUT: (net.in_channels, cost.image_size, cost.image_size)}
        shapes.update({lc.name: lc.out_shape for lc in cost.layers})
        consumers: dict[str, int] = {}
        last_use: dict[str, int] = {}
        for i, layer in enumerate(net.layers):
            for src in layer.inputs:
                consumers[src] = consumers.get(src, 0) + 1
                last_use[src] = i
        self.layers = nn.ModuleDict()
        self.plan: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = []
        for i, layer in enumerate(net.layers):
            # In-place ReLU only where nothing else reads its input (as torchvision does).
            inplace = layer.inputs[0] != INPUT and consumers.get(layer.inputs[0], 0) == 1
            mod = _module(layer.op, shapes[layer.inputs[0]], inplace, dropout)
            kind = "module"
            if isinstance(layer.op, Concat):
                kind = "concat"
            elif isinstance(layer.op, Add):
                kind = "add"
            else:
                self.layers[module_key(layer.name)] = mod
            dead = tuple(s for s in layer.inputs if last_use.get(s) == i and s != INPUT)
            self.plan.append((layer.name, layer.inputs, kind, dead))
        self.output = net.output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values: dict[str, torch.Tensor] = {INPUT: x}
        layers = self.layers
        for name, inputs, kind, dead in self.plan:
            if kind == "module":
                y = layers[module_key(name)](values[inputs[0]])
            elif kind == "concat":
                y = torch.cat([values[s] for s in inputs], 1)
            else:
                y = values[inputs[0]]
                for s in inputs[1:]:
                    y = y + values[s]
            for s in dead:
                del values[s]
            values[name] = y
        return values[self.output]


def trainable_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
