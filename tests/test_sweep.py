"""Sweeps users can trust: failures recorded and survived, kill -9 then resume, progress."""

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest

from frameworks.contract import RunSpec
from tests.conftest import run_cli

TINY = 'image_size = 32\nbatch_size = 2\nsteps = 2\nwarmup = 1\ntrials = 1\ntarget_width = 0\nnum_classes = 10\n'


def our_workers(marker: str) -> list[int]:
    """PIDs of live worker processes whose RunSpec carries `marker` in its label."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path(f"/proc/{entry}/environ").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker.encode() in env and b"DNNBENCH_SPEC" in env and state != "Z":
            out.append(int(entry))
    return out


def start_sweep_and_wait_mid_run(exp: Path, db: Path, marker: str) -> subprocess.Popen:
    """Start `dnnbench run -e exp` and return once one run is stored and the next one's
    workers are running (the moment to interrupt it)."""
    exe = Path(sys.executable).parent / "dnnbench"
    # as a terminal would start it: a test suite started in the background of a
    # non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python keeps it so
    proc = subprocess.Popen([str(exe), "run", "-e", str(exp), "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        time.sleep(0.2)
        assert proc.poll() is None, proc.stdout.read()
        if not db.exists():
            continue
        try:
            done = sqlite3.connect(db).execute(
                "SELECT count(*) FROM runs WHERE status='ok'").fetchone()[0]
        except sqlite3.OperationalError:
            continue
        if done >= 1 and our_workers(marker):
            return proc
    raise AssertionError("the sweep never reached a second run")


def test_crash_hang_and_memory_limit_are_recorded_and_the_sweep_goes_on(tmp_path, torch_env):
    from harness.experiment import Experiment, Planned
    from harness.store import Store
    from harness.sweep import run_experiment

    marker = f"failsweep-{os.getpid()}"
    base = RunSpec("torch", "googlenet", batch_size=2, image_size=32, steps=2, warmup=1,
                   trials=1, target_width=0, num_classes=10, label=marker)
    runs = [
        base,                                                     # ok
        replace(base, model="resnet50", batch_size=200_000, image_size=224),  # crash
        replace(base, steps=100_000, timeout_s=10),               # hangs past its timeout
        replace(base, model="resnet50", batch_size=64, image_size=224,
                memory_limit_mb=3000),                            # exhausts the imposed cap
        replace(base, model="resnet50"),                          # ok, after the failures
    ]
    exp = Experiment("failures", "", tuple(Planned(s) for s in runs), "test")
    out = io.StringIO()
    with Store(tmp_path / "f.db") as store:
        summary = run_experiment(exp, store, out=out)
        rows = store.runs()
    assert (summary.ok, summary.failed) == (2, 3), out.getvalue()
    status = [(r["model"], r["batch_size"], r["status"]) for r in rows]
    assert status == [("googlenet", 2, "ok"), ("resnet50", 200_000, "failed"),
                      ("googlenet", 2, "timeout"), ("resnet50", 64, "failed"),
                      ("resnet50", 2, "ok")]
    assert "allocate" in rows[1]["reason"].lower()
    assert rows[2]["reason"] == "no progress within timeout_s = 10 s (start-up or one trial)"
    assert rows[3]["reason"].startswith("out of memory under memory_limit_mb = 3000")
    assert all(r["output_tail"] for r in rows if r["status"] != "ok")
    time.sleep(0.5)
    assert our_workers(marker) == []


def test_kill_9_mid_sweep_then_resume(tmp_path, torch_env):
    marker = f"kill9-{os.getpid()}"
    exp = tmp_path / "k.toml"
    exp.write_text(f"""
