"""The contract between the harness and every framework adapter.

Framework-neutral and dependency-free: the harness imports it to build and validate
RunSpecs; each worker imports it to read one. A RunSpec travels to the worker as JSON in
the DNNBENCH_SPEC environment variable and comes back inside every result record, so any
number can be traced to the exact configuration that produced it.

What each framework supports is declared once, in SUPPORT, and checked once, in
`validate`: one clear message per violated rule, naming the field, the value and the fix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from frameworks.support import DEVICES, LAYOUTS, PRECISIONS, FrameworkSupport, registered

#: "loader" times the input pipeline alone (no training): its images/s is the ceiling the
#: data loader puts on training, so a report can say input-bound or compute-bound.
MODES = ("throughput", "breakdown", "loader")
MODELS = ("alexnet", "googlenet", "resnet50", "hepcnn")
#: Strategies: "single" (one worker), "allreduce" (the framework's own data-parallel
#: allreduce: PyTorch DDP, TF MultiWorkerMirrored), "horovod", "ps-sync" (synchronous
#: parameter servers), "ps-async" (asynchronous: never presented as synchronous SGD).
STRATEGIES = ("single", "allreduce", "horovod", "ps-sync", "ps-async")
PS_STRATEGIES = ("ps-sync", "ps-async")
#: How the processes start: "auto" picks horovodrun for Horovod and local otherwise;
#: "mpirun" runs every rank under Open MPI (one program for all ranks, so not for the
#: parameter-server roles); "slurm" submits one sbatch job per run (srun inside an
#: existing allocation).
LAUNCHERS = ("auto", "local", "mpirun", "horovodrun", "slurm")
#: Where the worker's software comes from: "venv" (the framework's cached virtual
#: environment, `dnnbench env setup`) or "container" (the framework's image, `dnnbench
#: image build`, each process in its own container; runners/container.py).
ENVS = ("venv", "container")
ORDERS = ("interleaved", "sequential")
#: Where parameter servers run: "shared": server i on the workers' host i mod nodes, the
#: coordinator (MXNet's scheduler, TensorFlow's chief) on host 0; "own": each server on a
#: host of its own after the workers' hosts, and the coordinator on one more (the Cori
#: study's layout, so the workers' hosts run workers only).
PS_HOSTS = ("shared", "own")


#: Every framework, from its own folder (frameworks/support.py): name -> what it supports.
SUPPORT: dict[str, FrameworkSupport] = registered()


class SpecError(ValueError):
    """A RunSpec field has an invalid value; the message says which and how to fix."""


class UnsupportedError(SpecError):
    """Valid values whose combination cannot run (a strategy a framework lacks, an image
    too small for a network): a sweep records these as skipped, with this reason."""


@dataclass(frozen=True)
class RunSpec:
    """One benchmark configuration. Batch size is per device (weak scaling)."""

    framework: str
    model: str
    batch_size: int = 32
    image_size: int = 224
    num_classes: int = 1000
    steps: int = 20
    warmup: int = 5
    trials: int = 3
    mode: str = "throughput"
    device: str = "cpu"
    precision: str = "fp32"
    layout: str = "auto"
    xla: bool = False  # TensorFlow: jit_compile the training step (off: slower on CPU)
    strategy: str = "single"
    nodes: int = 1
    devices_per_node: int = 1
    ps: int = 0  # parameter servers (ps-* strategies)
    threads: int = 0  # per worker; 0 = an equal share of this host's cores
    lr: float = 0.01
    momentum: float = 0.9
    seed: int = 0
    loss_every: int = 0  # record the loss every N timed steps (0: once per trial, untimed)
    timeout_s: float = 600.0
    memory_limit_mb: int = 0  # per process address-space limit (0: none)
    label: str = ""
    data: str = ""  # ImageNet-style folder (class dirs of JPEGs); "" = synthetic data
    loader_workers: int = 2  # data-loader worker processes / threads per training worker
    launcher: str = "auto"  # see LAUNCHERS
    #: "" runs every process on this host; a rate ("1gbit") or "unshaped" runs each node
    #: in its own emulated host (runners/emulated.py) joined by a link of that rate
    link: str = ""
    #: CPUs of compute per emulated host (a cgroup quota on the cores its share spans,
    #: runners/cgroups.py), so a host's speed does not depend on how many hosts are
    #: busy; 0: every host shares every core
    cpus_per_host: float = 0.0
    #: see PS_HOSTS
    ps_hosts: str = "shared"
    #: MXNet's parameter servers: arrays of at least this many elements are split into one
    #: slice per server (MXNET_KVSTORE_BIGARRAY_BOUND); 0: MXNet's default, 1,000,000
    ps_split_bound: int = 0
    env: str = "venv"  # see ENVS
    #: How the sweep schedules this run's trials against the configurations compared with
    #: it (harness/interleave.py): "interleaved" (default) or "sequential".
    order: str = "interleaved"
    #: Adaptive sampling: after `trials` trials, keep sampling until the 95% interval of
    #: the median lies within +-target_width of it (0: exactly `trials` trials), or until
    #: budget_s seconds of this run's own trials are spent.
    target_width: float = 0.03
    budget_s: float = 30.0
    #: The same configuration measured again within one sweep (harness/replicates.py):
    #: 0 is the first measurement; analyses use each configuration's median replicate.
    replicate: int = 0

    @property
    def workers(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def hosts(self) -> int:
        return hosts_taken(self.nodes, self.ps, self.ps_hosts)

    @property
    def resolved_launcher(self) -> str:
        if self.launcher != "auto":
            return self.launcher
        if self.strategy == "horovod":
            if not self.link:
                return "horovodrun"
            # across emulated hosts: mpirun through its launch agent, or, in containers
            # (no agent in the image), each rank in its own with dnnbench's rendezvous
            return "local" if self.env == "container" else "mpirun"
        return "local"

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.workers

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown RunSpec field(s) {', '.join(unknown)}; known fields: "
                            f"{', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls.from_dict(json.loads(text))

    def config_hash(self) -> str:
        """Identity of the measurement: every field except the label and the limits.

        Fields added after the first release are left out while at their default, so a
        results database made before they existed still resumes."""
        data = {k: v for k, v in asdict(self).items() if FIELDS[k].identity}
        for name, default in LATER_FIELDS.items():
            if data[name] == default:
                data.pop(name)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Field:
    """The rules of one RunSpec field, declared once: validation, the experiment-file
    parser, the `dnnbench run` flags, the config hash and the help text all read these,
    so a new field is one line here and one attribute on RunSpec."""

    type: type
    help: str
    choices: tuple[str, ...] = ()
    low: float | None = None  # numbers: finite, and >= low (> low with low_open)
    high: float | None = None  # numbers: <= high (a sane maximum; the host's limits too)
    low_open: bool = False
    #: may be a list under [matrix]; a field outside the run's identity cannot be an axis
    #: (runs differing only in it would be one run)
    axis: bool = True
    identity: bool = True  # part of config_hash (else: a limit or a note, not a result)
    since: str = "0.1"  # version it appeared in (later fields leave the hash at default)
    flag: str = ""  # `dnnbench run` flag, when not --field-name

    def rule(self) -> str:
        """The allowed values, as a user would write them."""
        if self.choices:
            return f"one of: {', '.join(self.choices)}"
        if self.type is bool:
            return "true or false"
        if self.type is str:
            return "text"
        kind = "a whole number" if self.type is int else "a finite number"
        lo = "" if self.low is None else f"{'>' if self.low_open else '>='} {_num(self.low)}"
        hi = "" if self.high is None else f"<= {_num(self.high)}"
        return f"{kind} {' and '.join(x for x in (lo, hi) if x)}".strip()

    def check(self, name: str, value: Any) -> Any:
        """`value` as this field holds it, or SpecError naming `name`, the value and the
        rule."""
        import math

        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.type) or (self.type is not bool
                                                and isinstance(value, bool)):
            raise SpecError(f"{name} = {value!r} must be {self.rule()}")
        if self.choices and value not in self.choices:
            raise SpecError(f"{name} = {value!r} is not {self.rule()}")
        if self.type is str and not self.choices and any(ord(c) < 32 or ord(c) == 127
                                                         for c in value):
            raise SpecError(f"{name} = {value!r} contains a control character; use plain "
                            "text")
        if self.type in (int, float):
            low_bad = self.low is not None and (value <= self.low if self.low_open
                                                else value < self.low)
            if not math.isfinite(value) or low_bad or (self.high is not None
                                                       and value > self.high):
                raise SpecError(f"{name} = {value!r} must be {self.rule()}")
        return value


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


_FIRST = "0.1"
_DAY = 86400.0
#: Every RunSpec field's rules. The maxima are far above any real run and keep a typo (or a
#: hostile file) from forking or allocating until the host falls over.
FIELDS: dict[str, Field] = {
    "framework": Field(str, "framework", choices=tuple(SUPPORT)),
    "model": Field(str, "network", choices=MODELS),
    "batch_size": Field(int, "per-device batch size", low=1, high=65536, flag="--batch"),
    "image_size": Field(int, "input px (AlexNet needs >= 63)", low=1, high=4096),
    "num_classes": Field(int, "output classes (1000)", low=1, high=1_000_000, flag="--classes"),
    "steps": Field(int, "timed iterations per trial", low=1, high=1_000_000),
    "warmup": Field(int, "untimed iterations before the trials", low=0, high=100_000),
    "trials": Field(int, "trials at least (each one interval sample; 6 or more give a 95% "
                         "interval); adaptive sampling may add more", low=1, high=10_000),
    "mode": Field(str, "throughput: no added syncs; breakdown: time each phase; loader: the "
                       "input pipeline alone (needs --data)", choices=MODES),
    "device": Field(str, "where the model runs", choices=DEVICES),
    "precision": Field(str, "fp32, or mixed precision (amp)", choices=PRECISIONS),
    "layout": Field(str, "tensor layout (auto: the framework's best)", choices=LAYOUTS),
    "xla": Field(bool, "TensorFlow: XLA-compile the training step"),
    "strategy": Field(str, "how workers share the work", choices=STRATEGIES),
    "nodes": Field(int, "hosts (1)", low=1, high=4096),
    "devices_per_node": Field(int, "workers per host (1)", low=1, high=256),
    "ps": Field(int, "parameter servers for ps-* strategies", low=0, high=1024),
    "threads": Field(int, "threads per worker (0: share of cores)", low=0, high=1024),
    "lr": Field(float, "SGD learning rate", low=0, low_open=True, high=100.0),
    "momentum": Field(float, "SGD momentum", low=0, high=0.999999),
    "seed": Field(int, "random seed of weights and data", low=0, high=2**32 - 1),
    "loss_every": Field(int, "record the loss every N timed steps (0: once per trial)", low=0,
                        high=1_000_000),
    "timeout_s": Field(float, "seconds per run (600)", low=0, low_open=True, high=30 * _DAY,
                       axis=False, identity=False, flag="--timeout"),
    "memory_limit_mb": Field(int, "address-space cap per process (0: none)", low=0,
                             high=64 * 1024 * 1024, axis=False, identity=False),
    "label": Field(str, "free text stored with the run", axis=False, identity=False),
    "data": Field(str, "ImageNet-style folder (class dirs of JPEGs) to train on instead of "
                       "synthetic data; see `dnnbench data make`", since="0.2"),
    "loader_workers": Field(int, "data-loader processes/threads per worker (2; 0: in the "
                                 "worker)", low=0, high=256, since="0.2"),
    "launcher": Field(str, "how processes start (auto: horovodrun for horovod, mpirun for "
                           "it across emulated hosts, else local; local starts Horovod "
                           "with dnnbench's own Gloo rendezvous)",
                      choices=LAUNCHERS, since="0.2"),
    "link": Field(str, "run each node in an emulated host joined at this rate (1gbit, "
                       "2gbit, unshaped; needs root; see dnnbench cluster)", since="0.2"),
    "cpus_per_host": Field(float, "CPUs of compute per emulated host (a cgroup quota on "
                                  "its own cores; needs link; 0: hosts share every core)",
                           low=0, high=4096, since="0.4"),
    "ps_hosts": Field(str, "where parameter servers run: shared (server i on worker host i, "
                           "the scheduler or chief on host 0) or own (a host per server and "
                           "one for the scheduler or chief, after the workers' hosts: emulated "
                           "hosts (link) or the nodes of a Slurm job)", choices=PS_HOSTS,
                      since="0.5"),
    "ps_split_bound": Field(int, "MXNet parameter servers: split every array of at least "
                                 "this many elements into one slice per server "
                                 "(MXNET_KVSTORE_BIGARRAY_BOUND; 0: MXNet's 1000000); "
                                 "changes how many requests each server takes, not its "
                                 "bytes", low=0, high=2**31 - 1, since="0.7"),
    "env": Field(str, "run workers in the framework's venv (default) or each in a container "
                      "of its image (see dnnbench image build)", choices=ENVS, since="0.2"),
    "order": Field(str, "interleaved: compared configurations take turns trial by trial; "
                        "sequential: each is measured to the end before the next",
                   choices=ORDERS, axis=False, identity=False, since="0.3"),
    "target_width": Field(float, "stop sampling once the 95% interval of the median is within "
                                 "+- this fraction of it (0.03; 0: exactly `trials` trials)",
                          low=0, high=1, axis=False, identity=False, since="0.3"),
    "budget_s": Field(float, "seconds of trials per configuration after which sampling stops "
                             "even if the interval is wider (30)", low=0, low_open=True,
                      high=30 * _DAY, axis=False, identity=False, since="0.3",
                      flag="--budget"),
    "replicate": Field(int, "measure the same configuration again within one sweep: "
                            "replicate = [0, 1, 2] under [matrix] measures it 3 times, the "
                            "replicates spread through the sweep; analyses use each "
                            "configuration's median replicate (0: the first)",
                       low=0, high=99, since="0.6"),
}
#: Fields added after the first release, with their defaults (see RunSpec.config_hash).
LATER_FIELDS: dict[str, Any] = {
    name: RunSpec.__dataclass_fields__[name].default
    for name, f in FIELDS.items() if f.since != _FIRST and f.identity}


def check_field(name: str, value: Any) -> Any:
    """`value` as field `name` holds it (an int where a float is declared becomes one),
    or SpecError naming the field, the value and the allowed values."""
    return FIELDS[name].check(name, value)


def worker_threads(spec: RunSpec) -> int:
    """Compute threads for one worker: the spec's value, else the share the launcher gave
    it (DNNBENCH_THREADS, see frameworks.plan.worker_env), else every core."""
    import os

    return spec.threads or int(os.environ.get("DNNBENCH_THREADS", "0")) or (os.cpu_count() or 1)


def host_process_limit() -> int:
    """The most processes one run may start on this host (workers + servers + scheduler):
    a few per core, so an experiment file cannot fork the host to death. Runs under Slurm
    start on the cluster's nodes and are not held to it."""
    import os

    return max(16, 4 * (os.cpu_count() or 1))


