"""The `recoe` dataset: schema, answers recomputed symbolically from every fact set, both fact sets derived
symmetrically from the truth, consistency, bad sources, deterministic builds."""

from __future__ import annotations

import math
import re
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import datasets
import pytest

from recoe_causaldiag.api.records import PairRecord, validate_records
from recoe_causaldiag.artifact_probes import PASS, TOO_FEW, audit_records, round_numbers
from recoe_causaldiag.curated_sources import SourceError, source_path
from recoe_causaldiag.dataset_building import build_dataset
from recoe_causaldiag.hub_layout import load_pairs, read_manifest
from recoe_causaldiag.tasks.recoe import ITEMS_PER_SCHEME, RECOE_SCHEMES, build_recoe
from recoe_causaldiag.tasks.recoe.consistency import CONTRAST, resolve_conflicts
from recoe_causaldiag.tasks.recoe.datapoint import Datapoint, FactSet, precision, rescaled, stated_like
from recoe_causaldiag.tasks.recoe.domains import CURATED, load_curated
from recoe_causaldiag.tasks.recoe.facts import number, numeric_fact

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


@pytest.mark.parametrize("side", ["counterfactual_facts", "contrast_facts"])
def test_each_models_facts_are_consistent_within_each_config(configs, side: str) -> None:
    for scheme, records in configs.items():
        assigned: dict[tuple[str, str], object] = {}
        for r in records:
            for fact in r.meta[side]:
                subject, relation, _ = fact["atomic_triplets"][0]
                key = (subject, fact["sentence"].split(subject)[0] + relation)
                assert assigned.setdefault(key, value_of(fact)) == value_of(fact), (scheme, r.id, key)


def changes_from_truth(meta: dict, side: str) -> list[tuple[object, object]]:
    """The (true, edited) values of the facts where one edited model's facts differ from the true facts; for a
    counted set, the members left out and added."""
    if meta["scheme"] == "counting":
        (true,), (edited,) = (set(value_of(f)) for f in meta["facts"]), (set(value_of(f)) for f in meta[side])
        return [(m, None) for m in sorted(true - edited)] + [(None, m) for m in sorted(edited - true)]
    truth = {f["atomic_triplets"][0][0]: value_of(f) for f in meta["facts"]}
    edited = {f["atomic_triplets"][0][0]: value_of(f) for f in meta[side]}
    return [(truth[s], edited[s]) for s in truth if edited[s] != truth[s]]


def nearness(meta: dict, side: str) -> float:
    """How far an edited fact set's values lie from the real-world values (largest log ratio to the nearest)."""
    truth = [value_of(f) for f in meta["facts"]]
    moved = [new for _, new in changes_from_truth(meta, side) if new not in truth]
    return max((min(abs(math.log((v + 1e-9) / (t + 1e-9))) for t in truth) for v in moved), default=0.0)


@pytest.mark.parametrize("scheme", RECOE_SCHEMES)
def test_both_fact_sets_change_the_truth_the_same_way(configs, scheme: str) -> None:
    """Same kind and size of change on both sides: as many facts (or members) changed; the same set of true
    values and the same lengths and roundness of numbers stated; Group 2 moves a value by the same amount."""
    for r in configs[scheme]:
        meta = r.meta
        ours, theirs = changes_from_truth(meta, "counterfactual_facts"), changes_from_truth(meta, "contrast_facts")
        assert len(ours) == len(theirs) and ours != theirs, r.id
        if scheme == "counting":
            assert [new is None for _, new in ours] == [new is None for _, new in theirs] and len(ours) == 1, r.id
            continue
        stated = [[value_of(f) for f in meta[side]] for side in ("counterfactual_facts", "contrast_facts")]
        assert sorted(len(number(v)) for v in stated[0]) == sorted(len(number(v)) for v in stated[1]), r.id
        assert sorted(map(precision, stated[0])) == sorted(map(precision, stated[1])), r.id
        truth = {value_of(f) for f in meta["facts"]}
        assert len(truth & set(stated[0])) == len(truth & set(stated[1])) == len(stated[0]) - 1, r.id
        if scheme in ("aggregation", "subtraction"):
            (old, new), (old2, new2) = ours[0], theirs[0]
            assert abs(new - old) == abs(new2 - old2) and len(ours) == 1, r.id


