#!/usr/bin/env bash
# Create (or reuse) the harness's own environment for this checkout and print its path.
# Keyed by harness/requirements.txt, setup.cfg (its package list), the Python version and
# this checkout's path (the project is installed editable, so two clones must not share
# one); venvs of checkouts
# that no longer exist are pruned. It never holds a deep-learning framework: those live
# in the shared, requirement-keyed `dnnbench env setup FRAMEWORK` environments.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd -P)
PY=${PYTHON:-python3}
CACHE=${DNNBENCH_CACHE:-$HOME/.cache/dnnbench}
key=$({ cat harness/requirements.txt setup.cfg; "$PY" -c 'import platform; print(platform.python_version(), platform.machine())'; echo "$repo"; } | sha256sum | cut -c1-12)
venv="$CACHE/envs/harness-$key"
mkdir -p "$CACHE/envs"
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
(
  flock 9
  for old in "$CACHE"/envs/harness-*; do
    [ -f "$old/.repo" ] || continue
    owner=$(cat "$old/.repo")
    # gone checkouts, and this checkout's venvs built from older requirements
    if [ ! -d "$owner" ] || { [ "$owner" = "$repo" ] && [ "$old" != "$venv" ]; }; then
      rm -rf "$old"
    fi
  done
  if [ ! -f "$venv/.ready" ]; then
    echo "creating the harness environment in $venv ..." >&2
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    quiet "$venv/bin/python" -m pip install -q -r harness/requirements.txt >&2
    quiet "$venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e . >&2
    echo "$repo" > "$venv/.repo"
    touch "$venv/.ready"
  fi
) 9>"$CACHE/envs/.harness.lock"
echo "$venv"
