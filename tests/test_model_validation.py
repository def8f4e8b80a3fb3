"""The performance model against real 2-process runs on this host.

Two claims, two stated tolerances (measured on this 2-core shared VM):

* Iteration model (t_iter = io + h2d + f + b + comm + u, each phase timed in the job)
  against throughput iterations that ran alternately in the same job: 20%. Observed:
  single-device within 2%, 2 DDP workers within a few percent.
* The alpha-beta prediction (compute measured in the 2-worker job, communication from the
  link fitted by a separate commbench job): 35%. Observed over 7 runs: -6.7, -7.4, -8.8,
  -7.3, -9.5, -17.3, -25.3% (the last two with other load on the machine): a consistent
  under-prediction (DDP's own bucketing/hook overhead) plus the spread of a link measured
  in another job (gloo fits of 0.74-1.26 GB/s). 35% still fails a model that ignores
  communication altogether (about -42% here). Errors are printed (pytest -s).
"""

import io

import pytest

from harness import commbench
from harness.experiment import from_dict
from harness.perfmodel.validate import ITERATION_MODEL, checks, median_abs_error
from harness.store import Store
from harness.sweep import run_experiment

ITERATION_TOLERANCE = 0.20
ALPHA_BETA_TOLERANCE = 0.35


@pytest.mark.slow
def test_predicted_vs_measured_two_workers(torch_env, tmp_path):
    exp = from_dict({
        "name": "validate",
        "defaults": {"image_size": 32, "batch_size": 8, "num_classes": 100, "steps": 16,
                     "warmup": 3, "trials": 5, "target_width": 0, "threads": 1,
                     "model": "googlenet",
                     "framework": "torch"},
        "matrix": {"strategy": ["single", "allreduce"], "devices_per_node": [1, 2],
                   "mode": ["throughput", "breakdown"]},
        "exclude": [{"strategy": "single", "devices_per_node": 2},
                    {"strategy": "allreduce", "devices_per_node": 1}]})
    with Store(tmp_path / "v.db") as store:
        commbench.run("torch-gloo", 2, commbench.parse_sizes("4..64M"), store, iters=15)
        summary = run_experiment(exp, store, out=io.StringIO())
        assert summary.ok == 4, summary
        cs = checks(store)
    multi = [c for c in cs if c.workers == 2 and not c.basis.startswith(ITERATION_MODEL)]
    assert len(multi) == 1 and "measured:torch-gloo" in multi[0].basis
    assert "compute measured in place by the 2-worker breakdown run" in multi[0].basis
    assert "alternating with the breakdown trials in the same job" in multi[0].basis
    for c in cs:
        print(f"{c.label}: measured {c.measured * 1e3:.1f} ms, predicted "
              f"{c.predicted * 1e3:.1f} ms, error {c.error:+.1%}")
        bound = ITERATION_TOLERANCE if c.basis.startswith(ITERATION_MODEL) else \
            ALPHA_BETA_TOLERANCE
        assert abs(c.error) < bound, c
    assert sum(c.basis.startswith(ITERATION_MODEL) for c in cs) == 2  # 1 and 2 workers
    print(f"median absolute error {median_abs_error(cs):.1%}")
