"""Benchmarks of dnnbench itself (`make bench`, `make bench-scaling`)."""

from __future__ import annotations

import json
from pathlib import Path


def write_json(path: str | Path, data: object) -> None:
    """A bench's results as JSON (folders made), and where they went."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1))
    print(f"written: {path}")
