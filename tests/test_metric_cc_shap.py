"""CC-SHAP: the aggregation and cosine on hand-made attributions, the prompt split (edits never masked),
Shapley efficiency and seeding on a tiny random model, the real default model on two FactCheck instances, and the
convergence study's Kernel SHAP against exact enumeration (where shap is installed)."""

import dataclasses
import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from cards import card_namespace
from fakes import random_llama

from recoe_causaldiag import prompts
from recoe_causaldiag.api.engine import Encoded
from recoe_causaldiag.api.metric import Instance
from recoe_causaldiag.metrics.cc_shap import (
    Attribution,
    AttributionLayout,
    CCShap,
    CoalitionForward,
    _orthonormal_basis,
    antithetic_permutations,
    attributions,
    cc_shap_score,
    cot_layouts,
    leverage_coalitions,
    orthogonal_permutations,
    post_hoc_layout,
    projected_regression,
    score_recorded,
    size_allocation,
)
from recoe_causaldiag.scoring import LabelRequest, ScoringEngine


@pytest.fixture(scope="module")
def tiny_engine(default_lm):
    """A random 1-layer model with the default model's tokenizer and chat template: fast and deterministic."""
    lm = random_llama(default_lm)
    return ScoringEngine(lm, progress=False)


@pytest.fixture(scope="module")
def instance(factcheck_pairs):
    return Instance.from_pair(factcheck_pairs[0], factcheck_pairs[0].explanation_faithful)


def test_score_is_cosine_of_prediction_and_mean_l1_normalised_explanation_rows():
    prediction = np.array([1.0, -1.0, 0.0])
    explanation = np.array([[2.0, 0.0, 0.0], [0.0, -1.0, 1.0]])
    # rows / L1: [1, 0, 0] and [0, -.5, .5]; mean [.5, -.25, .25]; cosine with [1, -1, 0] = .75 / (√2 · √.375)
    assert cc_shap_score(prediction, explanation) == pytest.approx(math.sqrt(3) / 2)
    assert cc_shap_score(-prediction, explanation) == pytest.approx(-math.sqrt(3) / 2)
    assert cc_shap_score(5 * prediction, explanation * np.array([[10.0], [0.1]])) == pytest.approx(math.sqrt(3) / 2)
    assert cc_shap_score(prediction, np.array([[3.0, -3.0, 0.0]])) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "prediction, explanation",
    [
        (np.zeros(3), np.ones((2, 3))),
        (np.ones(3), np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])),
        (np.ones(3), np.zeros((0, 3))),
        (np.zeros(0), np.zeros((2, 0))),
        (np.ones(2), np.array([[1.0, 0.0], [-1.0, 0.0]])),
    ],
)
def test_score_is_nan_when_undefined(prediction, explanation):
    assert math.isnan(cc_shap_score(prediction, explanation))


def test_layout_splits_template_edits_question_and_explanation(tiny_engine, instance):
    decode = tiny_engine.lm.tokenizer.decode
    post_hoc = post_hoc_layout(tiny_engine, instance, 1)
    direct, cot = cot_layouts(tiny_engine, instance)
    for lay in (post_hoc, direct, cot):
        assert decode(lay.question).strip() == instance.question
        assert all(f"New Fact: {fact}\n" in decode(lay.head) for fact in instance.edits)
    for lay in (post_hoc, cot):
        assert decode(lay.explanation_ids).strip() == instance.explanation
        sequence = lay.question + lay.tail
        assert [sequence[r + 1] for r in lay.explanation_rows] == list(lay.explanation_ids)
    assert decode([(post_hoc.question + post_hoc.tail)[post_hoc.label_row + 1]]) == "No"  # the answer it holds
    assert post_hoc.label_ids == tuple(tiny_engine.lm.encode(label, continuation=True)[0] for label in ("Yes", "No"))
    assert cot.label_row == len(cot.question + cot.tail) - 1 and decode(cot.tail).endswith(prompts.COT_ANSWER_PROMPT)
    # the CoT variant's prediction side is the direct prompt: ŷ after the question, no explanation
    assert direct.explanation_ids == () and direct.label_row == len(direct.question + direct.tail) - 1
    assert "step by step" not in decode(direct.tail) and len(direct.question) == len(cot.question)


