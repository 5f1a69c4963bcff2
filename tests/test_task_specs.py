"""What each registered dataset's spec owns: its curated sources, its card template and the builder that fills it;
and the one A/B answer-letter helper the builders share."""

import math
import random
from pathlib import Path

import pytest
import yaml

from recoe_causaldiag.curated_sources import source_path
from recoe_causaldiag.dataset_building import card_template
from recoe_causaldiag.mechanisms.interventions import WORDS_FILE
from recoe_causaldiag.tasks import DATASETS
from recoe_causaldiag.tasks.answer_letters import balanced_letters, options_in_order

SOURCES = Path(__file__).resolve().parents[1] / "builders" / "sources"


@pytest.mark.parametrize("name", DATASETS.names())
def test_each_dataset_names_curated_sources_and_a_card_that_exist(name):
    spec = DATASETS.get(name)
    assert spec.sources, f"{name} names no curated source"
    for source in spec.sources:
        assert source_path(source).is_file(), f"{name}: source {source} is not in builders/sources/"
    card = card_template(spec)
    assert card.startswith("---\n") and f'pretty_name: "{spec.pretty_name}"' in card
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["source_datasets"] and header["annotations_creators"] and header["language_creators"]
    for placeholder in ("version", "example_row", "uses", "paper_citation", "artifact_probes"):
        assert "{{" + placeholder + "}}" in card, f"{name}: no {placeholder}"


def test_every_curated_file_belongs_to_a_dataset_or_the_counterfactual_test():
    claimed = {source for name in DATASETS.names() for source in DATASETS.get(name).sources}
    curated = {p.name for p in SOURCES.iterdir() if p.suffix in (".csv", ".jsonl")}
    assert curated == claimed | {WORDS_FILE}


def _shuffled(letters, key):
    random.Random(key).shuffle(letters)
    return letters


@pytest.mark.parametrize("count", range(0, 24))
def test_balanced_letters_keep_each_builder_rounding(count):
    key = f"0|test|{count}"
    # Multi-hop and ReCoE gave the odd letter to A, Analogy to B: both stay, so no dataset changes
    assert balanced_letters(count, key, odd_extra="A") == _shuffled(
        ["A"] * math.ceil(count / 2) + ["B"] * (count // 2), key
    )
    assert balanced_letters(count, key, odd_extra="B") == _shuffled(
        ["A"] * (count // 2) + ["B"] * (count - count // 2), key
    )


def test_options_put_the_answer_at_its_letter():
    assert options_in_order("yes", "no", "A") == ("yes", "no")
    assert options_in_order("yes", "no", "B") == ("no", "yes")


def test_every_rewrite_of_every_task_has_paraphrased_prompts(task_pairs):
    """Weight editors' generalisation is measured on them (issue 15); Multi-hop alone has no rewrites."""
    for task, pairs in task_pairs.items():
        rewrites = [r for p in pairs for r in (*p.rewrites, *p.counter_rewrites)]
        assert bool(rewrites) == (task != "multihop"), task
        for rewrite in rewrites:
            assert rewrite.paraphrases and rewrite.prompt not in rewrite.paraphrases, (task, rewrite)
            assert all(p.count("{}") == 1 for p in rewrite.paraphrases), (task, rewrite)
