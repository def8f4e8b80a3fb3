"""Communication libraries vs raw MPI on the same buffers (`python -m bench.comm_ratio`).

Each library's allreduce (PS push+pull for the MXNet kvstore) is measured through
`dnnbench commbench` alternating with mpi4py's MPI_Allreduce (the reference: Open MPI's
shared-memory path), ABAB over `--rounds`, 2 ranks; reported: the median ratio of bus
bandwidth to MPI's at each size >= 1 MiB, and the small-message latency ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import commbench  # noqa: E402

LIBS = "torch-gloo,horovod-gloo,horovod-mpi,tf-ring,mxnet-kvstore"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--libraries", default=LIBS)
    ap.add_argument("--sizes", default="4,1M,16M,64M")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    a = ap.parse_args()
    sizes = commbench.parse_sizes(a.sizes)
    out = []
    for lib in [x.strip() for x in a.libraries.split(",") if x.strip()]:
        ratios: dict[int, list[float]] = {s: [] for s in sizes}
        for _ in range(a.rounds):
            ref = commbench.run("mpi", 2, sizes, iters=a.iters, timeout=600)
            res = commbench.run(lib, 2, sizes, iters=a.iters, timeout=600)
            for r_ref, r in zip(ref.rows, res.rows):
                ratios[r["bytes"]].append(r_ref["median_s"] / r["median_s"])
        med = {s: statistics.median(v) for s, v in ratios.items()}
        out.append({"library": lib, "speed_vs_mpi": med})
        big = [v for s, v in med.items() if s >= 2**20]
        print(f"{lib:<14} bandwidth vs MPI (>= 1 MiB): "
              + ", ".join(f"{s / 2**20:g} MiB {v:.2f}x" for s, v in med.items() if s >= 2**20)
              + f"; median {statistics.median(big):.2f}x; 4-byte latency vs MPI: "
              f"{1 / med[min(sizes)]:.0f}x slower")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
