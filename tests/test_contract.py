import pytest

from frameworks.contract import RunSpec, SpecError, validate


def spec(**kw):
    return RunSpec(**{"framework": "torch", "model": "resnet50", "image_size": 32, **kw})


@pytest.mark.parametrize("kw, message", [
    ({"framework": "caffe"}, "framework = 'caffe' is not one of: torch"),
    ({"model": "vgg"}, "model = 'vgg' is not one of"),
    ({"mode": "fast"}, "mode = 'fast' is not one of: throughput, breakdown"),
    ({"batch_size": 0}, "batch_size = 0 must be a whole number >= 1"),
    ({"strategy": "ps-sync"}, "PyTorch has no native parameter server"),
    ({"model": "alexnet"}, "smallest image size alexnet accepts is 63 px"),
    ({"nodes": 2}, "strategy 'single' runs one worker"),
    ({"xla": True}, "xla = true is unsupported for torch"),
    ({"cpus_per_host": 1.0}, "cpus_per_host = 1 limits emulated hosts, but link is empty"),
    ({"cpus_per_host": -1.0, "link": "unshaped"}, "cpus_per_host = -1.0 must be a finite "
                                                  "number >= 0"),
    ({"cpus_per_host": 5000.0, "link": "unshaped"}, "cpus_per_host = 5000.0 must be"),
])
def test_validation_names_field_value_and_fix(kw, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(")):
        validate(spec(**kw))


def test_json_round_trip_and_hash_ignores_label():
    s = spec(label="x")
    assert RunSpec.from_json(s.to_json()) == s
    assert s.config_hash() == spec(label="y", timeout_s=5).config_hash()
    assert s.config_hash() != spec(batch_size=8).config_hash()
    with pytest.raises(SpecError, match="unknown RunSpec field"):
        RunSpec.from_dict({"framework": "torch", "model": "resnet50", "bacth": 2})


def test_host_cpu_limits_span_the_cores_of_each_hosts_share():
    """Host i's share [i*C, (i+1)*C) of the core line decides its cores: fractional hosts
    pack onto one core each, wide ones span two, and hosts that do not fit are refused
    (their compute would depend on each other)."""
    from runners.cgroups import CgroupError, plan

    assert [h.cpuset for h in plan(8, 0.25, cores=[0, 1])] == ["0"] * 4 + ["1"] * 4
    assert [h.cpuset for h in plan(3, 0.5, cores=[0, 1])] == ["0", "0", "1"]
    assert [h.cpuset for h in plan(3, 2 / 3, cores=[0, 1])] == ["0", "0-1", "1"]
    assert [h.cpuset for h in plan(2, 1.5, cores=[0, 1, 2])] == ["0-1", "1-2"]
    assert [h.cpuset for h in plan(2, 2, cores=[0, 1, 4, 5])] == ["0-1", "4-5"]
    assert {h.cpus for h in plan(4, 0.5, cores=[0, 1])} == {0.5}
    with pytest.raises(CgroupError, match=r"3 hosts x cpus_per_host = 1 is 3 CPUs, more than "
                                          r"the 2 core\(s\).*use cpus_per_host <= 0.666667"):
        plan(3, 1.0, cores=[0, 1])
    from runners.cgroups import _slice_us, period_us

    # quota >= the kernel's bandwidth slice (5 ms by default), period >= 10 ms
    slice_us = _slice_us()
    assert period_us(1.0) == max(10_000, slice_us)
    assert period_us(0.25) * 0.25 >= slice_us and period_us(0.05) * 0.05 >= slice_us
    with pytest.raises(CgroupError, match="below the 0.01 CPU a quota can enforce"):
        plan(2, 0.001, cores=[0, 1])


def test_cpus_per_host_beyond_this_machine_is_refused_before_anything_runs():
    import os

    cores = len(os.sched_getaffinity(0))
    with pytest.raises(SpecError, match=f"more than the {cores} core"):
        validate(spec(strategy="allreduce", nodes=2, link="unshaped", cpus_per_host=cores))
    validate(spec(strategy="allreduce", nodes=2, link="unshaped", cpus_per_host=cores / 2))
    # the hash of runs stored before the field existed is unchanged at its default
    assert spec().config_hash() == spec(cpus_per_host=0.0).config_hash()
    assert spec().config_hash() != spec(link="unshaped", cpus_per_host=1.0).config_hash()


def test_servers_on_hosts_of_their_own_are_counted_as_hosts_and_need_servers_and_a_link():
    import os

    cores = len(os.sched_getaffinity(0))
    own = dict(framework="mxnet", strategy="ps-sync", ps=2, nodes=2, link="unshaped",
               ps_hosts="own")
    assert RunSpec(model="googlenet", **own).hosts == 5  # 2 workers', 2 servers', 1 more
    assert RunSpec(model="googlenet", **{**own, "ps_hosts": "shared"}).hosts == 2
    # the quota is checked over every host the run takes, not its nodes
    with pytest.raises(SpecError, match="5 hosts"):
        validate(spec(**own, cpus_per_host=cores / 4))
    validate(spec(**own, cpus_per_host=cores / 5))
    with pytest.raises(SpecError, match="ps_hosts = 'own'.*strategy 'allreduce' has none"):
        validate(spec(strategy="allreduce", nodes=2, link="unshaped", ps_hosts="own"))
    with pytest.raises(SpecError, match="ps_hosts = 'own'.*link is empty"):
        validate(spec(**{**own, "link": ""}))
    with pytest.raises(SpecError, match="ps_hosts = 'elsewhere' is not one of: shared, own"):
        validate(spec(**{**own, "ps_hosts": "elsewhere"}))
    # runs stored before the field existed keep their identity
    assert spec().config_hash() == spec(ps_hosts="shared").config_hash()


@pytest.mark.parametrize("cpus, nodes, threads", [(0.25, 1, 1), (0.5, 4, 1), (1.0, 2, 1),
                                                  (2.0, 1, 2), (0.0, 1, 0), (0.0, 2, 0)])
def test_threads_per_worker_follow_the_host_cpu_limit(cpus, nodes, threads):
    """Every point of a scaling curve on limited hosts runs the same threads per worker:
    a fraction of a core runs one (the 1-host baseline once got this machine's cores and
    so a different thread count from the curve it is the baseline of). Without a limit a
    host gets its share of this machine's cores (0 here: that share)."""
    import os

    from harness.jobs import placed as _placed
    from runners.emulated import Cluster

    hosts = [f"dnb-h{i}" for i in range(nodes)]
    cluster = Cluster(hosts, [f"10.77.0.{i + 1}" for i in range(nodes)], "1gbit", "now",
                      cpus_per_host=cpus)
    spec = RunSpec(framework="torch", model="googlenet", strategy="allreduce" if nodes > 1
                   else "single", nodes=nodes, link="1gbit", cpus_per_host=cpus)
    procs, _ = _placed(spec, "python", "/src", "r1", cluster)
    expected = threads or max(1, (os.cpu_count() or 1) // nodes)
    assert {p.env["DNNBENCH_THREADS"] for p in procs} == {str(expected)}


def test_events_carry_version_and_time_and_parse_only_what_they_know():
    import io
    import json
    import time

    from frameworks import events

    buf = io.StringIO()
    t0 = time.time()
    events.emit(events.DONE, stream=buf, rank=3)
    line = buf.getvalue().strip()
    ev = events.parse("[worker3] " + line)  # a launcher's rank prefix is allowed
    assert ev["event"] == "done" and ev["rank"] == 3 and ev["v"] == events.VERSION
    assert t0 - 1 <= ev["t"] <= time.time() + 1
    old = events.PREFIX + json.dumps({"event": "done", "rank": 0})  # version 0: still read
    assert events.parse(old)["rank"] == 0
    newer = events.PREFIX + json.dumps({"event": "done", "v": events.VERSION + 1})
    assert events.parse(newer) is None
    assert events.parse(events.PREFIX + '{"event": "gossip"}') is None
    assert events.parse('prose mentioning "event":"done"') is None


def test_event_constructors_check_their_kinds_keys_and_parse_checks_them_too():
    import io
    import json
    from contextlib import redirect_stdout

    from frameworks import events

    assert set(events.REQUIRED) == set(events.KINDS)  # every kind says what it carries
    buf = io.StringIO()
    with redirect_stdout(buf):
        events.trial(1, 0, (0.5, 0.25), 0.75, {}, started=1.0)
        events.comm(0, "allreduce", "gloo", 2, 1024, [0.1, 0.3, 0.2], 0)
        events.error("disk full", "OSError", rank=2)
        events.warmup(0, 3, True, [0.1])
    trial, comm, error, warm = map(events.parse, buf.getvalue().splitlines())
    assert trial["iter_times"] == [0.5, 0.25] and trial["started"] == 1.0
    assert comm["bytes"] == 1024 and comm["median"] == 0.2
    assert error == {**error, "reason": "disk full", "error_type": "OSError", "rank": 2}
    assert warm["settled"] is True
    # a worker bug fails where the event is made, naming the key
    with pytest.raises(ValueError, match="trial event: iter_times must be list"):
        events.emit(events.TRIAL, rank=0, trial=0, iter_times="fast", wall=1.0, phases={})
    with pytest.raises(ValueError, match="model event: settings must be dict"):
        events.emit(events.MODEL, rank=0)
    with pytest.raises(ValueError, match="done event: rank must be int, got True"):
        events.emit(events.DONE, rank=True)
    # and a line that breaks its kind's keys is not an event the harness would index
    lame = events.PREFIX + json.dumps({"event": "trial", "v": 1, "t": 0.0, "rank": 0})
    assert events.parse(lame) is None


def test_the_memory_check_refuses_what_the_kernel_killed_and_keeps_every_run_that_ran():
    """The cost model's memory estimate against the shipped measurements (all made on one
    23.5 GiB VM): every run that finished would be allowed there, and TensorFlow's AlexNet
    at 8 workers, whose worker the kernel's out-of-memory killer took (before 2026-12-04
    the estimate left out MultiWorkerMirrored's buffers and let it start), is refused."""
    import sqlite3
    from pathlib import Path

    from frameworks.contract import (
        estimated_run_bytes,
        estimated_service_bytes,
        estimated_worker_bytes,
    )

    host = 23.5 * 2**30
    measured = Path(__file__).resolve().parent.parent / "experiments" / "measured"
    ran = killed = 0
    for db in sorted(measured.glob("*/r*.db")):
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
        for spec_json, status, reason in con.execute("SELECT spec_json, status, reason "
                                                     "FROM runs"):
            s = RunSpec.from_json(spec_json)
            need = estimated_run_bytes(s)
            if status == "ok":
                ran += 1
                assert need <= host, (db.parent.name, s.label or s.model, s.workers, need)
            elif "out-of-memory" in (reason or ""):
                killed += 1
                assert need > host, (db.parent.name, s.model, s.workers, need)
        con.close()
    assert ran > 400 and killed == 1, (ran, killed)
    # the servers and the scheduler of every shipped parameter-server run hold less than
    # the estimate (their largest resident samples, summed), and not less than half of it
    served = 0
    for db in sorted(measured.glob("*/r*.db")):
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
        for run_id, spec_json in con.execute("SELECT run_id, spec_json FROM runs WHERE "
                                             "status = 'ok' AND ps > 0"):
            s = RunSpec.from_json(spec_json)
            held = sum(v for tag, v in con.execute(
                "SELECT tag, max(rss_bytes) FROM telemetry WHERE run_id = ? GROUP BY tag",
                (run_id,)) if tag.startswith(("server", "scheduler", "ps", "chief")))
            want = estimated_service_bytes(s)
            assert 0.5 * want < held <= want, (db.parent.name, s.model, s.ps, s.workers,
                                               held, want)
            served += 1
        con.close()
    assert served > 250, served
    # where the telemetry stored anonymous memory (since 2026-12-07: cori2017-emulated-own
    # r7), MXNet's scheduler holds 40-50 MiB of its own; the rest of its ~110 MiB resident
    # is libmxnet.so's mapped pages, which move with the page cache's state
    # (bench/page_cache_rss.py), so the estimate's per-process term covers both
    own = []
    for db in sorted(measured.glob("*/r*.db")):
        con = sqlite3.connect(f"{db.as_uri()}?mode=ro&immutable=1", uri=True)
        if "anon_bytes" in {r[1] for r in con.execute("PRAGMA table_info(telemetry)")}:
            own += con.execute("SELECT max(anon_bytes), max(rss_bytes) FROM telemetry WHERE "
                               "tag LIKE 'scheduler%' AND anon_bytes IS NOT NULL "
                               "GROUP BY run_id").fetchall()
        con.close()
    assert len(own) >= 18, own
    assert all(40 * 2**20 < a < 50 * 2**20 and r - a > 50 * 2**20 for a, r in own), own
    big = spec(framework="mxnet", strategy="ps-sync", model="alexnet", image_size=64,
               nodes=8, ps=4)
    assert estimated_run_bytes(big) - estimated_worker_bytes(big) * 8 > 2.5 * 2**30
    # a framework that declares nothing for its strategy adds nothing with workers
    one, two = spec(), spec(strategy="allreduce", devices_per_node=2)
    assert estimated_worker_bytes(one) == estimated_worker_bytes(two)
    tf = {"framework": "tensorflow", "strategy": "allreduce", "devices_per_node": 2}
    assert (estimated_worker_bytes(spec(**tf)) - estimated_worker_bytes(spec(framework="tensorflow"))
            > 2**30)


def test_a_run_over_the_hosts_memory_is_a_skipped_run_of_a_sweep_and_an_error_alone(tmp_path):
    """Over this host's memory a run cannot start: a sweep keeps it as skipped with the
    reason (the rest runs) instead of refusing the whole file; a single run refuses."""
    from frameworks.contract import UnsupportedError
    from harness.experiment import from_dict

    exp = from_dict({"defaults": {"framework": "torch", "model": "resnet50"},
                     "matrix": {"batch_size": [8, 65_536]}}, "t.toml")
    assert [p.skip_reason for p in exp.runs][0] == ""
    assert "more than this host's" in exp.runs[1].skip_reason, exp.runs[1]
    assert "PyTorch single worker(s) of resnet50 need about" in exp.runs[1].skip_reason
    with pytest.raises(UnsupportedError, match="--ignore-memory-check"):
        validate(spec(batch_size=65_536))
    with pytest.raises(UnsupportedError, match=r"2 MXNet ps-sync worker\(s\) and 2 server\(s\) "
                       "of resnet50 need about"):
        validate(spec(framework="mxnet", strategy="ps-sync", nodes=2, ps=2, batch_size=65_536))
    from tests.conftest import run_cli

    toml = tmp_path / "t.toml"
    toml.write_text('name = "t"\n[defaults]\nframework = "torch"\nmodel = "resnet50"\n'
                    '[matrix]\nbatch_size = [8, 65536]\n')
    out = run_cli("plan", str(toml)).stdout
    assert "2 runs, 1 to measure, 1 skipped as not runnable here" in out, out
    assert "[skip]" in out and "more than this host's" in out
