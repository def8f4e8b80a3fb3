"""Compute terms from stored single-device measurements.

Breakdown-mode runs give the split (forward, backward, update...); throughput-mode runs
give the true iteration time (breakdown's extra synchronisations inflate its sum), so when
both exist the breakdown split is scaled to the throughput iteration time.
"""

from __future__ import annotations

import json

from harness.perfmodel.predict import Compute
from harness.store import SYNTHETIC, Store


class NoMeasurement(LookupError):
    """No stored single-device run matches; the message says what to run."""


def _latest(store: Store, mode: str, workers: int = 1, **where) -> dict | None:
    where = {k: v for k, v in where.items() if v is not None}
    clause = " AND ".join(f"{k} = ?" for k in where)
    rows = store.runs(f"WHERE status = 'ok' AND {SYNTHETIC} AND workers = ? AND mode = ? "
                      f"AND {clause}",
                      (workers, mode, *where.values()))
    return rows[-1] if rows else None


def colocated_compute(store: Store, run: dict) -> Compute | None:
    """Per-worker compute measured inside an N-worker configuration (its breakdown run):
    co-located workers share memory bandwidth and caches, which a 1-worker run cannot
    show. Communication is left to the model."""
    bd = _latest(store, "breakdown", run["workers"], framework=run["framework"],
                 model=run["model"], batch_size=run["batch_size"],
                 image_size=run["image_size"], device=run["device"], threads=run["threads"],
                 strategy=run["strategy"], nodes=run["nodes"])
    if bd is None:
        return None
    p = {k: bd[f"t_{k}_s"] or 0.0 for k in ("io", "h2d", "forward", "backward", "update")}
    return Compute(p["forward"], p["backward"], p["update"], p["io"], p["h2d"],
                   source=f"compute measured in place by the {run['workers']}-worker breakdown "
                          f"run {bd['run_id']} (its communication phase is not used)")


def compute_from_store(store: Store, framework: str, model: str, batch: int,
                       image_size: int, device: str = "cpu", threads: int | None = None
                       ) -> Compute:
    """`threads`: match single-device runs using as many threads as one worker of the
    multi-worker run (on a CPU host a device is a share of the cores)."""
    key = dict(framework=framework, model=model, batch_size=batch, image_size=image_size,
               device=device, threads=threads)
    bd = _latest(store, "breakdown", **key)
    tp = _latest(store, "throughput", **key)
    if bd is None and tp is None:
        raise NoMeasurement(
            f"no single-device run of {framework} {model} batch {batch} at {image_size} px "
            f"on {device}{f' with {threads} threads' if threads else ''} in {store.path}; "
            f"run: dnnbench run --framework {framework} --model {model} --batch {batch} "
            f"--image-size {image_size} --mode breakdown"
            f"{f' --threads {threads}' if threads else ''} --db {store.path} (or give "
            "--t-forward/--t-backward, or --device-preset)")
    if bd is None:
        t = tp["t_iter_s"]
        return Compute(t / 3, 2 * t / 3, 0.0, source=f"measured throughput run {tp['run_id']} "
                       "(no breakdown run: split 1/3 forward, 2/3 backward assumed)")
    parts = {k: bd[f"t_{k}_s"] or 0.0 for k in ("io", "h2d", "forward", "backward", "update")}
    total = sum(parts.values())
    src = f"measured breakdown run {bd['run_id']}"
    if bd.get("t_iter_paired_s") and total:
        scale = bd["t_iter_paired_s"] / total
        src += f", scaled x{scale:.3f} to its paired throughput-mode iteration time"
    elif tp and total:
        scale = tp["t_iter_s"] / total
        src += f", scaled x{scale:.3f} to throughput run {tp['run_id']}'s iteration time"
    else:
        scale = 1.0
    return Compute(parts["forward"] * scale, parts["backward"] * scale, parts["update"] * scale,
                   parts["io"] * scale, parts["h2d"] * scale, source=src)


def _shape(r: dict) -> tuple:
    """What a baseline and its breakdown run share: configuration, link, CPU limit."""
    spec = r.get("spec_json") or "{}"
    return (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"],
            r.get("link") or "", r.get("cpus_per_host") or 0.0, r["threads"],
            json.loads(spec).get("devices_per_node", 1))


def compute_from_baseline(store: Store, base: dict) -> Compute:
    """Compute per iteration from a 1-worker throughput run (`harness.scaling.baseline`):
    its iteration time, split into phases by a 1-worker breakdown run of the same shape
    when there is one, else forward 1/3, backward 2/3 (said in `source`)."""
    t = base["t_iter_s"]
    bd = [b for b in store.runs(f"WHERE status = 'ok' AND mode = 'breakdown' AND {SYNTHETIC} "
                                "AND workers = 1 AND framework = ? AND model = ?",
                                (base["framework"], base["model"]))
          if _shape(b) == _shape(base)]
    if bd:
        b = bd[-1]
        parts = {k: b[f"t_{k}_s"] or 0.0 for k in ("io", "h2d", "forward", "backward",
                                                    "update")}
        total = sum(parts.values()) or 1.0
        s = t / total
        return Compute(parts["forward"] * s, parts["backward"] * s, parts["update"] * s,
                       parts["io"] * s, parts["h2d"] * s,
                       source=f"1-worker run {base['run_id']}, split by breakdown run "
                              f"{b['run_id']}")
    return Compute(t / 3, 2 * t / 3, source=f"1-worker run {base['run_id']} (split 1/3 "
                                            "forward, 2/3 backward assumed)")


def compute_from_mfu(store: Store, framework: str, model: str, batch: int, image_size: int,
                     num_classes: int = 1000) -> Compute:
    """Compute for a configuration nobody ran, from the model FLOPs utilisation the same
    framework and network reached here (the newest single-worker run with an MFU) and the
    machine's measured GEMM peak: FLOPs of the step / (peak x MFU). The measured
    efficiency replaces an assumed share of peak (predict.DEVICES); the split is forward
    1/3, backward 2/3 (said in `source`)."""
    from models.cost import cost

    rows = [r for r in store.runs(
        f"WHERE status = 'ok' AND {SYNTHETIC} AND workers = 1 AND mode = 'throughput' AND "
        "framework = ? AND model = ? AND mfu IS NOT NULL AND machine_gflops > 0",
        (framework, model))]
    if not rows:
        raise NoMeasurement(
            f"no single-worker run of {framework} {model} with a measured MFU in "
            f"{store.path}; run: dnnbench run --framework {framework} --model {model} "
            f"--db {store.path}")
    r = rows[-1]
    peak = r.get("peak_gflops") or r["machine_gflops"]  # what its mfu divided by
    flops = 3 * 2 * cost(model, image_size, num_classes).macs * batch
    t = flops / (peak * 1e9 * r["mfu"])
    return Compute(t / 3, 2 * t / 3, 0.0, source=(
        f"FLOPs at the MFU measured here: {r['mfu']:.1%} of {peak:.0f} GFLOP/s "
        f"(run {r['run_id']}, batch {r['batch_size']} at {r['image_size']} px); split 1/3 "
        "forward, 2/3 backward assumed"))
