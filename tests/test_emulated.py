"""The emulated cluster for real: network namespaces, veth, a bridge, tc rate shaping,
and distributed training across the emulated hosts (needs root, as CI has)."""

from __future__ import annotations

import collections
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import bottleneck
from runners import cgroups, emulated
from tests.conftest import run_cli
from tests.test_process_runner import alive

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

#: an experiment file's [defaults] for the smallest real training run these tests time
TINY_RUN = """model = "googlenet"
image_size = 32
batch_size = 4
num_classes = 10
steps = 3
warmup = 1
trials = 2
target_width = 0
"""

SERVER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); got, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if not b: break
    t0 = t0 or time.perf_counter(); got += len(b)
print(got * 8 / (time.perf_counter() - t0))
"""
CLIENT = """
import socket, sys
c = socket.create_connection((sys.argv[1], 5001)); buf = b"x" * (1 << 20)
for _ in range(int(sys.argv[2])): c.sendall(buf)
c.close()
"""


def leftovers() -> list[str]:
    out = []
    out += emulated.namespaces()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    out += [ln for ln in links.splitlines() if emulated.BRIDGE in ln or "dnbv" in ln]
    routes = subprocess.run(["ip", "route", "show", "table", "all"], capture_output=True,
                            text=True).stdout
    out += [ln for ln in routes.splitlines() if ln.startswith("unreachable 10.77.")]
    out += [f"cgroup {g}" for g in cgroups.exists()]
    return out


@pytest.fixture
def clean():
    emulated.down()
    yield
    emulated.down()
    assert leftovers() == []


def in_ns(ns: str, *argv: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(["nsenter", f"--net=/run/netns/{ns}", "--", *argv],
                            stdout=subprocess.PIPE, text=True, **kw)


def test_up_down_idempotent_and_guarded(clean):
    c = emulated.up(3, "2gbit")
    assert c.addresses == ["10.77.0.1", "10.77.0.2", "10.77.0.3"]
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert "unreachable 10.77.0.0/24" in routes  # root namespace cannot reach the lab
    assert [r["rate"] for r in emulated.status()] == ["2Gbit"] * 3
    assert emulated.up(2, "unshaped").hosts == ["dnb-h0", "dnb-h1"]  # replaces the old one
    assert [r["rate"] for r in emulated.status()] == ["unshaped"] * 2
    assert emulated.reshape("1gbit").link == "1gbit"
    assert [r["rate"] for r in emulated.status()] == ["1Gbit"] * 2
    assert len(emulated.down()) == 2 and emulated.down() == [] and leftovers() == []
    with pytest.raises(emulated.ClusterError, match="no netem"):
        emulated.rate_bits("1gbit-10ms")


def test_shaped_link_measures_its_rate(clean):
    emulated.up(2, "1gbit")
    server = in_ns("dnb-h1", sys.executable, "-c", SERVER, "10.77.0.2")
    assert server.stdout.readline().strip() == "ready"
    client = in_ns("dnb-h0", sys.executable, "-c", CLIENT, "10.77.0.2", "150")
    client.wait(timeout=60)
    bits_per_s = float(server.communicate(timeout=60)[0].strip())
    assert 0.9e9 < bits_per_s < 1.1e9  # within 10% of 1 Gbit/s
    counters = emulated.interface_bytes("dnb-h0")
    assert counters["tx_bytes"] > 150 * 2**20
    # what a run stores per host: the same bytes, each end's tbf, the host's TCP
    got = emulated.link_counters(["dnb-h0", "dnb-h1"])
    assert set(got["dnb-h0"]) == {"tx_bytes", "rx_bytes", "out_dropped", "out_overlimits",
                                  "in_dropped", "in_overlimits", "out_segs", "retrans_segs"}
    assert got["dnb-h0"]["tx_bytes"] >= counters["tx_bytes"]
    assert got["dnb-h0"]["out_overlimits"] > 0  # 150 MB at 1 Gbit/s waited for tokens
    assert got["dnb-h0"]["out_segs"] > 150 * 2**20 / 65536  # at most 64 KiB a segment
    assert got["dnb-h1"]["in_overlimits"] >= 0 and got["dnb-h1"]["rx_bytes"] > 150 * 2**20


def _runs(db: str) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    return [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY started")]


def test_ddp_and_mxnet_ps_across_two_hosts_cross_the_shaped_link(all_envs, clean, tmp_path):
    db = str(tmp_path / "r.db")
    common = ("--model", "googlenet", "--image-size", "32", "--batch", "4", "--steps", "3",
              "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes", "10", "--nodes", "2",
              "--link", "1gbit", "--db", db)
    proc = run_cli("run", "--framework", "torch", "--strategy", "allreduce",
                   "--mode", "breakdown", *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run_cli("run", "--framework", "mxnet", "--strategy", "ps-sync", "--ps", "2",
                   *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert leftovers() == []  # the sweep removed the cluster it created
    ddp, ps = _runs(db)
    for r in (ddp, ps):
        assert r["status"] == "ok" and r["link"] == "1gbit" and r["nodes"] == 2
        assert r["replicas_identical"] == 1
        moved = json.loads(r["manifest_json"])["host"]["emulated"]["bytes"]
        assert moved["dnb-h0"]["tx_bytes"] > 20e6 and moved["dnb-h1"]["tx_bytes"] > 20e6
    # the model's bytes per host (its clients' pushes out, its server's replies out: 22.4
    # MB each way, whatever the 2 servers' imbalance) against the kernel's counters
    from harness.perfmodel import traffic

    counted = traffic.check(ps)
    assert counted is not None and counted.ok, counted
    assert counted.modelled == (pytest.approx(22.4e6, rel=0.01),) * 2
    # GoogLeNet's 22.4 MB of gradients, 2-rank ring: each rank sends and receives them once
    # per allreduce; at 1 Gbit/s that cannot take less than 0.18 s
    floor = 22.4e6 * 8 / 1e9
    assert floor * 0.9 < ddp["t_comm_s"] < floor * 4


def test_mxnet_split_bound_moves_bytes_between_its_servers(all_envs, clean, tmp_path):
    """ps_split_bound reaches MXNet itself, not only the placement the adapter records:
    with each server on a host of its own, the kernel's counters show what each server
    sent (its replies, twice its bytes with two workers). MXNet's default bound leaves
    GoogLeNet's arrays whole, hashed onto the servers as 16.9 and 5.5 MB; a bound of 1
    splits every array in two, 11.2 MB each. The model's bytes per host follow the run's
    bound (traffic.check), and the runs come from one experiment file's axis."""
    from harness.perfmodel import traffic

    exp = tmp_path / "split.toml"
    exp.write_text('''name = "split"
[defaults]
framework = "mxnet"
''' + TINY_RUN + '''strategy = "ps-sync"
nodes = 2
ps = 2
ps_hosts = "own"
link = "1gbit"
cpus_per_host = 0.4
[matrix]
ps_split_bound = [0, 1]
''')
    db = str(tmp_path / "r.db")
    proc = run_cli("run", "-e", str(exp), "--db", db)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ps_split_bound=1" in proc.stdout
    runs = {r["ps_split_bound"]: r for r in _runs(db)}
    assert sorted(runs) == [0, 1]
    for bound, r in runs.items():
        assert r["status"] == "ok" and r["replicas_identical"] == 1, r["output_tail"]
        tx = {h: v["tx_bytes"] for h, v in
              json.loads(r["manifest_json"])["host"]["emulated"]["bytes"].items()}
        servers = sorted((tx["dnb-h2"], tx["dnb-h3"]))  # hosts 2 and 3; the scheduler's 4th
        counted = traffic.check(r)
        assert counted is not None and counted.ok, (bound, counted)
        pieces = sorted(collections.Counter(
            s for _, _, s in json.loads(r["manifest_json"])["ranks"]["0"]["placement"]
        ).values())
        if bound == 0:
            assert servers[1] > 2.5 * servers[0]  # 16.9 against 5.5 MB
            assert pieces == [86, 87]
            assert counted.modelled[:4] == pytest.approx((33.8e6, 22.4e6, 22.4e6, 11.1e6),
                                                         rel=0.01)
        else:
            assert servers[1] < 1.05 * servers[0]  # 11.2 MB each
            assert pieces == [173, 173]
            assert counted.modelled[:4] == pytest.approx((22.4e6,) * 4, rel=0.01)


