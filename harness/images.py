"""`dnnbench image base|build`: a framework's container image from docker/Dockerfile, with
podman or docker, and the lookups a containerised sweep needs.

The tag carries the same key as the venv (the requirement files, the Horovod build files
and the Dockerfile), so an image matches exactly one environment definition. A built image
is also saved as an archive in the cache (keyed by that tag): a fresh engine store (a new
CI machine, a pruned host) loads it in seconds instead of rebuilding for minutes.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TextIO
from urllib.parse import urlparse

from frameworks.contract import SUPPORT
from frameworks.support import CPU_BASE
from harness.envs import (
    HOROVOD_FILES,
    Env,
    EnvError,
    cache_dir,
    requirements_file,
    wheel_cache,
    with_horovod,
)
from runners import container

REPO = Path(__file__).resolve().parent.parent
#: Base images, fully qualified (podman refuses ambiguous short names without a TTY). CUDA:
#: *devel* images (nvcc for Horovod's NCCL operations) on Ubuntu 22.04, whose universe has
#: the Python 3.11 every pinned requirement needs (numpy 1.23.5 for MXNet has no 3.12
#: build); MXNet 1.9.1 is built for CUDA 11.2, so its base is CUDA 11.8 (11.x compatible).
def default_base(framework: str, variant: str) -> str:
    """The CPU base, or the CUDA base the framework declares (its SUPPORT.cuda_base)."""
    return CPU_BASE if variant == "cpu" else SUPPORT[framework].cuda_base
DOCKERFILE = REPO / "docker" / "Dockerfile"  # one file; FRAMEWORK picks the framework
BASE_SCRIPT = REPO / "docker" / "base-image.sh"
#: pip settings forwarded to the build (build argument = PIP_<KEY>)
#: (cert: a host whose HTTPS goes through an inspecting proxy trusts its CA bundle only)
PIP_KEYS = ("index-url", "extra-index-url", "find-links", "constraint", "cert")


class ImageError(EnvError):
    """An image or engine is missing; the message names the command that fixes it."""


def check_framework(framework: str) -> None:
    if not (REPO / "frameworks" / framework / "requirements-cpu.txt").is_file():
        known = sorted(p.parent.name for p in (REPO / "frameworks").glob("*/requirements-cpu.txt"))
        raise ImageError(f"no image for framework {framework!r}; known: {', '.join(known)}")


def image_tag(framework: str, variant: str, horovod: bool | None = None) -> str:
    """`horovod` (default: with_horovod, as for venvs): whether Horovod is compiled in. An
    image without it (`image build --no-horovod`, 3 min less to build) is tagged
    `VARIANT-nohvd-KEY`, so the two never replace each other."""
    horovod = _compiles_horovod(framework, horovod)
    h = hashlib.sha256()
    check_framework(framework)
    for f in (requirements_file(framework, variant), *HOROVOD_FILES, DOCKERFILE,
              REPO / "docker" / "install.sh"):
        h.update(f.read_bytes())
    h.update(f"horovod={int(horovod)}".encode())
    kind = variant if horovod or not SUPPORT[framework].horovod else f"{variant}-nohvd"
    return f"localhost/dnnbench-{framework}:{kind}-{h.hexdigest()[:12]}"


def _compiles_horovod(framework: str, horovod: bool | None) -> bool:
    """Whether the image build compiles Horovod: asked for (default: with_horovod) and the
    framework has a binding."""
    return (with_horovod(framework) if horovod is None else horovod) and SUPPORT[
        framework].horovod


def base_tag() -> str:
    """The locally made Debian base (docker/base-image.sh), keyed by that script."""
    key = hashlib.sha256(BASE_SCRIPT.read_bytes()).hexdigest()[:12]
    return f"localhost/dnnbench-base:bookworm-{key}"


def engine(preferred: str = "auto") -> str:
    if preferred != "auto":
        if not shutil.which(preferred):
            raise ImageError(f"{preferred} is not installed")
        return preferred
    for name in ("podman", "docker"):
        if shutil.which(name):
            return name
    raise ImageError("neither podman nor docker is installed (Debian: apt-get install podman "
                     "runc; see docker/README.md)")


def engine_env(engine_name: str) -> dict[str, str]:
    return {**os.environ, **container.engine_env(engine_name)}


def _engine(engine_name: str, *args: str, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([engine_name, *args], env=engine_env(engine_name), text=True,
                          capture_output=capture)


def exists(tag: str, engine_name: str) -> bool:
    return _engine(engine_name, "image", "exists" if engine_name == "podman" else "inspect",
                   tag).returncode == 0


def pip_settings(python: str = sys.executable) -> dict[str, str]:
    """The pip settings in force on this host (config files and PIP_* variables), as pip
    itself reports them: key -> value, for the keys an image build needs."""
    proc = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                          text=True)
    out: dict[str, str] = {}
    # pip lists PIP_* variables (":env:") first, but they override every config file
    lines = sorted(proc.stdout.splitlines(), key=lambda line: line.startswith(":env:"))
    for line in lines:
        scoped, _, value = line.partition("=")
        key = scoped.rpartition(".")[2]
        if key in PIP_KEYS and value:
            out[key] = value.strip().strip("'\"")
    return out


def local_paths(settings: dict[str, str]) -> list[str]:
    """Local folders and files the pip settings name (plain paths and file:// URLs): an
    image build must see them at the same paths."""
    paths = set()
    for value in settings.values():
        for item in value.split():
            path = urlparse(item).path if item.startswith("file:") else item
            if path.startswith("/") and os.path.exists(path):
                # mount the index's folder itself, not just its simple/ page
                paths.add(str(Path(path).parent) if path.rstrip("/").endswith("/simple")
                          else path.rstrip("/"))
    return sorted(paths)


_CREDENTIALS = re.compile(r"(://)([^/@\s]+)@")


def has_credentials(value: str) -> bool:
    """A URL with a user (and often a password or token) before its host."""
    return bool(_CREDENTIALS.search(value))


def redact(text: str) -> str:
    """`text` with the credentials of every URL in it replaced by ***."""
    return _CREDENTIALS.sub(r"\1***@", text)


def secret_pip_conf(pip: dict[str, str]) -> str:
    """The pip settings that carry credentials, as a pip.conf: mounted into the build
    (podman `-v`, not stored in any layer), never a build argument (kept in the image's
    history and so in the cached archive)."""
    lines = ["[global]"] + [f"{k} = {v}" for k, v in pip.items() if has_credentials(v)]
    return "\n".join(lines) + "\n"


def build_command(framework: str, variant: str = "cpu", engine_name: str = "podman",
                  base_image: str | None = None,
                  pip: dict[str, str] | None = None, pip_conf: str | None = None,
                  horovod: bool | None = None) -> list[str]:
    """The image build. Settings with credentials go only into `pip_conf` (a file this
    function mounts as /etc/pip.conf), never into the command line."""
    check_framework(framework)
    tag = image_tag(framework, variant, horovod)
    base = base_image or default_base(framework, variant)
    cmd = [engine_name, "build", "--network", "host", "-f", str(DOCKERFILE.relative_to(REPO)),
           "--build-arg", f"FRAMEWORK={framework}", "--build-arg", f"BASE_IMAGE={base}",
           "--build-arg", f"VARIANT={variant}",
           "--build-arg", f"HOROVOD={int(_compiles_horovod(framework, horovod))}",
           "--label", f"dnnbench.base={base}"]
    pip = pip or {}
    secret = [k for k, v in pip.items() if has_credentials(v)]
    if secret and (engine_name != "podman" or not pip_conf):
        raise ImageError(f"pip setting(s) {', '.join(secret)} carry credentials: only a podman "
                         "build can take them without storing them in the image (a mounted "
                         "pip.conf); build with podman, or use a netrc/keyring on the host")
    for key in PIP_KEYS:
        if key in pip and key not in secret:
            cmd += ["--build-arg", f"PIP_{key.upper().replace('-', '_')}={pip[key]}"]
    if engine_name == "podman":  # docker build has no volumes: it reaches the index by network
        cmd += ["--format", "docker"]  # OCI images drop SHELL (pipefail in RUN)
        for path in local_paths(pip):
            cmd += ["-v", f"{path}:{path}:ro"]
        if _compiles_horovod(framework, horovod):
            # the Horovod wheel a venv (or an earlier image) compiled for the same key is
            # installed instead of compiling it again; one compiled here is kept for them
            wheels = wheel_cache()
            cmd += ["-v", f"{wheels}:{wheels}", "--build-arg", f"DNNBENCH_WHEELS={wheels}"]
        if secret:
            cmd += ["-v", f"{pip_conf}:/etc/pip.conf:ro"]
    return cmd + ["-t", tag, "."]


def archive_path(tag: str) -> Path:
    return cache_dir() / "images" / (tag.rpartition("/")[2].replace(":", "_") + ".tar")


def present(tag: str, engine_name: str, log=sys.stderr) -> bool:
    """In the engine's store, or loaded into it from the cache's archive."""
    if exists(tag, engine_name):
        return True
    archive = archive_path(tag)
    if not archive.is_file():
        return False
    print(f"loading {tag} from {archive} ...", file=log, flush=True)
    return (_engine(engine_name, "load", "-i", str(archive)).returncode == 0
            and exists(tag, engine_name))


def base_command(tag: str | None = None) -> list[str]:
    return ["bash", str(BASE_SCRIPT), tag or base_tag()]


#: `env setup --images` builds images in parallel threads: one debootstrap at a time
_BASE_LOCK = threading.Lock()


def ensure_base(engine_name: str, log=sys.stderr) -> str:
    """The local Debian base image, made with debootstrap the first time."""
    tag = base_tag()
    with _BASE_LOCK:
        if exists(tag, engine_name):
            return tag
        print(f"making base image {tag} (debootstrap, ~1 min) ...", file=log, flush=True)
        proc = subprocess.run(base_command(tag), env={**engine_env(engine_name),
                                                      "DNNBENCH_ENGINE": engine_name},
                              text=True, capture_output=True)
    if proc.returncode != 0:
        raise ImageError(f"base image failed: {proc.stderr.strip()[-2000:]}")
    return tag


def ensure(framework: str, variant: str = "cpu", engine_name: str = "podman",
           base_image: str | None = None, rebuild: bool = False, log=sys.stderr,
           horovod: bool | None = None, output: TextIO | None = None) -> str:
    """The image for this environment definition: already in the engine's store, loaded
    from the cache's archive, or built (then archived). Returns its tag. `horovod=False`
    skips compiling Horovod unless an image with it is already there (it serves too).
    `output`: where the build's own output goes (default: this process's stdout)."""
    if horovod is None:
        horovod = with_horovod(framework)
    tag = image_tag(framework, variant, horovod)
    if not horovod and not rebuild and present(image_tag(framework, variant), engine_name, log):
        tag = image_tag(framework, variant)
    if not rebuild and present(tag, engine_name, log):
        built_on = _engine(engine_name, "image", "inspect", "--format",
                           '{{index .Labels "dnnbench.base"}}', tag).stdout.strip()
        wanted = base_image or default_base(framework, variant)
        note = (f" (built on {built_on}, not {wanted}: add --rebuild to change the base)"
                if built_on and built_on != wanted else "")
        print(f"{tag} ready (built before){note}", file=log, flush=True)
        return tag
    archive = archive_path(tag)
    pip = pip_settings()
    with tempfile.TemporaryDirectory(prefix="dnnbench-pip-") as private:  # mode 700
        conf = Path(private) / "pip.conf"
        if any(has_credentials(v) for v in pip.values()):
            conf.write_text(secret_pip_conf(pip))
            conf.chmod(0o600)
        cmd = build_command(framework, variant, engine_name, base_image, pip, str(conf),
                            horovod)
        print(redact(" ".join(cmd)), file=log, flush=True)
        wheel_cache().mkdir(parents=True, exist_ok=True)  # a podman build mounts it
        where = "output above" if output is None else f"output in {output.name}"
        if subprocess.run(cmd, cwd=REPO, env=engine_env(engine_name), stdout=output,
                          stderr=output).returncode != 0:
            raise ImageError(f"building {tag} failed ({where})")
    archive.parent.mkdir(parents=True, exist_ok=True)
    tmp = archive.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    if _engine(engine_name, "save", "-o", str(tmp), tag).returncode == 0:
        tmp.rename(archive)
        # archives of older definitions of this image (same kind) only take space (GBs each)
        kind = tag.rpartition(":")[2].rpartition("-")[0]
        for old in archive.parent.glob(f"dnnbench-{framework}_{kind}-*.tar"):
            if old != archive and old.stem.rpartition("-")[0] == f"dnnbench-{framework}_{kind}":
                old.unlink()
    return tag


def build_for(env: Env, engine_name: str, echo=print) -> str:
    """The image of an environment `env setup --images` just made, from the local base: with
    Horovod exactly when the environment has it (the image installs the wheel the venv
    compiled, so it never compiles twice). Runs in a build slot of its own, so the build's
    output goes to a log file next to the image's archive rather than mixing with the
    other slot's."""
    horovod = env.info().get("horovod") is not None
    tag = image_tag(env.framework, env.variant, horovod)
    log_path = archive_path(tag).with_suffix(".log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    echo(f"the {env.framework} ({env.variant}) image{'' if horovod else ' without Horovod'}: "
         f"loading or building (log: {log_path}) ...")
    with open(log_path, "w") as out:
        base = ensure_base(engine_name, log=out)  # the first image: debootstrap, ~1 min
        tag = ensure(env.framework, env.variant, engine_name, base, log=out, horovod=horovod,
                     output=out)
    echo(f"{tag} ready in {time.monotonic() - t0:.1f} s")
    return tag


def find(framework: str, variant: str, engine_name: str, horovod: bool = False) -> str:
    """The built image a containerised run uses, or ImageError naming the command to run.
    The image with Horovod is preferred; one without (`image build --no-horovod`) serves
    every run but Horovod ones (`horovod`)."""
    tags = [image_tag(framework, variant)]
    if not horovod and SUPPORT[framework].horovod:
        tags.append(image_tag(framework, variant, horovod=False))
    for tag in tags:
        if present(tag, engine_name):
            return tag
    flag = " --cuda" if variant == "cuda" else ""
    if horovod and present(image_tag(framework, variant, horovod=False), engine_name):
        raise ImageError(f"the {framework} ({variant}) image was built without Horovod "
                         f"(image build --no-horovod); for strategy 'horovod' run: dnnbench "
                         f"image build {framework}{flag}")
    raise ImageError(f"no {engine_name} image {tags[0]} for the current {framework} "
                     f"({variant}) requirements; run: dnnbench image build {framework}{flag}")


def image_id(tag: str, engine_name: str) -> str | None:
    proc = _engine(engine_name, "image", "inspect", "--format", "{{.Id}}", tag)
    return proc.stdout.strip() or None if proc.returncode == 0 else None