def test_cot_variant_attributes_the_direct_prediction_and_the_cot_explanation(tiny_engine, instance):
    answer = int(
        np.argmax(
            tiny_engine.label_probs(
                [LabelRequest(prompts.direct(instance.edits, instance.question), instance.choices)]
            )[0]
        )
    )
    baseline = tiny_engine.lm.encode("...", continuation=True)[0]
    direct, cot = cot_layouts(tiny_engine, instance)
    prediction = attributions(tiny_engine, direct, answer, baseline_id=baseline, n_samples=2, seed=3)[0]
    explanation = attributions(tiny_engine, cot, answer, baseline_id=baseline, n_samples=2, seed=3)[1:]
    scores = CCShap(n_samples=2, long_question_samples=2, seed=3, select=["cot"], estimator="sampling").score_instances(
        [instance], tiny_engine
    )
    # float32 sums differ by batch shape: the metric scores both attributions' coalitions in one engine call
    assert scores["cot"][0] == pytest.approx(cc_shap_score(prediction, explanation), abs=1e-5)
    both = CCShap(n_samples=2, long_question_samples=2, seed=3, estimator="sampling").score_instances(
        [instance], tiny_engine
    )  # from post_hoc
    assert both["cot"][0] == pytest.approx(scores["cot"][0], abs=1e-5)  # float32 sums differ by batch and threads
    after_cot = attributions(tiny_engine, cot, answer, baseline_id=baseline, n_samples=2, seed=3)[0]
    assert cc_shap_score(after_cot, explanation) != pytest.approx(scores["cot"][0])


def requests_sent(engine: ScoringEngine, monkeypatch) -> list:
    """The requests `engine.continuation_logits` is given from now on, in order (it still scores them)."""
    sent = []
    scoring = engine.continuation_logits

    def spy(encoded, **options):
        sent.extend(encoded)
        return scoring(encoded, **options)

    monkeypatch.setattr(engine, "continuation_logits", spy)
    return sent


def test_edits_and_template_are_never_perturbed(tiny_engine, instance, monkeypatch):
    lay = post_hoc_layout(tiny_engine, instance, 0)
    seen = requests_sent(tiny_engine, monkeypatch)
    baseline = tiny_engine.lm.encode("...", continuation=True)[0]
    attributions(tiny_engine, lay, 0, baseline_id=baseline, n_samples=3, seed=0)
    n = len(lay.question)
    # the empty coalition, then n per permutation, each coalition (the full input in particular) scored once
    assert len(seen) == len(set(seen)) <= 1 + 3 * n - 2
    scored = max((lay.label_row, *lay.explanation_rows)) + 1
    for enc in seen:
        assert enc.prefix == lay.head and enc.continuation[n:] == lay.tail[: scored - n], "cut after the last row"
        assert all(t in (q, baseline) for t, q in zip(enc.continuation[:n], lay.question))
    assert (baseline,) * n in {enc.continuation[:n] for enc in seen}