@pytest.mark.parametrize("scheme", RECOE_SCHEMES)
def test_which_set_the_evaluated_model_gets_is_balanced(configs, scheme: str) -> None:
    """The nearer set to the real world (for counting: the longer explanation) is the evaluated model's in about
    half of the rows, so neither closeness to the world nor length tells the faithful explanation."""
    records = configs[scheme]
    if scheme == "counting":
        faithful_first = [len(r.explanation_faithful) - len(r.explanation_unfaithful) for r in records]
    else:
        faithful_first = [
            nearness(r.meta, "contrast_facts") - nearness(r.meta, "counterfactual_facts") for r in records
        ]
    signs = Counter((d > 0) - (d < 0) for d in faithful_first)
    share = (signs[1] + signs[0] / 2) / len(records)
    assert 0.45 <= share <= 0.55 and signs[1] and signs[-1], signs


def test_text_only_probes_pass_on_every_config(configs) -> None:
    """No text-only scorer that never sees the edits (world-fact overlap and numbers, round numbers, lengths,
    template) separates the two explanations; the real-world-number probe on counting scores too few pairs."""
    for scheme, records in configs.items():
        results = {r.probe: r for r in audit_records(f"recoe/{scheme}", records)}
        assert len(records) >= 100
        for name in ("world_fact_overlap", "round_numbers", "chars", "words", "template"):
            assert results[name].verdict == PASS, results[name].describe()
        assert results["world_fact_numbers"].verdict == (TOO_FEW if scheme == "counting" else PASS), scheme


def test_every_row_names_its_cluster(configs) -> None:
    for scheme, records in configs.items():
        for r in records:
            expected = r.meta["subject"] if scheme == "counting" else r.meta["group"]
            assert r.meta["cluster"] == expected, r.id


def test_a_changed_value_keeps_the_length_and_precision_of_the_value_it_replaces() -> None:
    assert [precision(v) for v in (0, 7, 8849, 4130, 6300, 4_000_000)] == [1, 1, 1, 10, 100, 1000]
    assert rescaled(8849, 1.1) == 9734 and rescaled(4_000_000, 1.15) == 4_600_000
    assert stated_like(9734, 8849) and not stated_like(4200, 4130) and not stated_like(10_120, 8849)
    assert round_numbers(number(rescaled(6300, 1.2))) == round_numbers(number(6300))


def _fact_set(value: int) -> FactSet:
    fact = numeric_fact("Nile River", "{} has a length of", value, " kilometres")
    return FactSet((fact,), f"{fact.clause}, so it is long.", ("Nile River",))


def _item(question: str, value: int, contrast: int | None = None) -> Datapoint:
    ours, theirs = _fact_set(value), _fact_set(value if contrast is None else contrast)
    return Datapoint(
        "comparative", "river_length", question, "a", (), "b", (), ours.facts, ours, theirs, ("test",), "Africa"
    )


def test_conflicting_counterfactuals_are_resolved_in_candidate_order() -> None:
    first, clash, agree = _item("q1", 4132), _item("q2", 3395), _item("q3", 4132)
    kept, conflicts = resolve_conflicts([first, clash, agree, first], limit=5)
    assert kept == [first, agree]
    assert [(c.dropped, c.kept, c.dropped_value, c.kept_value) for c in conflicts] == [("q2", "q1", 3395, 4132)]
    assert resolve_conflicts([clash, first], limit=5)[0] == [clash]


def test_contrast_facts_are_kept_consistent_and_roles_follow_the_swaps() -> None:
    first, clash = _item("q1", 4132, 4500), _item("q2", 4132, 3900)
    kept, conflicts = resolve_conflicts([first, clash], limit=5)
    assert kept == [first] and [(c.model, c.dropped_value, c.kept_value) for c in conflicts] == [(CONTRAST, 3900, 4500)]
    kept, _ = resolve_conflicts([first, _item("q3", 4500, 4132)], limit=5, swaps=[False, True])
    assert [k.counterfactual_facts[0].value for k in kept] == [4132, 4132]
    assert kept[1] == _item("q3", 4500, 4132).swapped()


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
