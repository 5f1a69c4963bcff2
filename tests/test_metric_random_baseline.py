"""The random sanity reference: reproducible, uniform, at chance diagnosticity on every task, and its `evaluate`
card example."""

import numpy as np
import pytest
from cards import card_namespace

from recoe_causaldiag.api.metric import METRICS, Instance
from recoe_causaldiag.metrics.random_baseline import RandomBaseline
from recoe_causaldiag.statistics import diagnosticity
from recoe_causaldiag.tasks import TASKS


def test_random_is_uniform_seeded_and_order_free():
    instances = [Instance(f"Q{k}?", ("Yes", "No"), (), f"E{k}") for k in range(200)]
    scores = RandomBaseline().score_instances(instances)["uniform"]
    assert ((scores >= 0) & (scores < 1)).all() and 0.4 < scores.mean() < 0.6
    np.testing.assert_array_equal(RandomBaseline(0).score_instances(instances[::-1])["uniform"], scores[::-1])
    assert not np.array_equal(RandomBaseline(1).score_instances(instances)["uniform"], scores)
    with pytest.raises(ValueError, match="seed"):
        RandomBaseline(-1)


def test_random_is_registered_as_a_reference():
    assert METRICS.get("random_baseline") is RandomBaseline
    assert (
        RandomBaseline.explanation_type == "reference"
        and RandomBaseline.description
        and RandomBaseline().variants == ("uniform",)
    )


@pytest.mark.parametrize("task", TASKS.names())
def test_random_diagnosticity_is_at_chance_on_every_task(task, task_pairs):
    (random,) = RandomBaseline().score(task_pairs[task], None)
    estimate = diagnosticity(random.faithful, random.unfaithful)
    assert estimate.n_nan == 0 and estimate.ci_low <= 0.5 <= estimate.ci_high, f"random on {task}: {estimate}"


def test_card_example_runs_offline():
    namespace = card_namespace("random_baseline")
    results, scores = namespace["results"], namespace["results"]["scores"]
    assert results["variant"] == "uniform" and all(0 <= s <= 1 for s in scores)
    again = namespace["random_reference"].compute(
        question=["Q?"], choices=[["Yes", "No"]], edits=[[]], explanations=["E."], seed=3
    )
    expected = RandomBaseline(3).score_instances([Instance("Q?", ("Yes", "No"), (), "E.")])["uniform"]
    assert again["scores"] == pytest.approx(expected.tolist())