#: A framework process's own footprint before the model (interpreter, libraries, pools).
RUNTIME_BYTES = 600 * 2**20
MEMORY_CHECK_OFF = "DNNBENCH_IGNORE_MEMORY_CHECK"


def estimated_worker_bytes(spec: RunSpec) -> int:
    """A rough upper estimate of one training worker's memory (cost model): the runtime,
    weights + gradients + momentum + a spare copy, the input batch, and 1.5x the batch's
    activations (kept for backward, plus their gradients' working set); in a run of
    several workers, what its framework's strategy holds for communication besides
    (FrameworkSupport.comm_memory: TensorFlow's collectives hold several gradient copies,
    and 8 such AlexNet workers were killed by the kernel on a 24 GiB host)."""
    from models.cost import cost  # pure Python, cheap

    net = cost(spec.model, spec.image_size, spec.num_classes)
    batch_input = spec.batch_size * 3 * spec.image_size ** 2 * 4
    comm = 0.0
    if spec.workers > 1 and spec.framework in SUPPORT:
        fixed, copies = SUPPORT[spec.framework].comm_memory.get(spec.strategy, (0, 0.0))
        comm = fixed + copies * 4 * net.params
    return int(RUNTIME_BYTES + 16 * net.params + batch_input
               + 1.5 * spec.batch_size * net.activation_bytes + comm)


