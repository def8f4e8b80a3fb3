"""AlexNet as torchvision defines it (one-tower 64-192-384-256-256, adaptive 6x6 pool).

Its three stride-2 max pools and stride-4 first conv need at least 63 px of input;
the cost model rejects smaller sizes with that figure instead of building an empty map.
"""

from models.ir import (
    AdaptiveAvgPool,
    Conv,
    Dense,
    Dropout,
    Flatten,
    GraphBuilder,
    MaxPool,
    Network,
    ReLU,
)


def alexnet(num_classes: int = 1000) -> Network:
    b = GraphBuilder("alexnet", num_classes)
    for i, (out, k, s, p, pool) in enumerate(
            [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
             (256, 3, 1, 1, False), (256, 3, 1, 1, True)], start=1):
        b.add(f"conv{i}", Conv(out, k, s, p))
        b.add(f"relu{i}", ReLU())
        if pool:
            b.add(f"pool{i}", MaxPool(3, 2))
    b.add("avgpool", AdaptiveAvgPool(6))
    b.add("flatten", Flatten())
    b.add("drop6", Dropout(0.5))
    b.add("fc6", Dense(4096))
    b.add("relu6", ReLU())
    b.add("drop7", Dropout(0.5))
    b.add("fc7", Dense(4096))
    b.add("relu7", ReLU())
    b.add("fc8", Dense(num_classes))
    return b.build("AlexNet (torchvision variant: 5 conv + 3 fc, adaptive 6x6 avg pool)")
