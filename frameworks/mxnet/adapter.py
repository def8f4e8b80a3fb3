"""MXNet 1.9 adapter: the only module that imports MXNet for training.

Best settings, recorded in the result: Gluon HybridBlocks hybridized with
static_alloc/static_shape; OMP_NUM_THREADS set explicitly (MXNet otherwise uses half
the cores); gluon.Trainer SGD with momentum; NCHW on CPU (oneDNN) and GPU (cuDNN).
"""

from __future__ import annotations

import hashlib
import os
import platform
from typing import Any

import numpy as np

import models
from frameworks import ps_rules
from frameworks.contract import RunSpec, worker_threads
from frameworks.timing import FeedPhases
from models.cost import cost


def _mxnet():
    """MXNet, loaded with the OpenBLAS kernel `openblas.choose` picks (it must run before
    the first import: OpenBLAS reads its setting once, at load)."""
    from frameworks.mxnet import openblas

    openblas.choose()
    import mxnet

    return mxnet


def environment(spec: RunSpec) -> dict[str, Any]:
    from frameworks.mxnet import openblas

    mx = _mxnet()
    kernel, chosen_by = openblas.choose()  # what the load above used
    features = mx.runtime.Features()
    env: dict[str, Any] = {"framework": "mxnet", "framework_version": mx.__version__,
                           "python": platform.python_version(),
                           "onednn": features.is_enabled("MKLDNN"),
                           "cuda_build": features.is_enabled("CUDA"),
                           "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
                           "openblas_coretype": kernel, "openblas_coretype_by": chosen_by}
    if spec.strategy == "horovod":
        from frameworks.horovod import build_info

        env.update(build_info("horovod.mxnet"))
    if spec.device == "cuda":
        env.update(gpus=mx.context.num_gpus(), cudnn_build=features.is_enabled("CUDNN"),
                   nccl_build=features.is_enabled("NCCL"))
    return env


def matmul_probe(spec: RunSpec, n: int):
    """One n x n float32 matmul on the run's context (MXNet 1.9 trains fp32 only here)."""
    mx = _mxnet()

    from frameworks.peak import MatmulProbe

    gpu = spec.device == "cuda"
    ctx = mx.gpu(int(os.environ.get("DNNBENCH_LOCAL_RANK", "0"))) if gpu else mx.cpu()
    a = mx.nd.random.normal(shape=(n, n), ctx=ctx)
    b = mx.nd.random.normal(shape=(n, n), ctx=ctx)
    name = "cpu"
    if gpu:  # MXNet does not name its GPUs; nvidia-smi does, for the same ordinal
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader",
                              "-i", str(ctx.device_id)], capture_output=True, text=True)
        name = out.stdout.strip() or "GPU"
    return MatmulProbe(lambda: mx.nd.dot(a, b), lambda out: out.wait_to_read(), name,
                       "float32", n)


