"""Faithfulness metrics, one module each; importing this package imports every module in it (in name order),
which registers each metric in `METRICS`. A new metric is a new file here and nothing else."""

import importlib
import pkgutil

from ..api import METRICS, Instance, Metric, VariantScores

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["METRICS", "Instance", "Metric", "VariantScores"]
