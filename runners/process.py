"""Every process the project starts goes through `run_job` (Horovod's safe_shell_exec idea).

It starts each process in its own session (so it and everything it forks share a
process group), streams output line by line with the process's tag, and on a timeout, on
the first process that fails, or on Ctrl-C, tears down every process tree of the job:
SIGTERM to each group and each descendant found in /proc, then SIGKILL after a grace
period. Only PIDs this function started (and their descendants) are ever signalled.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable

from runners.spec import JobResult, ProcessResult, ProcessSpec

GRACE_S = 3.0
LineCallback = Callable[[str, str], None]  # (process tag, line)
StartCallback = Callable[[str, int], None]  # (process tag, pid): telemetry, fault tests


def read_stat(pids: Iterable[int | str]) -> dict[int, list[str]]:
    """pid -> the fields of /proc/PID/stat after the command name (state is field 0), for
    the pids that still exist. One reader for the runner's tree walk and the telemetry."""
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        out[int(pid)] = stat[stat.rfind(")") + 2:].split()
    return out


def identity(pid: int) -> str | None:
    """"PID-STARTTIME" of a live process (start time in clock ticks since boot): it names
    one process even after its PID is reused. None when it is gone or a zombie."""
    fields = read_stat([pid]).get(pid)
    if not fields or fields[0] == "Z":
        return None
    return f"{pid}-{fields[19]}"


def all_pids() -> list[str]:
    return [e for e in os.listdir("/proc") if e.isdigit()]


def _scan() -> list[tuple[int, int, int, str]]:
    """(pid, ppid, process group, state) of every process visible in /proc."""
    return [(pid, int(f[1]), int(f[2]), f[0]) for pid, f in read_stat(all_pids()).items()]


def tree(pid: int, rows: list[tuple[int, int, int, str]] | None = None) -> list[int]:
    """Live (non-zombie) descendants of pid plus members of its process group."""
    rows = _scan() if rows is None else rows
    kids: dict[int, list[int]] = {}
    for child, parent, _, state in rows:
        if state != "Z":
            kids.setdefault(parent, []).append(child)
    out = {p for p, _, group, state in rows if group == pid and state != "Z" and p != pid}
    todo = [pid]
    while todo:
        for child in kids.get(todo.pop(), []):
            if child not in out:
                out.add(child)
            todo.append(child)
    return sorted(out)


def _signal(procs: list[subprocess.Popen], sig: int) -> int:
    """Signal each job process, its group and descendants; return how many were alive."""
    rows = _scan()
    alive = 0
    for p in procs:
        targets = tree(p.pid, rows)
        if p.poll() is None:
            targets.append(p.pid)
        alive += len(targets)
        for pid in targets:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return alive


def terminate(procs: list[subprocess.Popen], grace: float = GRACE_S) -> None:
    """SIGTERM every tree, wait up to `grace`, then SIGKILL what is left, and reap."""
    if not _signal(procs, signal.SIGTERM):
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not any(p.poll() is None for p in procs) and not any(
                tree(p.pid) for p in procs):
            break
        time.sleep(0.05)
    _signal(procs, signal.SIGKILL)
    for p in procs:
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass


_PR_SET_PDEATHSIG = 1
try:
    _libc = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:  # not glibc Linux: no parent-death signal, teardown still kills trees
    _libc = None


def _preexec(limit: int | None) -> Callable[[], None]:
    """In the child: die with the launcher (even if it is SIGKILLed), honour a memory cap."""

    def apply() -> None:
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _pump(proc: subprocess.Popen, tag: str, sink: list[str], on_line: LineCallback | None) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        sink.append(line)
        if on_line is not None:
            on_line(tag, line)


def run_job(specs: list[ProcessSpec], timeout: float, base_env: dict[str, str] | None = None,
            on_line: LineCallback | None = None,
            on_start: StartCallback | None = None,
            cancel: threading.Event | None = None) -> JobResult:
    """Run all processes to completion; any failure or the timeout ends the whole job.

    `cancel`, set from another thread, ends it as Ctrl-C would (the harness runs the jobs of
    an interleaved group in threads, and only the main thread receives KeyboardInterrupt).
    """
    env0 = dict(os.environ if base_env is None else base_env)
    procs: list[subprocess.Popen] = []
    sinks: list[list[str]] = []
    pumps: list[threading.Thread] = []
    start, started = time.monotonic(), time.time()
    timed_out = interrupted = False
    failed: str | None = None
    try:
        for spec in specs:
            proc = subprocess.Popen(
                list(spec.argv), env={**env0, **spec.env}, cwd=spec.cwd,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, errors="replace", bufsize=1, start_new_session=True,
                preexec_fn=_preexec(spec.memory_limit_bytes))
            sink: list[str] = []
            pump = threading.Thread(target=_pump, args=(proc, spec.tag, sink, on_line),
                                    daemon=True)
            pump.start()
            procs.append(proc)
            sinks.append(sink)
            pumps.append(pump)
            if on_start is not None:
                on_start(spec.tag, proc.pid)
        deadline = start + timeout
        while True:
            codes = [p.poll() for p in procs]
            bad = [s.tag for s, c in zip(specs, codes) if c not in (None, 0)]
            if bad:
                failed = bad[0]
                break
            if all(c is not None for s, c in zip(specs, codes) if not s.service):
                break
            if time.monotonic() > deadline:
                timed_out = True
                break
            if cancel is not None and cancel.is_set():
                interrupted = True
                break
            time.sleep(0.02)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        terminate(procs)
        for pump in pumps:
            pump.join(timeout=GRACE_S)
    # A service stopped by the teardown above after the job finished did its job.
    results = [ProcessResult(s, 0 if s.service and failed is None and not timed_out
                             and not interrupted else p.returncode, sink)
               for s, p, sink in zip(specs, procs, sinks)]
    if timed_out and failed is None:
        failed = next((r.spec.tag for r in results if r.returncode not in (0,)), None)
    return JobResult(results, time.monotonic() - start, timed_out=timed_out,
                     interrupted=interrupted, failed_tag=failed, started=started)
