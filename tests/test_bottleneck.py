"""What bound a step, summed per host: the host of each process must be the one the plans
chose (frameworks/plan.py node_of), or a host's CPU is summed from the wrong processes.
The measured end (real telemetry and counters) is checked on a real emulated run in
tests/test_model_validation.py::test_holdout_on_a_tiny_real_scaling_run."""

import json
from dataclasses import replace

import pytest

from frameworks.contract import RunSpec
from frameworks.plan import PlanContext, node_of, plan, spec_hosts, spec_node_of
from harness import bottleneck

HOSTS = tuple(f"10.77.0.{i + 1}" for i in range(12))


@pytest.mark.parametrize("framework,strategy,nodes,per,ps,ps_hosts", [
    ("mxnet", "ps-sync", 3, 2, 4, "shared"), ("mxnet", "ps-async", 2, 1, 3, "shared"),
    ("tensorflow", "ps-async", 3, 2, 5, "shared"), ("torch", "allreduce", 3, 2, 0, "shared"),
    ("torch", "horovod", 2, 2, 0, "shared"), ("mxnet", "ps-sync", 3, 2, 4, "own"),
    ("tensorflow", "ps-async", 2, 1, 2, "own")])
def test_node_of_is_where_every_plan_puts_each_process(framework, strategy, nodes, per, ps,
                                                       ps_hosts):
    spec = RunSpec(framework=framework, model="googlenet", strategy=strategy, nodes=nodes,
                   devices_per_node=per, ps=ps, link="unshaped", ps_hosts=ps_hosts)
    hosts = HOSTS[:spec.hosts]
    procs = plan(spec, PlanContext("python", ".", "t", hosts=hosts))
    stored = json.loads(spec.to_json())  # as the harness reads it back
    assert spec_hosts(stored) == spec.hosts
    for p in procs:
        assert p.host == hosts[spec_node_of(stored, p.role, p.rank)], (p.role, p.rank, p.host)
    used = {p.host for p in procs}
    assert used == set(hosts)  # every host the run takes runs something
    if ps_hosts == "own":  # the workers' hosts run workers only
        assert {p.role for p in procs if hosts.index(p.host) < nodes} == {"worker"}


def _row(cores: dict[str, float], moved: dict[str, dict[str, int]], t: float,
         nodes: int = 2, per: int = 2, ps: int = 2) -> dict:
    spec = {"nodes": nodes, "devices_per_node": per, "ps": ps}
    return {"run_id": "r", "mode": "throughput", "framework": "mxnet", "model": "googlenet",
            "strategy": "ps-sync", "workers": nodes * per, "t_iter_s": t, "link": "1gbit",
            "cpus_per_host": 0.5, "spec_json": json.dumps(spec),
            "cpu_cores_by_process_json": json.dumps(cores),
            "manifest_json": json.dumps({"host": {"emulated": {"bytes": moved}}}),
            "warmup_steps": 1, "n_iters": 9, "n_trials": 1, "trial_order": "sequential"}


