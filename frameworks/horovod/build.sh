#!/usr/bin/env bash
# Build Horovod 0.28.1 (the last release) from its sdist into one framework's environment,
# with gloo and MPI controllers and only that framework's extension.
#   frameworks/horovod/build.sh FRAMEWORK PYTHON [cpu|cuda]
# DNNBENCH_WHEELS=DIR: a wheel cache shared by the venvs and the image builds (`dnnbench env
# setup` and podman image builds pass it). The compiled wheel is kept under a key of
# everything its binary depends on (this script, the environment's packages, the Python
# ABI, OS, compiler, MPI, CUDA); an environment with the same key installs it instead of
# compiling again (3 minutes each on 2 cores). Without it, every build compiles.
# Called by `dnnbench env setup` after the framework's requirements are installed (the
# build compiles against the installed framework, so it cannot be a plain requirement).
# The patches are the verified minimum for the pinned framework versions (DESIGN.md §9):
#   torch 2.13:  C++17 in both CMakeLists (one alone fails to link: duplicate gloo symbol)
#   TF 2.21:     drop xla_mpi_ops.cc (GPU-only content; its headers moved in TF 2.21)
#   MXNet 1.9.1: none
set -euo pipefail
fw=$1
py=$2
variant=${3:-cpu}
version=0.28.1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip download -q --no-deps --no-binary :all: "horovod==$version" -d "$work" \
  2> >(grep -v "is ignored: it is neither" >&2)
tar -xzf "$work/horovod-$version.tar.gz" -C "$work"
src="$work/horovod-$version"
# No debug info: upstream's RelWithDebInfo build is -O3 -g, and the -g alone made the torch
# compile 28% longer here (176 and 182 s against 138 and 133; 2026-12-06, 2 cores) and its
# wheel 17x larger (20 MB against 1.2, copied into every image). GCC's -g does not change
# the generated code, and no one debugs Horovod from a benchmark's wheel.
sed -i '/string(REPLACE "-O2" "-O3" CMAKE_\(C\|CXX\)_FLAGS_RELWITHDEBINFO/{p;s/"-O2" "-O3"/"-g" ""/}' \
  "$src/CMakeLists.txt"
grep -q 'REPLACE "-g" "" CMAKE_CXX_FLAGS_RELWITHDEBINFO' "$src/CMakeLists.txt"
export HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_CPU_OPERATIONS=gloo
export HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1
case "$fw" in
  torch)
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' \
      "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
    grep -q 'CMAKE_CXX_STANDARD 17' "$src/horovod/torch/CMakeLists.txt"
    unset HOROVOD_WITHOUT_PYTORCH; export HOROVOD_WITH_PYTORCH=1 ;;
  tensorflow)
    sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
    unset HOROVOD_WITHOUT_TENSORFLOW; export HOROVOD_WITH_TENSORFLOW=1 ;;
  mxnet)
    unset HOROVOD_WITHOUT_MXNET; export HOROVOD_WITH_MXNET=1 ;;
  *) echo "build.sh: unknown framework $fw" >&2; exit 2 ;;
esac
# GPU collectives only for the CUDA environment (a stray nvcc on a CPU host must not
# switch them on: the CUDA runtime libraries would be missing at build time).
if [ "$variant" = cuda ]; then
  export HOROVOD_GPU_OPERATIONS=${HOROVOD_GPU_OPERATIONS:-NCCL}
else
  unset HOROVOD_GPU_OPERATIONS HOROVOD_GPU_ALLREDUCE HOROVOD_GPU_BROADCAST HOROVOD_GPU
fi
export MAKEFLAGS="-j$(nproc)"
# What the compiled binary depends on. The Python ABI (cp311), not its patch release: pip
# itself treats a cp311 wheel as fit for every 3.11.x. Package pins without Horovod itself.
abi_key() {
  cat "$0"
  echo "$fw $variant $version"
  "$py" -c 'import sys, sysconfig; print(sys.implementation.cache_tag, sysconfig.get_config_var("SOABI"), sysconfig.get_platform())'
  "$py" -m pip freeze 2>/dev/null | grep -vi '^horovod' | sort
  grep -E '^(ID|VERSION_ID)=' /etc/os-release 2>/dev/null || true
  g++ -dumpfullversion 2>/dev/null || true
  mpicc --showme:version 2>/dev/null || true
  env | grep -E '^HOROVOD_' | sort
  if [ "$variant" = cuda ]; then nvcc --version 2>/dev/null | tail -1 || true; fi
}
cached=""
if [ -n "${DNNBENCH_WHEELS:-}" ]; then
  key=$(abi_key | sha256sum | cut -c1-16)
  cached="$DNNBENCH_WHEELS/horovod-$version-$fw-$key"
fi
if [ -n "$cached" ] && ls "$cached"/horovod-*.whl >/dev/null 2>&1; then
  echo "horovod: the cached wheel $cached (compiled before for the same key)"
else
  "$py" -m pip wheel -q --no-build-isolation --no-deps "$src" -w "$work/wheel" \
    2> >(grep -v "is ignored: it is neither" >&2)
  if [ -n "$cached" ]; then  # a cache that cannot be written only costs the next build
    { mkdir -p "$DNNBENCH_WHEELS" && tmp=$(mktemp -d "$DNNBENCH_WHEELS/.tmp.XXXXXX") \
      && cp "$work"/wheel/horovod-*.whl "$tmp"/ && mv -T "$tmp" "$cached"; } \
      || { echo "horovod: could not cache the wheel in $DNNBENCH_WHEELS" >&2
           [ -z "${tmp:-}" ] || rm -rf "$tmp"; }
  fi
fi
# from the cache when it holds it: every environment of one key then records one source
if [ -n "$cached" ] && ls "$cached"/horovod-*.whl >/dev/null 2>&1; then
  "$py" -m pip install -q --no-deps "$cached"/horovod-*.whl
else
  "$py" -m pip install -q --no-deps "$work"/wheel/horovod-*.whl
fi
"$py" -c "import horovod, horovod.common.util as u; print('horovod', horovod.__version__, \
'gloo' if u.gloo_built() else '', 'mpi' if u.mpi_built() else '')"
