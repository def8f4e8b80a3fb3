#!/usr/bin/env bash
# Inside an image build: the same environment `dnnbench env setup FRAMEWORK` makes (the
# framework's pinned requirements, then Horovod compiled against it), at /opt/venv.
#   docker/install.sh FRAMEWORK VARIANT        (VARIANT: cpu | cuda)
set -euo pipefail
fw=$1
variant=${2:-cpu}
python3 -m venv /opt/venv
/opt/venv/bin/python -m pip install --upgrade pip
/opt/venv/bin/python -m pip install -r "/opt/dnnbench/frameworks/$fw/requirements-$variant.txt"
if [ "${DNNBENCH_HOROVOD:-1}" != 0 ]; then
  /opt/venv/bin/python -m pip install -r /opt/dnnbench/frameworks/horovod/requirements.txt
  bash /opt/dnnbench/frameworks/horovod/build.sh "$fw" /opt/venv/bin/python "$variant"
fi
