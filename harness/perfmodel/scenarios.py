"""The two papers' headline results, reproduced from model inputs (no cluster needed).

Every input is stated in the output: link profiles from links.toml, compute from FLOPs
presets (predict.DEVICES), tensor lists from the cost model. The keyword arguments are the
inputs harness/perfmodel/papers.py varies for its sensitivity bands.
"""

from __future__ import annotations

from dataclasses import replace

from harness.perfmodel import network
from harness.perfmodel.predict import DEVICES, Compute, Scenario, predict
from models.cost import cost

CORI_WORKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CORI_PS = (1, 4, 16, 32, 54, 64)
#: per-GPU batch sizes of Shi et al.'s experiments (assumed from the paper's setup)
SHI_BATCH = {"alexnet": 1024, "googlenet": 64, "resnet50": 32}
SHI_SHAPES = ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4))  # (nodes, GPUs per node)
#: how each framework of Shi et al. communicated (the paper, where it says; else assumed:
#: see harness/perfmodel/papers.py): strategy, inter-node link ("rdma" | "tcp"), overlap,
#: PS placement, per-node aggregation before the push
SHI_FRAMEWORKS = {
    "caffe-mpi": dict(strategy="allreduce", link="rdma", overlap=True),
    "cntk": dict(strategy="allreduce", link="rdma", overlap=False),
    "mxnet": dict(strategy="ps", link="tcp", overlap=True, ps_placement="mxnet",
                  ps_local_aggregation=True),
    "tensorflow": dict(strategy="ps", link="tcp", overlap=True, ps_placement="round-robin",
                       ps_local_aggregation=True),
}


def _link(lk: str | network.Link) -> network.Link:
    return lk if isinstance(lk, network.Link) else network.link(lk)


def cori(link: str | network.Link = "aries-grpc", efficiency: float | None = None,
         placement: str = "greedy") -> dict:
    """Mathuriya et al.: TF gRPC parameter servers on Cori KNL nodes, batch 128 per worker."""
    link = _link(link)
    rows = []
    net = cost("resnet50")
    compute = Compute.from_flops(net, 128, "knl", efficiency)
    for ps in CORI_PS:
        for n in CORI_WORKERS:
            s = Scenario("resnet50", 128, nodes=n, devices_per_node=1, strategy="ps", ps=ps,
                         inter=link, intra=link, overlap=False, ps_placement=placement)
            p = predict(s, compute)
            rows.append({"network": "resnet50", "ps": ps, "workers": n,
                         "t_iter_s": p.t_iter, "efficiency": p.efficiency,
                         "imbalance": p.detail.get("placement_imbalance", 1.0),
                         "busiest_mb": p.detail.get("busiest_server_bytes", 0) / 1e6})
    hep = cost("hepcnn", 224, 2)
    hep_compute = Compute.from_flops(hep, 128, "knl", efficiency)
    for n in CORI_WORKERS:
        s = Scenario("hepcnn", 128, nodes=n, strategy="ps", ps=1, inter=link, intra=link,
                     overlap=False, num_classes=2, ps_placement=placement)
        p = predict(s, hep_compute)
        rows.append({"network": "hepcnn", "ps": 1, "workers": n, "t_iter_s": p.t_iter,
                     "efficiency": p.efficiency, "imbalance": 1.0,
                     "busiest_mb": p.detail.get("busiest_server_bytes", 0) / 1e6})
    return {"title": "Cori: synchronous SGD with parameter servers over gRPC (Mathuriya et al.)",
            "inputs": [f"link {link.name} (alpha {link.alpha * 1e6:.0f} us, "
                       f"{link.bandwidth / 1e9:.2f} GB/s)", compute.source,
                       f"HEP-CNN {hep.params:,} parameters, {hep.macs / 1e9:.2f} GMACs/image",
                       f"{placement} placement; servers on their own nodes; no overlap"],
            "rows": rows}


def shi(intra: str | network.Link = "pcie3",
        inters: tuple[str | network.Link, ...] = ("ib56", "ib56-tcp"),
        efficiency: float | None = None, aggregate: bool | None = None) -> dict:
    """Shi et al.: 1, 2, 4 GPUs per node x 1, 2, 4 nodes (P40), with and without overlap.

    Two inter-node links: RDMA (what NCCL/MPI frameworks got) and TCP over the same
    InfiniBand (MXNet's ps-lite and TensorFlow's gRPC in 2017). `aggregate`: whether a
    node's GPUs sum their gradients before pushing to the servers (default: as in
    SHI_FRAMEWORKS).
    """
    intra = _link(intra)
    links = [_link(lk) for lk in inters]
    rows = []
    eff = DEVICES["p40"][1] if efficiency is None else efficiency
    inputs = [f"links {intra.name} (intra-node); {' and '.join(lk.name for lk in links)} "
              "(inter-node) (links.toml)",
              "per-GPU batch sizes as used in the paper's experiments: AlexNet 1024, "
              f"GoogLeNet 64, ResNet-50 32 (assumed from the paper's setup); P40 at {eff:.0%} "
              "of peak"]
    def row(fw: str, s: Scenario, compute: Compute) -> dict:
        p = predict(s, compute)
        return {"framework": fw, "network": s.model, "link": s.inter.name,
                "gpus": s.workers, "nodes": s.nodes, "overlap": s.overlap,
                "t_iter_s": p.t_iter, "efficiency": p.efficiency, "t_comm_s": p.t_comm,
                "exposed_s": p.t_comm_exposed, "comm_per_compute": p.t_comm / compute.total,
                "t_backward_s": compute.t_b}

    by_kind = {"rdma": links[0], "tcp": links[-1]}
    for model, batch in SHI_BATCH.items():
        net = cost(model)
        compute = Compute.from_flops(net, batch, "p40", efficiency)
        inputs.append(f"{model} batch {batch}/GPU: {compute.source}")
        for nodes, per in SHI_SHAPES:
            base = Scenario(model, batch, nodes=nodes, devices_per_node=per, intra=intra)
            for inter in links:  # the generic curves: ring allreduce, with and without overlap
                for ov in (True, False):
                    rows.append(row("allreduce", replace(base, inter=inter, overlap=ov),
                                    compute))
            for fw, how in SHI_FRAMEWORKS.items():  # each framework as it communicated
                kw = {k: v for k, v in how.items() if k != "link"}
                if aggregate is not None and how["strategy"] == "ps":
                    kw["ps_local_aggregation"] = aggregate
                rows.append(row(fw, replace(base, inter=by_kind[how["link"]],
                                            ps=nodes, **kw), compute))
    return {"title": "Shi et al.: 4 nodes x 4 P40 GPUs; ring allreduce with/without overlap, "
                     "and each framework as it communicated",
            "inputs": inputs, "rows": rows}
