"""Performance model: α-β network costs, PS placement, overlap simulation, predictions.

Pure Python over the cost model (models/) and stored measurements; no framework import.
"""
