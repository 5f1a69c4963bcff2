"""Causal Faithfulness (CaF): the exact cosine arithmetic of the four variants, the patched sites, the
counterfactual construction, the patching mechanism on the real default model, one small real-model run on two
FactCheck pairs, and the `evaluate` module's card example."""

import copy
import dataclasses
import importlib.util
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from cards import card_namespace
from scipy.stats import spearmanr

from recoe_causaldiag.api import METRICS, Counterfactual, Instance, symmetric_counterfactual
from recoe_causaldiag.mechanisms.activation_patching import (
    CPU_FORWARD_COST,
    Ending,
    Patch,
    decoder_layers,
    forward_cost,
    patched_readouts,
    planned_batches,
    residual_stream,
    target_run,
    token_layer_patches,
    window_layers,
)
from recoe_causaldiag.metrics import causal_faithfulness
from recoe_causaldiag.metrics.causal_faithfulness import (
    POSITIONS,
    VARIANTS,
    CausalFaithfulness,
    caf_scores,
    cells_to_verify,
    patching_layout,
)
from recoe_causaldiag.scoring import ScoringEngine


def _no_tokens(text: str) -> int:
    raise AssertionError("FactCheck's counterfactual needs no tokenizer")


def count_endings(engine: ScoringEngine, monkeypatch) -> list[int]:
    """The number of endings of every later `engine.patched_readouts` call, in call order (filled as they run)."""
    endings_per_call, patch = [], engine.patched_readouts

    def counting(*args, **kwargs):
        endings_per_call.append(len(args[3]))
        return patch(*args, **kwargs)

    monkeypatch.setattr(engine, "patched_readouts", counting)
    return endings_per_call


def test_caf_variants_are_cosine_similarities_of_the_matrices_and_their_sums():
    answer = np.array([[1.0, 2.0], [0.0, 1.0]])  # tokens × layers
    explanation = np.array([[2.0, 0.0], [0.0, 1.0]])
    scores = caf_scores(answer, explanation, answer, -answer)
    assert scores["caf"] == pytest.approx(3 / math.sqrt(6 * 5))  # (1,2,0,1)·(2,0,0,1)
    assert scores["caf_t"] == pytest.approx(7 / math.sqrt(10 * 5))  # layers summed: (3,1)·(2,1)
    assert scores["caf_l"] == pytest.approx(5 / math.sqrt(10 * 5))  # tokens summed: (1,3)·(2,1)
    assert scores["caf_m"] == pytest.approx(-1.0)
    zero = caf_scores(answer, np.zeros((2, 2)), np.zeros((2, 2)), answer)
    assert all(math.isnan(zero[v]) for v in VARIANTS)
    cancelling = caf_scores(answer, np.array([[1.0, -1.0], [1.0, -1.0]]), answer, answer)
    assert math.isnan(cancelling["caf_t"]) and cancelling["caf_m"] == pytest.approx(1.0)


def test_the_cells_verified_are_the_largest_by_their_answer_and_explanation_effects_each_relative_to_its_largest():
    first_order = torch.zeros(3, 2, 2, dtype=torch.float64)  # positions × layers × (answer, explanation)
    first_order[0, 0] = torch.tensor([10.0, 0.0])  # 1.0 + 0.0
    first_order[1, 1] = torch.tensor([-5.0, 0.1])  # 0.5 + 1.0: the explanation's largest, so first
    first_order[2, 0] = torch.tensor([4.0, 0.04])  # 0.4 + 0.4
    assert cells_to_verify(first_order, 2) == [(1, 1), (0, 0)]
    assert cells_to_verify(first_order, 3) == [(1, 1), (0, 0), (2, 0)]
    assert cells_to_verify(first_order, 0) == []
    assert len(cells_to_verify(first_order, 99)) == 6  # every cell, at most


def test_sites_are_position_major_with_ten_layer_windows():
    assert window_layers(0, 30, 10) == (0, 1, 2, 3, 4)
    assert window_layers(15, 30, 10) == tuple(range(10, 20))
    assert window_layers(29, 30, 10) == tuple(range(24, 30))
    assert window_layers(7, 30, 1) == (7,)
    assert token_layer_patches((4, 9), (0, 2), 3) == [
        Patch((4,), (0,)),
        Patch((4,), (2,)),
        Patch((9,), (0,)),
        Patch((9,), (2,)),
    ]
    assert token_layer_patches((4,), (2,), 30, window=10)[0] == Patch((4,), tuple(range(0, 7)))


