"""`metadata` as the datasets store it (SPEC §3, from release 1.4.0): a struct the dataset viewer can filter on,
typed where Arrow gives every value back unchanged and JSON text under `<key>_json` where it cannot, read back to
exactly the record the builder made; the JSON text of earlier releases still reads."""

from __future__ import annotations

import json

import datasets
import pytest

from recoe_causaldiag.api.records import PairRecord, RecordError, metadata_from_stored, metadata_json, validate_record
from recoe_causaldiag.hub_layout import load_pairs, metadata_column, stored_rows
from recoe_causaldiag.tasks import DATASETS


def test_every_built_config_stores_a_struct_and_reads_back_every_record_the_builder_made(every_dataset_dir):
    for name in DATASETS.names():
        spec = DATASETS.get(name)
        built = spec.build(0)
        for config in spec.configs:
            stored = datasets.load_dataset(str(every_dataset_dir / name), config, split="test")
            assert isinstance(stored.features["metadata"], dict), f"{name}/{config}: metadata is no struct"
            assert "cluster" in stored.features["metadata"], f"{name}/{config}: the cluster bootstrap reads it"
            assert load_pairs(every_dataset_dir / name, config) == built[config], f"{name}/{config} changed"


def test_the_viewer_filters_on_typed_fields_and_multihop_keeps_its_mixed_values_as_json(every_dataset_dir):
    factcheck = datasets.load_dataset(str(every_dataset_dir / "factcheck"), split="test")
    sport = factcheck.filter(lambda row: row["metadata"]["relation"] == "sport")
    assert 0 < sport.num_rows < factcheck.num_rows
    multihop = datasets.load_dataset(str(every_dataset_dir / "multihop"), split="test")
    fields = multihop.features["metadata"]
    assert {"check_json", "values_edits_json", "values_counter_json"} <= set(fields)
    assert fields["hops"] == datasets.Value("int64") and "check" not in fields
    first = multihop[0]["metadata"]
    assert (
        json.loads(first["values_edits_json"])
        == json.loads(load_pairs(every_dataset_dir / "multihop")[0].metadata)["values_edits"]
    )


def record(metadata: str) -> PairRecord:
    return PairRecord(
        "p1", "factcheck", "Q?", ("Yes", "No"), "Yes", ("a.",), ("b.",), "faithful.", "unfaithful.", metadata=metadata
    )


def test_a_struct_field_per_key_typed_only_where_every_value_reads_back_unchanged():
    metadata = [
        {"cluster": "x", "count": 3, "value": 1, "source": {"origin": "curated", "url": "u"}, "check": "$a"},
        {"cluster": "y", "count": 4, "value": 0.75, "source": {"origin": "counterfact", "case_id": 7}},
        {"cluster": "z", "count": 5, "value": 2, "source": {"origin": "curated", "url": "v"}, "check": {"op": ">"}},
    ]
    column = metadata_column(metadata)
    names = [field.name for field in column.type]
    assert names == ["check_json", "cluster", "count", "source", "value_json"]
    assert str(column.type.field("count").type) == "int64", "integers stay integers"
    stored = column.to_pylist()
    assert stored[1]["check_json"] is None and stored[1]["source"]["url"] is None, "a key a row lacks is null"
    assert [json.loads(metadata_from_stored(row)) for row in stored] == metadata


def test_a_record_reads_back_from_its_stored_row_and_from_the_json_text_of_earlier_releases():
    original = record(metadata_json(cluster="c", facts=["A is B."], source={"origin": "curated"}))
    rows, features = stored_rows([original])
    assert isinstance(rows[0]["metadata"], dict) and isinstance(features["metadata"], dict)
    assert PairRecord.from_row(rows[0]) == original
    assert PairRecord.from_row(original.to_row()) == original, "metadata as JSON text (releases before 1.4.0)"


@pytest.mark.parametrize(
    "metadata, problem",
    [
        ('{"cluster": "c", "note": null}', "metadata.note is null"),
        ('{"cluster": "c", "source": {"url": null}}', "metadata.source.url is null"),
        ('{"cluster": "c", "check_json": "{}"}', "'check_json': names ending in '_json' are reserved"),
    ],
)
def test_metadata_a_struct_could_not_give_back_is_refused_when_built(metadata, problem):
    with pytest.raises(RecordError, match="field 'metadata'") as refused:
        validate_record(record(metadata))
    assert problem in str(refused.value)
