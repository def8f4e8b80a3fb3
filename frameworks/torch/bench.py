"""PyTorch's side of `bench/overhead.py`: the minimal training loop anyone would write by
hand in PyTorch, over the adapter's own built model, and the variants behind the
adapter's defaults (measured side by side)."""

from __future__ import annotations

import time


def hand_written(trainer, steps: int) -> float:
    model, opt, crit = trainer.model, trainer.optimizer, trainer.criterion
    x, y = trainer.images, trainer.labels
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


#: (fact name, spec changes, trainer keyword arguments)
VARIANTS = [("channels_first_64px", {"layout": "channels_first"}, {}),
            ("channels_last_64px", {"layout": "channels_last"}, {}),
            ("channels_first_128px", {"layout": "channels_first", "image_size": 128}, {}),
            ("channels_last_128px", {"layout": "channels_last", "image_size": 128}, {})]


def trainer(spec, **kw):
    """The adapter's trainer, with keyword arguments only a bench variant sets."""
    from frameworks.torch.adapter import TorchTrainer

    return TorchTrainer(spec, **kw)