def computed_cells(batches, patches, n_layers, first_read, length):
    """The (position, layer) cells the batches compute, each row from its batch's first patched position and lowest
    patched layer on."""
    total = 0
    for batch in batches:
        start = min([first_read] + [p for k in batch for p in patches[k].positions if patches[k].layers])
        floor = min(min(patches[k].layers, default=n_layers) for k in batch)
        total += len(batch) * (length - start) * (n_layers - floor)
    return total


def test_patches_are_batched_where_the_rows_compute_least():
    # CaF's attribution variant verifies cells at the first replaced token in the low layers and at the answer's
    # position in the high ones: two batches compute far fewer cells than one, more than paying for the second forward
    low, high = [Patch((10,), (layer,)) for layer in range(0, 8)], [Patch((40,), (layer,)) for layer in range(20, 30)]
    patches = [Patch((), ())] + high + low
    plan = planned_batches(patches, 30, 40, 60, 32, replayable=True)
    assert sorted(k for batch in plan for k in batch) == list(range(len(patches)))
    assert [sorted(batch) for batch in plan] == [list(range(11, 19)), list(range(0, 11))]
    assert computed_cells(plan, patches, 30, 40, 60) + CPU_FORWARD_COST < computed_cells(
        [range(19)], patches, 30, 40, 60
    )
    # without replayable layers every row computes every layer: the position still pays for a second batch
    assert len(planned_batches(patches, 30, 40, 60, 32, replayable=False)) == 2
    # a causal matrix's sites: batches of at most the rows allowed, in order of layer, fewer cells than fixed chunks
    sites = [Patch((), ())] + [
        patch for w in (1, 10) for patch in token_layer_patches(range(49, 69), range(30), 30, window=w)
    ]
    plan = planned_batches(sites, 30, 68, 108, 32, replayable=True)
    assert sorted(k for batch in plan for k in batch) == list(range(len(sites)))
    assert max(map(len, plan)) <= 32
    chunks = [[k for batch in plan for k in batch][i : i + 32] for i in range(0, len(sites), 32)]
    assert computed_cells(plan, sites, 30, 68, 108) + CPU_FORWARD_COST * (len(plan) - len(chunks)) < computed_cells(
        chunks, sites, 30, 68, 108
    )
    # where a forward costs more than any cut saves, the batches are full
    same = [Patch((5,), (0,))] * 70
    assert [len(batch) for batch in planned_batches(same, 30, 5, 20, 32, replayable=True)] == [32, 32, 6]
    # off the CPU as few forwards as fixed-size batches, cut where they compute least
    gpu = forward_cost(torch.device("cuda"), len(sites) * 108 * 30)
    assert forward_cost(torch.device("cpu"), 10**9) == CPU_FORWARD_COST
    on_gpu = planned_batches(sites, 30, 68, 108, 32, replayable=True, cost_of_forward=gpu)
    assert len(on_gpu) == len(chunks) and computed_cells(on_gpu, sites, 30, 68, 108) <= computed_cells(
        chunks, sites, 30, 68, 108
    )


def test_counterfactuals_flip_factcheck_edits_to_the_asked_object(factcheck_pairs):
    pair = factcheck_pairs[0]
    flipped = Counterfactual(("Babe Ruth professionally plays the sport baseball.",), pair.question)
    assert symmetric_counterfactual(Instance.from_pair(pair, pair.explanation_faithful), _no_tokens) == flipped
    assert symmetric_counterfactual(Instance(pair.question, pair.choices, pair.edits, "E."), _no_tokens) == flipped
    for p in factcheck_pairs[:300]:  # parsing the inputs agrees with the builder's metadata
        from_pair = symmetric_counterfactual(Instance.from_pair(p, "E."), _no_tokens)
        assert (
            from_pair is not None
            and symmetric_counterfactual(Instance(p.question, p.choices, p.edits, "E."), _no_tokens) == from_pair
        )
    given = dataclasses.replace(pair, flip_edits=("Babe Ruth plays baseball.",))
    assert symmetric_counterfactual(Instance.from_pair(given, "E."), _no_tokens) == Counterfactual(
        given.flip_edits, pair.question
    )
    analogy = Instance(
        "Fill in the blank: A is to B like C is to ___. (A) D (B) E. Answer?",
        ("A", "B"),
        ("The capital of B is Z.",),
        "E.",
    )
    assert symmetric_counterfactual(analogy, _no_tokens) is None


