"""The framework-neutral network description every adapter translates.

A network is an ordered list of named layers (a DAG in topological order). Each layer
holds one typed op and the names of its inputs. Keeping the networks as *data* is what
lets every framework build the identical function, lets the cost model count exactly
what they build, and lets `verify` map weights by layer name across frameworks.

Conventions (they mirror torchvision, the reference for the parameter counts):
* tensors are described per sample in channels-first order (C, H, W); adapters choose
  their own memory layout;
* BatchNorm momentum uses PyTorch's convention (weight of the new batch statistic);
* pooling `ceil_mode` follows PyTorch's rule (a window may not start in the padding).
"""

from __future__ import annotations

from dataclasses import dataclass, field

INPUT = "input"


@dataclass(frozen=True)
class Conv:
    out_channels: int
    kernel: int
    stride: int = 1
    padding: int = 0
    groups: int = 1
    bias: bool = True


@dataclass(frozen=True)
class BatchNorm:
    eps: float = 1e-5
    momentum: float = 0.1


@dataclass(frozen=True)
class ReLU:
    pass


@dataclass(frozen=True)
class MaxPool:
    kernel: int
    stride: int
    padding: int = 0
    ceil_mode: bool = False


@dataclass(frozen=True)
class AdaptiveAvgPool:
    """Average pool to a fixed output grid; output_size=1 is global average pooling."""

    output_size: int


@dataclass(frozen=True)
class LRN:
    """Cross-channel local response normalisation (Caffe/AlexNet-paper style)."""

    size: int = 5
    alpha: float = 1e-4
    beta: float = 0.75
    k: float = 1.0


@dataclass(frozen=True)
class Flatten:
    pass


@dataclass(frozen=True)
class Dense:
    out_features: int
    bias: bool = True


@dataclass(frozen=True)
class Dropout:
    p: float


@dataclass(frozen=True)
class Concat:
    """Concatenate the inputs along the channel axis (inception branches)."""


@dataclass(frozen=True)
class Add:
    """Element-wise sum of the inputs (residual connections)."""


Op = (Conv | BatchNorm | ReLU | MaxPool | AdaptiveAvgPool | LRN | Flatten | Dense | Dropout
      | Concat | Add)

#: Ops that own trainable parameters, and the names of those parameters in spec order.
PARAM_NAMES: dict[type, tuple[str, ...]] = {
    Conv: ("weight", "bias"),
    Dense: ("weight", "bias"),
    BatchNorm: ("gamma", "beta"),
}


def safe_name(spec_name: str) -> str:
    """Spec names use dots (torchvision style); torch ModuleDict keys, Keras layer names
    and Gluon child names cannot, so every adapter maps them the same way."""
    return spec_name.replace(".", "__")


@dataclass(frozen=True)
class Layer:
    name: str
    op: Op
    inputs: tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """A whole network: layers in topological order; the last layer is the output."""

    name: str
    layers: tuple[Layer, ...]
    num_classes: int
    in_channels: int = 3
    description: str = ""

    @property
    def output(self) -> str:
        return self.layers[-1].name

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)


@dataclass
class GraphBuilder:
    """Appends layers, wiring each to the previous one unless inputs are given.

    Network definitions read like the torchvision code they mirror:
    ``b.add("conv1", Conv(64, 7, 2, 3, bias=False)); b.add("bn1", BatchNorm())``.
    """

    name: str
    num_classes: int
    layers: list[Layer] = field(default_factory=list)
    current: str = INPUT

    def add(self, name: str, op: Op, inputs: tuple[str, ...] | list[str] | None = None) -> str:
        if any(layer.name == name for layer in self.layers) or name == INPUT:
            raise ValueError(f"duplicate layer name {name!r} in {self.name}")
        ins = tuple(inputs) if inputs is not None else (self.current,)
        self.layers.append(Layer(name, op, ins))
        self.current = name
        return name

    def conv_bn_relu(self, prefix: str, out: int, kernel: int, stride: int = 1,
                     padding: int = 0, eps: float = 1e-5,
                     inputs: tuple[str, ...] | None = None) -> str:
        """Conv (no bias) + BatchNorm + ReLU: torchvision's BasicConv2d."""
        self.add(f"{prefix}.conv", Conv(out, kernel, stride, padding, bias=False), inputs)
        self.add(f"{prefix}.bn", BatchNorm(eps=eps))
        return self.add(f"{prefix}.relu", ReLU())

    def build(self, description: str = "") -> Network:
        return Network(self.name, tuple(self.layers), self.num_classes,
                       description=description)
