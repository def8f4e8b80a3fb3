"""Wait-free backprop: simulate gradient communication against the backward timeline.

Backward produces gradients last layer first. Each layer's share of the measured backward
time is proportional to its cost (forward MACs; backward is ~2x forward per layer, so the
proportions hold); layers without MACs (BN, ReLU, pooling) take none. Ready gradients are
packed into fusion buffers (Horovod's tensor fusion, DDP's buckets); a buffer is sent when
it reaches the threshold or when backward ends; messages go one at a time on one
communication stream, each costing `cost(bytes)` (which carries the latency α).
The exposed communication is whatever is still running when backward finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from models.cost import NetworkCost


@dataclass(frozen=True)
class Message:
    ready: float  # s after backward starts
    start: float
    end: float
    nbytes: int
    tensors: int


@dataclass(frozen=True)
class OverlapResult:
    t_backward: float
    t_comm_total: float  # sum of message times (the no-overlap cost of the same messages)
    comm_end: float  # when the last message finishes, s after backward starts
    messages: tuple[Message, ...]

    @property
    def exposed(self) -> float:
        return max(0.0, self.comm_end - self.t_backward)


def ready_times(net: NetworkCost, t_backward: float) -> list[tuple[str, int, float]]:
    """(tensor key, bytes, ready time) in backward order, from per-layer MAC shares."""
    total = sum(lc.macs for lc in net.layers) or 1
    by_layer: dict[str, list] = {}
    for t in net.tensors:
        by_layer.setdefault(t.layer, []).append(t)
    clock = 0.0
    out = []
    for lc in reversed(net.layers):
        clock += t_backward * lc.macs / total
        for t in by_layer.get(lc.name, ()):
            out.append((t.key, t.nbytes, clock))
    return out


def simulate(ready: list[tuple[str, int, float]], t_backward: float,
             cost: Callable[[float], float], fusion_bytes: int = 0) -> OverlapResult:
    """Serial communication of fused buffers as gradients become ready."""
    messages: list[Message] = []
    free = 0.0
    buf_bytes = buf_count = 0
    buf_ready = 0.0

    def flush(at: float) -> None:
        nonlocal free, buf_bytes, buf_count
        start = max(at, free)
        end = start + cost(buf_bytes)
        messages.append(Message(at, start, end, buf_bytes, buf_count))
        free = end
        buf_bytes = buf_count = 0

    for _, nbytes, when in ready:
        buf_bytes += nbytes
        buf_count += 1
        buf_ready = when
        if buf_bytes >= fusion_bytes:
            flush(buf_ready)
    if buf_count:
        flush(max(buf_ready, t_backward))
    return OverlapResult(t_backward, sum(m.end - m.start for m in messages),
                         max((m.end for m in messages), default=0.0), tuple(messages))
