"""Run by test_distributed in the torch environment (two gloo processes): breakdown mode's
own gradient averaging must hand the optimizer exactly what DDP's fused step does, with the
gradients living in the buckets' flat buffers (no per-step flatten and copy back), also
after a fused step in between and for channels_last parameters.

Usage: python tests/torch_breakdown_grads.py PORT LAYOUT OUT_DIR; writes OUT_DIR/rank<N>.json."""

import json
import os
import sys

import torch
import torch.multiprocessing as mp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _in_buckets(trainer) -> bool:
    spans = [(f.data_ptr(), f.data_ptr() + f.numel() * f.element_size())
             for f, _ in trainer._buckets]
    return all(any(lo <= p.grad.data_ptr() < hi for lo, hi in spans)
               for p in trainer.model.parameters())


def _rank(rank: int, port: str, layout: str, out_dir: str) -> None:
    sys.path.insert(0, ROOT)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank),
                      WORLD_SIZE="2", DNNBENCH_LOCAL_RANK="0")
    torch.set_num_threads(1)
    from frameworks.contract import RunSpec
    from frameworks.torch.adapter import TorchTrainer

    # ResNet-50 has no dropout, so two passes over the same batch give the same gradients
    spec = RunSpec("torch", "resnet50", image_size=32, batch_size=2, steps=1, warmup=0,
                   trials=1, num_classes=10, strategy="allreduce", devices_per_node=2,
                   threads=1, mode="breakdown", layout=layout)
    tr = TorchTrainer(spec, rank, 2)
    out = {"rank": rank, "buckets_mb": [round(f.numel() * 4 / 2**20, 2) for f, _ in tr._buckets]}
    for attempt in ("first", "after_fused_step"):
        if attempt == "after_fused_step":
            tr.step()  # DDP's fused step re-points every gradient at its own views
        tr.optimizer.zero_grad()
        tr.criterion(tr.model(tr.images), tr.labels).backward()  # DDP: averaged in backward
        fused = [p.grad.clone() for p in tr.model.parameters()]
        tr.forward()
        tr.backward()
        tr.communicate()
        mine = [p.grad for p in tr.model.parameters()]
        out[attempt] = {"max_abs_diff": max((a - b).abs().max().item()
                                            for a, b in zip(fused, mine)),
                        "max_abs_grad": max(a.abs().max().item() for a in fused),
                        "in_buckets": _in_buckets(tr)}
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    mp.spawn(_rank, args=tuple(sys.argv[1:4]), nprocs=2)
