#!/usr/bin/env bash
# Install the system packages dnnbench's launchers and tests use (Debian/Ubuntu, as root),
# only those missing: idempotent and quick when everything is present.
#   Open MPI   mpirun launcher, mpi4py commbench, Horovod's MPI controller (Debian 12: 4.1.4)
#   cmake, g++ Horovod is compiled into each framework environment (dnnbench env setup)
#   Chromium   the report's browser test (headless); skipped with --runtime
#   Slurm      slurm-wlm + munge: the Slurm launcher's tests (harness/slurm-cluster.sh);
#              skipped with --runtime
#   Podman     podman + runc + debootstrap: container images and the container launcher's
#              tests (docker/; a local Debian base image); skipped with --runtime.
#              catatonit: the container launcher runs `podman run --init` (PID 1 in the
#              container forwards signals to the worker and reaps its loader processes);
#              Debian only recommends it, so --no-install-recommends alone leaves it out
set -euo pipefail
need=()
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpicc >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
if [ "${1:-}" != "--runtime" ]; then
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)  # tests: a local Slurm cluster
  command -v munged >/dev/null 2>&1 || need+=(munge)
  command -v podman >/dev/null 2>&1 || need+=(podman)
  command -v runc >/dev/null 2>&1 || need+=(runc)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  [ -x /usr/libexec/podman/catatonit ] || command -v catatonit >/dev/null 2>&1 || need+=(catatonit)
fi
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "dnnbench: missing system packages: ${need[*]}; install them (as root): apt-get install ${need[*]}" >&2
  exit 1
fi
echo "installing system packages: ${need[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
