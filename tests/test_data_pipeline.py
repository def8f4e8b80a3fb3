"""Real input pipelines: the dataset maker, the shared listing rules, each framework's
loader on real JPEG files, loader mode, t_io, and the harness's resource telemetry."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from frameworks import datasets
from frameworks.datasets import DatasetError
from harness.datasets import make
from tests.conftest import FRAMEWORKS, PLUMBING_MODEL, run_cli


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """24 images in 3 classes, plus 2 files that are not complete JPEGs."""
    root = tmp_path_factory.mktemp("data") / "tiny"
    make(root, 24, size=64, classes=3, seed=1)
    good = (root / "class_1" / "img_0000001.jpg").read_bytes()
    (root / "class_1" / "truncated.jpg").write_bytes(good[: len(good) // 2])
    (root / "class_2" / "garbage.jpg").write_bytes(bytes(range(256)) * 4)
    return root


def test_make_writes_real_jpegs_with_varied_sizes(tmp_path):
    from PIL import Image

    info = make(tmp_path / "d", 12, size=40, classes=4, seed=3)
    files = sorted((tmp_path / "d").rglob("*.jpg"))
    assert info["images"] == 12 and len(files) == 12
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [f"class_{i}" for i in range(4)]
    sizes = set()
    for f in files:
        with Image.open(f) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            sizes.add(im.size)
            assert all(30 <= s <= 60 for s in im.size)
    assert len(sizes) > 6  # sizes and aspect ratios vary
    with pytest.raises(DatasetError, match="not empty"):
        make(tmp_path / "d", 4, classes=2)
    with pytest.raises(DatasetError, match="at least one image"):
        make(tmp_path / "e", 2, classes=5)


def test_listing_errors_name_the_path_and_the_fix(tmp_path):
    with pytest.raises(DatasetError, match="is not a directory.*dnnbench data make"):
        datasets.list_files(str(tmp_path / "missing"))
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(b"")
    with pytest.raises(DatasetError, match="no class sub-folders"):
        datasets.list_files(str(tmp_path / "flat"))
    (tmp_path / "nojpg" / "cls").mkdir(parents=True)
    (tmp_path / "nojpg" / "cls" / "a.png").write_bytes(b"x")
    with pytest.raises(DatasetError, match="no .jpg/.jpeg files"):
        datasets.list_files(str(tmp_path / "nojpg"))


def test_scan_skips_incomplete_jpegs_and_counts_them(dataset):
    whole = datasets.scan(str(dataset))
    assert whole.total_files == 26 and len(whole.items) == 24
    assert sorted(p.rsplit("/", 1)[1] for p in whole.corrupt) == ["garbage.jpg",
                                                                 "truncated.jpg"]
    assert whole.summary()["corrupt_skipped"] == 2


@pytest.mark.parametrize("world", [1, 2, 3, 5])
def test_shards_are_disjoint_and_cover_the_dataset(world):
    seen = [set(datasets.shard_indices(103, r, world)) for r in range(world)]
    assert sum(len(s) for s in seen) == 103
    assert set().union(*seen) == set(range(103))
    assert max(map(len, seen)) - min(map(len, seen)) <= 1
    with pytest.raises(DatasetError):
        datasets.shard_indices(10, world, world)


def test_crop_box_follows_the_random_resized_crop_ranges():
    rng = random.Random(0)
    for _ in range(2000):
        w, h = rng.randint(20, 400), rng.randint(20, 400)
        left, top, cw, ch = datasets.crop_box(rng, w, h)
        assert 0 <= left and 0 <= top and left + cw <= w and top + ch <= h and cw > 0 and ch > 0
    # an image whose aspect ratio is far outside 3/4..4/3 falls back to a centre crop
    assert datasets.crop_box(random.Random(1), 1000, 10)[1:] == (0, 13, 10)


def test_data_check_agrees_across_frameworks_and_shards(all_envs, dataset, tmp_path):
    out = tmp_path / "check.json"
    proc = run_cli("data", "check", str(dataset), "--world", "2", "--image-size", "32",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical in every framework" in proc.stdout
    report = json.loads(out.read_text())
    assert [r["framework"] for r in report] == list(FRAMEWORKS)
    valid = set(i for p, _, i in datasets.scan(str(dataset)).items)
    for fw in report:
        assert fw["ok"], fw
        ranks = fw["ranks"]
        idx = [set(r["indices"]) for r in ranks]
        assert not idx[0] & idx[1] and idx[0] | idx[1] == valid  # disjoint, complete
        counts: dict[str, int] = {}
        for r in ranks:
            for k, v in r["label_counts"].items():
                counts[k] = counts.get(k, 0) + v
        assert counts == {"0": 8, "1": 8, "2": 8}
        assert sum(r["corrupt_skipped"] for r in ranks) == 2
        shape = ranks[0]["sample_shape"]
        assert sorted(shape) == [3, 32, 32]
        # normalised with ImageNet statistics: centred near 0, unit-ish spread
        assert abs(ranks[0]["pixel_mean"]) < 1.0 and 0.5 < ranks[0]["pixel_std"] < 1.6


def test_data_errors_are_clear_before_anything_runs(tmp_path):
    proc = run_cli("run", "--framework", "torch", "--model", "alexnet", "--image-size", "64",
                   "--data", str(tmp_path / "nowhere"), "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2
    assert "nowhere" in proc.stderr and "dnnbench data make" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = run_cli("data", "check", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "no class sub-folders" in proc.stderr
    proc = run_cli("run", "--framework", "torch", "--model", "alexnet", "--mode", "loader",
                   "--db", str(tmp_path / "r.db"))
    assert proc.returncode == 2 and "needs a dataset" in proc.stderr


def test_undecodable_file_fails_naming_it(torch_env, tmp_path):
    root = tmp_path / "bad"
    make(root, 6, size=48, classes=2)
    good = (root / "class_0" / "img_0000000.jpg").read_bytes()
    # header and end markers intact, scan data destroyed: passes the cheap check
    (root / "class_0" / "broken.jpg").write_bytes(good[:200] + bytes(2000) + good[-2:])
    proc = run_cli("data", "check", str(root), "--frameworks", "torch")
    assert proc.returncode == 1
    assert "broken.jpg" in proc.stdout and "FAILED" in proc.stdout


def _runs(db) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM runs ORDER BY started")]
    conn.close()
    return rows


def test_real_data_costs_time_and_shows_in_t_io(torch_env, tmp_path):
    """Loading in the training process (0 loader workers) adds decode time to every step:
    large source images (16 decodes of ~640 px JPEGs, ~60 ms a step) against a small
    network at 32 px. Synthetic and real data are compared by their fastest trials, measured
    in one interleaved group (harness/interleave.py): another process loading the machine
    slows both alike (run one after the other, the synthetic run once lost at 400 px, and
    once at 640 px, to a busy minute)."""
    root = tmp_path / "big"
    make(root, 48, size=640, classes=4)
    db = str(tmp_path / "r.db")
    exp = tmp_path / "pipe.toml"
    exp.write_text(f"""name = "pipe"
