#!/usr/bin/env bash
# Inside an image build: the same environment `dnnbench env setup FRAMEWORK` makes (the
# framework's pinned requirements, then Horovod compiled against it), at /opt/venv.
#   docker/install.sh FRAMEWORK VARIANT [PYTHON]     (VARIANT: cpu | cuda; PYTHON: python3.11)
set -euo pipefail
fw=$1
variant=${2:-cpu}
python=${3:-python3.11}
# Build arguments the builder did not get arrive empty: an empty PIP_* would override pip's
# own defaults, so only the ones with a value stay.
for v in PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_CONSTRAINT PIP_CERT; do
  [ -n "${!v:-}" ] || unset "$v"
done
"$python" -m venv /opt/venv
/opt/venv/bin/python -m pip install --upgrade pip
/opt/venv/bin/python -m pip install -r "/opt/dnnbench/frameworks/$fw/requirements-$variant.txt"
if [ "${DNNBENCH_HOROVOD:-1}" != 0 ]; then
  /opt/venv/bin/python -m pip install -r /opt/dnnbench/frameworks/horovod/requirements.txt
  bash /opt/dnnbench/frameworks/horovod/build.sh "$fw" /opt/venv/bin/python "$variant"
fi
