"""Framework-neutral network specs and their cost model.

Pure Python: importable by the harness, by every framework's worker, and by the
performance model without any deep-learning framework or even NumPy.
"""

from __future__ import annotations

from collections.abc import Callable

from models.alexnet import alexnet
from models.googlenet import googlenet
from models.hepcnn import hepcnn
from models.ir import Network
from models.resnet import resnet50

NETWORKS: dict[str, Callable[[int], Network]] = {
    "alexnet": alexnet,
    "googlenet": googlenet,
    "resnet50": resnet50,
    "hepcnn": hepcnn,  # performance-model scenarios only (Cori paper)
}


class UnknownModelError(ValueError):
    """No network of that name."""


def build(name: str, num_classes: int = 1000) -> Network:
    """Return the spec of network `name`; raise UnknownModelError naming the known ones."""
    try:
        factory = NETWORKS[name]
    except KeyError:
        raise UnknownModelError(
            f"unknown model {name!r}; known models: {', '.join(NETWORKS)}") from None
    return factory(num_classes)