def test_parameter_servers_on_hosts_of_their_own(all_envs, clean, tmp_path):
    """ps_hosts = "own" (the Cori study's layout): 2 workers' hosts, the server's host and
    the scheduler's, each under its quota. The kernel's counters show where the server
    ran: its host sent its replies to both workers (twice a worker host's pushes), the
    scheduler's host next to nothing; the model's bytes per host and the per-host CPU
    sums follow the same placement."""
    from harness import bottleneck
    from harness.perfmodel import traffic

    db = str(tmp_path / "r.db")
    proc = run_cli("run", "--framework", "mxnet", "--strategy", "ps-sync", "--ps", "1",
                   "--ps-hosts", "own", "--nodes", "2", "--link", "1gbit",
                   "--cpus-per-host", "0.4", "--model", "googlenet", "--image-size", "32",
                   "--batch", "4", "--steps", "3", "--warmup", "1", "--trials", "2",
                   "--target-width", "0", "--classes", "10", "--db", db)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "on 4 hosts" in proc.stdout
    (r,) = _runs(db)
    assert r["status"] == "ok" and r["ps_hosts"] == "own" and r["nodes"] == 2
    tx = {h: v["tx_bytes"] for h, v in
          json.loads(r["manifest_json"])["host"]["emulated"]["bytes"].items()}
    assert sorted(tx) == ["dnb-h0", "dnb-h1", "dnb-h2", "dnb-h3"]
    assert tx["dnb-h2"] > 1.7 * max(tx["dnb-h0"], tx["dnb-h1"])
    assert tx["dnb-h3"] < 0.01 * tx["dnb-h2"]
    counted = traffic.check(r)
    assert counted is not None and counted.ok, counted
    assert counted.modelled == pytest.approx((44.9e6, 22.4e6, 22.4e6), rel=0.01)
    cores = bottleneck.host_cores(r)
    assert set(cores) == {0, 1, 2, 3} and cores[2] > 5 * cores[3]
    assert max(cores.values()) <= 0.4 * 1.1  # each host held to its quota
    # the server's CPU thread by thread: more than one thread works, and they add up to
    # the process's CPU sampled apart (1 s ticks against the counters' full scans)
    threads = json.loads(r["cpu_cores_by_thread_json"])
    by_process = json.loads(r["cpu_cores_by_process_json"])
    assert set(threads) <= set(by_process), threads
    tag = next(t for t in threads if t.startswith("server"))
    assert len([c for c in threads[tag].values() if c > 0.005]) >= 2, threads[tag]
    assert sum(threads[tag].values()) == pytest.approx(by_process[tag], rel=0.25), threads
    assert leftovers() == []


