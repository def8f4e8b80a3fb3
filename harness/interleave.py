"""Interleaved, adaptive measurement of the configurations a report compares.

A shared machine drifts: a configuration measured during a busy minute loses to one
measured during a quiet one. So the configurations that are compared with each other
(the same network, batch, image size, strategy and scale across frameworks, the two
timing modes of one configuration, venv against container, synthetic against real data)
form a *group*, measured in
rounds: every member gets its trial k before any member gets trial k+1, so drift hits
all of them alike and a paired difference per round cancels it.

How, per group:
1. Members start one at a time; each is built (imports, model, data) and then waits at
   its gate (frameworks/gate.py): no start-up ever overlaps another member's trial.
   Processes stay alive between trials (each framework keeps its graph, pools and
   caches, as a training job would), and an idle one uses no CPU (measured around every
   trial: `group_idle_cores`; Horovod's workers negotiate while idle, so its multi-worker
   runs form groups of their own, BUSY_WHILE_IDLE).
2. Rounds: a noise probe (harness/noise.py), then each active member in turn is granted
   one trial (its first also runs its warm-up), and the harness waits for it. The order
   inside a round rotates (round r starts with member r mod n), so no member always runs
   right after the probe or right after one particular neighbour.
3. Adaptive sampling: after at least `trials` trials a member stops once the 95% interval
   of its median trial time lies within +-target_width of the median ("target width"),
   or once its own trials have taken budget_s seconds ("budget"); target_width = 0 means
   exactly `trials` ("fixed trials"). The row records which one stopped it.

Runs under Slurm are measured one at a time with fixed trials (the scheduler may queue
them, and a compute node cannot read the harness's gate files): order "sequential".
`order = "sequential"` in an experiment makes every configuration a group of its own.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from frameworks import events, gate
from frameworks.contract import FIELDS, RunSpec, estimated_run_bytes, host_memory_bytes
from harness import jobs
from harness.noise import Meter, Probe
from harness.stats import median, median_ci
from harness.telemetry import Sampler, cores_between
from runners.spec import JobResult, ProcessSpec

#: Fields that may differ inside a group: what the report compares.
COMPARED = ("framework", "mode", "env", "data")
#: Most members measured together (processes alive at once).
GROUP_MAX = 8
#: Share of this host's memory an idle group may hold.
GROUP_MEMORY_SHARE = 0.6
#: A hard cap on adaptive sampling, whatever the budget.
MAX_TRIALS = 1000
#: The noise probe before each round: shorter than a lone run's (there are dozens of
#: rounds; the best of its 10 ms products still finds the peak).
ROUND_PROBE_S = 0.1


#: Strategies whose workers keep working while they wait at their gate: Horovod's
#: background thread negotiates with its peers every cycle. Measured (2026-12-02, PyTorch
#: GoogLeNet on 4 emulated hosts of 0.25 CPU): an idle Horovod member took 0.42 of the
#: hosts' 1.0 core from its neighbour's trials, which ran 1708 ms per step against 1144 ms
#: alone (+49%). Such runs (more than one worker) are measured alone, never beside idle
#: members; `group_idle_cores` shows what any other strategy's idle members take (DDP,
#: TensorFlow MultiWorkerMirrored, MXNet dist_sync on the same hosts: 0.02-0.03 cores).
BUSY_WHILE_IDLE = ("horovod",)


def group_key(spec: RunSpec) -> str:
    """Configurations with the same key are compared with each other."""
    if (spec.order == "sequential" or spec.resolved_launcher == "slurm"
            or (spec.strategy in BUSY_WHILE_IDLE and spec.workers > 1)):
        return "one:" + spec.config_hash()
    data = {k: v for k, v in asdict(spec).items()
            if FIELDS[k].identity and k not in COMPARED}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def groups(specs: list, key: Callable = lambda p: p.spec) -> list[list]:
    """`specs` (anything `key` maps to a RunSpec) split into groups, in order of first
    appearance; a group larger than GROUP_MAX members, or than GROUP_MEMORY_SHARE of this
    host's memory when all are alive, is split into consecutive parts."""
    by_key: dict[str, list] = {}
    for item in specs:
        by_key.setdefault(group_key(key(item)), []).append(item)
    budget = GROUP_MEMORY_SHARE * host_memory_bytes()
    out = []
    for members in by_key.values():
        part: list = []
        used = 0.0
        for item in members:
            spec = key(item)
            try:
                need = estimated_run_bytes(spec)
            except ValueError:  # a combination that cannot run (kept as a skipped run)
                need = 0
            if part and (len(part) >= GROUP_MAX or used + need > budget):
                out.append(part)
                part, used = [], 0.0
            part.append(item)
            used += need
        out.append(part)
    return out


def stop_reason(spec: RunSpec, seconds: list[float], measured_s: float) -> str:
    """Why sampling stops after these trial times ("" to go on): the stated rule."""
    n = len(seconds)
    if n >= MAX_TRIALS:
        return "max trials"
    if n < spec.trials:
        return ""
    if spec.target_width == 0:
        return "fixed trials"
    half = relative_halfwidth(seconds)
    if half is not None and half <= spec.target_width:
        return "target width"
    if measured_s >= spec.budget_s:
        return "budget"
    return ""


