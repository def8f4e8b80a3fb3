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
    # ps-lite's servers and scheduler, resident (largest telemetry sample per process,
    # summed over the run's servers; every shipped run in experiments/measured/, 2026-12):
    # 110-122 MiB a scheduler, 120-140 MiB a server holding HEP-CNN's 2 MiB; beyond that
    # 3.1-4.6 copies of the weights at 1 worker, and up to one more per worker (AlexNet
    # 4.6 / 5.6 / 11.0 copies at 1 / 2 / 8 workers, ResNet-50 3.9 -> 7.9 at 1 -> 6). On
    # one Intel VM (2026-12-07, the *-intel sets) the same processes held 186-187 MiB a
    # scheduler and up to 208 a HEP-CNN server in every run of three sweeps, and 112 / 124
    # MiB an hour later on that machine, the same configuration (its workers too held 76
    # MiB more in those sweeps). Measured since (`python -m bench.page_cache_rss`): the
    # page cache's state. Those sweeps ran within the hour after pip had written
    # libmxnet.so, and a file read whole (pip writing it, `cat`) is cached so that
    # `import mxnet` maps 147 MiB of it where, after the pages were evicted and faulted
    # back in, it maps 68; its anonymous memory 59 MiB either way. Telemetry stores the
    # anonymous pages since (anon_bytes, at full scans). Rounded up over every shipped run
    # (208 MiB: the largest holds 0.90 of the estimate, the smallest 0.52), so
    # tests/test_contract.py holds the estimate above each and not more than twice what
    # any held
    service_memory={"ps-sync": (208 * 2**20, 4.0, 1.0), "ps-async": (208 * 2**20, 4.0, 1.0)},
    gradient_library={("horovod", "cpu"): "horovod-gloo"})
