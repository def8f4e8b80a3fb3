"""`dnnbench verify`: the same weights give the same function in every framework, and
the check demonstrably fails when one framework's weights are perturbed."""

import sqlite3

from harness import verify
from tests.conftest import FRAMEWORKS, run_cli


def test_all_networks_match_in_all_frameworks(all_envs, tmp_path):
    results = verify.run(["alexnet", "googlenet", "resnet50"], list(FRAMEWORKS),
                         image_size=64, num_classes=10, echo=lambda s: None)
    assert len(results) == 3 * 2  # each network: tensorflow and mxnet against torch
    for c in results:
        assert c.passed, verify.table(results)
        assert c.logits_err < 1e-4 and c.loss_err < 2e-4


def test_a_perturbed_layer_fails_the_check(all_envs, tmp_path):
    db = tmp_path / "v.db"
    r = run_cli("verify", "--models", "resnet50", "--frameworks", "torch,tensorflow,mxnet",
                "--perturb", "tensorflow:layer4.2.conv2.weight", "--db", str(db))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = {line.split()[1]: line for line in r.stdout.splitlines()
             if line.startswith("resnet50")}
    assert lines["tensorflow"].rstrip().endswith("FAIL (perturbed layer4.2.conv2.weight)")
    assert " PASS" in lines["mxnet"]
    rows = sqlite3.connect(db).execute("SELECT framework, passed FROM verify").fetchall()
    assert sorted(rows) == [("mxnet", 1), ("tensorflow", 0)]


def test_unknown_tensor_and_bad_flag(all_envs):
    r = run_cli("verify", "--models", "googlenet", "--frameworks", "torch,mxnet", "--no-store",
                "--perturb", "mxnet:nope.weight")
    assert r.returncode == 2 and "has no tensor 'nope.weight'" in r.stderr
    r = run_cli("verify", "--perturb", "tensorflow", "--no-store")
    assert r.returncode == 2 and "give FRAMEWORK:TENSOR" in r.stderr
