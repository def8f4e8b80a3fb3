"""α-β communication costs: latency α per message, β seconds per byte per link direction.

Formulas (n ranks, m bytes; Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009):
* ring allreduce          2(n-1)α + 2(n-1)/n · m·β      (bandwidth-optimal)
* recursive doubling      ⌈log2 n⌉(α + m·β)             (latency-optimal, small m)
* tree (reduce+broadcast) 2⌈log2 n⌉(α + m·β)
* hierarchical            intra reduce-scatter + inter ring allreduce of m/d + intra allgather
* broadcast (binomial)    ⌈log2 n⌉(α + m·β)
A flat ring spanning several nodes runs at the speed of its slowest (inter-node) edge.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from harness.perfmodel import ModelInputError

LINKS_FILE = Path(__file__).resolve().parent / "links.toml"


@dataclass(frozen=True)
class Link:
    name: str
    alpha: float  # s per message
    beta: float  # s per byte
    description: str = ""
    source: str = ""

    @property
    def bandwidth(self) -> float:
        return 1.0 / self.beta if self.beta > 0 else float("inf")

    @classmethod
    def from_bandwidth(cls, name: str, alpha: float, bandwidth: float, **kw: str) -> Link:
        return cls(name, alpha, 1.0 / bandwidth, **kw)


@lru_cache(maxsize=1)
def links() -> dict[str, Link]:
    data = tomllib.loads(LINKS_FILE.read_text())
    return {name: Link.from_bandwidth(name, float(v["alpha"]), float(v["bandwidth"]),
                                      description=v.get("description", ""),
                                      source=v.get("source", ""))
            for name, v in data.items()}


def link(name: str) -> Link:
    try:
        return links()[name]
    except KeyError:
        raise ModelInputError(f"unknown link profile {name!r}; known: {', '.join(links())} "
                       f"(add one to {LINKS_FILE})") from None


def _log2(n: int) -> int:
    return math.ceil(math.log2(n)) if n > 1 else 0


def ring_allreduce(n: int, m: float, lk: Link) -> float:
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * lk.alpha + 2 * (n - 1) / n * m * lk.beta


def recursive_doubling_allreduce(n: int, m: float, lk: Link) -> float:
    return _log2(n) * (lk.alpha + m * lk.beta)


def tree_allreduce(n: int, m: float, lk: Link) -> float:
    return 2 * _log2(n) * (lk.alpha + m * lk.beta)


def broadcast(n: int, m: float, lk: Link) -> float:
    return _log2(n) * (lk.alpha + m * lk.beta)


def hierarchical_allreduce(nodes: int, per_node: int, m: float, intra: Link,
                           inter: Link) -> float:
    """Reduce-scatter inside each node, ring allreduce of each shard across nodes, allgather."""
    if nodes <= 1:
        return ring_allreduce(per_node, m, intra)
    if per_node <= 1:
        return ring_allreduce(nodes, m, inter)
    d = per_node
    scatter = (d - 1) * intra.alpha + (d - 1) / d * m * intra.beta
    return 2 * scatter + ring_allreduce(nodes, m / d, inter)


ALGORITHMS = ("ring", "recursive-doubling", "tree", "hierarchical")


def allreduce(algorithm: str, nodes: int, per_node: int, m: float, intra: Link,
              inter: Link) -> float:
    """Cost of one allreduce of m bytes over nodes x per_node ranks."""
    n = nodes * per_node
    slowest = inter if nodes > 1 else intra
    if algorithm == "ring":
        return ring_allreduce(n, m, slowest)
    if algorithm == "recursive-doubling":
        return recursive_doubling_allreduce(n, m, slowest)
    if algorithm == "tree":
        return tree_allreduce(n, m, slowest)
    if algorithm == "hierarchical":
        return hierarchical_allreduce(nodes, per_node, m, intra, inter)
    raise ModelInputError(f"unknown allreduce algorithm {algorithm!r}; known: "
                          f"{', '.join(ALGORITHMS)}")


def bus_bandwidth(n: int, m: float, seconds: float) -> float:
    """nccl-tests' busbw for allreduce: algbw x 2(n-1)/n, comparable across rank counts."""
    return (m / seconds) * (2 * (n - 1) / n) if seconds > 0 and n > 1 else 0.0


def fit_alpha_beta(sizes: list[float], times: list[float]) -> tuple[float, float]:
    """Least-squares t = a + b·m over a size sweep; returns (a, b), both clipped at >= 0."""
    k = len(sizes)
    if k < 2:
        raise ModelInputError("need at least two message sizes to fit alpha and beta")
    mx, my = sum(sizes) / k, sum(times) / k
    sxx = sum((x - mx) ** 2 for x in sizes)
    b = sum((x - mx) * (y - my) for x, y in zip(sizes, times)) / sxx if sxx else 0.0
    b = max(b, 0.0)
    a = max(my - b * mx, 0.0)
    return a, b
