"""A stand-in worker for scheduling tests: follows the harness's gate protocol
(frameworks/gate.py) and the event format exactly like frameworks/worker.py, but each
"iteration" is a fixed amount of pure-Python arithmetic, so two of them are equally fast
by construction and only the machine can make one slower. SPIN_NOISE > 0 adds that much
random relative variation per trial (a noisy configuration)."""

import os
import random
import sys
import time

sys.path.insert(0, os.environ["SPIN_ROOT"])
from frameworks import events  # noqa: E402
from frameworks.gate import Gate  # noqa: E402

WORK = int(os.environ.get("SPIN_WORK", "200000"))
STEPS = int(os.environ.get("SPIN_STEPS", "3"))
NOISE = float(os.environ.get("SPIN_NOISE", "0"))
RANK = int(os.environ.get("SPIN_RANK", "0"))
TAIL = float(os.environ.get("SPIN_TAIL", "0"))  # a rank that ends each trial this late
#: busy while it waits at its gate, like an idle Horovod worker that keeps negotiating
IDLE_BUSY = os.environ.get("SPIN_IDLE_BUSY") == "1"


def spin(n: int) -> int:
    x = 0
    for i in range(n):
        x = (x + i * i) % 1000003
    return x


def busy_while_waiting(gate: Gate, trial: int) -> bool:
    """gate.may_run, with a thread of the same process spinning until granted (as
    Horovod's background thread does, so the process's own CPU time shows it)."""
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=_spin_until, args=(stop,), daemon=True)
    thread.start()
    try:
        return gate.may_run(trial)
    finally:
        stop.set()
        thread.join()


def _spin_until(stop) -> None:
    while not stop.is_set():
        spin(10000)


def main() -> None:
    rng = random.Random(int(os.environ.get("SPIN_SEED", "0")))
    events.model(RANK, {}, parameters=0)
    gate = Gate.from_env(int(os.environ.get("SPIN_TRIALS", "6")))
    trial = 0
    while busy_while_waiting(gate, trial) if IDLE_BUSY else gate.may_run(trial):
        if trial == 0:
            spin(WORK)
            events.warmup(RANK, 1, True, [])
        started = time.time()
        times = []
        t0 = time.perf_counter()
        for _ in range(STEPS):
            a = time.perf_counter()
            spin(int(WORK * (1 + NOISE * rng.uniform(-1, 1))))
            times.append(time.perf_counter() - a)
        time.sleep(TAIL)  # e.g. its last pulls still crossing the link
        wall = time.perf_counter() - t0
        events.trial(RANK, trial, times, wall, {}, started=started)
        trial += 1
    events.done(RANK)


if __name__ == "__main__":
    main()
