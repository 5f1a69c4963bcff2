"""Weight editors in a run (issue 15): prompts carry no facts and run on the weights of their own edits, grouped by
edit, with the loaded weights restored bit for bit; a run reports its edits' quality, records the editor's settings
and key statistics, and reproduces D from its per-pair rows; bad input is refused naming what to change."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from recoe_causaldiag import prompts
from recoe_causaldiag.api.records import PairRecord, Rewrite
from recoe_causaldiag.api.run_spec import RunSpec
from recoe_causaldiag.cli import main
from recoe_causaldiag.editors.editing import IN_CONTEXT, WeightEditor, editor_options, make_editor
from recoe_causaldiag.editors.rome import RomeOptions, rome_deltas
from recoe_causaldiag.editors.settings import ARCHITECTURES, ValueSearch
from recoe_causaldiag.editors.weights import EditError, edited
from recoe_causaldiag.runner import run, with_edits_written
from recoe_causaldiag.scoring import LabelRequest, ScoringEngine
from recoe_causaldiag.task_pairs import TaskPairs

FACT = "The capital of France is Rome."
COUNTER_FACT = "The capital of France is Berlin."
IDENTITY = (("covariance", "identity"),)


def capital_pair(index: int = 0, subject: str = "France") -> PairRecord:
    """A FactCheck-shaped pair whose edits are written as capital rewrites."""
    return PairRecord(
        f"factcheck-default-{index}",
        "factcheck",
        f"Is the capital of {subject} Paris?",
        ("Yes", "No"),
        "No",
        (f"The capital of {subject} is Rome.",),
        (f"The capital of {subject} is Berlin.",),
        f"The capital of {subject} is Rome, not Paris.",
        f"The capital of {subject} is Berlin, not Paris.",
        rewrites=(Rewrite("The capital of {} is", subject, "Rome", "Paris"),),
        counter_rewrites=(Rewrite("The capital of {} is", subject, "Berlin", "Paris"),),
    )


@pytest.fixture(scope="module")
def rome(default_lm):
    editor = make_editor("rome", default_lm, IDENTITY)
    editor.learn([capital_pair()])
    return editor


def test_a_weight_editor_asks_without_facts_and_ice_tells_them(rome):
    prompt = prompts.direct([FACT], "Is the capital of France Paris?")
    assert IN_CONTEXT.conversation(prompt)[0].content == prompts.ice([FACT], "Is the capital of France Paris?")
    assert rome.conversation(prompt) == (prompts.user("Is the capital of France Paris?"),)
    assert rome.state(prompt) == (FACT,) and IN_CONTEXT.state(prompt) == ()


def test_each_prompt_runs_on_its_own_edit_and_the_weights_come_back(default_lm, rome):
    model = default_lm.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    question = "What is the capital of France? Answer with one word."
    requests = [LabelRequest(prompts.direct(edits, question), ("Paris", "Rome")) for edits in ([FACT], [], [FACT])]
    edited_probs, unedited_probs, again = ScoringEngine(default_lm, editor=rome, progress=False).label_probs(requests)
    np.testing.assert_array_equal(edited_probs, again)
    # the same prompts scored by hand: the unedited model, and the model holding the edit's deltas
    plain = ScoringEngine(default_lm, editor=rome, progress=False)
    (unedited,) = plain.label_probs([LabelRequest(prompts.direct([], question), ("Paris", "Rome"))])
    with edited(model, rome_deltas(default_lm, rome.written((FACT,)), rome.settings)):
        (by_hand,) = ScoringEngine(default_lm, progress=False).label_probs(
            [LabelRequest(prompts.Prompt(requests[1].prompt.turns), ("Paris", "Rome"))]
        )
    np.testing.assert_allclose(unedited_probs, unedited, rtol=1e-5)
    np.testing.assert_allclose(edited_probs, by_hand, rtol=1e-4)
    assert edited_probs[1] > unedited_probs[1], "the edit moves the answer towards Rome"
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters()), "restored bit for bit"


def test_edits_are_never_applied_on_top_of_one_another(rome):
    with rome.applied((FACT,)):
        with pytest.raises(RuntimeError, match="still applied"):
            with rome.applied((COUNTER_FACT,)):
                pass


@pytest.mark.slow
def test_a_run_under_rome_reports_edit_quality_and_its_rows_reproduce_d(default_lm, factcheck_dir):
    spec = RunSpec(
        model="smollm2-135m-instruct",
        tasks=("factcheck",),
        metrics=("filler_tokens",),
        limit=2,
        editor="rome",
        editor_options=IDENTITY,
    )
    doc = json.loads(json.dumps(run(spec, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)))
    (quality,) = doc["edit_quality"]
    assert quality["editor"] == "rome" and quality["n"] == 2 and quality["failed_excluded"] is False
    assert quality["efficacy"] == 1.0 and quality["counter_efficacy"] == 1.0 and 0 <= quality["specificity"] <= 1
    assert [row["pair_id"] for row in doc["pair_edits"]] == list(dict.fromkeys(r["pair_id"] for r in doc["pairs"]))
    assert doc["run_spec"]["editor_options"] == [["covariance", "identity"]]
    assert doc["run_spec"]["editor_statistics"] == [{"covariance": "identity"}]
    assert doc["run_spec"]["editor_settings"]["layers"] == [5]
    assert RunSpec.from_dict(doc["run_spec"]).editor_options == IDENTITY
    for result in doc["results"]:
        d = [r["d"] for r in doc["pairs"] if r["variant"] == result["variant"]]
        assert math.isclose(float(np.mean(d)), result["diagnosticity"])
    assert doc["edit_reliability"][0]["n"] == 2


def test_failed_edits_are_counted_and_left_out_when_asked(default_lm, factcheck_pairs):
    # one step at a tiny learning rate writes nothing: every edit fails efficacy
    weak = (*IDENTITY, ("steps", 1), ("learning_rate", 1e-6))
    pairs = TaskPairs("factcheck", None, tuple(factcheck_pairs[:2]))
    for drop in (False, True):
        spec = RunSpec(
            "smollm2-135m-instruct", ("factcheck",), (), editor="rome", editor_options=weak, drop_failed_edits=drop
        )
        kept, entry, rows = with_edits_written(spec, pairs, make_editor("rome", default_lm, weak), progress=False)
        assert entry["n_failed"] == 2 and entry["efficacy"] == 0.0 and not any(r.succeeded for r in rows)
        assert entry["generalisation"] == 0.0, "nothing written, so no paraphrase completes with the new object"
        assert len(kept.pairs) == (0 if drop else 2) and entry["failed_excluded"] is drop


def test_generalisation_is_the_share_of_paraphrased_prompts_completing_with_the_new_object(default_lm):
    from recoe_causaldiag.editors.quality import edit_quality, top_tokens

    wordings = ("The capital city of {} is", "The seat of government of {} is in the city of")
    pair = dataclasses.replace(
        capital_pair(),
        rewrites=(Rewrite("The capital of {} is", "France", "Rome", "Paris", wordings),),
        counter_rewrites=(Rewrite("The capital of {} is", "France", "Berlin", "Paris", wordings),),
    )
    editor = make_editor("rome", default_lm, IDENTITY)
    editor.learn([pair])
    (row,) = edit_quality(editor, "factcheck", [pair])
    assert row.efficacy == 1.0 and row.counter_efficacy == 1.0
    for state, new in (((FACT,), " Rome"), ((COUNTER_FACT,), " Berlin")):
        with editor.applied(state):
            top = top_tokens(default_lm, [default_lm.tokenizer(w.format("France"))["input_ids"] for w in wordings])
        hits = [token == default_lm.tokenizer(new)["input_ids"][0] for token in top]
        assert (row.generalisation if new == " Rome" else row.counter_generalisation) == sum(hits) / 2


@pytest.mark.parametrize(
    "pair, why",
    [
        (
            dataclasses.replace(capital_pair(), rewrites=()),
            "pair factcheck-default-0: field 'rewrites' has 0 rewrites for 1 edits",
        ),
        (
            dataclasses.replace(capital_pair(), counter_rewrites=(Rewrite("The {}s are", "cat", "dogs", "cats"),)),
            r"pair factcheck-default-0: field 'counter_rewrites'\[0\]: the subject 'cat' is not found",
        ),
    ],
)
def test_a_rewrite_that_cannot_be_written_names_its_pair_and_field(default_lm, pair, why):
    with pytest.raises(EditError, match=why):
        make_editor("rome", default_lm, IDENTITY).learn([pair])


def test_bad_editor_settings_are_refused(default_lm, monkeypatch):
    with pytest.raises(EditError, match="editor rome has no option 'layres'"):
        make_editor("rome", default_lm, (("layres", 3),))
    with pytest.raises(ValueError, match="apply to a weight editor"):
        RunSpec("smollm2-135m-instruct", ("factcheck",), (), drop_failed_edits=True)
    monkeypatch.setattr(default_lm.model.config, "model_type", "mystery")
    with pytest.raises(EditError, match="model type 'mystery'.*--editor-option module="):
        make_editor("memit", default_lm)
    assert isinstance(
        make_editor("rome", default_lm, (("module", "model.layers.{layer}.mlp.down_proj"),)), WeightEditor
    )


def test_the_cli_refuses_an_unknown_editor_option_with_exit_2(tmp_path, capsys):
    argv = [
        "run",
        "--editor",
        "rome",
        "--editor-option",
        "layres=3",
        "--metric",
        "random_baseline",
        "--out",
        str(tmp_path / "r.json"),
    ]
    assert main(argv) == 2
    assert "editor rome has no option 'layres'" in capsys.readouterr().err


def test_rome_options_take_the_value_search_settings_over_the_architectures(default_lm):
    settings = editor_options("rome", (("layer", 7), ("steps", 40), ("clamp", 2.0)))
    assert settings == RomeOptions(layer=7, search=(("clamp", 2.0), ("steps", 40)))
    assert settings.value_search(default_lm.model) == ValueSearch(steps=40, clamp=2.0)
    assert settings.edited_layers(default_lm.model) == (7,)
    with pytest.raises(EditError, match="steps must be at least 1"):
        editor_options("rome", (("steps", 0),))


@pytest.mark.parametrize(
    "model_type, depth, rome_layers, memit_layers, weight_decay",
    [
        ("llama", 30, (5,), (3, 4, 5, 6, 7), 1e-3),  # SmolLM2-135M, as tuned
        ("gemma3_text", 18, (3,), (2, 3, 4, 5, 6), 1e-3),  # Gemma-3-270M: SmolLM2's by depth
        ("qwen2", 28, (5,), (4, 5, 6, 7, 8), 1e-3),  # Qwen2.5 1.5B: EasyEdit's Qwen2.5-7B settings, also 28 layers
        ("gpt2", 12, (4,), (3, 4, 5, 6, 7), 0.5),  # GPT-2 small: GPT-2 XL's 17 and 13-17 of 48, by depth
        ("gpt2", 4, (1,), (1, 2, 3), 0.5),  # fewer layers than the span
    ],
)
def test_each_architecture_has_its_default_layers_and_value_search(
    model_type, depth, rome_layers, memit_layers, weight_decay
):
    family = ARCHITECTURES[model_type]
    assert family.layers("rome", depth) == rome_layers and family.layers("memit", depth) == memit_layers
    assert family.search("rome").weight_decay == weight_decay and family.source
    assert family.search("memit", (("steps", 3),)).steps == 3


def test_a_run_records_the_settings_its_edits_were_made_with(default_lm):
    editor = make_editor("memit", default_lm, (("covariance", "identity"), ("steps", 12)))
    settings = editor.resolved_settings()
    assert settings["layers"] == [3, 4, 5, 6, 7] and settings["module"] == "model.layers.{layer}.mlp.down_proj"
    assert settings["search"]["steps"] == 12 and settings["search"]["clamp"] == 4.0 and settings["moment_weight"] > 0
    assert settings["defaults_from"].startswith("SmolLM2-135M-Instruct (30 layers)")


def test_a_counterfactual_fact_is_written_as_the_replaced_facts_rewrite_with_another_object(rome):
    truth, other = "The capital of France is Paris.", "The capital of France is Madrid."
    rome.learn_counterfactual((FACT,), (truth,), "pair x")
    rome.learn_counterfactual((FACT,), (other,), "pair x")
    assert rome.rewrites[truth] == Rewrite("The capital of {} is", "France", "Paris", "Paris")
    assert rome.written((truth,)) == (), "restating the true object leaves the fact to the loaded weights"
    assert rome.written((other,)) == (Rewrite("The capital of {} is", "France", "Madrid", "Paris"),)
    with pytest.raises(EditError, match=r"pair x: counterfactual edit \[0\] 'Madrid is the capital of France.'"):
        rome.learn_counterfactual((FACT,), ("Madrid is the capital of France.",), "pair x")
    with pytest.raises(EditError, match="pair x: counterfactual edit"):
        rome.learn_counterfactual(("An unknown fact is here.",), ("An unknown fact is there.",), "pair x")
    with pytest.raises(EditError, match="2 edits for 1"):
        rome.learn_counterfactual((FACT,), (FACT, truth), "pair x")
