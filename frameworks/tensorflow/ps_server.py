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
    server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]),
                                  job_name=task["type"], task_index=task["index"],
                                  protocol="grpc", start=True)
    print(f"tensorflow {task['type']} {task['index']} serving on "
          f"{config['cluster'][task['type']][task['index']]}", flush=True)
    server.join()


if __name__ == "__main__":
    main()
