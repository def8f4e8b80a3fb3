"""Communication micro-benchmark driver: ``python -m frameworks.commbench``.

One driver for every library (the nccl-tests shape): a library module only supplies
`setup()`, `buffer(nbytes, fill)`, `allreduce(buf)`, `barrier()`, `check(buf, expected)`
and `teardown()`; sizes, warm-up, timing, correctness checking and output live here.
The job is read from DNNBENCH_COMM (JSON: library, sizes, iters, warmup).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time

from frameworks import events
from frameworks.contract import SUPPORT

#: library name -> module providing the collective operations: MPI and Horovod here, each
#: framework's own libraries (SUPPORT.comm_libraries) in frameworks/<fw>/collectives.py
LIBRARIES = {"mpi": "frameworks.mpi_collectives",
             "horovod-gloo": "frameworks.horovod.collectives",
             "horovod-mpi": "frameworks.horovod.collectives",
             **{lib: f"frameworks.{fw}.collectives" for fw, sup in SUPPORT.items()
                for lib in sup.comm_libraries}}


def main() -> int:
    job = json.loads(os.environ["DNNBENCH_COMM"])
    lib = importlib.import_module(LIBRARIES[job["library"]])
    try:
        rank, size = lib.setup(job)
        for nbytes in job["sizes"]:
            buf = lib.buffer(nbytes, rank + 1.0)
            expected = size * (size + 1) / 2.0
            lib.allreduce(buf)
            wrong = 0 if lib.check(buf, expected) else 1
            for _ in range(job.get("warmup", 2)):
                lib.allreduce(buf)
            times = []
            for _ in range(job.get("iters", 10)):
                lib.barrier()
                t0 = time.perf_counter()
                lib.allreduce(buf)
                times.append(time.perf_counter() - t0)
            events.comm(rank, getattr(lib, "OP", "allreduce"), job["library"], size, nbytes, times,
                        wrong)
        events.done(rank)
    except Exception as exc:  # noqa: BLE001 - reported as a record
        events.report_exception(exc)
        return 1
    finally:
        lib.teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
