"""PyTorch adapter: the only module that imports torch for training.

Best settings by device, all recorded in the result: explicit intra-op threads;
cudnn.benchmark on CUDA; channels_last (measured by `make bench`, interleaved, ResNet-50
batch 16 on the 2-core reference CPU: +5% at 64 px, +18% at 128 px over channels_first;
sweep `layout` to check yours); autocast + GradScaler for `precision = "amp"` (bfloat16
autocast on CPU).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import platform
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

import models
from frameworks.contract import RunSpec, worker_threads
from frameworks.timing import FeedPhases
from frameworks.torch.build import SpecNet, trainable_parameters
from models.cost import cost

DDP_BUCKET_MB = 25  # DDP's default; breakdown mode's own allreduce cuts the same buckets


def resolve_layout(spec: RunSpec) -> str:
    """channels_last by default; channels_first under Horovod, whose collectives require
    contiguous tensors (channels_last conv weights and their gradients are not)."""
    if spec.strategy == "horovod":
        if spec.layout == "channels_last":
            raise RuntimeError("layout = 'channels_last' does not work with Horovod 0.28 "
                               "(it allreduces only contiguous tensors); use auto or "
                               "channels_first")
        return "channels_first"
    return "channels_last" if spec.layout == "auto" else spec.layout


def environment(spec: RunSpec) -> dict[str, Any]:
    """Versions and device facts for the run's manifest."""
    env: dict[str, Any] = {
        "framework": "torch", "framework_version": torch.__version__,
        "python": platform.python_version(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "cuda_available": torch.cuda.is_available(),
    }
    if spec.strategy == "horovod":
        from frameworks.horovod import build_info

        env.update(build_info("horovod.torch"))
    if spec.device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   nccl=".".join(map(str, torch.cuda.nccl.version())),
                   gpu=props.name, gpu_memory_bytes=props.total_memory,
                   gpu_count=torch.cuda.device_count())
    return env


def matmul_probe(spec: RunSpec, n: int):
    """One n x n matmul on the run's device in the math mode its convolutions use: with
    AMP float16 on CUDA (bfloat16 on CPU, as autocast does); in fp32 on CUDA TF32 exactly
    when cuDNN's convolutions may use it (torch's default: yes; matmuls default to no, but a
    CNN's FLOPs are convolutions)."""
    from frameworks.peak import MatmulProbe

    cuda = spec.device == "cuda"
    dev = torch.device(f"cuda:{os.environ.get('DNNBENCH_LOCAL_RANK', '0')}" if cuda else "cpu")
    dtype = (torch.float16 if cuda else torch.bfloat16) if spec.precision == "amp" \
        else torch.float32
    tf32 = cuda and dtype == torch.float32 and torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32  # the worker measures before training
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)

    def wait(_: Any) -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    name = torch.cuda.get_device_name(dev) if cuda else "cpu"
    return MatmulProbe(lambda: a @ b, wait, name,
                       "tf32" if tf32 else str(dtype).replace("torch.", ""), n)


