"""Where the performance model stands: its held-out verdict on every shipped measured set
(`python -m bench.scoreboard`; issue #17, item 4).

harness/perfmodel/README.md tells how each verdict came about, set by set and day by day;
this prints them all in one table (the top-level README's "Where the model stands"),
recomputed from the databases shipped under experiments/measured/ (read from copies), so
the answer to "does the model predict what it was not fitted to?" is one command, not a
reading of the whole log.

A set is a folder of repeats (r1.db, r2.db, ... in measurement order). Repeats are judged
together only when one machine measured them: consecutive repeats whose runs record the
same CPU model and the same kernel build (the run manifest's `host.cpu` and `host.os`).
The ps-async set is three machines so (AMD r1-r3, Intel r4-r10, AMD r11 on a newer
image), as its README judges it. A group of two or more repeats is judged by its median
sweep (harness/perfmodel/holdout_repeats.py), and each repeat alone is shown beside it;
a group of one by itself. Per strategy: the median and worst |error| of t_iter over the
held-out (> 2-worker) runs and PASS where they meet the targets (10% and 25%).

`--server-requests` and `--packet-work` judge every set with those terms of the model
(`dnnbench predict --validate --holdout`'s options); `--markdown` prints the table as the
README has it. Measures nothing; about 2 minutes here (psstep's simulation).

    python -m bench.scoreboard [--server-requests] [--packet-work] [--markdown]
                               [--set FOLDER ...]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.shipped import SHIPPED  # noqa: E402
from harness.perfmodel import holdout, holdout_repeats  # noqa: E402
from harness.store import Store  # noqa: E402


@dataclass(frozen=True)
class Verdict:
    """One strategy's held-out verdict on one machine's repeats of one set."""
    folder: str
    repeats: tuple[str, ...]  # r1, r2, ...: the group's repeats
    machine: str  # the CPU the group's runs record
    strategy: str
    n: int  # held-out runs of the strategy (in the median sweep where judged so)
    median: float
    worst: float
    passed: bool
    #: each repeat's own verdict (True/False), or None where it could not be judged alone;
    #: empty for a group of one
    alone: tuple[bool | None, ...] = ()

    @property
    def name(self) -> str:
        rs = self.repeats
        return rs[0] if len(rs) == 1 else f"{rs[0]}-{rs[-1]}"


def repeat_dbs(folder: Path) -> list[Path]:
    """A set's repeats in measurement order (r10.db after r9.db)."""
    return sorted(folder.glob("r*.db"), key=lambda db: (len(db.name), db.name))


