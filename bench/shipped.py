"""What the benches that read stored sweeps share: the databases shipped under
experiments/measured/ (or the ones given with --db), each read from a copy so a shipped
file is never opened for writing, and a report split by synchronous and asynchronous
servers with its totals."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.store import Store

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "experiments" / "measured"
KINDS = ("synchronous", "asynchronous")


def parser(doc: str) -> argparse.ArgumentParser:
    """A bench's parser with the shared --db option (its description: `doc`'s first
    paragraph)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--db", action="append", default=[],
                    help="read these databases (default: every one shipped under "
                         "experiments/measured/)")
    return ap


def databases(ap: argparse.ArgumentParser, given: Sequence[str], what: str) -> list[Path]:
    """The databases given, or every shipped one; a missing one is a usage error naming
    `what` a bench needs."""
    dbs = [Path(d) for d in given] or sorted(SHIPPED.glob("*/*.db"))
    for db in dbs:
        if not db.is_file():
            ap.error(f"--db {db}: no such file (give a results database of {what})")
    return dbs


@contextmanager
def copy_of(db: Path) -> Iterator[Path]:
    """A temporary copy of `db`, removed after."""
    with tempfile.TemporaryDirectory(prefix="dnnbench-bench-read-") as tmp:
        yield Path(shutil.copy(db, Path(tmp) / db.name))


def runs_of(db: Path) -> list[dict[str, Any]]:
    """Every stored run of `db`, read from a temporary copy."""
    with copy_of(db) as copy, Store(copy, readonly=True) as st:
        return st.runs()


def report_by_kind(ap: argparse.ArgumentParser, dbs: list[Path],
                   checks_of: Callable[[Path], list], line: Callable[[str, list], str],
                   header: str, total: str, nothing: str) -> int:
    """Each database's checks (objects with `family`: servercost.family, whose third
    item says asynchronous) by kind of server, one `line` each, then the totals
    (`total` formatted with the kind); a usage error saying `nothing` where there are
    none."""
    print(header)
    by_kind: dict[str, list] = {k: [] for k in KINDS}
    for db in dbs:
        cs = checks_of(db)
        for kind in KINDS:
            mine = [c for c in cs if c.family[2] == (kind == "asynchronous")]
            if mine:
                by_kind[kind] += mine
                print(line(f"{db.parent.name}/{db.name} {kind}", mine))
    if not any(by_kind.values()):
        ap.error(f"{nothing} in {', '.join(map(str, dbs))}")
    print()
    for kind, cs in by_kind.items():
        if cs:
            print(line(total.format(kind=kind), cs))
    return 0
