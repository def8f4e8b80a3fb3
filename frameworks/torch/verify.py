"""PyTorch side of `dnnbench verify`: spec layouts are PyTorch's, so loading is direct.

With job["dtype"] = "float64" the same network runs in double precision: that run is the
exact function every framework's float32 run is compared with (harness/verify.py)."""

from __future__ import annotations

import numpy as np
import torch

import models
from frameworks.torch.build import SpecNet, module_key
from models.cost import cost
from models.weights import INPUT_KEY, LABELS_KEY, trainable_keys

PARAM = {"weight": "weight", "bias": "bias", "gamma": "weight", "beta": "bias",
         "running_mean": "running_mean", "running_var": "running_var"}


def run(job: dict, weights: dict[str, np.ndarray]) -> dict:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    net = models.build(job["model"], job["num_classes"])
    model = SpecNet(net, cost(job["model"], job["image_size"], job["num_classes"]),
                    dropout=False)
    dtype = getattr(torch, job.get("dtype", "float32"))
    model = model.to(dtype)
    with torch.no_grad():
        for key, value in weights.items():
            if key.startswith("__"):
                continue
            layer, name = key.rsplit(".", 1)
            target = getattr(model.layers[module_key(layer)], PARAM[name])
            target.copy_(torch.from_numpy(value))
    x = torch.from_numpy(weights[INPUT_KEY]).to(dtype)
    y = torch.from_numpy(weights[LABELS_KEY])
    model.eval()
    with torch.no_grad():
        logits = model(x).numpy()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=job["lr"], momentum=job["momentum"])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    updated = {}
    for key in trainable_keys(job["model"], job["image_size"], job["num_classes"]):
        layer, name = key.rsplit(".", 1)
        updated[key] = getattr(model.layers[module_key(layer)], PARAM[name]).detach().numpy()
    return {"logits": logits, "loss": float(loss), "updated": updated}
