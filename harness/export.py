"""Tidy exports of the runs table: one row per run, the documented RUN_COLUMNS."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from harness.store import COLUMN_NAMES, Store

BLOBS = ("spec_json", "manifest_json", "output_tail")


FILTERS = ("experiment", "framework", "model", "strategy", "mode", "status")


def _rows(store: Store, experiment: str | None = None, **filters: str | None) -> list[dict]:
    """Runs matching every given field (None: any)."""
    wanted = {"experiment": experiment, **filters}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    unknown = set(wanted) - set(FILTERS)
    if unknown:
        raise ValueError(f"cannot filter on {', '.join(sorted(unknown))}")
    where = " AND ".join(f"{k} = ?" for k in wanted)
    return store.runs(f"WHERE {where}" if where else "", tuple(wanted.values()))


def write_csv(store: Store, path: str | Path, experiment: str | None = None,
              **filters: str | None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMN_NAMES)
        writer.writeheader()
        for row in _rows(store, experiment, **filters):
            writer.writerow(row)
    return path


def write_json(store: Store, path: str | Path, experiment: str | None = None,
               **filters: str | None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = _rows(store, experiment, **filters)
    for row in rows:
        for key in ("spec_json", "manifest_json"):
            if row.get(key):
                row[key[:-5]] = json.loads(row.pop(key))
    path.write_text(json.dumps(rows, indent=1))
    return path


def print_table(store: Store, experiment: str | None = None, **filters: str | None) -> None:
    rows = _rows(store, experiment, **filters)
    if not rows:
        given = {"experiment": experiment, **filters}
        narrowed = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in given.items() if v)
        print(f"no stored run matches {narrowed} (`dnnbench results --db DB` lists them all)"
              if narrowed and _rows(store, None) else "no runs stored")
        return
    print(f"{'run_id':<17}{'experiment':<12}{'framework':<10}{'model':<10}{'mode':<11}"
          f"{'strategy':<10}{'workers':>7}{'batch':>6}{'px':>5}{'status':>9}{'images/s':>10}")
    for r in rows:
        ips = f"{r['images_per_s']:.1f}" if r["images_per_s"] else "-"
        print(f"{r['run_id']:<17}{(r['experiment'] or '')[:11]:<12}{r['framework']:<10}"
              f"{r['model']:<10}{r['mode']:<11}{r['strategy']:<10}{r['workers']:>7}"
              f"{r['batch_size']:>6}{r['image_size']:>5}{r['status']:>9}{ips:>10}")
