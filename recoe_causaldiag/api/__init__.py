"""The contracts of the package: records, instances, the engine protocol, metrics, tasks, registries, run specs
and per-pair score rows. Implementations depend on these, never on each other."""

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