def test_object_counting_counterfactuals_retype_just_enough_items_to_flip_the_count(default_lm, task_pairs):
    def tokens(text: str) -> int:
        return len(default_lm.encode(text, continuation=True))

    built = 0
    for pair in task_pairs["object_counting"]:
        meta = json.loads(pair.metadata)
        instance = Instance.from_pair(pair, pair.explanation_faithful)
        cf = symmetric_counterfactual(instance, tokens)
        if cf is None:
            continue
        built += 1
        target = meta["target_type"]
        types = [edit.removeprefix(f"{item} is ").removesuffix(".") for item, edit in zip(meta["items"], cf.edits)]
        before, after = meta["types_edits"].count(target), types.count(target)
        changed = [(a, b) for a, b in zip(pair.edits, cf.edits) if a != b]
        assert len(changed) == abs(after - before) and cf.question == pair.question
        assert all(tokens(a) == tokens(b) for a, b in changed)
        if meta["question_type"] == "number":
            assert after in {int(n) for n in re.findall(r"\(\w\) (\d+)", pair.question)} - {before}
        elif meta["question_type"] == "any":
            assert (after > 0) != (before > 0)
        else:
            assert (after == len(types)) != (before == len(types))
    assert built >= len(task_pairs["object_counting"]) // 3


def test_patched_positions_are_the_paper_input_span_or_the_changed_and_question_tokens(default_lm, factcheck_pairs):
    instance = Instance.from_pair(factcheck_pairs[0], factcheck_pairs[0].explanation_faithful)
    engine = ScoringEngine(default_lm, progress=False)
    cf = symmetric_counterfactual(instance, _no_tokens)
    paper, cheap = (patching_layout(engine, instance, 1, cf, positions) for positions in POSITIONS)
    differing = [i for i, (a, b) in enumerate(zip(paper.clean, paper.corrupted)) if a != b]
    assert paper.positions == tuple(range(differing[0], paper.label_position + 1))
    assert set(differing) < set(cheap.positions) < set(paper.positions)
    question = default_lm.tokenizer.decode([paper.clean[p] for p in cheap.positions if p not in differing])
    assert question.strip() == instance.question
    with pytest.raises(ValueError, match="positions"):
        CausalFaithfulness(positions="all")


def test_the_read_positions_are_the_labels_and_the_tokens_before_each_explanation_token(default_lm, factcheck_pairs):
    instance = Instance.from_pair(factcheck_pairs[0], factcheck_pairs[0].explanation_faithful)
    lay = patching_layout(
        ScoringEngine(default_lm, progress=False), instance, 1, symmetric_counterfactual(instance, _no_tokens)
    )
    read, n_expl = lay.read_positions, len(lay.explanation_ids)
    assert read[0] == lay.label_position and list(read) == sorted(read) and len(read) == 1 + n_expl
    assert tuple(lay.clean[p + 1] for p in read[1:]) == lay.explanation_ids == lay.clean[-n_expl:]

    def whole_forward(ids):
        """[p(ŷ) among the labels, mean p(e_j)] from every position's logits, read the paper's way."""
        with torch.inference_mode():
            logits = default_lm.model(torch.tensor([list(ids)])).logits[0].double()
        label = torch.softmax(logits[lay.label_position, list(lay.label_ids)], -1)[lay.label_index]
        tokens = [torch.softmax(logits[len(ids) - n_expl - 1 + j], -1)[e] for j, e in enumerate(lay.explanation_ids)]
        return torch.stack([label, torch.stack(tokens).mean()])

    stem = lay.stem_length
    rows = patched_readouts(default_lm.model, lay.clean[:stem], lay.corrupted[:stem], [Patch((), ())], [lay.ending()])
    torch.testing.assert_close(rows[0, 0], whole_forward(lay.corrupted), atol=1e-5, rtol=0)
    for bad in ((), (read[1], read[0]), (read[0], len(lay.clean))):
        with pytest.raises(ValueError, match="read positions"):
            patched_readouts(
                default_lm.model,
                lay.clean[:stem],
                lay.corrupted[:stem],
                [Patch((), ())],
                [dataclasses.replace(lay.ending(), read=bad)],
            )


