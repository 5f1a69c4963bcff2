"""The leaderboard, computed from stored per-pair scores with the library's statistics (no second
implementation): per-task diagnosticity with CI, coverage and a direction marker on the Holm-adjusted sign test,
the coverage-aware mean over tasks, and Copeland scores.

Everything is recomputed from the stored d and cluster of each pair, one way for results files of every schema
version: pairs that share a cluster (stored from results schema 1.8 on) are resampled and sign-tested together, as
the run did, and a pair stored without one stands alone. A job's cell (configuration, task, metric variant) that
holds a stored score failing the checks is left out whole and listed as an invalid row; the rest of the board is
computed as usual."""

from __future__ import annotations

import math
import threading
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..api.rows import PairScoreRow
from ..statistics import Estimate, copeland, diagnosticity_from_d, direction_marker, holm
from .queue import FinishedScore, InvalidScore, JobQueue


@dataclass(frozen=True)
class BoardRow:
    """One model configuration × metric variant: per-task diagnosticity and its Holm-adjusted sign-test p (one
    family per model configuration: every task and metric variant it was scored on), the mean over its rankable
    tasks of the coverage-aware D (a declined pair counts as a tie; tasks with fewer than `MIN_N_VALID` scored
    pairs left out; NaN when none is left), and the metric variant's Copeland score over every (task, model
    configuration) on the board (NaN where it entered no comparison). `submitted` holds, per task, when the job
    whose scores the cell shows was submitted (naive UTC; None where unknown); `parameters` how many parameters the
    model has, as the newest job of the configuration that recorded one says (None where none did)."""

    model: str
    revision: str
    precision: str
    editor: str
    explanations: str
    metric: str
    variant: str
    per_task: Mapping[str, Estimate]
    p_adjusted: Mapping[str, float]
    mean: float
    copeland: float
    submitted: Mapping[str, datetime | None]
    parameters: int | None

    @property
    def metric_label(self) -> str:
        return f"{self.metric} · {self.variant}"

    def marker(self, task: str) -> str:
        """▲ / ▼ where D on `task` is significantly above / below 0.5 (adjusted p), "" otherwise."""
        estimate = self.per_task.get(task)
        return "" if estimate is None else direction_marker(estimate.value, self.p_adjusted.get(task))


@dataclass(frozen=True)
class InvalidRow:
    """One job's cell (model configuration, task, metric variant) with `n_invalid` stored scores that fail the
    checks, `first` of them saying why: the cell is left out of the board and shown as an invalid row."""

    first: InvalidScore
    n_invalid: int


@dataclass(frozen=True)
class Board:
    tasks: tuple[str, ...]
    rows: tuple[BoardRow, ...]
    invalid: tuple[InvalidRow, ...] = ()


def _latest_per_cell(
    scores: Sequence[FinishedScore],
) -> tuple[dict[tuple, dict[str, PairScoreRow]], dict[tuple, datetime | None], dict[tuple, int]]:
    """(configuration, task, metric, variant) → pair id → row, from the newest job that scored the cell; the cell →
    when that job was submitted; and configuration → its model's parameter count, from the newest job that
    recorded one."""
    newest: dict[tuple, int] = {}
    cells: dict[tuple, dict[str, PairScoreRow]] = defaultdict(dict)
    submitted: dict[tuple, datetime | None] = {}
    parameters: dict[tuple, int] = {}
    for score in sorted(scores, key=lambda s: s.job_id):
        if score.parameters is not None:
            parameters[score.configuration] = score.parameters
        key = (*score.configuration, score.row.task, score.row.metric, score.row.variant)
        if newest.setdefault(key, score.job_id) < score.job_id:
            newest[key] = score.job_id
            cells[key] = {}
        if newest[key] == score.job_id:
            cells[key][score.row.pair_id] = score.row
            submitted[key] = score.submitted_at
    return cells, submitted, parameters


def _invalid_rows(invalid: Sequence[InvalidScore]) -> dict[tuple, InvalidRow]:
    """Job cell → its invalid row (first failing score and their count)."""
    counts = Counter(score.cell for score in invalid)
    first: dict[tuple, InvalidScore] = {}
    for score in invalid:
        first.setdefault(score.cell, score)
    return {cell: InvalidRow(score, counts[cell]) for cell, score in first.items()}


