#!/usr/bin/env bash
# A minimal Debian base image made locally, for hosts that reach Debian's package mirror
# but no image registry: debootstrap a rootfs with Python 3, then `podman import` it.
#   docker/base-image.sh TAG [SUITE] [MIRROR]      (as root; SUITE: bookworm)
# Its Python is Debian's 3.11 (what python:3.11-slim-bookworm gives elsewhere), so the
# same wheels install. ~1 min with a nearby mirror.
set -euo pipefail
tag=${1:?usage: base-image.sh TAG [SUITE] [MIRROR]}
suite=${2:-bookworm}
mirror=${3:-http://deb.debian.org/debian}
engine=${DNNBENCH_ENGINE:-podman}
for tool in debootstrap "$engine"; do
  command -v "$tool" >/dev/null || { echo "base-image.sh: $tool is not installed (Debian: apt-get install $tool)" >&2; exit 1; }
done
work=$(mktemp -d /var/tmp/dnnbench-rootfs.XXXXXX)
trap 'rm -rf "$work"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
tar -C "$work/rootfs" -c . | "$engine" import --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
echo "$tag"
