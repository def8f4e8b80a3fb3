"""Where rank 0's host's CPU goes, measured against the held-out model (issue #17).

On emulated hosts a parameter-server step is mostly CPU-bound on the host of worker 0 (rank
0, whose wall the harness times), which it shares with the busiest server: the step is
about (the worker's CPU + its servers' CPU) over the quota. So a step predicted right can
be two wrong terms cancelling, and a term made right can make the step wrong: with the
request term (servercost, `--server-requests`) the synchronous servers' CPU is predicted
better and the step worse on most shipped sets. This splits each held-out row's host into
its worker's and its servers' core-seconds per step, measured (per-process telemetry x
t_iter) and modelled (the curve's compute at its share of the quota, plus the worker's
cost across the link where fitted; the servers' fitted cost on what the placement gives
them), so the error of each term is read, not guessed (`python -m bench.host_cpu`).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from frameworks.plan import node_of
from harness.perfmodel import workercost
from harness.perfmodel.predict import Compute, Scenario, ps_clients, server_hosts, server_placement
from models.cost import cost


class HostCpu(NamedTuple):
    """Core-seconds per step of rank 0's host's worker and servers, measured and modelled."""
    host: int
    worker_measured: float
    worker_modelled: float
    servers_measured: float
    servers_modelled: float

    def worker_error(self) -> float:
        return self.worker_modelled / self.worker_measured - 1

    def servers_error(self) -> float | None:
        return (self.servers_modelled / self.servers_measured - 1
                if self.servers_measured > 0 else None)


def rank0(r: dict, sc: Scenario, compute: Compute) -> HostCpu | None:
    """Rank 0's host in stored run `r` as the model `sc` (with its fitted server cost)
    and `compute` see it; None without the run's per-process telemetry or a server cost."""
    cores = json.loads(r.get("cpu_cores_by_process_json") or "{}")
    if sc.server_cost is None or "worker0" not in cores:
        return None
    home = node_of("worker", 0, sc.nodes, sc.devices_per_node)
    share = sc.cpus_per_host / sc.devices_per_node
    worker = compute.total * share + sc.worker_wire_cost * workercost.scenario_remote_bytes(sc)[0]
    plc = server_placement(sc, cost(sc.model, sc.image_size, sc.num_classes))
    n, c = ps_clients(sc), sc.server_cost
    servers = sum(c.per_step(b, n, k, sc.ps_async)
                  for b, k, h in zip(plc.bytes_per_server, plc.tensors_per_server,
                                     server_hosts(sc)) if h == home)
    own = not sc.ps_colocated
    measured = sum(v for tag, v in cores.items() if tag[:6] == "server" and tag[6:].isdigit()
                   and node_of("server", int(tag[6:]), sc.nodes, sc.devices_per_node, sc.ps,
                               own) == home)
    t = r["t_iter_s"]
    return HostCpu(home, cores["worker0"] * t, worker, measured * t, servers)


def text(h: HostCpu) -> str:
    """One row's split, in core-ms per step."""
    se = h.servers_error()
    return (f"host {h.host}: worker {h.worker_measured * 1e3:.0f} / {h.worker_modelled * 1e3:.0f}"
            f" ({h.worker_error():+.0%}), servers {h.servers_measured * 1e3:.0f} / "
            f"{h.servers_modelled * 1e3:.0f}" + (f" ({se:+.0%})" if se is not None else ""))
