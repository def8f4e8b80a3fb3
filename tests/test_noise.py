"""The noise meter: a fixed probe the harness runs around every run. It must see a busy
machine as busy, and give every run its model FLOPs utilisation against the measured
peak."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from frameworks.contract import RunSpec
from harness import noise


def test_probe_sees_the_machine_and_a_hog_disturbs_it():
    """One CPU hog per core, for a fixed window: the probe's GEMM falls well below the
    quiet machine's, so a run taken then would be flagged."""
    meter = noise.Meter()
    quiet = max(meter.measure().gemm_gflops for _ in range(3))
    assert quiet > 1.0  # GFLOP/s: any machine this runs on does more
    hogs = [subprocess.Popen([sys.executable, "-c", "import time\nt = time.time()\n"
                              "while time.time() - t < 20: pass"], start_new_session=True)
            for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.5)
        busy = meter.measure()
    finally:
        for h in hogs:
            os.killpg(h.pid, signal.SIGKILL)
            h.wait()
    cols = meter.columns([busy], RunSpec("torch", "resnet50", image_size=64), None)
    assert cols["noise_ratio"] < noise.DISTURBED, (quiet, busy)
    assert cols["mfu"] is None  # no throughput, no utilisation


def test_mfu_is_model_flops_over_the_measured_peak():
    spec = RunSpec("torch", "resnet50", image_size=64)
    flops = noise.train_flops_per_image(spec)
    # ResNet-50 at 64 px: 4.089 GMACs x (64/224)^2 forward, x2 FLOPs, x3 for training
    assert abs(flops / (6 * 4.089e9 * (64 / 224) ** 2) - 1) < 0.02
    meter = noise.Meter()
    p = noise.Probe(gemm_gflops=200.0, copy_gbs=10.0)
    meter.best = 200.0
    cols = meter.columns([p, p], spec, images_per_s=40.0)
    assert abs(cols["mfu"] - flops * 40 / 200e9) < 1e-12 and cols["noise_ratio"] == 1.0
    gpu = meter.columns([p], RunSpec("torch", "resnet50", device="cuda"), 40.0)
    assert gpu["mfu"] is None  # the probe does not see the GPU
    loader = meter.columns([p], RunSpec("torch", "resnet50", mode="loader", data="/d"), 400.0)
    assert loader["mfu"] is None  # loader mode trains nothing


def test_every_run_stores_its_probes_and_mfu(torch_env, tmp_path):
    import sqlite3

    from tests.conftest import run_cli

    db = tmp_path / "n.db"
    r = run_cli("run", "--framework", "torch", "--model", "resnet50", "--image-size", "32",
                "--batch", "4", "--steps", "4", "--warmup", "1", "--trials", "2", "--target-width", "0", "--db",
                str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    row = sqlite3.connect(db).execute(
        "SELECT machine_gflops, machine_copy_gbs, noise_ratio, mfu, images_per_s "
        "FROM runs").fetchone()
    gflops, copy_gbs, ratio, mfu, ips = row
    assert gflops > 1 and copy_gbs > 0.1 and 0 < ratio <= 1.0
    spec = RunSpec("torch", "resnet50", image_size=32, batch_size=4)
    assert abs(mfu - noise.train_flops_per_image(spec) * ips / (gflops * 1e9)) < 1e-9
    # the probe is NumPy's BLAS as this host runs it: a framework's own kernels may beat
    # it somewhat, never by much (measured here: probe 245, PyTorch's matmul 213 GFLOP/s)
    assert 0 < mfu < 1.5, mfu
    assert "MFU" in r.stdout

    # a run taken while the machine was disturbed (its probes marked so) is measured again
    # on request, and its new row replaces the old one
    con = sqlite3.connect(db)
    (old_id,) = con.execute("SELECT run_id FROM runs").fetchone()
    with con:
        con.execute("UPDATE runs SET noise_ratio = 0.5")
    args = ("run", "--framework", "torch", "--model", "resnet50", "--image-size", "32",
            "--batch", "4", "--steps", "4", "--warmup", "1", "--trials", "2",
            "--target-width", "0", "--db", str(db))
    again = run_cli(*args)
    assert again.returncode == 0 and "add --remeasure-disturbed" in again.stdout, again.stdout
    again = run_cli(*args, "--remeasure-disturbed")
    assert again.returncode == 0, again.stdout + again.stderr
    rows = con.execute("SELECT run_id, status FROM runs").fetchall()
    assert len(rows) == 1 and rows[0][0] != old_id and rows[0][1] == "ok"
    assert con.execute("SELECT COUNT(*) FROM trials WHERE run_id = ?", (old_id,)).fetchone() == (0,)
