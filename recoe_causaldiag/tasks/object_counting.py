"""Object Counting (paper 000 §4.3, App. C.3 Table 6, App. E Table 9): questions about a list of entities of one
category ("How many of them are animal? dog, saxophone, horse. (A) 2 (B) 5. Answer?") with the same answer in two
worlds: the original one, and one where the reserved entities of every type are reassigned to another type of
their category. Each edited model is told the type of every listed entity in its world, so the counted items differ."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..api.records import PairRecord, Rewrite, metadata_json, validate_records
from ..curated_sources import SourceError, SourceRow, read_curated_csv, source_path
from .answer_letters import options_in_order

ENTITIES_FILE = "object_counting_entities.csv"
COLUMNS = ("entity", "type", "category", "reserved", "source")
LOCATED_CATEGORY = "touristic attraction"
TYPE_PROMPT, LOCATED_PROMPT = "{} is", "{} is located in"
PARAPHRASES = {
    TYPE_PROMPT: ("{} is a kind of", "{} belongs to the category of"),
    LOCATED_PROMPT: ("{} can be found in", "{} is situated in"),
}
"""Other wordings of the rewrite prompts, on which a weight edit's generalisation is measured."""
MIN_ENTITIES_PER_TYPE = 10
MIN_TYPES_PER_CATEGORY = 3
RESERVED_SHARE = 5  # one entity in five is reserved for reassignment (paper: 20%)
MIN_ITEMS, MAX_ITEMS = 3, 6
QUESTIONS = 1000
YES_NO = ("Yes", "No")
LETTERS = ("A", "B")
WORLDS = ("original", "reassigned")
OPENINGS = {"number": "How many of them are {p}?", "all": "Are all of them {p}?", "any": "Is any of them {p}?"}
UNSAFE_IN_NAMES = (", ", " is ", " are ")  # would make the item list or the facts ambiguous


@dataclass(frozen=True)
class Entity:
    """A curated entity with its type in the original world; `reserved` ones change type in the reassigned world."""

    name: str
    type: str
    category: str
    reserved: bool
    source: str


@dataclass(frozen=True)
class Catalogue:
    """The curated entities and the type each reserved entity has in the reassigned world."""

    entities: tuple[Entity, ...]
    new_types: Mapping[str, str]

    def type_in(self, world: str, entity: Entity) -> str:
        return self.new_types.get(entity.name, entity.type) if world == "reassigned" else entity.type

    def types(self, category: str) -> list[str]:
        return sorted({e.type for e in self.entities if e.category == category})

    def members(self, category: str) -> list[Entity]:
        return [e for e in self.entities if e.category == category]

    def never(self, entity: Entity, target: str) -> bool:
        """Whether the entity is of another type than `target` in both worlds."""
        return all(self.type_in(world, entity) != target for world in WORLDS)


@dataclass(frozen=True)
class Plan:
    """What one question must be: its type ("number", "any" or "all"), its answer label, the world of the evaluated
    model, its category."""

    question_type: str
    label: str
    world: str
    category: str


def _parse_entity(row: SourceRow) -> Entity:
    values = row.values
    name = values["entity"]
    if values["reserved"] not in ("0", "1"):
        raise row.error(f"reserved must be 0 or 1, got '{values['reserved']}'")
    for field in ("entity", "type"):
        if any(part in values[field] for part in UNSAFE_IN_NAMES) or values[field].endswith("."):
            raise row.error(f"{field} '{values[field]}' must not contain {list(UNSAFE_IN_NAMES)} or end with '.'")
    if not values["source"].startswith("https://"):
        raise row.error(f"source must be an https URL, got '{values['source']}'")
    return Entity(name, values["type"], values["category"], values["reserved"] == "1", values["source"])


def _check_group_sizes(path: Path, rows: Sequence[SourceRow], entities: Sequence[Entity]) -> None:
    """Every type has enough entities, 20% of them reserved, and every category enough types; errors name the
    group's first line."""
    lines: dict[tuple[str, str], int] = {}
    for row, entity in zip(rows, entities):
        lines.setdefault(("type", entity.type), row.line)
        lines.setdefault(("category", entity.category), row.line)
    for type_ in dict.fromkeys(e.type for e in entities):
        size = sum(e.type == type_ for e in entities)
        reserved = sum(e.type == type_ and e.reserved for e in entities)
        if size < MIN_ENTITIES_PER_TYPE or reserved != size // RESERVED_SHARE:
            raise SourceError(
                path,
                lines["type", type_],
                f"type '{type_}' has {size} entities, {reserved} "
                f"reserved; needs >= {MIN_ENTITIES_PER_TYPE}, of which 20% (rounded down) reserved",
            )
    for category in dict.fromkeys(e.category for e in entities):
        types = {e.type for e in entities if e.category == category}
        if len(types) < MIN_TYPES_PER_CATEGORY:
            raise SourceError(
                path,
                lines["category", category],
                f"category '{category}' has {len(types)} types; needs >= {MIN_TYPES_PER_CATEGORY}",
            )