#: Service processes of a framework that declares nothing for its strategy: each a whole
#: framework runtime, and the weights as MXNet's servers hold them (its measured values,
#: FrameworkSupport.service_memory). A guess: TensorFlow's ps tasks, measured, hold more.
UNMEASURED_SERVICE_MEMORY = (RUNTIME_BYTES, 4.0, 1.0)


def estimated_service_bytes(spec: RunSpec) -> int:
    """A rough upper estimate of what a run's service processes hold in all: its `ps`
    servers and the one process beside them (MXNet's scheduler, TensorFlow's chief); 0
    for a run without servers. 8 workers of MXNet's AlexNet with 4 servers put 2.9 GiB
    in the servers, a quarter of the run's memory."""
    if not spec.ps or spec.strategy not in PS_STRATEGIES:
        return 0
    from models.cost import cost  # pure Python, cheap

    weights = 4 * cost(spec.model, spec.image_size, spec.num_classes).params
    declared = SUPPORT[spec.framework].service_memory if spec.framework in SUPPORT else {}
    per_process, copies, per_worker = declared.get(spec.strategy, UNMEASURED_SERVICE_MEMORY)
    return int((spec.ps + 1) * per_process + (copies + per_worker * spec.workers) * weights)


def estimated_run_bytes(spec: RunSpec) -> int:
    """What the whole run needs on this host: its workers and its service processes."""
    return estimated_worker_bytes(spec) * spec.workers + estimated_service_bytes(spec)


