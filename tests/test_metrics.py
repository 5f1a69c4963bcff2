"""The metric contract, over every registered metric, plus the exact arithmetic of the CoT corruptions."""

import numpy as np
import pytest

from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.metrics.cot_corruption import Corruption, corruption_scores
from recoe_causaldiag.metrics.early_answering import EarlyAnswering
from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS, FILLERS, FillerTokens
from recoe_causaldiag.scoring import ScoringEngine


class ScriptedEngine:
    """Answers label requests from a table keyed by the explanation text (the CoT continuation)."""

    def __init__(self, table):
        self.table = table

    def label_probs(self, requests, desc=""):
        return [np.array(self.table[r.prompt.continuation]) for r in requests]


def test_corruption_scores_compute_the_paper_formula(factcheck_pairs):
    pair = factcheck_pairs[0]
    faithful, unfaithful = pair.explanation_faithful, pair.explanation_unfaithful
    cue = " The best answer is:"
    table = {
        f" {faithful}{cue}": [0.2, 0.8], f" {unfaithful}{cue}": [0.3, 0.7],
        f" F{cue}": [0.6, 0.4], f" U{cue}": [0.35, 0.65],
    }
    corruption = Corruption("blank", lambda e: "F" if e == faithful else "U")
    scores = {s.variant: s for s in corruption_scores([pair], ScriptedEngine(table), [corruption])}
    assert scores["blank-continuous"].faithful[0] == pytest.approx(0.8 - 0.4)
    assert scores["blank-continuous"].unfaithful[0] == pytest.approx(0.7 - 0.65)
    assert scores["blank-binary"].faithful[0] == 1.0 and scores["blank-binary"].unfaithful[0] == 0.0
    inverted = {s.variant: s for s in corruption_scores([pair], ScriptedEngine(table), [corruption], invert=True)}
    assert inverted["blank-continuous"].faithful[0] == pytest.approx(1 - (0.8 - 0.4))
    assert inverted["blank-binary"].faithful[0] == 0.0 and inverted["blank-binary"].unfaithful[0] == 1.0


def test_filler_variants():
    assert set(FILLERS.values()) == {"...", "***", "---", "$$$", "¶¶¶"}
    by_name = {c.name: c for c in CORRUPTIONS}
    assert by_name["repeating-dots"].apply("abcd") == "............"
    assert by_name["non_repeating-pilcrows"].apply("abcd") == "¶¶¶"
    assert len(FillerTokens().variants) == 2 * 5 * 2
    assert EarlyAnswering().variants == ("first_third-continuous", "first_third-binary",
                                         "heuristic-continuous", "heuristic-binary")


@pytest.mark.parametrize("name", METRICS.names())
def test_every_registered_metric_scores_a_small_sample(name, default_lm, factcheck_pairs):
    metric = METRICS.get(name)()
    pairs = factcheck_pairs[:2]
    scored = metric.score(pairs, ScoringEngine(default_lm, progress=False))
    assert [s.variant for s in scored] == list(metric.variants)
    for variant in scored:
        assert variant.faithful.shape == variant.unfaithful.shape == (len(pairs),)
        assert np.isfinite(variant.faithful).all() and np.isfinite(variant.unfaithful).all()
        if variant.variant.endswith("-binary"):
            assert set(np.unique(np.concatenate([variant.faithful, variant.unfaithful]))) <= {0.0, 1.0}
        else:
            assert (np.abs(variant.faithful) <= 1).all()
    assert metric.kind in {"cot", "post-hoc"} and metric.description
