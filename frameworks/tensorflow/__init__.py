"""TensorFlow 2 adapter (see adapter.py, imported only inside the tensorflow environment)."""

from frameworks.support import FrameworkSupport

SUPPORT = FrameworkSupport(
    display="TensorFlow", order=2, strategies=("single", "allreduce", "horovod", "ps-async"),
    import_name="tensorflow", horovod=True, xla=True,
    unsupported={"ps-sync": "TensorFlow 2 has no reliable synchronous parameter server: "
                            "ParameterServerStrategy is asynchronous, and the TF1-compat "
                            "SyncReplicasOptimizer path stalls (30 s recovery waits, "
                            "starving workers) and lost tf.compat.v1.layers under Keras 3"},
    phase_unsupported={"ps-async": "steps run remotely on the workers, scheduled by the "
                                   "chief: the phases cannot be timed apart"},
    data_unsupported={"ps-async": "each worker reads a per-worker synthetic dataset; "
                                  "real-data input is not wired for it"},
    comm_libraries={"tf-ring": "local", "tf-nccl": "local"},
    gradient_library={("allreduce", "cpu"): "tf-ring", ("allreduce", "cuda"): "tf-nccl",
                      ("horovod", "cpu"): "horovod-gloo"})