def test_a_prompts_explanations_share_their_patched_runs_and_read_as_if_alone(default_lm, factcheck_pairs, monkeypatch):
    from recoe_causaldiag.mechanisms import activation_patching

    pair, engine = factcheck_pairs[0], ScoringEngine(default_lm, progress=False)
    lays = []
    for explanation in (pair.explanation_faithful, pair.explanation_unfaithful):
        instance = Instance.from_pair(pair, explanation)
        lays.append(patching_layout(engine, instance, 1, symmetric_counterfactual(instance, _no_tokens)))
    assert lays[0].stem == lays[1].stem and lays[0].explanation_ids != lays[1].explanation_ids
    stem, model = lays[0].stem_length, copy.deepcopy(default_lm.model).double()  # float32 rounding differs by 3e-6
    sites = [Patch((), ())] + token_layer_patches(lays[0].positions[::8], (0, 14, 29), 30)
    sites += token_layer_patches(lays[0].positions[-2:], (9,), 30, window=10)
    run = dict(batch_size=4)
    together = patched_readouts(
        model, lays[0].clean[:stem], lays[0].corrupted[:stem], sites, [e.ending() for e in lays], **run
    )
    assert together.shape == (len(sites), 2, 2)
    # given the unpatched target run, taken once, it reads the same
    target = target_run(model, lays[0].corrupted[:stem], [e.ending() for e in lays])
    given = patched_readouts(
        model, lays[0].clean[:stem], lays[0].corrupted[:stem], sites, [e.ending() for e in lays], **run, target=target
    )
    torch.testing.assert_close(given, together, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="another stem or other endings"):
        patched_readouts(
            model, lays[0].clean[:stem], lays[0].corrupted[:stem], sites, [lays[0].ending()], target=target
        )
    for k, lay in enumerate(lays):
        alone = patched_readouts(model, lay.clean[:stem], lay.corrupted[:stem], sites, [lay.ending()], **run)
        torch.testing.assert_close(together[:, k], alone[:, 0], atol=1e-12, rtol=0)
        assert (together[1:, k] - together[0, k]).abs().max() > 1e-4  # the patches move what is read
    # a model that cannot take a branched sequence's mask runs each ending after the stem on its own
    forwards, inputs, forward = [], [], model.forward

    def recording(*args, **kwargs):
        forwards.append(kwargs.get("attention_mask"))
        inputs.append(kwargs["input_ids"][0].tolist() if "input_ids" in kwargs else args[0][0].tolist())
        return forward(*args, **kwargs)

    monkeypatch.setattr(activation_patching, "accepts_packed_rows", lambda _model: False)
    monkeypatch.setattr(model, "forward", recording)
    one_by_one = patched_readouts(
        model, lays[0].clean[:stem], lays[0].corrupted[:stem], sites, [e.ending() for e in lays], **run
    )
    assert forwards and all(mask is None for mask in forwards)
    assert inputs.count(list(lays[0].clean[:stem])) == 1  # the source run is taken once for all the endings
    torch.testing.assert_close(one_by_one, together, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="outside the"):
        patched_readouts(
            model, lays[0].clean[:stem], lays[0].corrupted[:stem], [Patch((stem,), (0,))], [lays[0].ending()]
        )
    with pytest.raises(ValueError, match="differ in their explanations alone"):
        CausalFaithfulness(require_flip=False).matrices(engine, [lays[0], dataclasses.replace(lays[1], label_index=0)])


def last(logits):
    """Read-out for the mechanism tests: the next-token distribution after the whole input."""
    return torch.softmax(logits.float(), dim=-1)[:, -1]


def read_last(ids):
    """The whole input `ids` as a stem with nothing after it, read by `last`."""
    return [Ending((), (len(ids) - 1,), last)]


