"""One deterministic set of weights (and a batch) for a spec, as NumPy arrays.

Keyed by spec names in spec layouts: conv kernels OIHW, dense weights (out, in), BN
`gamma`/`beta`/`running_mean`/`running_var`. Each adapter converts to its own layouts
(HWIO kernels, transposed dense weights, framework parameter names) when loading, which
is exactly what `dnnbench verify` proves it does correctly. Needs NumPy (every framework
environment and the harness have it); nothing else.
"""

from __future__ import annotations

import math

from models.cost import cost

INPUT_KEY = "__images__"
LABELS_KEY = "__labels__"


def make(model: str, image_size: int, num_classes: int, batch: int = 2, seed: int = 0):
    """Weights whose activations stay O(1) through the network (He-scaled kernels, BN
    statistics near identity but not equal to it, so BN arithmetic is exercised)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    net = cost(model, image_size, num_classes)
    out: dict[str, np.ndarray] = {}
    for t in net.tensors:
        if t.name == "weight":
            fan_in = math.prod(t.shape[1:])
            out[t.key] = rng.normal(0.0, math.sqrt(2.0 / fan_in), t.shape).astype(np.float32)
        elif t.name == "bias":
            out[t.key] = rng.normal(0.0, 0.05, t.shape).astype(np.float32)
        elif t.name == "gamma" and _closes_residual_branch(net, t.layer):
            # Small gamma on the BN that ends each residual branch (Goyal et al.'s
            # zero-init-residual, but non-zero so its gradient is still checked): BN networks
            # at random init have gradients that explode with depth (Yang et al. 2019), which
            # would amplify float32 rounding differences into apparent disagreement.
            out[t.key] = rng.uniform(0.05, 0.15, t.shape).astype(np.float32)
        elif t.name == "gamma":
            out[t.key] = rng.uniform(0.8, 1.2, t.shape).astype(np.float32)
        else:  # beta
            out[t.key] = rng.normal(0.0, 0.05, t.shape).astype(np.float32)
    for lc in net.layers:
        if lc.kind == "BatchNorm":
            c = lc.out_shape[0]
            out[f"{lc.name}.running_mean"] = rng.normal(0.0, 0.05, c).astype(np.float32)
            out[f"{lc.name}.running_var"] = rng.uniform(0.8, 1.2, c).astype(np.float32)
    out[INPUT_KEY] = rng.standard_normal((batch, 3, image_size, image_size)).astype(np.float32)
    out[LABELS_KEY] = rng.integers(0, num_classes, batch).astype(np.int64)
    return out


def _closes_residual_branch(net, layer: str) -> bool:
    """A BN whose output feeds a residual Add directly (the branch's last layer), not the
    shortcut's BN."""
    from models import build
    spec = build(net.network, net.num_classes)
    adds = [lyr for lyr in spec.layers if type(lyr.op).__name__ == "Add"]
    return any(lyr.inputs[0] == layer for lyr in adds)


def trainable_keys(model: str, image_size: int, num_classes: int) -> list[str]:
    return [t.key for t in cost(model, image_size, num_classes).tensors]
