"""The timing loop every framework shares (nccl-tests' "one driver" idea).

Adapters only provide a Trainer; warm-up, clocks, synchronisation points and what is
recorded are decided here, once, so a number from one framework means exactly what the
same number from another framework means.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from frameworks.contract import Trainer

PHASES = ("io", "h2d", "forward", "backward", "comm", "update")


@dataclass
class TrialResult:
    iter_times: list[float]  # seconds per timed iteration
    wall: float  # seconds from the first to the last synchronisation of the trial
    phases: dict[str, list[float]] = field(default_factory=dict)  # breakdown mode only
    losses: list[float] = field(default_factory=list)


#: Warm-up by detection: after the configured steps, continue while the iteration times
#: still fall: settled once the median of the last SETTLE_WINDOW synchronised steps is
#: within SETTLE_TOLERANCE of the median of the window before (getting slower is noise, not
#: warm-up), or after SETTLE_MAX_EXTRA more steps (then `settled` is False).
SETTLE_WINDOW = 3
SETTLE_TOLERANCE = 0.10
SETTLE_MAX_EXTRA = 20


@dataclass
class WarmUp:
    steps: int
    settled: bool
    times: list[float]  # seconds per synchronised warm-up step (detection only)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def settled(times: list[float]) -> bool:
    """The stated rule: the last window is no more than SETTLE_TOLERANCE faster than the
    one before it."""
    w = SETTLE_WINDOW
    if len(times) < 2 * w:
        return False
    return _median(times[-w:]) >= (1 - SETTLE_TOLERANCE) * _median(times[-2 * w:-w])


def warm_up(trainer: Trainer, steps: int, detect: bool = False) -> WarmUp:
    """`steps` untimed steps; with `detect`, more until the times settle (one worker only:
    ranks of a collective job must all take the same number of steps, so theirs is fixed).
    """
    if not detect:
        for _ in range(steps):
            trainer.step()
        trainer.synchronize()
        return WarmUp(steps, True, [])
    clock = time.perf_counter
    times: list[float] = []
    trainer.synchronize()
    while True:
        t0 = clock()
        trainer.step()
        trainer.synchronize()
        times.append(clock() - t0)
        if len(times) >= steps and settled(times):
            return WarmUp(len(times), True, times)
        if len(times) >= max(steps, 2 * SETTLE_WINDOW) + SETTLE_MAX_EXTRA:
            return WarmUp(len(times), False, times)


def throughput_trial(trainer: Trainer, steps: int, loss_every: int = 0) -> TrialResult:
    """Steps back to back, no synchronisation added inside the loop.

    Per-iteration stamps are host times; on an asynchronous device they pace out to the
    device's rate over a trial, and `wall` (synchronised at both ends) is exact.
    """
    clock = time.perf_counter
    stamps = [0.0] * steps
    losses: list[float] = []
    step = trainer.step
    trainer.synchronize()
    start = clock()
    if loss_every:
        for i in range(steps):
            step()
            if (i + 1) % loss_every == 0:
                losses.append(trainer.loss())
            stamps[i] = clock()
    else:
        for i in range(steps):
            step()
            stamps[i] = clock()
    trainer.synchronize()
    end = clock()
    stamps[-1] = end
    times = [stamps[0] - start] + [stamps[i] - stamps[i - 1] for i in range(1, steps)]
    if not loss_every:
        losses.append(trainer.loss())
    return TrialResult(times, end - start, losses=losses)


def breakdown_trial(trainer: Trainer, steps: int, loss_every: int = 0) -> TrialResult:
    """Each phase timed on its own, with a device synchronisation after it."""
    clock = time.perf_counter
    sync = trainer.synchronize
    calls = (trainer.next_batch, trainer.to_device, trainer.forward, trainer.backward,
             trainer.communicate, trainer.update)
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    series = [phases[p] for p in PHASES]
    # Graph frameworks whose gradient function must re-run the forward pass (a TF
    # GradientTape inside one tf.function) declare it; the forward time is subtracted.
    refwd = bool(getattr(trainer, "backward_includes_forward", False))
    times: list[float] = []
    losses: list[float] = []
    sync()
    start = clock()
    for i in range(steps):
        t0 = clock()
        prev = t0
        for call, out in zip(calls, series):
            call()
            sync()
            now = clock()
            out.append(now - prev)
            prev = now
        if refwd:
            phases["backward"][-1] = max(0.0, phases["backward"][-1] - phases["forward"][-1])
        times.append(sum(s[-1] for s in series))
        if loss_every and (i + 1) % loss_every == 0:
            losses.append(trainer.loss())
    end = clock()
    if not loss_every:
        losses.append(trainer.loss())
    return TrialResult(times, end - start, phases=phases, losses=losses)


class FeedPhases:
    """The input phases every adapter shares: a Trainer with a `feed` (a real-data
    pipeline, or None for synthetic data) gets them from here."""

    feed = None
    images = labels = None

    def next_batch(self) -> None:
        """Wait for the loader's next batch (t_io); synthetic data already exists (0)."""
        if self.feed is not None:
            self.feed.next_batch()

    def to_device(self) -> None:
        """Copy the loaded batch to the device (t_h2d); synthetic data stays resident on the
        device, as in both papers (0)."""
        if self.feed is not None:
            self.images, self.labels = self.feed.to_device()


class FeedOnly:
    """A data feed dressed as a Trainer whose step only loads a batch and copies it to the
    device: timed by the same throughput loop, it gives the pipeline's own ceiling."""

    def __init__(self, feed) -> None:
        self.feed = feed
        self.synchronize = feed.synchronize

    def step(self) -> None:
        self.feed.next_batch()
        self.feed.to_device()

    def loss(self) -> float:
        return float("nan")


def run_trial(trainer: Trainer, steps: int, mode: str, loss_every: int = 0) -> TrialResult:
    if mode == "breakdown":
        return breakdown_trial(trainer, steps, loss_every)
    return throughput_trial(trainer, steps, loss_every)