def test_patching_restores_exactly_what_it_is_given(default_lm, factcheck_pairs):
    instance = Instance.from_pair(factcheck_pairs[0], factcheck_pairs[0].explanation_faithful)
    engine = ScoringEngine(default_lm, progress=False)
    model, lay = default_lm.model, patching_layout(engine, instance, 1, symmetric_counterfactual(instance, _no_tokens))
    with torch.inference_mode():
        plain = {
            name: last(model(torch.tensor([list(ids)])).logits)
            for name, ids in (("clean", lay.clean), ("corrupted", lay.corrupted))
        }
    assert (plain["clean"] - plain["corrupted"]).abs().max() > 1e-2
    sites = [Patch((p,), (layer,)) for p in lay.positions[:2] for layer in (0, 29)] + [Patch((), ())]
    same = patched_readouts(model, lay.clean, lay.clean, sites, read_last(lay.clean), batch_size=2)[:, 0]
    torch.testing.assert_close(same, plain["clean"].expand(len(sites), -1), atol=1e-5, rtol=0)
    everything = Patch(tuple(range(len(lay.clean))), (0,))
    swapped = patched_readouts(model, lay.corrupted, lay.clean, [everything], read_last(lay.clean))[:, 0]
    torch.testing.assert_close(swapped, plain["corrupted"], atol=1e-4, rtol=0)
    # batched, cached patching equals one uncached forward per patch, with the source state from hidden_states
    position, layer = lay.positions[0], 3
    with torch.inference_mode():
        source = model(torch.tensor([list(lay.clean)]), output_hidden_states=True).hidden_states[layer + 1][0, position]
        hook = decoder_layers(model)[layer].register_forward_hook(
            lambda _m, _a, out: out.__setitem__((0, position), source)
        )
        try:
            naive = last(model(torch.tensor([list(lay.corrupted)])).logits)
        finally:
            hook.remove()
    batched = patched_readouts(
        model, lay.clean, lay.corrupted, [Patch((), ()), Patch((position,), (layer,))], read_last(lay.corrupted)
    )[:, 0]
    torch.testing.assert_close(batched[1:], naive, atol=1e-5, rtol=0)
    assert (batched[1] - batched[0]).abs().max() > 1e-4


