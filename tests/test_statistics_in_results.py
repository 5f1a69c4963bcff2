"""The statistics as results files, tables, plots and the board show them: Holm across a file's tests, direction
markers, coverage everywhere, coverage-aware rankings that a NaN-selection artifact cannot game, and results files
of older schema versions shown with their missing columns as n/a."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard.board import compute_board
from recoe_causaldiag.leaderboard.export import board_document, write_export
from recoe_causaldiag.leaderboard.queue import FinishedScore, JobQueue
from recoe_causaldiag.leaderboard.render import board_records
from recoe_causaldiag.leaderboard.seed import seed_if_empty
from recoe_causaldiag.report import _bars, markdown_table, plot, run_figure, write_results
from recoe_causaldiag.runner import _direction_fields, _estimate_fields, with_adjusted_p_values
from recoe_causaldiag.statistics import ABOVE, BELOW, diagnosticity_from_d, holm

NAN = float("nan")


def result_entry(task: str, metric: str, d: list[float], d_swap: list[float] | None = None) -> dict:
    """A result entry as the runner builds it (D_sym and D_swap only where roles were swapped)."""
    swap = d_swap is not None
    sym = [(a + b) / 2 for a, b in zip(d, d_swap, strict=True)] if swap else []
    return {
        "task": task,
        "metric": metric,
        "variant": "v",
        **_direction_fields("d_sym", diagnosticity_from_d(sym), swap),
        **_estimate_fields(diagnosticity_from_d(d)),
        **_direction_fields("d_swap", diagnosticity_from_d(d_swap or []), swap),
        "seconds": 0.0,
    }


def document(results: list[dict]) -> dict:
    return {
        "schema_version": "1.2",
        "model": {"name": "m", "revision": "r", "dtype": "float32", "device": "cpu"},
        "editor": "ice",
        "explanations": "synthetic",
        "results": results,
        "edit_reliability": [{"task": "factcheck", "value": 1.0, "ci_low": 0.9, "ci_high": 1.0, "n": 40}],
    }


def test_holm_covers_every_test_of_the_file_and_skips_tests_not_run():
    results = with_adjusted_p_values(
        [
            result_entry("factcheck", "above", [1.0] * 30 + [0.0] * 5, d_swap=[1.0] * 25 + [0.0] * 10),
            result_entry("analogy", "below", [0.0] * 30 + [1.0] * 10),
        ]
    )
    tests = [
        (0, "p_value", "p_adjusted"),
        (0, "d_swap_p_value", "d_swap_p_adjusted"),
        (0, "d_sym_p_value", "d_sym_p_adjusted"),
        (1, "p_value", "p_adjusted"),
    ]
    expected = holm([results[i][raw] for i, raw, _ in tests])
    assert [results[i][adjusted] for i, _, adjusted in tests] == pytest.approx(list(expected))
    assert results[1]["d_swap_p_adjusted"] is None and results[1]["d_sym_p_adjusted"] is None
    assert results[0]["coverage"] == 1.0 and results[0]["p_ttest"] < 0.05


def test_table_and_plot_show_direction_coverage_and_the_three_p_values(tmp_path):
    results = with_adjusted_p_values(
        [
            result_entry("factcheck", "above", [1.0] * 30 + [0.0] * 5 + [NAN] * 5),
            result_entry("factcheck", "below", [0.0] * 30 + [1.0] * 10),
            result_entry("factcheck", "chance", [1.0, 0.0] * 20),
        ]
    )
    table = markdown_table(document(results))
    rows = {line.split(" | ")[1]: line for line in table.splitlines() if line.startswith("| factcheck")}
    above = results[0]
    assert f"| {above['diagnosticity']:.3f}{ABOVE} |" in rows["above"] and "| 0.875 (35 / 40) |" in rows["above"]
    assert f"{BELOW} |" in rows["below"] and ABOVE not in rows["chance"] and BELOW not in rows["chance"]
    assert "| p (sign) | p (Holm) | p (t-test) |" in table and "half a win and half a loss" in table
    assert "fewer than 20" in table and "`*`" not in table
    labels = [label for label, *_ in _bars(document(results))]
    assert labels[0] == f"factcheck · above · v · D {ABOVE} · coverage 0.88 (n 35/40)"
    assert labels[2].endswith("D · coverage 1.00 (n 40/40)")
    json_path, _, figure, vector = write_results(document(results), tmp_path / "r.json")
    assert json.loads(json_path.read_text())["results"][0]["p_adjusted"] == above["p_adjusted"]
    assert figure.stat().st_size > 0 and vector.read_bytes()[:5] == b"%PDF-"


def test_the_figure_is_dots_and_whiskers_around_chance_with_empty_rows_and_controls_in_their_own_panel(tmp_path):
    """A metric that scored no pair keeps its row ("no scored pairs"); edit reliability and accuracy get the lower
    panel; a CI that reaches 1 keeps its cap inside the axis; PNG at 300 dpi and a PDF; the caveat is not drawn."""
    results = with_adjusted_p_values(
        [result_entry("factcheck", "perfect", [1.0] * 40), result_entry("factcheck", "silent", [NAN] * 40)]
    )
    doc = document(results) | {
        "model": {"name": "smollm2-135m-instruct", "revision": "r", "dtype": "float32", "device": "cpu"},
        "accuracy": [
            {"task": "factcheck", "direct": 0.6, "direct_ci_low": 0.45, "direct_ci_high": 0.73, "direct_n": 40}
            | {"cot": 0.7, "cot_ci_low": 0.55, "cot_ci_high": 0.82, "cot_n": 40}
        ],
    }
    older = run_figure(doc).axes[1]  # a results file before schema 1.7: no counter-edit row, and n/a in the table
    assert not any("counter" in t.get_text() for t in older.get_yticklabels())
    assert "| factcheck | 1.000 | [0.900, 1.000] | n/a | [n/a, n/a] |" in markdown_table(doc)
    doc["edit_reliability"][0] |= {"counter": 0.8, "counter_ci_low": 0.65, "counter_ci_high": 0.9, "counter_n": 40}
    figure, vector = plot(doc, tmp_path / "r.png")
    top, bottom = run_figure(doc).axes
    assert [t.get_text() for t in top.get_yticklabels()][1].startswith("factcheck · silent · v · D · coverage 0.00")
    assert "no scored pairs" in [t.get_text() for t in top.texts]
    assert [t.get_text() for t in bottom.get_yticklabels()] == [
        "factcheck · edit reliability (n 40)",
        "factcheck · edit reliability, counter edits (n 40)",
        "factcheck · accuracy, direct (n 40)",
        "factcheck · accuracy, CoT (n 40)",
    ]
    assert top.get_xlim()[1] > 1 and top.get_xlim()[0] < 0 and not top.patches, "dots, not bars from 0"
    assert "tiny model" not in (top.get_title() + bottom.get_title())
    with Image.open(figure) as image:
        assert round(image.info["dpi"][0]) == 300
    assert vector.read_bytes()[:5] == b"%PDF-"
    assert "no scored pairs" in markdown_table(doc) and "tiny model" in markdown_table(doc)


def test_the_plot_shows_d_sym_where_roles_were_swapped():
    """The dot is D_sym, and so are the coverage and n in its label (the swapped direction left 10 pairs unscored)."""
    swapped = result_entry("factcheck", "template", [1.0] * 40, d_swap=[0.0] * 30 + [NAN] * 10)
    (label, _, value, low, high), *_ = _bars(document(with_adjusted_p_values([swapped])))
    assert label.startswith("factcheck · template · v · D_sym ·") and value == 0.5 and low < 0.5 < high
    assert label.endswith("coverage 0.75 (n 30/40)")


OLD_RESULT = {
    "task": "factcheck",
    "metric": "random_baseline",
    "variant": "binary",
    "diagnosticity": 1.0,
    "ci_low": 1.0,
    "ci_high": 1.0,
    "p_value": 0.0,
    "n": 4,
    "n_valid": 3,
    "n_nan": 1,
    "seconds": 0.1,
}


def test_a_schema_1_0_results_file_shows_its_missing_columns_as_n_a(tmp_path):
    doc = document([OLD_RESULT]) | {"schema_version": "1.0"}
    row = next(line for line in markdown_table(doc).splitlines() if line.startswith("| factcheck | random"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # D_sym, CI | D (no marker: the file holds no adjusted p), CI | p (sign) | p (Holm), p (t-test) | D_swap ... |
    assert cells[3:5] == ["n/a", "[n/a, n/a]"] and cells[5] == "1.000"
    assert cells[7:10] == ["<0.001", "n/a", "n/a"] and cells[-1] == "n/a (3 / 4)"
    assert [label for label, *_ in _bars(doc)][0] == "factcheck · random_baseline · binary · D · coverage n/a (n 3/4)"
    write_results(doc, tmp_path / "old.json")


def test_a_schema_1_0_file_seeds_the_board_with_every_figure_recomputed(tmp_path):
    d = [1.0] * 19 + [0.0, NAN]
    doc = document([OLD_RESULT]) | {
        "schema_version": "1.0",
        "dataset_versions": {"factcheck": "1.0.0"},
        "pairs": [
            {"id": f"p{i}", "task": "factcheck", "metric": "random_baseline", "variant": "binary"}
            | {"score_faithful": None if math.isnan(x) else x, "score_unfaithful": 0.5}
            | {"d": None if math.isnan(x) else x}
            for i, x in enumerate(d)
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    seed_if_empty(queue, [path])
    board = compute_board(queue.finished_scores())
    estimate = diagnosticity_from_d(d)
    row = board.rows[0]
    assert row.per_task["factcheck"] == estimate and row.p_adjusted["factcheck"] == estimate.p_value
    (shown,) = board_records(board)
    assert (shown["coverage"], shown["n valid"], shown["n"], shown["sig"]) == (20 / 21, 20, 21, ABOVE)
    assert row.mean == pytest.approx((19 + 0.5) / 21), "a declined pair counts as a tie in the ranking"
    exported = board_document(board)[0]["tasks"]["factcheck"]
    assert exported["coverage"] == 20 / 21 and exported["p_adjusted"] == estimate.p_value and exported["p_ttest"] > 0


def test_the_board_resamples_and_sign_tests_the_pairs_of_a_cluster_together_as_the_run_did(tmp_path):
    # 10 subjects of 4 pairs each: 7 subjects won whole, 3 lost whole, so 28 wins of 40 pairs but 7 of 10 subjects
    d = [1.0] * 28 + [0.0] * 12
    clusters = [f"subject {i // 4}" for i in range(40)]
    rows = [
        {"pair_id": f"p{i}", "task": "factcheck", "metric": "random_baseline", "variant": "binary", "cluster": c}
        | {"score_faithful": x, "score_unfaithful": 0.5, "d": x}
        for i, (x, c) in enumerate(zip(d, clusters, strict=True))
    ]
    path = tmp_path / "clustered.json"
    doc = document([OLD_RESULT]) | {"schema_version": "1.8", "dataset_versions": {"factcheck": "1.4.0"}, "pairs": rows}
    path.write_text(json.dumps(doc))
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    seed_if_empty(queue, [path])
    assert [s.row.cluster for s in queue.finished_scores()] == clusters
    shown = compute_board(queue.finished_scores()).rows[0].per_task["factcheck"]
    run, alone = diagnosticity_from_d(d, clusters=clusters), diagnosticity_from_d(d)
    assert shown == run
    assert run.p_value > 0.3 and alone.p_value < 0.05 and run.ci_low < alone.ci_low, "clusters change the figures"
    exported = pd.read_parquet(write_export(queue, tmp_path / "export") / "pairs.parquet")
    assert exported["cluster"].tolist() == clusters


def finished(metric: str, d: np.ndarray, task: str = "factcheck", model: str = "m") -> list[FinishedScore]:
    return [
        FinishedScore(1, model, "main", "auto", "ice", "synthetic", PairScoreRow(f"p{i}", task, metric, "v", x, 0.5, x))
        for i, x in enumerate(d)
    ]


def test_a_nan_selection_artifact_does_not_top_the_board():
    # `selective`: D = 0.60 on 100 pairs, but NaN exactly on the 40 pairs it would lose; `honest` wins 85 of 100
    selective = np.array([1.0] * 60 + [NAN] * 40)
    honest = np.array([1.0] * 45 + [0.0] * 15 + [1.0] * 40)
    board = compute_board(finished("selective", selective) + finished("honest", honest))
    rows = {r.metric: r for r in board.rows}
    assert rows["selective"].per_task["factcheck"].value == 1.0 > rows["honest"].per_task["factcheck"].value
    assert [r.metric for r in board.rows] == ["honest", "selective"], "ranked by coverage-aware D: 0.85 > 0.80"
    assert rows["selective"].mean == pytest.approx(0.8) and rows["honest"].mean == pytest.approx(0.85)
    assert rows["selective"].copeland <= rows["honest"].copeland
    shown = {r["metric"]: r for r in board_records(board)}
    assert (shown["selective"]["coverage"], shown["selective"]["n valid"], shown["selective"]["n"]) == (0.6, 60, 100)
    assert [r["metric"] for r in board_records(board)] == ["honest", "selective"], "the board's order is its ranks"


def test_an_all_nan_metric_is_absent_from_copeland_on_a_toy_board():
    rng = np.random.default_rng(1)
    scores = (
        finished("good", np.ones(40))
        + finished("chance", rng.choice([0.0, 1.0], size=40))
        + finished("never", np.full(40, NAN))
    )
    board = compute_board(scores)
    rows = {r.metric: r for r in board.rows}
    # the old rule gave `never` 0.5 per comparison (1.0 in all) and `chance` 0.5: the metric that never scores won
    assert (rows["good"].copeland, rows["chance"].copeland) == (1.0, 0.0)
    assert math.isnan(rows["never"].copeland) and math.isnan(rows["never"].mean) and board.rows[-1].metric == "never"
    never = next(r for r in board_records(board) if r["metric"] == "never")
    assert math.isnan(never["mean D"]) and math.isnan(never["Copeland"]) and math.isnan(never["D"])
    assert (never["coverage"], never["n valid"], never["n"], never["sig"]) == (0.0, 0, 40, "")
