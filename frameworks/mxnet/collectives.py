"""MXNet kvstore push + pull for commbench: the parameter-server round trip training
uses (dist_sync: the servers sum the workers' pushes, every worker pulls the sum), so its
time is comparable with an allreduce of the same buffer."""

from __future__ import annotations

import os

import mxnet as mx

OP = "pushpull"  # stored as the operation: a PS round trip, not an allreduce
_kv = None
_keys: dict[int, int] = {}


def setup(job: dict) -> tuple[int, int]:
    global _kv
    _kv = mx.kv.create(os.environ.get("DNNBENCH_KVSTORE", "dist_sync"))
    return _kv.rank, _kv.num_workers


def buffer(nbytes: int, fill: float):
    n = max(1, nbytes // 4)
    if n not in _keys:
        _keys[n] = len(_keys)
        _kv.init(_keys[n], mx.nd.zeros((n,)))
    return mx.nd.full((n,), fill)


def allreduce(buf) -> None:
    key = _keys[buf.shape[0]]
    _kv.push(key, buf)
    _kv.pull(key, out=buf)
    buf.wait_to_read()


def barrier() -> None:
    _kv._barrier()


def check(buf, expected: float) -> bool:
    return bool((buf == expected).min().asscalar())


def teardown() -> None:
    pass
