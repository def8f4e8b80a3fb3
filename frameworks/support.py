"""What a framework declares about itself, and how the harness finds the frameworks.

A framework is one folder, `frameworks/<name>/`, whose `__init__.py` sets
``SUPPORT = FrameworkSupport(...)`` (plain data: importing it never imports the
deep-learning framework). `registered()` discovers every such folder, so the RunSpec
choices, `dnnbench env setup`, the images, commbench, the report's names and the tests'
parameter lists all follow from the folders present: adding a framework touches nothing
outside its folder.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "amp")
LAYOUTS = ("auto", "channels_first", "channels_last")
#: CPU images start from this base; a framework names its CUDA base (cuda_base)
CPU_BASE = "docker.io/library/python:3.11-slim-bookworm"


@dataclass(frozen=True)
class FrameworkSupport:
    """What one framework can run; the single table every validation reads."""

    display: str
    strategies: tuple[str, ...]
    #: where it sorts in tables and default lists (the order frameworks were added)
    order: int = 100
    devices: tuple[str, ...] = DEVICES
    precisions: tuple[str, ...] = PRECISIONS
    layouts: tuple[str, ...] = LAYOUTS
    import_name: str = ""  # the module whose import proves the environment works
    xla: bool = False  # takes RunSpec.xla (compiles training steps with XLA on request)
    unsupported: dict[str, str] = field(default_factory=dict)  # strategy -> why not
    #: strategies whose breakdown mode / real-data input cannot work -> why not
    phase_unsupported: dict[str, str] = field(default_factory=dict)
    data_unsupported: dict[str, str] = field(default_factory=dict)
    layout_unsupported: str = ""  # why the missing layouts are missing
    #: fully qualified base image of the CUDA variant (podman refuses short names)
    cuda_base: str = "docker.io/nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"
    #: commbench libraries it provides (module frameworks.<name>.collectives) -> launcher
    comm_libraries: dict[str, str] = field(default_factory=dict)
    #: (strategy, device) -> the commbench library that carries its gradients
    gradient_library: dict[tuple[str, str], str] = field(default_factory=dict)
    #: can be built with Horovod (frameworks/horovod/build.sh knows how)
    horovod: bool = False
    #: strategy -> (bytes, gradient copies): what one worker of a multi-worker run holds
    #: beyond a 1-worker run for its communication, as measured (PSS: what it adds to the
    #: host's use); the memory check adds bytes + copies x the gradient's bytes to the
    #: cost model's estimate
    comm_memory: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: strategy -> what the run's service processes (its parameter servers and the
    #: scheduler or chief beside them) hold in all, as measured (resident): bytes per
    #: process + copies of the weights over all servers + further copies per worker (the
    #: pushes a server buffers). A strategy with servers that declares nothing gets
    #: contract.UNMEASURED_SERVICE_MEMORY, an upper guess
    service_memory: dict[str, tuple[int, float, float]] = field(default_factory=dict)
    #: where its CPU convolution kernels come from ("oneDNN": ONEDNN_MAX_CPU_ISA picks
    #: them, so `verify` can stand in for another CPU; "XLA": compiled by XLA itself)
    cpu_kernels: str = "oneDNN"


FRAMEWORKS_DIR = Path(__file__).resolve().parent


@cache
def registered() -> dict[str, FrameworkSupport]:
    """Every framework folder that declares SUPPORT, in their declared order."""
    found: dict[str, FrameworkSupport] = {}
    for info in pkgutil.iter_modules([str(FRAMEWORKS_DIR)]):
        if not info.ispkg:
            continue
        module = importlib.import_module(f"frameworks.{info.name}")
        support = getattr(module, "SUPPORT", None)
        if isinstance(support, FrameworkSupport):
            found[info.name] = support
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))
