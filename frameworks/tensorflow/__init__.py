"""TensorFlow 2 adapter (see adapter.py, imported only inside the tensorflow environment)."""
