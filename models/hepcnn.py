"""HEP-CNN (Kurth et al., the Cori paper's shallow network): 5 conv layers of 128 3x3
filters with 2x2 max pooling, then a 2-class classifier; under 1M parameters.

Used by the performance model to reproduce the paper's "a small network scales with one
parameter server" result; it is not part of the default framework shoot-out.
"""

from models.ir import AdaptiveAvgPool, Conv, Dense, Flatten, GraphBuilder, MaxPool, Network, ReLU


def hepcnn(num_classes: int = 2) -> Network:
    b = GraphBuilder("hepcnn", num_classes)
    for i in range(1, 6):
        b.add(f"conv{i}", Conv(128, 3, 1, 1))
        b.add(f"relu{i}", ReLU())
        b.add(f"pool{i}", MaxPool(2, 2))
    b.add("avgpool", AdaptiveAvgPool(1))
    b.add("flatten", Flatten())
    b.add("fc", Dense(num_classes))
    return b.build("HEP-CNN (shallow: 5 x conv128 3x3 + pool, global pool, fc)")
