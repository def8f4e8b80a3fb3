"""harness/bootstrap.sh: one shared base of the harness's packages, a thin environment per
checkout (the project installed editable), and nothing left behind by checkouts that are
gone. Real clones of this repository, real venvs and pip; the base is this session's own
(linked into a private cache), so the test installs no package and runs in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BASE = Path(sys.prefix, ".base")


def bootstrap(checkout: Path, cache: Path) -> Path:
    out = subprocess.run([str(checkout / "harness" / "bootstrap.sh")], capture_output=True,
                         text=True, check=True, env={**os.environ, "DNNBENCH_CACHE": str(cache)})
    return Path(out.stdout.strip())


@pytest.mark.skipif(not BASE.is_file(), reason="run from an environment bootstrap.sh made")
def test_checkouts_share_one_base_and_gone_ones_are_pruned(tmp_path):
    base = Path(BASE.read_text().strip())
    cache = tmp_path / "cache"
    (cache / "envs").mkdir(parents=True)
    (cache / "envs" / base.name).symlink_to(base)  # this session's packages, not reinstalled
    stale = cache / "envs" / "harness-base-000000000000"  # requirements nobody uses any more
    stale.mkdir()
    clones = [tmp_path / "one", tmp_path / "two"]
    for c in clones:  # clones of the last commit, with the bootstrap.sh under test
        subprocess.run(["git", "clone", "-q", str(REPO), str(c)], check=True)
        (c / "harness" / "bootstrap.sh").write_bytes((REPO / "harness" / "bootstrap.sh").read_bytes())

    envs = [bootstrap(c, cache) for c in clones]
    assert envs[0] != envs[1]  # the project is installed editable: one env per checkout
    assert not stale.exists()
    assert sorted(p.name for p in (cache / "envs").glob("harness-base-*")) == [base.name]
    for c, env in zip(clones, envs):
        assert (env / ".base").read_text().strip() == str(cache / "envs" / base.name)
        found = subprocess.run(
            [str(env / "bin" / "python"), "-c",
             "import harness, pandas, jinja2; print(harness.__file__)"],
            capture_output=True, text=True, check=True, cwd=tmp_path).stdout.strip()
        assert found == str(c / "harness" / "__init__.py")  # by its editable install
        for tool in ("ruff", "hadolint"):  # the base's binaries, linked
            subprocess.run([str(env / "bin" / tool), "--version"], check=True,
                           capture_output=True)
        assert not (env / "bin" / "pytest").exists()  # its scripts run the base's Python
    assert bootstrap(clones[0], cache) == envs[0]  # reused

    subprocess.run(["rm", "-rf", str(clones[0])], check=True)
    assert bootstrap(clones[1], cache) == envs[1]
    assert not envs[0].exists()  # the gone checkout's env, pruned by the next bootstrap
    assert (cache / "envs" / base.name).exists()  # the base still has a user
