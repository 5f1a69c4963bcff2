"""The dataset card as the Hub reads it: its header is valid `DatasetCardData` with the configs, the sizes of
every split, the sources and creators; its body shows the first row exactly as `load_dataset` returns it, the
uses, and the paper with its arXiv id and DOI."""

from __future__ import annotations

import json
import re

import datasets
from huggingface_hub import DatasetCard

from recoe_causaldiag.citation import PAPER_ARXIV, PAPER_DOI
from recoe_causaldiag.hub_layout import load_pairs
from recoe_causaldiag.tasks import DATASET_VERSION


def test_the_built_card_is_hub_card_data_with_sizes_sources_and_creators(factcheck_dir):
    card = DatasetCard.load(factcheck_dir / "README.md")
    data = card.data.to_dict()
    rows = len(load_pairs(factcheck_dir))
    assert data["source_datasets"] == ["original"] and "machine-generated" in data["annotations_creators"]
    assert data["configs"] == [
        {"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*.parquet"}]}
    ]
    assert data["dataset_info"]["splits"] == [
        {"name": "test", "num_bytes": data["dataset_info"]["dataset_size"], "num_examples": rows}
    ]
    assert data["size_categories"] == ["n<1K" if rows < 1000 else "1K<n<10K"]
    assert f"(v{DATASET_VERSION})" in card.text and "{{" not in card.text


def test_the_cards_example_row_is_the_first_row_load_dataset_returns(factcheck_dir):
    text = (factcheck_dir / "README.md").read_text(encoding="utf-8")
    shown = json.loads(re.search(r"## Example row\n.*?```json\n(.*?)```", text, re.S)[1])
    assert shown == datasets.load_dataset(str(factcheck_dir), split="test")[0]


def test_the_card_cites_the_paper_with_its_arxiv_id_and_doi_and_says_what_is_out_of_scope(factcheck_dir):
    text = (factcheck_dir / "README.md").read_text(encoding="utf-8")
    assert f"eprint    = {{{PAPER_ARXIV}}}" in text and f"doi       = {{{PAPER_DOI}}}" in text
    assert "**Out of scope:**" in text and "## Changes in 1.4.0" in text and "## Changes in 1.3.1" in text
