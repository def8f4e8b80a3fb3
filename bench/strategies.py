"""Data-parallel strategies side by side on the same model (`python -m bench.strategies`):
PyTorch DDP vs Horovod, TensorFlow MultiWorkerMirrored vs Horovod vs ParameterServer
(async), MXNet kvstore dist_sync vs Horovod: 2 workers x 1 thread, weak scaling, rounds
interleaved (every strategy once per round) so machine drift hits all alike. Reported:
t_iter per strategy and its ratio to the framework's own allreduce (or PS for MXNet).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.measure import parser, t_iter  # noqa: E402
from frameworks.contract import PS_STRATEGIES, SUPPORT, RunSpec, validate  # noqa: E402
from frameworks.plan import PlanContext, plan  # noqa: E402
from harness import envs  # noqa: E402
from harness.jobs import worker_source_root  # noqa: E402

#: every registered framework's distributed strategies (2 servers for a PS strategy); the
#: first of each framework is its reference
CONFIGS = [(fw, strategy, 2 if strategy in PS_STRATEGIES else 0)
           for fw, sup in SUPPORT.items() for strategy in sup.strategies if strategy != "single"]


def one(fw: str, strategy: str, ps: int, a) -> float:
    env = envs.find(fw, horovod=strategy == "horovod")
    spec = RunSpec(fw, a.model, batch_size=a.batch, image_size=a.image_size, steps=a.steps,
                   warmup=2, trials=3, strategy=strategy, ps=ps, devices_per_node=2,
                   threads=1, timeout_s=900)
    validate(spec)
    procs = plan(spec, PlanContext(env.python, worker_source_root(), "bench"))
    return t_iter(spec, procs, spec.resolved_launcher, f"{fw} {strategy}")


def main() -> int:
    a = parser(__doc__, steps=4, rounds=2).parse_args()
    times: dict[tuple, list[float]] = {c: [] for c in CONFIGS}
    for _ in range(a.rounds):
        for c in CONFIGS:
            times[c].append(one(*c, a))
    out = []
    for fw in SUPPORT:
        rows = [(c, statistics.median(times[c])) for c in CONFIGS if c[0] == fw]
        if not rows:
            continue
        ref = rows[0][1]
        for (f, strategy, ps), t in rows:
            out.append({"framework": f, "strategy": strategy, "ps": ps, "t_iter_s": t,
                        "vs_reference": t / ref})
            print(f"{f:<11} {strategy:<10} t_iter {t * 1e3:7.1f} ms  "
                  f"{2 * a.batch / t:6.1f} images/s  x{t / ref:.2f} vs {rows[0][0][1]}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