def relative_halfwidth(seconds: list[float]) -> float | None:
    """The larger side of the 95% interval of the median, over the median (None: fewer
    than 6 trials, too few for a distribution-free 95% interval)."""
    lo, hi = median_ci(seconds)
    m = median(seconds)
    if lo != lo or not m:
        return None
    return max(m - lo, hi - m) / m


@dataclass
class Trial:
    trial: int
    seconds: float  # wall / timed iterations (rank 0)
    started: float  # unix time
    round: int = -1


@dataclass
class Member:
    """One configuration of a group: how to start it, and what happened."""

    spec: RunSpec
    run_id: str
    procs: list[ProcessSpec]
    launcher: str
    options: dict
    reporters: int  # processes that emit MODEL/TRIAL (a chief reports for a whole PS job)
    sampler: Sampler | None = None
    on_line: Callable[[str, str], None] | None = None  # also sees every line
    gate_path: Path | None = None
    #: Emulated hosts: their interface byte counters, read around this member's own
    #: start-up and turns only (other members of the group move bytes in between).
    counter: Callable[[], dict[str, dict[str, int]]] | None = None
    bytes_moved: dict[str, dict[str, int]] = field(default_factory=dict)
    # filled while it runs
    trials: list[Trial] = field(default_factory=list)
    measured_s: float = 0.0
    probes: list[Probe] = field(default_factory=list)
    #: per trial: cores the group's other members, idle at their gates, used meanwhile
    others_cores: list[float] = field(default_factory=list)
    stopped_by: str = ""
    job: JobResult | None = None
    launch_error: Exception | None = None
    timed_out: bool = False  # the harness stopped it: no progress within timeout_s
    _models: int = 0
    _reported: dict[int, int] = field(default_factory=dict)  # trial -> reporters done
    _rank0: dict[int, Trial] = field(default_factory=dict)  # its numbers, until all are
    _c0: dict | None = None  # emulated-host byte counters at start
    _cancel: threading.Event = field(default_factory=threading.Event)
    _ready: threading.Event = field(default_factory=threading.Event)
    _finished: threading.Event = field(default_factory=threading.Event)
    _changed: threading.Condition = field(default_factory=threading.Condition)
    _thread: threading.Thread | None = None

    @property
    def gated(self) -> bool:
        return self.gate_path is not None

    def _count_from(self) -> dict | None:
        return self.counter() if self.counter is not None else None

    def _count_to(self, before: dict | None) -> None:
        if before is None or self.counter is None:
            return
        after = self.counter()
        for ns, values in after.items():
            mine = self.bytes_moved.setdefault(ns, {})
            for k, v in values.items():
                mine[k] = mine.get(k, 0) + v - before.get(ns, {}).get(k, 0)

    def line(self, tag: str, text: str) -> None:
        if self.on_line is not None:
            self.on_line(tag, text)
        ev = events.parse(text) if events.PREFIX in text else None
        if ev is None:
            return
        if ev["event"] == events.MODEL:
            self._models += 1
            if self._models >= self.reporters:
                self._ready.set()
        elif ev["event"] == events.TRIAL:
            rank, trial = int(ev.get("rank", 0)), int(ev["trial"])
            iters = len(ev.get("iter_times") or ()) or 1
            with self._changed:
                if rank == 0:
                    self.measured_s += float(ev["wall"])
                if ev.get("paired"):
                    return
                if rank == 0:
                    self._rank0[trial] = Trial(trial, float(ev["wall"]) / iters,
                                               float(ev.get("started") or time.time()))
                self._reported[trial] = self._reported.get(trial, 0) + 1
                # rank 0's numbers, but the trial is over only when every reporting rank
                # has ended it: until then a slower rank's last step (its pulls still on
                # the link, its servers still sending) runs, and the probe between rounds
                # or the next grant would overlap it
                if trial in self._rank0 and self._reported[trial] >= self.reporters:
                    self.trials.append(self._rank0.pop(trial))
                    self._changed.notify_all()

    def _run(self, timeout: float) -> None:
        try:
            # a gated member runs in a thread of its own and is cancelled from the main
            # one; an ungated one (Slurm) runs in the main thread, Ctrl-C reaches it there
            extra = {"cancel": self._cancel} if self.gated else {}
            self.job = jobs.run(jobs.Job(self.procs, self.launcher, self.options), timeout,
                                on_line=self.line,
                                on_start=self.sampler.add if self.sampler else None, **extra)
        except Exception as exc:  # noqa: BLE001 - recorded as the run's failure reason
            self.launch_error = exc
        finally:
            self._finished.set()
            self._ready.set()
            with self._changed:
                self._changed.notify_all()

    def start(self, timeout: float) -> None:
        self._c0 = self._count_from()
        if self.sampler is not None:
            self.sampler.start()
        self._thread = threading.Thread(target=self._run, args=(timeout,), daemon=True,
                                        name=f"run-{self.run_id}")
        self._thread.start()

    def wait_ready(self) -> bool:
        """Built and waiting at its gate (False: it ended or timed out first)."""
        if not self._ready.wait(self.spec.timeout_s):
            self.abort(timed_out=True)
            return False
        self._count_to(self._c0)
        return not self._finished.is_set()

    def run_trial(self) -> bool:
        """Grant one more trial and wait for it (False: the job ended or timed out)."""
        n = len(self.trials)
        if self.sampler is not None:
            self.sampler.turn_begins()
        counted = self._count_from()
        gate.write(self.gate_path, n + 1)
        deadline = time.monotonic() + self.spec.timeout_s
        with self._changed:
            while len(self.trials) <= n and not self._finished.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(min(left, 1.0))
        if self.sampler is not None:
            self.sampler.turn_ends()
        self._count_to(counted)
        if len(self.trials) > n:
            return True
        if not self._finished.is_set():
            self.abort(timed_out=True)
        return False

    def stop(self, reason: str) -> None:
        self.stopped_by = reason
        gate.write(self.gate_path, len(self.trials), stop=True)

    def abort(self, timed_out: bool = False) -> None:
        self.timed_out = self.timed_out or timed_out
        self._cancel.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():  # did not finish after its stop: end it
                self.abort(timed_out=True)
                self._thread.join()
        if self.sampler is not None:
            self.sampler.turn_ends()
            self.sampler.stop()