name = "kill9"
[defaults]
framework = "torch"
label = "{marker}"
{TINY.replace("steps = 2", "steps = 6")}
[matrix]
model = ["googlenet", "resnet50"]
batch_size = [2, 4]
""")
    db = tmp_path / "k.db"
    proc = start_sweep_and_wait_mid_run(exp, db, marker)
    gates = list(Path(tempfile.gettempdir()).glob(f"dnnbench-gate-{proc.pid}-*"))
    assert len(gates) == 1, "the sweep's gate folder is named after its process"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(1.0)
    assert our_workers(marker) == [], "workers outlived the killed harness"
    assert gates[0].is_dir()  # SIGKILL: nothing could remove it
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    orphans = con.execute("SELECT count(*) FROM iterations WHERE run_id NOT IN "
                          "(SELECT run_id FROM runs)").fetchone()[0]
    assert stored >= 1 and orphans == 0
    con.close()
    r = run_cli("run", "-e", str(exp), "--db", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{stored} of 4 runs already stored" in r.stdout
    assert not gates[0].exists(), "the next sweep removes a dead harness's gate folder"
    con = sqlite3.connect(db)
    hashes = [h for (h,) in con.execute("SELECT config_hash FROM runs")]
    assert len(hashes) == 4 == len(set(hashes))


def test_progress_without_a_terminal_is_plain_lines(tmp_path, torch_env):
    db = tmp_path / "p.db"
    r = run_cli("run", "--framework", "torch", "--model", "googlenet", "--image-size", "32",
                "--batch", "2", "--steps", "2", "--warmup", "0", "--trials", "2", "--target-width", "0", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stdout and "\033" not in r.stdout
    lines = r.stdout.splitlines()
    assert any(line.startswith("[1/1] torch googlenet") and "started" in line for line in lines)
    assert any("images/s" in line and "elapsed" in line and "ETA" in line for line in lines)


def test_live_progress_redraws_one_line():
    import io

    from harness.progress import Progress

    buf = io.StringIO()
    p = Progress(2, stream=buf, live=True, interval=0.05)
    p.start(1, "torch resnet50")
    p.trial(1, 3)
    time.sleep(0.2)
    p.end("10.0 images/s")
    text = buf.getvalue()
    assert "\r\033[K[1/2] torch resnet50: running" in text and "trial 1/3" in text
    assert text.endswith("\n") and "ETA" in text


def test_retry_failed_replaces_the_failed_row(tmp_path, torch_env):
    db = tmp_path / "r.db"
    args = ["run", "--framework", "torch", "--model", "googlenet", "--image-size", "32",
            "--batch", "2", "--steps", "2", "--warmup", "0", "--trials", "1", "--target-width", "0", "--db", str(db)]
    assert run_cli(*args, "--timeout", "0.5").returncode == 1
    again = run_cli(*args, "--timeout", "0.5")
    assert again.returncode == 0 and "add --retry-failed to measure them again" in again.stdout
    assert run_cli(*args, "--retry-failed").returncode == 0
    rows = sqlite3.connect(db).execute("SELECT status FROM runs").fetchall()
    assert rows == [("ok",)]


def test_trace_export_of_a_breakdown_run(tmp_path, torch_env):
    db = tmp_path / "t.db"
    r = run_cli("run", "--framework", "torch", "--model", "googlenet", "--image-size", "32",
                "--batch", "2", "--steps", "3", "--warmup", "0", "--trials", "2", "--target-width", "0",
                "--mode", "breakdown", "--db", str(db))
    assert r.returncode == 0, r.stderr
    run_id = sqlite3.connect(db).execute("SELECT run_id FROM runs").fetchone()[0]
    out = tmp_path / "trace.json"
    r = run_cli("results", "--db", str(db), "--trace", run_id, "-o", str(out))
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == 6 * 6  # 6 phases x (2 trials x 3 iterations)
    assert {e["name"] for e in slices} == {"io", "h2d", "forward", "backward", "comm", "update"}
    ts = [e["ts"] for e in slices]
    assert ts == sorted(ts)


def test_plan_shows_skips_with_reasons(tmp_path):
    exp = tmp_path / "p.toml"
    exp.write_text('[matrix]\nframework=["torch"]\nmodel=["alexnet","resnet50"]\n'
                   'image_size=[32]\nstrategy=["single","ps-sync"]\nps=[0,2]\n'
                   '[[exclude]]\nstrategy="single"\nps=2\n[[exclude]]\nstrategy="ps-sync"\nps=0\n')
    r = run_cli("plan", str(exp))
    assert r.returncode == 0, r.stderr
    assert "[skip] torch alexnet" in r.stdout and "smallest image size alexnet accepts is 63" in r.stdout
    assert "PyTorch has no native parameter server" in r.stdout
    assert r.stdout.count("[run]") == 1


@pytest.mark.parametrize("bad", ["[matrix]\nframework=['torch']\nmodel=['resnet50']\nps=[-1]"])
def test_plan_rejects_invalid_values(tmp_path, bad):
    exp = tmp_path / "b.toml"
    exp.write_text(bad)
    r = run_cli("plan", str(exp))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def quick_then_long(marker: str, defaults: str = "") -> str:
    """An experiment: a quick googlenet run that finishes, then a long resnet50 run to
    interrupt; every process carries `marker` (its label)."""
    return f"""name = "ctrlc"
[defaults]
framework = "torch"
label = "{marker}"
image_size = 32
batch_size = 2
warmup = 1
trials = 1
target_width = 0
num_classes = 10
{defaults}
[matrix]
model = ["googlenet", "resnet50"]
steps = [2, 400]
[[exclude]]
model = "googlenet"
steps = 400
[[exclude]]
model = "resnet50"
steps = 2
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])  # Ctrl-C; kill, Slurm
def test_ctrl_c_stops_cleanly_and_keeps_finished_runs(tmp_path, torch_env, sig):
    marker = f"ctrlc-{os.getpid()}-{sig}"
    exp = tmp_path / "c.toml"
    exp.write_text(quick_then_long(marker))
    db = tmp_path / "c.db"
    proc = start_sweep_and_wait_mid_run(exp, db, marker)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, out
    assert "interrupted" in out
    time.sleep(0.5)
    assert our_workers(marker) == []
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [s for (s,) in con.execute("SELECT status FROM runs")] == ["ok"]
