"""How much of a framework's shared library a process maps, by how the library's file
entered the page cache (`python -m bench.page_cache_rss`).

Why: on one Intel VM (2026-12-07) every MXNet process of three sweeps held about 76 MiB
more resident memory than the same processes an hour later, schedulers 186 MiB against
110. Those sweeps ran within the hour after pip had written libmxnet.so. A file page
cache filled by writing the file or reading it whole holds it in large folios, and a
process that maps the library then gets whole folios mapped where a cache filled by its
own page faults gives it only the pages around each fault: its RssFile grows, its
anonymous memory (what it holds itself) does not. So RSS compares badly across machines
and across a machine's hours; the telemetry stores the anonymous pages beside it
(harness/telemetry.Sample.anon_bytes).

Three states of the cache, each measured `--repeats` times:
  * the library alone (ctypes loads a copy with its sibling libraries, in a temporary
    folder): written by this script in 1 MiB chunks as pip writes a wheel's files, then
    evicted and faulted in by the load, then evicted and read whole;
  * `import <framework>` in its environment (its own file): faulted in, then read whole.
With `--speed PAIRS` (MXNet only) it also times a training step in both states, in
turns: gluon's ResNet-50 at 32 px, batch 8, one thread pinned to the last core, 12 timed
steps per process (median), the states alternating pair by pair. 2026-12-07, Intel VM,
`--speed 5` twice: the library read whole was slower in 4 of 5 pairs each time, median
ratios 1.006 and 1.023 (steps 183-196 ms in both states), so the cache's state costs a
step 1-2% at most here and does not explain the 6-17% slower runs of that VM's first
hour. The environment's library is evicted and faulted in again at the end, so
the machine is left as a process's page faults leave it. Needs the framework's
environment (`dnnbench env setup mxnet --no-horovod`) and a few seconds; evicting needs
clean pages (it is posix_fadvise DONTNEED: pages another running process maps stay).

    python -m bench.page_cache_rss [--framework mxnet] [--repeats 2] [--speed PAIRS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from frameworks.contract import SUPPORT  # noqa: E402
from harness import envs  # noqa: E402

CHUNK = 2**20
#: printed by the child: its resident memory by kind, kB (from /proc/self/status)
REPORT = ("import json\nd = {}\nfor line in open('/proc/self/status'):\n"
          "    k, _, v = line.partition(':')\n"
          "    if k in ('VmRSS', 'RssAnon', 'RssFile', 'RssShmem'):\n"
          "        d[k] = int(v.split()[0])\nprint(json.dumps(d))\n")


def evict(path: Path) -> None:
    """Drop the file's clean cached pages (those no process maps)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def read_whole(path: Path) -> None:
    """Read the file from start to end, as `cat` does: the cache fills by readahead."""
    with open(path, "rb", buffering=0) as fh:
        while fh.read(CHUNK):
            pass


def write_copy(src: Path, dst: Path) -> None:
    """Copy by writing chunks (pip extracts a wheel's files this way), so that the
    copy's pages are in the cache as the writes left them."""
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        shutil.copyfileobj(fi, fo, CHUNK)


def _child(python: str, code: str, **kw) -> str:
    """The stdout of a fresh `python -c code` run from the temporary folder; its stderr's
    end in the error when it fails."""
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=600,
                         cwd=tempfile.gettempdir(), **kw)
    if out.returncode != 0:
        raise RuntimeError(f"{python} -c ... failed ({out.returncode}): "
                           f"{out.stderr.strip()[-800:]}")
    return out.stdout


