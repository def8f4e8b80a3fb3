"""Close the loop: predicted vs measured iteration time for every stored run it can model.

* Single-device throughput runs: the model's prediction is the sum of the phases measured
  by the matching breakdown run (t_io + t_h2d + t_f + t_b + t_u), i.e. the paper's
  iteration model checked against throughput-mode iterations (paired in the same process
  when the breakdown run recorded them).
* Multi-worker runs: compute from the single-device runs with the same per-worker threads,
  communication from the α-β model over the link commbench measured for the library the
  strategy uses (or a named profile when none was measured); efficiency compared too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from frameworks import ps_rules
from frameworks.contract import SUPPORT
from frameworks.plan import ps_layout
from harness import scaling
from harness.perfmodel import network
from harness.perfmodel.measured import (
    NoMeasurement,
    colocated_compute,
    compute_from_baseline,
    compute_from_store,
)
from harness.perfmodel.predict import Compute, Scenario, predict
from harness.stats import median
from harness.store import SYNTHETIC, Store

#: RunSpec strategy -> performance-model strategy.
STRATEGY_MAP = {"allreduce": "allreduce", "horovod": "horovod", "ps-sync": "ps"}


def asynchronous(r: dict) -> bool:
    """A stored run of asynchronous parameter servers the model covers (held out only:
    frameworks/ps_rules.ASYNC_PER_PUSH says whose, harness/perfmodel/psstep.py how)."""
    return r["strategy"] == "ps-async" and r["framework"] in ps_rules.ASYNC_PER_PUSH
#: (framework, strategy, device) -> the commbench library carrying its gradients (each
#: framework declares its own, SUPPORT.gradient_library).
LIBRARY = {(fw, strategy, device): lib for fw, sup in SUPPORT.items()
           for (strategy, device), lib in sup.gradient_library.items()}


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
            f"{r['strategy']} x{r['workers']}"
            + (f" {r['nodes']} hosts @ {r['link']}" if r.get("link") else ""))


ITERATION_MODEL = "iteration model: sum of the phases timed in breakdown mode"

_SINGLE = ("WHERE status = 'ok' AND mode = ? AND workers = 1 AND framework = ? AND model = ? "
           f"AND {SYNTHETIC} "
           "AND batch_size = ? AND image_size = ? AND device = ?")


def _single_checks(store: Store, r: dict) -> list[Check]:
    key = (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"])
    bd = [b for b in store.runs(_SINGLE, ("breakdown", *key))
          if b["threads"] == r["threads"] or r["threads"] is None]
    if not bd:
        return []
    b = bd[-1]
    pred = sum(b[f"t_{p}_s"] or 0.0 for p in ("io", "h2d", "forward", "backward", "comm",
                                               "update"))
    if b["t_iter_paired_s"]:
        return [Check(b["run_id"], _label(r), 1, b["t_iter_paired_s"], pred,
                      ITERATION_MODEL + " vs throughput trials alternating with them in "
                      "the same process")]
    return [Check(r["run_id"], _label(r), 1, r["t_iter_s"], pred,
                  f"sum of phases of breakdown run {b['run_id']}")]


def _link(store: Store, r: dict, fallback: str) -> network.Link:
    from harness.commbench import fitted_link

    lib = LIBRARY.get((r["framework"], r["strategy"], r["device"]))
    # the fit measured on the same link: emulated runs carry their rate, local ones "local"
    measured = fitted_link(store, lib, r["workers"], r.get("link") or "local") if lib else None
    if measured:
        return measured
    if r.get("link") and r["link"] != "unshaped":  # an emulated link: its shaped rate
        from runners.emulated import rate_bits

        return network.Link(f"{r['link']} (shaped rate, alpha 0 assumed)", 0.0,
                            8.0 / rate_bits(r["link"]))
    return network.link(fallback)


def checks(store: Store, experiment: str | None = None, intra: str = "shm",
           inter: str = "10gbe") -> list[Check]:
    where = f"WHERE status = 'ok' AND mode = 'throughput' AND {SYNTHETIC}"
    params: tuple = ()
    if experiment:
        where += " AND experiment = ?"
        params = (experiment,)
    out: list[Check] = []
    seen: set[str] = set()
    ok = store.runs("WHERE status = 'ok'")
    for r in store.runs(where, params):
        if r["workers"] == 1:
            for c in _single_checks(store, r):
                if c.run_id not in seen:
                    seen.add(c.run_id)
                    out.append(c)
            continue
        model_in = scenario_for(store, r, intra, inter)
        if model_in is None:
            continue
        sc, compute, note = model_in
        p = predict(sc, compute)
        key = (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"])
        single = scaling.baseline(ok, r)
        measured, run_id, how = r["t_iter_s"], r["run_id"], ""
        paired = _colocated_breakdown(store, r)
        if paired is not None and paired["t_iter_paired_s"]:
            # Same design as the single-device check: the throughput iterations that ran
            # alternately with the breakdown trials in the same job, free of between-run
            # noise (up to ~15% on a shared host).
            measured, run_id = paired["t_iter_paired_s"], paired["run_id"]
            how = ("; measured: throughput iterations alternating with the breakdown "
                   "trials in the same job")
        base = single["t_iter_s"] if single else None
        single_bd = [b for b in store.runs(_SINGLE, ("breakdown", *key))
                     if b["threads"] == r["threads"] and b["t_iter_paired_s"]]
        if how and single_bd:
            base = single_bd[-1]["t_iter_paired_s"]
        out.append(Check(run_id, _label(r), r["workers"], measured, p.t_iter,
                         f"{compute.source}; {'; '.join(p.assumptions[1:])}{note}{how}",
                         base / measured if base else None, p.efficiency))
        if paired is not None and paired["t_iter_paired_s"]:
            phases = sum(paired[f"t_{k}_s"] or 0.0 for k in ("io", "h2d", "forward",
                                                            "backward", "comm", "update"))
            out.append(Check(paired["run_id"], _label(r) + " (phases)", r["workers"],
                             paired["t_iter_paired_s"], phases,
                             ITERATION_MODEL + "; communication measured in the job "
                             "(no overlap)"))
    return out


def _colocated_breakdown(store: Store, r: dict) -> dict | None:
    rows = store.runs(f"WHERE status = 'ok' AND mode = 'breakdown' AND {SYNTHETIC} AND "
                      "workers = ? AND "
                      "framework = ? AND model = ? AND batch_size = ? AND image_size = ? AND "
                      "device = ? AND strategy = ? AND nodes = ?",
                      (r["workers"], r["framework"], r["model"], r["batch_size"],
                       r["image_size"], r["device"], r["strategy"], r["nodes"]))
    rows = [b for b in rows if b["threads"] == r["threads"]]
    return rows[-1] if rows else None


def saturated(r: dict) -> bool:
    """Wait-free backprop needs spare cores for communication progress. CPU workers whose
    threads fill their cores (the host's CPU limit on emulated hosts, else the machine's)
    leave none: gloo/MPI reductions then compete with backward instead of hiding behind
    it, so communication is modelled as exposed."""
    if r["device"] != "cpu":
        return False
    threads = r["threads"] or 1
    if r.get("cpus_per_host"):
        return threads >= scaling.cpus_per_worker(r)
    cores = json.loads(r["manifest_json"] or "{}").get("host", {}).get("cores", 0)
    return threads * r["workers"] >= cores


def scenario(r: dict, intra: network.Link, inter: network.Link) -> Scenario:
    """The model's scenario for a stored multi-worker run: the one place that reads a
    run's shape (nodes, workers per node, servers, overlap) for the in-sample and the
    held-out validation alike."""
    spec = json.loads(r["spec_json"])
    return Scenario(r["model"], r["batch_size"], nodes=spec.get("nodes", 1),
                    devices_per_node=spec.get("devices_per_node", 1),
                    strategy="ps" if asynchronous(r) else STRATEGY_MAP[r["strategy"]],
                    ps_async=asynchronous(r), intra=intra, inter=inter,
                    ps=spec.get("ps") or 1, image_size=r["image_size"],
                    num_classes=spec.get("num_classes", 1000), overlap=not saturated(r),
                    ps_placement=ps_rules.POLICY.get(r["framework"], "greedy"),
                    ps_split_bound=spec.get("ps_split_bound") or 0,
                    ps_colocated=ps_layout(spec) != "own",
                    cpus_per_host=r.get("cpus_per_host") or 0.0,
                    trial_steps=spec.get("steps") if r.get("trial_order") == "interleaved"
                    else None,
                    # emulated hosts: the model knows their addresses, which ps-lite
                    # numbers the servers by
                    ps_rank_order="ps-lite" if r["framework"] in ps_rules.PSLITE_RANKS
                    and r.get("link") else "launch")


def scenario_for(store: Store, r: dict, intra: str = "shm", inter: str = "10gbe"
                 ) -> tuple[Scenario, Compute, str] | None:
    """The model's inputs for a stored multi-worker run, or None if it cannot be modelled."""
    strategy = STRATEGY_MAP.get(r["strategy"])
    if strategy is None:
        return None
    key = (r["framework"], r["model"], r["batch_size"], r["image_size"], r["device"])
    compute = colocated_compute(store, r)
    if compute is None and not r.get("cpus_per_host"):
        try:
            compute = compute_from_store(store, *key, threads=r["threads"])
        except NoMeasurement:
            pass
    if compute is None:
        # the 1-worker run the scaling efficiency is measured against: on hosts with a CPU
        # limit the only run that knows each worker's compute
        base = scaling.baseline(store.runs("WHERE status = 'ok' AND workers = 1"), r)
        if base is None:
            return None
        compute = compute_from_baseline(store, base)
    nodes = json.loads(r["spec_json"]).get("nodes", 1)
    lk = _link(store, r, intra if nodes == 1 else inter)
    sc = scenario(r, lk, lk if nodes > 1 else network.link(inter))
    note = (f"; link {lk.name} (alpha {lk.alpha * 1e6:.0f} us, {lk.bandwidth / 1e9:.2f} GB/s)"
            + ("" if sc.overlap else
               "; CPU cores saturated by compute threads: no overlap possible"))
    return sc, compute, note


def median_abs_error(cs: list[Check]) -> float | None:
    return median([abs(c.error) for c in cs]) if cs else None
