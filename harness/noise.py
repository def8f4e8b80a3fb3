"""A noise meter: a short, fixed machine probe run by the harness between runs (NumPy, no
framework). A dense fp32 matrix multiply (the machine's compute peak as the harness sees
it: every core) and a large memory copy (its memory bandwidth), each for a fixed time.

Every run stores the probes taken around its trials (before and after it, or between the
rounds of its interleaved group): their largest GEMM figure is the machine's measured
peak for the run's model FLOPs utilisation (`mfu`); their median against the sweep's
usual best so far (REFERENCE_QUANTILE of all its probes) is `noise_ratio` (the median: one
probe caught by a hiccup among an interleaved run's dozens does not make the whole run
disturbed): a run whose ratio is below DISTURBED was measured while something else took
the machine, and the report says so. The usual best, not the best: on this project's
2-core VM, 120 probes of an idle machine (2026-12-02) spread from 240 (10th percentile)
to 271 GFLOP/s (90th) with a best of 283, so the best alone is a lucky tail that only
grows with a sweep's length; groups of 8 of those idle probes read 0.84-0.96 of the best
so far (one of 15 flagged), 0.87-0.98 of the 90th percentile (none).
An interleaved group's members wait at their gates while the probe runs; the CPU time
their process trees use meanwhile is `Probe.own_cores`. A low probe taken while they
used more than OWN_LOAD_SHARE of the cores is their load (`state`: "own load"), not a
disturbance: one busy core of two drops the GEMM to about 0.2 of its usual best (OpenBLAS
splits the product evenly across its threads, so the slowest core sets the pace), so no
correction by their share would be right.
On GPU hosts and under Slurm the probe does not see the device the run used: there the
worker measures its own device (frameworks/peak.py) and MFU is against that peak.
The noise probe is NumPy's BLAS as the harness process runs it, which is right for
noise (the same probe every time) but can be far from the machine's peak: on this
project's 2-core AVX-512 VM the environment sets OPENBLAS_CORETYPE=Haswell, which pins
OpenBLAS to AVX2 kernels: 231-245 GFLOP/s, against 415 with OpenBLAS choosing its kernels
for this CPU (and 413-485 for TensorFlow's and XLA's own matmuls, frameworks/peak.py).
So MFU divides by `host_peak()`: the best of the run's probes and a NumPy GEMM measured in
a child process with OPENBLAS_CORETYPE unset (`peak_gflops`), once an hour per machine
state (the harness processes of that hour share it through the cache).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from harness.stats import median, quantile

#: A run whose probe fell below this fraction of the sweep's usual best was disturbed.
DISTURBED = 0.85
#: A probe measures the machine only while the sweep's own idle workers leave it alone:
#: when they used more than this share of its cores during the run's probes (median),
#: a low probe is the run's own load, not a disturbance, and the run says so instead.
OWN_LOAD_SHARE = 0.1
#: Share of a run's own CPU (its hosts' quotas, else its host's cores) that the group's
#: idle members may take during its trials before the run says so.
NEIGHBOURS_SHARE = 0.1
#: steal above this share of the machine's cores is named in a run's description
STOLEN_SHARE = 0.05
#: The sweep's usual best: this quantile of its probes' GEMM rates so far.
REFERENCE_QUANTILE = 0.9
GEMM_N = 1024  # 2 GFLOP per product: ~10 ms at ~200 GFLOP/s, enough products per probe
COPY_BYTES = 64 * 2**20  # well beyond the last-level cache


@dataclass(frozen=True)
class Probe:
    gemm_gflops: float  # fp32 dense matmul, all cores
    copy_gbs: float  # memory copy, bytes read + written per second / 1e9
    #: cores the sweep's own idle workers (an interleaved group's members waiting at their
    #: gates) used while the probe ran; None where nothing of the sweep was alive
    own_cores: float | None = None


def probe(seconds: float = 0.25) -> Probe:
    """Half the time multiplying, half copying; the best of short repeats, so a probe
    reports what the machine can do now, not its average over a hiccup."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    b = rng.standard_normal((GEMM_N, GEMM_N), dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)  # warm: threads up, pages touched
    best_gemm = _best(lambda: np.matmul(a, b, out=out), seconds / 2)
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best_copy = _best(lambda: np.copyto(dst, src), seconds / 2)
    return Probe(2 * GEMM_N ** 3 / best_gemm / 1e9, 2 * COPY_BYTES / best_copy / 1e9)


