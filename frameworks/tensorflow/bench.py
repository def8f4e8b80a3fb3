"""TensorFlow's side of `bench/overhead.py`: the minimal training loop anyone would write by
hand in TensorFlow, over the adapter's own built model, and the variants behind the
adapter's defaults (measured side by side)."""

from __future__ import annotations

import time


def hand_written(trainer, steps: int) -> float:
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


#: (fact name, spec changes, trainer keyword arguments)
VARIANTS = [("xla_off", {}, {"xla": False}), ("xla_on", {}, {"xla": True}),
            ("channels_first_cpu", {"layout": "channels_first"}, {})]


def trainer(spec, **kw):
    """The adapter's trainer, with keyword arguments only a bench variant sets."""
    from frameworks.tensorflow.adapter import TensorFlowTrainer

    return TensorFlowTrainer(spec, **kw)
