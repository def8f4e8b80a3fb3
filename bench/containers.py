"""Container overhead (`python -m bench.containers`): the same torch runs (1 worker, and
2 workers with DDP) in the framework's venv and in its container image, venv and container
alternating in ABBA order round after round so machine drift hits both alike. Reported: the
median over rounds of container t_iter / venv t_iter per configuration. Target: within
5% (a container with host networking and IPC should cost nothing measurable; what can
differ is the base image's Python build and system libraries).

Needs the image (`dnnbench image build torch [--base-image local]`) and root for podman
on the reference machine.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.measure import parser, t_iter  # noqa: E402
from frameworks.contract import RunSpec, validate  # noqa: E402
from frameworks.plan import PlanContext, plan  # noqa: E402
from harness import envs, images  # noqa: E402
from harness.jobs import worker_source_root  # noqa: E402
from runners import container  # noqa: E402

TARGET = 0.05


def one(env: str, workers: int, tag: str, engine: str, a) -> float:
    spec = RunSpec("torch", a.model, batch_size=a.batch, image_size=a.image_size,
                   steps=a.steps, warmup=2, trials=a.trials, threads=1, devices_per_node=workers,
                   strategy="allreduce" if workers > 1 else "single", env=env, timeout_s=900)
    validate(spec)
    source = worker_source_root()
    if env == "venv":
        procs = plan(spec, PlanContext(envs.find("torch").python, source, "bench"))
        return t_iter(spec, procs, "local", f"venv x{workers}")
    procs = plan(spec, PlanContext(container.IMAGE_PYTHON, source, "bench"))
    return t_iter(spec, procs, "container", f"container x{workers}", image=tag, engine=engine,
                  mounts=(source,), job="dnnbench-bench")


def main() -> int:
    ap = parser(__doc__, steps=8, rounds=4)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--engine", default="auto")
    a = ap.parse_args()
    engine = images.engine(a.engine)
    tag = images.find("torch", "cpu", engine)
    out, ok = [], True
    for workers in (1, 2):
        ratios = []
        for i in range(a.rounds):
            order = ("venv", "container") if i % 2 == 0 else ("container", "venv")
            t = {env: one(env, workers, tag, engine, a) for env in order}
            ratios.append(t["container"] / t["venv"])
        r = statistics.median(ratios)
        ok = ok and abs(r - 1) <= TARGET
        out.append({"workers": workers, "container_over_venv": r, "rounds": ratios})
        print(f"torch {a.model} x{workers}: container / venv t_iter = {r:.3f} "
              f"(rounds {', '.join(f'{x:.3f}' for x in ratios)}; target 1 +- {TARGET})")
    print(json.dumps(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
