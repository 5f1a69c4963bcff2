"""Nothing unvalidated reaches the board (issue 14): a submitted metric's answer is checked in the worker before any
of it becomes a score, every per-pair row is checked before it is stored, names are limited to one safe set, the
plot draws every stored string literally, and a row written around the queue shows as invalid while the rest of
the board renders as usual, through the Space's own Leaderboard functions."""

from __future__ import annotations

import html
import importlib.util
import json
import math
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fakes import claim_pair
from submitted_modules import submitted_module

from recoe_causaldiag.api.instance import VariantScores
from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.api.run_spec import DatasetIdentity
from recoe_causaldiag.leaderboard import metric_sandbox, service, worker
from recoe_causaldiag.leaderboard.board import compute_board
from recoe_causaldiag.leaderboard.integrity import SAFE_NAME, InvalidData, check_name
from recoe_causaldiag.leaderboard.metric_sandbox import MetricRunError, read_answer
from recoe_causaldiag.leaderboard.module_source import ModuleSource
from recoe_causaldiag.leaderboard.queue import FAILED, METRIC_JOB, MODEL_JOB, FinishedScore, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.render import INVALID_ROW, board_plot, board_records
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.statistics import diagnosticity_from_d
from recoe_causaldiag.task_pairs import TaskPairs

ROOT = Path(__file__).resolve().parents[1]
MATHTEXT = r"$\undefinedmacro{x}$"
HTML = '<a href="javascript:alert(1)">x</a><br><b>bold</b>'

MEGABYTE = "x" * 2**20
HOSTILE_TEXT = [MATHTEXT, "$$", "$\\frac{1}{$", "a\\", "\x00\n\u202e\x1b[31m", "😀" * 50, MEGABYTE]


def request(model: str = "m", metrics: tuple[str, ...] = ("random_baseline",)) -> JobRequest:
    return JobRequest(MODEL_JOB, model, "main", "auto", "ice", "synthetic", ("factcheck",), metrics)