[defaults]
framework = "torch"
model = "googlenet"
batch_size = 16
image_size = 32
num_classes = 10
steps = 4
warmup = 1
trials = 3
target_width = 0
loader_workers = 0
[matrix]
data = ["", "{root}"]
mode = ["throughput", "breakdown", "loader"]
[[exclude]]
data = ""
mode = "breakdown"
[[exclude]]
data = ""
mode = "loader"
""")
    proc = run_cli("run", "-e", str(exp), "--db", db)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _runs(db)
    assert len({r["group_id"] for r in rows}) == 1  # measured together
    synth = next(r for r in rows if r["data"] == "synthetic")
    real, bd, loader = (next(r for r in rows if r["data"] == str(root) and r["mode"] == m)
                        for m in ("throughput", "breakdown", "loader"))
    assert synth["data"] == "synthetic" and real["data"] == str(root)
    # the fastest trial of each: noise only ever adds time, and a trial here is 4 steps
    # (~0.3 s), so one busy second can move a median of 3 (CI once measured the synthetic
    # median 1.6x slower than its usual, above the real run's)
    conn = sqlite3.connect(db)
    fastest = {run_id: s for run_id, s in conn.execute(
        "SELECT run_id, MIN(seconds) FROM trials GROUP BY run_id")}
    assert fastest[real["run_id"]] > fastest[synth["run_id"]], fastest
    assert bd["t_io_s"] > 0.01  # 16 decodes of ~640 px JPEGs
    assert bd["t_io_s"] > bd["t_h2d_s"]
    assert loader["mode"] == "loader" and loader["images_per_s"] > 0
    assert loader["n_iters"] >= 2 * 50  # at least LOADER_MIN_STEPS per trial
    assert real["corrupt_skipped"] == 0 and real["loader_workers"] == 0
    manifest = json.loads(real["manifest_json"])
    assert manifest["ranks"]["0"]["settings"]["loader_workers"] == 0
    assert manifest["ranks"]["0"]["files"] == 48
    # telemetry: the run has samples and per-run summaries in plausible ranges
    assert 100 < real["peak_rss_mb"] < 8000
    assert 0.05 < real["cpu_cores_per_worker"] < 4
    n = conn.execute("SELECT COUNT(*) FROM telemetry WHERE run_id = ?",
                     (real["run_id"],)).fetchone()[0]
    assert n >= 2
    # each CPU rate is stored with the time it covers, so a mean can be weighted later
    spans = conn.execute("SELECT cpu_cores, span_s FROM telemetry WHERE run_id = ? AND "
                         "cpu_cores IS NOT NULL", (real["run_id"],)).fetchall()
    assert spans and all(s is not None and 0 < s < 30 for _, s in spans), spans
    # and each process's context switches: a training worker's threads sleep and wake
    switches = json.loads(real["ctx_switches_by_process_json"])
    assert set(switches) == set(json.loads(real["cpu_cores_by_process_json"])), switches
    assert switches["worker0"]["voluntary_per_s"] > 0, switches
    # and its anonymous memory at the full scans, within what is resident: torch's
    # libraries' mapped pages are in RSS, not in it
    mem = conn.execute("SELECT rss_bytes, pss_bytes, anon_bytes FROM telemetry WHERE "
                       "run_id = ? AND anon_bytes IS NOT NULL", (real["run_id"],)).fetchall()
    assert mem and all(0 < a < r and 0 < p <= r for r, p, a in mem), mem
    assert 20 < real["tree_anon_peak_mb"] < real["tree_rss_peak_mb"], real
    report = tmp_path / "r.md"
    proc = run_cli("report", "--db", db, "--format", "md", "-o", str(report))
    assert proc.returncode == 0
    text = report.read_text()
    assert "Input pipeline" in text and "Resources" in text
    assert "anonymous (MiB)" in text, text[text.find("Resources"):][:600]
    assert "input-bound" in text or "compute-bound" in text


@pytest.mark.slow
def test_each_framework_trains_on_real_data(all_envs, dataset, tmp_path):
    db = str(tmp_path / "r.db")
    for fw in FRAMEWORKS:
        proc = run_cli("run", "--framework", fw, "--model", PLUMBING_MODEL, "--batch", "4",
                       "--image-size", "32", "--steps", "2", "--warmup", "1", "--trials", "1", "--target-width", "0",
                       "--mode", "breakdown", "--data", str(dataset), "--db", db)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = _runs(db)
    assert [r["status"] for r in rows] == ["ok"] * len(FRAMEWORKS)
    for r in rows:
        assert r["t_io_s"] is not None and r["t_io_s"] >= 0 and r["corrupt_skipped"] == 2


def test_two_workers_read_disjoint_shards_in_ddp(torch_env, dataset, tmp_path):
    db = str(tmp_path / "r.db")
    proc = run_cli("run", "--framework", "torch", "--model", "alexnet", "--batch", "4",
                   "--image-size", "64", "--steps", "2", "--warmup", "1", "--trials", "1", "--target-width", "0",
                   "--strategy", "allreduce", "--devices-per-node", "2", "--data",
                   str(dataset), "--db", db)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = _runs(db)
    ranks = json.loads(row["manifest_json"])["ranks"]
    assert ranks["0"]["shard_files"] + ranks["1"]["shard_files"] == 24  # the valid JPEGs
    assert ranks["0"]["files"] == ranks["1"]["files"] == 26
    assert row["corrupt_skipped"] == 2 and row["replicas_identical"] == 1


def _sampled(code: str, measure_s: float, server: str | None = None):
    """Telemetry of `python -c code` (its whole process group killed after): 1 s of
    start-up, then `measure_s` seconds measured, sampled every 0.2 s; `server`: a second
    process's code, tagged server0."""
    from harness.telemetry import Sampler

    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    other = subprocess.Popen([sys.executable, "-c", server], start_new_session=True) \
        if server else None
    sampler = Sampler(interval_s=0.2, gpu=False)
    sampler.add("worker0", child.pid)
    if other is not None:
        sampler.add("server0", other.pid)
    sampler.start()
    time.sleep(1.0)
    sampler.measuring()
    time.sleep(measure_s)
    data = sampler.stop()
    for proc in (child, other):
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and anything it forked
            proc.wait()
    return data


