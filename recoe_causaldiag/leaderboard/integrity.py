"""What may be stored on the board and shown there: names from one safe character set and of bounded length, and
per-pair scores that are finite floats or NaN (declined) with the outcome d they imply.

A check that fails raises `InvalidData` with a short reason that names the field and never echoes the value (which
may be huge, hold markup or a server path), so the reason can be shown publicly as a job's failure reason."""

from __future__ import annotations

import hashlib
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from ..api.rows import PairScoreRow
from ..statistics import pairwise_d

SAFE_NAME = re.compile(r"(?! )[A-Za-z0-9_. -]{1,64}(?<! )")
"""Metric and variant names: 1-64 ASCII letters, digits, '_', '.', '-' and inner spaces. No '$', '\\', markup,
'/', '·' or control characters, so a name is shown and drawn as it is and no two board labels collide."""
SAFE_NAME_RULE = "1-64 ASCII letters, digits, '_', '.', '-' or inner spaces"
TASK_NAME = re.compile(r"[a-z0-9_]{1,32}(?:/[a-z0-9_]{1,31})?")
PAIR_ID = re.compile(r"[A-Za-z0-9_.:/-]{1,120}")
SCORE_FIELDS = ("score_faithful", "score_unfaithful", "d")
CLUSTER_LENGTH = 200
"""The longest cluster name stored (the column's width); a dataset's are entity names, far shorter."""


class InvalidData(ValueError):
    """Data that may not be stored or shown; the message is short, path-free and safe to show publicly."""


def _kind(value: object) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _matching(field: str, value: object, pattern: re.Pattern[str], rule: str) -> str:
    """`value` when it is a string that `pattern` matches whole; InvalidData saying what `field` must be."""
    if not isinstance(value, str):
        raise InvalidData(f"{field} is {_kind(value)}, not text")
    if not pattern.fullmatch(value):
        raise InvalidData(f"{field} must be {rule} (it has {len(value)} characters)")
    return value


def check_name(field: str, value: object) -> str:
    """A metric or variant name (`field` says which) that matches `SAFE_NAME`."""
    return _matching(field, value, SAFE_NAME, SAFE_NAME_RULE)


def check_score(field: str, value: object) -> float:
    """`value` as a float when it is a real number that is finite or NaN (a declined score); bools, strings (digit
    strings too), None, containers, ±inf and integers too large for a float are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidData(f"{field} is {_kind(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:
        raise InvalidData(f"{field} is too large for a float") from None
    if math.isinf(number):
        raise InvalidData(f"{field} is infinite")
    return number


def check_scores(values: object, n: int) -> np.ndarray:
    """A submitted metric's scores: a list of exactly `n` entries, each a finite number, or null / NaN where the
    metric declined (NaN in the array)."""
    if not isinstance(values, list):
        raise InvalidData(f"scores is {_kind(values)}, not a list of {n} numbers")
    if len(values) != n:
        raise InvalidData(f"scores holds {len(values)} entries, not {n}")
    return np.array(
        [math.nan if value is None else check_score(f"score {i}", value) for i, value in enumerate(values)], dtype=float
    )


def check_cluster(value: object) -> str | None:
    """A pair's cluster: None (the pair stands alone) or 1-`CLUSTER_LENGTH` printable characters. It groups pairs
    for the board's statistics and is shown as plain text in the per-pair views and exports."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidData(f"cluster is {_kind(value)}, not text")
    if not 0 < len(value) <= CLUSTER_LENGTH or not value.isprintable():
        raise InvalidData(f"cluster must be 1-{CLUSTER_LENGTH} printable characters (it has {len(value)})")
    return value


def _outcome(faithful: float, unfaithful: float) -> float:
    """The d that two scores imply (the library's `pairwise_d`; a difference beyond the float range still has a
    sign)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(pairwise_d([faithful], [unfaithful])[0])


def check_row(row: PairScoreRow) -> PairScoreRow:
    """`row` (the evaluated direction, as the board stores it) when it may be stored and shown: a task name, a safe
    metric and variant name, a pair id, scores that are finite or NaN, and the d they imply (NaN when either is
    NaN), and a cluster (`check_cluster`); its numbers as floats."""
    _matching("task", row.task, TASK_NAME, "a task name (lowercase letters, digits, '_', at most one slash)")
    check_name("metric", row.metric)
    check_name("variant", row.variant)
    _matching("pair id", row.pair_id, PAIR_ID, "1-120 ASCII letters, digits, '_', '.', ':', '-' or slashes")
    faithful, unfaithful, d = (check_score(field, getattr(row, field)) for field in SCORE_FIELDS)
    expected = _outcome(faithful, unfaithful)
    if not (d == expected or (math.isnan(d) and math.isnan(expected))):
        raise InvalidData("d is not the outcome of the two scores (1, 0.5 or 0; NaN when either is NaN)")
    check_cluster(row.cluster)
    return replace(row, score_faithful=faithful, score_unfaithful=unfaithful, d=d)


MAX_PARAMETERS = 10**14
"""More parameters than any model has: a larger stored count is garbage, not a model size."""


def check_parameters(value: Any) -> int | None:
    """A model's parameter count as stored or about to be: None (unknown) or a positive integer under
    `MAX_PARAMETERS`; InvalidData otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < MAX_PARAMETERS:
        raise InvalidData(f"the model's parameter count {str(value)[:40]!r} is no positive integer")
    return value


def check_scored_rows(rows: Iterable[PairScoreRow]) -> list[PairScoreRow]:
    """The evaluated direction of every row, each checked by `check_row`; InvalidData naming the first refused
    row (by its pair id where that is a safe name, else by its position)."""
    checked = []
    for k, row in enumerate(rows):
        try:
            checked.append(check_row(row.evaluated_direction()))
        except InvalidData as error:
            named = isinstance(row.pair_id, str) and SAFE_NAME.fullmatch(row.pair_id)
            raise InvalidData(f"{f'pair {row.pair_id}' if named else f'row {k + 1}'}: {error}") from error
    return checked


def stored_row(stored: Mapping[str, Any]) -> PairScoreRow:
    """A per-pair score as read back from the database (NULL for an unscored number), checked as `check_row` checks
    a row before it is stored: a row written around the queue raises InvalidData here instead of reaching the
    board."""
    scores = (math.nan if stored[field] is None else stored[field] for field in SCORE_FIELDS)
    row = PairScoreRow(stored["pair_id"], stored["task"], stored["metric"], stored["variant"], *scores)
    return check_row(replace(row, cluster=stored["cluster"]))


def public_model_name(model: str) -> str:
    """How a model is shown on the board and in the queue: a local folder (an absolute path) by its name and a
    short hash of its path, so no server path is published and two folders of one name stay apart; any other id
    as it is."""
    if not model.startswith("/"):
        return model
    return f"local:{PurePosixPath(model).name}-{hashlib.sha256(model.encode()).hexdigest()[:6]}"
