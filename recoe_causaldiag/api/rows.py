"""The per-pair score row: one metric variant's scores of both explanations of one pair and their outcome d (and,
where the run swapped roles, the same from the contrast model). It is the one row type of results files, of the
leaderboard's stored scores, of its seed loader, board and exports. Beside it, the per-pair control row: the
perplexities and answers from which a run's edit reliability and task accuracy are computed.

JSON has no NaN: an unscored value is written as null and read back as NaN (`json_number`, `without_nans`,
`number_from_json` are the package's one conversion between the two)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
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


SWAP_KEYS = ("score_faithful_swap", "score_unfaithful_swap", "d_swap")
"""A row's swapped-direction fields; absent from rows (and files) whose run did not swap roles."""


def _optional_number(row: Mapping[str, Any], key: str) -> float | None:
    """A field that only some rows carry: None when absent, NaN when written as null."""
    return number_from_json(row[key]) if key in row else None


@dataclass(frozen=True)
class PairScoreRow:
    """One metric variant on one pair of a task: the faithful and unfaithful explanation's scores and the pairwise
    outcome d (1 when the faithful one scores higher, 0.5 on a tie, 0 when lower); NaN where the metric could not
    score.

    Where the run swapped roles (SPEC §7), the same metric variant scored the pair from its contrast model M̃ (its
    `counter_edits` in context): `score_faithful_swap` is the score of the explanation faithful to M̃ (the pair's
    unfaithful one), `score_unfaithful_swap` that of the pair's faithful one, `d_swap` their outcome. None where
    roles were not swapped (the task forbids it, the run skipped it, or an older file).

    `cluster` names the entity the pair shares with other pairs of its dataset (`metadata.cluster`), so that
    whoever recomputes D from the rows resamples and sign-tests such pairs together, as the run did (SPEC §7); None
    where the dataset names none or the file is older than schema 1.8."""

    pair_id: str
    task: str
    metric: str
    variant: str
    score_faithful: float
    score_unfaithful: float
    d: float
    score_faithful_swap: float | None = None
    score_unfaithful_swap: float | None = None
    d_swap: float | None = None
    cluster: str | None = None

    @property
    def swapped(self) -> bool:
        """Whether the pair was also scored with the roles swapped."""
        return self.d_swap is not None

    @property
    def d_sym(self) -> float | None:
        """The symmetric outcome (d + d_swap) / 2; NaN when either direction is unscored, None without a swap."""
        return None if self.d_swap is None else (self.d + self.d_swap) / 2

    def to_json(self) -> dict[str, str | float | None]:
        """The row for a results file; the swapped-direction fields only where roles were swapped, the cluster only
        where the pair has one."""
        row: dict[str, str | float | None] = {
            "pair_id": self.pair_id,
            "task": self.task,
            "metric": self.metric,
            "variant": self.variant,
            "score_faithful": json_number(self.score_faithful),
            "score_unfaithful": json_number(self.score_unfaithful),
            "d": json_number(self.d),
        }
        if self.swapped:
            row |= {key: json_number(getattr(self, key)) for key in SWAP_KEYS}
        if self.cluster is not None:
            row["cluster"] = self.cluster
        return row

    def evaluated_direction(self) -> PairScoreRow:
        """The row without its swapped-direction fields (what stores of one direction keep)."""
        return replace(self, score_faithful_swap=None, score_unfaithful_swap=None, d_swap=None)

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PairScoreRow:
        """A row as `to_json` wrote it (with or without swapped-direction fields and cluster), or as schema 1.0
        results files did (`id` for `pair_id`)."""
        pair_id = row["pair_id"] if "pair_id" in row else row[LEGACY_PAIR_ID_KEY]
        return cls(
            str(pair_id),
            row["task"],
            row["metric"],
            row["variant"],
            number_from_json(row["score_faithful"]),
            number_from_json(row["score_unfaithful"]),
            number_from_json(row["d"]),
            *(_optional_number(row, key) for key in SWAP_KEYS),
            row.get("cluster"),
        )


@dataclass(frozen=True)
class PairControlRow:
    """The model-side controls on one pair of a task (SPEC §7), from which a run's edit reliability and task
    accuracy are computed.

    Perplexities of the faithful and unfaithful explanation after the CoT opening: under the evaluated model's
    `edits`, under the contrast model's `counter_edits` (None where the task's roles cannot be swapped), and with
    no edits in context (the ICE prompt holding no fact). `direct_answer` and `cot_answer` are the evaluated
    model's top label after the direct prompt and after the CoT prompt holding the faithful explanation; `answer`
    is the label both edited models should give."""

    pair_id: str
    task: str
    ppl_faithful: float
    ppl_unfaithful: float
    ppl_faithful_counter: float | None
    ppl_unfaithful_counter: float | None
    ppl_faithful_no_edit: float
    ppl_unfaithful_no_edit: float
    answer: str
    direct_answer: str
    cot_answer: str

    @property
    def edit_preferred(self) -> float:
        """1 when the faithful explanation has the lower perplexity under the edits, else 0; NaN if unscored."""
        return _lower(self.ppl_faithful, self.ppl_unfaithful)

    @property
    def counter_preferred(self) -> float | None:
        """1 when the unfaithful explanation has the lower perplexity under the counter edits (the swapped
        direction's own edit reliability), else 0; NaN if unscored, None where the roles cannot be swapped."""
        if self.ppl_faithful_counter is None or self.ppl_unfaithful_counter is None:
            return None
        return _lower(self.ppl_unfaithful_counter, self.ppl_faithful_counter)

    @property
    def both_ways_preferred(self) -> float | None:
        """1 when the edits prefer the faithful explanation and the counter edits the unfaithful one, else 0; NaN
        if unscored, None where the roles cannot be swapped."""
        counter = self.counter_preferred
        if counter is None:
            return None
        return math.nan if math.isnan(counter) else self.edit_preferred * counter

    @property
    def no_edit_preferred(self) -> float:
        """1 when the faithful explanation has the lower perplexity with no edits in context, else 0."""
        return _lower(self.ppl_faithful_no_edit, self.ppl_unfaithful_no_edit)

    @property
    def direct_correct(self) -> float:
        return float(self.direct_answer == self.answer)

    @property
    def cot_correct(self) -> float:
        return float(self.cot_answer == self.answer)

    def to_json(self) -> dict[str, str | float | None]:
        """The row for a results file; the counter-edit perplexities only where the roles can be swapped."""
        return {
            key: json_number(value) if isinstance(value, float) else value
            for key, value in asdict(self).items()
            if value is not None
        }

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> PairControlRow:
        return cls(
            row["pair_id"],
            row["task"],
            number_from_json(row["ppl_faithful"]),
            number_from_json(row["ppl_unfaithful"]),
            _optional_number(row, "ppl_faithful_counter"),
            _optional_number(row, "ppl_unfaithful_counter"),
            number_from_json(row["ppl_faithful_no_edit"]),
            number_from_json(row["ppl_unfaithful_no_edit"]),
            row["answer"],
            row["direct_answer"],
            row["cot_answer"],
        )


def _lower(a: float | None, b: float | None) -> float:
    """1.0 when perplexity `a` is strictly lower than `b`, 0.0 otherwise (ties too), NaN when either is missing."""
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return math.nan
    return float(a < b)
