"""TensorFlow's collective all-reduce for commbench: the MultiWorkerMirroredStrategy path
training uses (TF_CONFIG cluster, ring on CPU, NCCL on GPU), one replica per process."""

from __future__ import annotations

import os

import tensorflow as tf

_strategy = None
_reduce = None


def setup(job: dict) -> tuple[int, int]:
    global _strategy, _reduce
    threads = int(os.environ.get("DNNBENCH_THREADS", "1"))
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    impl = tf.distribute.experimental.CommunicationImplementation
    _strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=impl.NCCL if job["library"] == "tf-nccl" else impl.RING))

    def replica(x):
        return tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(x))

    _reduce = tf.function(lambda x: _strategy.run(replica, args=(x,)))
    task = _strategy.cluster_resolver.task_id
    return int(task), int(_strategy.num_replicas_in_sync)


def buffer(nbytes: int, fill: float):
    return [tf.fill([max(1, nbytes // 4)], tf.constant(fill, tf.float32))]


def allreduce(buf) -> None:
    # A tensor is immutable: the result replaces the buffer's content for the check.
    buf[0] = _reduce(buf[0])
    buf[0].numpy()  # wait for the collective to finish


def barrier() -> None:
    _reduce(tf.zeros([1])).numpy()


def check(buf, expected: float) -> bool:
    return bool(tf.reduce_all(buf[0] == expected).numpy())


def teardown() -> None:
    pass