def test_sampler_measures_a_real_process():
    """A child that keeps one core busy and holds 200 MB: the sampler must see both; and
    each process's own CPU (a sleeping 'server' next to it), which the performance model
    reads for parameter servers sharing a host's quota."""
    code = "import time\nb = bytearray(200 * 2**20)\nt = time.time()\nwhile time.time() - t < 4: pass"
    data = _sampled(code, 2.0, server="import time\ntime.sleep(6)")
    summary = data.summary()
    assert 0.5 < summary["cpu_cores_per_worker"] < 1.3
    assert 190 < summary["tree_rss_peak_mb"] < 400
    assert {s.tag for s in data.samples} == {"worker0", "server0"}
    assert sum(s.tag == "worker0" for s in data.samples) >= 8
    by = json.loads(summary["cpu_cores_by_process_json"])
    assert 0.5 < by["worker0"] < 1.3 and by["server0"] < 0.1, by


def test_cpu_means_weight_each_rate_by_the_time_it_covers():
    """Ticks milliseconds apart, as at an interleaved turn's end right after the
    sampler's own tick: CPU time counts in 10 ms ticks, so each short sample reads 0 or
    several cores. The per-run mean must still be the process's CPU time over the time
    measured (an unweighted mean of the rates stored an MXNet server under a 0.15-CPU
    quota as 0.50 cores, and the held-out model fits server costs to it)."""
    from harness.telemetry import TICK, Sampler

    child = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             start_new_session=True)
    try:
        sampler = Sampler(interval_s=60.0, gpu=False)  # no thread: every tick is ours
        sampler.add("worker0", child.pid)
        time.sleep(0.5)  # past the interpreter's start
        sampler.tick(record=False)
        sampler.measuring()
        before, t0 = sampler.cpu_ticks(), time.monotonic()
        for _ in range(25):
            time.sleep(0.06)
            sampler.tick()
            time.sleep(0.002)
            sampler.tick()
        after, t1 = sampler.cpu_ticks(), time.monotonic()
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    spent = sum(after[p] - before[p] for p in after.keys() & before.keys()) / TICK / (t1 - t0)
    rates = [s.cpu_cores for s in sampler.data.samples if s.cpu_cores is not None]
    # the short samples' quantised reads: whole 10 ms ticks over a few ms read rates a core
    # or more apart (max >= 2.0 failed on a loaded machine, 1.95: its short samples took
    # over 5 ms)
    assert len(rates) == 50 and max(rates) - min(rates) >= 0.5, rates
    summary = sampler.data.summary()
    assert spent > 0.3, spent
    assert summary["cpu_cores_per_worker"] == pytest.approx(spent, abs=0.05), (summary, spent)
    by = json.loads(summary["cpu_cores_by_process_json"])
    assert by["worker0"] == pytest.approx(spent, abs=0.05), (by, spent)


