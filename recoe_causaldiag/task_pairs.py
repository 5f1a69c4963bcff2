"""The pairs of each task as every evaluation reads them (the runner, the leaderboard worker's model and
submitted-metric jobs, the ReCoE evaluation): from a folder of built datasets (each built there on demand), a seeded
selection, the identity of the data they came from, and the per-pair score rows a metric variant's scores make."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .api.instance import VariantScores
from .api.records import PairRecord
from .api.rows import PairScoreRow
from .api.run_spec import DatasetIdentity
from .dataset_building import task_dataset_dir
from .hub_layout import MANIFEST, load_pairs, read_manifest
from .paths import cache_root, file_sha256
from .statistics import pairwise_d
from .tasks import DATASET_VERSION


def default_data_dir() -> Path:
    """Where datasets are built on demand when no data folder is given: the cache, one folder per dataset version."""
    return cache_root() / "datasets" / DATASET_VERSION


def select_pairs(pairs: Sequence[PairRecord], limit: int | None, seed: int) -> list[PairRecord]:
    """A seeded sample of `limit` pairs (all when no limit), kept in dataset order."""
    if limit is None or limit >= len(pairs):
        return list(pairs)
    keep = sorted(random.Random(seed).sample(range(len(pairs)), limit))
    return [pairs[i] for i in keep]


@dataclass(frozen=True)
class TaskPairs:
    """The selected pairs of one task and the data they came from."""

    task: str
    dataset: DatasetIdentity
    pairs: tuple[PairRecord, ...]

    def score_rows(self, metric: str, scores: VariantScores) -> list[PairScoreRow]:
        """One row per pair for a metric variant's scores of these pairs (in pair order), with the outcome d and the
        pair's cluster."""
        if len(scores.faithful) != len(self.pairs):
            raise ValueError(
                f"{metric} · {scores.variant} scored {len(scores.faithful)} pairs of {self.task}, not {len(self.pairs)}"
            )
        d = pairwise_d(scores.faithful, scores.unfaithful)
        return [
            PairScoreRow(
                pair.id, self.task, metric, scores.variant, float(f), float(u), float(di), cluster=pair.cluster
            )
            for pair, f, u, di in zip(self.pairs, scores.faithful, scores.unfaithful, d)
        ]


def iter_task_pairs(
    tasks: Iterable[str], data_dir: Path | None = None, *, limit: int | None = None, seed: int = 0
) -> Iterator[TaskPairs]:
    """Each task's selected pairs (a seeded sample of `limit`, all when None), read one task at a time from
    `data_dir` (default: `default_data_dir()`), where a missing dataset is built first."""
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    for task in tasks:
        folder, config = task_dataset_dir(task, data_dir)
        dataset = DatasetIdentity(task, read_manifest(folder)["version"], file_sha256(folder / MANIFEST))
        yield TaskPairs(task, dataset, tuple(select_pairs(load_pairs(folder, config), limit, seed)))