#: How long one host-peak measurement serves later harness processes of the same machine
#: state (boot, CPU model, CPUs allowed, cgroups, interpreter, thread settings): measuring
#: it is a child process of 1 s of GEMMs, ~1.4 s that every `dnnbench run` paid (the test
#: suite's ~60 CLI runs: about 1.4 minutes). An hour bounds how long a measurement taken
#: on a disturbed machine can stand.
HOST_PEAK_MAX_AGE_S = 3600.0


def _host_peak_key() -> str:
    """What the host peak depends on besides the hardware's clock: a reboot, another CPU
    (a migrated VM), fewer CPUs allowed (taskset, a container's cpuset or quota), another
    NumPy/BLAS, or thread settings, each gives another key."""
    import hashlib

    def read(path: str) -> str:
        try:
            with open(path) as fh:
                return fh.read()
        except OSError:
            return ""
    model = next((line for line in read("/proc/cpuinfo").splitlines()
                  if line.startswith("model name")), "")
    threads = sorted((k, v) for k, v in os.environ.items() if k.endswith("_NUM_THREADS"))
    parts = [read("/proc/sys/kernel/random/boot_id"), model, read("/proc/self/cgroup"),
             str(sorted(os.sched_getaffinity(0))), sys.executable, str(threads)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _host_peak_file():
    from harness.envs import cache_dir

    return cache_dir() / "host-peak.json"


@functools.lru_cache(maxsize=1)
def host_peak(seconds: float = 1.0) -> float:
    """fp32 GEMM GFLOP/s with the BLAS free to pick its kernels for this CPU (a child
    process without OPENBLAS_CORETYPE); 0.0 when it cannot be measured. Once per harness
    process, and shared for HOST_PEAK_MAX_AGE_S with the later processes of the same
    machine state through the cache: the hardware does not change between runs."""
    path, key = _host_peak_file(), _host_peak_key()
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key) if isinstance(known, dict) else None
    if (isinstance(entry, dict) and isinstance(entry.get("gflops"), (int, float))
            and 0 <= time.time() - entry.get("at", 0) < HOST_PEAK_MAX_AGE_S):
        return float(entry["gflops"])
    gflops = measure_host_peak(seconds)
    if gflops > 0:
        fresh = {k: v for k, v in (known if isinstance(known, dict) else {}).items()
                 if isinstance(v, dict) and time.time() - v.get("at", 0) < HOST_PEAK_MAX_AGE_S}
        fresh[key] = {"gflops": gflops, "at": time.time()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(fresh))
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache: measured again by the next process
    return gflops


