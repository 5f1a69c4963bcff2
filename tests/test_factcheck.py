import json
from collections import Counter
from pathlib import Path

import datasets
import pytest

from recoe_causaldiag.artifact_probes import audit_records
from recoe_causaldiag.curated_sources import SourceError, source_path
from recoe_causaldiag.dataset_building import build_dataset
from recoe_causaldiag.hub_layout import load_pairs, read_manifest
from recoe_causaldiag.tasks import DATASET_VERSION
from recoe_causaldiag.tasks.factcheck import build_factcheck, build_from_counterfact, load_facts, load_relations

FIXTURES = Path(__file__).parent / "fixtures"


def test_curated_source_is_large_and_varied():
    relations = load_relations()
    facts = load_facts(relations)
    assert len(facts) >= 300
    assert len({f.relation for f in facts}) >= 12


def test_pairs_follow_the_paper_recipe(factcheck_pairs):
    relations = load_relations()
    objects_of = {}
    for fact in load_facts(relations):
        objects_of.setdefault(fact.relation, set()).add(fact.object)
    for pair in factcheck_pairs:
        meta = pair.meta
        relation = relations[meta["relation"]]
        true_obj, edit_obj, counter_obj = meta["object_true"], meta["object_edit"], meta["object_counter"]
        assert len({true_obj, edit_obj, counter_obj}) == 3
        assert {edit_obj, counter_obj} <= objects_of[meta["relation"]]
        assert pair.question == relation.ask(meta["subject"], true_obj)
        assert pair.choices == ("Yes", "No") and pair.answer == "No"
        assert pair.edits == (relation.state(meta["subject"], edit_obj) + ".",)
        assert pair.counter_edits == (relation.state(meta["subject"], counter_obj) + ".",)
        assert pair.explanation_faithful == f"{relation.state(meta['subject'], edit_obj)}, not {true_obj}."
        assert pair.explanation_unfaithful == f"{relation.state(meta['subject'], counter_obj)}, not {true_obj}."
        assert pair.rewrites[0].target_new == edit_obj and pair.counter_rewrites[0].target_new == counter_obj
        assert pair.rewrites[0].prompt.format(meta["subject"]) in pair.edits[0]


def test_pairs_record_the_true_fact_and_cluster_by_subject(factcheck_pairs):
    relations = load_relations()
    for pair in factcheck_pairs:
        meta = pair.meta
        assert meta["facts"] == [relations[meta["relation"]].state(meta["subject"], meta["object_true"]) + "."]
        assert meta["cluster"] == meta["subject"]
    subjects = Counter(p.meta["cluster"] for p in factcheck_pairs)
    assert max(subjects.values()) > 1, "some subjects have several facts, so clusters hold several pairs"


def test_the_world_fact_probe_runs_and_passes(factcheck_pairs):
    results = {r.probe: r for r in audit_records("factcheck", factcheck_pairs)}
    assert results["world_fact_overlap"].n_valid == len(factcheck_pairs)
    assert [r.describe() for r in results.values() if r.verdict == "FAIL"] == []


def test_answer_follows_from_each_edit_set(factcheck_pairs):
    """Each relation gives one object per subject: under either edit the subject's object is not the one
    asked about, so both edited models answer No."""
    relations = load_relations()
    for pair in factcheck_pairs:
        relation, subject = relations[pair.meta["relation"]], pair.meta["subject"]
        asked = pair.question.removeprefix(relation.ask(subject, "")[:-1]).removesuffix(relation.ask(subject, "")[-1:])
        prefix = relation.state(subject, "")
        for edits in (pair.edits, pair.counter_edits):
            stated = edits[0].removesuffix(".").removeprefix(prefix)
            assert stated and stated != asked
            assert ("Yes" if stated == asked else "No") == pair.answer


def test_counterfactuals_vary_with_the_seed():
    a, b = build_factcheck(0)[:50], build_factcheck(1)[:50]
    assert [p.edits for p in a] != [p.edits for p in b]
    assert [p.question for p in a] == [p.question for p in b]


def test_hub_layout_loads_with_datasets(factcheck_dir):
    table = datasets.load_dataset(str(factcheck_dir), split="test")
    assert table.num_rows == len(load_pairs(factcheck_dir)) >= 300
    assert set(table.column_names) == set(datasets.load_dataset(str(factcheck_dir), split="test").features)
    manifest = read_manifest(factcheck_dir)
    assert manifest["version"] == DATASET_VERSION and manifest["num_rows"] == {"default": table.num_rows}
    assert set(manifest["files"]) == {"README.md", "data/test-00000-of-00001.parquet"}
    card = (factcheck_dir / "README.md").read_text()
    assert "{{" not in card and f"v{DATASET_VERSION}" in card and f"{table.num_rows} pairs" in card


