"""MXNet 1.9 adapter (see adapter.py, imported only inside the mxnet environment)."""