class TorchTrainer(FeedPhases):
    """SGD + momentum on one fixed synthetic batch resident on the device."""

    def __init__(self, spec: RunSpec, rank: int = 0, world_size: int = 1) -> None:
        if spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device = 'cuda' but torch sees no CUDA device "
                               "(is the CUDA environment variant installed?)")
        self.spec = spec
        self.threads = worker_threads(spec)
        torch.set_num_threads(self.threads)
        local_rank = int(os.environ.get("DNNBENCH_LOCAL_RANK", "0"))
        self.device = torch.device(f"cuda:{local_rank}" if spec.device == "cuda" else "cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
            torch.backends.cudnn.benchmark = True
        torch.manual_seed(spec.seed)
        net = models.build(spec.model, spec.num_classes)
        self.model: nn.Module = SpecNet(net, cost(spec.model, spec.image_size,
                                                  spec.num_classes)).to(self.device)
        self.layout = resolve_layout(spec)
        self.memory_format = (torch.channels_last if self.layout == "channels_last"
                              else torch.contiguous_format)
        self.model = self.model.to(memory_format=self.memory_format)
        self.model.train()
        self.world_size = world_size
        self.distributed = spec.strategy == "allreduce"
        self.hvd = None
        self.backend = ""
        self._no_sync = None
        if self.distributed:
            self._init_ddp(spec, local_rank)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=spec.lr,
                                         momentum=spec.momentum)
        if spec.strategy == "horovod":
            self._init_horovod(spec)
        self.criterion = nn.CrossEntropyLoss()
        self.feed = None
        if spec.data:  # a real input pipeline: each step loads, decodes and copies a batch
            from frameworks.torch.data import Feed

            self.feed = Feed(spec, rank, world_size, self.device, self.memory_format)
        else:
            gen = torch.Generator().manual_seed(spec.seed + 1 + rank)  # each worker: own data
            self.host_images = torch.randn(spec.batch_size, 3, spec.image_size,
                                           spec.image_size, generator=gen)
            self.host_labels = torch.randint(0, spec.num_classes, (spec.batch_size,),
                                             generator=gen)
            if self.device.type == "cuda":
                self.host_images = self.host_images.pin_memory()
                self.host_labels = self.host_labels.pin_memory()
            self._upload()
        amp = spec.precision == "amp"
        dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        self._autocast = (lambda: torch.autocast(self.device.type, dtype=dtype)) if amp \
            else nullcontext
        self.scaler = torch.amp.GradScaler(self.device.type,
                                           enabled=amp and self.device.type == "cuda")
        self._loss: torch.Tensor | None = None
        # decided once, not per step: how Horovod joins the fused step
        self._hvd_after_backward = self.hvd is not None and spec.mode == "breakdown"
        self._hvd_amp = (self.hvd is not None and self.scaler.is_enabled()
                         and spec.mode != "breakdown")

    def _init_ddp(self, spec: RunSpec, local_rank: int) -> None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(self.backend, init_method="env://",
                                timeout=datetime.timedelta(seconds=spec.timeout_s))
        self.model = DDP(self.model, device_ids=[local_rank] if self.device.type == "cuda"
                         else None, bucket_cap_mb=DDP_BUCKET_MB, gradient_as_bucket_view=True)
        # Breakdown mode's own buckets, as DDP builds them: backward order, a 1 MiB first
        # bucket then DDP_BUCKET_MB, each one flat buffer whose slices are the gradients
        # (DDP's gradient_as_bucket_view), so t_comm is the allreduce and the average
        # alone. Flattening and copying back each step, as before, added 11 ms to
        # GoogLeNet's 23 ms (2 workers here), time DDP's own step never spends. Throughput
        # runs allocate none of it (their peak memory is DDP's own).
        self._buckets: list[tuple[torch.Tensor, list[tuple[nn.Parameter, torch.Tensor]]]] = []
        if spec.mode != "breakdown":
            return
        params = [p for p in self.model.parameters() if p.requires_grad][::-1]
        caps = (dist._DEFAULT_FIRST_BUCKET_BYTES, DDP_BUCKET_MB * 2**20)
        buckets: list[list[torch.nn.Parameter]] = [[]]
        size = 0
        for p in params:
            if size >= caps[min(len(buckets) - 1, 1)]:
                buckets.append([])
                size = 0
            buckets[-1].append(p)
            size += p.numel() * p.element_size()
        for bucket in buckets:
            flat = torch.zeros(sum(p.numel() for p in bucket), dtype=bucket[0].dtype,
                               device=self.device)
            views, offset = [], 0
            for p in bucket:
                # the parameter's own strides (channels_last too), as DDP's bucket views
                views.append((p, flat.as_strided(p.size(), p.stride(), offset)))
                offset += p.numel()
            self._buckets.append((flat, views))

    def _init_horovod(self, spec: RunSpec) -> None:
        """Horovod's DistributedOptimizer averages gradients as backward produces them
        (overlap, 64 MB fusion buffer) in throughput mode. Breakdown mode keeps the plain
        optimizer and allreduces every gradient after backward, in `communicate`, so t_comm
        is the aggregation alone."""
        import horovod.torch as hvd

        from frameworks.horovod.rendezvous import wait_then_init

        wait_then_init(hvd)
        self.hvd = hvd
        self.backend = "horovod-" + ("gloo" if hvd.gloo_enabled() else "mpi")
        if self.device.type == "cuda":
            torch.cuda.set_device(hvd.local_rank())
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        if spec.mode != "breakdown":
            self.optimizer = hvd.DistributedOptimizer(
                self.optimizer, named_parameters=self.model.named_parameters(), op=hvd.Average)
        hvd.broadcast_optimizer_state(self.optimizer, root_rank=0)

    # -- the fused step (throughput mode) ---------------------------------------------
    def step(self) -> None:
        if self.feed is not None:
            self.feed.next_batch()
            self.images, self.labels = self.feed.to_device()
        self.optimizer.zero_grad()  # set_to_none (the default; Horovod takes no argument)
        with self._autocast():
            loss = self.criterion(self.model(self.images), self.labels)
        self.scaler.scale(loss).backward()
        if self._hvd_after_backward:
            self.communicate()  # paired throughput trials of a breakdown run
        if self._hvd_amp:
            # Horovod + GradScaler: finish the allreduce before unscaling (Horovod docs)
            self.optimizer.synchronize()
            self.scaler.unscale_(self.optimizer)
            with self.optimizer.skip_synchronize():
                self.scaler.step(self.optimizer)
        else:
            self.scaler.step(self.optimizer)
        self.scaler.update()
        self._loss = loss

    # -- phases (breakdown mode) -----------------------------------------------------
    def _upload(self) -> None:
        self.images = self.host_images.to(self.device, non_blocking=True).contiguous(
            memory_format=self.memory_format)
        self.labels = self.host_labels.to(self.device, non_blocking=True)

    def forward(self) -> None:
        if self.distributed:  # breakdown: no overlap; gradients are averaged in communicate()
            self._no_sync = self.model.no_sync()
            self._no_sync.__enter__()
        else:
            self.optimizer.zero_grad()  # set_to_none (the default; Horovod takes no argument)
        with self._autocast():
            self._loss = self.criterion(self.model(self.images), self.labels)

    def backward(self) -> None:
        if self.distributed:
            # DDP's fused step writes each gradient into its bucket during backward; here
            # backward accumulates into the zeroed bucket views, so the zeroing is timed
            # with backward too (it sat in t_forward before). Installed after the forward
            # pass: DDP's first forward after a fused step rebuilds its buckets and points
            # every gradient at its own views.
            for flat, views in self._buckets:
                flat.zero_()
                for p, view in views:
                    p.grad = view
        self.scaler.scale(self._loss).backward()
        if self._no_sync is not None:
            self._no_sync.__exit__(None, None, None)
            self._no_sync = None

    def communicate(self) -> None:
        """Average gradients over workers after backward (t_comm): DDP-sized buckets
        through torch.distributed, or one grouped Horovod allreduce (Horovod fuses it)."""
        if self.hvd is not None:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            self.hvd.grouped_allreduce_(grads, op=self.hvd.Average)
            return
        if not self.distributed:
            return
        import torch.distributed as dist

        for flat, _ in self._buckets:  # backward accumulated into the buckets' views
            flat.div_(self.world_size)  # DDP's default hook: divide, then allreduce
            dist.all_reduce(flat)

    def update(self) -> None:
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def loss(self) -> float:
        return float(self._loss.detach()) if self._loss is not None else float("nan")

    def parameter_count(self) -> int:
        return trainable_parameters(self.model)

    def state_digest(self) -> str:
        """Hash of every parameter's bytes: equal across workers of a synchronous run."""
        h = hashlib.sha256()
        for p in self.model.parameters():
            h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()[:16]

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        if self.hvd is not None:
            self.hvd.shutdown()
        if self.distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    def settings(self) -> dict[str, Any]:
        return {"threads": self.threads, "interop_threads": torch.get_num_interop_threads(),
                "layout": self.layout, "device": str(self.device),
                "precision": self.spec.precision,
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "optimizer": "SGD(momentum)", "strategy": self.spec.strategy,
                "backend": self.backend or "none",
                "ddp_bucket_mb": DDP_BUCKET_MB if self.distributed else 0,
                **({"horovod_overlap": self.spec.mode != "breakdown"}
                   if self.hvd is not None else {}),
                **(self.feed.settings() if self.feed is not None else {"data": "synthetic"})}


def build_trainer(spec: RunSpec, rank: int = 0, world_size: int = 1) -> TorchTrainer:
    return TorchTrainer(spec, rank, world_size)
