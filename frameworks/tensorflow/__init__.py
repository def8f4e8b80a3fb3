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
                      ("horovod", "cpu"): "horovod-gloo"},
    # MultiWorkerMirrored holds far more than its gradients: measured per worker (PSS)
    # beyond the 1-worker run, AlexNet 2.1 GiB (0.21 GiB of gradients), ResNet-50 1.8,
    # GoogLeNet 0.4 (experiments/measured/, 2026-12). 8 AlexNet workers at 64 px were
    # killed by the kernel on a 23.5 GiB host; 8 ResNet-50 workers (20.6 GiB) ran. These
    # values refuse the first there and keep the second (tests/test_contract.py)
    comm_memory={"allreduce": (512 * 2**20, 12.0)},
    # ParameterServerStrategy's chief and ps tasks, resident (largest telemetry sample):
    # ResNet-50 at 32 px (90 MiB of weights), 2 workers + 1 ps: chief 611 MiB, ps 1384;
    # 4 workers + 2 ps: chief 613, ps 1493 and 1202 (2026-12-04, Intel VM, `dnnbench run
    # --framework tensorflow --strategy ps-async --model resnet50 --image-size 32 --batch 8
    # --classes 10 --nodes 2 --ps 1`, and `--nodes 4 --ps 2`). A ps task is mostly its
    # runtime: 1.5 GiB per process covers them, the chief counted as one
    service_memory={"ps-async": (1536 * 2**20, 4.0, 1.0)})
