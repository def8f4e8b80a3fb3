"""The harness: CLI, experiments, sweeps, results store, analysis and performance model.

It never imports a deep-learning framework: workers run in each framework's own
environment and talk to the harness through RunSpec JSON in and event lines out.
"""