def test_commbench_across_hosts_fits_the_link(all_envs, clean, tmp_path):
    proc = run_cli("commbench", "--library", "torch-gloo", "--hosts", "2", "--link",
                   "1gbit", "--sizes", "4,1M,16M,32M", "--iters", "3", "--db",
                   str(tmp_path / "c.db"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = sqlite3.connect(str(tmp_path / "c.db")).execute(
        "SELECT bytes, busbw, nodes, link FROM comm").fetchall()
    big = [bw for b, bw, _, _ in rows if b >= 16 * 2**20]
    assert all(0.8 * 1.25e8 < bw < 1.05 * 1.25e8 for bw in big)  # ~1 Gbit/s of bus bandwidth
    assert {(n, link) for _, _, n, link in rows} == {(2, "1gbit")}


def test_cluster_down_cleans_up_after_a_killed_sweep(all_envs, clean, tmp_path):
    from tests.conftest import REPO

    exe = os.path.join(os.path.dirname(sys.executable), "dnnbench")
    harness = subprocess.Popen(
        [exe, "run", "--framework", "torch", "--model", "resnet50", "--image-size", "32",
         "--batch", "4", "--steps", "200", "--trials", "1", "--target-width", "0", "--classes", "10", "--strategy",
         "allreduce", "--nodes", "2", "--link", "1gbit", "--db", str(tmp_path / "r.db")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(emulated.namespaces()) < 2 or not _ns_pids():
        assert time.monotonic() < deadline and harness.poll() is None
        time.sleep(0.5)
    workers = _ns_pids()
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert emulated.namespaces()  # the killed sweep could not clean up...
    proc = run_cli("cluster", "down")
    assert proc.returncode == 0 and "removed 2" in proc.stdout
    assert leftovers() == []  # ...`dnnbench cluster down` did
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in workers)  # workers died with the harness


def _alive(pid: str) -> bool:
    return alive(int(pid))


def _ns_pids() -> list[str]:
    pids = []
    for ns in emulated.namespaces():
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        pids += out.stdout.split()
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("fw,strategy", [
    pytest.param("torch", ("horovod",), id="torch-horovod"),
    # on hosts of one core each: the ps tasks' servers must not size their pools from
    # the one CPU they see (frameworks/tensorflow/ps_server.py: one thread hung for ever);
    # the ps tasks and the chief each on a host of its own (5 hosts of 0.4 CPU)
    pytest.param("tensorflow", ("ps-async", "--ps", "2", "--cpus-per-host", "0.4",
                                "--ps-hosts", "own"), id="tensorflow-ps-async"),
    # allreduce across hosts as torch DDP's tests run it, in other frameworks: test-all only
    pytest.param("tensorflow", ("allreduce",), marks=pytest.mark.extended,
                 id="tensorflow-allreduce"),
    pytest.param("jax", ("allreduce",), marks=pytest.mark.extended, id="jax-allreduce")])
def test_horovod_and_tensorflow_strategies_across_hosts(all_envs, clean, tmp_path, fw, strategy):
    """Horovod through mpirun's launch agent (no ssh), TF MultiWorkerMirrored and TF
    ParameterServer with TF_CONFIG on lab addresses, JAX's gloo bound to the lab
    interface: all cross the emulated link."""
    db = str(tmp_path / "r.db")
    common = ("--model", "googlenet", "--image-size", "32", "--batch", "4", "--steps", "3",
              "--warmup", "1", "--trials", "2", "--target-width", "0", "--classes", "10", "--nodes", "2",
              "--link", "unshaped", "--db", db)
    proc = run_cli("run", "--framework", fw, "--strategy", *strategy, *common)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (r,) = _runs(db)
    assert r["status"] == "ok"
    # every worker holds the same weights; TF PS: only the chief reports
    assert r["replicas_identical"] == (None if strategy[0] == "ps-async" else 1)
    moved = json.loads(r["manifest_json"])["host"]["emulated"]["bytes"]
    assert min(moved[h]["tx_bytes"] for h in moved) > 5e6
    if strategy[0] != "ps-async":  # the ring's bytes per host, against the counters
        from harness.perfmodel import traffic

        counted = traffic.check(r)
        assert counted is not None and counted.ok, counted
    if strategy[0] == "horovod":
        assert json.loads(r["spec_json"])["launcher"] == "auto"  # resolved to mpirun
    if "--cpus-per-host" in strategy:  # each host's processes, summed within its quota
        from harness import bottleneck

        assert r["cpus_per_host"] == 0.4 and 0.0 < bottleneck.check(r).cpu <= 1.1
        # every process's wake-ups and its host's CFS throttling, stored with the run
        tags = set(json.loads(r["cpu_cores_by_process_json"]))
        throttled = json.loads(r["cpu_throttled_by_process_json"])
        switches = json.loads(r["ctx_switches_by_process_json"])
        assert set(throttled) == set(switches) == tags, (throttled, switches, tags)
        assert all(0.0 <= v <= 1.0 for v in throttled.values()), throttled
        assert all(s["voluntary_per_s"] > 0 for s in switches.values()), switches
    if "own" in strategy:  # workers, ps tasks and the chief each on its own host
        from harness import bottleneck

        assert sorted(moved) == [f"dnb-h{i}" for i in range(5)]
        assert set(bottleneck.host_cores(r)) == {0, 1, 2, 3, 4}
        # the chief dispatches steps and holds no training state: its host (4) sends a
        # small fraction of the ps tasks' (2, 3) bytes (before the optimizer's momentum
        # was built inside the strategy's scope it lived on the chief, whose host sent as
        # much as the ps tasks')
        tx = {h: v["tx_bytes"] for h, v in moved.items()}
        assert tx["dnb-h4"] < 0.1 * max(tx["dnb-h2"], tx["dnb-h3"]), tx


HOLDER = """
import sys, time
from runners import emulated
emulated.ensure(2, "1gbit")
print("holding", flush=True)
time.sleep(float(sys.argv[1]))
emulated.release(take_down=True)
"""


def test_a_cluster_in_use_is_neither_rerated_nor_removed(clean):
    """Two sweeps on one cluster: the second may join at the same shape, but can neither
    re-rate nor remove it while the first runs; a killed holder's lease is stale."""
    import signal
    import sys

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "60"], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(emulated.ClusterError, match=f"in use by pid {holder.pid}"):
            emulated.ensure(2, "2gbit")
        with pytest.raises(emulated.ClusterError, match="in use"):
            emulated.down_unless_used()
        with pytest.raises(emulated.ClusterError, match="in use"):
            emulated.up_unless_used(3, "1gbit")
        c, made = emulated.ensure(2, "1gbit")  # the same shape: shared
        assert not made and c.link == "1gbit"
        assert emulated.release(take_down=True) is False  # the holder still uses it
        assert emulated.current() is not None
        r = run_cli("cluster", "down")
        assert r.returncode == 2 and f"pid {holder.pid}" in r.stderr
        holder.send_signal(signal.SIGKILL)  # the harness dies: its lease goes stale
        holder.wait()
        assert emulated.holders() == []
        assert emulated.ensure(2, "2gbit")[0].link == "2gbit"
    finally:
        holder.kill()
        emulated.release(take_down=True)


def test_guard_refuses_a_subnet_this_machine_routes(clean):
    subprocess.run(["ip", "route", "add", "blackhole", "10.77.0.128/25"], check=True)
    try:
        with pytest.raises(emulated.ClusterError, match="already routes addresses"):
            emulated.up(2)
    finally:
        subprocess.run(["ip", "route", "del", "blackhole", "10.77.0.128/25"], check=True)
    assert "10.77.0.128/25" not in subprocess.run(["ip", "route"], capture_output=True,
                                                  text=True).stdout


needs_two_cores = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                     reason="host CPU limits of 1 CPU need 2 cores for 2 hosts")


@needs_two_cores
def test_host_cpu_limits_make_compute_independent_of_neighbours(clean):
    """The point of cpus_per_host: the CPU time a host's process gets alone and with
    greedy neighbours is the same within noise; without limits (the control, same probe)
    neighbours take some of it. The speed ratio is stored beside it: it can be lower than
    the CPU-time ratio where the hardware is shared (CI's 2-vCPU VM once read 0.61-0.77
    with limits, three probes in a row, and 0.62 without), which no limit can change."""
    c = emulated.up(2, "unshaped", cpus_per_host=1.0)
    assert c.cpusets == [str(x) for x in sorted(os.sched_getaffinity(0))[:2]]
    # other load on a shared machine only lowers a ratio: best of up to 3 probes each
    limited = [c.isolation]
    while max(p["cpu_ratio"] for p in limited) <= 0.9 and len(limited) < 3:
        limited.append(cgroups.isolation(c.hosts, cgroups.plan(2, 1.0)))
    best = max(p["cpu_ratio"] for p in limited)
    # the control must show that neighbours can take an unlimited host's CPU; load that
    # lands on a probe's "alone" half raises its ratio instead (the fresh-machine CI read
    # 1.05 next to 0.62, 2026-12-04), so up to 3 probes, judged by the one that shows it
    control: list[dict] = []
    while (not control or min(p["cpu_ratio"] for p in control) >= best - 0.1) \
            and len(control) < 3:
        control.append(cgroups.isolation(c.hosts, None))
    print("isolation (CPU time, speed) with limits",
          [(round(p["cpu_ratio"], 2), round(p["ratio"], 2)) for p in limited], "without",
          [(round(p["cpu_ratio"], 2), round(p["ratio"], 2)) for p in control])
    assert best > 0.9, limited
    assert min(p["cpu_ratio"] for p in control) < best - 0.1, (control, limited)
    assert 0 < c.isolation["ratio"] and 0 < c.isolation["cpu_ratio"]
    assert emulated.current().isolation == c.isolation  # stored with the cluster


@needs_two_cores
def test_host_limits_found_by_name_and_removed_after_a_crash(clean):
    """A cluster whose state file is gone (its harness killed): `cluster down` still
    removes the groups; a process left inside one is moved out, not killed (it is not
    `cluster down`'s to stop)."""
    emulated.up(2, "unshaped", cpus_per_host=0.5)
    sleeper = subprocess.Popen(cgroups.join_argv("dnb-h1", ("sleep", "30")))
    try:
        deadline = time.monotonic() + 5
        while "dnb-h1" not in Path(f"/proc/{sleeper.pid}/cgroup").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        emulated.STATE.unlink()
        proc = run_cli("cluster", "down")
        assert proc.returncode == 0 and "removed 2" in proc.stdout, proc.stdout + proc.stderr
        assert cgroups.exists() == []
        assert sleeper.poll() is None  # still running, in the root group now
        assert "dnnbench" not in Path(f"/proc/{sleeper.pid}/cgroup").read_text()
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_two_cores
def test_the_sampler_reads_each_hosts_throttling_and_each_process_wake_ups(clean):
    """Two hosts of half a CPU: a process that spins runs out of its quota in nearly every
    CFS period and is preempted there (involuntary switches); one that sleeps 5 ms at a
    time never does, and wakes ~150-200 times a second (voluntary switches). These are
    the counters that say why a parameter server's CPU per request changes with load."""
    from harness.telemetry import Sampler

    emulated.up(2, "unshaped", cpus_per_host=0.5)
    busy = subprocess.Popen(cgroups.join_argv("dnb-h0", (sys.executable, "-c",
                                                         "while True: pass")))
    waker = subprocess.Popen(cgroups.join_argv("dnb-h1", (
        sys.executable, "-c", "import time\nwhile True: time.sleep(0.005)")))
    try:
        for p, host in ((busy, "dnb-h0"), (waker, "dnb-h1")):
            deadline = time.monotonic() + 5
            while host not in Path(f"/proc/{p.pid}/cgroup").read_text():
                assert time.monotonic() < deadline
                time.sleep(0.05)
        sampler = Sampler(interval_s=60.0, gpu=False)  # no thread: every tick is ours
        sampler.add("worker0", busy.pid)
        sampler.add("server0", waker.pid)
        sampler.tick(record=False)
        sampler.measuring()
        for _ in range(3):
            time.sleep(1.0)
            sampler.tick(full=True)
    finally:
        for p in (busy, waker):
            p.kill()
            p.wait()
    switches, throttled = sampler.data.counter_rates()
    summary = sampler.data.summary()
    print(switches, throttled)
    assert json.loads(summary["cpu_throttled_by_process_json"]) == throttled
    assert json.loads(summary["ctx_switches_by_process_json"]) == switches
    assert throttled["worker0"] > 0.8 and throttled["server0"] < 0.1, throttled
    assert switches["worker0"]["involuntary_per_s"] > 30, switches
    assert switches["worker0"]["voluntary_per_s"] < 20, switches
    assert 80 < switches["server0"]["voluntary_per_s"] < 250, switches


@pytest.mark.slow
@needs_two_cores
def test_runs_on_limited_hosts_are_placed_in_their_limits(all_envs, clean, tmp_path):
    """A scaling curve's points under one quota: a 1-host baseline and a 2-host DDP run
    (each process joins its host's group) and Horovod through mpirun's launch agent (the
    remote rank joins its host's group in the agent)."""
    exp = tmp_path / "limits.toml"
    exp.write_text("""name = "limits"
[defaults]
framework = "torch"
""" + TINY_RUN + """link = "unshaped"
cpus_per_host = 1.0
[matrix]
strategy = ["single", "allreduce", "horovod"]
nodes = [1, 2]
[[exclude]]
strategy = "single"
nodes = 2
[[exclude]]
strategy = "allreduce"
nodes = 1
[[exclude]]
strategy = "horovod"
nodes = 1
""")
    db = tmp_path / "r.db"
    proc = run_cli("run", "-e", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _runs(str(db))
    assert [r["status"] for r in rows] == ["ok"] * 3, [r["reason"] for r in rows]
    cores = [str(x) for x in sorted(os.sched_getaffinity(0))[:2]]
    for r in rows:
        manifest = json.loads(r["manifest_json"])
        emu = manifest["host"]["emulated"]
        assert emu["cpus_per_host"] == r["cpus_per_host"] == 1.0 and r["threads"] == 1
        for rank, facts in manifest["ranks"].items():
            host = f"dnb-h{int(rank)}"  # one worker per host: rank i on host i
            assert facts["cgroup"].endswith(f"/dnnbench/{host}"), facts
            assert facts["cores"] == [int(cores[int(rank)])], facts
            assert emu["cpusets"][host] == cores[int(rank)]
    # every process's CPU summed by the host whose namespace it runs in: for DDP the same
    # as its workers' own, and for mpirun, whose one tree holds both hosts' ranks, the
    # only per-host split (each host busy within its 1-CPU quota, the bottleneck line
    # then has the CPU it said was unmeasured). A remote daemon outside mpirun's tree
    # (daemonized, as plm_rsh_no_tree_spawn makes it) would leave its host out here.
    by = {r["strategy"]: r for r in rows}
    for r in rows:
        hosts = json.loads(r["cpu_cores_by_host_json"])
        assert sorted(hosts) == [str(i) for i in range(r["nodes"])], (r["strategy"], hosts)
        assert all(0.3 < c < 1.15 for c in hosts.values()), (r["strategy"], hosts)
    ddp = json.loads(by["allreduce"]["cpu_cores_by_host_json"])
    procs = json.loads(by["allreduce"]["cpu_cores_by_process_json"])
    for i in (0, 1):
        assert ddp[str(i)] == pytest.approx(procs[f"worker{i}"], rel=0.1, abs=0.05), \
            (ddp, procs)
    hvd = bottleneck.check(by["horovod"])
    assert hvd is not None and hvd.cpu is not None and 0.3 < hvd.cpu < 1.15, hvd
    # and each host's own CPU group's CFS counters: the same shares as its processes'
    # groups where those are known apart (DDP), and a share for each of mpirun's hosts
    throttled = json.loads(by["allreduce"]["cpu_throttled_by_process_json"])
    assert json.loads(by["allreduce"]["cpu_throttled_by_host_json"]) == {
        str(i): pytest.approx(throttled[f"worker{i}"], abs=0.02) for i in (0, 1)}, throttled
    assert sorted(json.loads(by["horovod"]["cpu_throttled_by_host_json"])) == ["0", "1"]
    assert hvd.throttled is not None, hvd
    assert leftovers() == []


def test_link_counters_parse_tc_and_snmp():
    """The per-host link counters read tc's tbf statistics by device and the TCP lines of
    /proc/net/snmp by name (their order differs between kernels)."""
    tc = ("qdisc noqueue 0: dev lo root refcnt 2 \n"
          " Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n"
          "qdisc tbf 8c60: dev dnbv0 root refcnt 3 rate 1Gbit burst 1250000b lat 100ms \n"
          " Sent 1157517499 bytes 770704 pkt (dropped 3, overlimits 1498 requeues 0) \n"
          " backlog 0b 0p requeues 0\n"
          "qdisc tbf 8c5f: dev eth0 root refcnt 3 rate 1Gbit burst 1250000b lat 100ms \n"
          " Sent 5 bytes 1 pkt (dropped 0, overlimits 17101 requeues 0) \n")
    assert emulated.qdisc_counters(tc) == {"dnbv0": {"dropped": 3, "overlimits": 1498},
                                           "eth0": {"dropped": 0, "overlimits": 17101}}
    snmp = ("Tcp: RtoAlgorithm RtoMin OutSegs RetransSegs InErrs\n"
            "Tcp: 1 200 755081 231 0\nUdp: InDatagrams\nUdp: 4\n")
    assert emulated.tcp_counters(snmp) == {"out_segs": 755081, "retrans_segs": 231}
    assert emulated.tcp_counters("Udp: a\nUdp: 1\n") == {}
