"""Faithfulness metrics, one module each; importing this package imports every module in it (in name order),
which registers each metric in `METRICS`. A new metric is a new file here and nothing else."""

import importlib
import pkgutil

from ..api import METRICS, Instance, Metric, VariantScores

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

LEGACY_NAMES = {"random": "random_baseline"}
"""Former metric names that results files may hold, and the metric each now names."""
for _old, _name in LEGACY_NAMES.items():
    METRICS.alias(_old, _name)

__all__ = ["METRICS", "Instance", "Metric", "VariantScores"]
