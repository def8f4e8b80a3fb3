"""``python -m frameworks.tensorflow.ps_server``: one TensorFlow server (a parameter
server or a worker of ParameterServerStrategy), serving until the launcher stops it.

Reads its job and index from TF_CONFIG; the chief (the process running the timed loop)
places variables on the ps tasks and schedules steps on the workers.
"""

from __future__ import annotations

import json
import os


def main() -> None:
    import tensorflow as tf

    threads = int(os.environ.get("DNNBENCH_THREADS", "1"))
    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(min(2, threads))
    # The server's own pools come from this ConfigProto, not from tf.config.threading
    # (which sets the eager context's), and default to the CPUs the process may run on.
    # On an emulated host of one core (cpus_per_host <= 1: its cpuset) that is one
    # thread, which the handler of the chief's step request holds while it waits for the
    # step function's ops, queued behind it: every such run hung in its first trial with
    # its processes idle (2026-12-02: 1 host at 1.0 CPU; at 2.0 it ran). Two inter-op
    # threads mostly wait, so they add no compute beyond the intra-op pool.
    server_config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=2,
                                             intra_op_parallelism_threads=threads)
    server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]),
                                  job_name=task["type"], task_index=task["index"],
                                  protocol="grpc", config=server_config, start=True)
    print(f"tensorflow {task['type']} {task['index']} serving on "
          f"{config['cluster'][task['type']][task['index']]}", flush=True)
    server.join()


if __name__ == "__main__":
    main()
