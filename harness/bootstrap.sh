#!/usr/bin/env bash
# Create (or reuse) the harness's own environment for this checkout and print its path.
#
# Two layers, so that a fresh clone does not install the same packages again (a minute
# here, every clean-clone CI run): the packages of harness/requirements.txt live in a base
# environment keyed by that file and the Python version alone, shared by every checkout;
# each checkout gets a thin environment of its own, keyed by its base, setup.cfg and the
# checkout's path, holding only the project installed editable (two clones must not share
# that) and seeing the base's packages through a .pth file, with links to the base's
# binaries (ruff, hadolint). Environments of checkouts that no longer exist are pruned,
# and then any base that no checkout uses. It never holds a deep-learning framework:
# those live in the shared, requirement-keyed `dnnbench env setup FRAMEWORK` environments.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
PY=${PYTHON:-python3}
CACHE=${DNNBENCH_CACHE:-$HOME/.cache/dnnbench}
python_id=$("$PY" -c 'import platform; print(platform.python_version(), platform.machine())')
base_key=$({ cat harness/requirements.txt; echo "$python_id"; } | sha256sum | cut -c1-12)
base="$CACHE/envs/harness-base-$base_key"
key=$({ echo "$base_key"; cat setup.cfg; echo "$repo"; } | sha256sum | cut -c1-12)
venv="$CACHE/envs/harness-$key"
mkdir -p "$CACHE/envs"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
site_packages() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
(
  flock 9
  for old in "$CACHE"/envs/harness-*; do
    [ -f "$old/.repo" ] || continue
    owner=$(cat "$old/.repo")
    # gone checkouts, and this checkout's environments built from older requirements
    if [ ! -d "$owner" ] || { [ "$owner" = "$repo" ] && [ "$old" != "$venv" ]; }; then
      rm -rf "$old"
    fi
  done
  for old in "$CACHE"/envs/harness-base-*; do
    [ -d "$old" ] && [ "$old" != "$base" ] || continue
    grep -qxF "$old" "$CACHE"/envs/harness-*/.base 2>/dev/null || rm -rf "$old"
  done
  if [ ! -f "$base/.ready" ]; then
    echo "creating the harness's packages in $base ..." >&2
    rm -rf "$base"
    "$PY" -m venv "$base"
    quiet "$base/bin/python" -m pip install -q -r harness/requirements.txt >&2
    touch "$base/.ready"
  fi
  if [ ! -f "$venv/.ready" ]; then
    echo "creating the harness environment in $venv ..." >&2
    rm -rf "$venv"
    "$PY" -m venv --without-pip "$venv"
    site_packages "$base" > "$(site_packages "$venv")/_dnnbench_harness_base.pth"
    quiet "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >&2
    for exe in "$base"/bin/*; do
      name=$(basename "$exe")
      # the base's own binaries; its Python scripts would run the base's interpreter,
      # which cannot see this checkout (`python -m` runs them here)
      [ -e "$venv/bin/$name" ] || [ "$(head -c 2 "$exe")" = "#!" ] || ln -s "$exe" "$venv/bin/$name"
    done
    echo "$base" > "$venv/.base"
    echo "$repo" > "$venv/.repo"
    touch "$venv/.ready"
  fi
) 9>"$CACHE/envs/.harness.lock"
echo "$venv"
