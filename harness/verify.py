"""`dnnbench verify`: prove every framework computes the same function.

One deterministic set of weights and one batch per network (models/weights.py) go to every
framework, which loads them in its own layouts, runs inference and one SGD step, and sends
back logits, loss and updated weights in spec layouts. Each framework's float32 result is
compared with the exact function: the reference framework (PyTorch) run in float64. The
reference's own float32 run is compared too, so the table shows what float32 rounding
alone gives on this CPU next to every other framework.

  logits        max |a - ref| / max |ref|                              <= 1e-4
  loss          |a - ref| / |ref|                                      <= 2e-4
  update        ||Δa - Δref|| / ||Δref|| over the whole update         <= 0.2
  scale         |<Δa, Δref> / <Δref, Δref> - 1|                        <= 2e-2
  worst tensor  max over tensors of ||Δa_t - Δref_t|| / ||Δref_t||     <= 0.5
  (Δ = after - before, one SGD step with momentum; ||.|| the 2-norm)

Why whole-update measures, and why these bounds. A tensor's own relative error is
ill-conditioned: float32 rounding, and more so a ReLU input that lies within rounding
distance of 0 (one framework's kernels put it on the other side of the kink, a legitimate
difference of the gradient, since ReLU has none there), can move a tensor whose update is
tiny by a large fraction of itself. Measured at 64 px, batch 2, against float64, with
oneDNN limited to AVX-512, AVX2 and SSE4.1 kernels (ONEDNN_MAX_CPU_ISA; other CPUs pick
other kernels): logits within 2.0e-6 and updates within 4e-6 (AlexNet, ResNet-50) or 1.5e-3
(GoogLeNet) when no kink flips; the flips seen gave ResNet-50 layer3.3.bn3.beta 5.3e-2 of
its own update (on an Intel CPU too), and GoogLeNet's whole update 7.8e-2 (scale 7.9e-3,
worst tensor 0.24, TensorFlow's SSE4.1 kernels). A wrong function is a different class:
a wrong layout, padding, pooling rule or BN parameter moves logits by 1e-3..1; a wrong
optimiser rule (learning rate, momentum form, loss summed instead of averaged) moves the
scale by >= 2e-2 to 1; a frozen tensor, a flipped sign or a doubled gradient gives that
tensor an error of 1 or more. `--perturb` scales one tensor by 1.05 for one framework to
show the check fails when it should.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frameworks import events
from harness import collect, envs, jobs
from harness.store import Store
from runners.spec import ProcessSpec

TOLERANCE = {"logits": 1e-4, "loss": 2e-4, "update": 0.2, "scale": 2e-2, "tensor": 0.5}
PERTURB_SCALE = 1.05
REFERENCE = "torch"
#: The reference framework runs once more in this precision: the exact function.
EXACT = "float64"


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
    scale_err: float
    tensor_err: float
    worst_tensor: str
    perturbed: str = ""

    @property
    def errors(self) -> dict[str, float]:
        return {"logits": self.logits_err, "loss": self.loss_err, "update": self.update_err,
                "scale": self.scale_err, "tensor": self.tensor_err}

    @property
    def failed(self) -> list[str]:
        """The measures over their tolerance (a NaN counts as over)."""
        return [k for k, v in self.errors.items() if not v <= TOLERANCE[k]]

    @property
    def passed(self) -> bool:
        return not self.failed


def _run_framework(framework: str, job: dict, source_root: str, timeout: float) -> None:
    env = envs.find(framework)
    spec = ProcessSpec("verify", 0, (env.python, "-m", "frameworks.verify"), {
        "DNNBENCH_VERIFY": json.dumps(job), "PYTHONPATH": source_root,
        "OMP_NUM_THREADS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONNOUSERSITE": "1"})
    result = jobs.run(jobs.Job([spec], "local"), timeout)
    errors = [e["reason"] for e in collect.job_events(result) if e["event"] == events.ERROR]
    if not result.ok or errors:
        raise VerifyError(f"{framework} could not run {job['model']}: "
                          f"{errors[0] if errors else 'exit status'}\n"
                          + "\n".join(result.failure_tail(10)))


def compare(model: str, fw: str, ref: str, out: Mapping[str, Any], base: Mapping[str, Any],
            weights: Mapping[str, Any], perturbed: str = "") -> Comparison:
    """Measure one framework's result against the reference's (see the module docstring).

    `out` and `base` hold "logits", "loss" and "updated/<tensor>" arrays; `weights` the
    tensors both started from. Computed in float64, whatever the inputs' precision."""
    import numpy as np

    def f64(x):
        return np.asarray(x, dtype=np.float64)

    ref_logits = f64(base["logits"])
    logits_err = float(np.abs(f64(out["logits"]) - ref_logits).max()
                       / max(float(np.abs(ref_logits).max()), 1e-30))
    ref_loss = float(base["loss"])
    loss_err = abs(float(out["loss"]) - ref_loss) / max(abs(ref_loss), 1e-30)
    dot = ref_sq = diff_sq = 0.0
    worst, tensor_err = "", 0.0
    for key in base:
        if not key.startswith("updated/"):
            continue
        name = key.split("/", 1)[1]
        start = f64(weights[name])
        d_ref = f64(base[key]) - start
        d_fw = f64(out[key]) - start
        ref_norm2 = float(np.sum(d_ref * d_ref))
        err_norm2 = float(np.sum((d_fw - d_ref) ** 2))
        dot += float(np.sum(d_fw * d_ref))
        ref_sq += ref_norm2
        diff_sq += err_norm2
        # a tensor the reference does not move at all: any movement is an error of 1
        own = (err_norm2 / ref_norm2) ** 0.5 if ref_norm2 > 0 else float(err_norm2 > 0)
        if tensor_err == tensor_err and not own <= tensor_err:  # a NaN wins and stays
            worst, tensor_err = name, own
    ref_sq = max(ref_sq, 1e-300)
    return Comparison(model, fw, ref, logits_err, loss_err, (diff_sq / ref_sq) ** 0.5,
                      abs(dot / ref_sq - 1.0), tensor_err, worst, perturbed)