def test_a_launchers_tree_across_hosts_is_no_hosts_cpu():
    """Horovod's ranks started by mpirun on 8 emulated hosts are sampled as one tree (the
    MXNet run that read "busiest host's CPU 772% of its quota"): no host's CPU is known,
    the wire still is; on one host the tree is that host's."""
    moved = {f"dnb-h{i}": {"tx_bytes": 10 * 2_000_000, "rx_bytes": 10 * 2_000_000}
             for i in range(8)}
    row = {**_row({"mpirun0": 1.93}, moved, 0.5, nodes=8, per=1, ps=0),
           "strategy": "horovod", "link": "100mbit", "cpus_per_host": 0.25,
           "cpu_throttled_by_process_json": json.dumps({"mpirun0": 0.29})}
    assert bottleneck.host_cores(row) == {} and bottleneck.host_throttled(row) == {}
    b = bottleneck.check(row)
    assert b.cpu is None and b.wire == pytest.approx(0.32)  # 2 MB at 100 Mbit/s of 0.5 s
    assert b.verdict == "wire not saturated (CPU unmeasured)"
    assert b.text == "wire 32% of the step: wire not saturated (CPU unmeasured)"
    assert b.short == "wire not saturated, CPU unmeasured"
    one = {**row, "spec_json": json.dumps({"nodes": 1, "devices_per_node": 2, "ps": 0})}
    assert bottleneck.host_cores(one) == {0: pytest.approx(1.93)}
    # runs stored from 2026-12-04 also carry every process's CPU by the host whose network
    # namespace it ran in: the tree's split (tests/test_emulated.py measures it)
    split = {**row, "cpu_cores_by_host_json": json.dumps({str(i): 0.24 for i in range(8)})}
    assert bottleneck.host_cores(split) == {i: 0.24 for i in range(8)}
    b = bottleneck.check(split)
    assert b.cpu == pytest.approx(0.96) and b.verdict == "CPU-bound (host 0)"
    assert b.throttled is None  # this row has no host groups' counters
    split["cpu_throttled_by_host_json"] = json.dumps({str(i): 0.5 for i in range(8)})
    assert bottleneck.host_throttled(split) == {i: 0.5 for i in range(8)}
    assert bottleneck.check(split).throttled == 0.5


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
    # ps_hosts = "own": a host per server after the workers', the scheduler on the last;
    # the scheduler's address is the one every role is told to find it at
    own = RunSpec(framework="mxnet", model="googlenet", strategy="ps-sync", nodes=2,
                  devices_per_node=1, ps=2, link="unshaped", ps_hosts="own")
    assert own.hosts == 5
    procs = plan(own, PlanContext("python", ".", "t", hosts=HOSTS[:5]))
    where = {f"{p.role}{p.rank}": HOSTS.index(p.host) for p in procs}
    assert where == {"worker0": 0, "worker1": 1, "server0": 2, "server1": 3, "scheduler0": 4}
    assert {p.env["DMLC_PS_ROOT_URI"] for p in procs} == {HOSTS[4]}
    assert node_of("chief", 0, 2, 1, ps=2, own=True) == 4
    assert node_of("ps", 1, 2, 1, ps=2, own=True) == 3


def test_servers_on_hosts_of_their_own_are_summed_on_those_hosts():
    """ps_hosts = "own": the server's CPU lands on its own host, not a worker's, and a
    run with one workers' host still crossed links (to its servers)."""
    cores = {"worker0": 0.2, "worker1": 0.2, "server0": 0.45, "scheduler0": 0.01}
    moved = {f"dnb-h{i}": {"tx_bytes": 10 * b, "rx_bytes": 10 * b}
             for i, b in enumerate((20e6, 20e6, 40e6, 1e4))}
    row = _row(cores, moved, 1.0, nodes=2, per=1, ps=1)
    spec = json.loads(row["spec_json"])
    row["spec_json"] = json.dumps({**spec, "ps_hosts": "own"})
    assert bottleneck.host_cores(row) == pytest.approx({0: 0.2, 1: 0.2, 2: 0.45, 3: 0.01})
    b = bottleneck.check(row)
    assert (b.cpu, b.cpu_host, b.wire_host) == (pytest.approx(0.9), 2, 2)
    assert b.label.endswith("on 4 hosts (servers on own hosts)")
    one = _row({"worker0": 0.2, "server0": 0.1}, moved, 1.0, nodes=1, per=1, ps=1)
    one["spec_json"] = json.dumps({**json.loads(one["spec_json"]), "ps_hosts": "own"})
    assert bottleneck.check(one) is not None


