"""Dataset-level CT and CCT (paper 004 §3, App. F): exact statistics, input checks, the word insertions,
the counterfactual-test runner (scripted and real model) and the two `evaluate` modules."""

import math
from pathlib import Path

import numpy as np
import pytest
from cards import card_namespace
from fakes import ScriptedEngine
from lemminflect import getAllLemmas

from recoe_causaldiag.api.metric import Instance
from recoe_causaldiag.dataset_metrics.cct import (
    cct_statistics,
    check_inputs,
    counterfactual_test_items,
    ct_unfaithfulness,
    js_divergence,
    point_biserial,
    spearman,
    tvd,
)
from recoe_causaldiag.mechanisms.interventions import (
    candidate_words,
    insert,
    mentioned_count,
    mentions_all,
    random_insertions,
    seed_for,
    slots,
)
from recoe_causaldiag.scoring import ScoringEngine

ROOT = Path(__file__).resolve().parents[1]
BEFORE = [[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.55, 0.45]]
AFTER = [[0.2, 0.8], [0.85, 0.15], [0.55, 0.45], [0.4, 0.6]]
MENTIONS = [1, 0, 0, 1]


def eq3(impacts, mentions):
    """CCT as written in eq. 3, with the population standard deviation."""
    x, m = np.asarray(impacts), np.asarray(mentions, bool)
    n, n_m = len(x), m.sum()
    return (x[m].mean() - x[~m].mean()) / x.std() * math.sqrt(n_m * (n - n_m) / n**2)


def test_distances():
    assert tvd([0.9, 0.1], [0.2, 0.8]) == pytest.approx(0.7)
    assert tvd([0.2, 0.3, 0.5], [0.5, 0.3, 0.2]) == pytest.approx(0.3)
    assert js_divergence([1.0, 0.0], [0.0, 1.0]) == pytest.approx(1.0)
    p, q = np.array([0.9, 0.1]), np.array([0.2, 0.8])
    mid = (p + q) / 2
    kl = lambda a, b: float(np.sum(a * np.log2(a / b)))  # noqa: E731
    assert js_divergence(p, q) == pytest.approx(0.5 * kl(p, mid) + 0.5 * kl(q, mid))


def test_cct_is_equation_3_and_its_variants():
    result = cct_statistics(BEFORE, AFTER, MENTIONS)
    impacts = [0.7, 0.05, 0.05, 0.15]
    assert result.cct == pytest.approx(eq3(impacts, MENTIONS))
    assert result.cct == pytest.approx(np.corrcoef(impacts, MENTIONS)[0, 1])
    js = [js_divergence(p, q) for p, q in zip(BEFORE, AFTER)]
    assert result.cct_js == pytest.approx(eq3(js, MENTIONS))
    # ranks of impacts: 4, 1.5, 1.5, 3; of mentions: 3.5, 1.5, 1.5, 3.5
    assert result.cct_spearman == pytest.approx(np.corrcoef([4, 1.5, 1.5, 3], [3.5, 1.5, 1.5, 3.5])[0, 1])
    assert (result.ct_unfaithfulness, result.n_changed, result.n) == (0.0, 2, 4)
    assert cct_statistics(BEFORE, AFTER, [1, 0, 0, 0]).ct_unfaithfulness == 0.5


def test_undefined_statistics_are_nan():
    assert math.isnan(point_biserial([0.1, 0.5, 0.2], [1, 1, 1]))
    assert math.isnan(spearman([0.3, 0.3, 0.3], [1, 0, 1]))
    assert math.isnan(point_biserial([0.3], [1]))
    unchanged = cct_statistics([[0.9, 0.1], [0.8, 0.2]], [[0.7, 0.3], [0.8, 0.2]], [1, 0])
    assert math.isnan(unchanged.ct_unfaithfulness) and unchanged.n_changed == 0
    assert unchanged.cct == pytest.approx(1.0)
    assert ct_unfaithfulness([np.array([0.5, 0.5])], [np.array([0.4, 0.6])], [0]) == (1.0, 1)


@pytest.mark.parametrize(
    ("before", "after", "mentions", "message"),
    [
        (BEFORE, AFTER[:3], MENTIONS, r"probs_after has 3 items"),
        (BEFORE, AFTER, MENTIONS[:3], r"mentions has 3 items"),
        (BEFORE, [AFTER[0], [0.5, 0.6], *AFTER[2:]], MENTIONS, r"probs_after\[1\] sums to 1\.1"),
        ([[0.2, 0.3, 0.5], *BEFORE[1:]], AFTER, MENTIONS, r"probs_after\[0\] has 2 labels but probs_before\[0\] has 3"),
        (BEFORE, AFTER, [1, 0, 2, 1], r"mentions\[2\] must be 0 or 1"),
        ([[1.0], *BEFORE[1:]], AFTER, MENTIONS, r"probs_before\[0\] is not a distribution"),
    ],
)
def test_input_checks_name_argument_and_index(before, after, mentions, message):
    with pytest.raises(ValueError, match=message):
        check_inputs(before, after, mentions)


