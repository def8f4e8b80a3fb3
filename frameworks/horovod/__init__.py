"""Horovod: how it is built into each framework's environment (build.sh) and launched."""
