"""The performance model against real 2-process runs on this host.

Stated tolerance: 20% per configuration. Measured here (2-core shared VM, 4 repeats of
this test): the 2-worker prediction erred by -6.7%, -7.4%, -8.8% and -8.x% (a small
systematic under-prediction: DDP's own overhead beyond the allreduce), single-device by
under 2%. Short measurements (8 steps, 5 commbench iterations) swung by up to 30%, hence
16 steps and 15 iterations. The errors are printed (pytest -s) and shown in the report.
"""

import io

import pytest

from harness import commbench
from harness.experiment import from_dict
from harness.perfmodel.validate import checks, median_abs_error
from harness.store import Store
from harness.sweep import run_experiment

TOLERANCE = 0.20


@pytest.mark.slow
def test_predicted_vs_measured_two_workers(torch_env, tmp_path):
    exp = from_dict({
        "name": "validate",
        "defaults": {"image_size": 32, "batch_size": 8, "num_classes": 100, "steps": 16,
                     "warmup": 3, "trials": 3, "threads": 1, "model": "googlenet",
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
    multi = [c for c in cs if c.workers == 2]
    assert len(multi) == 1 and "measured:torch-gloo" in multi[0].basis
    assert "compute measured in place by the 2-worker breakdown run" in multi[0].basis
    for c in cs:
        print(f"{c.label}: measured {c.measured * 1e3:.1f} ms, predicted "
              f"{c.predicted * 1e3:.1f} ms, error {c.error:+.1%}")
        assert abs(c.error) < TOLERANCE, c
    print(f"median absolute error {median_abs_error(cs):.1%}")
