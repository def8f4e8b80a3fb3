"""Repeat intervals (harness/repeat.py): a run's interval widened by how far its host moves
between sweeps, estimated from the host history without the sweep being judged."""

import math
import sqlite3

import pytest

from frameworks.contract import RunSpec
from harness import repeat
from harness.analysis import shootout
from harness.store import RunRecord, Store
from tests.conftest import run_cli

HOST = {"host": {"host": "box", "cpu": "Test CPU", "cores": 2}}
SPECS = [RunSpec("torch", m, batch_size=b, image_size=64)
         for m in ("alexnet", "googlenet", "resnet50") for b in (8, 16)]
#: log shift of each sweep: the whole machine slower or faster (sd 0.085 in log: 8.9%)
SHIFTS = [-0.10, 0.0, 0.05, 0.10]


def _row(spec: RunSpec, run_id: str, t: float, rel_half: float | None = 0.01,
         host: dict = HOST, started: str = "") -> dict:
    """A results row as the sweep stores it: t_iter with its 95% interval, images/s."""
    batch = spec.batch_size
    low, high = (t * math.exp(-rel_half), t * math.exp(rel_half)) if rel_half else (None,
                                                                                       None)
    return {"run_id": run_id, "experiment": "e", "started": started or run_id,
            "config_hash": spec.config_hash(), "status": "ok", "spec_json": spec.to_json(),
            "manifest_json": host, "mode": "throughput", "t_iter_s": t,
            "t_iter_low_s": low, "t_iter_high_s": high, "images_per_s": batch / t,
            "images_per_s_low": batch / high if high else None,
            "images_per_s_high": batch / low if low else None}


def _history(tmp_path, shifts=SHIFTS, wild: bool = False) -> repeat.History:
    h = repeat.History(tmp_path / "history.db")
    for s, shift in enumerate(shifts):
        for c, spec in enumerate(SPECS):
            half = 1.0 if wild and c == 0 and s == 0 else 0.01  # one min..max interval
            h.record(_row(spec, f"s{s}c{c}", 0.1 * (c + 1) * math.exp(shift), half,
                          started=f"2026-11-0{s + 1}"), f"sweep{s}")
    return h


def test_drift_is_the_between_sweep_spread_less_the_within_run_part(tmp_path):
    with _history(tmp_path) as h:
        d = repeat.estimate(h, repeat.host_key(_row(SPECS[0], "x", 1)))
    n = len(SHIFTS)
    m = sum(SHIFTS) / n
    expected = sum((x - m) ** 2 for x in SHIFTS) / (n - 1) - (0.01 / repeat.Z95) ** 2
    assert d is not None and d.sweeps == 4 and d.configurations == len(SPECS)
    assert d.df == len(SPECS) * (n - 1)
    assert d.variance == pytest.approx(expected, rel=1e-9)
    assert f"sd {(math.exp(math.sqrt(expected)) - 1) * 100:.1f}%" in d.text()
    assert "sd 8.9%" in d.text() and "over 4 sweeps" in d.text()


def test_a_sweep_never_widens_its_own_interval(tmp_path):
    host = repeat.host_key(_row(SPECS[0], "x", 1))
    with _history(tmp_path) as h:
        full = repeat.estimate(h, host)
        # the two quiet sweeps alone: no drift left (floored at 0, not negative)
        quiet = repeat.estimate(h, host, exclude={"sweep0", "sweep3"})
        assert quiet is not None and quiet.variance < full.variance / 3
        assert repeat.estimate(h, host, exclude={"sweep0", "sweep1", "sweep2"}) is None
        assert repeat.estimate(h, "other|host|2") is None
    # through the public entry point: the runs of sweep3 exclude sweep3
    rows = [_row(s, f"s3c{c}", 1.0) for c, s in enumerate(SPECS)]
    d = repeat.drifts_for(rows, tmp_path / "history.db")[host]
    assert d.sweeps == 3
    with repeat.History(tmp_path / "history.db") as h:
        assert d == repeat.estimate(h, host, exclude={"sweep3"})


def test_one_wild_within_interval_does_not_cancel_the_drift(tmp_path):
    """A 6-trial order-statistic interval can span min..max; the median within-run part
    keeps it from swallowing the between-sweep variance (the mean drove it to 0 here)."""
    host = repeat.host_key(_row(SPECS[0], "x", 1))
    with _history(tmp_path, wild=True) as h:
        d = repeat.estimate(h, host)
    assert d.sd_pct > 8


def test_repeat_interval_contains_the_sweep_interval_and_widens_with_drift(tmp_path):
    r = _row(SPECS[0], "r", 0.1, 0.02)
    assert repeat.interval(r, None) is None
    small = repeat.Drift("h", 0.0001, 3, 6, 12)
    big = repeat.Drift("h", 0.01, 3, 6, 12)
    lo_s, hi_s = repeat.interval(r, small)
    lo_b, hi_b = repeat.interval(r, big)
    assert lo_b < lo_s <= r["images_per_s_low"] and r["images_per_s_high"] <= hi_s < hi_b
    # symmetric in log: 1.96 sqrt(within^2 + between)
    half = repeat.Z95 * math.sqrt((0.02 / repeat.Z95) ** 2 + 0.01)
    assert hi_b / r["images_per_s"] == pytest.approx(math.exp(half))
    assert repeat.interval(_row(SPECS[0], "n", 0.1, None), big) is None  # no own interval