def resident(python: str, code: str) -> dict[str, int]:
    """Resident memory by kind, MiB, of a fresh `python -c code` at its end."""
    kb = json.loads(_child(python, code + "\n" + REPORT).strip().splitlines()[-1])
    return {k: v // 1024 for k, v in kb.items()}


#: one process's training step (MXNet gluon): its median of 12 timed steps, ms
STEP = ("import time\nimport mxnet as mx\nfrom mxnet import autograd, gluon, nd\n"
        "net = gluon.model_zoo.vision.resnet50_v1(classes=10)\n"
        "net.initialize(mx.init.Xavier())\nnet.hybridize()\n"
        "tr = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.01})\n"
        "loss = gluon.loss.SoftmaxCrossEntropyLoss()\n"
        "x = nd.random.uniform(shape=(8, 3, 32, 32))\ny = nd.array([i % 10 for i in range(8)])\n"
        "def step():\n    with autograd.record():\n        out = loss(net(x), y)\n"
        "    out.backward()\n    tr.step(8)\n    nd.waitall()\n"
        "ts = []\nfor i in range(15):\n    t = time.perf_counter()\n    step()\n"
        "    ts.append(time.perf_counter() - t)\n"
        "print(sorted(ts[3:])[6] * 1e3)\n")


def step_ms(python: str) -> float:
    """One fresh process's median training step, ms, on one thread of the last core."""
    last = max(os.sched_getaffinity(0))
    out = _child(python, STEP, preexec_fn=lambda: os.sched_setaffinity(0, {last}),
                 env={**os.environ, "OMP_NUM_THREADS": "1"})
    return float(out.split()[-1])


def library_of(package: Path) -> Path:
    """The framework's largest shared library: the one whose mapped pages matter."""
    libs = [p for p in package.rglob("*.so*") if p.is_file()]
    if not libs:
        raise SystemExit(f"no shared library under {package}")
    return max(libs, key=lambda p: p.stat().st_size)


def summarize(name: str, got: list[dict[str, int]]) -> str:
    def span(k: str) -> str:
        vals = [g[k] for g in got]
        lo, hi = min(vals), max(vals)
        return f"{statistics.median(vals):7.0f}" + (f" ({lo}-{hi})" if lo != hi else "")
    return f"  {name:<34} RssFile {span('RssFile')}   RssAnon {span('RssAnon')} MiB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", default="mxnet", choices=sorted(SUPPORT),
                    help="whose environment and library (mxnet)")
    ap.add_argument("--repeats", type=int, default=2, help="measurements per state (2)")
    ap.add_argument("--speed", type=int, default=0, metavar="PAIRS",
                    help="also time a training step in both states, this many pairs in "
                         "turns (MXNet only; about 9 s a pair; 0: not)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: give 1 or more")
    if args.speed < 0 or (args.speed and args.framework != "mxnet"):
        ap.error(f"--speed {args.speed}: give 0, or a number of pairs with --framework "
                 "mxnet (the timed step is MXNet gluon's)")
    try:
        env = envs.find(args.framework)
    except envs.EnvError as e:
        ap.error(str(e))
    module = SUPPORT[args.framework].import_name
    site = next(env.path.glob("lib/python*/site-packages"))
    lib = library_of(site / module)
    print(f"{lib} ({lib.stat().st_size / 2**20:.0f} MiB), {args.repeats} per state",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="dnnbench-pagecache-") as tmp:
        copy = Path(tmp) / lib.name
        for sib in lib.parent.glob("*.so*"):  # what the library's $ORIGIN rpath loads
            if sib != lib and sib.is_file():
                shutil.copy(sib, Path(tmp) / sib.name)
        load = f"import ctypes\nctypes.CDLL({str(copy)!r}, mode=ctypes.RTLD_GLOBAL)"
        alone: dict[str, list[dict[str, int]]] = {"written": [], "faulted in": [],
                                                  "read whole": []}
        for _ in range(args.repeats):
            write_copy(lib, copy)
            os.sync()  # dirty pages cannot be evicted
            alone["written"].append(resident(env.python, load))
            evict(copy)
            alone["faulted in"].append(resident(env.python, load))
            evict(copy)
            read_whole(copy)
            alone["read whole"].append(resident(env.python, load))
    imported: dict[str, list[dict[str, int]]] = {"faulted in": [], "read whole": []}
    try:
        for _ in range(args.repeats):
            evict(lib)
            imported["faulted in"].append(resident(env.python, f"import {module}"))
            evict(lib)
            read_whole(lib)
            imported["read whole"].append(resident(env.python, f"import {module}"))
        pairs = []
        for i in range(args.speed):
            evict(lib)
            faulted = step_ms(env.python)
            evict(lib)
            read_whole(lib)
            pairs.append((faulted, step_ms(env.python)))
            print(f"pair {i + 1}: faulted in {faulted:.1f} ms, read whole "
                  f"{pairs[-1][1]:.1f} ms", flush=True)
    finally:
        evict(lib)  # leave it as page faults leave it
        resident(env.python, f"import {module}")
    print(f"{lib.name} alone (a copy loaded by ctypes), page cache filled by:")
    for name, got in alone.items():
        print(summarize(name, got))
    print(f"import {module} (its environment), page cache filled by:")
    for name, got in imported.items():
        print(summarize(name, got))
    med = {k: statistics.median(g["RssFile"] for g in v) for k, v in imported.items()}
    anon = [g["RssAnon"] for v in imported.values() for g in v]
    print(f"read whole maps {med['read whole'] - med['faulted in']:+.0f} MiB of files against "
          f"faulted in; anonymous memory {min(anon)}-{max(anon)} MiB in every state")
    if pairs:
        ratio = statistics.median(w / f for f, w in pairs)
        slower = sum(w > f for f, w in pairs)
        print(f"training step, read whole against faulted in: median ratio {ratio:.3f}, "
              f"slower in {slower} of {len(pairs)} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
