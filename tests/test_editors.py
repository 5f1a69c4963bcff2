"""ROME and MEMIT on the packaged default model: a fact written into the MLP matrices becomes the prompt's top
completion, an unrelated prompt's next-token distribution barely moves, and the weights are bit-identical after the
edit."""

from __future__ import annotations

import json

import pytest
import torch

from recoe_causaldiag.api.records import Rewrite
from recoe_causaldiag.editors import covariance
from recoe_causaldiag.editors.memit import MemitOptions, memit_deltas
from recoe_causaldiag.editors.rome import RomeOptions, rome_deltas
from recoe_causaldiag.editors.weights import EditError, edited

CAPITAL = Rewrite("The capital of {} is", "France", "Rome", "Paris")
UNRELATED = ("The capital of Japan is", "Water is made of hydrogen and", "The first month of the year is")
SPECIFICITY_KL = 0.05
"""The most an unrelated prompt's next-token distribution may move (KL divergence, nats) under one ROME edit."""
MEMIT_IDENTITY_SPECIFICITY_KL = 0.1
"""The same bound for MEMIT with identity key statistics, which are less specific: two facts moved "The capital of
Japan is" by 0.07 nats (it still completes with " Tokyo")."""


def next_token(lm, text: str) -> torch.Tensor:
    with torch.no_grad():
        logits = lm.model(torch.tensor([lm.tokenizer(text)["input_ids"]])).logits[0, -1]
    return logits.log_softmax(-1)


def top_completion(lm, text: str) -> str:
    return lm.tokenizer.decode([int(next_token(lm, text).argmax())])


@pytest.fixture(scope="module")
def statistics(tmp_path_factory):
    """One statistics cache for the module's tests, so the key statistics are estimated once."""
    folder = tmp_path_factory.mktemp("statistics")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(covariance, "statistics_folder", lambda: folder)
        yield folder


@pytest.fixture()
def fresh_statistics(tmp_path, monkeypatch):
    monkeypatch.setattr(covariance, "statistics_folder", lambda: tmp_path / "statistics")
    return tmp_path / "statistics"


@pytest.mark.parametrize("key_statistics", ["identity", "sampled"])
def test_rome_writes_one_fact_moves_little_else_and_reverts_exactly(default_lm, statistics, key_statistics):
    model = default_lm.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    unrelated = [next_token(default_lm, text) for text in UNRELATED]
    assert top_completion(default_lm, "The capital of France is") == " Paris"
    deltas = rome_deltas(default_lm, [CAPITAL], RomeOptions(covariance=key_statistics))
    assert [d.parameter for d in deltas] == ["model.layers.5.mlp.down_proj.weight"]
    with edited(model, deltas):
        assert top_completion(default_lm, "The capital of France is") == " Rome"
        for text, old in zip(UNRELATED, unrelated):
            new = next_token(default_lm, text)
            assert torch.sum(old.exp() * (old - new)) < SPECIFICITY_KL, text
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters()), "restored bit for bit"


def test_sampled_key_statistics_are_cached_with_their_provenance(default_lm, statistics, monkeypatch):
    options = RomeOptions(covariance="sampled")
    rome_deltas(default_lm, [CAPITAL], options)  # estimated here, or read as the test before left it
    (record,) = [json.loads(p.read_text()) for p in statistics.glob("*.json")]
    assert record["corpus"] == "model-sampled text" and record["sequences"] * record["length"] == 2048
    assert record["parameter"] == "model.layers.5.mlp.down_proj.weight" and "smollm2" in record["model"]
    monkeypatch.setattr(covariance, "_estimate", lambda *args: pytest.fail("estimated again"))
    rome_deltas(default_lm, [CAPITAL], options)


def test_an_interrupted_estimate_leaves_no_statistics(default_lm, fresh_statistics, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(covariance, "_estimate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rome_deltas(default_lm, [CAPITAL], RomeOptions(covariance="sampled"))
    left = list(fresh_statistics.iterdir()) if fresh_statistics.exists() else []
    assert [p for p in left if not p.name.endswith(".lock")] == [], "no statistics, only the estimate's lock"


@pytest.mark.parametrize(
    "rewrite, options, why",
    [
        (Rewrite("The capital of France is", "France", "Rome", "Paris"), RomeOptions(), "one '{}' for the subject"),
        (Rewrite("The {}s are", "cat", "dogs", "cats"), RomeOptions(), "not found as tokens"),
        (CAPITAL, RomeOptions(layer=30), "layer 30 is out of range: the model has layers 0-29"),
    ],
)
def test_bad_edits_are_refused_with_what_to_change(default_lm, rewrite, options, why):
    with pytest.raises(EditError, match=why):
        rome_deltas(default_lm, [rewrite], options, where="factcheck-default-0 rewrites")


def test_an_architecture_without_a_known_mlp_names_the_option(default_lm, monkeypatch):
    monkeypatch.setattr(default_lm.model.config, "model_type", "mystery")
    with pytest.raises(EditError, match="model type 'mystery'.*--editor-option module="):
        rome_deltas(default_lm, [CAPITAL], RomeOptions(covariance="identity"))
    deltas = rome_deltas(
        default_lm, [CAPITAL], RomeOptions(covariance="identity", module="model.layers.{layer}.mlp.down_proj")
    )
    assert deltas[0].parameter == "model.layers.5.mlp.down_proj.weight"


TWO_FACTS = [CAPITAL, Rewrite("{} plays the sport of", "Lionel Messi", "basketball", "football")]


def test_memit_writes_two_facts_at_once_over_five_layers_and_reverts_exactly(default_lm):
    model = default_lm.model
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    unrelated = [next_token(default_lm, text) for text in UNRELATED]
    deltas = memit_deltas(default_lm, TWO_FACTS, MemitOptions(covariance="identity", moment_weight=100.0))
    assert [d.parameter for d in deltas] == [f"model.layers.{layer}.mlp.down_proj.weight" for layer in range(3, 8)]
    with edited(model, deltas):
        assert top_completion(default_lm, "The capital of France is") == " Rome"
        assert top_completion(default_lm, "Lionel Messi plays the sport of") == " basketball"
        assert top_completion(default_lm, "The capital of Japan is") == " Tokyo"
        for text, old in zip(UNRELATED, unrelated):
            new = next_token(default_lm, text)
            assert torch.sum(old.exp() * (old - new)) < MEMIT_IDENTITY_SPECIFICITY_KL, text
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters()), "restored bit for bit"


@pytest.mark.slow
def test_memit_with_sampled_key_statistics_writes_two_facts(default_lm, statistics):
    with edited(default_lm.model, memit_deltas(default_lm, TWO_FACTS, MemitOptions())):
        assert top_completion(default_lm, "The capital of France is") == " Rome"
        assert top_completion(default_lm, "Lionel Messi plays the sport of") == " basketball"
