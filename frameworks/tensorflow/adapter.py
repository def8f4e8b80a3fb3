"""TensorFlow 2 adapter: the only module that imports TensorFlow for training.

Best settings by device, recorded in the result: custom tf.function + GradientTape steps
(Keras 3 `fit` breaks under distribution strategies, keras#20585); channels_last on CPU
(TF has no NCHW max-pool gradient on CPU) and with AMP on GPU, channels_first for fp32 on
GPU; XLA off unless asked (1.3-3.4x slower on this project's reference CPU); intra-op
threads = the worker's share of the cores; mixed_float16 + loss scaling for AMP on GPU,
mixed_bfloat16 on CPU.
"""

from __future__ import annotations

import hashlib
import os
import platform
from typing import Any

import numpy as np

import models
from frameworks.contract import RunSpec, worker_threads
from frameworks.timing import FeedPhases
from models.cost import cost

_threads_set = False


def _configure_threads(threads: int) -> None:
    """Must happen before TensorFlow runs any op; later calls are ignored."""
    global _threads_set
    import tensorflow as tf

    if not _threads_set:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
        _threads_set = True


def resolve_layout(spec: RunSpec) -> str:
    if spec.layout != "auto":
        return spec.layout
    if spec.device == "cuda" and spec.precision == "fp32":
        return "channels_first"
    return "channels_last"


def environment(spec: RunSpec) -> dict[str, Any]:
    _configure_threads(worker_threads(spec))
    import keras
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    env: dict[str, Any] = {"framework": "tensorflow", "framework_version": tf.__version__,
                           "keras_version": keras.__version__,
                           "python": platform.python_version(),
                           "onednn": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
                           "gpus": len(tf.config.list_physical_devices("GPU"))}
    if spec.device == "cuda":
        env.update(cuda=info.get("cuda_version"), cudnn=info.get("cudnn_version"))
    if spec.strategy == "horovod":
        from frameworks.horovod import build_info

        env.update(build_info("horovod.tensorflow"))
    return env


def matmul_probe(spec: RunSpec, n: int):
    """One n x n matmul on the run's device: float16 under AMP on GPU (the mixed_float16
    policy's compute type), else float32, which TensorFlow runs as TF32 on GPUs that have
    it unless TF32 execution was turned off."""
    import tensorflow as tf

    from frameworks.peak import MatmulProbe

    gpu = spec.device == "cuda"
    dtype = tf.float16 if gpu and spec.precision == "amp" else tf.float32
    device = "/GPU:0" if gpu else "/CPU:0"
    with tf.device(device):
        a = tf.random.normal((n, n), dtype=dtype)
        b = tf.random.normal((n, n), dtype=dtype)
    # the matrices are arguments, not captured constants: Grappler would fold a matmul of
    # two constants once, and every later call would return the cached result
    matmul = tf.function(lambda x, y: tf.matmul(x, y))

    def run():
        with tf.device(device):
            return matmul(a, b)

    def wait(out) -> None:
        out[0, 0].numpy()  # one element: waits for the kernel, copies 4 bytes

    name = "cpu"
    if gpu:
        details = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[0])
        name = details.get("device_name", "GPU")
    tf32 = gpu and dtype == tf.float32 and \
        tf.config.experimental.tensor_float_32_execution_enabled()
    return MatmulProbe(run, wait, name, "tf32" if tf32 else dtype.name, n)


