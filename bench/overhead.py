"""Runs inside one framework's environment: ``python -m bench.overhead FRAMEWORK ...``.

1. Does the harness's timing loop cost throughput? Alternates, in one process over the
   same built model, the worker's throughput loop (frameworks.timing) and the minimal
   training loop anyone would write by hand in that framework; reports images/s ratios.
2. Breakdown mode's cost: its iteration time over throughput mode's.
3. The facts behind each adapter's defaults, measured side by side (see VARIANTS).
Alternation cancels slow drifts of a shared, noisy machine. Prints one JSON line.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from frameworks.contract import RunSpec
from frameworks.timing import breakdown_trial, throughput_trial, warm_up


def torch_loop(trainer, steps: int) -> float:
    model, opt, crit = trainer.model, trainer.optimizer, trainer.criterion
    x, y = trainer.images, trainer.labels
    start = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = crit(model(x), y)
        loss.backward()
        opt.step()
    return time.perf_counter() - start


def tensorflow_loop(trainer, steps: int) -> float:
    import keras
    import tensorflow as tf

    if not hasattr(trainer, "_bench_step"):
        model = trainer.model
        opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        trainer._bench_step = train_step
        train_step(trainer.images, trainer.labels)
    step, x, y = trainer._bench_step, trainer.images, trainer.labels
    start = time.perf_counter()
    for _ in range(steps):
        loss = step(x, y)
    float(loss)
    return time.perf_counter() - start


def mxnet_loop(trainer, steps: int) -> float:
    from mxnet import autograd, nd

    net, tr, loss_fn = trainer.net, trainer.trainer, trainer.loss_fn
    x, y, bs = trainer.images, trainer.labels, trainer.spec.batch_size
    nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        tr.step(bs)
    nd.waitall()
    return time.perf_counter() - start


HAND_WRITTEN = {"torch": torch_loop, "tensorflow": tensorflow_loop, "mxnet": mxnet_loop}


def _trainer(framework: str, spec: RunSpec, **kw):
    import importlib

    adapter = importlib.import_module(f"frameworks.{framework}.adapter")
    if not kw:
        return adapter.build_trainer(spec)
    cls = {"torch": "TorchTrainer", "tensorflow": "TensorFlowTrainer",
           "mxnet": "MXNetTrainer"}[framework]
    return getattr(adapter, cls)(spec, **kw)


def _interleaved(runners: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds per block for each runner, blocks interleaved round-robin with the order
    reversed every other round (ABBA), so drifts on a shared machine hit all alike."""
    names = list(runners)
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        for n in (names if i % 2 == 0 else names[::-1]):
            times[n].append(runners[n]())
    return times


#: framework -> [(fact name, spec changes, trainer keyword arguments)]
VARIANTS = {
    "torch": [("channels_first_64px", {"layout": "channels_first"}, {}),
              ("channels_last_64px", {"layout": "channels_last"}, {}),
              ("channels_first_128px", {"layout": "channels_first", "image_size": 128}, {}),
              ("channels_last_128px", {"layout": "channels_last", "image_size": 128}, {})],
    "tensorflow": [("xla_off", {}, {"xla": False}), ("xla_on", {}, {"xla": True}),
                   ("channels_first_cpu", {"layout": "channels_first"}, {})],
    "mxnet": [("hybridized", {}, {"hybridize": True}), ("imperative", {}, {"hybridize": False})],
}


def main() -> None:
    framework, model = sys.argv[1], sys.argv[2]
    size, batch, steps, rounds = (int(v) for v in sys.argv[3:7])
    spec = RunSpec(framework, model, batch_size=batch, image_size=size)
    trainer = _trainer(framework, spec)
    warm_up(trainer, 3)
    hand = HAND_WRITTEN[framework]
    hand(trainer, 1)
    t = _interleaved({"hand": lambda: hand(trainer, steps),
                      "ours": lambda: throughput_trial(trainer, steps).wall,
                      "breakdown": lambda: breakdown_trial(trainer, steps).wall}, rounds)
    ratios = [h / o for h, o in zip(t["hand"], t["ours"])]  # images/s ours / hand-written
    slowdowns = [b / o for b, o in zip(t["breakdown"], t["ours"])]
    runners, facts = {}, {}
    for name, change, kw in VARIANTS[framework]:
        s = RunSpec(framework, model, **{"batch_size": batch, "image_size": size, **change})
        try:
            tr = _trainer(framework, s, **kw)
            warm_up(tr, 2)
            runners[name] = (lambda tr=tr: throughput_trial(tr, steps).wall)
            facts[name] = s.batch_size * steps
        except Exception as exc:  # noqa: BLE001 - an unsupported variant is a fact too
            facts[name] = f"not runnable: {str(exc).splitlines()[0][:120]}"
    if runners:
        vt = _interleaved(runners, max(4, rounds // 2))
        for name, walls in vt.items():
            facts[name] = round(facts[name] / statistics.median(walls), 2)
    q = statistics.quantiles(ratios, n=4)
    print(json.dumps({"framework": framework, "model": model, "image_size": size,
                      "batch": batch, "steps": steps, "rounds": rounds,
                      "throughput_ratio_median": statistics.median(ratios),
                      "throughput_ratio_iqr": [q[0], q[2]], "throughput_ratios": ratios,
                      "breakdown_slowdown_median": statistics.median(slowdowns),
                      "variants_images_per_s": facts, "target": ">= 0.98"}))


if __name__ == "__main__":
    main()
