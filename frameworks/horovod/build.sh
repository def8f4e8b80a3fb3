#!/usr/bin/env bash
# Build Horovod 0.28.1 (the last release) from its sdist into one framework's environment,
# with gloo and MPI controllers and only that framework's extension.
#   frameworks/horovod/build.sh FRAMEWORK PYTHON [cpu|cuda]
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
"$py" -m pip install -q --no-build-isolation --no-deps "$src" \
  2> >(grep -v "is ignored: it is neither" >&2)
"$py" -c "import horovod, horovod.common.util as u; print('horovod', horovod.__version__, \
'gloo' if u.gloo_built() else '', 'mpi' if u.mpi_built() else '')"
