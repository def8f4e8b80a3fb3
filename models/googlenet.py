"""GoogLeNet / Inception v1 as torchvision defines it (BN after every conv, no aux heads).

torchvision's "5x5" branch is a 3x3 conv and its pools use ceil mode; both matter for the
6,624,904-parameter reference count.
"""

from models.ir import (
    AdaptiveAvgPool,
    Concat,
    Dense,
    Dropout,
    Flatten,
    GraphBuilder,
    MaxPool,
    Network,
)

BN_EPS = 1e-3

# name: (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5" (a 3x3 conv), pool projection)
INCEPTION = {
    "inception3a": (64, 96, 128, 16, 32, 32),
    "inception3b": (128, 128, 192, 32, 96, 64),
    "inception4a": (192, 96, 208, 16, 48, 64),
    "inception4b": (160, 112, 224, 24, 64, 64),
    "inception4c": (128, 128, 256, 24, 64, 64),
    "inception4d": (112, 144, 288, 32, 64, 64),
    "inception4e": (256, 160, 320, 32, 128, 128),
    "inception5a": (256, 160, 320, 32, 128, 128),
    "inception5b": (384, 192, 384, 48, 128, 128),
}
POOL_AFTER = {"inception3b": ("maxpool3", 3), "inception4e": ("maxpool4", 2)}


def _inception(b: GraphBuilder, name: str, cfg: tuple[int, ...]) -> str:
    c1, r3, c3, r5, c5, pp = cfg
    src = (b.current,)
    ends = [b.conv_bn_relu(f"{name}.branch1", c1, 1, eps=BN_EPS, inputs=src)]
    b.conv_bn_relu(f"{name}.branch2.0", r3, 1, eps=BN_EPS, inputs=src)
    ends.append(b.conv_bn_relu(f"{name}.branch2.1", c3, 3, padding=1, eps=BN_EPS))
    b.conv_bn_relu(f"{name}.branch3.0", r5, 1, eps=BN_EPS, inputs=src)
    ends.append(b.conv_bn_relu(f"{name}.branch3.1", c5, 3, padding=1, eps=BN_EPS))
    b.add(f"{name}.branch4.pool", MaxPool(3, 1, 1, ceil_mode=True), src)
    ends.append(b.conv_bn_relu(f"{name}.branch4.1", pp, 1, eps=BN_EPS))
    return b.add(f"{name}.concat", Concat(), ends)


def googlenet(num_classes: int = 1000) -> Network:
    b = GraphBuilder("googlenet", num_classes)
    b.conv_bn_relu("conv1", 64, 7, 2, 3, eps=BN_EPS)
    b.add("maxpool1", MaxPool(3, 2, ceil_mode=True))
    b.conv_bn_relu("conv2", 64, 1, eps=BN_EPS)
    b.conv_bn_relu("conv3", 192, 3, padding=1, eps=BN_EPS)
    b.add("maxpool2", MaxPool(3, 2, ceil_mode=True))
    for name, cfg in INCEPTION.items():
        _inception(b, name, cfg)
        if name in POOL_AFTER:
            pool, k = POOL_AFTER[name]
            b.add(pool, MaxPool(k, 2, ceil_mode=True))
    b.add("avgpool", AdaptiveAvgPool(1))
    b.add("flatten", Flatten())
    b.add("dropout", Dropout(0.2))
    b.add("fc", Dense(num_classes))
    return b.build("GoogLeNet / Inception v1 (torchvision: BN, 3x3 in the 5x5 branch, "
                   "no aux heads)")