def test_shapley_values_are_efficient_and_seeded(tiny_engine, instance):
    lay = post_hoc_layout(tiny_engine, instance, 0)
    baseline = tiny_engine.lm.encode("...", continuation=True)[0]
    values = attributions(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=7)
    assert values.shape == (1 + len(lay.explanation_ids), len(lay.question))
    forward = CoalitionForward(tiny_engine, lay, 1)
    full, empty = forward(torch.tensor([lay.question, (baseline,) * len(lay.question)])).numpy()
    np.testing.assert_allclose(values.sum(axis=1), full - empty, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(values, attributions(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=7))
    assert not np.allclose(values, attributions(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=8))


def test_metric_is_reproducible_and_nan_without_explanation(tiny_engine, instance):
    metric = CCShap(n_samples=2, long_question_samples=2, seed=3)
    assert metric.variants == ("post_hoc", "cot")
    empty = Instance(instance.question, instance.choices, instance.edits, "")
    first = metric.score_instances([instance, empty], tiny_engine)
    second = metric.score_instances([instance, empty], tiny_engine)
    for variant in metric.variants:
        np.testing.assert_array_equal(first[variant], second[variant])
        assert -1 <= first[variant][0] <= 1 and math.isnan(first[variant][1])
    assert CCShap(select=["cot"]).variants == ("cot",)
    with pytest.raises(ValueError, match="n_samples"):
        CCShap(n_samples=0)
    with pytest.raises(ValueError, match="select"):
        CCShap(select=["both"])


def test_real_model_scores_two_factcheck_instances(default_lm, factcheck_pairs):
    pair = factcheck_pairs[0]
    instances = [Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful)]
    scores = CCShap(n_samples=1, long_question_samples=1).score_instances(
        instances, ScoringEngine(default_lm, progress=False)
    )
    for variant in ("post_hoc", "cot"):
        assert scores[variant].shape == (2,)
        assert np.isfinite(scores[variant]).all() and (np.abs(scores[variant]) <= 1 + 1e-9).all()


def test_evaluate_module_card_example_runs_offline():
    results = card_namespace("cc_shap")["results"]
    assert results["variant"] == "post_hoc" and len(results["scores"]) == 1


def test_antithetic_permutations_come_in_reversed_pairs():
    torch.manual_seed(0)
    drawn = list(antithetic_permutations(6, 5))
    assert drawn[1] == drawn[0][::-1] and drawn[3] == drawn[2][::-1] and drawn[2] != drawn[0]
    assert all(sorted(p) == list(range(6)) for p in drawn) and len(drawn) == 5


def test_antithetic_values_are_efficient_and_the_estimator_is_checked(tiny_engine, instance):
    lay = post_hoc_layout(tiny_engine, instance, 0)
    baseline = tiny_engine.lm.encode("...", continuation=True)[0]
    values = attributions(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=7, estimator="antithetic")
    full, empty = CoalitionForward(tiny_engine, lay, 1)(
        torch.tensor([lay.question, (baseline,) * len(lay.question)])
    ).numpy()
    np.testing.assert_allclose(values.sum(axis=1), full - empty, rtol=1e-4, atol=1e-6)
    assert not np.allclose(values, attributions(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=7))
    with pytest.raises(ValueError, match="estimator"):
        CCShap(estimator="kernel")


def test_instances_scored_together_score_as_each_alone(default_lm, factcheck_pairs):
    """Every coalition of every instance goes to the engine in one call; batching changes no score.

    In float64: the random model's attributions are small enough that float32 rounding, which differs with a batch's
    padding, moves a score by up to a few 1e-5 (2.3e-5 seen on one machine), which would hide a real difference."""
    tiny = random_llama(default_lm)
    engine = ScoringEngine(dataclasses.replace(tiny, model=tiny.model.double()), progress=False)
    instances = [Instance.from_pair(p, p.explanation_faithful) for p in factcheck_pairs[:3]]
    metric = CCShap(n_samples=2, long_question_samples=2, seed=1)
    together = metric.score_instances(instances, engine)
    for k, one in enumerate(instances):
        alone = metric.score_instances([one], engine)
        for variant in metric.variants:
            assert together[variant][k] == pytest.approx(alone[variant][0], abs=1e-9)


def test_a_question_beyond_the_exact_study_gets_at_least_the_long_question_budget(tiny_engine, factcheck_pairs):
    metric = CCShap(n_samples=2, long_question_samples=3, seed=1)
    assert [metric.budget(n) for n in (1, 10, 11, 40)] == [2, 2, 3, 3]
    assert CCShap(n_samples=20, long_question_samples=3).budget(40) == 20
    instances = [Instance.from_pair(p, p.explanation_faithful) for p in factcheck_pairs[:8]]
    plans = metric.recorded_plans(instances, tiny_engine)
    seen = {(len(a.forward.layout.question), a.n_samples) for plan in plans for a in plan.values() if a is not None}
    assert {n > 10 for n, _ in seen} == {False, True}, "both kinds of question among the pairs"
    assert all(budget == (3 if n > 10 else 2) for n, budget in seen)
    with pytest.raises(ValueError, match="long_question_samples must be >= 1"):
        CCShap(long_question_samples=0)


