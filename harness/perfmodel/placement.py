"""Parameter-server placement: which server holds which tensor, and what that costs.

With P servers, every worker pushes each gradient to the server holding that tensor and
pulls it back, so the busiest server's bytes set the communication time. Three policies:
round-robin (TensorFlow's default `replica_device_setter`), greedy-by-size (largest
tensor first onto the least-loaded server; tf_cnn_benchmarks' greedy load balancing) and
mxnet (MXNet's key hashing with big arrays split over every server, the rule the MXNet
adapter records its runs with: frameworks/ps_rules.py).
No policy can beat the floor set by the single largest tensor: for ResNet-50 that is the
9.4 MB layer4 3x3 kernel, which is why servers beyond ~54 (the number of large tensors)
stop helping.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from frameworks import ps_rules
from harness.perfmodel import ModelInputError

POLICIES = ("round-robin", "greedy", "mxnet")


@dataclass(frozen=True)
class Placement:
    policy: str
    servers: int
    assignment: tuple[tuple[str, int, int], ...]  # (tensor key, bytes, server)

    @property
    def bytes_per_server(self) -> list[int]:
        out = [0] * self.servers
        for _, nbytes, server in self.assignment:
            out[server] += nbytes
        return out

    @property
    def tensors_per_server(self) -> list[int]:
        out = [0] * self.servers
        for _, _, server in self.assignment:
            out[server] += 1
        return out

    @property
    def total_bytes(self) -> int:
        return sum(b for _, b, _ in self.assignment)

    @property
    def max_bytes(self) -> int:
        return max(self.bytes_per_server)

    @property
    def imbalance(self) -> float:
        """Busiest server's bytes over the mean (total / P): 1.0 is perfect balance."""
        return self.max_bytes / (self.total_bytes / self.servers)

    @property
    def floor_bytes(self) -> int:
        """No placement can put less than the largest tensor on its server."""
        return max(b for _, b, _ in self.assignment)

    @property
    def empty_servers(self) -> int:
        return sum(1 for b in self.bytes_per_server if b == 0)


def place(tensors: list[tuple[str, int]], servers: int, policy: str = "greedy",
          model: str = "", split_bound: int = 0) -> Placement:
    """Assign (key, bytes) tensors, given in model order, to `servers` servers (`model`:
    the network's name, which MXNet's keys depend on; `split_bound`: MXNet splits arrays
    of at least that many elements over every server, 0 for its default)."""
    if servers < 1:
        raise ModelInputError("servers must be >= 1")
    if policy == "round-robin":
        assignment = tuple((k, b, i % servers) for i, (k, b) in enumerate(tensors))
    elif policy == "greedy":
        heap = [(0, s) for s in range(servers)]
        out = []
        for k, b in sorted(tensors, key=lambda t: -t[1]):
            load, s = heapq.heappop(heap)
            out.append((k, b, s))
            heapq.heappush(heap, (load + b, s))
        assignment = tuple(out)
    elif policy == "mxnet":
        if not model:
            raise ModelInputError("the mxnet placement needs the network's name")
        keys = ps_rules.mxnet_keys(model, [k for k, _ in tensors])
        assignment = tuple(ps_rules.mxnet([(key, k, b // 4) for key, (k, b) in
                                           zip(keys, tensors)], servers,
                                          split_bound or ps_rules.MXNET_BIGARRAY_BOUND))
    else:
        raise ModelInputError(f"unknown placement policy {policy!r}; known: {', '.join(POLICIES)}")
    return Placement(policy, servers, assignment)


def from_record(servers: int, assignment: list[tuple[str, int, int]]) -> Placement:
    """A placement as a framework actually made it (recorded by a PS run)."""
    return Placement("recorded", servers, tuple(assignment))
