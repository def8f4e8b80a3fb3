"""`dnnbench image build`: a framework's image from docker/Dockerfile, with podman or
docker.

The tag carries the same key as the venv (the requirement files, the Horovod build files
and the Dockerfile), so an image matches exactly one environment definition.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from harness.envs import HOROVOD_FILES, requirements_file

REPO = Path(__file__).resolve().parent.parent
DEFAULT_BASE = {"cpu": "python:3.11-slim-bookworm",
                "cuda": "nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04"}


class ImageError(RuntimeError):
    pass


DOCKERFILE = REPO / "docker" / "Dockerfile"  # one file; FRAMEWORK picks the framework


def check_framework(framework: str) -> None:
    if not (REPO / "frameworks" / framework / "requirements-cpu.txt").is_file():
        known = sorted(p.parent.name for p in (REPO / "frameworks").glob("*/requirements-cpu.txt"))
        raise ImageError(f"no image for framework {framework!r}; known: {', '.join(known)}")


def image_tag(framework: str, variant: str) -> str:
    h = hashlib.sha256()
    check_framework(framework)
    for f in (requirements_file(framework, variant), *HOROVOD_FILES, DOCKERFILE,
              REPO / "docker" / "install.sh"):
        h.update(f.read_bytes())
    return f"dnnbench-{framework}:{variant}-{h.hexdigest()[:12]}"


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


def build_command(framework: str, variant: str = "cpu", engine_name: str = "podman",
                  base_image: str | None = None) -> list[str]:
    check_framework(framework)
    return [engine_name, "build", "--network", "host", "-f",
            str(DOCKERFILE.relative_to(REPO)), "--build-arg", f"FRAMEWORK={framework}",
            "--build-arg", f"BASE_IMAGE={base_image or DEFAULT_BASE[variant]}",
            "--build-arg", f"VARIANT={variant}", "-t", image_tag(framework, variant), "."]