def test_recorded_plans_hold_the_coalitions_that_scoring_runs(tiny_engine, factcheck_pairs, monkeypatch):
    """What `recorded_plans` records (and bench/suite_projection.py counts without a forward) is what scoring sends
    to the engine, request for request."""
    instances = [Instance.from_pair(p, e) for p in factcheck_pairs[:2] for e in (p.explanation_faithful, "")]
    metric = CCShap(n_samples=2, long_question_samples=2, seed=1)
    plans = metric.recorded_plans(instances, tiny_engine)
    recorded = [r for plan in plans for a in plan.values() if a is not None for r in a.forward.requests()]
    sent = requests_sent(tiny_engine, monkeypatch)
    metric.score_instances(instances, tiny_engine)
    assert [plan["post_hoc"] is None for plan in plans] == [False, True, False, True]
    assert sent == recorded
    assert recorded


def test_suite_projection_counts_a_shared_beginning_once_per_prefix(monkeypatch):
    """bench/suite_projection.py counts the tokens of the packed rows: continuations of one prefix that begin alike
    share their beginning; another prefix, or another edit state, packs apart."""
    path = Path(__file__).parents[1] / "bench" / "suite_projection.py"
    spec = importlib.util.spec_from_file_location("suite_projection", path)
    projection = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, projection)  # its dataclasses look their module up
    spec.loader.exec_module(projection)
    requests = [
        Encoded((1, 2), (5, 6, 7), False),
        Encoded((1, 2), (5, 6, 8), False),
        Encoded((1, 3), (5, 6, 7), False),
        Encoded((1, 2), (5, 6, 7), False, ("edited",)),
    ]
    assert projection.packed_tokens(requests, 640) == 4 + 3 + 3
    assert projection.packed_tokens(requests[:2], 3) == 6


def exact_shapley_values(forward: CoalitionForward, baseline: int) -> np.ndarray:
    """Shapley values of every output by enumerating all 2^n coalitions, shape (outputs, n)."""
    question = forward.layout.question
    n = len(question)
    masks = list(itertools.product((0, 1), repeat=n))
    rows = torch.tensor([[q if keep else baseline for q, keep in zip(question, mask)] for mask in masks])
    value = dict(zip(masks, forward(rows).numpy()))
    shapley = np.zeros((len(value[masks[0]]), n))
    for mask, output in value.items():
        for i in (i for i in range(n) if not mask[i]):
            weight = math.factorial(sum(mask)) * math.factorial(n - sum(mask) - 1) / math.factorial(n)
            shapley[:, i] += weight * (value[mask[:i] + (1,) + mask[i + 1 :]] - output)
    return shapley


