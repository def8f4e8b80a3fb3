"""Where each framework puts a variable on its parameter servers.

One source for the adapters, which record the placement their PS runs use, and for the
performance model (harness/perfmodel/placement.py), which predicts the busiest server from
it. Plain Python: the harness imports it without any deep-learning framework.
"""

from __future__ import annotations

from models.ir import safe_name

#: MXNET_KVSTORE_BIGARRAY_BOUND's default (elements): larger arrays are split
MXNET_BIGARRAY_BOUND = 1_000_000

#: the placement policy (harness/perfmodel/placement.py) each framework's PS runs use:
#: MXNet's own rule; TensorFlow places variables round-robin in creation order (its
#: ParameterServerStrategy without a partitioner, what the adapter records)
POLICY = {"mxnet": "mxnet", "tensorflow": "round-robin"}

#: frameworks whose asynchronous parameter servers (strategy ps-async) work as the model's
#: asynchronous step has them (harness/perfmodel/psstep.py, sync=False): each worker pushes
#: its gradients and pulls the values on its own, the server updating once per push
#: (MXNet's dist_async). TensorFlow's ParameterServerStrategy is not one: a chief
#: dispatches every step to the workers (ClusterCoordinator), and the model has no chief
ASYNC_PER_PUSH = frozenset({"mxnet"})

#: frameworks whose servers are numbered by ps-lite's scheduler: the server a key's
#: placement names (mxnet() below) is ps-lite's number, not the launcher's
PSLITE_RANKS = frozenset({"mxnet"})


def pslite_server_order(addresses: list[str]) -> list[int]:
    """Which of the servers started on `addresses` (in launch order) ps-lite numbers 0, 1,
    ... Its scheduler sorts the nodes with `(a.hostname.compare(b.hostname) | (a.port <
    b.port)) > 0` (ps-lite src/van.cc, ProcessAddNodeCommandAtScheduler) before numbering
    them: a negative compare stays negative whatever the OR adds, so a node comes first
    when its address is greater, as text. So the servers are numbered by descending
    address: with servers on emulated hosts 0 and 1 (10.77.0.1, .2), server 0 is the one
    on host 1. Measured: on all 48 two-server runs of scaling-emulated-ps-async, MXNet's
    placement gives server 1 3.05x the bytes and the server on host 0 was the busier
    (test_perfmodel). On one host the order is by port, which the launcher does not fix:
    ties keep launch order (servers on one host are alike to the model)."""
    return sorted(range(len(addresses)), key=lambda i: addresses[i], reverse=True)


def mxnet(params: list[tuple[int, str, int]], servers: int,
          bound: int = MXNET_BIGARRAY_BOUND) -> list[tuple[str, int, int]]:
    """MXNet 1.9's kvstore rule (src/kvstore/kvstore_dist.h, EncodeDefaultKey): an array
    under `bound` elements lives on server (key * 9973) % servers, a larger one is split
    into `servers` near-equal parts, one per server. `params` are (key, name, elements) of
    the arrays that are pushed, keyed by their position in the Trainer, which counts the
    arrays that are never pushed too (BatchNorm's running statistics).

    Returns (name, bytes in float32, server); a split array appears once per server."""
    out = []
    for key, name, elems in params:
        if elems < bound:
            out.append((name, elems * 4, (key * 9973) % servers))
        else:
            for i in range(servers):
                part = round(elems / servers * (i + 1)) - round(elems / servers * i)
                out.append((name, part * 4, i))
    return out


def mxnet_keys(model: str, names: list[str]) -> list[int]:
    """Trainer keys of a network's trainable tensors (spec names, e.g. "layer1.0.bn1.beta"),
    as the MXNet adapter's Gluon network numbers them: Gluon's Trainer takes the network's
    parameters sorted by their full names ("resnet50_layer1__0__bn1_beta", models.ir's
    safe_name of the layer), and every BatchNorm layer also holds running_mean and
    running_var, which take keys but are never pushed. Checked against the adapter's own
    Trainer in tests/test_distributed.py."""
    def gluon(spec_name: str) -> str:
        layer, _, param = spec_name.rpartition(".")
        return f"{model}_{safe_name(layer)}_{param}"

    every = []
    for name in names:
        every.append(gluon(name))
        if name.endswith(".beta"):  # BatchNorm: its statistics live next to gamma/beta
            stem = gluon(name)[: -len("beta")]
            every += [stem + "running_mean", stem + "running_var"]
    key = {g: i for i, g in enumerate(sorted(every))}
    return [key[gluon(n)] for n in names]