def good_rows(n: int = 12, variant: str = "v") -> list[PairScoreRow]:
    """Scored pairs whose d is the outcome of their scores (one declined)."""
    scores = [(1.0, 0.0), (0.0, 1.0), (2.0, 2.0), (1.0, 0.5)] * (n // 4)
    rows = [
        PairScoreRow(f"p{i}", "factcheck", "random_baseline", variant, f, u, (f > u) + 0.5 * (f == u))
        for i, (f, u) in enumerate(scores)
    ]
    return [*rows[:-1], PairScoreRow(f"p{n - 1}", "factcheck", "random_baseline", variant, math.nan, 1.0, math.nan)]


def short_and_path_free(reason: str, *paths: Path) -> bool:
    return len(reason) < 240 and "/" not in reason and not any(str(p) in reason for p in paths)


# 1. a submitted metric's answer: finite floats or NaN, one per explanation, a safe variant name


def answer_file(tmp_path: Path, answer: object | str) -> Path:
    path = tmp_path / "out.json"
    path.write_text(answer if isinstance(answer, str) else json.dumps(answer), encoding="utf-8")
    return path


def test_an_answer_of_finite_scores_and_declines_is_read_as_faithful_and_unfaithful_scores(tmp_path):
    """null and NaN are declined scores (NaN), which the statistics count as declined pairs; ints are numbers."""
    path = answer_file(tmp_path, '{"variant": "length v2", "scores": [1.5, null, NaN, 2, -1e308, 0]}')
    scored = read_answer(path, 3)
    assert scored.variant == "length v2"
    np.testing.assert_array_equal(scored.faithful, [1.5, np.nan, -1e308])
    np.testing.assert_array_equal(scored.unfaithful, [np.nan, 2.0, 0.0])
    claims = (claim_pair(0), claim_pair(1), claim_pair(2))
    pairs = TaskPairs("factcheck", DatasetIdentity("factcheck", "1.0.0", "0" * 64), claims)
    rows = pairs.score_rows("mine", VariantScores(scored.variant, scored.faithful, scored.unfaithful))
    estimate = diagnosticity_from_d([row.d for row in rows])
    assert (estimate.n, estimate.n_valid, estimate.n_nan, estimate.value) == (3, 1, 2, 0.0)


@pytest.mark.parametrize(
    "answer, why",
    [
        ('{"variant": "v", "scores": [Infinity, 0.0, 1.0, 0.0]}', "score 0 is infinite"),
        ('{"variant": "v", "scores": [1.0, -Infinity, 1.0, 0.0]}', "score 1 is infinite"),
        ('{"variant": "v", "scores": [1.0, 1e400, 1.0, 0.0]}', "score 1 is infinite"),
        ('{"variant": "v", "scores": [1.0, 0.0, 1' + "0" * 400 + ", 0.0]}", "score 2 is too large for a float"),
        ({"variant": "v", "scores": ["1", 0.0, 1.0, 0.0]}, "score 0 is a str, not a number"),
        ({"variant": "v", "scores": "1010"}, "scores is a str, not a list of 4 numbers"),
        ({"variant": "v", "scores": [True, False, 1.0, 0.0]}, "score 0 is a bool, not a number"),
        ({"variant": "v", "scores": None}, "scores is null, not a list"),
        ({"variant": "v"}, "scores is null, not a list"),
        ({"variant": "v", "scores": [[1.0], [0.0], [1.0], [0.0]]}, "score 0 is a list, not a number"),
        ({"variant": "v", "scores": [{"a": 1}, 0.0, 1.0, 0.0]}, "score 0 is a dict, not a number"),
        ({"variant": "v", "scores": [1.0, 0.0, 1.0]}, "scores holds 3 entries, not 4"),
        ({"variant": "v", "scores": [1.0, 0.0, 1.0, 0.0, 1.0]}, "scores holds 5 entries, not 4"),
        ({"variant": MEGABYTE, "scores": [1.0, 0.0, 1.0, 0.0]}, "variant must be 1-64 .* 1048576 characters"),
        ({"variant": MATHTEXT, "scores": [1.0, 0.0, 1.0, 0.0]}, "variant must be 1-64"),
        ({"variant": "../../etc/passwd", "scores": [1.0, 0.0, 1.0, 0.0]}, "variant must be 1-64"),
        ({"variant": 5, "scores": [1.0, 0.0, 1.0, 0.0]}, "variant is a int, not text"),
        ({"variant": None, "scores": [1.0, 0.0, 1.0, 0.0]}, "variant is null, not text"),
        ([1.0, 0.0, 1.0, 0.0], "not an object"),
        ("[" * 100_000 + "]" * 100_000, "not JSON"),
        ("not json at all", "not JSON"),
    ],
)
def test_a_hostile_answer_is_refused_with_a_short_path_free_reason(tmp_path, answer, why):
    with pytest.raises(MetricRunError) as refused:
        read_answer(answer_file(tmp_path, answer), 2)
    assert re.search(why, str(refused.value)), str(refused.value)[:300]
    assert short_and_path_free(str(refused.value), tmp_path)


def test_a_missing_or_oversized_answer_is_refused_without_reading_it(tmp_path, monkeypatch):
    with pytest.raises(MetricRunError, match="wrote no answer") as refused:
        read_answer(tmp_path / "out.json", 2)
    assert short_and_path_free(str(refused.value), tmp_path)
    monkeypatch.setattr(metric_sandbox, "MAX_ANSWER_BYTES", 100)
    with pytest.raises(MetricRunError, match="over 100 bytes"):
        read_answer(answer_file(tmp_path, {"variant": "v", "scores": [0.0] * 40}), 20)


HOSTILE_METRIC = submitted_module("Hostile", 'return {"variant": "v", "scores": [float("inf")] * len(explanations)}')


def test_a_submitted_metric_returning_infinite_scores_fails_its_job_and_stores_nothing(tmp_path, monkeypatch):
    """The whole path: the module's +inf goes through the child as JSON, the worker refuses it, the job is FAILED
    with a short path-free reason, and the board stays empty."""
    module = tmp_path / "hostile"
    module.mkdir()
    (module / "hostile.py").write_text(HOSTILE_METRIC)
    pairs = TaskPairs("factcheck", DatasetIdentity("factcheck", "1.0.0", "0" * 64), (claim_pair(0), claim_pair(1)))
    monkeypatch.setattr(worker, "iter_task_pairs", lambda *args, **kwargs: iter([pairs]))
    if metric_sandbox.landlock.abi_version() == 0:  # the check under test is the parent's, not the confinement
        monkeypatch.setattr(metric_sandbox.landlock, "abi_version", lambda: 1)
        monkeypatch.setattr(metric_sandbox, "confine_self", lambda confinement: None)
    settings = LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}", metric_time_limit_s=120)
    queue = JobQueue.open(settings.db_url)
    hostile = JobRequest(
        METRIC_JOB,
        "smollm2-135m-instruct",
        "main",
        "auto",
        "ice",
        "synthetic",
        ("factcheck",),
        ("hostile",),
        str(module),
    )
    job = queue.submit(hostile, "alice", pair_cap=None).job
    assert queue.approve(job.id, ModuleSource.read(module).sha256)
    ended = worker.Worker(queue, settings).run_once()
    assert (ended.id, ended.status) == (job.id, FAILED)
    assert ended.reason == "MetricRunError: the submitted metric returned an invalid answer: score 0 is infinite"
    assert short_and_path_free(ended.reason, tmp_path) and queue.stored_scores().valid == []


