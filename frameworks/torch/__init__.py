"""PyTorch adapter (see adapter.py, imported only inside the torch environment)."""

from frameworks.support import FrameworkSupport

_NO_PS = "PyTorch has no native parameter server"
SUPPORT = FrameworkSupport(
    display="PyTorch", order=1, strategies=("single", "allreduce", "horovod"),
    import_name="torch", horovod=True,
    unsupported={"ps-sync": _NO_PS, "ps-async": _NO_PS},
    comm_libraries={"torch-gloo": "local", "torch-nccl": "local"},
    gradient_library={("allreduce", "cpu"): "torch-gloo", ("allreduce", "cuda"): "torch-nccl",
                      ("horovod", "cpu"): "horovod-gloo"})