@pytest.fixture(scope="module")
def study():
    """bench/cc_shap_convergence.py as a module."""
    path = Path(__file__).parents[1] / "bench" / "cc_shap_convergence.py"
    spec = importlib.util.spec_from_file_location("cc_shap_convergence", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_orthogonal_permutations_are_reversed_pairs_along_an_orthonormal_basis():
    torch.manual_seed(0)
    basis = _orthonormal_basis(6)
    np.testing.assert_allclose((basis.T @ basis).numpy(), np.eye(5), atol=1e-12)
    np.testing.assert_allclose(basis.sum(dim=0).numpy(), 0, atol=1e-12)
    torch.manual_seed(0)
    drawn = list(orthogonal_permutations(6, 13))
    expected = [torch.argsort(direction).tolist() for direction in reversed(list(basis.T))]
    assert drawn[0:10:2] == expected, "the first five pairs follow the first basis"
    assert all(drawn[k + 1] == drawn[k][::-1] for k in range(0, 12, 2)) and len(drawn) == 13
    assert all(sorted(p) == list(range(6)) for p in drawn) and drawn[10] not in expected
    assert list(orthogonal_permutations(1, 3)) == [[0], [0], [0]]


@pytest.fixture(scope="module")
def game(study):
    """A forward over 8 question tokens whose every coalition holds a made-up game with interactions of every order
    (no model: the memo is the game; antithetic pairs would be exact on one of order two), its baseline token and
    its brute-force Shapley values."""
    question, baseline, outputs = tuple(range(100, 108)), 7, 3
    lay = AttributionLayout((), question, (), (1, 2), 0, (1, 2), (5, 6))
    forward = CoalitionForward(None, lay, 0)
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(outputs, 8))
    for coalition in study.every_coalition(question, baseline):
        kept = np.array([token != baseline for token in coalition], float)
        value = 3 * np.sin(weights @ kept) + 2 * kept[:3].prod()
        forward.memo[coalition] = torch.tensor(value, dtype=torch.float64)
    return forward, baseline, exact_shapley_values(forward, baseline)


def test_convergence_study_enumeration_on_a_game_with_interactions(study, game):
    forward, baseline, exact = game
    np.testing.assert_allclose(study.exact_values(forward, baseline), exact, rtol=1e-9, atol=1e-12)


def game_estimates(game, estimator: str, n_samples: int, seeds: range) -> np.ndarray:
    """The estimates of `estimator` on the made-up game, one per seed, shape (seeds, outputs, features)."""
    forward, baseline, _ = game
    return np.array(
        [
            Attribution(
                None,
                forward.layout,
                0,
                baseline_id=baseline,
                n_samples=n_samples,
                seed=seed,
                estimator=estimator,
                forward=forward,
            ).values()
            for seed in seeds
        ]
    )