# 2. every row is checked before it is stored; names from one safe set


def poisoned(**fields) -> PairScoreRow:
    row = PairScoreRow("p0", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0)
    return PairScoreRow(**{**row.__dict__, **fields})


@pytest.mark.parametrize(
    "row, why",
    [
        (poisoned(score_faithful=math.inf), "score_faithful is infinite"),
        (poisoned(score_unfaithful=-math.inf, d=1.0), "score_unfaithful is infinite"),
        (poisoned(score_faithful="5"), "score_faithful is a str, not a number"),
        (poisoned(score_faithful=True), "score_faithful is a bool, not a number"),
        (poisoned(score_unfaithful=None), "score_unfaithful is null, not a number"),
        (poisoned(d=[1.0]), "d is a list, not a number"),
        (poisoned(d=7.0), "d is not the outcome of the two scores"),
        (poisoned(d=0.0), "d is not the outcome of the two scores"),
        (poisoned(score_faithful=math.nan), "d is not the outcome of the two scores"),
        (poisoned(variant=MEGABYTE), "variant must be 1-64 .* 1048576 characters"),
        (poisoned(variant=MATHTEXT), "variant must be 1-64"),
        (poisoned(variant=" v"), "variant must be 1-64"),
        (poisoned(variant=None), "variant is null, not text"),
        (poisoned(metric="a/b"), "metric must be 1-64"),
        (poisoned(metric="random · v"), "metric must be 1-64"),
        (poisoned(task="factcheck\n"), "task must be a task name"),
        (poisoned(pair_id="p" * 121), "pair id must be 1-120"),
        (poisoned(cluster=MEGABYTE), "cluster must be 1-200 printable characters .* 1048576"),
        (poisoned(cluster="Lou\nGehrig"), "cluster must be 1-200 printable"),
        (poisoned(cluster=""), "cluster must be 1-200 printable"),
        (poisoned(cluster=["Lou Gehrig"]), "cluster is a list, not text"),
    ],
)
def test_a_row_that_fails_the_checks_is_never_stored(tmp_path, row, why):
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    job = queue.submit(request(), "alice", pair_cap=None).job
    assert queue.claim("w").id == job.id
    with pytest.raises(InvalidData, match=why) as refused:
        queue.record_task(job.id, "w", "factcheck", "1.0.0", 1.0, [*good_rows(4), row])
    with pytest.raises(InvalidData, match=why):
        queue.store_finished(request("imported"), "results file", [("factcheck", "1.0.0", [row])], "imported")
    assert queue.done_tasks(job.id) == set() and [j.request.model for j in queue.jobs()] == ["m"], "nothing was written"
    assert queue.record_task(job.id, "w", "factcheck", "1.0.0", 1.0, good_rows(4)), "the task is still open"
    assert short_and_path_free(str(refused.value))