class Group:
    """Measure `members` in interleaved rounds (gated members), or one after another with
    their fixed trials (ungated: Slurm)."""

    def __init__(self, members: list[Member], meter: Meter,
                 on_round: Callable[[int, list[Member]], None] | None = None) -> None:
        self.members = members
        self.meter = meter
        self.on_round = on_round

    def run(self) -> None:
        try:
            gated = [m for m in self.members if m.gated]
            for m in self.members:
                if not m.gated:
                    self._alone(m)
            self._interleaved(gated)
        except BaseException:  # Ctrl-C: every member's whole process tree goes
            for m in self.members:
                m.abort()
            for m in self.members:
                m.join()
            raise

    def _probe(self, idle: list[Member]) -> Probe:
        """A round's noise probe, and what the group's own idle members used meanwhile:
        an idle Horovod worker keeps negotiating with its peers, so a probe can read low
        with nothing outside the sweep running."""
        before, t0 = _ticks(idle), time.monotonic()
        probe = self.meter.measure(ROUND_PROBE_S)
        return replace(probe, own_cores=cores_between(before, _ticks(idle),
                                                      time.monotonic() - t0))

    def _alone(self, m: Member) -> None:
        before = self.meter.measure()
        if m.sampler is not None:
            m.sampler.start()
        counted = m._count_from()
        m._run(m.spec.timeout_s)
        m._count_to(counted)
        if m.sampler is not None:
            m.sampler.stop()
        m.probes = [before, self.meter.measure()]
        m.stopped_by = "fixed trials"

    def _job_timeout(self, members: list[Member]) -> float:
        """The launcher's own limit for one member: start-up, every trial of every member
        and their budgets (the harness ends a member that makes no progress within its
        timeout_s long before this)."""
        return sum(2 * m.spec.timeout_s + 2 * m.spec.budget_s for m in members) + 60

    def _interleaved(self, members: list[Member]) -> None:
        if not members:
            return
        limit = self._job_timeout(members)
        ready = []
        for m in members:  # one at a time: no start-up overlaps another's trial
            gate.write(m.gate_path, 0)
            m.start(limit)
            if m.wait_ready():
                if m.sampler is not None:
                    m.sampler.turn_ends()  # idle until its first turn
                ready.append(m)
        active = list(ready)
        rnd = 0
        while active:
            probe = self._probe(active)
            turn = rnd % len(active)
            for m in active[turn:] + active[:turn]:
                m.probes.append(probe)
                others = [x for x in active if x is not m]
                before, t0 = _ticks(others), time.monotonic()
                if not m.run_trial():
                    active.remove(m)
                    continue
                m.others_cores.append(cores_between(before, _ticks(others),
                                                    time.monotonic() - t0))
                m.trials[-1].round = rnd
                reason = stop_reason(m.spec, [t.seconds for t in m.trials], m.measured_s)
                if reason:  # it finishes and exits before the next member's turn
                    m.stop(reason)
                    m.join(m.spec.timeout_s)
                    active.remove(m)
            if self.on_round is not None:
                self.on_round(rnd, ready)
            rnd += 1
        last = self.meter.measure()
        for m in ready:
            m.probes.append(last)
        for m in members:
            m.join(m.spec.timeout_s)


def _ticks(members: list[Member]) -> dict[int, int]:
    """pid -> CPU ticks of every process of these members' trees (those with telemetry)."""
    out: dict[int, int] = {}
    for m in members:
        if m.sampler is not None:
            out.update(m.sampler.cpu_ticks())
    return out