def test_real_model_scores_two_factcheck_pairs(default_lm, factcheck_pairs, monkeypatch):
    pairs = factcheck_pairs[:2]  # Babe Ruth: tennis → baseball, one token each; Satchel Paige: "rugby union" → two
    instances = [Instance.from_pair(p, e) for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
    instances += [
        dataclasses.replace(instances[0], explanation=" "),
        Instance("Is any of them fruit? dog, mango. Answer?", ("Yes", "No"), ("mango is fruit.",), "E."),
    ]
    engine = ScoringEngine(default_lm, progress=False)
    paper = CausalFaithfulness(layers=(15,))
    assert np.isnan(paper.score_instances(instances[:2], engine)["caf"]).all()
    # the tiny model answers "No" whatever the edits, so the paper's y_C != y condition rejects both
    assert paper.coverage.status == ("answer not flipped",) * 2 and paper.coverage.fraction == 0
    metric = CausalFaithfulness(layers=(15,), require_flip=False)
    assert METRICS.get("causal_faithfulness") is CausalFaithfulness and metric.explanation_type == "post-hoc"
    endings_per_call = count_endings(engine, monkeypatch)
    scores = metric.score_instances(instances, engine)
    assert endings_per_call == [2]  # the first pair's two explanations are patched in one run
    assert tuple(scores) == VARIANTS == metric.variants
    assert metric.coverage.status == (
        "ok",
        "ok",
        "token length differs",
        "token length differs",
        "blank explanation",
        "no counterfactual",
    )
    assert metric.coverage.fraction == pytest.approx(2 / 6)
    assert np.isfinite(metric.coverage.total_effect[:2]).all()
    for variant in VARIANTS:
        assert np.isfinite(scores[variant][:2]).all() and (np.abs(scores[variant][:2]) <= 1 + 1e-9).all()
        assert np.isnan(scores[variant][2:]).all()
    # patched together, each explanation scores what it scores alone (float32 sums in another order: the cosine of
    # effects near 1e-3 moves by up to ~3e-5)
    alone = [metric.score_instances([instance], engine) for instance in instances[:2]]
    assert endings_per_call == [2, 1, 1]
    for variant in VARIANTS:
        np.testing.assert_allclose(scores[variant][:2], [one[variant][0] for one in alone], atol=1e-4, rtol=0)


def test_attribution_patching_ranks_cells_and_patches_the_top_ones_exactly(default_lm, factcheck_pairs, monkeypatch):
    pair = factcheck_pairs[0]
    engine = ScoringEngine(default_lm, progress=False)
    lay, other = (
        patching_layout(engine, one, 1, symmetric_counterfactual(one, _no_tokens))
        for one in (Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful))
    )
    layers = (3, 15, 27)
    ((exact, exact_p),) = CausalFaithfulness(layers=layers, require_flip=False).matrices(engine, [lay])
    ((pure, pure_p),) = CausalFaithfulness(
        layers=layers, require_flip=False, patching="attribution", verified_cells=0
    ).matrices(engine, [lay])
    attributed = CausalFaithfulness(layers=layers, require_flip=False, patching="attribution", verified_cells=4)
    ((verified, _),) = attributed.matrices(engine, [lay])
    # this pair's two explanations rank the same top cells; rolled, the other's top cells differ from the first's
    first_order = causal_faithfulness.attribution_effects

    def rolled(model, source, stem, endings, *args, **kwargs):
        effects, unpatched = first_order(model, source, stem, endings, *args, **kwargs)
        for k, ending in enumerate(endings):
            if ending.tokens == other.ending().tokens:
                effects[:, :, k] = effects[:, :, k].roll(5, dims=0)
        return effects, unpatched

    monkeypatch.setattr(causal_faithfulness, "attribution_effects", rolled)
    ((other_alone, _),) = attributed.matrices(engine, [other])
    endings_per_call = count_endings(engine, monkeypatch)
    uncached, forward = [], default_lm.model.forward

    def recording(*args, **kwargs):
        if kwargs.get("past_key_values") is None:
            uncached.append((kwargs["input_ids"] if "input_ids" in kwargs else args[0]).shape[1])
        return forward(*args, **kwargs)

    monkeypatch.setattr(default_lm.model, "forward", recording)
    together = attributed.matrices(engine, [lay, other])
    assert endings_per_call == [2]  # the two explanations' verified cells are patched in one run
    # from the beginning, only the source run and the unpatched target run (each explanation but its last token, which
    # nothing reads): the first-order pass and the verified cells start from the target run's KV cache
    stem = lay.stem_length
    assert uncached == [stem, stem + len(lay.explanation_ids) - 1 + len(other.explanation_ids) - 1]
    # each explanation keeps its own verified cells, as when patched alone (float32 sums in another batch order)
    for (effects, _), alone in zip(together, (verified, other_alone), strict=True):
        np.testing.assert_allclose(effects, alone, atol=1e-5, equal_nan=True)
    assert pure_p == pytest.approx(exact_p, abs=1e-5) and np.isnan(pure[1]).all()  # no windowed matrices
    for k in (0, 1):  # the first-order matrices rank the cells as the exact ones do
        assert spearmanr(exact[0][..., k].ravel(), pure[0][..., k].ravel())[0] > 0.6
    # the cells not verified differ by float32 rounding alone (up to 1.5e-7), the verified by 2e-4 and more
    replaced = np.argwhere(np.abs(verified[0] - pure[0]).max(-1) > 1e-5)
    assert {(int(p), int(j)) for p, j in replaced} == set(cells_to_verify(torch.from_numpy(pure[0]), 4))
    for p, j in replaced:
        np.testing.assert_allclose(verified[0][p, j], exact[0][p, j], atol=1e-5)
    with pytest.raises(ValueError, match="patching must be one of"):
        CausalFaithfulness(patching="gradient")


def test_card_example_runs_offline():
    results = card_namespace("causal_faithfulness")["results"]
    assert results["variant"] == "caf" and len(results["scores"]) == 1
    assert -1 <= results["scores"][0] <= 1


