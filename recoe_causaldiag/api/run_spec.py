"""The run specification: everything that determines a diagnosticity run's numbers. A spec is first what was
asked for (model, revision, precision, tasks, metrics and their options, editor, explanations, seed, ...); once
the run has loaded its model and datasets it is resolved (pinned) to what ran: the model's identity (resolved
revision, dtype, device), each task's dataset version and MANIFEST hash, and the library version. The resolved spec
is written into every results file, and `RunSpec.from_dict` of it reruns the same job exactly (a pinned spec refuses
to run on other weights or other data)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from .metric import metric_registry
from .options import check_options
from .registry import UnknownNameError
from .task import task_registry

log = logging.getLogger(__name__)

EDITORS = ("ice", "rome", "memit")
"""How the edits reach the model: told in context (ICE) or written into the weights (ROME, MEMIT; `editors`)."""
EXPLANATION_SOURCES = ("synthetic", "generated")
PRECISIONS = ("auto", "float32", "float16", "bfloat16")
"""`auto`: bfloat16 on CUDA, float32 otherwise."""


@dataclass(frozen=True)
class ModelIdentity:
    """The model that ran, as loaded. `revision` is resolved: for a packaged model its pip package's version and
    its GGUF file's sha256 (`package==version@sha256:...`), for a hub model the commit, for a local folder its
    resolved path."""

    name: str
    revision: str
    dtype: str
    device: str
    parameters: int | None = None
    """How many parameters the loaded model has (None in results files before schema 1.6)."""

    def same_model(self, loaded: ModelIdentity) -> bool:
        """Whether `loaded` is this model, as loaded: every field equal, the parameter count where this records
        one."""
        return replace(self, parameters=loaded.parameters if self.parameters is None else self.parameters) == loaded


@dataclass(frozen=True)
class DatasetIdentity:
    """The data a task's pairs came from: its dataset's version and the sha256 of the dataset's MANIFEST.json (which
    holds the sha256 of every file of the dataset)."""

    task: str
    version: str
    manifest_sha256: str


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's numbers; its resolved form is written into every results file."""

    model: str
    tasks: tuple[str, ...]
    metrics: tuple[str, ...]
    limit: int | None = None
    editor: str = "ice"
    explanations: str = "synthetic"
    seed: int = 0
    batch_size: int = 32
    n_resamples: int = 2000
    max_explanation_tokens: int = 100
    metric_options: tuple[tuple[str, str, Any], ...] = ()
    metric_defaults: tuple[tuple[str, str, Any], ...] = ()
    """Every other constructor option of the run's metrics at the value it defaulted to when the run started, so a
    rerun scores with the budgets that ran even where a later version changed a default (`with_metric_defaults`)."""
    swap: bool = True
    """Also score every metric with the roles swapped (the contrast model evaluated) where the task allows it."""
    editor_options: tuple[tuple[str, Any], ...] = ()
    """A weight editor's settings (`editors.editing.editor_options`): layer(s), value search, key statistics."""
    drop_failed_edits: bool = False
    """Leave out of the metrics and controls every pair whose weight edit failed efficacy (it is counted either way)."""
    revision: str | None = None
    precision: str = "auto"
    device: str | None = None
    model_identity: ModelIdentity | None = None
    datasets: tuple[DatasetIdentity, ...] = ()
    package_version: str | None = None
    editor_statistics: tuple[dict[str, Any], ...] = ()
    """The key statistics a weight editor used, as their cache records them (model, parameter, corpus, tokens)."""
    editor_settings: dict[str, Any] | None = None
    """The settings a weight editor ran with: its options over the architecture's defaults (layers, value search),
    and where those defaults come from."""

    def __post_init__(self) -> None:
        for name in ("metric_options", "metric_defaults", "editor_options"):  # held as a results file reads back
            object.__setattr__(self, name, _tuples(getattr(self, name)))
        tasks, metrics = task_registry(), metric_registry()
        for task in self.tasks:
            tasks.get(task)
        for metric in self.metrics:
            metrics.get(metric)
        for metric, key, _ in self.metric_options + self.metric_defaults:
            if metric not in self.metrics:
                raise ValueError(f"option {metric}.{key} names a metric that this run does not compute")
            parameters = inspect.signature(metrics.get(metric)).parameters
            if key not in parameters:
                raise ValueError(f"metric {metric} has no option '{key}' (options: {', '.join(parameters) or 'none'})")
        for metric in dict.fromkeys(name for name, _, _ in self.metric_options + self.metric_defaults):
            check_options(f"metric {metric}", metrics.get(metric), self.options_for(metric))
            try:
                metrics.get(metric)(**self.options_for(metric))
            except TypeError as err:
                raise ValueError(f"bad option for metric {metric}: {err}") from err
        if self.editor not in EDITORS:
            raise UnknownNameError("editor", self.editor, list(EDITORS))
        if self.editor == "ice" and (self.editor_options or self.drop_failed_edits):
            raise ValueError("editor options and dropping failed edits apply to a weight editor (rome, memit)")
        if self.editor_options:
            from ..editors.editing import editor_options

            editor_options(self.editor, self.editor_options)
        if self.explanations not in EXPLANATION_SOURCES:
            raise UnknownNameError("explanation source", self.explanations, list(EXPLANATION_SOURCES))
        if self.precision not in PRECISIONS:
            raise UnknownNameError("precision", self.precision, list(PRECISIONS))
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")

    def options_for(self, metric: str) -> dict[str, Any]:
        """Keyword arguments of `metric`'s constructor in this run (sample budgets, helper models, ...): the options
        given, over the recorded defaults."""
        return {key: value for name, key, value in self.metric_defaults + self.metric_options if name == metric}

    def given_options_for(self, metric: str) -> dict[str, Any]:
        """The options this run was given for `metric` (without the defaults it recorded)."""
        return {key: value for name, key, value in self.metric_options if name == metric}

    def with_metric_defaults(self) -> RunSpec:
        """This spec with every constructor option of its metrics that it neither gives nor records at its current
        default, so that the results file holds the budgets that ran (a recorded default is kept: a rerun of an old
        results file scores as it did, whatever the defaults are now)."""
        metrics = metric_registry()
        added = tuple(
            (metric, key, _tuples(parameter.default))
            for metric in self.metrics
            for key, parameter in inspect.signature(metrics.get(metric)).parameters.items()
            if parameter.default is not inspect.Parameter.empty and key not in self.options_for(metric)
        )
        return replace(self, metric_defaults=self.metric_defaults + added) if added else self

    def with_helper_models(self, helper: str) -> RunSpec:
        """This spec with `helper` as the serving model (simulator, helper LM: the metric's `helper_option`) of
        every metric whose options do not name one, so that the spec a results file records names the model that
        served and reruns with it."""
        metrics = metric_registry()
        added = tuple(
            (metric, option, helper)
            for metric in self.metrics
            if (option := metrics.get(metric).helper_option) is not None
            and option not in self.given_options_for(metric)
        )
        return replace(self, metric_options=self.metric_options + added) if added else self

    @property
    def pinned(self) -> bool:
        """Whether this spec records what ran (a results file's spec), so a rerun must load exactly that."""
        return self.model_identity is not None

    def model_to_load(self) -> tuple[str | None, str, str | None]:
        """(revision, precision, device) to load the model with: the recorded ones when pinned (a hub model's
        commit, the dtype and device that ran), else the requested ones."""
        if self.model_identity is None:
            return self.revision, self.precision, self.device
        return self.model_identity.revision, self.model_identity.dtype, self.model_identity.device

    def check_model(self, loaded: ModelIdentity) -> None:
        """ValueError when this spec is pinned to another model than the one loaded."""
        if self.model_identity is not None and not self.model_identity.same_model(loaded):
            raise ValueError(
                f"the run spec records the model {_describe(self.model_identity)}, but {_describe(loaded)} was loaded"
            )

    def check_dataset(self, loaded: DatasetIdentity) -> None:
        """ValueError when this spec is pinned to other data for the task than the data found."""
        recorded = next((d for d in self.datasets if d.task == loaded.task), None)
        if recorded is not None and recorded != loaded:
            raise ValueError(
                f"the run spec records {_describe(recorded)}, but the data folder holds {_describe(loaded)}"
            )

    def resolved(
        self,
        model: ModelIdentity,
        datasets: Sequence[DatasetIdentity],
        package_version: str,
        editor_statistics: Sequence[Mapping[str, Any]] = (),
        editor_settings: Mapping[str, Any] | None = None,
    ) -> RunSpec:
        """This spec pinned to what ran (ValueError when it is already pinned to something else)."""
        self.check_model(model)
        for dataset in datasets:
            self.check_dataset(dataset)
        if self.package_version not in (None, package_version):
            log.warning(
                "the run spec was recorded with causal-diagnosticity %s; this is %s",
                self.package_version,
                package_version,
            )
        return replace(
            self,
            model_identity=model,
            datasets=tuple(datasets),
            package_version=package_version,
            editor_statistics=tuple(dict(record) for record in editor_statistics),
            editor_settings=None if editor_settings is None else dict(editor_settings),
        )

    def to_dict(self) -> dict[str, Any]:
        """The spec as the results file's `run_spec` (JSON-ready once tuples are written as lists)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        """The spec of a results file's `run_spec` (lists read back as tuples); of a resolved spec, one that reruns
        the same job exactly."""
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"run_spec has unknown fields: {', '.join(sorted(unknown))}")
        values = {key: _tuples(value) for key, value in data.items()}
        canonical = metric_registry().canonical
        if "metrics" in values:
            values["metrics"] = tuple(canonical(name) for name in values["metrics"])
        for key in ("metric_options", "metric_defaults"):
            values[key] = tuple((canonical(name), option, value) for name, option, value in values.get(key, ()))
        values["metric_defaults"] += _legacy_defaults(values["metric_options"], values["metric_defaults"])
        values["editor_statistics"] = tuple(dict(record) for record in data.get("editor_statistics", ()))
        if values.get("model_identity") is not None:
            values["model_identity"] = ModelIdentity(**data["model_identity"])
        values["datasets"] = tuple(DatasetIdentity(**d) for d in data.get("datasets", ()))
        return cls(**values)


def _legacy_defaults(
    options: tuple[tuple[str, str, Any], ...], defaults: tuple[tuple[str, str, Any], ...]
) -> tuple[tuple[str, str, Any], ...]:
    """For each metric whose recorded defaults lack an option it gained after they were recorded, that option at the
    value that scores as before (`Metric.legacy_option_values`), so a rerun of an older results file scores as it
    did. A metric with no recorded defaults (a file older than schema 1.5) gets none: it reruns at today's."""
    metrics = metric_registry()
    given = {(metric, option) for metric, option, _ in (*options, *defaults)}
    return tuple(
        (metric, option, value)
        for metric in dict.fromkeys(metric for metric, _, _ in defaults)
        for option, value in metrics.get(metric).legacy_option_values.items()
        if (metric, option) not in given
    )


def _tuples(value: Any) -> Any:
    """JSON arrays (lists) back to the tuples the spec holds, at any depth."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _describe(identity: ModelIdentity | DatasetIdentity) -> str:
    return ", ".join(f"{key} {value}" for key, value in asdict(identity).items())