def test_the_report_table_shows_repeat_intervals_only_with_a_history(tmp_path):
    ok = [_row(SPECS[0], "new", 0.1)]
    ok[0].update(workers=1, framework="torch", model="alexnet", data="synthetic",
                 jitter=0.01, settling=None, batch_size=8, image_size=64, strategy="single",
                 precision="fp32", device="cpu", threads=2, env="venv", label="")
    t = shootout(ok, repeat.drifts_for(ok, tmp_path / "none.db"))
    assert t.rows[0]["repeat_low"] is None
    with _history(tmp_path):
        pass
    t = shootout(ok, repeat.drifts_for(ok, tmp_path / "history.db"))
    row = t.rows[0]
    assert row["repeat_low"] < row["low"] and row["repeat_high"] > row["high"]


def _db(path, rows):
    with Store(path) as store:
        for r in rows:
            assert store.add(RunRecord(dict(r)))
    return str(path)


def test_compare_uses_the_hosts_drift_and_still_flags_a_real_change(tmp_path):
    """10% apart is a change by the runs' own intervals, noise on a host that drifts 8.9%
    between sweeps; 45% apart is a change either way."""
    a = _db(tmp_path / "a.db", [_row(SPECS[0], "a0", 0.100), _row(SPECS[1], "a1", 0.100)])
    b = _db(tmp_path / "b.db", [_row(SPECS[0], "b0", 0.111), _row(SPECS[1], "b1", 0.145)])
    empty = {"DNNBENCH_HISTORY": str(tmp_path / "empty" / "h.db")}
    r = run_cli("compare", a, b, env=empty)
    assert r.returncode == 0, r.stderr
    assert "intervals: each run's own" in r.stdout and "2 slower" in r.stdout, r.stdout
    _history(tmp_path).close()
    hist = {"DNNBENCH_HISTORY": str(tmp_path / "history.db")}
    r = run_cli("compare", a, b, env=hist)
    assert "intervals: repeat, with the between-sweep drift" in r.stdout, r.stdout
    assert "1 within noise, 1 slower" in r.stdout, r.stdout
    lines = {ln.split()[2]: ln for ln in r.stdout.splitlines() if ln.startswith("torch ")}
    assert lines["b8"].endswith("within noise") and lines["b16"].endswith("slower"), lines


def test_history_cli_seeds_shows_and_clears(tmp_path):
    env = {"DNNBENCH_HISTORY": str(tmp_path / "h" / "history.db")}
    dbs = []
    for s, shift in enumerate(SHIFTS[:3]):
        dbs.append(_db(tmp_path / f"s{s}.db", [_row(spec, f"s{s}c{c}", 0.1 * math.exp(shift))
                                               for c, spec in enumerate(SPECS)]))
    r = run_cli("history", env=env)
    assert r.returncode == 0 and "no sweeps recorded yet" in r.stdout, r.stdout
    r = run_cli("history", "--add", dbs[0], env=env)
    assert "6 runs added" in r.stdout and "1 sweeps; no configuration measured in two" \
        in r.stdout, r.stdout
    r = run_cli("history", "--add", *dbs, env=env)  # adding twice stores nothing twice
    assert r.stdout.count("0 runs added") == 1 and "3 sweeps; between-sweep drift" in r.stdout
    r = run_cli("history", "--add", str(tmp_path / "missing.db"), env=env)
    assert r.returncode == 2 and "missing.db does not exist" in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    # a typo in the last path adds nothing (the ones before it were added until 2026-12-04)
    fresh = {"DNNBENCH_HISTORY": str(tmp_path / "h2" / "history.db")}
    r = run_cli("history", "--add", dbs[0], str(tmp_path), env=fresh)
    assert r.returncode == 2 and "is a folder" in r.stderr and "added" not in r.stdout
    assert "no sweeps recorded yet" in run_cli("history", env=fresh).stdout
    r = run_cli("history", "--clear", env=env)
    assert r.returncode == 0 and not (tmp_path / "h" / "history.db").exists()


def test_a_history_that_cannot_be_written_costs_no_result(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    repeat.record_sweep([_row(SPECS[0], "x", 0.1)], "s", blocker / "history.db")  # no raise
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    repeat.record_sweep([_row(SPECS[0], "x", 0.1)], "s", bad)
    with pytest.raises(sqlite3.DatabaseError):
        repeat.History(bad)


def test_the_report_says_what_its_intervals_cover():
    from reports.render import repeat_text

    assert repeat_text({}) == ""  # no runs
    assert "not yet known for this host" in repeat_text({"h": None})
    text = repeat_text({"h": repeat.Drift("h", 0.0036, 5, 18, 72)})
    assert text.startswith("Repeat intervals include the between-sweep drift") and \
        "sd 6.2%" in text and "over 5 sweeps" in text
