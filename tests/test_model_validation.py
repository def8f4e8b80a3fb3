"""The performance model against real 2-process runs on this host.

Stated tolerance: 25% per configuration. Reason: on this 2-core shared VM, the same
configuration in two separate processes differs by up to ~15% (measured; see the issue
notes), so a tighter bound would test the machine, not the model. The measured errors are
printed (pytest -s) and recorded in the report; the tolerance is not tuned to pass.
"""

import io

import pytest

from harness import commbench
from harness.experiment import from_dict
from harness.perfmodel.validate import checks, median_abs_error
from harness.store import Store
from harness.sweep import run_experiment

TOLERANCE = 0.25


@pytest.mark.slow
def test_predicted_vs_measured_two_workers(torch_env, tmp_path):
    exp = from_dict({
        "name": "validate",
        "defaults": {"image_size": 32, "batch_size": 8, "num_classes": 100, "steps": 8,
                     "warmup": 3, "trials": 3, "threads": 1, "model": "googlenet",
                     "framework": "torch"},
        "matrix": {"strategy": ["single", "allreduce"], "devices_per_node": [1, 2],
                   "mode": ["throughput", "breakdown"]},
        "exclude": [{"strategy": "single", "devices_per_node": 2},
                    {"strategy": "allreduce", "devices_per_node": 1},
                    {"strategy": "allreduce", "mode": "breakdown"}]})
    with Store(tmp_path / "v.db") as store:
        commbench.run("torch-gloo", 2, commbench.parse_sizes("4..64M"), store, iters=5)
        summary = run_experiment(exp, store, out=io.StringIO())
        assert summary.ok == 3, summary
        cs = checks(store)
    multi = [c for c in cs if c.workers == 2]
    assert len(multi) == 1 and "measured:torch-gloo" in multi[0].basis
    for c in cs:
        print(f"{c.label}: measured {c.measured * 1e3:.1f} ms, predicted "
              f"{c.predicted * 1e3:.1f} ms, error {c.error:+.1%}")
        assert abs(c.error) < TOLERANCE, c
    print(f"median absolute error {median_abs_error(cs):.1%}")