def test_the_busiest_hosts_throttling_is_read_from_its_own_processes():
    """Processes on one host share its cgroup: the CPU-bound host's throttled share is the
    one the run line prints, not another host's; runs stored before throttling was read
    print the CPU share alone."""
    cores = {"worker0": 0.2, "worker1": 0.2, "server0": 0.45, "scheduler0": 0.01}
    moved = {f"dnb-h{i}": {"tx_bytes": 10 * b, "rx_bytes": 10 * b}
             for i, b in enumerate((20e6, 20e6, 40e6, 1e4))}
    row = _row(cores, moved, 1.0, nodes=2, per=1, ps=1)
    row["spec_json"] = json.dumps({**json.loads(row["spec_json"]), "ps_hosts": "own"})
    old = bottleneck.check(row)
    assert old.throttled is None and "CFS" not in old.text
    row["cpu_throttled_by_process_json"] = json.dumps(
        {"worker0": 0.1, "worker1": 0.12, "server0": 0.93, "scheduler0": 0.0})
    assert bottleneck.host_throttled(row) == {0: 0.1, 1: 0.12, 2: 0.93, 3: 0.0}
    b = bottleneck.check(row)
    assert (b.cpu_host, b.throttled) == (2, 0.93)
    assert "CPU 90% of its quota (out of quota in 93% of its CFS periods)" in b.text, b.text


def test_the_report_and_the_cli_set_measured_beside_simulated_shares_alike():
    """A held-out row whose step was simulated shows the measured busiest host's CPU and
    wire beside the simulated step's, in the report's table as in the CLI's."""
    from harness import analysis
    from harness.perfmodel import holdout

    b = bottleneck.Bottleneck("x", "r1", 1.0, 0.95, 2, 0.6, 2)
    row = holdout.HeldOut("mxnet resnet50 ps1 (own hosts) x4", "ps-sync", 4, 1.0, 0.9, 1.1,
                          1.05, "inputs", "r1", simulated_busy=(0.8, 0.5))
    result = holdout.Result(rows=[row], bottlenecks=[b])
    text = "CPU-bound; CPU 95% / 80%, wire 60% / 50%"
    assert holdout.bound_text(b, row.simulated_busy) == text
    assert analysis.holdout(result).rows[0]["bound"] == text
    assert text in holdout.table(result)
    assert b.brief == "CPU-bound (CPU 95%, wire 60%)"
    # the noise probe's flag reaches the report's table and the CLI's the same way
    assert analysis.holdout(result).rows[0]["machine"] is None and "*" not in \
        holdout.table(result)
    flagged = holdout.Result(rows=[replace(row, disturbed=True)], bottlenecks=[b],
                             disturbed_fits=["mxnet resnet50 ps1 (own hosts) x2"])
    assert analysis.holdout(flagged).rows[0]["machine"] == "disturbed"
    assert "+5.0%* CPU-bound" in holdout.table(flagged)
    assert "disturbed: mxnet resnet50 ps1 (own hosts) x2" in analysis.holdout(flagged).note


def test_the_busiest_ingress_shapers_waits_per_step_are_read_from_the_hosts_counters():
    """Runs stored since 2026-12-03 count each host's ingress-shaper waits (tc overlimits
    at the bridge port towards it): the line gives the largest per step; older runs have
    none, and the table says nothing of it."""
    from harness.perfmodel.traffic import steps_run

    cores = {"worker0": 0.2, "worker1": 0.2, "server0": 0.3, "worker2": 0.2, "worker3": 0.2,
             "server1": 0.3}
    moved = {"dnb-h0": {"tx_bytes": 10 * 20_000_000, "rx_bytes": 10 * 20_000_000,
                        "in_overlimits": 300, "retrans_segs": 2},
             "dnb-h1": {"tx_bytes": 10 * 20_000_000, "rx_bytes": 10 * 20_000_000,
                        "in_overlimits": 90, "retrans_segs": 0}}
    row = _row(cores, moved, 1.0)
    b = bottleneck.check(row)
    assert b.ingress_waits == pytest.approx(300 / steps_run(row))
    assert f"ingress waits {300 / steps_run(row):,.0f}/step" in bottleneck.table([b])
    old = {ns: {k: v for k, v in c.items() if k.endswith("_bytes")} for ns, c in moved.items()}
    before = bottleneck.check(_row(cores, old, 1.0))
    assert before.ingress_waits is None and "ingress" not in bottleneck.table([before])