def measure_host_peak(seconds: float = 1.0) -> float:
    """The measurement itself, every time it is called (host_peak shares it)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    code = ("from harness.noise import probe\n"
            f"print(max(probe({seconds / 2}).gemm_gflops for _ in range(2)))")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=root,
                             capture_output=True, text=True, timeout=60)
        return float(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return 0.0


def state(row: dict) -> str:
    """How a stored run's probes read the machine: "" (as usual), "disturbed" (something
    else took it: measure again) or "own load" (the probes read low while the sweep's own
    idle workers, such as Horovod's background negotiation across emulated hosts, used
    the machine: the probe cannot tell a disturbance from them, and measuring again
    would read the same)."""
    ratio = row.get("noise_ratio")
    if ratio is None or ratio >= DISTURBED:
        return ""
    own = row.get("noise_own_share")
    if own is not None and own > OWN_LOAD_SHARE:
        return "own load"
    return "disturbed"


def neighbours(row: dict) -> tuple[float, float] | None:
    """(cores the group's idle members took during the run's trials, the run's own cores)
    when that is more than NEIGHBOURS_SHARE of them; None otherwise."""
    taken = row.get("group_idle_cores")
    if not taken:
        return None
    cpus = (row.get("cpus_per_host") or 0) * (row.get("nodes") or 1)
    if not cpus:
        manifest = row.get("manifest_json") or {}
        if isinstance(manifest, str):
            manifest = json.loads(manifest or "{}")
        cpus = manifest.get("host", {}).get("cores") or os.cpu_count() or 1
    return (taken, cpus) if taken > NEIGHBOURS_SHARE * cpus else None


def stolen(row: dict) -> float | None:
    """Cores the hypervisor gave to other VMs while the run measured (steal in the run's
    `machine_cpu_json`) when that is more than STOLEN_SHARE of the machine; None
    otherwise, and for runs stored before it was read. A shared host's load reaches a VM
    as steal: the probes say a run was disturbed, this says by whom."""
    machine = row.get("machine_cpu_json")
    if isinstance(machine, str):
        machine = json.loads(machine or "{}")
    if not machine or not machine.get("steal"):
        return None
    steal, cores = machine["steal"], sum(machine.values())
    return steal if cores and steal > STOLEN_SHARE * cores else None


def describe(row: dict) -> str:
    """The machine's state around a run, in a few words for a report's table."""
    words = {"disturbed": "disturbed: measure again", "own load": "probe under own load",
             "": ""}[state(row)]
    taken = neighbours(row)
    if taken:
        words += ("; " if words else "") + f"idle neighbours took {taken[0]:.2f} cores"
    steal = stolen(row)
    if steal:
        words += ("; " if words else "") + f"other VMs took {steal:.2f} cores (steal)"
    return words


def _best(fn, seconds: float) -> float:
    """Shortest time of one call, calling for about `seconds` (at least 3 times)."""
    best, calls = float("inf"), 0
    end = time.perf_counter() + seconds
    while calls < 3 or time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        calls += 1
    return best


class Meter:
    """The probes of one sweep: `around(before, after)` gives a run's columns."""

    def __init__(self, host_peak_gflops: float | None = None) -> None:
        #: every probe's GEMM rate this sweep, in order
        self.history: list[float] = []
        #: None: measured when first needed (host_peak); tests pin it
        self.host_peak_gflops = host_peak_gflops

    def measure(self, seconds: float = 0.25) -> Probe:
        p = probe(seconds)
        self.history.append(p.gemm_gflops)
        return p

    @property
    def usual_best(self) -> float:
        """REFERENCE_QUANTILE of the sweep's probes so far (linear between ranks)."""
        return quantile(self.history, REFERENCE_QUANTILE)

    def columns(self, probes: list[Probe], spec, images_per_s: float | None
                ) -> dict[str, float | None]:
        """A run's columns from the probes taken around its trials (before and after a
        sequential run; between the rounds of an interleaved group)."""
        probed = max(p.gemm_gflops for p in probes)
        if self.host_peak_gflops is None:
            self.host_peak_gflops = host_peak()
        peak = max(probed, self.host_peak_gflops)
        out: dict[str, float | None] = {
            "machine_gflops": probed, "peak_gflops": peak,
            "machine_copy_gbs": max(p.copy_gbs for p in probes),
            "noise_ratio": median([p.gemm_gflops for p in probes])
            / (self.usual_best or probed)}
        own = [p.own_cores for p in probes if p.own_cores is not None]
        if own:  # a share of the cores the probe ran on (this host's)
            out["noise_own_share"] = median(own) / (os.cpu_count() or 1)
        # loader mode trains nothing: its images/s carry no FLOPs
        if (images_per_s and spec.mode != "loader" and spec.device == "cpu"
                and spec.resolved_launcher != "slurm"):
            out["mfu"] = train_flops_per_image(spec) * images_per_s / (peak * 1e9)
        return out


def train_flops_per_image(spec) -> float:
    """Forward + backward FLOPs of one image from the cost model: 2 FLOPs per MAC, and a
    training step costs about 3 forward passes (the backward pass computes gradients of
    activations and of weights, each about one forward)."""
    from models.cost import cost

    return 3 * 2 * cost(spec.model, spec.image_size, spec.num_classes).macs