@pytest.mark.parametrize("estimator", ["leverage", "sampling", "antithetic", "orthogonal"])
def test_every_estimator_is_efficient_and_seeded(game, estimator):
    """Each estimate sums to f(full) − f(empty), the same seed gives the same one, and a single one at a small budget
    misses the exact values."""
    _, _, exact = game
    one, again = game_estimates(game, estimator, 4, range(1)), game_estimates(game, estimator, 4, range(1))
    np.testing.assert_allclose(one[0].sum(axis=1), exact.sum(axis=1), rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(one, again)
    assert np.abs(one[0] - exact).max() > 0.1 * np.abs(exact).max(), "a single estimate is not exact"


@pytest.mark.parametrize("estimator", ["sampling", "antithetic", "orthogonal"])
def test_permutation_estimators_are_centred_on_the_exact_values(game, estimator):
    """The mean of 200 seeds' estimates lies within 4 standard errors of the exact values in every entry (an
    estimator that is not centred would not)."""
    many, exact = game_estimates(game, estimator, 4, range(200)), game[2]
    standard_error = many.std(axis=0) / np.sqrt(len(many))
    assert (np.abs(many.mean(axis=0) - exact) < 4 * standard_error).all(), "centred on the exact values"


def test_leverage_bias_is_small_beside_its_error_and_shrinks_with_the_budget(game):
    """Leverage SHAP is a least-squares fit on random coalitions, not an unbiased estimator: over 200 seeds its
    bias stays a small part of its root-mean-square error in every entry, and falls as the budget grows."""
    exact = game[2]
    bias, error = {}, {}
    for n_samples in (4, 16):
        many = game_estimates(game, "leverage", n_samples, range(200))
        bias[n_samples] = np.abs(many.mean(axis=0) - exact)
        error[n_samples] = np.sqrt(((many - exact) ** 2).mean(axis=0))
        assert (bias[n_samples] < 0.4 * error[n_samples]).all()
    assert bias[16].mean() < bias[4].mean() / 3 and error[16].mean() < error[4].mean() / 3


def test_convergence_study_keeps_its_scored_coalitions_and_reads_them_back(study, game, tmp_path):
    forward, baseline, _ = game
    settings = {"model": "m", "task": "factcheck", "first": 30, "pairs": 3, "max_features": 8}
    study.write_scores(tmp_path / "scores.pt", settings, [forward], baseline, 5, 12.5)
    (read,), read_baseline, longer, seconds = study.read_scores(tmp_path / "scores.pt", settings)
    assert (read.layout, read.label_index, read_baseline, longer, seconds) == (forward.layout, 0, baseline, 5, 12.5)
    assert read.memo.keys() == forward.memo.keys()
    assert all(torch.equal(read.memo[c], forward.memo[c]) for c in forward.memo)
    for other in ({"pairs": 4}, {"first": 0}):
        with pytest.raises(SystemExit, match="another study"):
            study.read_scores(tmp_path / "scores.pt", {**settings, **other})
    older = {key: value for key, value in settings.items() if key != "first"}
    study.write_scores(tmp_path / "older.pt", older, [forward], baseline, 5, 12.5)
    assert study.read_scores(tmp_path / "older.pt", {**settings, "first": 0})[0][0].memo.keys() == forward.memo.keys()
    with pytest.raises(SystemExit, match="another study"):
        study.read_scores(tmp_path / "older.pt", settings)
    assert study.pair_range(settings) == "pairs 31–33 of factcheck"
    assert study.pair_range(older) == "pairs 1–3 of factcheck", "a file from before --first studied the first pairs"


def test_size_allocation_gives_every_size_an_equal_share_and_takes_small_classes_whole():
    """Eight features: classes of sizes 1|7, 2|6, 3|5 (8, 28, 56 pairs) and 4 (35 pairs of complements), the middle
    one a single size, so half a share."""
    assert size_allocation(8, 7) == pytest.approx({1: 2, 2: 2, 3: 2, 4: 1})
    assert size_allocation(8, 40) == pytest.approx({1: 8, 2: 12.8, 3: 12.8, 4: 6.4}), "size 1|7 has only 8 pairs"
    assert size_allocation(8, 1000) == {1: 8, 2: 28, 3: 56, 4: 35}, "all 127 pairs, no more"
    assert size_allocation(1, 5) == {}


def test_leverage_coalitions_are_seeded_complementary_pairs_drawn_once():
    for n, budget in [(8, 40), (9, 30), (12, 72)]:
        masks, weights = leverage_coalitions(n, budget, np.random.default_rng(3))
        full = (1 << n) - 1
        assert len(set(masks)) == len(masks) and abs(len(masks) - budget) <= n, "about the budget, none twice"
        assert {full ^ m for m in masks} == set(masks) and not {0, full} & set(masks)
        assert len(weights) == len(masks) and (weights > 0).all()
        again, same = leverage_coalitions(n, budget, np.random.default_rng(3))
        assert again == masks and np.array_equal(same, weights)
        assert leverage_coalitions(n, budget, np.random.default_rng(4))[0] != masks
    masks, _ = leverage_coalitions(8, 80, np.random.default_rng(0))
    assert sorted(m for m in masks if m.bit_count() == 1) == [1 << i for i in range(8)], "40 pairs: size 1 whole"


def test_long_question_study_subsamples_a_leverage_draw_as_a_direct_draw_at_the_smaller_budget(monkeypatch):
    """bench/cc_shap_long_questions.py draws Leverage SHAP at a small budget from a larger draw: the pool's own
    complementary pairs, each size class's count and weight those of a direct draw at the small budget."""
    path = Path(__file__).parents[1] / "bench" / "cc_shap_long_questions.py"
    spec = importlib.util.spec_from_file_location("cc_shap_long_questions", path)
    long_questions = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, long_questions)
    spec.loader.exec_module(long_questions)
    n, full = 20, (1 << 20) - 1
    pool = leverage_coalitions(n, 16 * n, np.random.default_rng(0))
    masks, weights = long_questions.leverage_subsample(pool, n, 16 * n, 6 * n, np.random.default_rng(1))
    assert set(masks) < set(pool[0]) and masks[1::2] == [full ^ m for m in masks[::2]]
    direct_masks, direct_weights = leverage_coalitions(n, 6 * n, np.random.default_rng(2))
    weight_of_size = {m.bit_count(): w for m, w in zip(direct_masks, direct_weights, strict=True)}
    np.testing.assert_allclose(weights, [weight_of_size[m.bit_count()] for m in masks], rtol=1e-12)
    for size, expected in size_allocation(n, 6 * n / 2).items():
        drawn = sum(min(m.bit_count(), n - m.bit_count()) == size for m in masks[::2])
        assert drawn in (math.floor(expected), math.ceil(expected))
    with pytest.raises(ValueError, match="the pool holds"):
        long_questions.leverage_subsample(pool, n, 16 * n, 40 * n, np.random.default_rng(1))


