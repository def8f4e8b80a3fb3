"""Per-framework virtual environments, cached outside the repository.

Frameworks cannot share one environment (MXNet needs numpy 1.23, TensorFlow numpy>=1.26),
and the harness must never import any of them, so each framework gets its own venv built
from the requirement files in `frameworks/<fw>/`. The venv's directory name carries a hash
of those files, the Python version and the machine type: a new clone or a repeat run
reuses it, a changed requirement file builds a new one. An install that did not finish
has no marker file and is rebuilt, never used.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from frameworks.contract import SUPPORT

VARIANTS = ("cpu", "cuda")
MARKER = "dnnbench-env.json"
FRAMEWORKS_DIR = Path(__file__).resolve().parent.parent / "frameworks"


class EnvError(RuntimeError):
    """An environment is missing or broken; the message names the command that fixes it."""


def cache_dir() -> Path:
    return Path(os.environ.get("DNNBENCH_CACHE", Path.home() / ".cache" / "dnnbench"))


def requirements_file(framework: str, variant: str) -> Path:
    if framework not in SUPPORT:
        raise EnvError(f"unknown framework {framework!r}; known: {', '.join(SUPPORT)}")
    if variant not in VARIANTS:
        raise EnvError(f"unknown environment variant {variant!r}; known: {', '.join(VARIANTS)}")
    return FRAMEWORKS_DIR / framework / f"requirements-{variant}.txt"


HOROVOD_DIR = FRAMEWORKS_DIR / "horovod"
#: Horovod is compiled against the installed framework, after the requirements, by this
#: script; its files are part of the environment's key.
HOROVOD_FILES = (HOROVOD_DIR / "requirements.txt", HOROVOD_DIR / "build.sh")


def with_horovod(framework: str) -> bool:
    """Horovod is built into the environments of frameworks that declare it (SUPPORT.horovod);
    DNNBENCH_HOROVOD=0 builds them without (3 min less each, no `horovod` strategy): a
    separate cache entry, so the two never mix."""
    return SUPPORT[framework].horovod and os.environ.get("DNNBENCH_HOROVOD", "1") != "0"


def env_key(framework: str, variant: str, horovod: bool | None = None) -> str:
    """The cache key: the requirement file, the Horovod build files when Horovod is built
    in (`horovod`, default: with_horovod), the Python version and the machine type."""
    if horovod is None:
        horovod = with_horovod(framework)
    h = hashlib.sha256()
    h.update(requirements_file(framework, variant).read_bytes())
    if horovod:
        for f in HOROVOD_FILES:
            h.update(f.read_bytes())
    h.update(f"{platform.python_version()} {platform.machine()}".encode())
    return h.hexdigest()[:12]


@dataclass(frozen=True)
class Env:
    framework: str
    variant: str
    path: Path

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def info(self) -> dict:
        return json.loads((self.path / MARKER).read_text())


def env_path(framework: str, variant: str, horovod: bool | None = None) -> Path:
    return cache_dir() / "envs" / f"{framework}-{variant}-{env_key(framework, variant, horovod)}"


def _ready(path: Path) -> bool:
    return (path / MARKER).is_file()


def find(framework: str, variant: str = "cpu", horovod: bool = False) -> Env:
    """The ready environment for these requirement files, or EnvError naming the fix.

    The build with Horovod is preferred; one without it (`env setup --no-horovod`, what
    `make demo` builds) serves every run except Horovod ones (`horovod`)."""
    paths = [env_path(framework, variant)]
    if not horovod and with_horovod(framework):
        paths.append(env_path(framework, variant, horovod=False))
    for path in paths:
        if _ready(path):
            return Env(framework, variant, path)
    flag = "" if variant == "cpu" else f" --variant {variant}"
    if horovod and _ready(env_path(framework, variant, horovod=False)):
        raise EnvError(f"the {framework} ({variant}) environment was built without Horovod "
                       f"(env setup --no-horovod, as make demo does); for strategy "
                       f"'horovod' run: dnnbench env setup {framework}{flag}")
    raise EnvError(f"the {framework} ({variant}) environment is not set up for the current "
                   f"requirements; run: dnnbench env setup {framework}{flag}")


def wheel_cache() -> Path:
    """Compiled Horovod wheels, shared by the venvs and the podman image builds
    (frameworks/horovod/build.sh keys each by everything its binary depends on)."""
    return cache_dir() / "wheels"


def _run(cmd: list[str], log, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=None if env is None else {**os.environ, **env})
    log.write(proc.stdout)
    if proc.returncode:
        tail = "\n".join(proc.stdout.strip().splitlines()[-15:])
        raise EnvError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")


def setup(framework: str, variant: str = "cpu", force: bool = False,
          echo=print, horovod: bool = True) -> Env:
    """Create (or reuse) the environment; safe to run concurrently and after a crash.
    `horovod=False` skips the Horovod build (3 minutes per framework) unless a build with
    it is already cached, which is then reused."""
    req = requirements_file(framework, variant)
    build_horovod = horovod and with_horovod(framework)
    if not build_horovod and not force and _ready(env_path(framework, variant)):
        path = env_path(framework, variant)
        echo(f"{framework} ({variant}) environment ready: {path}")
        return Env(framework, variant, path)
    path = env_path(framework, variant, build_horovod)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / MARKER).is_file() and not force:
            echo(f"{framework} ({variant}) environment ready: {path}")
            return Env(framework, variant, path)
        if path.exists():
            shutil.rmtree(path)
        echo(f"creating the {framework} ({variant}) environment in {path} from {req.name} ...")
        t0 = time.monotonic()
        log_path = path.parent / f"{path.name}.log"
        with open(log_path, "w") as log:
            try:
                _run([sys.executable, "-m", "venv", str(path)], log)
                py = str(path / "bin" / "python")
                _run([py, "-m", "pip", "install", "--upgrade", "pip"], log)
                _run([py, "-m", "pip", "install", "-r", str(req)], log)
                if build_horovod:
                    echo(f"building Horovod for {framework} (a few minutes, cached after) ...")
                    _run([py, "-m", "pip", "install", "-r", str(HOROVOD_FILES[0])], log)
                    _run(["bash", str(HOROVOD_FILES[1]), framework, py, variant], log,
                         {"DNNBENCH_WHEELS": str(wheel_cache())})
                module = SUPPORT[framework].import_name
                probe = subprocess.run(
                    [py, "-c", f"import {module}, json, sys, importlib.util as u; "
                               f"h = u.find_spec('horovod'); print(json.dumps("
                               f"{{'version': {module}.__version__, "
                               "'horovod': __import__('horovod').__version__ if h else None, "
                               "'python': sys.version.split()[0]}))"],
                    capture_output=True, text=True)
                if probe.returncode:
                    raise EnvError(f"{module} does not import in the new environment: "
                                   f"{probe.stderr.strip().splitlines()[-1:]}")
                versions = json.loads(probe.stdout)
                freeze = subprocess.run([py, "-m", "pip", "freeze"], capture_output=True,
                                        text=True).stdout.split()
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                echo(f"install log: {log_path}")
                raise
        info = {"framework": framework, "variant": variant, "key": path.name.rsplit("-", 1)[1],
                "requirements": str(req), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "seconds": round(time.monotonic() - t0, 1), **versions, "packages": freeze}
        (path / MARKER).write_text(json.dumps(info, indent=1))
        echo(f"{framework} ({variant}) environment ready in {info['seconds']} s: "
             f"{module} {versions['version']}")
        return Env(framework, variant, path)


def setup_many(frameworks: list[str], variant: str, horovod: dict[str, bool],
               force: bool = False, jobs: int = 1, echo=print,
               then: Callable[[Env], object] | None = None) -> list[Env]:
    """Every environment asked for, `jobs` at a time. A Horovod compile uses every core
    while a plain install mostly waits on unpacking wheels, so the compiles start first and
    the installs overlap them. `then` (a container image build) runs on each environment
    in its slot as soon as it is ready: the image of an environment without a compile fills
    the other slot while a compile runs. Every build runs to its end; the failures are
    raised together afterwards."""
    from concurrent.futures import ThreadPoolExecutor

    def one(fw: str) -> Env:
        env = setup(fw, variant, force, echo, horovod[fw])
        if then is not None:
            then(env)
        return env

    order = sorted(frameworks, key=lambda fw: not (horovod[fw] and with_horovod(fw)))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {fw: pool.submit(one, fw) for fw in order}
    failed = {fw: f.exception() for fw, f in futures.items() if f.exception() is not None}
    if failed:
        if len(failed) == 1:
            raise next(iter(failed.values()))
        raise EnvError("\n".join(f"{fw}: {exc}" for fw, exc in failed.items()))
    return [futures[fw].result() for fw in frameworks]


def installed() -> list[dict]:
    """Every finished environment in the cache, marking those the current files select."""
    rows = []
    root = cache_dir() / "envs"
    if not root.is_dir():
        return rows
    for marker in sorted(root.glob(f"*/{MARKER}")):
        info = json.loads(marker.read_text())
        try:
            current = marker.parent in (env_path(info["framework"], info["variant"], hvd)
                                        for hvd in (True, False))
        except EnvError:
            current = False
        rows.append({"framework": info["framework"], "variant": info["variant"],
                     "version": info.get("version", "?"), "python": info.get("python", "?"),
                     "current": current, "path": str(marker.parent)})
    return rows