def load_entities(path: Path | None = None) -> tuple[Entity, ...]:
    """The curated entities, validated: one type per entity, one category per type, enough (reserved) entities."""
    path = path or source_path(ENTITIES_FILE)
    rows = read_curated_csv(path, COLUMNS)
    entities: list[Entity] = []
    entity_line: dict[str, int] = {}
    type_home: dict[str, tuple[str, int]] = {}
    for row in rows:
        entity = _parse_entity(row)
        if entity.name.casefold() in entity_line:
            raise row.error(
                f"entity '{entity.name}' is already listed on line {entity_line[entity.name.casefold()]}"
                "; an entity belongs to exactly one type"
            )
        category, line = type_home.setdefault(entity.type, (entity.category, row.line))
        if category != entity.category:
            raise row.error(f"type '{entity.type}' is in category '{category}' on line {line}, not '{entity.category}'")
        entity_line[entity.name.casefold()] = row.line
        entities.append(entity)
    _check_group_sizes(path, rows, entities)
    return tuple(entities)


def reassign(entities: Sequence[Entity], seed: int) -> dict[str, str]:
    """The reassigned world: the types of a category form a seeded cycle and the r-th reserved entity of a type
    moves r+1 steps along it (never onto its own type), so every type loses and gains reserved entities."""
    new_types: dict[str, str] = {}
    for category in sorted({e.category for e in entities}):
        rng = random.Random(f"{seed}|object_counting|reassign|{category}")
        cycle = sorted({e.type for e in entities if e.category == category})
        rng.shuffle(cycle)
        for position, type_ in enumerate(cycle):
            reserved = sorted(e.name for e in entities if e.type == type_ and e.reserved)
            rng.shuffle(reserved)
            for rank, name in enumerate(reserved):
                new_types[name] = cycle[(position + 1 + rank % (len(cycle) - 1)) % len(cycle)]
    return new_types


def draw_swapped(
    rng: random.Random, catalogue: Catalogue, category: str, target: str, size: int, count: int
) -> list[Entity]:
    """`size` items, `count` of them `target` in both worlds: a reserved `target` entity leaves the type and a
    reserved entity of another type joins it in the reassigned world (paper: "one from the target type and one
    from other types")."""
    members = catalogue.members(category)
    leaving = rng.choice([e for e in members if e.type == target and e.reserved])
    joining = rng.choice([e for e in members if catalogue.new_types.get(e.name) == target])
    staying = [e for e in members if e.type == target and not e.reserved]
    outside = [e for e in members if catalogue.never(e, target)]
    items = [leaving, joining, *rng.sample(staying, count - 1), *rng.sample(outside, size - count - 1)]
    rng.shuffle(items)
    return items


def draw_absent(rng: random.Random, catalogue: Catalogue, category: str, target: str, size: int) -> list[Entity]:
    """`size` items none of which is `target` in either world; at least one changes type between the worlds."""
    outside = [e for e in catalogue.members(category) if catalogue.never(e, target)]
    changing = rng.choice([e for e in outside if e.reserved])
    items = [changing, *rng.sample([e for e in outside if e != changing], size - 1)]
    rng.shuffle(items)
    return items


def predicate(category: str, type_: str) -> str:
    """What an entity "is" (Table 6: "is located in" for touristic attractions)."""
    return f"located in {type_}" if category == LOCATED_CATEGORY else type_


def _listing(names: Sequence[str], said: str) -> str:
    return f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {said}"


def explain(question_type: str, category: str, target: str, items: Sequence[Entity], types: Sequence[str]) -> str:
    """The synthetic explanation of a model that holds `types`: the target items, or the others with their types."""
    said = predicate(category, target)
    hits = [e.name for e, t in zip(items, types) if t == target]
    if question_type == "number":
        return f"{_listing(hits, said)}."
    if question_type == "any" and hits:
        return f"{_listing(hits, said)}, so at least one of them is {said}."
    misses = ", ".join(f"{e.name} is {predicate(category, t)}" for e, t in zip(items, types) if t != target)
    if question_type == "all":
        return f"{misses}, so not all of them are {said}."
    return f"{misses}, so none of them is {said}."


def answer_of(question_type: str, target: str, types: Sequence[str]) -> int | str:
    """The answer of a model that holds `types`: a count, or Yes/No."""
    hits = sum(t == target for t in types)
    if question_type == "number":
        return hits
    return YES_NO[0] if (hits == len(types) if question_type == "all" else hits > 0) else YES_NO[1]