def host_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _check_host_memory(spec: RunSpec) -> None:
    import os

    if os.environ.get(MEMORY_CHECK_OFF) == "1":
        return
    host = host_memory_bytes()
    need = estimated_run_bytes(spec)
    if host and need > host:
        servers = f" and {spec.ps} server(s)" if estimated_service_bytes(spec) else ""
        # a skip, not an error: a sweep records it with this reason and runs the rest
        raise UnsupportedError(
            f"batch_size = {spec.batch_size} at image_size = {spec.image_size}: "
            f"{spec.workers} {SUPPORT[spec.framework].display} {spec.strategy} worker(s)"
            f"{servers} of {spec.model} need about {need / 2**30:.1f} GiB, more than this host's "
            f"{host / 2**30:.1f} GiB; use a smaller batch or image, fewer workers, or "
            "--ignore-memory-check if the estimate is wrong for your setup")


def hosts_taken(nodes: int, ps: int, ps_hosts: str) -> int:
    """Hosts a run takes: its nodes, and with ps_hosts = "own" one per server and one for
    the coordinator (frameworks/plan.node_of places them). A plain function so that a
    stored run's spec is counted by the same formula as a RunSpec."""
    return nodes + (ps + 1 if ps_hosts == "own" else 0)


@dataclass(frozen=True)
class Rule:
    """One rule between launcher, strategy, environment and link, declared as data like
    SUPPORT: when it is broken, why, and a configuration that breaks it (the tests run
    every example, so no rule is unreachable or untested)."""

    broken_by: Callable[[RunSpec], bool]
    message: str  # str.format'ed with the spec's fields and `resolved` (the launcher)
    unsupported: bool  # True: a valid combination this launcher cannot run (sweeps skip it)
    example: dict[str, Any]

    def text(self, spec: RunSpec) -> str:
        return self.message.format(resolved=spec.resolved_launcher, **asdict(spec))