class TensorFlowTrainer(FeedPhases):
    """SGD + momentum on one fixed synthetic batch resident on the device."""

    backward_includes_forward = True  # the gradient tf.function re-runs the forward pass

    def __init__(self, spec: RunSpec, rank: int = 0, world_size: int = 1,
                 dropout: bool = True, xla: bool | None = None) -> None:
        self.spec = spec
        self.threads = worker_threads(spec)
        _configure_threads(self.threads)
        import keras
        import tensorflow as tf

        self.tf = tf
        gpus = tf.config.list_physical_devices("GPU")
        if spec.device == "cuda" and not gpus:
            raise RuntimeError("device = 'cuda' but TensorFlow sees no GPU (is the CUDA "
                               "environment variant installed?)")
        if spec.device == "cpu" and gpus:
            tf.config.set_visible_devices([], "GPU")
        if spec.precision == "amp":
            keras.mixed_precision.set_global_policy(
                "mixed_float16" if spec.device == "cuda" else "mixed_bfloat16")
        self.strategy = None
        self.placement: list[list] = []
        if spec.strategy == "allreduce":
            # TF_CONFIG (frameworks/tensorflow/plan.py) names the cluster; ring collectives
            # on CPU, NCCL on GPU. Must exist before the model's variables.
            tf_config_from_task_addresses(rank)
            impl = tf.distribute.experimental.CommunicationImplementation
            self.strategy = tf.distribute.MultiWorkerMirroredStrategy(
                communication_options=tf.distribute.experimental.CommunicationOptions(
                    implementation=impl.NCCL if spec.device == "cuda" else impl.RING))
        elif spec.strategy == "ps-async":
            # This process is the chief: variables live on the ps tasks (round-robin, no
            # partitioner), steps are scheduled on the workers, each of which applies its
            # own gradients: asynchronous SGD by design.
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            self.strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
            self.coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(
                self.strategy)
        keras.utils.set_random_seed(spec.seed)
        self.layout = resolve_layout(spec)
        channels_last = self.layout == "channels_last"
        if not channels_last and spec.device == "cpu":
            raise RuntimeError("layout = 'channels_first' is unsupported by TensorFlow on CPU "
                               "(no NCHW max-pool gradient kernel); use channels_last or auto")
        net = models.build(spec.model, spec.num_classes)
        from contextlib import nullcontext

        from frameworks.tensorflow.build import build_model

        with self.strategy.scope() if self.strategy is not None else nullcontext():
            self.model, self.owners = build_model(
                net, cost(spec.model, spec.image_size, spec.num_classes), channels_last,
                dropout)
            opt = keras.optimizers.SGD(learning_rate=spec.lr, momentum=spec.momentum)
            if spec.precision == "amp" and spec.device == "cuda":
                opt = keras.mixed_precision.LossScaleOptimizer(opt)
            if spec.strategy == "ps-async":
                # the momentum slots now, inside the scope, so they live on the ps tasks
                # beside their variables: Keras creates them lazily at the first
                # apply_gradients, which ParameterServerStrategy traces on the chief, and
                # they landed on the chief (measured 2026-12-02: the chief's host sent two
                # gradients' worth per worker step, as much as the ps task's)
                opt.build(self.model.trainable_variables)
            self.optimizer = opt
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        rng = np.random.default_rng(spec.seed + 1 + rank)
        shape = (spec.batch_size, spec.image_size, spec.image_size, 3) if channels_last \
            else (spec.batch_size, 3, spec.image_size, spec.image_size)
        device = "/GPU:0" if spec.device == "cuda" else "/CPU:0"
        self.feed = None
        if spec.data:  # a real input pipeline: each step loads, decodes and copies a batch
            from frameworks.tensorflow.data import Feed

            self.feed = Feed(spec, rank, world_size, device, channels_last)
            self.feed.next_batch()
            self.images, self.labels = self.feed.to_device()  # traces the step's shapes
        else:
            with tf.device(device):
                self.images = tf.constant(rng.standard_normal(shape, dtype=np.float32))
                self.labels = tf.constant(rng.integers(0, spec.num_classes, spec.batch_size,
                                                       dtype=np.int64))
        self.xla = spec.xla if xla is None else xla
        self.hvd = None
        if spec.strategy == "horovod":
            # horovod.tensorflow + DistributedGradientTape (horovod.tensorflow.keras does not
            # work with Keras 3); replicas start from rank 0's weights.
            import horovod.tensorflow as hvd

            from frameworks.horovod.rendezvous import wait_then_init

            wait_then_init(hvd)
            self.hvd = hvd
            # Keras 3 variables wrap a tf.Variable (.value): Horovod assigns to those
            hvd.broadcast_variables([v.value for v in self.model.variables], root_rank=0)
        self._compile()
        self._loss = None
        self._grads = None

    def _compile(self) -> None:
        tf = self.tf
        model, loss_fn, opt = self.model, self.loss_fn, self.optimizer
        variables = model.trainable_variables
        scaled = hasattr(opt, "scale_loss")

        def loss_of(x, y, training=True):
            logits = model(x, training=training)
            return loss_fn(y, tf.cast(logits, tf.float32))

        strategy = self.strategy
        # MultiWorkerMirrored sums the replicas' gradients: dividing each replica's loss by
        # the replica count makes the sum the average, as DDP and Horovod compute it.
        replicas = strategy.num_replicas_in_sync if self.spec.strategy == "allreduce" else 1

        def grads_of(x, y):
            with tf.GradientTape() as tape:
                loss = loss_of(x, y)
                objective = loss / replicas if replicas > 1 else loss
                scaled_loss = opt.scale_loss(objective) if scaled else objective
            return loss, tape.gradient(scaled_loss, variables)

        hvd = self.hvd
        overlap = hvd is not None and self.spec.mode != "breakdown"

        def step(x, y):
            if overlap:  # Horovod allreduces each gradient as the tape produces it
                with tf.GradientTape() as tape:
                    loss = loss_of(x, y)
                    scaled_loss = opt.scale_loss(loss) if scaled else loss
                tape = hvd.DistributedGradientTape(tape, op=hvd.Average)
                # Horovod keys sources by tf.Variable.ref(): differentiate w.r.t. the
                # tf.Variables inside the Keras 3 variables (the same gradients)
                grads = tape.gradient(scaled_loss, [v.value for v in variables])
            else:
                loss, grads = grads_of(x, y)
                if hvd is not None:
                    grads = hvd.grouped_allreduce(grads, op=hvd.Average)
            opt.apply_gradients(zip(grads, variables))
            return loss

        if self.spec.strategy == "ps-async":
            self._compile_ps(step)
            return
        if strategy is not None:
            self._compile_mirrored(strategy, step, loss_of, grads_of)
            return
        jit = self.xla
        self._step = tf.function(step, jit_compile=jit)
        self._forward = tf.function(loss_of, jit_compile=jit)
        self._grads_fn = tf.function(grads_of, jit_compile=jit)
        self._apply = tf.function(lambda grads: opt.apply_gradients(zip(grads, variables)),
                                  jit_compile=jit)
        if hvd is not None:
            self._allreduce = tf.function(
                lambda grads: hvd.grouped_allreduce(grads, op=hvd.Average))

    def _compile_mirrored(self, strategy, step, loss_of, grads_of) -> None:
        """MultiWorkerMirroredStrategy: every phase runs per replica via strategy.run.
        The fused step lets Keras all-reduce the gradients inside apply_gradients (the
        collective runs as the step's graph allows); breakdown mode all-reduces them
        explicitly in `communicate` and applies them from the cross-replica context, where
        Keras does not aggregate a second time."""
        tf = self.tf
        opt, variables = self.optimizer, self.model.trainable_variables
        run = strategy.run
        total = tf.distribute.ReduceOp.SUM

        def allreduce(grads):
            # identity places the graph inputs on the replica's device (the collective
            # needs a device to reduce to)
            return tf.distribute.get_replica_context().all_reduce(
                total, [tf.identity(g) for g in grads])

        self._step = tf.function(lambda x, y: run(step, args=(x, y)))
        self._forward = tf.function(lambda x, y: run(loss_of, args=(x, y)))
        self._grads_fn = tf.function(lambda x, y: run(grads_of, args=(x, y)))
        self._allreduce = tf.function(lambda grads: run(allreduce, args=(grads,)))
        self._apply = tf.function(lambda grads: opt.apply_gradients(zip(grads, variables)))

    def _compile_ps(self, step) -> None:
        """ParameterServerStrategy: each worker reads its own copy of the synthetic batch
        (a per-worker dataset) and runs the whole step remotely; one timed iteration
        schedules one step on every worker, so images per iteration = the global batch."""
        tf = self.tf
        images, labels = self.images.numpy(), self.labels.numpy()
        strategy, coordinator = self.strategy, self.coordinator

        def dataset_fn():
            return tf.data.Dataset.from_tensors((images, labels)).repeat()

        self._iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

        @tf.function
        def remote_step(iterator):
            x, y = next(iterator)
            return strategy.run(step, args=(x, y))

        self._remote_step = remote_step
        self._remote = None
        self.placement = self._ps_placement()

    def _ps_placement(self) -> list[list]:
        """[variable, bytes, ps task] as TensorFlow placed them (round-robin)."""
        out = []
        for v in self.model.trainable_variables:
            device = v.value.device
            task = int(device.split("task:")[1].split("/")[0]) if "task:" in device else -1
            out.append([v.path, int(np.prod(v.shape)) * 4, task])
        return out

    # -- the fused step (throughput mode) ---------------------------------------------
    def step(self) -> None:
        if self.spec.strategy == "ps-async":
            for _ in range(self.spec.workers):
                self._remote = self.coordinator.schedule(self._remote_step,
                                                         args=(self._iterator,))
            return
        if self.feed is not None:
            self.feed.next_batch()
            self.images, self.labels = self.feed.to_device()
        self._loss = self._step(self.images, self.labels)

    # -- phases (breakdown mode) -----------------------------------------------------
    def forward(self) -> None:
        self._loss = self._forward(self.images, self.labels)

    def backward(self) -> None:
        self._loss, self._grads = self._grads_fn(self.images, self.labels)

    def communicate(self) -> None:
        """Average the gradients over workers after backward (t_comm): Horovod's or the
        strategy's all-reduce; one worker: no aggregation."""
        if self.hvd is not None or self.strategy is not None:
            self._grads = self._allreduce(self._grads)

    def update(self) -> None:
        self._apply(self._grads)

    def synchronize(self) -> None:
        if self.spec.strategy == "ps-async":
            self.coordinator.join()  # every scheduled step has finished on its worker
        elif self.spec.device == "cuda":
            self.tf.test.experimental.sync_devices()

    def loss(self) -> float:
        if self.spec.strategy == "ps-async":
            return float(self._remote.fetch()) if self._remote is not None else float("nan")
        return float(self._loss) if self._loss is not None else float("nan")

    def parameter_count(self) -> int:
        return int(sum(np.prod(v.shape) for v in self.model.trainable_variables))

    def state_digest(self) -> str:
        h = hashlib.sha256()
        for v in self.model.trainable_variables:
            h.update(np.asarray(v.numpy(), dtype=np.float32).tobytes())
        return h.hexdigest()[:16]

    def settings(self) -> dict[str, Any]:
        return {"threads": self.threads,
                "inter_op_threads": self.tf.config.threading.get_inter_op_parallelism_threads(),
                "layout": self.layout, "device": self.spec.device,
                "precision": self.spec.precision, "xla": self.xla,
                "optimizer": "SGD(momentum)", "strategy": self.spec.strategy,
                "distribution": {"allreduce": "MultiWorkerMirroredStrategy",
                                 "ps-async": "ParameterServerStrategy (asynchronous)"}.get(
                                     self.spec.strategy, "none"),
                **({"ps_tasks": self.spec.ps, "ps_placement": "round-robin (no partitioner)"}
                   if self.spec.strategy == "ps-async" else {}),
                "training_step": "tf.function + GradientTape"
                + (" (Horovod DistributedGradientTape)" if self.hvd is not None
                   and self.spec.mode != "breakdown" else ""),
                **(self.feed.settings() if self.feed is not None else {"data": "synthetic"})}

    def close(self) -> None:
        if self.feed is not None:
            self.feed.close()
        if self.hvd is not None:
            self.hvd.shutdown()


def tf_config_from_task_addresses(rank: int) -> None:
    """Under Slurm every task shares one environment, so TF_CONFIG cannot be set per task
    by the launcher: the batch script exports every worker's address in task order
    (DNNBENCH_TASK_ADDRS, runners/slurm.py) and each worker builds its own from it."""
    addrs = os.environ.get("DNNBENCH_TASK_ADDRS", "")
    if addrs and "TF_CONFIG" not in os.environ:
        from frameworks.tensorflow.plan import tf_config

        os.environ["TF_CONFIG"] = tf_config(addrs.split(","), rank)


def build_trainer(spec: RunSpec, rank: int = 0, world_size: int = 1) -> TensorFlowTrainer:
    return TensorFlowTrainer(spec, rank, world_size)
