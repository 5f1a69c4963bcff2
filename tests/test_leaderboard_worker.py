"""The worker's task runner: model jobs and submitted-metric jobs read their pairs and make their per-pair rows with
the runner's functions, so a stored job holds exactly the rows `causaldiag run` writes."""

from __future__ import annotations

import numpy as np
import pytest

from recoe_causaldiag.api.run_spec import RunSpec
from recoe_causaldiag.hub_layout import load_pairs
from recoe_causaldiag.leaderboard import worker
from recoe_causaldiag.leaderboard.metric_sandbox import MetricRunError, SubmittedScores
from recoe_causaldiag.leaderboard.queue import METRIC_JOB, MODEL_JOB, Job, JobRequest, utc_now
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.runner import run
from recoe_causaldiag.task_pairs import select_pairs
from recoe_causaldiag.tasks import DATASET_VERSION


def running(job_id: int, request: JobRequest, pair_cap: int, approved_sha256: str | None = None) -> Job:
    return Job(
        job_id, request, pair_cap, "alice", "RUNNING", "", "", "w", 1, utc_now(), None, None, None, approved_sha256
    )


def test_model_jobs_store_the_rows_a_run_writes(default_lm, factcheck_dir, tmp_path):
    runner = worker.LibraryTaskRunner(
        LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}"), data_dir=factcheck_dir.parent
    )
    runner._loaded = (("smollm2-135m-instruct", "main", "auto"), default_lm)  # the session's model, not a reload
    request = JobRequest(
        MODEL_JOB,
        "smollm2-135m-instruct",
        "main",
        "auto",
        "ice",
        "synthetic",
        ("factcheck",),
        ("random_baseline", "oracle"),
    )
    lines: list[str] = []
    outcome = runner(running(1, request, 3), "factcheck", lines.append)
    spec = RunSpec(
        model="smollm2-135m-instruct",
        revision="main",
        tasks=("factcheck",),
        metrics=("random_baseline", "oracle"),
        limit=3,
        swap=False,
    )
    assert [row.to_json() for row in outcome.rows] == run(
        spec, lm=default_lm, data_dir=factcheck_dir.parent, progress=False
    )["pairs"]
    assert outcome.dataset_version == DATASET_VERSION and {row.metric for row in outcome.rows} == {
        "random_baseline",
        "oracle",
    }
    assert any(line.startswith("factcheck · random_baseline · ") for line in lines)


def test_submitted_metric_jobs_make_rows_with_the_same_functions(factcheck_dir, tmp_path, monkeypatch):
    def sandbox(source, model, pairs, **limits):
        assert limits["sha256"] == "ab" * 32, "the sandbox runs the approved module only"
        return SubmittedScores(
            "length",
            np.array([len(p.explanation_faithful) for p in pairs], float),
            np.array([np.nan] + [len(p.explanation_unfaithful) for p in pairs[1:]], float),
        )

    monkeypatch.setattr(worker, "score_submitted_metric", sandbox)
    runner = worker.LibraryTaskRunner(
        LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}"), data_dir=factcheck_dir.parent
    )
    request = JobRequest(
        METRIC_JOB,
        "smollm2-135m-instruct",
        "main",
        "auto",
        "ice",
        "synthetic",
        ("factcheck",),
        ("my_metric",),
        "/tmp/my_metric",
    )
    with pytest.raises(MetricRunError, match="no approved module hash"):
        runner(running(2, request, 4), "factcheck", lambda line: None)
    outcome = runner(running(2, request, 4, "ab" * 32), "factcheck", lambda line: None)
    pairs = select_pairs(load_pairs(factcheck_dir), 4, 0)
    assert [row.pair_id for row in outcome.rows] == [p.id for p in pairs] and outcome.dataset_version == DATASET_VERSION
    assert {(row.task, row.metric, row.variant) for row in outcome.rows} == {("factcheck", "my_metric", "length")}
    assert outcome.rows[0].to_json()["d"] is None
    for row, pair in list(zip(outcome.rows, pairs))[1:]:
        faithful, unfaithful = len(pair.explanation_faithful), len(pair.explanation_unfaithful)
        assert row.d == (1.0 if faithful > unfaithful else 0.5 if faithful == unfaithful else 0.0)


class ModelLoaded(Exception):
    """Where the task would load the model and score."""


def test_a_task_never_scores_a_model_cache_that_fails_its_sha256_check(factcheck_dir, tmp_path, monkeypatch):
    checked: list[str] = []

    def corrupted(name: str) -> bool:
        checked.append(name)
        return False

    def load(self, spec, write):
        raise ModelLoaded(self._loaded)

    monkeypatch.setattr(worker, "verify_packaged_model", corrupted)
    monkeypatch.setattr(worker.LibraryTaskRunner, "_model", load)
    runner = worker.LibraryTaskRunner(
        LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'q.sqlite'}"), data_dir=factcheck_dir.parent
    )
    runner._loaded = (("smollm2-135m-instruct", "main", "auto"), object())
    request = JobRequest(
        MODEL_JOB, "smollm2-135m-instruct", "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",)
    )
    lines: list[str] = []
    with pytest.raises(ModelLoaded) as loaded:
        runner(running(1, request, 2), "factcheck", lines.append)
    assert checked == ["smollm2-135m-instruct"] and loaded.value.args == (None,), "the old model is dropped first"
    assert lines == ["the converted cache of smollm2-135m-instruct failed its sha256 check and was rebuilt"]
