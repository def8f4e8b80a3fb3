"""Performance model: α-β network costs, PS placement, overlap simulation, predictions.

Pure Python over the cost model (models/) and stored measurements; no framework import.
"""


class ModelInputError(ValueError):
    """An input the performance model has no data or rule for (an unknown link profile,
    device preset, algorithm, policy or strategy; no servers): the message names it and
    what is known."""