class MXNetTrainer(FeedPhases):
    """SGD + momentum on one fixed synthetic batch resident on the device."""

    def __init__(self, spec: RunSpec, rank: int = 0, world_size: int = 1,
                 dropout: bool = True, hybridize: bool = True) -> None:
        mx = _mxnet()
        from mxnet import autograd, gluon

        self.mx, self.autograd = mx, autograd
        self.spec = spec
        self.threads = worker_threads(spec)
        if spec.layout == "channels_last":
            raise RuntimeError("layout = 'channels_last' is unsupported by this MXNet adapter "
                               "(NCHW on CPU and GPU); use auto or channels_first")
        if spec.precision == "amp":
            raise RuntimeError("precision = 'amp' is not implemented for MXNet yet")
        if spec.device == "cuda":
            if mx.context.num_gpus() == 0:
                raise RuntimeError("device = 'cuda' but MXNet sees no GPU (is the CUDA "
                                   "environment variant, mxnet-cu112, installed?)")
            self.ctx = mx.gpu(int(os.environ.get("DNNBENCH_LOCAL_RANK", "0")))
        else:
            self.ctx = mx.cpu()
        mx.random.seed(spec.seed)
        np.random.seed(spec.seed)
        from frameworks.mxnet.build import SpecNet

        net = models.build(spec.model, spec.num_classes)
        self.net = SpecNet(net, cost(spec.model, spec.image_size, spec.num_classes), dropout,
                           prefix=f"{spec.model}_")
        self.net.initialize(mx.init.Xavier(), ctx=self.ctx)
        self.hybridized = hybridize
        if hybridize:
            self.net.hybridize(static_alloc=True, static_shape=True)
        self.world_size = world_size
        self.kvstore_type = os.environ.get("DNNBENCH_KVSTORE", "")
        kv = mx.kv.create(self.kvstore_type) if self.kvstore_type else None
        self.hvd = None
        sgd = {"learning_rate": spec.lr, "momentum": spec.momentum}
        if spec.strategy == "horovod":
            # DistributedTrainer allreduces gradients (divided by the worker count) before
            # the local update; replicas start from rank 0's parameters.
            import horovod.mxnet as hvd

            from frameworks.horovod.rendezvous import wait_then_init

            wait_then_init(hvd)
            self.hvd = hvd
            params = self.net.collect_params()
            hvd.broadcast_parameters(params, root_rank=0)
            self.trainer = hvd.DistributedTrainer(params, "sgd", sgd)
        else:
            # With a dist kvstore the optimizer runs on the servers (update_on_kvstore):
            # workers push gradients and pull weights, the parameter-server design both
            # papers study.
            self.trainer = gluon.Trainer(self.net.collect_params(), "sgd", sgd,
                                         kvstore=kv, update_on_kvstore=True if kv else None)
        # Servers sum the workers' gradients; scaling by the global batch averages them,
        # as DDP and allreduce do.
        self.step_scale = spec.batch_size * (world_size if kv else 1)
        self.placement = self._placement(kv) if kv else []
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        self.feed = None
        if spec.data:  # a real input pipeline: each step loads, decodes and copies a batch
            from frameworks.mxnet.data import Feed

            self.feed = Feed(spec, rank, world_size, self.ctx)
        else:
            rng = np.random.default_rng(spec.seed + 1 + rank)
            self.images = mx.nd.array(rng.standard_normal(
                (spec.batch_size, 3, spec.image_size, spec.image_size), dtype=np.float32),
                ctx=self.ctx)
            self.labels = mx.nd.array(rng.integers(0, spec.num_classes, spec.batch_size),
                                      ctx=self.ctx)
        self._loss = None

    # -- the fused step (throughput mode) ---------------------------------------------
    def step(self) -> None:
        if self.feed is not None:
            self.feed.next_batch()
            self.images, self.labels = self.feed.to_device()
        with self.autograd.record():
            loss = self.loss_fn(self.net(self.images), self.labels)
        loss.backward()
        self.trainer.step(self.step_scale)
        self._loss = loss

    # -- phases (breakdown mode) -----------------------------------------------------
    def forward(self) -> None:
        with self.autograd.record():
            self._loss = self.loss_fn(self.net(self.images), self.labels)

    def backward(self) -> None:
        self._loss.backward()

    def communicate(self) -> None:
        """PS: push gradients, the servers update, pull weights (so t_update is ~0).
        Horovod: allreduce the gradients (t_comm), the update follows locally."""
        if self.kvstore_type:
            self.trainer.step(self.step_scale)
        elif self.hvd is not None:
            self.trainer.allreduce_grads()

    def update(self) -> None:
        if self.hvd is not None:
            self.trainer.update(self.step_scale)
        elif not self.kvstore_type:
            self.trainer.step(self.step_scale)

    def synchronize(self) -> None:
        self.mx.nd.waitall()

    def loss(self) -> float:
        return float(self._loss.mean().asscalar()) if self._loss is not None else float("nan")

    def trainable(self) -> list:
        return [p for p in self.net.collect_params().values() if p.grad_req != "null"]

    def parameter_count(self) -> int:
        return int(sum(np.prod(p.shape) for p in self.trainable()))

    def state_digest(self) -> str:
        h = hashlib.sha256()
        for p in self.trainable():
            h.update(p.data(self.ctx).asnumpy().astype(np.float32).tobytes())
        return h.hexdigest()[:16]

    def _placement(self, kv) -> list[list]:
        """Which server holds each parameter, by MXNet 1.9's kvstore rule
        (frameworks/ps_rules.py, shared with the performance model). Keys are the
        parameters' positions in the Trainer, the order gluon initialises them in."""
        servers = int(os.environ.get("DMLC_NUM_SERVER", "1"))
        bound = int(os.environ.get("MXNET_KVSTORE_BIGARRAY_BOUND", ps_rules.MXNET_BIGARRAY_BOUND))
        spec_name = {}
        for layer, block in self.net.owners.items():
            for pname, param in block.collect_params().items():
                spec_name[id(param)] = f"{layer}.{pname.rsplit('_', 1)[-1]}"
        pushed = [(key, spec_name.get(id(p), p.name), int(np.prod(p.shape)))
                  for key, p in enumerate(self.trainer._params) if p.grad_req != "null"]
        return [list(t) for t in ps_rules.mxnet(pushed, servers, bound)]

    def settings(self) -> dict[str, Any]:
        return {"threads": self.threads, "layout": "channels_first", "device": str(self.ctx),
                "precision": self.spec.precision, "hybridize": self.hybridized,
                "static_alloc": self.hybridized, "optimizer": "SGD(momentum)",
                "strategy": self.spec.strategy, "engine": os.environ.get(
                    "MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
                "kvstore": self.kvstore_type or ("horovod" if self.hvd is not None else "none"),
                "update_on_kvstore": bool(self.kvstore_type),
                "ps_servers": int(os.environ.get("DMLC_NUM_SERVER", "0") or 0),
                **(self.feed.settings() if self.feed is not None else {"data": "synthetic"})}

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        if self.hvd is not None:
            self.hvd.shutdown()


def build_trainer(spec: RunSpec, rank: int = 0, world_size: int = 1) -> MXNetTrainer:
    return MXNetTrainer(spec, rank, world_size)
