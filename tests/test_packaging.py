"""The installed project: every package folder is in setup.cfg's list, and the public API
imports as `dnnbench`."""

import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for top in ("frameworks", "models", "runners", "harness", "reports")
             for p in (ROOT / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found - listed == set(), f"add these to [options] packages in setup.cfg: {found - listed}"
    assert "dnnbench" in listed


def test_public_api_imports_as_dnnbench(tmp_path):
    # from another folder: the installed package, not the checkout on sys.path
    code = ("from dnnbench import results; import harness.results as h; "
            "assert results.load is h.load; print(sorted(results.COLUMNS))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "trials" in out.stdout