def test_projected_regression_is_exact_with_every_coalition_and_efficient_with_few(game, study):
    forward, baseline, exact = game
    outputs = np.stack([forward.memo[c].numpy() for c in study.every_coalition(forward.layout.question, baseline)])
    n, full = 8, 255
    masks = list(range(1, full))
    sizes = np.array([m.bit_count() for m in masks])
    kernel = 1 / np.array([math.comb(n, s) * s * (n - s) for s in sizes])
    np.testing.assert_allclose(
        projected_regression(n, masks, kernel, outputs[masks], outputs[0], outputs[full]), exact, atol=1e-10
    )
    few, weights = leverage_coalitions(n, 16, np.random.default_rng(0))
    values = projected_regression(n, few, weights, outputs[few], outputs[0], outputs[full])
    np.testing.assert_allclose(values.sum(axis=1), outputs[full] - outputs[0], atol=1e-10)
    assert np.abs(values - exact).max() > 0.01, "16 coalitions of 254 do not give the exact values"
    np.testing.assert_allclose(
        Attribution(
            None, forward.layout, 0, baseline_id=baseline, n_samples=32, seed=0, estimator="leverage", forward=forward
        ).values(),
        exact,
        atol=1e-10,
        err_msg="a budget of every coalition is exact through the metric's path",
    )


def test_convergence_study_kernel_shap_is_exact_with_every_coalition_and_seeded_below(tiny_engine, instance, study):
    """The Kernel SHAP curve of bench/cc_shap_convergence.py (shap is used by the study alone, not the package)."""
    pytest.importorskip("shap", reason="the convergence study's Kernel SHAP curve needs shap (pip install shap)")
    lay = post_hoc_layout(tiny_engine, instance, 0)
    baseline = tiny_engine.lm.encode("...", continuation=True)[0]
    n = len(lay.question)
    assert 2**n <= 1024, "the enumeration needs a short question"
    exact = exact_shapley_values(CoalitionForward(tiny_engine, lay, 1), baseline)

    def kernel(n_samples: int, seed: int) -> np.ndarray:
        fit = study.KernelFit(tiny_engine, lay, 1, baseline_id=baseline, n_samples=n_samples, seed=seed)
        fit.record()
        score_recorded(tiny_engine, [fit.forward])
        return fit.values()

    np.testing.assert_allclose(kernel(2**n // n + 1, 0), exact, rtol=1e-4, atol=1e-7)
    np.random.seed(123)
    drawn = np.random.random()
    np.random.seed(123)
    values = kernel(4, 7)
    assert np.random.random() == drawn, "the fit's seed leaves numpy's global generator alone"
    np.testing.assert_allclose(values.sum(axis=1), exact.sum(axis=1), rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(values, kernel(4, 7))
    assert not np.allclose(values, kernel(4, 8)) and not np.allclose(values, exact)
    fit = study.KernelFit(tiny_engine, lay, 1, baseline_id=baseline, n_samples=4, seed=7)
    assert study.distinct_coalitions(fit) == 4 * n + 2, "the budget's coalitions, the empty and the full one"
