"""ReCoE evaluation: answer matching, §5.1 effectiveness, the library run on the real default model, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from recoe_causaldiag.api.registry import UnknownNameError
from recoe_causaldiag.dataset_building import build_dataset
from recoe_causaldiag.tasks import DATASET_VERSION
from recoe_causaldiag.tasks.recoe import RECOE_SCHEMES
from recoe_causaldiag.tasks.recoe.evaluation import (
    RecoeEvalSpec,
    edited_effectively,
    evaluate_recoe,
    final_answer,
    match,
    recoe_table,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("recoe_data")
    build_dataset("recoe", out)
    return out


def causaldiag(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recoe_causaldiag.cli", *args], capture_output=True, text=True, timeout=900
    )


@pytest.mark.parametrize(
    "prediction, expected",
    [
        ("Mount Everest is higher.", "answer"),
        ("everest", "answer"),
        ("The answer is K2.", "counterfactual"),
        ("K2 is higher than Mount Everest.", "counterfactual"),
        ("Lhotse", "none"),
        ("1,234 metres", "answer"),
        ("12345", "none"),
    ],
)
def test_alias_aware_match(prediction: str, expected: str) -> None:
    answer, counterfactual = ("Mount Everest", "Everest", "1,234"), ("K2", "Chhogori")
    assert match(prediction, answer, counterfactual) == expected


def test_number_forms_and_sorted_lists_match() -> None:
    assert match("They have 1234567 inhabitants", ("1,234,567",), ("1,300,000",)) == "answer"
    assert match("Nine.", ("9", "nine"), ("8", "eight")) == "answer"
    assert match("Elbe, Rhine, Danube", ("Rhine, Elbe, Danube",), ("Elbe, Rhine, Danube",)) == "counterfactual"


def test_final_answer_takes_the_cot_cue_or_the_first_line() -> None:
    assert final_answer("A is 3. The best answer is: Oslo", "cot") == "Oslo"
    assert final_answer("\nOslo\nmore text", "direct") == "Oslo"


def test_fact_wise_effectiveness_needs_a_larger_gap_than_before() -> None:
    before = {"facts_before": 10.0, "counterfactuals_before": 14.0}
    assert edited_effectively({**before, "facts_after": 5.0, "counterfactuals_after": 3.0})
    assert not edited_effectively({**before, "facts_after": 3.0, "counterfactuals_after": 5.0})
    already = {"facts_before": 14.0, "counterfactuals_before": 10.0}
    assert not edited_effectively({**already, "facts_after": 6.0, "counterfactuals_after": 3.0})
    assert edited_effectively({**already, "facts_after": 8.0, "counterfactuals_after": 3.0})


def test_bad_spec_is_refused() -> None:
    with pytest.raises(UnknownNameError, match="unknown editor 'mend'"):
        RecoeEvalSpec(model="m", editor="mend")
    with pytest.raises(ValueError, match="editor rome has no option 'layres'"):
        RecoeEvalSpec(model="m", editor="rome", editor_options=(("layres", 3),))
    with pytest.raises(UnknownNameError, match="unknown prompt style 'few-shot'"):
        RecoeEvalSpec(model="m", prompt="few-shot")
    with pytest.raises(UnknownNameError, match="unknown recoe scheme"):
        RecoeEvalSpec(model="m", schemes=("sortin",))


def test_library_run_on_the_default_model(default_lm, data_dir: Path) -> None:
    spec = RecoeEvalSpec(model="smollm2-135m-instruct", schemes=("comparative", "counting"), limit=1)
    doc = evaluate_recoe(spec, lm=default_lm, data_dir=data_dir, progress=False)
    assert [r["scheme"] for r in doc["results"]] == ["comparative", "counting"]
    assert len(doc["items"]) == 2 and doc["dataset_versions"] == {
        "recoe/comparative": DATASET_VERSION,
        "recoe/counting": DATASET_VERSION,
    }
    for row in doc["results"]:
        assert row["n"] == 1 and 0 <= row["n_flipped"] <= row["n_original"] <= 1
        assert row["correct_flip"] is None if row["n_original"] == 0 else 0 <= row["correct_flip"] <= 1
        assert 0 <= row["fact_edit_effectiveness"] <= 1 and row["facts_before"] > 1
    for item in doc["items"]:
        assert item["match_before"] in ("answer", "counterfactual", "none")
        assert item["fact_edit_success"] == edited_effectively(item["ppl"])
    assert "| comparative | 1 |" in recoe_table(doc)


@pytest.mark.slow
def test_recoe_under_rome_writes_each_items_counterfactual_facts_into_the_weights(default_lm, data_dir: Path) -> None:
    spec = RecoeEvalSpec(
        model="smollm2-135m-instruct",
        editor="rome",
        schemes=("comparative",),
        limit=1,
        editor_options=(("covariance", "identity"),),
    )
    before = {name: p.detach().clone() for name, p in default_lm.model.named_parameters()}
    doc = evaluate_recoe(spec, lm=default_lm, data_dir=data_dir, progress=False)
    (item,) = doc["items"]
    assert doc["editor"] == "rome" and doc["run_spec"]["editor_statistics"] == [{"covariance": "identity"}]
    # the facts are in the weights, not the prompt: their perplexity moves although the prompt text does not change
    assert item["ppl"]["counterfactuals_after"] != item["ppl"]["counterfactuals_before"]
    assert item["fact_edit_success"] == edited_effectively(item["ppl"])
    assert all(torch.equal(p, before[name]) for name, p in default_lm.model.named_parameters())


@pytest.mark.slow
def test_cli_prints_correct_flip_per_scheme(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "recoe.json"
    done = causaldiag(
        "recoe-eval",
        "--model",
        "smollm2-135m-instruct",
        "--editor",
        "ice",
        "--limit",
        "1",
        "--data-dir",
        str(data_dir),
        "--out",
        str(out),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert "correct_flip" in done.stdout
    assert all(f"| {scheme} | 1 |" in done.stdout for scheme in RECOE_SCHEMES)
    doc = json.loads(out.read_text())
    assert [r["scheme"] for r in doc["results"]] == list(RECOE_SCHEMES) and doc["prompt"] == "direct"


@pytest.mark.slow
def test_cli_run_on_a_recoe_task(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = causaldiag(
        "run",
        "--task",
        "recoe/comparative",
        "--metric",
        "filler_tokens",
        "--limit",
        "8",
        "--data-dir",
        str(data_dir),
        "--out",
        str(out),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert {r["task"] for r in doc["results"]} == {"recoe/comparative"}
    assert all(r["n"] == 8 for r in doc["results"])
