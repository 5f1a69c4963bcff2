"""The `recoe` dataset: schema, answers recomputed symbolically from every fact set, consistency, bad sources,
deterministic builds."""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import datasets
import pytest

from recoe_causaldiag.api.records import PairRecord, validate_records
from recoe_causaldiag.curated_sources import SourceError, source_path
from recoe_causaldiag.dataset_building import build_dataset
from recoe_causaldiag.hub_layout import load_pairs, read_manifest
from recoe_causaldiag.tasks.recoe import ITEMS_PER_SCHEME, RECOE_SCHEMES, build_recoe
from recoe_causaldiag.tasks.recoe.consistency import resolve_conflicts
from recoe_causaldiag.tasks.recoe.datapoint import Datapoint
from recoe_causaldiag.tasks.recoe.domains import CURATED, load_curated
from recoe_causaldiag.tasks.recoe.facts import numeric_fact

NUMBER = re.compile(r"\d[\d,]*")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_dataset("recoe", tmp_path_factory.mktemp("recoe"))


@pytest.fixture(scope="module")
def configs(built: Path) -> dict[str, list[PairRecord]]:
    return {scheme: load_pairs(built, scheme) for scheme in RECOE_SCHEMES}


def value_of(fact: dict) -> int | tuple[str, ...]:
    """What a fact states, read from its atomic triplets: one number, or the listed members."""
    objects = [t[2] for t in fact["atomic_triplets"]]
    if len(objects) == 1 and NUMBER.match(objects[0]):
        return int(NUMBER.match(objects[0]).group().replace(",", ""))
    return tuple(objects)


def solve(meta: dict, facts: Sequence[dict]) -> str:
    """The answer that follows from a fact set, computed from the facts alone."""
    values = {f["atomic_triplets"][0][0]: value_of(f) for f in facts}
    scheme = meta["scheme"]
    if scheme in ("superlative", "comparative"):
        assert sorted(values) == sorted(meta["candidates"])
        ranked = sorted(values, key=values.get, reverse=meta["direction"] == "max")
        assert values[ranked[0]] != values[ranked[1]], "tie"
        return ranked[0]
    if scheme == "sorting":
        assert len(set(values.values())) == len(values), "tie"
        return ", ".join(sorted(values, key=values.get, reverse=meta["direction"] == "from largest to smallest"))
    if scheme == "counting":
        (members,) = values.values()
        assert len(set(members)) == len(members)
        return f"{len(members):,}"
    operands = [values[name] for name in meta["operands"]]
    if scheme == "aggregation":
        return f"{sum(operands):,}"
    assert scheme == "subtraction" and operands[0] > operands[1]
    return f"{operands[0] - operands[1]:,}"


def test_six_configs_with_spec_columns_and_enough_rows(built: Path, configs) -> None:
    assert read_manifest(built)["num_rows"] == {s: ITEMS_PER_SCHEME for s in RECOE_SCHEMES}
    assert ITEMS_PER_SCHEME >= 200
    for scheme in RECOE_SCHEMES:
        table = datasets.load_dataset(str(built), scheme, split="test")
        assert table.num_rows == ITEMS_PER_SCHEME
        records = validate_records(configs[scheme])
        assert [r.id for r in records] == [f"recoe-{scheme}-{i}" for i in range(ITEMS_PER_SCHEME)]
        assert {r.task for r in records} == {f"recoe/{scheme}"}
        assert len({r.question for r in records}) == len(records)
        assert abs(sum(r.answer == "A" for r in records) - len(records) / 2) <= 1


@pytest.mark.parametrize("scheme", RECOE_SCHEMES)
def test_every_answer_follows_from_its_fact_set(configs, scheme: str) -> None:
    for r in configs[scheme]:
        meta = r.meta
        assert solve(meta, meta["facts"]) == meta["answer"], r.id
        assert solve(meta, meta["counterfactual_facts"]) == meta["counterfactual_answer"], r.id
        assert solve(meta, meta["contrast_facts"]) == meta["counterfactual_answer"], r.id
        assert meta["answer"] != meta["counterfactual_answer"], r.id
        assert list(r.edits) == [f["sentence"] for f in meta["counterfactual_facts"]]
        assert list(r.counter_edits) == [f["sentence"] for f in meta["contrast_facts"]]
        options = re.fullmatch(r".+ \(A\) (.+) \(B\) (.+)\. Answer\?", r.question).groups()
        assert options[r.choices.index(r.answer)] == meta["counterfactual_answer"], r.id
        assert set(options) == {meta["answer"], meta["counterfactual_answer"]}


