"""PyTorch adapter: the only module that imports torch for training.

Best settings by device, all recorded in the result: explicit intra-op threads;
cudnn.benchmark on CUDA; channels_last on CUDA and for large inputs on CPU (measured on
this project's reference CPU: +14% at 224 px, -10% at 64 px; sweep `layout` to check
yours); autocast + GradScaler for `precision = "amp"` (bfloat16 autocast on CPU).
"""

from __future__ import annotations

import os
import platform
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

import models
from frameworks.contract import RunSpec
from frameworks.torch.build import SpecNet, trainable_parameters
from models.cost import cost

CPU_CHANNELS_LAST_MIN_PX = 128


def _threads(spec: RunSpec) -> int:
    return spec.threads or int(os.environ.get("DNNBENCH_THREADS", "0")) or (os.cpu_count() or 1)


def resolve_layout(spec: RunSpec) -> str:
    if spec.layout != "auto":
        return spec.layout
    if spec.device == "cuda" or spec.image_size >= CPU_CHANNELS_LAST_MIN_PX:
        return "channels_last"
    return "channels_first"


def environment(spec: RunSpec) -> dict[str, Any]:
    """Versions and device facts for the run's manifest."""
    env: dict[str, Any] = {
        "framework": "torch", "framework_version": torch.__version__,
        "python": platform.python_version(),
        "mkldnn": torch.backends.mkldnn.is_available(),
        "cuda_available": torch.cuda.is_available(),
    }
    if spec.device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                   nccl=".".join(map(str, torch.cuda.nccl.version())),
                   gpu=props.name, gpu_memory_bytes=props.total_memory,
                   gpu_count=torch.cuda.device_count())
    return env


class TorchTrainer:
    """SGD + momentum on one fixed synthetic batch resident on the device."""

    def __init__(self, spec: RunSpec, rank: int = 0, world_size: int = 1) -> None:
        if spec.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device = 'cuda' but torch sees no CUDA device "
                               "(is the CUDA environment variant installed?)")
        self.spec = spec
        self.threads = _threads(spec)
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
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=spec.lr,
                                         momentum=spec.momentum)
        self.criterion = nn.CrossEntropyLoss()
        gen = torch.Generator().manual_seed(spec.seed + 1)
        self.host_images = torch.randn(spec.batch_size, 3, spec.image_size, spec.image_size,
                                       generator=gen)
        self.host_labels = torch.randint(0, spec.num_classes, (spec.batch_size,), generator=gen)
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

    # -- the fused step (throughput mode) ---------------------------------------------
    def step(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            loss = self.criterion(self.model(self.images), self.labels)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self._loss = loss

    # -- phases (breakdown mode) -----------------------------------------------------
    def next_batch(self) -> None:
        """Synthetic data: the batch already exists (t_io = 0)."""

    def to_device(self) -> None:
        """Synthetic data stays resident on the device, as in both papers (t_h2d = 0)."""

    def _upload(self) -> None:
        self.images = self.host_images.to(self.device, non_blocking=True).contiguous(
            memory_format=self.memory_format)
        self.labels = self.host_labels.to(self.device, non_blocking=True)

    def forward(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        with self._autocast():
            self._loss = self.criterion(self.model(self.images), self.labels)

    def backward(self) -> None:
        self.scaler.scale(self._loss).backward()

    def communicate(self) -> None:
        """One worker: no gradient aggregation."""

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

    def settings(self) -> dict[str, Any]:
        return {"threads": self.threads, "interop_threads": torch.get_num_interop_threads(),
                "layout": self.layout, "device": str(self.device),
                "precision": self.spec.precision,
                "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
                "optimizer": "SGD(momentum)"}


def build_trainer(spec: RunSpec, rank: int = 0, world_size: int = 1) -> TorchTrainer:
    return TorchTrainer(spec, rank, world_size)