def machine_of(db: Path) -> tuple[str, str]:
    """(CPU model, OS and kernel build) that `db`'s first run recorded; read-only, so the
    shipped file is not touched."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        row = conn.execute("SELECT manifest_json FROM runs WHERE manifest_json IS NOT NULL "
                           "ORDER BY started LIMIT 1").fetchone()
    host = json.loads(row[0]).get("host", {}) if row else {}
    return str(host.get("cpu", "?")), str(host.get("os", "?"))


def machine_groups(dbs: list[Path]) -> list[list[Path]]:
    """Consecutive repeats measured on one machine (same CPU model and kernel build)."""
    groups: list[list[Path]] = []
    last = None
    for db in dbs:
        m = machine_of(db)
        if groups and m == last:
            groups[-1].append(db)
        else:
            groups.append([db])
        last = m
    return groups


def judge(folder: Path, group: list[Path], options: dict[str, bool]) -> list[Verdict] | str:
    """The group's verdicts per strategy, or why it cannot be judged (no curve reaches
    beyond 2 workers, say)."""
    names = tuple(db.stem for db in group)
    cpu = machine_of(group[0])[0]
    with tempfile.TemporaryDirectory(prefix="dnnbench-scoreboard-") as tmp:
        copies = [Path(shutil.copy(db, Path(tmp) / db.name)) for db in group]
        try:
            if len(copies) == 1:
                with Store(copies[0]) as st:
                    res, each = holdout.validate(st, **options), []
            else:
                rep = holdout_repeats.validate(copies, **options)
                res, each = rep.median, rep.each
        except holdout.HoldoutError as exc:  # named by the shipped file, not the copy
            return str(exc).replace(f"{tmp}/", f"{folder.relative_to(REPO)}/")
    out = []
    for s, v in res.by_strategy().items():
        alone = tuple(None if isinstance(r, str) or s not in r.by_strategy()
                      else bool(r.by_strategy()[s]["pass"]) for r in each)
        out.append(Verdict(folder.name, names, cpu, s, int(v["n"]), float(v["median"]),
                           float(v["worst"]), bool(v["pass"]), alone))
    return out


def board(folders: list[Path], options: dict[str, bool],
          progress: Callable[[str], None] | None = None
          ) -> tuple[list[Verdict], list[str]]:
    """Every verdict over `folders`' machine groups, and the groups that could not be
    judged (with why); `progress` hears of each group before it is judged (the
    parameter-server sets take seconds each)."""
    verdicts, skipped = [], []
    for folder in folders:
        for group in machine_groups(repeat_dbs(folder)):
            if progress:
                progress(f"{folder.name} {group[0].stem}..{group[-1].stem}")
            got = judge(folder, group, options)
            if isinstance(got, str):
                skipped.append(f"{folder.name} {'/'.join(db.stem for db in group)}: {got}")
            else:
                verdicts += got
    return verdicts, skipped


def _alone(v: Verdict) -> str:
    return "".join("-" if a is None else "P" if a else "F" for a in v.alone) or "(one)"


def _mark(v: Verdict) -> str:
    return "PASS" if v.passed else "FAIL"


def summary(verdicts: list[Verdict]) -> list[str]:
    """How many verdicts pass, by kind of strategy."""
    kinds: dict[str, list[Verdict]] = {}
    for v in verdicts:
        kinds.setdefault(v.strategy, []).append(v)
    return [f"{s}: {sum(v.passed for v in vs)} of {len(vs)} pass"
            for s, vs in sorted(kinds.items())]


def text(verdicts: list[Verdict], skipped: list[str]) -> str:
    """The board for a terminal, with the totals and the groups not judged."""
    w = max([36] + [len(v.folder) for v in verdicts])
    lines = [f"{'set':<{w}} {'repeats':<8} {'machine':<28} {'strategy':<10} {'held out':>8} "
             f"{'alone':>8}  {'median / worst |error|':>22}",
             *(f"{v.folder:<{w}} {v.name:<8} {v.machine[:28]:<28} {v.strategy:<10} {v.n:>8} "
               f"{_alone(v):>8}  {v.median:>9.1%} / {v.worst:>6.1%}  {_mark(v)}"
               for v in verdicts),
             "", *summary(verdicts),
             f"all: {sum(v.passed for v in verdicts)} of {len(verdicts)} pass "
             "(targets: median |error| <= 10%, worst <= 25%; alone: each repeat's own "
             "verdict, P or F, where the group has more than one)"]
    lines += [f"not judged: {s}" for s in skipped]
    return "\n".join(lines)


def markdown(verdicts: list[Verdict]) -> str:
    """The board as the README's table (tests/test_scoreboard.py compares the two)."""
    lines = ["| set | repeats | machine | strategy | held out | each alone | median / worst "
             "| verdict |", "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {v.folder} | {v.name} | {v.machine} | {v.strategy} | {v.n} | "
              f"{_alone(v)} | {v.median:.1%} / {v.worst:.1%} | {_mark(v)} |"
              for v in verdicts]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server-requests", action="store_true",
                    help="judge with the servers' cost per request (predict's option)")
    ap.add_argument("--packet-work", action="store_true",
                    help="judge with the kernel's packet work (predict's option)")
    ap.add_argument("--markdown", action="store_true", help="print the README's table")
    ap.add_argument("--set", action="append", default=[], metavar="FOLDER",
                    help="only this set (a folder under experiments/measured/, by name or "
                         "path; repeatable)")
    args = ap.parse_args(argv)
    folders = sorted({p.parent for p in SHIPPED.glob("*/r[0-9]*.db")})
    if args.set:
        known = {f.name: f for f in folders}
        # the folder's name, or its path (as a shell completes it) when it is one of them
        names = [Path(s).name if Path(s).resolve() in folders else s for s in args.set]
        bad = [given for given, name in zip(args.set, names) if name not in known]
        if bad:
            ap.error(f"--set {bad[0]}: no repeat set of that name under {SHIPPED} "
                     f"(known: {', '.join(sorted(known))})")
        folders = [known[name] for name in names]
    options = {"requests": args.server_requests, "packet_work": args.packet_work}
    verdicts, skipped = board(folders, options,
                              lambda s: print(f"judging {s}", file=sys.stderr, flush=True))
    print(markdown(verdicts) if args.markdown else text(verdicts, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