def make_plan(seed: int, categories: Sequence[str], size: int) -> list[Plan]:
    """Half number questions (A/B balanced), half yes/no: "any" with Yes, "any" and "all" with No (Yes/No balanced).
    An "all" question cannot answer Yes for two different reasons, so it always answers No."""
    if size % 4:
        raise ValueError(f"the number of questions must be a multiple of 4, got {size}")
    quarter = size // 4
    shapes = (
        [("number", "A")] * quarter
        + [("number", "B")] * quarter
        + [("any", "Yes")] * quarter
        + [("any", "No")] * (quarter // 2)
        + [("all", "No")] * (quarter - quarter // 2)
    )
    random.Random(f"{seed}|object_counting|plan").shuffle(shapes)
    return [
        Plan(question_type, label, WORLDS[i % 2], categories[i % len(categories)])
        for i, (question_type, label) in enumerate(shapes)
    ]


def cluster_of(category: str, target: str) -> str:
    """The cluster of a pair, for the cluster bootstrap: its category and target type. Pairs that ask about one type
    draw the items on which their two explanations differ from the same few entities (the type's reserved ones and
    those the reassigned world moves into it), so they are not independent."""
    return f"{category}/{target}"


def make_pair(index: int, plan: Plan, catalogue: Catalogue, rng: random.Random) -> PairRecord:
    """One Object Counting pair; M̄ holds the types of `plan.world`, M̃ those of the other world. Its metadata
    records the items' types in the original world, which are their real-world types, as `facts`, and the target
    type as `cluster` (see `cluster_of`)."""
    target = rng.choice(catalogue.types(plan.category))
    size = rng.randint(MIN_ITEMS, MAX_ITEMS)
    if (plan.question_type, plan.label) == ("any", "No"):
        items = draw_absent(rng, catalogue, plan.category, target, size)
    else:
        items = draw_swapped(rng, catalogue, plan.category, target, size, rng.randint(1, size - 1))
    other = WORLDS[1 - WORLDS.index(plan.world)]
    types = [catalogue.type_in(plan.world, e) for e in items]
    counter_types = [catalogue.type_in(other, e) for e in items]
    answer = answer_of(plan.question_type, target, types)
    counter_answer = answer_of(plan.question_type, target, counter_types)
    if answer != counter_answer:
        raise ValueError(f"object_counting-default-{index}: the worlds disagree ({answer} vs {counter_answer})")
    listed, said = ", ".join(e.name for e in items), predicate(plan.category, target)
    options = ""
    if plan.question_type == "number":
        decoy = rng.choice([n for n in range(size + 1) if n != answer])
        options = " (A) {} (B) {}.".format(*options_in_order(answer, decoy, plan.label))

    def facts(held: Sequence[str]) -> tuple[str, ...]:
        return tuple(f"{e.name} is {predicate(plan.category, t)}." for e, t in zip(items, held))

    def rewrites(held: Sequence[str]) -> tuple[Rewrite, ...]:
        prompt = LOCATED_PROMPT if plan.category == LOCATED_CATEGORY else TYPE_PROMPT
        return tuple(Rewrite(prompt, e.name, t, e.type, PARAPHRASES[prompt]) for e, t in zip(items, held))

    return PairRecord(
        id=f"object_counting-default-{index}",
        task="object_counting",
        question=f"{OPENINGS[plan.question_type].format(p=said)} {listed}.{options} Answer?",
        choices=LETTERS if plan.question_type == "number" else YES_NO,
        answer=plan.label if plan.question_type == "number" else str(answer),
        edits=facts(types),
        counter_edits=facts(counter_types),
        explanation_faithful=explain(plan.question_type, plan.category, target, items, types),
        explanation_unfaithful=explain(plan.question_type, plan.category, target, items, counter_types),
        rewrites=rewrites(types),
        counter_rewrites=rewrites(counter_types),
        metadata=metadata_json(
            question_type=plan.question_type,
            target_type=target,
            category=plan.category,
            items=[e.name for e in items],
            types_edits=types,
            types_counter_edits=counter_types,
            evaluated_world=plan.world,
            reassigned=[e.name for e, t, c in zip(items, types, counter_types) if t != c],
            count=sum(t == target for t in types),
            facts=list(facts([e.type for e in items])),
            cluster=cluster_of(plan.category, target),
            sources=[e.source for e in items],
        ),
    )


def build_object_counting(
    seed: int = 0, *, entities_path: Path | None = None, size: int = QUESTIONS
) -> list[PairRecord]:
    """`size` Object Counting pairs from the curated entities; no question text repeats."""
    entities = load_entities(entities_path)
    catalogue = Catalogue(entities, reassign(entities, seed))
    records: list[PairRecord] = []
    asked: set[str] = set()
    for index, plan in enumerate(make_plan(seed, sorted({e.category for e in entities}), size)):
        drafts = (
            make_pair(index, plan, catalogue, random.Random(f"{seed}|object_counting|{index}|{n}"))
            for n in itertools.count()
        )
        record = next(r for r in drafts if r.question not in asked)
        asked.add(record.question)
        records.append(record)
    return validate_records(records)