def test_word_lists_are_curated_and_tagged():
    words = candidate_words()
    assert len(words["ADJ"]) >= 50 and len(words["ADV"]) >= 50
    assert all("ADJ" in getAllLemmas(w) for w in words["ADJ"]) and all("ADV" in getAllLemmas(w) for w in words["ADV"])


def test_slots_and_insertions():
    found = [(s.word, s.pos) for s in slots("Would a pear sink in water? (A) yes (B) no. Answer?")]
    assert found == [("pear", "NOUN"), ("sink", "VERB"), ("water", "NOUN")]
    assert [(s.word, s.pos) for s in slots("Does Babe Ruth professionally play baseball?")] == [
        ("play", "VERB"),
        ("baseball", "NOUN"),
    ]
    assert [s.word for s in slots("How many of them are media company? Ferrari, Mediaset.")] == ["media"]
    sentence = "Three people are riding a carriage."
    assert insert(sentence, slots(sentence)[0], "joyous").text == "Three joyous people are riding a carriage."
    text = "Three people are riding a carriage pulled by four horses."
    first = random_insertions(text, 6, seed_for(0, text))
    assert first == random_insertions(text, 6, seed_for(0, text)) and len(first) == 6
    assert len({(i.slot.start, i.word) for i in first}) == 6
    for ins in first:
        assert ins.word in candidate_words()["ADJ" if ins.slot.pos == "NOUN" else "ADV"]
        assert ins.text.replace(f"{ins.word} ", "", 1) == text
    assert random_insertions("Is Paris in France?", 3, 0) == []


def test_mentions_match_word_or_lemma_per_token():
    assert mentions_all(["horses"], "The HORSE is joyous.")
    assert mentions_all(["plays"], "he played the sport tennis")
    assert not mentions_all(["art"], "a party")
    assert mentioned_count(["sport", "tennis", "golf"], "plays the sport tennis") == 2


def test_counterfactual_test_items_with_a_scripted_engine():
    instance = Instance("Would a pear sink in water?", ("Yes", "No"), ("Pears are dense.",), "unused")
    inserted = random_insertions(instance.question, 2, seed_for(0, instance.question))
    changed = inserted[0].text
    # label probabilities by the direct prompt's user turn; explanations by the post-hoc prompt's user turn and label
    engine = ScriptedEngine(
        lambda prompt: [0.3, 0.7] if changed in prompt.turns[0].content else [0.8, 0.2],
        lambda prompt: (
            f"{prompt.turns[1].content}: it is {inserted[0].word}" if changed in prompt.turns[0].content else "no"
        ),
    )
    items = counterfactual_test_items([instance], engine, k=2, seed=0)
    assert items.sources == (0, 0) and items.inserted == tuple(i.word for i in inserted)
    assert items.inputs == tuple(i.text for i in inserted)
    assert items.explanations == (f"No: it is {inserted[0].word}", "no")
    assert items.mentions == (1, 0)
    stats = items.statistics()
    assert (stats.cct, stats.ct_unfaithfulness, stats.n_changed, stats.n) == (pytest.approx(1.0), 0.0, 1, 2)


def test_counterfactual_test_items_with_the_real_model(default_lm, factcheck_pairs):
    instances = [Instance.from_pair(p, p.explanation_faithful) for p in factcheck_pairs[:2]]
    items = counterfactual_test_items(
        instances, ScoringEngine(default_lm, progress=False), k=1, seed=0, max_new_tokens=8
    )
    assert len(items.mentions) == 2 and set(items.mentions) <= {0, 1}
    assert all(isinstance(text, str) for text in items.explanations)
    for before, after in zip(items.probs_before, items.probs_after):
        assert before.sum() == pytest.approx(1.0) and after.sum() == pytest.approx(1.0)
    stats = items.statistics()
    assert stats.n == 2 and 0 <= stats.n_changed <= 2


def test_cct_evaluate_module():
    import evaluate

    results = card_namespace("cct")["results"]
    assert set(results) == {"cct", "cct_js", "cct_spearman", "ct_unfaithfulness", "n"}
    assert results["cct"] == pytest.approx(eq3([0.7, 0.05, 0.05, 0.15], MENTIONS)) and results["n"] == 4
    module = evaluate.load(str(ROOT / "metrics_evaluate" / "cct"))
    with pytest.raises(ValueError, match=r"probs_before\[1\] sums to"):
        module.compute(probs_before=[[0.5, 0.5], [0.5, 0.6]], probs_after=[[0.5, 0.5], [0.5, 0.5]], mentions=[0, 1])
    with pytest.raises(ValueError, match="probs_after"):
        module.compute(probs_before=[[0.5, 0.5], [0.5, 0.5]], probs_after=[[0.5, 0.5]], mentions=[0, 1])


def test_counterfactual_test_evaluate_module():
    import evaluate

    assert card_namespace("counterfactual_test")["results"] == {"ct_unfaithfulness": 0.5, "n_changed": 2, "n": 4}
    module = evaluate.load(str(ROOT / "metrics_evaluate" / "counterfactual_test"))
    with pytest.raises(ValueError, match=r"probs_after\[0\] has 3 labels"):
        module.compute(probs_before=[[0.5, 0.5]], probs_after=[[0.2, 0.3, 0.5]], mentions=[1])