def compute_board(
    scores: Sequence[FinishedScore], n_resamples: int = 2000, invalid: Sequence[InvalidScore] = ()
) -> Board:
    """The board of the stored scores (the newest job's per cell), ranked by the coverage-aware mean D; rows with
    no rankable task come last. A job's cell holding an `invalid` score is left out whole (its valid scores too)
    and listed in `Board.invalid`."""
    left_out = _invalid_rows(invalid)
    cells, submitted, parameters = _latest_per_cell([score for score in scores if score.cell not in left_out])
    tasks = tuple(sorted({key[5] for key in cells}))
    per_row: dict[tuple, dict[str, Estimate]] = defaultdict(dict)
    submitted_per_row: dict[tuple, dict[str, datetime | None]] = defaultdict(dict)
    configurations: dict[tuple, dict[str, dict[str, float]]] = defaultdict(dict)
    for key, by_pair in cells.items():
        config, task, metric, variant = key[:5], key[5], key[6], key[7]
        d = np.asarray([row.d for row in by_pair.values()], dtype=float)
        clusters = [row.cluster for row in by_pair.values()]
        per_row[(*config, metric, variant)][task] = diagnosticity_from_d(d, clusters=clusters, n_resamples=n_resamples)
        submitted_per_row[(*config, metric, variant)][task] = submitted[key]
        configurations[(*config, task)][f"{metric} · {variant}"] = {pair: row.d for pair, row in by_pair.items()}
    wins = copeland({str(name): _aligned(metrics) for name, metrics in configurations.items()})
    adjusted = _holm_per_configuration(per_row)
    rows = []
    for key, per_task in per_row.items():
        values = [e.coverage_aware for e in per_task.values() if e.rankable]
        label = f"{key[5]} · {key[6]}"
        rows.append(
            BoardRow(
                *key,
                per_task=per_task,
                p_adjusted=adjusted[key],
                mean=float(np.mean(values)) if values else math.nan,
                copeland=wins.get(label, math.nan),
                submitted=submitted_per_row[key],
                parameters=parameters.get(key[:5]),
            )
        )
    rows.sort(key=lambda r: (-(r.mean if not math.isnan(r.mean) else -1.0), r.model, r.metric, r.variant))
    return Board(tasks, tuple(rows), tuple(left_out.values()))


def _holm_per_configuration(per_row: Mapping[tuple, Mapping[str, Estimate]]) -> dict[tuple, dict[str, float]]:
    """Row key → task → Holm-adjusted sign-test p, one family per model configuration (what one run of that
    configuration would adjust across)."""
    families: dict[tuple, list[tuple[tuple, str]]] = defaultdict(list)
    for key, per_task in per_row.items():
        families[key[:5]] += [(key, task) for task in per_task]
    adjusted: dict[tuple, dict[str, float]] = defaultdict(dict)
    for cells in families.values():
        for (key, task), p in zip(cells, holm([per_row[key][task].p_value for key, task in cells]), strict=True):
            adjusted[key][task] = float(p)
    return adjusted


def _aligned(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, list[float]]:
    """d arrays on the pairs every metric of one configuration scored, in one order (the paired tests need it)."""
    common = sorted(set.intersection(*(set(m) for m in metrics.values())))
    return {name: [by_pair[p] for p in common] for name, by_pair in metrics.items()}


def cell_scores(
    scores: Sequence[FinishedScore], configuration: tuple, task: str, metric: str, variant: str
) -> list[FinishedScore]:
    """The stored per-pair scores behind one board cell: those of the newest job that scored it (what the board
    computed the cell from)."""
    matching = [
        s
        for s in scores
        if s.configuration == configuration and (s.row.task, s.row.metric, s.row.variant) == (task, metric, variant)
    ]
    newest = max((s.job_id for s in matching), default=None)
    return [s for s in matching if s.job_id == newest]


class BoardCache:
    """The board of a queue, recomputed only when the stored finished scores change (a job finished anywhere)."""

    def __init__(self, queue: JobQueue) -> None:
        self.queue = queue
        self._lock = threading.Lock()
        self._fingerprint: tuple | None = None
        self._board = Board((), ())

    def get(self) -> Board:
        with self._lock:
            fingerprint = self.queue.finished_fingerprint()
            if fingerprint != self._fingerprint:
                stored = self.queue.stored_scores()
                self._board = compute_board(stored.valid, invalid=stored.invalid)
                self._fingerprint = fingerprint
            return self._board