#: Checked in this order; the first broken rule is the one reported.
LAUNCH_RULES: tuple[Rule, ...] = (
    Rule(lambda s: bool(s.link) and s.resolved_launcher not in ("local", "mpirun"),
         "link = {link!r} (emulated hosts) runs with the local or mpirun launcher, not "
         "{resolved!r}", True,
         {"strategy": "horovod", "devices_per_node": 2, "link": "1gbit",
          "launcher": "horovodrun"}),
    Rule(lambda s: (s.strategy == "horovod" and bool(s.link) and s.env == "venv"
                    and s.resolved_launcher == "local"),
         "launcher = 'local' cannot run Horovod across emulated hosts in venvs: Horovod "
         "0.28's process-set Gloo context ignores HOROVOD_GLOO_IFACE and binds the address "
         "the host name resolves to, loopback inside an emulated host (containers get a "
         "host name that resolves to their lab address); use launcher = 'mpirun' (the "
         "default) or env = 'container'", True,
         {"strategy": "horovod", "nodes": 2, "link": "1gbit", "launcher": "local"}),
    Rule(lambda s: s.resolved_launcher == "horovodrun" and s.strategy != "horovod",
         "launcher = 'horovodrun' starts Horovod jobs only, not strategy {strategy!r}; use "
         "local or mpirun", False,
         {"strategy": "allreduce", "devices_per_node": 2, "launcher": "horovodrun"}),
    Rule(lambda s: s.resolved_launcher == "mpirun" and s.strategy in PS_STRATEGIES,
         "launcher = 'mpirun' runs one program on every rank, but a parameter server job "
         "has scheduler, server and worker roles; use local", False,
         {"framework": "mxnet", "strategy": "ps-sync", "ps": 1, "devices_per_node": 2,
          "launcher": "mpirun"}),
    Rule(lambda s: s.env == "container" and s.cpus_per_host > 0,
         "env = 'container' with cpus_per_host is not supported yet: the container engine "
         "would put each container in a cgroup of its own, outside its host's limits; "
         "use env = 'venv'", True,
         {"env": "container", "strategy": "allreduce", "nodes": 2, "link": "unshaped",
          "cpus_per_host": 1.0}),
    Rule(lambda s: s.env == "container" and bool(s.link) and s.resolved_launcher != "local",
         "env = 'container' across emulated hosts starts each process in its own "
         "container (local launcher; Horovod with dnnbench's own rendezvous); launcher "
         "{resolved!r} would need its launch agent inside the image: use launcher = "
         "'local' (or 'auto'), or env = 'venv'", True,
         {"env": "container", "strategy": "horovod", "nodes": 2, "link": "1gbit",
          "launcher": "mpirun"}),
)


