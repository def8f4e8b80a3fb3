"""MXNet 1.9 adapter (see adapter.py, imported only inside the mxnet environment)."""

from frameworks.support import FrameworkSupport

SUPPORT = FrameworkSupport(
    display="MXNet", order=3, strategies=("single", "horovod", "ps-sync", "ps-async"),
    import_name="mxnet", horovod=True,
    # MXNet 1.9.1 is built for CUDA 11.2: its base is CUDA 11.8 (11.x compatible)
    cuda_base="docker.io/nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04",
    unsupported={"allreduce": "MXNet's own allreduce (kvstore 'device'/'nccl') reduces "
                              "across the GPUs of one process; across processes MXNet "
                              "aggregates through its parameter server (ps-sync) or "
                              "Horovod (strategy 'horovod')"},
    comm_libraries={"mxnet-kvstore": "local"},
    gradient_library={("horovod", "cpu"): "horovod-gloo"})
