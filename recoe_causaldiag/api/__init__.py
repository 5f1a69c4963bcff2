"""The contracts of the package: records, instances, the engine protocol, metrics, tasks, registries, run specs
and per-pair score rows. Implementations depend on these, never on each other."""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import Encoded, Engine, LabelRequest
    from .instance import Counterfactual, Instance, VariantScores
    from .metric import METRICS, Metric, metric_registry, register_metric
    from .records import FEATURES, PairRecord, RecordError, Rewrite, metadata_json, validate_record, validate_records
    from .registry import Registry, UnknownNameError
    from .rows import PairScoreRow, json_number, number_from_json, without_nans
    from .run_spec import EDITORS, EXPLANATION_SOURCES, PRECISIONS, DatasetIdentity, ModelIdentity, RunSpec
    from .task import (
        DATASETS,
        TASKS,
        CounterfactualHook,
        DatasetSpec,
        TaskSpec,
        TokenCounter,
        dataset_registry,
        register_dataset,
        symmetric_counterfactual,
        task_registry,
    )

_EXPORTS = {
    "Encoded": "engine",
    "Engine": "engine",
    "LabelRequest": "engine",
    "Counterfactual": "instance",
    "Instance": "instance",
    "VariantScores": "instance",
    "METRICS": "metric",
    "Metric": "metric",
    "metric_registry": "metric",
    "register_metric": "metric",
    "FEATURES": "records",
    "PairRecord": "records",
    "RecordError": "records",
    "Rewrite": "records",
    "metadata_json": "records",
    "validate_record": "records",
    "validate_records": "records",
    "Registry": "registry",
    "UnknownNameError": "registry",
    "PairScoreRow": "rows",
    "json_number": "rows",
    "number_from_json": "rows",
    "without_nans": "rows",
    "EDITORS": "run_spec",
    "EXPLANATION_SOURCES": "run_spec",
    "PRECISIONS": "run_spec",
    "DatasetIdentity": "run_spec",
    "ModelIdentity": "run_spec",
    "RunSpec": "run_spec",
    "DATASETS": "task",
    "TASKS": "task",
    "CounterfactualHook": "task",
    "DatasetSpec": "task",
    "TaskSpec": "task",
    "TokenCounter": "task",
    "dataset_registry": "task",
    "register_dataset": "task",
    "symmetric_counterfactual": "task",
    "task_registry": "task",
}
"""Where each name of the contract is defined: a module is imported on first use of one of its names, so that
importing one light module (the registry, the CLI's errors) costs nothing of the rest (records need `datasets`)."""

__all__ = [
    "DATASETS",
    "EDITORS",
    "EXPLANATION_SOURCES",
    "FEATURES",
    "METRICS",
    "PRECISIONS",
    "TASKS",
    "Counterfactual",
    "CounterfactualHook",
    "DatasetIdentity",
    "DatasetSpec",
    "Encoded",
    "Engine",
    "Instance",
    "LabelRequest",
    "Metric",
    "ModelIdentity",
    "PairRecord",
    "PairScoreRow",
    "RecordError",
    "Registry",
    "Rewrite",
    "RunSpec",
    "TaskSpec",
    "TokenCounter",
    "UnknownNameError",
    "VariantScores",
    "dataset_registry",
    "json_number",
    "metadata_json",
    "metric_registry",
    "number_from_json",
    "register_dataset",
    "register_metric",
    "symmetric_counterfactual",
    "task_registry",
    "validate_record",
    "validate_records",
    "without_nans",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