def validate(spec: RunSpec) -> None:
    """Raise SpecError for the first field that cannot run (cheap; no framework import)."""
    for f in fields(spec):
        check_field(f.name, getattr(spec, f.name))
    sup = SUPPORT[spec.framework]
    for name, allowed in (("device", sup.devices), ("precision", sup.precisions),
                          ("layout", sup.layouts)):
        if getattr(spec, name) not in allowed:
            why = f" ({sup.layout_unsupported})" if name == "layout" and \
                sup.layout_unsupported else ""
            raise UnsupportedError(f"{name} = {getattr(spec, name)!r} is unsupported for "
                                   f"{spec.framework}{why}; supported: {', '.join(allowed)}")
    if spec.xla and not sup.xla:
        raise UnsupportedError(f"xla = true is unsupported for {spec.framework}; only "
                               "frameworks where XLA is optional take it ("
                               + ", ".join(f for f, s in SUPPORT.items() if s.xla) + ")")
    if spec.mode == "loader" and not spec.data:
        raise SpecError("mode = 'loader' times the input pipeline alone and needs a dataset: "
                        "set data to an ImageNet-style folder (dnnbench data make DIR)")
    if spec.strategy not in sup.strategies:
        why = sup.unsupported.get(spec.strategy, "not implemented for this framework yet")
        raise UnsupportedError(f"strategy = {spec.strategy!r} is unsupported for {spec.framework}: "
                        f"{why}; supported: {', '.join(sup.strategies)}")
    if spec.strategy == "single" and spec.workers != 1:
        raise SpecError(f"strategy 'single' runs one worker, but nodes x devices_per_node = "
                        f"{spec.workers}; choose a distributed strategy or set both to 1")
    if spec.mode == "breakdown" and spec.strategy in sup.phase_unsupported:
        raise UnsupportedError(f"mode = 'breakdown' is unsupported for {spec.framework} "
                               f"{spec.strategy}: {sup.phase_unsupported[spec.strategy]}")
    if spec.data and spec.strategy in sup.data_unsupported:
        raise UnsupportedError(f"data is unsupported for {spec.framework} {spec.strategy}: "
                               f"{sup.data_unsupported[spec.strategy]}")
    if spec.link:
        from runners.emulated import ClusterError, rate_bits

        try:
            rate_bits(spec.link)
        except ClusterError as exc:
            raise SpecError(str(exc)) from None
    if spec.cpus_per_host:
        if not spec.link:
            raise SpecError(f"cpus_per_host = {spec.cpus_per_host:g} limits emulated hosts, "
                            "but link is empty (every process on this host); set link, "
                            "e.g. link = 'unshaped', or cpus_per_host = 0")
        from runners.cgroups import CgroupError, plan

        try:
            plan(spec.hosts, spec.cpus_per_host)
        except CgroupError as exc:
            why = (f" (ps_hosts = 'own': {spec.nodes} workers' hosts + {spec.ps} servers' + "
                   "1 for the scheduler or chief)" if spec.hosts != spec.nodes else "")
            raise SpecError(f"{exc}{why}") from None
    launcher = spec.resolved_launcher
    for rule in LAUNCH_RULES:
        if rule.broken_by(spec):
            raise (UnsupportedError if rule.unsupported else SpecError)(rule.text(spec))
    if launcher != "slurm" and spec.workers + spec.ps > host_process_limit():
        raise SpecError(f"nodes x devices_per_node + ps = {spec.workers + spec.ps} processes "
                        f"is more than this host runs ({host_process_limit()}: 4 per core); "
                        "use fewer, or launcher = 'slurm' for a real cluster")
    loaders = spec.workers * spec.loader_workers if spec.data else 0
    if launcher != "slurm" and loaders > 4 * host_process_limit():
        raise SpecError(f"loader_workers = {spec.loader_workers} for each of {spec.workers} "
                        f"workers is {loaders} loader processes, more than this host runs "
                        f"({4 * host_process_limit()}); use fewer loader workers")
    if spec.strategy in PS_STRATEGIES and spec.ps < 1:
        raise SpecError(f"strategy {spec.strategy!r} needs ps >= 1 parameter servers")
    if spec.strategy not in PS_STRATEGIES and spec.ps:
        raise SpecError(f"ps = {spec.ps} only applies to ps-sync / ps-async strategies")
    if spec.ps_split_bound and spec.strategy not in PS_STRATEGIES:
        raise SpecError(f"ps_split_bound = {spec.ps_split_bound} splits arrays over parameter "
                        f"servers, but strategy {spec.strategy!r} has none; use ps-sync or "
                        "ps-async, or ps_split_bound = 0")
    if spec.ps_split_bound and spec.framework != "mxnet":
        raise UnsupportedError(f"ps_split_bound = {spec.ps_split_bound} is MXNet's "
                               f"MXNET_KVSTORE_BIGARRAY_BOUND; {spec.framework} places whole "
                               "variables on its servers; use ps_split_bound = 0")
    if spec.ps_hosts == "own" and spec.strategy not in PS_STRATEGIES:
        raise SpecError(f"ps_hosts = 'own' places parameter servers, but strategy "
                        f"{spec.strategy!r} has none; use ps-sync or ps-async, or "
                        "ps_hosts = 'shared'")
    if spec.ps_hosts == "own" and not spec.link and spec.resolved_launcher != "slurm":
        raise SpecError("ps_hosts = 'own' gives each server a host of its own, but link is "
                        "empty (every process on this host); set link, e.g. link = "
                        "'1gbit', to run on emulated hosts, or launcher = 'slurm' for "
                        "the nodes of a cluster")
    from models.cost import ShapeError, cost  # pure Python, cheap

    try:
        cost(spec.model, spec.image_size, spec.num_classes)
    except ShapeError as exc:
        raise UnsupportedError(f"image_size = {spec.image_size}: {exc}") from None
    if launcher != "slurm" and spec.device == "cpu":  # on GPUs the model is in GPU memory
        _check_host_memory(spec)


class Trainer(Protocol):
    """What an adapter hands the neutral timing loop: one training step, split in phases.

    `step()` is the framework's fastest fused path (throughput mode, no added syncs);
    the phase methods are called in order with `synchronize()` between them in breakdown
    mode. Phases a configuration does not have (no data pipeline, a single worker) are
    no-ops and measure as ~0, which is itself a recorded fact.
    """

    def step(self) -> None: ...
    def next_batch(self) -> None: ...
    def to_device(self) -> None: ...
    def forward(self) -> None: ...
    def backward(self) -> None: ...
    def communicate(self) -> None: ...
    def update(self) -> None: ...
    def synchronize(self) -> None: ...
    def loss(self) -> float: ...
    def parameter_count(self) -> int: ...
    def settings(self) -> dict[str, Any]: ...
    def state_digest(self) -> str: ...
    def close(self) -> None: ...
