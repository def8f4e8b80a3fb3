"""Close the loop: predicted vs measured iteration time for every stored run it can model.

* Single-device throughput runs: the model's prediction is the sum of the phases measured
  by the matching breakdown run (t_io + t_h2d + t_f + t_b + t_u), i.e. the paper's
  iteration model checked against a measurement taken without the extra syncs.
* Multi-worker runs: compute from the matching single-device runs, communication from the
  α-β model over the given links; efficiency compared too.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.perfmodel.measured import NoMeasurement, compute_from_store
from harness.perfmodel.predict import Scenario, predict
from harness.stats import median
from harness.store import Store

#: RunSpec strategy -> performance-model strategy.
STRATEGY_MAP = {"allreduce": "allreduce", "ddp": "allreduce", "horovod": "horovod",
                "ps-sync": "ps", "kvstore": "ps", "dist_sync": "ps"}


@dataclass(frozen=True)
class Check:
    run_id: str
    label: str
    workers: int
    measured: float
    predicted: float
    basis: str
    measured_eff: float | None = None
    predicted_eff: float | None = None

    @property
    def error(self) -> float:
        return (self.predicted - self.measured) / self.measured


def _label(r: dict) -> str:
    return (f"{r['framework']} {r['model']} b{r['batch_size']} {r['image_size']}px "
            f"{r['strategy']} x{r['workers']}")


def checks(store: Store, experiment: str | None = None, intra: str = "shm",
           inter: str = "10gbe") -> list[Check]:
    where = "WHERE status = 'ok' AND mode = 'throughput'"
    params: tuple = ()
    if experiment:
        where += " AND experiment = ?"
        params = (experiment,)
    out: list[Check] = []
    for r in store.runs(where, params):
        key = (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"])
        if r["workers"] == 1:
            bd = store.runs("WHERE status = 'ok' AND mode = 'breakdown' AND workers = 1 AND "
                            "framework = ? AND model = ? AND batch_size = ? AND image_size = ? "
                            "AND device = ?", key)
            if not bd:
                continue
            b = bd[-1]
            pred = sum(b[f"t_{p}_s"] or 0.0 for p in ("io", "h2d", "forward", "backward",
                                                       "comm", "update"))
            if b["t_iter_paired_s"]:  # same process, alternating trials: free of run noise
                out.append(Check(b["run_id"], _label(r), 1, b["t_iter_paired_s"], pred,
                                 "sum of breakdown phases vs throughput trials alternating "
                                 "with them in the same process"))
            else:
                out.append(Check(r["run_id"], _label(r), 1, r["t_iter_s"], pred,
                                 f"sum of phases of breakdown run {b['run_id']}"))
            continue
        strategy = STRATEGY_MAP.get(r["strategy"])
        if strategy is None:
            continue
        try:
            compute = compute_from_store(store, *key)
        except NoMeasurement:
            continue
        single = store.runs("WHERE status = 'ok' AND mode = 'throughput' AND workers = 1 AND "
                            "framework = ? AND model = ? AND batch_size = ? AND image_size = ? "
                            "AND device = ?", key)
        import json

        spec = json.loads(r["spec_json"])
        sc = Scenario(r["model"], r["batch_size"], nodes=spec.get("nodes", 1),
                      devices_per_node=spec.get("devices_per_node", r["workers"]),
                      strategy=strategy, intra=intra, inter=inter,
                      ps=spec.get("ps", 1) or 1, image_size=r["image_size"])
        p = predict(sc, compute)
        meas_eff = single[-1]["t_iter_s"] / r["t_iter_s"] if single else None
        out.append(Check(r["run_id"], _label(r), r["workers"], r["t_iter_s"], p.t_iter,
                         f"{compute.source}; {'; '.join(p.assumptions[1:])}",
                         meas_eff, p.efficiency))
    return out


def median_abs_error(cs: list[Check]) -> float | None:
    return median([abs(c.error) for c in cs]) if cs else None