def test_a_database_from_before_spans_gains_the_column(tmp_path):
    """A results database made before samples stored their span and memory by kind (the
    shipped repeats in experiments/measured/ are) opens, gains span_s, pss_bytes and
    anon_bytes, keeps its samples with none, and stores new runs' values."""
    import shutil
    from pathlib import Path

    from frameworks.contract import RunSpec
    from harness import collect
    from harness.store import RunRecord, Store

    src = Path(__file__).resolve().parent.parent / "experiments" / "measured" / \
        "cori2017-emulated-repeats" / "r1.db"
    db = Path(shutil.copy(src, tmp_path / "old.db"))
    old = sqlite3.connect(db)
    assert "span_s" not in {r[1] for r in old.execute("PRAGMA table_info(telemetry)")}
    before = old.execute("SELECT COUNT(*) FROM telemetry").fetchone()[0]
    old.close()
    spec = RunSpec("torch", "resnet50", batch_size=8, image_size=32, num_classes=10)
    with Store(db) as st:
        st.add(RunRecord({**collect.base_row(spec, "new", "n0", "ok"), "t_iter_s": 0.1},
                         telemetry=[("worker0", 1.0, 0.5, 9, None, None, None, 0.25, 7, 5),
                                    ("worker0", 2.0, 0.5, 9, None, None, None, 0.25)]))
        rows = st.telemetry("n0")
        assert [(r["span_s"], r["pss_bytes"], r["anon_bytes"]) for r in rows] == \
            [(0.25, 7, 5), (0.25, None, None)]
        n, spanned, anon = st.conn.execute("SELECT COUNT(*), COUNT(span_s), COUNT(anon_bytes) "
                                           "FROM telemetry").fetchone()
    assert (n, spanned, anon) == (before + 2, 2, 1)