def test_names_are_one_safe_set_that_every_library_metric_fits():
    for name in METRICS.names():
        assert check_name("metric", name) == name
        assert all(check_name("variant", v) == v for v in METRICS.get(name)().variants), name
    assert SAFE_NAME.fullmatch("paraphrase-continuous v1.2") and SAFE_NAME.fullmatch("x" * 64)
    for name in [*HOSTILE_TEXT, "x" * 65, "", " lead", "trail ", "a/b", "a·b", "tab\t", "<b>", "naïve"]:
        with pytest.raises(InvalidData):
            check_name("variant", name)


def test_a_request_with_an_unsafe_metric_name_is_not_stored(tmp_path):
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    with pytest.raises(InvalidData, match="metric must be 1-64"):
        queue.submit(request(metrics=(MEGABYTE,)), "alice", pair_cap=None)
    assert queue.jobs() == []


# 3. the plot draws every stored string literally


def drawn(figure) -> list[str]:
    """The plot's row labels as Plotly draws them: its markup-free text, HTML entities decoded (what a reader sees),
    after checking that the label text as sent holds no tag Plotly would interpret."""
    labels = list(figure.data[0].y)
    assert not any("<" in label or ">" in label for label in labels), "Plotly would read a tag"
    figure.to_json()
    return [html.unescape(label) for label in labels]


def test_the_plot_draws_any_stored_string_literally():
    hostile = [*HOSTILE_TEXT, HTML]
    scores = [
        FinishedScore(job_id, model, "main", "auto", "ice", "synthetic", row)
        for job_id, model in enumerate(hostile, 1)
        for row in good_rows()
    ]
    board = compute_board(scores)
    labels = drawn(board_plot(board_records(board)))
    assert len(labels) == len(hostile)
    assert MATHTEXT + " · random_baseline · v · factcheck · coverage 0.92, n=12" in labels
    assert HTML + " · random_baseline · v · factcheck · coverage 0.92, n=12" in labels
    assert max(map(len, labels)) < 200, "a 1 MB name is cut short"


# 4. a row written around the queue shows as invalid; the rest of the board renders as usual


POISONS = {
    "+inf score": ("v", "9e999", "0.0", "1.0"),
    "-inf score": ("v", "1.0", "-9e999", "1.0"),
    "text score": ("v", "'abc'", "0.0", "1.0"),
    "blob score": ("v", "x'00ff'", "0.0", "1.0"),
    "huge d": ("v", "1.0", "0.0", "1e308"),
    "mathtext variant": (MATHTEXT, "1.0", "0.0", "1.0"),
    "1 MB variant": (MEGABYTE, "1.0", "0.0", "1.0"),
}


def stored_board(tmp_path: Path) -> tuple[str, list[PairScoreRow]]:
    """A queue holding one finished job of model m1 and one of model m2; the database URL and m1's rows."""
    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    queue = JobQueue.open(url)
    rows = good_rows()
    for model in ("m1", "m2"):
        queue.store_finished(request(model), "results file", [("factcheck", "1.0.0", rows)], "imported")
    return url, rows


