"""The per-pair score row: one metric variant's scores of both explanations of one pair and their outcome d. It is
the one row type of results files, of the leaderboard's stored scores, of its seed loader, board and exports.

JSON has no NaN: an unscored value is written as null and read back as NaN (`json_number`, `without_nans`,
`number_from_json` are the package's one conversion between the two)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LEGACY_PAIR_ID_KEY = "id"
"""What results files of schema 1.0 called a row's `pair_id`; readers still accept it."""


def json_number(value: float | None) -> float | None:
    """A number as JSON can hold it: NaN (unscored) becomes None (null)."""
    return None if value is None or math.isnan(value) else float(value)


def number_from_json(value: float | None) -> float:
    """A JSON number read back: null (unscored) becomes NaN."""
    return math.nan if value is None else float(value)


def without_nans(value: Any) -> Any:
    """A JSON-ready copy of a document: every NaN float, at any depth, becomes None (null)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {k: without_nans(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nans(v) for v in value]
    return value


@dataclass(frozen=True)
class PairScoreRow:
    """One metric variant on one pair of a task: the faithful and unfaithful explanation's scores and the pairwise
    outcome d (1 when the faithful one scores higher, 0.5 on a tie, 0 when lower); NaN where the metric could not
    score."""

    pair_id: str
    task: str
    metric: str
    variant: str
    score_faithful: float
    score_unfaithful: float
    d: float

    def to_json(self) -> dict[str, str | float | None]:
        return {
            "pair_id": self.pair_id,
            "task": self.task,
            "metric": self.metric,
            "variant": self.variant,
            "score_faithful": json_number(self.score_faithful),
            "score_unfaithful": json_number(self.score_unfaithful),
            "d": json_number(self.d),
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PairScoreRow:
        """A row as `to_json` wrote it, or as schema 1.0 results files did (`id` for `pair_id`)."""
        pair_id = row["pair_id"] if "pair_id" in row else row[LEGACY_PAIR_ID_KEY]
        return cls(
            str(pair_id),
            row["task"],
            row["metric"],
            row["variant"],
            number_from_json(row["score_faithful"]),
            number_from_json(row["score_unfaithful"]),
            number_from_json(row["d"]),
        )