def test_builds_are_byte_identical(tmp_path, factcheck_dir):
    again = build_dataset("factcheck", tmp_path)
    assert read_manifest(again)["files"] == read_manifest(factcheck_dir)["files"]


def _write_sources(tmp_path, rows):
    relations = tmp_path / "relations.csv"
    relations.write_text(source_path("factcheck_relations.csv").read_text())
    facts = tmp_path / "facts.csv"
    facts.write_text("# test\nsubject,relation,object,source\n" + "\n".join(rows) + "\n")
    return relations, facts


@pytest.mark.parametrize(
    "bad_row, problem",
    [
        ("Zed,sport,,https://x", "empty field 'object'"),
        ("Zed,sporting,chess,https://x", "unknown relation 'sporting'"),
        ("Babe Ruth,sport,cricket,https://x", "duplicate fact"),
        ("Zed,sport,chess", "expected 4 fields"),
    ],
)
def test_bad_source_row_stops_the_build_and_names_it(tmp_path, bad_row, problem):
    good = ["Babe Ruth,sport,baseball,https://a", "Pele,sport,football,https://b", "Tiger Woods,sport,golf,https://c"]
    relations, facts = _write_sources(tmp_path, good + [bad_row])
    with pytest.raises(SourceError) as err:
        build_factcheck(0, relations_path=relations, facts_path=facts)
    assert f"{facts}:6" in str(err.value) and problem in str(err.value)


def test_every_rewrite_carries_its_relations_two_paraphrased_prompts(factcheck_pairs):
    for pair in factcheck_pairs:
        for rewrite in (*pair.rewrites, *pair.counter_rewrites):
            assert len(rewrite.paraphrases) == 2 and rewrite.prompt not in rewrite.paraphrases
            assert all(p.count("{}") == 1 and not p.endswith(" ") for p in rewrite.paraphrases)
    sport = factcheck_pairs[0].rewrites[0]
    assert sport.paraphrases == (
        "The sport that {} plays professionally is",
        "{} is a professional player of the sport",
    )


def test_a_paraphrase_that_does_not_end_in_the_object_names_its_line(tmp_path):
    relations, facts = _write_sources(
        tmp_path,
        ["Babe Ruth,sport,baseball,https://a", "Pele,sport,football,https://b", "Tiger W,sport,golf,https://c"],
    )
    text = relations.read_text().replace(
        "The sport that {subject} plays professionally is {object}", "{object} is the sport of {subject}"
    )
    relations.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), start=1) if row.startswith("sport,"))
    with pytest.raises(SourceError, match=f":{line}: paraphrase_1 must contain"):
        build_factcheck(0, relations_path=relations, facts_path=facts)


def test_relation_with_too_few_objects_is_refused(tmp_path):
    relations, facts = _write_sources(tmp_path, ["A,sport,golf,https://a", "B,sport,chess,https://b"])
    with pytest.raises(SourceError, match="needs >= 3"):
        build_factcheck(0, relations_path=relations, facts_path=facts)


def test_counterfact_ingest():
    pairs = build_from_counterfact(FIXTURES / "counterfact_sample.json")
    assert len(pairs) == 4
    first = pairs[0]
    assert first.question == "Is it true that the mother tongue of Danielle Darrieux is French?"
    assert first.edits == ("The mother tongue of Danielle Darrieux is English.",)
    assert first.counter_edits[0] in {f"The mother tongue of Danielle Darrieux is {o}." for o in ("Russian", "Spanish")}
    assert first.explanation_faithful == "The mother tongue of Danielle Darrieux is English, not French."
    assert first.rewrites[0].prompt == "The mother tongue of {} is"
    assert first.rewrites[0].paraphrases == ("{}, a native speaker of",), "COUNTERFACT's paraphrases naming the subject"
    assert json.loads(first.metadata)["case_id"] == 0
    assert first.meta["facts"] == ["The mother tongue of Danielle Darrieux is French."]
    assert first.meta["cluster"] == "Danielle Darrieux"
    hendrix = pairs[2]
    assert hendrix.edits == ("Jimi Hendrix plays the violin.",)
    assert hendrix.counter_edits[0].removesuffix(".").rsplit(" ", 1)[1] in {"trumpet", "piano"}
    assert Counter(p.answer for p in pairs) == Counter({"No": 4})


def test_counterfact_ingest_reports_bad_files(tmp_path):
    bad = tmp_path / "cf.json"
    bad.write_text('[{"case_id": 0}]')
    with pytest.raises(SourceError, match="missing field"):
        build_from_counterfact(bad)
