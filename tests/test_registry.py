import pytest

from recoe_causaldiag.api.registry import Registry, UnknownNameError
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.tasks import TASKS


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownNameError) as err:
        METRICS.get("filer_tokens")
    assert "did you mean 'filler_tokens'?" in str(err.value)
    assert "early_answering" in str(err.value)


def test_duplicate_names_are_refused():
    registry: Registry[int] = Registry("thing")
    registry.add("a", 1)
    with pytest.raises(ValueError, match="twice"):
        registry.add("a", 2)


def test_resolve_all_and_lists():
    assert METRICS.resolve("all") == METRICS.names()
    assert METRICS.resolve("early_answering, filler_tokens,early_answering") == ["early_answering", "filler_tokens"]
    with pytest.raises(UnknownNameError):
        TASKS.resolve("factcheck,nope")
    with pytest.raises(UnknownNameError):
        TASKS.resolve(" , ")


def test_registered_metrics_and_tasks():
    assert {"filler_tokens", "early_answering"} <= set(METRICS.names())
    assert "factcheck" in TASKS


def test_a_renamed_metric_is_found_by_its_former_name():
    """`random` became `random_baseline` (a `random.py` in a Space shadows Python's own): old results still rerun."""
    assert METRICS.get("random") is METRICS.get("random_baseline")
    assert METRICS.resolve("oracle,random,random_baseline") == ["oracle", "random_baseline"]
    assert "random" not in METRICS.names()
    registry: Registry[int] = Registry("thing")
    registry.add("new", 1)
    registry.alias("old", "new")
    with pytest.raises(ValueError, match="already a name"):
        registry.alias("new", "new")
    with pytest.raises(UnknownNameError):
        registry.alias("older", "missing")