def poison(database: Path, job_id: int, variant: str, faithful: str, unfaithful: str, d: str) -> None:
    """Add a per-pair score to a finished job with plain SQL, around the queue and its checks."""
    with sqlite3.connect(database) as connection:
        connection.execute(
            "INSERT INTO pair_scores (job_id, task, metric, variant, pair_id, score_faithful, score_unfaithful, d) "
            f"VALUES (?, 'factcheck', 'random_baseline', ?, 'poison', {faithful}, {unfaithful}, {d})",
            (job_id, variant),
        )


@pytest.mark.parametrize("name", POISONS)
def test_a_poisoned_row_shows_as_invalid_and_the_rest_of_the_board_as_usual(tmp_path, name):
    url, rows = stored_board(tmp_path)
    variant = POISONS[name][0]
    poison(tmp_path / "q.sqlite", 2, *POISONS[name])
    stored = JobQueue.open(url).stored_scores()
    assert [(s.job_id, s.variant) for s in stored.invalid] == [(2, variant)]
    board = compute_board(stored.valid, invalid=stored.invalid)
    first_job = [s for s in stored.valid if s.job_id == 1]
    assert [s.row for s in first_job] == rows
    alone = compute_board(first_job)
    assert [r for r in board.rows if r.model == "m1"] == list(alone.rows), "m1 as usual"
    kept = [r.model for r in board.rows if r.model == "m2"]
    assert kept == ([] if variant == "v" else ["m2"]), "the poisoned job cell is left out whole, other cells stay"
    records = board_records(board)
    assert records[0] == board_records(alone)[0]
    invalid = records[-1]
    assert (invalid["model"], invalid["precision"], invalid["task"]) == ("m2", "auto", "factcheck")
    assert invalid["note"].startswith(f"{INVALID_ROW}: job #2") and math.isnan(invalid["D"])
    assert max(len(str(v)) for v in invalid.values()) < 400 and drawn(board_plot(records))


def space_functions(leaderboard: Leaderboard) -> tuple:
    """The Space's `/leaderboard` API function and the function that fills the Leaderboard tab (table, plot,
    records, downloads) when the page loads, from the app as `make space` builds it."""
    spec = importlib.util.spec_from_file_location("leaderboard_space_app", ROOT / "leaderboard_space" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    functions = list(app.build(leaderboard).fns.values())
    api = next(f for f in functions if f.api_name == "leaderboard")
    tab = next(f for f in functions if f.fn.__name__ == "show_board")
    return api, tab


def test_the_leaderboard_tab_and_api_render_around_poisoned_rows(tmp_path):
    """Every poison at once, written into the database of a running deployment; the `/leaderboard` API and the
    Leaderboard tab (table, plot and downloads, through their Gradio components) still render, m1 as usual."""
    url, rows = stored_board(tmp_path)
    queue = JobQueue.open(url)
    for job_id, name in enumerate(POISONS, 3):
        queue.store_finished(request(f"job{job_id}"), "results file", [("factcheck", "1.0.0", rows)], "imported")
        poison(tmp_path / "q.sqlite", job_id, *POISONS[name])
    with sqlite3.connect(tmp_path / "q.sqlite") as connection:  # a drawn label: a model name holding mathtext
        connection.execute("UPDATE jobs SET model = ? WHERE id = 2", (MATHTEXT,))
    api, tab = space_functions(Leaderboard(LeaderboardSettings(db_url=url)))
    table = api.fn("", "all")
    invalid = table["note"].str.startswith(INVALID_ROW)
    poisoned_cell_only = {f"job{j}" for j, name in enumerate(POISONS, 3) if POISONS[name][0] != "v"}
    assert set(table["model"][~invalid]) == {MATHTEXT, "m1", *poisoned_cell_only}
    assert len(set(table["D"][~invalid])) == 1 and not table["D"][~invalid].isna().any(), "every valid row as usual"
    assert list(table["model"][invalid]) == [f"job{j}" for j in range(3, 3 + len(POISONS))]
    assert table["D"][invalid].isna().all()
    assert api.outputs[0].postprocess(table).data
    shown_table, plot, records, files = tab.fn("", "factcheck", "all", "all", "all", "all", None)
    assert len(shown_table.value["data"]) == len(table) and tab.outputs[1].postprocess(plot) is not None
    assert any(label.startswith(MATHTEXT) for label in drawn(plot)) and len(records) == len(table)
    assert [Path(f).suffix for f in files] == [".csv", ".parquet"] and len(pd.read_parquet(files[1])) == len(table)


def test_a_host_missing_a_containment_layer_runs_no_metric_unless_the_operator_allows_it(tmp_path, monkeypatch):
    reduced = metric_sandbox.Containment(tuple(layer for layer in metric_sandbox.LAYERS if layer != "pid namespace"))
    monkeypatch.setattr(metric_sandbox, "host_containment", lambda: reduced)
    monkeypatch.setattr(service, "host_containment", lambda: reduced)
    monkeypatch.setattr(metric_sandbox, "_stage", lambda *args: pytest.fail("staged a refused metric"))
    with pytest.raises(MetricRunError, match=r"reduced on this host \(missing: pid namespace\)"):
        metric_sandbox.score_submitted_metric(
            str(tmp_path), "smollm2-135m-instruct", [claim_pair(0)], time_limit_s=5, secrets=()
        )
    assert "missing: pid namespace" in reduced.describe(False) and "refused" in reduced.describe(False)
    assert "as the operator allows" in reduced.describe(True)
    full = metric_sandbox.Containment(metric_sandbox.LAYERS)
    assert full.missing == () and full.describe(False).startswith("Submitted metrics run fully contained")
    settings = LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}", allow_reduced_containment=True)
    assert "as the operator allows" in Leaderboard(settings).containment_status()


