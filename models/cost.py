"""Cost model: walk a Network spec and count what every framework must build.

Per layer: output shape, trainable parameters, non-trainable state (BN running
statistics), forward multiply-accumulates (conv and dense only, the convention behind the
published 0.714 / 1.498 / 4.089 GMAC figures) and activation size. Per network: the
parameter tensors in forward order and in the order backward produces their gradients,
which is what the overlap simulation and the parameter-server analyser consume.

Shapes follow PyTorch's arithmetic exactly (including ceil-mode pooling), so a size the
cost model accepts is one every adapter can build.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from models import build
from models.ir import (
    INPUT,
    LRN,
    PARAM_NAMES,
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
)

FP32_BYTES = 4


class ShapeError(ValueError):
    """The network cannot be built at this input size (a feature map would be empty)."""


@dataclass(frozen=True)
class ParamTensor:
    layer: str
    name: str  # weight | bias | gamma | beta
    shape: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"{self.layer}.{self.name}"

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * FP32_BYTES


@dataclass(frozen=True)
class LayerCost:
    name: str
    kind: str
    out_shape: tuple[int, ...]  # per sample, channels first
    params: int
    state: int  # non-trainable elements (BN running mean/var)
    macs: int

    @property
    def activation_elems(self) -> int:
        n = 1
        for d in self.out_shape:
            n *= d
        return n


@dataclass(frozen=True)
class NetworkCost:
    network: str
    image_size: int
    num_classes: int
    layers: tuple[LayerCost, ...]
    tensors: tuple[ParamTensor, ...]  # forward (spec) order

    @property
    def params(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def macs(self) -> int:
        return sum(lc.macs for lc in self.layers)

    @property
    def gradient_bytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def activation_bytes(self) -> int:
        """Bytes of all layer outputs for one sample (what backward must keep, roughly)."""
        return sum(lc.activation_elems for lc in self.layers) * FP32_BYTES

    @property
    def backward_order(self) -> tuple[ParamTensor, ...]:
        """Gradient tensors in the order backward makes them ready (last layer first)."""
        order: list[ParamTensor] = []
        by_layer: dict[str, list[ParamTensor]] = {}
        for t in self.tensors:
            by_layer.setdefault(t.layer, []).append(t)
        for lc in reversed(self.layers):
            order.extend(by_layer.get(lc.name, ()))
        return tuple(order)

    def layer_macs(self) -> dict[str, int]:
        return {lc.name: lc.macs for lc in self.layers}


def _window_out(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool) -> int:
    span = size + 2 * padding - kernel
    if span < 0:
        return 0
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + padding:  # PyTorch: last window may not start in padding
        out -= 1
    return out


def _infer(net: Network, image_size: int) -> NetworkCost:
    shapes: dict[str, tuple[int, ...]] = {INPUT: (net.in_channels, image_size, image_size)}
    layers: list[LayerCost] = []
    tensors: list[ParamTensor] = []
    for layer in net.layers:
        ins = [shapes[i] for i in layer.inputs]
        x = ins[0]
        op = layer.op
        params = state = macs = 0
        shapes_of_params: dict[str, tuple[int, ...]] = {}
        if isinstance(op, Conv):
            c, h, w = x
            if c % op.groups or op.out_channels % op.groups:
                raise ShapeError(f"{net.name}: layer {layer.name}: channels not divisible by "
                                 f"groups={op.groups}")
            ho = _window_out(h, op.kernel, op.stride, op.padding, False)
            wo = _window_out(w, op.kernel, op.stride, op.padding, False)
            out = (op.out_channels, ho, wo)
            shapes_of_params["weight"] = (op.out_channels, c // op.groups, op.kernel, op.kernel)
            if op.bias:
                shapes_of_params["bias"] = (op.out_channels,)
            macs = ho * wo * op.out_channels * (c // op.groups) * op.kernel * op.kernel
        elif isinstance(op, MaxPool):
            c, h, w = x
            out = (c, _window_out(h, op.kernel, op.stride, op.padding, op.ceil_mode),
                   _window_out(w, op.kernel, op.stride, op.padding, op.ceil_mode))
        elif isinstance(op, AdaptiveAvgPool):
            out = (x[0], op.output_size, op.output_size) if x[1] * x[2] > 0 else (x[0], 0, 0)
        elif isinstance(op, BatchNorm):
            out = x
            shapes_of_params = {"gamma": (x[0],), "beta": (x[0],)}
            state = 2 * x[0]
        elif isinstance(op, (ReLU, Dropout, LRN)):
            out = x
        elif isinstance(op, Flatten):
            n = 1
            for d in x:
                n *= d
            out = (n,)
        elif isinstance(op, Dense):
            if len(x) != 1:
                raise ShapeError(f"{net.name}: layer {layer.name}: dense input must be flat, "
                                 f"got {x}")
            out = (op.out_features,)
            shapes_of_params["weight"] = (op.out_features, x[0])
            if op.bias:
                shapes_of_params["bias"] = (op.out_features,)
            macs = x[0] * op.out_features
        elif isinstance(op, Concat):
            if any(s[1:] != x[1:] for s in ins):
                raise ShapeError(f"{net.name}: layer {layer.name}: concat inputs differ in "
                                 f"spatial size: {ins}")
            out = (sum(s[0] for s in ins),) + x[1:]
        elif isinstance(op, Add):
            if any(s != x for s in ins):
                raise ShapeError(f"{net.name}: layer {layer.name}: add inputs differ: {ins}")
            out = x
        else:  # pragma: no cover - guarded by the Op union
            raise TypeError(f"unknown op {op!r}")
        if any(d <= 0 for d in out):
            raise ShapeError(f"{net.name}: layer {layer.name} ({type(op).__name__}) gets a "
                             f"{x[1]}x{x[2]} input at image size {image_size} px and would "
                             f"produce an empty output")
        for pname in PARAM_NAMES.get(type(op), ()):
            if pname in shapes_of_params:
                tensors.append(ParamTensor(layer.name, pname, shapes_of_params[pname]))
        params = sum(ParamTensor(layer.name, k, s).numel for k, s in shapes_of_params.items())
        shapes[layer.name] = out
        layers.append(LayerCost(layer.name, type(op).__name__, out, params, state, macs))
    return NetworkCost(net.name, image_size, net.num_classes, tuple(layers), tuple(tensors))


def min_image_size(net: Network, limit: int = 1024) -> int:
    """Smallest square input size the network accepts."""
    for size in range(1, limit + 1):
        try:
            _infer(net, size)
            return size
        except ShapeError:
            continue
    raise ShapeError(f"{net.name}: no input size up to {limit} px works")


@lru_cache(maxsize=64)
def cost(model: str, image_size: int = 224, num_classes: int = 1000) -> NetworkCost:
    """Cost of `model` at `image_size` px; ShapeError names the layer and the minimum size."""
    net = build(model, num_classes)
    try:
        return _infer(net, image_size)
    except ShapeError as exc:
        raise ShapeError(f"{exc}; the smallest image size {model} accepts is "
                         f"{min_image_size(net)} px") from None
