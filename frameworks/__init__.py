"""Framework adapters and the framework-neutral worker.

Importing this package (or `frameworks.<fw>` itself) never imports a deep-learning
framework: only `frameworks.<fw>.adapter`, loaded by the worker inside that framework's
environment, does.
"""