def test_under_rome_the_instances_weights_states_are_patched_into_the_counterfactuals_weights(
    default_lm, factcheck_pairs
):
    """Same tokens, two edited models: the source residual stream comes from the instance's weights, the patched run
    from the counterfactual's; patching every position after the last layer gives the clean run's read-out."""
    from recoe_causaldiag.editors.editing import make_editor

    pair = factcheck_pairs[0]
    editor = make_editor("rome", default_lm, (("covariance", "identity"),))
    editor.learn([pair])
    model, engine = default_lm.model, ScoringEngine(default_lm, editor=editor, progress=False)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    instance = Instance.from_pair(pair, pair.explanation_faithful)
    cf = symmetric_counterfactual(instance, _no_tokens)
    editor.learn_counterfactual(instance.edits, cf.edits, pair.id)
    lay = patching_layout(engine, instance, 1, cf)
    assert lay.clean == lay.corrupted and lay.clean_state == instance.edits and lay.corrupted_state == cf.edits
    question = default_lm.tokenizer.decode([lay.clean[p] for p in lay.positions])
    assert question.strip().startswith(instance.question) and lay.positions[-1] == lay.label_position

    with editor.applied(lay.clean_state), torch.inference_mode():
        source = residual_stream(model, lay.clean)
        clean = last(model(torch.tensor([list(lay.clean)])).logits)
    with editor.applied(lay.corrupted_state):
        with torch.inference_mode():
            corrupted = last(model(torch.tensor([list(lay.corrupted)])).logits)
        everything = Patch(tuple(range(len(lay.clean))), (len(decoder_layers(model)) - 1,))
        out = patched_readouts(
            model, lay.clean, lay.corrupted, [Patch((), ()), everything], read_last(lay.corrupted), source_states=source
        )[:, 0]
    assert (clean - corrupted).abs().max() > 1e-3, "the two edited models read the same tokens differently"
    torch.testing.assert_close(out[0], corrupted[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1], clean[0], atol=1e-5, rtol=0)

    metric = CausalFaithfulness(layers=(3, 15), require_flip=False)
    scores = metric.score_instances([instance], engine)
    assert metric.coverage.status == ("ok",) and all(np.isfinite(scores[v]).all() for v in VARIANTS)
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters()), "restored bit for bit"


def test_the_attribution_study_scores_each_count_of_verified_cells_against_exact_patching(monkeypatch, tmp_path):
    bench = Path(__file__).parents[1] / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location("caf_attribution_agreement", bench / "caf_attribution_agreement.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)

    def row(pair: str, role: str, exact: float, by_count: dict[int, float]) -> dict:
        scores = {"caf": exact, "caf_t": exact, "caf_l": exact}
        curve = {  # caf_l always exact
            str(k): {"caf": v, "caf_t": v, "caf_l": exact, "seconds": 1.0, "verified": k} for k, v in by_count.items()
        }
        return {
            "pair": pair,
            "explanation": role,
            "spearman": [0.9, 0.8],
            "caf": {"exact": exact, "attribution": by_count[4], "attribution_only": by_count[0]},
            "seconds": {"exact": 10.0, "attribution": 1.0, "attribution_only": 1.0},
            "exact_scores": scores,
            "curve": curve,
        }

    rows = [
        row("a", "faithful", 0.5, {0: -0.1, 4: 0.45}),  # exact orders a's faithful one first; 0 cells reverse it
        row("a", "unfaithful", 0.2, {0: 0.3, 4: 0.25}),
        row("b", "faithful", -0.2, {0: -0.2, 4: -0.2}),
        row("b", "unfaithful", 0.1, {0: 0.1, 4: 0.1}),
        row("c", "faithful", 0.4, {0: 0.4, 4: 0.4}),  # no unfaithful row: not a pair to order
    ]
    curve = study.curve_summary(rows)
    assert curve["0"]["same_order"] == {"caf": 1, "caf_t": 1, "caf_l": 2} and curve["0"]["pairs"] == 2
    assert curve["4"]["same_order"] == {"caf": 2, "caf_t": 2, "caf_l": 2}
    assert curve["0"]["mean_abs_gap"]["caf"] == pytest.approx((0.6 + 0.1) / 5)
    assert curve["0"]["sign_changes"]["caf"] == 1 and curve["4"]["sign_changes"]["caf"] == 0
    assert curve["4"]["speedup"] == pytest.approx(10.0) and curve["4"]["median_verified"] == 4
    out = tmp_path / "study.json"
    study.report(rows, out)
    assert json.loads(out.read_text())["summary"]["curve"] == curve
    assert (tmp_path / "study.png").exists() and (tmp_path / "study_cells.png").exists()