@pytest.mark.parametrize("scheme", RECOE_SCHEMES)
def test_recoe_fields_atoms_triplets_and_explanations(configs, scheme: str) -> None:
    for r in configs[scheme]:
        meta = r.meta
        assert {"recoe_question", "answer_aliases", "counterfactual_answer_aliases"} <= set(meta)
        assert r.question.startswith(meta["recoe_question"])
        for fact in meta["facts"] + meta["counterfactual_facts"] + meta["contrast_facts"]:
            assert fact["atomic_sentences"] and len(fact["atomic_sentences"]) == len(fact["atomic_triplets"])
            assert all(len(t) == 3 and all(t) for t in fact["atomic_triplets"])
        for facts, explanation in ((r.edits, r.explanation_faithful), (r.counter_edits, r.explanation_unfaithful)):
            assert all(f.removesuffix(".") in explanation for f in facts), r.id
        for facts, rewrites in ((r.edits, r.rewrites), (r.counter_edits, r.counter_rewrites)):
            assert tuple(f"{w.prompt.format(w.subject)} {w.target_new}." for w in rewrites) == facts


def test_counterfactual_facts_are_consistent_within_each_config(configs) -> None:
    for scheme, records in configs.items():
        assigned: dict[tuple[str, str], object] = {}
        for r in records:
            for fact in r.meta["counterfactual_facts"]:
                subject, relation, _ = fact["atomic_triplets"][0]
                key = (subject, fact["sentence"].split(subject)[0] + relation)
                assert assigned.setdefault(key, value_of(fact)) == value_of(fact), (scheme, r.id, key)


def _item(question: str, value: int) -> Datapoint:
    fact = numeric_fact("Nile River", "{} has a length of", value, " kilometres")
    return Datapoint(
        "comparative", "river_length", question, "a", (), "b", (), (fact,), (fact,), (fact,), "x.", "y.", ("test",)
    )


def test_conflicting_counterfactuals_are_resolved_in_candidate_order() -> None:
    first, clash, agree = _item("q1", 4132), _item("q2", 3395), _item("q3", 4132)
    kept, conflicts = resolve_conflicts([first, clash, agree, first], limit=5)
    assert kept == [first, agree]
    assert [(c.dropped, c.kept, c.dropped_value, c.kept_value) for c in conflicts] == [("q2", "q1", 3395, 4132)]
    assert resolve_conflicts([clash, first], limit=5)[0] == [clash]


@pytest.mark.parametrize(
    "row, problem",
    [
        ("Nile River,Africa,6000,,https://example.org", "'Nile River' contradicts line 7"),
        ("Nile River,Africa,6650,,https://example.org", "'Nile River' repeats line 7"),
        ("Test River,Africa,,,https://example.org", "empty field 'length_km'"),
        ("Test River,Africa,12.5,,https://example.org", "must be a non-negative whole number"),
        ("Tigris and Euphrates,Asia,100,,https://example.org", "must not contain"),
    ],
)
def test_bad_curated_rows_stop_the_build_with_their_line(tmp_path: Path, row: str, problem: str) -> None:
    for table in CURATED:
        shutil.copy(source_path(table.file), tmp_path / table.file)
    rivers = tmp_path / "recoe_rivers.csv"
    line = len(rivers.read_text(encoding="utf-8").splitlines()) + 1
    with rivers.open("a", encoding="utf-8") as handle:
        handle.write(row + "\n")
    with pytest.raises(SourceError, match=f"{re.escape(str(rivers))}:{line}: .*{problem}"):
        build_recoe(0, curated_dir=tmp_path)


def test_curated_tables_load() -> None:
    assert all(len(load_curated(table)) >= 13 for table in CURATED)


def test_two_builds_have_the_same_manifest(built: Path, tmp_path: Path) -> None:
    again = build_dataset("recoe", tmp_path)
    assert read_manifest(again) == read_manifest(built)
