"""`from dnnbench import results`: see harness/results.py for the frames and columns."""

from harness.results import (
    COLUMNS,
    Results,
    ResultsError,
    describe,
    intervals,
    load,
    scaling,
    verdicts,
)

__all__ = ["COLUMNS", "Results", "ResultsError", "describe", "intervals", "load", "scaling",
           "verdicts"]