def run(models: list[str], frameworks: list[str], image_size: int = 64,
        num_classes: int = 10, lr: float = 0.1, momentum: float = 0.9,
        perturb: dict[str, str] | None = None, timeout: float = 600,
        echo=print) -> list[Comparison]:
    """Every framework against the exact function: the reference framework in float64
    when it takes part (it is the one adapter that runs in float64), else the first
    framework's float32 result."""
    import numpy as np

    from harness.jobs import worker_source_root
    from models import weights as W

    perturb = perturb or {}
    for fw in frameworks:
        envs.find(fw)  # fail fast, naming the fix
    exact = REFERENCE in frameworks
    reference = REFERENCE if exact else frameworks[0]
    # (framework, precision) in run order; the first is what everyone is compared with
    order = [(reference, EXACT if exact else "float32")]
    order += [(fw, "float32") for fw in frameworks if exact or fw != reference]
    source_root = worker_source_root()
    results: list[Comparison] = []
    with tempfile.TemporaryDirectory(prefix="dnnbench-verify-") as tmp:
        for model in models:
            weights = W.make(model, image_size, num_classes)
            path = Path(tmp) / f"{model}.npz"
            np.savez(path, **weights)
            outputs = {}
            for fw, dtype in order:
                wpath = path
                perturbed = perturb.get(fw, "") if dtype == "float32" else ""
                if perturbed:
                    if perturbed not in weights:
                        raise VerifyError(f"--perturb {fw}:{perturbed}: {model} has no tensor "
                                          f"{perturbed!r}")
                    changed = dict(weights)
                    changed[perturbed] = weights[perturbed] * np.float32(PERTURB_SCALE)
                    wpath = Path(tmp) / f"{model}-{fw}-perturbed.npz"
                    np.savez(wpath, **changed)
                out = Path(tmp) / f"{model}-{fw}-{dtype}.out.npz"
                echo(f"verify {model} in {fw} ({dtype}) ...")
                _run_framework(fw, {"framework": fw, "model": model, "image_size": image_size,
                                    "num_classes": num_classes, "lr": lr, "momentum": momentum,
                                    "dtype": dtype, "weights": str(wpath), "out": str(out)},
                               source_root, timeout)
                with np.load(out) as data:
                    outputs[(fw, dtype)] = {k: data[k] for k in data.files}
            base = outputs[order[0]]
            ref_name = f"{reference}64" if exact else reference
            for fw, dtype in order[1:]:
                results.append(compare(model, fw, ref_name, outputs[(fw, dtype)], base,
                                       weights, perturb.get(fw, "")))
            if len(order) == 1:
                results.append(Comparison(model, reference, reference, 0.0, 0.0, 0.0, 0.0,
                                          0.0, ""))
    return results


COLUMNS = ("started TEXT", "model TEXT", "framework TEXT", "reference TEXT",
           "image_size INTEGER", "logits_err REAL", "loss_err REAL", "update_err REAL",
           "worst_tensor TEXT", "passed INTEGER", "perturbed TEXT", "scale_err REAL",
           "tensor_err REAL")


def store_results(store: Store, results: list[Comparison], image_size: int) -> None:
    """Append to the `verify` table; a table made before scale_err/tensor_err existed
    gets the new columns (its old rows keep NULL there, and update_err meant the worst
    tensor's own error then)."""
    started = collect.now_iso()
    names = [c.split()[0] for c in COLUMNS]
    with store.conn:
        store.conn.execute(f"CREATE TABLE IF NOT EXISTS verify ({', '.join(COLUMNS)})")
        have = {row[1] for row in store.conn.execute("PRAGMA table_info(verify)")}
        for column in COLUMNS:
            if column.split()[0] not in have:
                store.conn.execute(f"ALTER TABLE verify ADD COLUMN {column}")
        store.conn.executemany(
            f"INSERT INTO verify ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [(started, c.model, c.framework, c.reference, image_size, c.logits_err,
              c.loss_err, c.update_err, c.worst_tensor, int(c.passed), c.perturbed,
              c.scale_err, c.tensor_err) for c in results])


def table(results: list[Comparison]) -> str:
    head = (f"{'network':<10} {'framework':<11} {'vs':<8} {'logits err':>10} {'loss err':>9} "
            f"{'update err':>10} {'scale err':>9} {'tensor err':>10}  {'worst tensor':<34} "
            "result")
    tol = TOLERANCE
    lines = [head, f"{'tolerance':<31} {tol['logits']:>10.0e} {tol['loss']:>9.0e} "
                   f"{tol['update']:>10.1g} {tol['scale']:>9.0e} {tol['tensor']:>10.1g}"]
    for c in results:
        verdict = "PASS" if c.passed else f"FAIL ({', '.join(c.failed)})"
        lines.append(f"{c.model:<10} {c.framework:<11} {c.reference:<8} {c.logits_err:>10.2e} "
                     f"{c.loss_err:>9.2e} {c.update_err:>10.2e} {c.scale_err:>9.2e} "
                     f"{c.tensor_err:>10.2e}  {c.worst_tensor:<34} {verdict}"
                     + (f" (perturbed {c.perturbed})" if c.perturbed else ""))
    return "\n".join(lines)