def test_a_quantised_short_sample_does_not_set_a_servers_mean():
    """The stored samples of the MXNet server that read 0.50 cores under a 0.15-CPU quota
    (cori2017-emulated-own, 1 worker, 2026-12-03): ten rates near 0.05 cores and one of
    5.03 over the 4 ms between the sampler's tick and a turn's end. Spans are the times
    between the samples."""
    from harness.telemetry import Sample, Telemetry

    ts = [6.056, 8.056, 9.057, 9.061, 9.794, 10.697, 11.057, 11.428, 12.057, 12.162,
          13.058, 13.061]
    rates = [0.0335, 0.0500, 5.0271, 0.0546, 0.0537, 0.0, 0.0809, 0.0443, 0.0960, 0.0530, 0.0]
    data = Telemetry(measuring_from=8.0, samples=[
        Sample("server0", t, c, 125 * 2**20, span_s=t - t0)
        for t0, t, c in zip(ts, ts[1:], rates)])
    unweighted = sum(rates) / len(rates)
    server = json.loads(data.summary()["cpu_cores_by_process_json"])["server0"]
    assert unweighted > 0.45  # what was stored
    assert 0.04 < server < 0.07, server  # within the host's 0.15-CPU quota


def test_tree_memory_counts_pages_shared_with_forked_children_once():
    """A worker that touched 200 MB and forked two loader-like children (copy-on-write:
    the pages stay shared): RSS summed over the tree counts them three times, PSS once."""
    code = ("import os, time\nb = bytearray(200 * 2**20)\n"
            "for _ in range(2):\n    if os.fork() == 0:\n        time.sleep(4); os._exit(0)\n"
            "time.sleep(4)")
    summary = _sampled(code, 1.5).summary()
    assert summary["tree_rss_peak_mb"] > 3 * 190, summary
    assert 190 < summary["tree_pss_peak_mb"] < 300, summary


