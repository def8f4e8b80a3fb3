"""The model's bytes per host against the emulated hosts' own counters.

A run on emulated hosts stores how many bytes each host's interface sent and received
over the whole run (the kernel's counters, runners/emulated.py). The model says how many
each host sends per step, from the strategy's structure and nothing measured:

* parameter servers on the workers' hosts (predict.host_bytes): its clients' pushes to
  other hosts' servers and its servers' replies to other hosts' clients, from the
  framework's placement rule; on hosts of their own (ps_hosts = "own"): each workers'
  host's whole gradient, and each server's host its share once per client;
* a ring allreduce (network.allreduce, the bytes on the link it costs): 2(n-1)/n of the
  gradient on each host's one edge that leaves it (ranks in host order).

Both sides are exact counts, so this checks the model's traffic where no input was
fitted, at every scale: the wire's time in the model is these bytes over the link's rate.
Asynchronous servers (MXNet's dist_async, validate.asynchronous) move the same bytes per
step (each worker pushes every gradient and pulls every weight once) and are checked the
same way (since 2026-12-05; until then they were skipped: all 134 such runs shipped read
+0.3 to +3.8% over the model, within the start-up allowance).

The run's steps are its warm-up, its timed iterations and, when it took turns with other
configurations, the one untimed step it takes before each later trial (frameworks/
worker.py). Starting up adds traffic the model does not count. Parameter servers: at most
one step's bytes on any host (rank 0's first push of the initial weights and every
worker's first pull); on shi2017-emulated and cori2017-emulated (2026-12-02) the counters
read 2.4-4.4% above 31 steps' worth on every host of all 25 multi-host MXNet runs.
Allreduce: the broadcast of rank 0's initial weights lands on the hosts near rank 0 (up to
6 gradients' worth on TensorFlow's 8-worker runs), so the upper bound is judged on the
median host; on the shi DBs' PyTorch DDP and TensorFlow runs (2-8 workers) the hosts away
from rank 0 read within 0.3% of 2(n-1)/n per step.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from frameworks.plan import hosts_label, spec_hosts
from harness.perfmodel import network
from harness.perfmodel.predict import host_bytes, server_placement
from harness.perfmodel.validate import STRATEGY_MAP, asynchronous, scenario
from models.cost import cost

#: beyond steps x the model's bytes (below) or (steps + 1) x them (above, start-up
#: included): the TCP/IP headers and retransmissions
TOLERANCE = 0.02
_HOST = re.compile(r"(\d+)$")  # an emulated host's index at the end of its namespace
#: a host the model gives fewer bytes per step than this is not judged: its control
#: messages (ps-lite's request headers, acknowledgements and heartbeats, a few KB per
#: step) are not counted and would dominate it. Measured: MXNet servers holding 5-21 KB of
#: HEP-CNN's 2.4 MB on hosts of their own (cori2017-emulated-own, 2026-12-02) sent 8-31 KB
#: per step, while every host the model gives >= 2.4 MB read within 3.6% of it.
SMALL_BYTES = 64 * 1024


@dataclass(frozen=True)
class Traffic:
    label: str
    run_id: str
    steps: int
    #: bytes each host sends per step, busiest first: the model's, and the counters' over
    #: the run's steps (ps-lite numbers servers as they register, not by host, so hosts
    #: are matched by rank)
    modelled: tuple[float, ...]
    measured: tuple[float, ...]

    @property
    def ratios(self) -> tuple[float, ...]:
        """Counted over modelled, on each host the model gives SMALL_BYTES or more."""
        return tuple(m / p for m, p in zip(self.measured, self.modelled) if p >= SMALL_BYTES)

    #: start-up's traffic may sit on a few hosts (allreduce's initial broadcast): the
    #: upper bound is then judged on the median host
    median_host: bool = False

    @property
    def ok(self) -> bool:
        top = (self.steps + 1) / self.steps * (1 + TOLERANCE)
        ratios = sorted(self.ratios)
        judged = [ratios[(len(ratios) - 1) // 2]] if self.median_host else ratios
        return ratios[0] >= 1 - TOLERANCE and all(x <= top for x in judged)


def host_counters(r: dict) -> dict[str, dict]:
    """Each emulated host's interface counters over the whole run, by namespace, as the
    run's manifest stored them (bytes, and the shapers' overlimits where counted); empty
    where the run was not on emulated hosts. The one reader of them: traffic, the
    bottleneck and the packet work all start here. The manifest may be stored text or,
    before the run is stored, the dict itself."""
    manifest = r.get("manifest_json") or "{}"
    manifest = manifest if isinstance(manifest, dict) else json.loads(manifest)
    return manifest.get("host", {}).get("emulated", {}).get("bytes") or {}


def steps_run(r: dict) -> int:
    """Training steps a throughput run took, warm-up and the re-warming steps included."""
    rewarm = (r["n_trials"] or 1) - 1 if r.get("trial_order") == "interleaved" else 0
    return (r["warmup_steps"] or 0) + (r["n_iters"] or 0) + rewarm


def check(r: dict) -> Traffic | None:
    """The model's bytes per host against the counters of a stored run; None where there
    is nothing to compare (not a throughput run of a modelled strategy across emulated
    hosts, or no counters)."""
    spec = json.loads(r["spec_json"])
    moved = host_counters(r)
    if ((r["strategy"] not in STRATEGY_MAP and not asynchronous(r))
            or r["mode"] != "throughput" or not moved
            or spec_hosts(spec) < 2 or len(moved) != spec_hosts(spec)):
        return None
    steps = steps_run(r)
    if not steps:
        return None
    free, unit = network.Link("counted", 0.0, 0.0), network.Link("bytes", 0.0, 1.0)
    sc = scenario(r, free, free)
    net = cost(sc.model, sc.image_size, sc.num_classes)
    if sc.strategy == "ps":
        plc = server_placement(sc, net)
        modelled = host_bytes(sc, plc.bytes_per_server, net.gradient_bytes)
    else:
        modelled = [network.allreduce(sc.algorithm, sc.nodes, sc.devices_per_node,
                                      net.gradient_bytes, free, unit)] * sc.nodes
    # with servers on hosts of their own the coordinator's host (the last) carries control
    # messages only: the model leaves it out, and so does the comparison
    if len(modelled) < len(moved):  # the last host by index: the coordinator's
        last = f"{max(int(_HOST.search(h).group(1)) for h in moved)}"
        moved = {h: v for h, v in moved.items() if _HOST.search(h).group(1) != last}
    measured = sorted((v["tx_bytes"] / steps for v in moved.values()), reverse=True)
    if max(modelled) < SMALL_BYTES:  # nothing but control messages to judge
        return None
    return Traffic(hosts_label(r), r["run_id"], steps, tuple(sorted(modelled, reverse=True)),
                   tuple(measured), median_host=sc.strategy != "ps")


def table(rows: list[Traffic]) -> str:
    """One line per run: the busiest host's bytes per step, modelled and counted, and the
    worst host's ratio."""
    lines = ["traffic per host (the model's bytes per step vs the emulated hosts' counters "
             "over the run's steps; start-up adds up to one step, on the median host for "
             f"allreduce, and {TOLERANCE:.0%} more either way is a mismatch):"]
    for t in rows:
        lo, hi = min(t.ratios) - 1, max(t.ratios) - 1
        lines.append(f"  {t.label:<50} busiest host {t.modelled[0] / 1e6:>8.1f} MB modelled, "
                     f"{t.measured[0] / 1e6:>8.1f} MB counted; hosts {lo:+.1%} to {hi:+.1%} "
                     f"over {t.steps} steps: {'ok' if t.ok else 'MISMATCH'}")
    return "\n".join(lines)
