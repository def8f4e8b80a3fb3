"""The host half of the environment manifest (workers add framework and device facts)."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 0


def _git_commit() -> str:
    if not shutil.which("git"):
        return "unknown"
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
                         capture_output=True, text=True)
    if out.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _nvidia_smi() -> dict:
    if not shutil.which("nvidia-smi"):
        return {}
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"], capture_output=True, text=True)
    if out.returncode or not out.stdout.strip():
        return {}
    rows = [r.split(", ") for r in out.stdout.strip().splitlines()]
    return {"gpus": [r[0] for r in rows], "gpu_driver": rows[0][1]}


def _mpi_version() -> str:
    if not shutil.which("mpirun"):
        return "none"
    out = subprocess.run(["mpirun", "--version"], capture_output=True, text=True)
    first = (out.stdout or out.stderr).strip().splitlines()
    return first[0] if first else "unknown"


def memory_policy(sys_root: Path = Path("/sys")) -> dict:
    """The kernel's settings that decide how much of a framework's libraries a process
    maps and keeps: transparent huge pages, and the DAMON schemes running (their actions:
    a "pageout" scheme evicts cold pages). On one VM every MXNet process held 76 MiB more
    resident in the hour after its environment was built than later, the library's pages
    cached whole and then paged out (bench/page_cache_rss.py), so two machines' memory
    numbers compare only with these beside them. Unreadable settings are left out."""
    out: dict = {}
    mm = sys_root / "kernel" / "mm"
    for key, name in (("thp", "enabled"), ("thp_defrag", "defrag")):
        try:
            text = (mm / "transparent_hugepage" / name).read_text()
        except OSError:
            continue
        chosen = [w[1:-1] for w in text.split() if w.startswith("[") and w.endswith("]")]
        if chosen:
            out[key] = chosen[0]
    kdamonds = mm / "damon" / "admin" / "kdamonds"
    if kdamonds.is_dir():
        actions = []
        for k in sorted(kdamonds.iterdir()):
            try:
                if (k / "state").read_text().strip() != "on":
                    continue
                actions += [a.read_text().strip()
                            for a in sorted(k.glob("contexts/*/schemes/*/action"))]
            except OSError:
                continue
        out["damon_schemes"] = actions
    return out


@lru_cache(maxsize=1)
def host_manifest() -> dict:
    return {"host": socket.gethostname(), "os": platform.platform(),
            "cpu": _cpu_model(), "cores": os.cpu_count() or 1,
            "memory_bytes": _memory_bytes(), "harness_python": platform.python_version(),
            "dnnbench_commit": _git_commit(), "mpi": _mpi_version(),
            "memory_policy": memory_policy(), **_nvidia_smi()}
