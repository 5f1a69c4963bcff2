"""Object Counting: the answer follows from each edit set alone, the explanations name what counts under their own
edit set, the data is balanced and reproducible, and a bad curated row stops the build naming its line."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from recoe_causaldiag.api.records import validate_records
from recoe_causaldiag.artifact_probes import audit_records
from recoe_causaldiag.curated_sources import SourceError, source_path
from recoe_causaldiag.tasks.object_counting import build_object_counting

ENTITIES = source_path("object_counting_entities.csv")
FACT = re.compile(r"(?P<entity>.+?) is (?:located in )?(?P<type>.+)")
QUESTION = re.compile(
    r"(?P<opening>How many of them are|Are all of them|Is any of them) (?:located in )?(?P<target>.+?)"
    r"\? (?P<items>.+?)\.(?: \(A\) (?P<a>\d+) \(B\) (?P<b>\d+)\.)? Answer\?"
)
LISTING = re.compile(r"(?P<names>.+?) (?:is|are) (?:located in )?(?P<type>.+)")
KINDS = {"How many of them are": "number", "Are all of them": "all", "Is any of them": "any"}


@pytest.fixture(scope="module")
def records():
    return build_object_counting()


@pytest.fixture(scope="module")
def table() -> dict[str, dict[str, str]]:
    """The curated rows by entity, read with the csv module alone."""
    with ENTITIES.open(encoding="utf-8", newline="") as handle:
        return {row["entity"]: row for row in csv.DictReader(line for line in handle if not line.startswith("#"))}


def parse_question(question: str) -> tuple[str, str, list[str], tuple[int, int] | None]:
    match = QUESTION.fullmatch(question)
    assert match, question
    options = (int(match["a"]), int(match["b"])) if match["a"] else None
    return KINDS[match["opening"]], match["target"], match["items"].split(", "), options


def held_types(facts: tuple[str, ...]) -> dict[str, str]:
    """Entity → type as stated by the "X is T." / "X is located in T." facts."""
    parsed = [FACT.fullmatch(fact.removesuffix(".")) for fact in facts]
    assert all(parsed) and all(fact.endswith(".") for fact in facts), facts
    return {m["entity"]: m["type"] for m in parsed}


def recount(question: str, facts: tuple[str, ...]) -> str:
    """The answer label implied by the question and one edit set, and nothing else."""
    kind, target, items, options = parse_question(question)
    types = held_types(facts)
    assert sorted(types) == sorted(items) and len(facts) == len(items)
    hits = sum(types[item] == target for item in items)
    if kind == "number":
        assert options and options[0] != options[1] and hits in options
        return "A" if options[0] == hits else "B"
    if kind == "all":
        return "Yes" if hits == len(items) else "No"
    return "Yes" if hits else "No"


def check_explanation(question: str, facts: tuple[str, ...], explanation: str) -> None:
    """The explanation names exactly the items that count under `facts`, in question order."""
    kind, target, items, _ = parse_question(question)
    types = held_types(facts)
    hits = [item for item in items if types[item] == target]
    reasons, _, conclusion = explanation.removesuffix(".").partition(", so ")
    assert explanation.endswith(".")
    if kind == "number" or (kind == "any" and hits):
        listing = LISTING.fullmatch(reasons)
        assert listing and listing["type"] == target and listing["names"].split(", ") == hits, explanation
        if kind == "number":
            assert conclusion == "", explanation
            return
        opening = "at least one of them is "
    else:
        stated = [(m["entity"], m["type"]) for m in map(FACT.fullmatch, reasons.split(", "))]
        assert stated == [(item, types[item]) for item in items if types[item] != target], explanation
        opening = "not all of them are " if kind == "all" else "none of them is "
    assert conclusion.startswith(opening) and conclusion.endswith(f" {target}"), explanation


def test_builds_a_thousand_valid_pairs(records):
    assert len(records) == 1000 and validate_records(records) == records
    assert [r.id for r in records] == [f"object_counting-default-{i}" for i in range(1000)]
    assert {r.task for r in records} == {"object_counting"}
    assert len({r.question for r in records}) == 1000


def test_answer_follows_from_each_edit_set_alone(records):
    for record in records:
        assert recount(record.question, record.edits) == record.answer, record.id
        assert recount(record.question, record.counter_edits) == record.answer, record.id


def test_explanations_name_what_counts_under_their_own_edit_set(records):
    for record in records:
        check_explanation(record.question, record.edits, record.explanation_faithful)
        check_explanation(record.question, record.counter_edits, record.explanation_unfaithful)


def test_the_two_edit_sets_count_different_items_for_the_same_answer(records):
    for record in records:
        kind, target, items, _ = parse_question(record.question)
        types, counter = held_types(record.edits), held_types(record.counter_edits)
        hits = {i for i in items if types[i] == target}
        counter_hits = {i for i in items if counter[i] == target}
        if hits or counter_hits:
            assert hits != counter_hits and len(hits) == len(counter_hits), record.id
        else:
            assert kind == "any" and types != counter, record.id


def test_edits_follow_the_curated_table_and_one_consistent_reassignment(records, table):
    moved: dict[str, str] = {}
    for record in records:
        meta = record.meta
        worlds = {
            meta["evaluated_world"]: held_types(record.edits),
            {"original": "reassigned", "reassigned": "original"}[meta["evaluated_world"]]: held_types(
                record.counter_edits
            ),
        }
        assert all(table[e]["category"] == meta["category"] for e in meta["items"])
        assert worlds["original"] == {e: table[e]["type"] for e in meta["items"]}, record.id
        for entity, new_type in worlds["reassigned"].items():
            if new_type != table[entity]["type"]:
                assert table[entity]["reserved"] == "1", (record.id, entity)
                assert moved.setdefault(entity, new_type) == new_type, (record.id, entity)
        assert sorted(meta["reassigned"]) == sorted(e for e in meta["items"] if e in moved)
        assert [(w.subject, w.target_new) for w in record.rewrites] == list(held_types(record.edits).items())
        assert [(w.subject, w.target_new) for w in record.counter_rewrites] == list(
            held_types(record.counter_edits).items()
        )
    types_of = {row["type"]: row["category"] for row in table.values()}
    assert all(types_of[new] == table[e]["category"] for e, new in moved.items())


def test_pairs_record_the_real_world_types_and_cluster_by_target_type(records, table):
    for record in records:
        meta = record.meta
        original = record.edits if meta["evaluated_world"] == "original" else record.counter_edits
        assert held_types(tuple(meta["facts"])) == {e: table[e]["type"] for e in meta["items"]}, record.id
        assert tuple(meta["facts"]) == original, record.id
        assert meta["cluster"] == f"{meta['category']}/{meta['target_type']}"
    assert len({r.meta["cluster"] for r in records}) == len({row["type"] for row in table.values()})


def test_the_world_fact_probe_runs_and_passes(records):
    results = {r.probe: r for r in audit_records("object_counting", records)}
    assert results["world_fact_overlap"].n_valid == len(records)
    assert [r.describe() for r in results.values() if r.verdict == "FAIL"] == []


def test_questions_are_balanced(records):
    kinds = Counter((r.meta["question_type"], r.answer) for r in records)
    assert kinds == {
        ("number", "A"): 250,
        ("number", "B"): 250,
        ("any", "Yes"): 250,
        ("any", "No"): 125,
        ("all", "No"): 125,
    }
    assert Counter(r.answer for r in records if r.choices == ("Yes", "No")) == {"Yes": 250, "No": 250}
    assert Counter(r.meta["evaluated_world"] for r in records) == {"original": 500, "reassigned": 500}
    assert set(Counter(r.meta["category"] for r in records).values()) == {200}
    assert {len(r.meta["items"]) for r in records} == {3, 4, 5, 6}


def test_build_is_deterministic_and_seeded(records):
    assert build_object_counting() == records
    assert build_object_counting(seed=1) != records


def _corrupt(tmp_path: Path, change) -> tuple[Path, int]:
    lines = ENTITIES.read_text(encoding="utf-8").splitlines(keepends=True)
    line = change(lines)
    path = tmp_path / "entities.csv"
    path.write_text("".join(lines), encoding="utf-8")
    return path, line


def _line_of(lines: list[str], prefix: str) -> int:
    return next(n for n, text in enumerate(lines, start=1) if text.startswith(prefix))


def _entity_in_two_types(lines: list[str]) -> int:
    lines.append("dog,fruit,object,0,https://www.wikidata.org/wiki/Q144\n")
    return len(lines)


def _type_with_nine_entities(lines: list[str]) -> int:
    lines.pop(_line_of(lines, "contempt,emotion") - 1)
    return _line_of(lines, "anger,emotion")


def _missing_source(lines: list[str]) -> int:
    line = _line_of(lines, "horse,animal")
    lines[line - 1] = "horse,animal,object,0,\n"
    return line


def _wrong_reserved_share(lines: list[str]) -> int:
    line = _line_of(lines, "cello,")
    lines[line - 1] = lines[line - 1].replace(",0,", ",1,")
    return _line_of(lines, "saxophone,")


@pytest.mark.parametrize(
    "change, problem",
    [
        (_entity_in_two_types, "already listed"),
        (_type_with_nine_entities, "has 9 entities"),
        (_missing_source, "empty field 'source'"),
        (_wrong_reserved_share, "3 reserved"),
    ],
)
def test_a_bad_curated_row_stops_the_build_naming_its_line(tmp_path, change, problem):
    path, line = _corrupt(tmp_path, change)
    with pytest.raises(SourceError) as caught:
        build_object_counting(entities_path=path)
    assert caught.value.line == line and f"{path}:{line}:" in str(caught.value)
    assert problem in str(caught.value)
