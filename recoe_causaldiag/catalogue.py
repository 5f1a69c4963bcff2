"""What the library offers, as `causaldiag ls` lists it: datasets with their tasks, metrics with their kind,
description and variants.

Listing the registries imports every metric and task, and with them torch, transformers and datasets (seconds).
The listing depends only on the library's sources, so it is kept in the user cache under the sha256 of those
sources (`hub_modules.library_digest`): any change to the library lists afresh, and an unchanged library is listed
from the cache without importing any of them."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from .hub_modules import library_digest
from .paths import cache_root, write_whole

log = logging.getLogger(__name__)

CATALOGUE_FILE = "catalogue.json"


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class MetricEntry:
    name: str
    explanation_type: str
    description: str
    n_variants: int


@dataclass(frozen=True)
class Catalogue:
    """The registered datasets and metrics, in registry order."""

    datasets: tuple[DatasetEntry, ...]
    metrics: tuple[MetricEntry, ...]

    @classmethod
    def from_json(cls, doc: dict) -> Catalogue:
        return cls(
            tuple(DatasetEntry(d["name"], tuple(d["tasks"])) for d in doc["datasets"]),
            tuple(MetricEntry(**m) for m in doc["metrics"]),
        )


def listed_catalogue() -> Catalogue:
    """The catalogue read from the registries themselves (imports every metric and task)."""
    from .metrics import METRICS
    from .tasks import DATASETS

    datasets = tuple(DatasetEntry(name, tuple(DATASETS.get(name).task_names())) for name in DATASETS)
    metrics = []
    for name in METRICS:
        metric = METRICS.get(name)()
        metrics.append(MetricEntry(name, metric.explanation_type, metric.description, len(metric.variants)))
    return Catalogue(datasets, tuple(metrics))


def catalogue_path() -> Path:
    return cache_root() / CATALOGUE_FILE


def catalogue() -> Catalogue:
    """The catalogue of this library's sources: from the cache when it was listed from the same sources, otherwise
    listed from the registries and cached (a cache that cannot be written is reported, not raised)."""
    digest = library_digest()
    try:
        cached = json.loads(catalogue_path().read_text(encoding="utf-8"))
        if cached.get("library") == digest:
            return Catalogue.from_json(cached)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no cache, or an unreadable one: listed afresh below
    listed = listed_catalogue()
    doc = {"library": digest, **asdict(listed)}
    try:
        write_whole(catalogue_path(), lambda path: path.write_text(json.dumps(doc, indent=1), encoding="utf-8"))
    except OSError as err:
        log.warning("could not cache the catalogue in %s (%s); it is listed afresh each time", catalogue_path(), err)
    return listed
