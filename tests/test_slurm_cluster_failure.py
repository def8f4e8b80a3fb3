"""`harness/slurm-cluster.sh up` that fails part-way stops the daemons it started.

A module of its own: tests/test_slurm.py keeps a cluster up for its whole module, and this
one needs the fixed ports free.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "harness" / "slurm-cluster.sh"


def _daemons_of(state: Path) -> list[str]:
    """Live (not zombie) munged, slurmctld and slurmd processes using this state folder."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state_field = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(state) in cmd and state_field != "Z" and "slurm-cluster.sh" not in cmd:
            found.append(f"{pid}: {cmd.strip()}")
    return found


@pytest.mark.slow
def test_an_up_that_fails_after_starting_daemons_stops_them(tmp_path):
    """Nodes that declare more CPUs than the machine has register as INVAL and never
    become idle, so `up` fails after munged, slurmctld and slurmd are running. It used to
    leave all three running (and holding the cluster's fixed ports); now it says why and
    stops them. Bad NODES or DNNBENCH_SLURM_CPUS are refused before anything starts."""
    if os.geteuid() != 0:
        pytest.skip("the local Slurm cluster runs its daemons as root")
    state = tmp_path / "slurm"
    env = {**os.environ, "DNNBENCH_SLURM_DIR": str(state), "DNNBENCH_SLURM_CPUS": "4096"}
    r = subprocess.run(["bash", str(SCRIPT), "up", "1"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "only 0 of 1 nodes became idle" in r.stderr and "Low CPUs" in r.stderr, r.stderr
    assert _daemons_of(state) == []
    assert not list((state / "run").glob("*.pid"))
    for bad, word in ((("up", "0"), "NODES=0"), (("up", "two"), "NODES=two")):
        r = subprocess.run(["bash", str(SCRIPT), *bad], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and word in r.stderr, r.stderr
    r = subprocess.run(["bash", str(SCRIPT), "up", "1"], capture_output=True, text=True,
                       env={**env, "DNNBENCH_SLURM_CPUS": "0"}, timeout=60)
    assert r.returncode == 2 and "DNNBENCH_SLURM_CPUS=0: a whole number >= 1" in r.stderr
    assert _daemons_of(state) == []