def test_a_module_changed_after_its_approval_is_never_run(tmp_path, monkeypatch):
    module = tmp_path / "reviewed"
    module.mkdir()
    (module / "reviewed.py").write_text("# the reviewed module\n")
    approved = ModuleSource.read(module).sha256
    (module / "reviewed.py").write_text("# swapped after the review\n")
    monkeypatch.setattr(metric_sandbox, "_run_child", lambda *args: pytest.fail("ran a module that was not approved"))
    with pytest.raises(MetricRunError, match="not the one the admin approved"):
        metric_sandbox.score_submitted_metric(
            str(module),
            "smollm2-135m-instruct",
            [claim_pair(0)],
            time_limit_s=5,
            secrets=(),
            sha256=approved,
            allow_reduced=True,
        )


READS_ITS_MODEL = submitted_module(
    "ReadsItsModel",
    """
            size = len(open(os.path.join(model, "config.json")).read())
            return {"variant": "v", "scores": [float(size)] * len(explanations)}
""",
    "import os",
)


@pytest.mark.skipif(metric_sandbox.landlock.abi_version() < 1, reason="needs a kernel with Landlock")
def test_a_hub_model_is_fetched_by_the_worker_and_read_through_its_cache_links(tmp_path, monkeypatch):
    """The metric's process has no network: the worker fetches the model's files, and the sandbox may read the
    snapshot and the blobs its links point to (the Hub cache layout)."""
    import huggingface_hub

    repo = tmp_path / "hub" / "models--org--model"
    snapshot = repo / "snapshots" / "abc123"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    (repo / "blobs" / "0f0f").write_text('{"model_type": "llama"}')
    (snapshot / "config.json").symlink_to(repo / "blobs" / "0f0f")
    fetched = []

    def snapshot_download(repo_id, *, revision):
        fetched.append((repo_id, revision))
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    module = tmp_path / "reads_its_model"
    module.mkdir()
    (module / "reads_its_model.py").write_text(READS_ITS_MODEL)
    scored = metric_sandbox.score_submitted_metric(
        str(module), "org/model", [claim_pair(0)], time_limit_s=120, secrets=(), revision="v1", allow_reduced=True
    )
    assert fetched == [("org/model", "v1")] and list(scored.faithful) == [23.0]
