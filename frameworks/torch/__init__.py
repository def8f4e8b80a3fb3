"""PyTorch adapter (see adapter.py, imported only inside the torch environment)."""
