"""What bound a step, summed per host: the host of each process must be the one the plans
chose (frameworks/plan.py node_of), or a host's CPU is summed from the wrong processes.
The measured end (real telemetry and counters) is checked on a real emulated run in
tests/test_model_validation.py::test_holdout_on_a_tiny_real_scaling_run."""

import json

import pytest

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, node_of, plan
from harness import bottleneck

HOSTS = ("10.77.0.1", "10.77.0.2", "10.77.0.3")


@pytest.mark.parametrize("framework,strategy,nodes,per,ps", [
    ("mxnet", "ps-sync", 3, 2, 4), ("mxnet", "ps-async", 2, 1, 3),
    ("tensorflow", "ps-async", 3, 2, 5), ("torch", "allreduce", 3, 2, 0),
    ("torch", "horovod", 2, 2, 0)])
def test_node_of_is_where_every_plan_puts_each_process(framework, strategy, nodes, per, ps):
    spec = RunSpec(framework=framework, model="googlenet", strategy=strategy, nodes=nodes,
                   devices_per_node=per, ps=ps, link="unshaped")
    procs = plan(spec, PlanContext("python", ".", "t", hosts=HOSTS[:nodes]))
    for p in procs:
        assert p.host == HOSTS[node_of(p.role, p.rank, nodes, per)], (p.role, p.rank, p.host)


def _row(cores: dict[str, float], moved: dict[str, dict[str, int]], t: float,
         nodes: int = 2, per: int = 2, ps: int = 2) -> dict:
    spec = {"nodes": nodes, "devices_per_node": per, "ps": ps}
    return {"run_id": "r", "mode": "throughput", "framework": "mxnet", "model": "googlenet",
            "strategy": "ps-sync", "workers": nodes * per, "t_iter_s": t, "link": "1gbit",
            "cpus_per_host": 0.5, "spec_json": json.dumps(spec),
            "cpu_cores_by_process_json": json.dumps(cores),
            "manifest_json": json.dumps({"host": {"emulated": {"bytes": moved}}}),
            "warmup_steps": 1, "n_iters": 9, "n_trials": 1, "trial_order": "sequential"}


def test_a_hosts_cpu_sums_its_own_processes_and_its_wire_the_busier_direction():
    # host 0: workers 0 and 1, server 0, the scheduler; host 1: workers 2, 3 and server 1
    cores = {"worker0": 0.15, "worker1": 0.15, "server0": 0.14, "scheduler0": 0.01,
             "worker2": 0.10, "worker3": 0.10, "server1": 0.05}
    moved = {"dnb-h0": {"tx_bytes": 10 * 50_000_000, "rx_bytes": 10 * 40_000_000},
             "dnb-h1": {"tx_bytes": 10 * 30_000_000, "rx_bytes": 10 * 62_500_000}}
    assert bottleneck.host_cores(_row(cores, moved, 1.0)) == pytest.approx({0: 0.45, 1: 0.25})
    b = bottleneck.check(_row(cores, moved, 1.0))
    assert (b.cpu, b.cpu_host) == (pytest.approx(0.9), 0)
    # host 1 received 62.5 MB per step: 0.5 s at 1 Gbit/s of a 1 s step
    assert (b.wire, b.wire_host) == (pytest.approx(0.5), 1)
    assert b.verdict == "CPU-bound (host 0)"
    slow = bottleneck.check(_row(cores, moved, 2.0))  # same cores, a twice longer step
    assert slow.cpu == pytest.approx(0.9) and slow.wire == pytest.approx(0.25)
    idle = {k: v / 2 for k, v in cores.items()}
    assert bottleneck.check(_row(idle, moved, 0.55)).verdict == "wire-bound (host 1)"
    assert bottleneck.check(_row(idle, moved, 1.0)).verdict.startswith("neither saturated")
    # the sweep reads a run's row before it is stored, its JSON columns still objects
    row = _row(cores, moved, 1.0)
    unstored = {k: json.loads(v) if k.endswith("_json") else v for k, v in row.items()}
    assert bottleneck.check(unstored) == b
    one_host = _row(cores, moved, 1.0, nodes=1)
    assert bottleneck.check(one_host) is None  # nothing crossed a link


def test_the_placement_rule_itself():
    """Pinned literally (the test above holds every plan to node_of, which the plans call)."""
    spec = RunSpec(framework="mxnet", model="googlenet", strategy="ps-sync", nodes=3,
                   devices_per_node=2, ps=4, link="unshaped")
    procs = plan(spec, PlanContext("python", ".", "t", hosts=HOSTS))
    where = {f"{p.role}{p.rank}": HOSTS.index(p.host) for p in procs}
    assert where == {"scheduler0": 0, "server0": 0, "server1": 1, "server2": 2, "server3": 0,
                     "worker0": 0, "worker1": 0, "worker2": 1, "worker3": 1, "worker4": 2,
                     "worker5": 2}
