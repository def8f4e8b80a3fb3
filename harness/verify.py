"""`dnnbench verify`: prove every framework computes the same function.

One deterministic set of weights and one batch per network (models/weights.py) go to every
framework, which loads them in its own layouts, runs inference and one SGD step, and sends
back logits, loss and updated weights in spec layouts. Each framework is compared with the
reference (PyTorch when present):

* logits      max |a - ref| / max |ref|                     <= 1e-4
* loss        |a - ref| / |ref|                             <= 2e-4
* update      max |Δa - Δref| / max |Δref| over each tensor <= 2e-2  (Δ = after - before)

Why these bounds (measured at 64 px, batch 2, on CPU): float32 sums in a different order
(oneDNN/Eigen/cuDNN algorithms, NHWC vs NCHW) left logits within 1.4e-6 and losses within
2.7e-5 for all three networks; updates within 3e-6 (AlexNet), 2e-4 (ResNet-50) and 9.4e-3
(GoogLeNet, whose 57-deep conv-BN chain amplifies rounding in backward). A wrong layout,
padding, pooling rule or BN parameter moves logits by 1e-3..1 and updates by O(1). The
weights are chosen well-conditioned (models/weights.py) so that rounding noise stays far
below those. `--perturb` scales one tensor by 1.05 for one framework to show the check
fails when it should.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from frameworks import events
from harness import collect, envs
from harness.store import Store
from runners.process import run_job
from runners.spec import ProcessSpec

TOLERANCE = {"logits": 1e-4, "loss": 2e-4, "update": 2e-2}
PERTURB_SCALE = 1.05
REFERENCE = "torch"


class VerifyError(RuntimeError):
    pass


@dataclass(frozen=True)
class Comparison:
    model: str
    framework: str
    reference: str
    logits_err: float
    loss_err: float
    update_err: float
    worst_tensor: str
    perturbed: str = ""

    @property
    def passed(self) -> bool:
        return (self.logits_err <= TOLERANCE["logits"] and self.loss_err <= TOLERANCE["loss"]
                and self.update_err <= TOLERANCE["update"])


def _run_framework(framework: str, job: dict, source_root: str, timeout: float) -> None:
    env = envs.find(framework)
    spec = ProcessSpec("verify", 0, (env.python, "-m", "frameworks.verify"), {
        "DNNBENCH_VERIFY": json.dumps(job), "PYTHONPATH": source_root,
        "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONNOUSERSITE": "1"})
    result = run_job([spec], timeout)
    errors = [e["reason"] for e in collect.job_events(result) if e["event"] == events.ERROR]
    if not result.ok or errors:
        raise VerifyError(f"{framework} could not run {job['model']}: "
                          f"{errors[0] if errors else 'exit status'}\n"
                          + "\n".join(result.failure_tail(10)))


def _compare(model: str, fw: str, ref: str, out, base, weights, perturbed: str) -> Comparison:
    import numpy as np

    lr = np.abs(base["logits"]).max()
    logits_err = float(np.abs(out["logits"] - base["logits"]).max() / max(lr, 1e-12))
    loss_err = float(abs(float(out["loss"]) - float(base["loss"])) / max(abs(float(base["loss"])),
                                                                          1e-12))
    worst, update_err = "", 0.0
    for key in base.files:
        if not key.startswith("updated/"):
            continue
        name = key.split("/", 1)[1]
        d_ref = base[key] - weights[name]
        d_fw = out[key] - weights[name]
        scale = max(float(np.abs(d_ref).max()), 1e-12)
        err = float(np.abs(d_fw - d_ref).max()) / scale
        if err > update_err:
            worst, update_err = name, err
    return Comparison(model, fw, ref, logits_err, loss_err, update_err, worst, perturbed)


def run(models: list[str], frameworks: list[str], image_size: int = 64,
        num_classes: int = 10, lr: float = 0.1, momentum: float = 0.9,
        perturb: dict[str, str] | None = None, timeout: float = 600,
        echo=print) -> list[Comparison]:
    import numpy as np

    from harness.sweep import worker_source_root
    from models import weights as W

    perturb = perturb or {}
    for fw in frameworks:
        envs.find(fw)  # fail fast, naming the fix
    reference = REFERENCE if REFERENCE in frameworks else frameworks[0]
    order = [reference] + [f for f in frameworks if f != reference]
    source_root = worker_source_root()
    results: list[Comparison] = []
    with tempfile.TemporaryDirectory(prefix="dnnbench-verify-") as tmp:
        for model in models:
            weights = W.make(model, image_size, num_classes)
            path = Path(tmp) / f"{model}.npz"
            np.savez(path, **weights)
            outputs = {}
            for fw in order:
                wpath = path
                if fw in perturb:
                    key = perturb[fw]
                    if key not in weights:
                        raise VerifyError(f"--perturb {fw}:{key}: {model} has no tensor {key!r}")
                    changed = dict(weights)
                    changed[key] = weights[key] * np.float32(PERTURB_SCALE)
                    wpath = Path(tmp) / f"{model}-{fw}-perturbed.npz"
                    np.savez(wpath, **changed)
                out = Path(tmp) / f"{model}-{fw}.out.npz"
                echo(f"verify {model} in {fw} ...")
                _run_framework(fw, {"framework": fw, "model": model, "image_size": image_size,
                                    "num_classes": num_classes, "lr": lr, "momentum": momentum,
                                    "weights": str(wpath), "out": str(out)}, source_root,
                               timeout)
                outputs[fw] = np.load(out)
            base = outputs[reference]
            for fw in order[1:]:
                results.append(_compare(model, fw, reference, outputs[fw], base, weights,
                                        perturb.get(fw, "")))
            if len(order) == 1:
                results.append(Comparison(model, reference, reference, 0.0, 0.0, 0.0, ""))
    return results


def store_results(store: Store, results: list[Comparison], image_size: int) -> None:
    started = collect.now_iso()
    with store.conn:
        store.conn.execute(
            "CREATE TABLE IF NOT EXISTS verify (started TEXT, model TEXT, framework TEXT, "
            "reference TEXT, image_size INTEGER, logits_err REAL, loss_err REAL, "
            "update_err REAL, worst_tensor TEXT, passed INTEGER, perturbed TEXT)")
        store.conn.executemany(
            "INSERT INTO verify VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(started, c.model, c.framework, c.reference, image_size, c.logits_err,
              c.loss_err, c.update_err, c.worst_tensor, int(c.passed), c.perturbed)
             for c in results])


def table(results: list[Comparison]) -> str:
    lines = [f"{'network':<10} {'framework':<11} {'vs':<6} {'logits err':>11} {'loss err':>10} "
             f"{'update err':>11}  {'worst tensor':<28} result",
             f"{'tolerance':<29} {TOLERANCE['logits']:>11.0e} {TOLERANCE['loss']:>10.0e} "
             f"{TOLERANCE['update']:>11.0e}"]
    for c in results:
        lines.append(f"{c.model:<10} {c.framework:<11} {c.reference:<6} {c.logits_err:>11.2e} "
                     f"{c.loss_err:>10.2e} {c.update_err:>11.2e}  {c.worst_tensor:<28} "
                     f"{'PASS' if c.passed else 'FAIL'}"
                     + (f" (perturbed {c.perturbed})" if c.perturbed else ""))
    return "\n".join(lines)