def test_anonymous_memory_is_sampled_apart_from_mapped_files(tmp_path):
    """A child that holds 120 MiB of its own and maps a 64 MiB file it reads through:
    RSS counts both, the anonymous column only the first. A library's mapped pages are
    such file pages, and how many of them a process maps moves with the page cache's
    state (bench/page_cache_rss.py), so the anonymous column is the one that compares."""
    from harness.telemetry import Telemetry

    data = tmp_path / "mapped.bin"
    data.write_bytes(os.urandom(64 * 2**20))
    code = ("import mmap, time\nb = bytearray(120 * 2**20)\n"
            f"f = open({str(data)!r}, 'rb')\nm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
            "s = sum(m[i] for i in range(0, len(m), 4096))\ntime.sleep(4)")
    got = _sampled(code, 1.5)
    full = [s for s in got.samples if s.anon_bytes is not None and s.t >= got.measuring_from]
    assert full, got.samples  # every tick of the first RESCAN_S is a full scan
    for s in full:
        mib = s.anon_bytes / 2**20
        assert 115 < mib < 160, mib
        assert s.rss_bytes - s.anon_bytes > 60 * 2**20, s  # the file's pages
        assert s.anon_bytes <= s.pss_bytes <= s.rss_bytes, s
    summary = got.summary()
    assert 115 < summary["tree_anon_peak_mb"] < summary["tree_rss_peak_mb"] - 60, summary
    stored = {r[0]: r for r in got.rows()}["worker0"]
    assert len(stored) == 10  # tag ... span, pss, anon: the telemetry table's order
    again = Telemetry(samples=full).rows()
    assert [r[9] for r in again] == [s.anon_bytes for s in full]


def test_the_page_cache_bench_reads_resident_memory_by_kind(tmp_path):
    """bench.page_cache_rss's pieces on a file of our own: a fresh interpreter that maps
    and reads a 32 MiB file has it in RssFile whichever way the cache was filled, and
    its anonymous memory does not hold it."""
    from bench import page_cache_rss as pc

    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(32 * 2**20))
    copy = tmp_path / "copy.bin"
    pc.write_copy(src, copy)
    assert copy.read_bytes() == src.read_bytes()
    touch = (f"import mmap\nf = open({str(copy)!r}, 'rb')\n"
             "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
             "s = sum(m[i] for i in range(0, len(m), 4096))")
    base = pc.resident(sys.executable, "pass")
    os.sync()
    for fill in (lambda: None, lambda: pc.evict(copy), lambda: (pc.evict(copy),
                                                                pc.read_whole(copy))):
        fill()
        got = pc.resident(sys.executable, touch)
        assert got["RssFile"] - base["RssFile"] >= 31, (got, base)
        assert got["RssAnon"] - base["RssAnon"] < 16, (got, base)
    with pytest.raises(RuntimeError, match="failed"):
        pc.resident(sys.executable, "raise SystemExit(3)")
    # the timed step is MXNet gluon's: asked of another framework, it says so before
    # touching any cache
    for bad in (["--speed", "2", "--framework", "torch"], ["--speed", "-1"]):
        with pytest.raises(SystemExit) as e:
            pc.main(bad)
        assert e.value.code == 2, bad


def test_short_interleaved_turns_record_tree_memory(monkeypatch):
    """Interleaved turns shorter than a rescan period: the scan at a turn's start is not
    recorded, so each turn's end must scan fully, or the run has no PSS (a container run
    in CI lost it this way). RESCAN_S is shortened so the test need not wait 5 s."""
    from harness import telemetry

    monkeypatch.setattr(telemetry, "RESCAN_S", 0.3)
    child = subprocess.Popen([sys.executable, "-c",
                              "b = bytearray(100 * 2**20)\nimport time\ntime.sleep(6)"],
                             start_new_session=True)
    try:
        sampler = telemetry.Sampler(interval_s=1.0, gpu=False)
        sampler.add("worker0", child.pid)
        sampler.start()
        time.sleep(1.0)  # past RESCAN_S and the array allocated
        for _ in range(3):
            sampler.turn_begins()
            time.sleep(0.05)
            sampler.turn_ends()
            time.sleep(0.4)
        summary = sampler.stop().summary()
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert summary["tree_pss_peak_mb"] is not None, summary
    assert 90 < summary["tree_pss_peak_mb"] < 200, summary



