"""JAX adapter: Flax NNX networks, optax SGD, one jitted training step (see adapter.py,
imported only inside the jax environment)."""

from frameworks.support import FrameworkSupport

_NO_PS = "JAX has no parameter server (never substituted by another strategy)"
SUPPORT = FrameworkSupport(
    display="JAX", order=4, strategies=("single", "allreduce"), import_name="jax",
    layouts=("auto", "channels_last"), cpu_kernels="XLA",
    layout_unsupported="Flax convolutions take NHWC (channels_last) arrays; XLA picks the "
                       "physical layout of intermediates itself",
    unsupported={"horovod": "Horovod has no JAX binding; use strategy 'allreduce' "
                            "(jax.distributed + a pmean of gradients)",
                 "ps-sync": _NO_PS, "ps-async": _NO_PS},
    comm_libraries={"jax-gloo": "local", "jax-nccl": "local"},
    gradient_library={("allreduce", "cpu"): "jax-gloo", ("allreduce", "cuda"): "jax-nccl"})
