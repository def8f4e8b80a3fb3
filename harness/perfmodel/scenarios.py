"""The two papers' headline results, reproduced from model inputs (no cluster needed).

Every input is stated in the output: link profiles from links.toml, compute from FLOPs
presets (predict.DEVICES), tensor lists from the cost model.
"""

from __future__ import annotations

from dataclasses import replace

from harness.perfmodel.predict import Compute, Scenario, predict
from models.cost import cost

CORI_WORKERS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CORI_PS = (1, 4, 16, 32, 54, 64)


def cori(link: str = "aries-grpc") -> dict:
    """Mathuriya et al.: TF gRPC parameter servers on Cori KNL nodes, batch 128 per worker."""
    rows = []
    net = cost("resnet50")
    compute = Compute.from_flops(net, 128, "knl")
    for ps in CORI_PS:
        for n in CORI_WORKERS:
            s = Scenario("resnet50", 128, nodes=n, devices_per_node=1, strategy="ps", ps=ps,
                         inter=link, intra=link, overlap=False)
            p = predict(s, compute)
            rows.append({"network": "resnet50", "ps": ps, "workers": n,
                         "t_iter_s": p.t_iter, "efficiency": p.efficiency,
                         "imbalance": p.detail.get("placement_imbalance", 1.0)})
    hep = cost("hepcnn", 224, 2)
    hep_compute = Compute.from_flops(hep, 128, "knl")
    for n in CORI_WORKERS:
        s = Scenario("hepcnn", 128, nodes=n, strategy="ps", ps=1, inter=link, intra=link,
                     overlap=False, num_classes=2)
        p = predict(s, hep_compute)
        rows.append({"network": "hepcnn", "ps": 1, "workers": n, "t_iter_s": p.t_iter,
                     "efficiency": p.efficiency, "imbalance": 1.0})
    return {"title": "Cori: synchronous SGD with parameter servers over gRPC (Mathuriya et al.)",
            "inputs": [f"link {link} (links.toml)", compute.source,
                       f"HEP-CNN {hep.params:,} parameters, {hep.macs / 1e9:.2f} GMACs/image",
                       "greedy placement; servers on their own nodes; no overlap"],
            "rows": rows}


def shi(intra: str = "pcie3", inters: tuple[str, ...] = ("ib56", "ib56-tcp")) -> dict:
    """Shi et al.: 1, 2, 4 GPUs per node x 1, 2, 4 nodes (P40), with and without overlap.

    Two inter-node links: RDMA (what NCCL/MPI frameworks got) and TCP over the same
    InfiniBand (MXNet's ps-lite and TensorFlow's gRPC in 2017).
    """
    rows = []
    inputs = [f"links {intra} (intra-node); {' and '.join(inters)} (inter-node) (links.toml)",
              "per-GPU batch sizes as used in the paper's experiments: AlexNet 1024, "
              "GoogLeNet 64, ResNet-50 32 (assumed from the paper's setup)"]
    for model, batch in (("alexnet", 1024), ("googlenet", 64), ("resnet50", 32)):
        net = cost(model)
        compute = Compute.from_flops(net, batch, "p40")
        inputs.append(f"{model} batch {batch}/GPU: {compute.source}")
        for inter in inters:
            for nodes, per in ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4)):
                for ov in (True, False):
                    base = Scenario(model, batch, nodes=nodes, devices_per_node=per,
                                    strategy="allreduce", intra=intra, inter=inter, overlap=ov)
                    p = predict(replace(base), compute)
                    rows.append({"network": model, "link": inter, "gpus": nodes * per,
                                 "nodes": nodes, "overlap": ov, "t_iter_s": p.t_iter,
                                 "efficiency": p.efficiency, "t_comm_s": p.t_comm,
                                 "exposed_s": p.t_comm_exposed,
                                 "comm_per_compute": p.t_comm / compute.total})
    return {"title": "Shi et al.: 4 nodes x 4 P40 GPUs, ring allreduce, with/without overlap",
            "inputs": inputs, "rows": rows}