def test_counter_rates_come_from_within_each_turn():
    """An interleaved run's counters are read where its turns begin and end: the
    switches and throttled periods between turns belong to the other members' trials,
    and a reading whose tree lost a member (a loader that exited) counts down."""
    from harness.telemetry import Counters, Telemetry

    data = Telemetry(measuring_from=0.5, turns=[[1.0, 2.0], [5.0, 6.0]], counters=[
        Counters("server0", 0.2, 0, 0, 0, 0),  # before measuring
        Counters("server0", 1.0, 50, 5, 30, 1),
        Counters("server0", 2.0, 150, 25, 60, 16),
        Counters("server0", 5.0, 9000, 900, 150, 150),  # between turns: others' trials
        Counters("server0", 6.0, 9100, 920, 180, 165),
        Counters("worker0", 1.0, 500, 0),
        Counters("worker0", 2.0, 400, 0)])  # counted down: left out, no rate at all
    switches, throttled = data.counter_rates()
    assert switches == {"server0": {"voluntary_per_s": 100.0, "involuntary_per_s": 20.0}}
    assert throttled == {"server0": 0.5}  # 30 of 60 periods, both turns


def test_thread_rates_count_threads_read_at_both_ends_of_a_turn():
    """Per-thread CPU from the same readings: only within a turn, only threads read at
    both ends, and not across a count down (a thread id reused)."""
    from harness.telemetry import TICK, Counters, Telemetry

    t = TICK  # ticks in one second
    data = Telemetry(measuring_from=0.5, turns=[[1.0, 3.0], [5.0, 6.0]], counters=[
        Counters("server0", 1.0, 0, 0, threads={"io": 0, "python": 0, "omp": 50}),
        Counters("server0", 2.0, 0, 0, threads={"io": t // 2, "python": t // 10, "omp": 10}),
        Counters("server0", 3.0, 0, 0, threads={"io": t, "python": t // 5, "new": 7}),
        Counters("server0", 5.0, 0, 0, threads={"io": 99 * t}),  # between turns
        Counters("server0", 6.0, 0, 0, threads={"io": 99 * t + t // 2})])
    assert data.thread_rates() == {"server0": {"io": 0.5, "python": 0.1}}


def test_each_threads_cpu_is_read_under_its_name():
    """A real process whose named thread spins while its main thread sleeps, sampled in
    one turn: the spinner's CPU is stored under its name, apart from the main thread."""
    from harness.telemetry import Sampler

    code = ("import ctypes, threading, time\n"
            "def spin():\n"
            "    ctypes.CDLL(None).prctl(15, b'spinner', 0, 0, 0)\n"
            "    while True: pass\n"
            "threading.Thread(target=spin, daemon=True).start()\n"
            "while True: time.sleep(0.01)\n")
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        sampler = Sampler(interval_s=60.0, gpu=False)
        sampler.add("server0", child.pid)
        time.sleep(0.5)
        sampler.tick(record=False)
        sampler.turn_begins()
        time.sleep(1.5)
        sampler.turn_ends()
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    rates = sampler.data.thread_rates()["server0"]
    (spinner,) = [k for k in rates if k.startswith("spinner/")]  # name/tid
    assert rates[spinner] > 0.3 and sum(rates.values()) - rates[spinner] < 0.2, rates
    summary = sampler.data.summary()
    stored = json.loads(summary["cpu_cores_by_thread_json"])
    assert stored["server0"][spinner] == rates[spinner]
    # the whole machine over the same turn: its kinds sum to its cores (ticks of 10 ms
    # over 1.5 s), and user time holds at least the spinner's
    machine = json.loads(summary["machine_cpu_json"])
    assert set(machine) == {"user", "system", "irq", "softirq", "steal", "idle"}
    assert sum(machine.values()) == pytest.approx(os.cpu_count(), rel=0.1), machine
    assert machine["user"] >= rates[spinner] - 0.05, (machine, rates)
    # and its softirqs by kind over the same turn: a busy core takes timer ticks
    softirqs = json.loads(summary["machine_softirqs_json"])
    assert softirqs["TIMER"] > 0 and all(v > 0 for v in softirqs.values()), softirqs


def test_machine_rates_come_from_within_each_turn():
    """The machine's CPU by kind from readings within one stretch of measuring time: the
    gap between an interleaved run's turns is the other members' load, not its own."""
    from harness.telemetry import TICK, MachineTicks, Telemetry

    t = TICK

    def at(when: float, user: int, system: int, idle: int, softirq: int = 0,
           steal: int = 0, nice: int = 0, iowait: int = 0) -> MachineTicks:
        return MachineTicks(when, (user, nice, system, idle, iowait, 0, softirq, steal))

    data = Telemetry(measuring_from=0.5, turns=[[1.0, 3.0], [5.0, 6.0]], machine=[
        at(0.2, 0, 0, 0),  # before measuring
        at(1.0, 10 * t, 0, 0),
        at(3.0, 12 * t, t // 2, t, softirq=t // 2, nice=t),  # 2 s: 1 core of user
        at(5.0, 99 * t, 0, 0),  # between turns: another member's trial
        at(6.0, 98 * t, t // 2, t, steal=t // 2),  # user counted down: dropped
        at(7.0, 99 * t + t, 0, t)])  # outside every turn
    # only the first turn's two seconds remain: user + nice 3 s of ticks, iowait as idle
    got = data.machine_rates()
    assert got == {"user": 1.5, "system": 0.25, "irq": 0.0, "softirq": 0.25,
                   "steal": 0.0, "idle": 0.5}, got
    assert Telemetry(machine=[at(1.0, 0, 0, 0)]).machine_rates() == {}


def test_machine_softirqs_by_kind_come_from_within_each_turn():
    """The machine's softirqs per second by kind (/proc/softirqs) from the same readings:
    within a turn only, a kind never raised left out, a reading without them (a kernel
    without the file) skipped; and this machine's file parses, every core summed."""
    from harness.telemetry import MachineTicks, Telemetry, machine_softirqs

    def at(when: float, **kinds: int) -> MachineTicks:
        return MachineTicks(when, (0,) * 8, kinds)

    data = Telemetry(measuring_from=0.5, turns=[[1.0, 3.0], [5.0, 6.0]], machine=[
        at(0.2, NET_RX=0, TIMER=0, HI=0),  # before measuring
        at(1.0, NET_RX=100, TIMER=50, HI=0),
        at(2.0),  # no /proc/softirqs at this reading
        at(3.0, NET_RX=900, TIMER=250, HI=0),  # 2 s: 400 NET_RX/s, 100 TIMER/s
        at(5.0, NET_RX=5000, TIMER=400, HI=0),  # between turns: another member's trial
        at(6.0, NET_RX=4000, TIMER=500, HI=0)])  # counted down: dropped
    assert data.machine_softirq_rates() == {"NET_RX": 400.0, "TIMER": 100.0}
    assert Telemetry(machine=[at(1.0, TIMER=1)]).machine_softirq_rates() == {}

    def timer_now() -> int:
        with open("/proc/softirqs") as fh:
            row = next(r for r in fh if r.split(":")[0].strip() == "TIMER")
        return sum(int(x) for x in row.split(":")[1].split())

    # read between two readings of the file, every core summed: the counter runs on, so
    # one reading after it alone could be a tick ahead (it was, once, in CI: 2026-12-06)
    before = timer_now()
    here = machine_softirqs()
    after = timer_now()
    assert {"NET_RX", "NET_TX", "TIMER", "SCHED"} <= set(here), here
    assert before <= here["TIMER"] <= after, (before, here["TIMER"], after)


def test_interleaved_turns_measure_wake_ups_inside_each_turn():
    """A real process that sleeps 5 ms at a time, sampled in three short turns with idle
    gaps between them, as an interleaved run is: each turn's start and end readings give
    its wake-up rate."""
    from harness.telemetry import Sampler

    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nwhile True: time.sleep(0.005)"],
                             start_new_session=True)
    try:
        sampler = Sampler(interval_s=60.0, gpu=False)  # no thread: every tick is ours
        sampler.add("server0", child.pid)
        time.sleep(0.5)
        sampler.tick(record=False)
        for _ in range(3):
            sampler.turn_begins()
            time.sleep(0.3)
            sampler.turn_ends()
            time.sleep(0.3)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert len(sampler.data.counters) == 6  # a reading at each turn's start and end
    switches, _ = sampler.data.counter_rates()
    assert 80 < switches["server0"]["voluntary_per_s"] < 250, switches
