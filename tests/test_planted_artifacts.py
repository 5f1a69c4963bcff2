"""Planted artifacts, caught end to end (issue 13): a length artifact planted in real FactCheck pairs and a metric
that declines to score the pairs it would lose. The artifact probe fails the data, the swapped-roles control brings
the length scorer back to chance, and the coverage-aware ranking and Copeland keep the selective metric from
topping an honest one, while a metric that never scores enters neither."""

import dataclasses
import math

import numpy as np
import pytest

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.api.task import task_registry
from recoe_causaldiag.artifact_probes import FAIL, audit_records
from recoe_causaldiag.leaderboard.board import compute_board
from recoe_causaldiag.leaderboard.queue import FinishedScore
from recoe_causaldiag.statistics import diagnosticity_from_d, pairwise_d

PADDING = ", as the records of this fact consistently show"


@pytest.fixture(scope="module")
def planted(factcheck_pairs):
    """The FactCheck pairs, their faithful explanation always carrying the same extra clause."""
    return [
        dataclasses.replace(p, explanation_faithful=p.explanation_faithful.rstrip(".") + PADDING + ".")
        for p in factcheck_pairs
    ]


def length_d(pairs):
    """d of the text-only scorer 'longer is more faithful' on each pair."""
    faithful = [len(p.explanation_faithful) for p in pairs]
    unfaithful = [len(p.explanation_unfaithful) for p in pairs]
    return pairwise_d(faithful, unfaithful)


def finished(metric, d, job_id=1):
    rows = [PairScoreRow(f"p{i}", "factcheck", metric, "v", x, 0.5, x) for i, x in enumerate(d)]
    return [FinishedScore(job_id, "m", "main", "auto", "ice", "synthetic", row) for row in rows]


def test_the_probe_fails_the_planted_data_and_passes_the_clean_data(planted, factcheck_pairs):
    chars = {r.probe: r for r in audit_records("factcheck", planted)}["chars"]
    assert chars.verdict == FAIL and chars.d == 1.0
    clean = {r.probe: r for r in audit_records("factcheck", factcheck_pairs)}["chars"]
    assert clean.verdict != FAIL and 0.4 <= clean.ci_low <= clean.ci_high <= 0.6


def test_swapped_roles_bring_a_length_scorer_back_to_chance(planted):
    task = task_registry().get("factcheck")
    d = length_d(planted)
    d_swap = length_d([task.swapped_roles(p) for p in planted])
    d_sym = diagnosticity_from_d((d + d_swap) / 2)
    assert d.mean() == 1.0 and d_swap.mean() == 0.0
    assert d_sym.value == 0.5 and d_sym.ci_low <= 0.5 <= d_sym.ci_high


def test_a_selective_metric_and_a_silent_one_do_not_win_the_board():
    n = 100
    honest = np.array([1.0] * 85 + [0.0] * 15)
    selective = np.array([1.0] * 60 + [math.nan] * 40)  # D = 0.60 if it scored all; it declines where it loses
    silent = np.full(n, math.nan)
    chance = np.array([1.0, 0.0] * (n // 2))
    board = compute_board(
        finished("honest", honest) + finished("selective", selective) + finished("silent", silent)
        + finished("chance", chance)
    )  # fmt: skip
    rows = {r.metric: r for r in board.rows}
    assert rows["selective"].per_task["factcheck"].value == 1.0, "over the pairs it scored it looks perfect"
    assert rows["selective"].per_task["factcheck"].coverage == pytest.approx(0.6)
    assert [r.metric for r in board.rows][:2] == ["honest", "selective"]
    assert rows["selective"].mean == pytest.approx(0.8) and rows["honest"].mean == pytest.approx(0.85)
    assert rows["selective"].copeland <= rows["honest"].copeland
    assert math.isnan(rows["silent"].copeland) and math.isnan(rows["silent"].mean)
    assert board.rows[-1].metric == "silent" and rows["chance"].copeland < rows["honest"].copeland
