"""The process runner with real processes: failures and timeouts tear down whole trees."""

import os
import sys
import time

from runners.process import run_job, tree
from runners.spec import ProcessSpec

PY = sys.executable


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def proc(rank, code, **kw):
    return ProcessSpec("worker", rank, (PY, "-c", code), **kw)


# A process that starts a child which escapes into its own session, prints both PIDs, sleeps.
ESCAPER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],
                         start_new_session=True)
print('pids', child.pid, flush=True)
time.sleep(60)
"""


def pids_of(job):
    out = []
    for p in job.processes:
        for line in p.lines:
            if line.startswith("pids "):
                out.extend(int(x) for x in line.split()[1:])
    return out


def test_success_collects_lines_per_process():
    job = run_job([proc(0, "print('a')"), proc(1, "print('b')")], timeout=30)
    assert job.ok and [p.lines for p in job.processes] == [["a"], ["b"]]


def test_one_failing_rank_tears_down_the_others_and_their_children():
    t0 = time.monotonic()
    job = run_job([proc(0, ESCAPER), proc(1, "import time; time.sleep(1); raise SystemExit(3)")],
                  timeout=60)
    assert time.monotonic() - t0 < 15
    assert not job.ok and job.failed_tag == "worker1"
    assert job.processes[1].returncode == 3
    escaped = pids_of(job)
    assert escaped, "the escaping child's pid was not printed"
    time.sleep(0.2)
    assert not any(alive(p) for p in escaped)


def test_timeout_kills_the_tree():
    job = run_job([proc(0, ESCAPER)], timeout=2)
    assert job.timed_out and not job.ok
    assert not any(alive(p) for p in pids_of(job))
    assert tree(os.getpid()) == [] or all(not alive(p) for p in tree(os.getpid()))


def test_killed_by_signal_is_reported():
    job = run_job([proc(0, "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")],
                  timeout=30)
    assert job.processes[0].returncode == -9 and job.failed_tag == "worker0"


def test_memory_limit_makes_allocation_fail():
    code = "x = bytearray(400 * 1024 * 1024)"
    job = run_job([proc(0, code, memory_limit_bytes=200 * 1024 * 1024)], timeout=30)
    assert not job.ok and any("MemoryError" in line for line in job.processes[0].lines)


def test_services_are_stopped_when_the_job_is_done_and_failures_still_count():
    """A service (a TensorFlow ps task) serves forever: the job ends when the others do."""
    server = ProcessSpec("ps", 0, (PY, "-c", "import time; time.sleep(60)"), service=True)
    t0 = time.monotonic()
    job = run_job([server, proc(0, "print('trained')")], timeout=30)
    assert job.ok and time.monotonic() - t0 < 10
    assert [p.returncode for p in job.processes] == [0, 0]
    # a service that dies early is a failure of the job
    dying = ProcessSpec("ps", 0, (PY, "-c", "raise SystemExit(3)"), service=True)
    job = run_job([dying, proc(0, "import time; time.sleep(20)")], timeout=30)
    assert not job.ok and job.failed_tag == "ps0"


def test_a_stored_run_starts_when_its_job_started_not_when_it_was_recorded():
    """The `started` column is the job's start: the row is built after the job ended (a
    1.5 s job here), and every run before 2026-12-03 stored its end there instead."""
    import datetime as dt

    from frameworks.contract import RunSpec
    from harness import collect

    before = time.time()
    job = run_job([proc(0, "import time; time.sleep(1.5)")], timeout=30)
    assert job.started is not None and before <= job.started <= before + 1.0
    row = collect.record(RunSpec(framework="torch", model="resnet50"), "test", "t", job,
                         {}).row
    started = dt.datetime.fromisoformat(row["started"]).timestamp()
    assert int(before) <= started <= before + 1.0 < time.time() - 0.4, (row["started"], before)
