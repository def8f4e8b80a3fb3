"""JAX's side of `bench/overhead.py`: the minimal jitted Flax training loop anyone would
write by hand (the functional split/merge pattern Flax documents for speed), over the
adapter's own model and batch, and the variants behind the adapter's defaults."""

from __future__ import annotations

import time


def hand_written(trainer, steps: int) -> float:
    if not hasattr(trainer, "_bench_step"):
        import jax
        import optax
        from flax import nnx

        graphdef, tx = trainer.graphdef, trainer.tx

        def loss_fn(params, stats, key, x, y):
            model = nnx.merge(graphdef, params, stats, copy=True)
            logits = model(x, key)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
            return loss, nnx.state(model, nnx.Not(nnx.Param))

        @jax.jit
        def train_step(params, stats, opt_state, key, x, y):
            key, sub = jax.random.split(key)
            (loss, stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                params, stats, sub, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), stats, opt_state, key, loss

        trainer._bench_step = train_step
        trainer._bench_state = jax.tree.map(lambda a: a.copy(), trainer.state)
        *trainer._bench_state, _ = train_step(*trainer._bench_state, trainer.images,
                                              trainer.labels)
    step, x, y = trainer._bench_step, trainer.images, trainer.labels
    state = trainer._bench_state
    start = time.perf_counter()
    for _ in range(steps):
        *state, loss = step(*state, x, y)
    loss.block_until_ready()
    trainer._bench_state = state
    return time.perf_counter() - start


#: (fact name, spec changes, trainer keyword arguments)
VARIANTS = [("fp32", {}, {}), ("bf16_amp", {"precision": "amp"}, {}),
            ("donated", {}, {"donate": True}), ("not_donated", {}, {"donate": False})]


def trainer(spec, **kw):
    from frameworks.jax.adapter import JaxTrainer

    return JaxTrainer(spec, **kw)
