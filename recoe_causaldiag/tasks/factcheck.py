"""FactCheck (paper 000 §4.1, App. C.3): yes/no questions about a true fact; both edited models answer "No",
because each was given a different counterfactual object of the same relation (as COUNTERFACT draws them)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..api.records import PairRecord, Rewrite, metadata_json, validate_records
from ..curated_sources import SourceError, SourceRow, read_curated_csv, source_path

CHOICES = ("Yes", "No")
RELATIONS_FILE = "factcheck_relations.csv"
FACTS_FILE = "factcheck_facts.csv"


@dataclass(frozen=True)
class Relation:
    """Templates of one relation: a statement ending in the object, a yes/no question, and other wordings of the
    statement (`paraphrases`, each ending in the object) on which a weight edit's generalisation is measured."""

    name: str
    statement: str
    question: str
    paraphrases: tuple[str, ...] = ()

    def state(self, subject: str, obj: str) -> str:
        return self.statement.format(subject=subject, object=obj)

    def ask(self, subject: str, obj: str) -> str:
        return self.question.format(subject=subject, object=obj)

    @property
    def rewrite_prompt(self) -> str:
        """The statement as a MEMIT/ROME prompt: subject as `{}`, object cut off."""
        return _as_prompt(self.statement)

    @property
    def paraphrase_prompts(self) -> tuple[str, ...]:
        """The paraphrases as prompts, in the rewrite prompt's form."""
        return tuple(_as_prompt(p) for p in self.paraphrases)


def _as_prompt(statement: str) -> str:
    return statement.split("{object}")[0].rstrip().replace("{subject}", "{}")


@dataclass(frozen=True)
class Fact:
    subject: str
    relation: str
    object: str
    source: str


PARAPHRASE_COLUMNS = ("paraphrase_1", "paraphrase_2")


def _parse_relation(row: SourceRow) -> Relation:
    statement, question = row.values["statement"], row.values["question"]
    paraphrases = tuple(row.values[column] for column in PARAPHRASE_COLUMNS)
    for name, template in (("statement", statement), *zip(PARAPHRASE_COLUMNS, paraphrases)):
        if not template.endswith("{object}") or template.count("{subject}") != 1:
            raise row.error(f"{name} must contain {{subject}} once and end with {{object}}")
    if "{subject}" not in question or "{object}" not in question or not question.endswith("?"):
        raise row.error("question must contain {subject} and {object} and end with '?'")
    if len({statement, *paraphrases}) != 1 + len(paraphrases):
        raise row.error("the paraphrases must differ from the statement and from each other")
    return Relation(row.values["relation"], statement, question, paraphrases)


def load_relations(path: Path | None = None) -> dict[str, Relation]:
    path = path or source_path(RELATIONS_FILE)
    relations: dict[str, Relation] = {}
    for row in read_curated_csv(path, ("relation", "statement", "question", *PARAPHRASE_COLUMNS)):
        relation = _parse_relation(row)
        if relation.name in relations:
            raise row.error(f"relation '{relation.name}' is defined twice")
        relations[relation.name] = relation
    return relations


def load_facts(relations: dict[str, Relation], path: Path | None = None) -> list[Fact]:
    """The curated true facts, validated: known relation, unique (subject, relation), enough objects to contrast."""
    path = path or source_path(FACTS_FILE)
    facts, seen = [], set()
    rows = read_curated_csv(path, ("subject", "relation", "object", "source"))
    for row in rows:
        fact = Fact(**{k: row.values[k] for k in ("subject", "relation", "object", "source")})
        if fact.relation not in relations:
            raise row.error(f"unknown relation '{fact.relation}' (known: {', '.join(relations)})")
        if (fact.subject, fact.relation) in seen:
            raise row.error(f"duplicate fact for ({fact.subject!r}, {fact.relation!r})")
        seen.add((fact.subject, fact.relation))
        facts.append(fact)
    for relation in relations:
        objects = {f.object for f in facts if f.relation == relation}
        if objects and len(objects) < 3:
            raise SourceError(path, None, f"relation '{relation}' has {len(objects)} distinct objects; needs >= 3")
    return facts


def draw_counterfactuals(
    subject: str, relation: str, true_object: str, pool: Sequence[str], seed: int
) -> tuple[str, str]:
    """Two distinct objects of the same relation other than the true one, drawn reproducibly per fact."""
    rng = random.Random(f"{seed}|{relation}|{subject}|{true_object}")
    candidates = sorted(o for o in set(pool) if o.casefold() != true_object.casefold())
    edit_object, counter_object = rng.sample(candidates, 2)
    return edit_object, counter_object


def make_pair(
    index: int,
    subject: str,
    relation: Relation,
    true_object: str,
    edit_object: str,
    counter_object: str,
    *,
    source: dict[str, object],
) -> PairRecord:
    """One FactCheck pair: M̄ is told `edit_object`, M̃ `counter_object`; both answer "No" to the true fact. Its
    metadata records the true fact (`facts`) and, as `cluster`, the subject: pairs about one subject (a footballer's
    sport and citizenship) share an entity."""

    def explanation(obj: str) -> str:
        return f"{relation.state(subject, obj)}, not {true_object}."

    def rewrite(obj: str) -> Rewrite:
        return Rewrite(relation.rewrite_prompt, subject, obj, true_object, relation.paraphrase_prompts)

    return PairRecord(
        id=f"factcheck-default-{index}",
        task="factcheck",
        question=relation.ask(subject, true_object),
        choices=CHOICES,
        answer="No",
        edits=(relation.state(subject, edit_object) + ".",),
        counter_edits=(relation.state(subject, counter_object) + ".",),
        explanation_faithful=explanation(edit_object),
        explanation_unfaithful=explanation(counter_object),
        rewrites=(rewrite(edit_object),),
        counter_rewrites=(rewrite(counter_object),),
        metadata=metadata_json(
            relation=relation.name,
            subject=subject,
            object_true=true_object,
            object_edit=edit_object,
            object_counter=counter_object,
            facts=[relation.state(subject, true_object) + "."],
            cluster=subject,
            **source,
        ),
    )


def build_factcheck(
    seed: int = 0, *, relations_path: Path | None = None, facts_path: Path | None = None
) -> list[PairRecord]:
    """FactCheck pairs from the curated facts, in file order."""
    relations = load_relations(relations_path)
    facts = load_facts(relations, facts_path)
    pools: dict[str, list[str]] = {}
    for fact in facts:
        pools.setdefault(fact.relation, []).append(fact.object)
    return validate_records(
        make_pair(
            i,
            f.subject,
            relations[f.relation],
            f.object,
            *draw_counterfactuals(f.subject, f.relation, f.object, pools[f.relation], seed),
            source={"origin": "curated", "source": f.source},
        )
        for i, f in enumerate(facts)
    )


def _counterfact_relation(relation_id: str, prompt: str, subject: str, paraphrases: Sequence[str]) -> Relation:
    """A COUNTERFACT case's relation; its paraphrase prompts are kept where they name the subject once."""
    statement = prompt.replace("{}", "{subject}") + " {object}"
    lead = statement[0].lower() + statement[1:] if statement.startswith("The ") else statement
    worded = dict.fromkeys(
        p.replace(subject, "{subject}") + " {object}"
        for p in paraphrases
        if isinstance(p, str) and p.count(subject) == 1
    )
    worded.pop(statement, None)
    return Relation(relation_id, statement, f"Is it true that {lead}?", tuple(worded))


def build_from_counterfact(path: Path, seed: int = 0) -> list[PairRecord]:
    """FactCheck pairs from a file in the original COUNTERFACT JSON format (Meng et al., 2022).

    The first counterfactual is the case's own `target_new`; the second is drawn from the other
    objects (true and new) of the same relation id in the file."""
    try:
        cases = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise SourceError(path, None, f"cannot read COUNTERFACT JSON ({err})") from None
    if not isinstance(cases, list):
        raise SourceError(path, None, "expected a JSON list of COUNTERFACT cases")
    parsed = []
    for n, case in enumerate(cases):
        try:
            rewrite = case["requested_rewrite"]
            parsed.append(
                (
                    case["case_id"],
                    rewrite["relation_id"],
                    rewrite["prompt"],
                    rewrite["subject"],
                    rewrite["target_true"]["str"],
                    rewrite["target_new"]["str"],
                    case.get("paraphrase_prompts") or [],
                )
            )
        except (KeyError, TypeError) as err:
            raise SourceError(path, None, f"case #{n}: missing field {err}") from None
    pools: dict[str, list[str]] = {}
    for _, rel, _, _, true_obj, new_obj, _ in parsed:
        pools.setdefault(rel, []).extend([true_obj, new_obj])
    records = []
    for index, (case_id, rel, prompt, subject, true_obj, new_obj, paraphrases) in enumerate(parsed):
        if "{}" not in prompt:
            raise SourceError(path, None, f"case {case_id}: prompt {prompt!r} has no '{{}}' for the subject")
        relation = _counterfact_relation(rel, prompt, subject, paraphrases)
        others = [o for o in pools[rel] if o.casefold() not in {true_obj.casefold(), new_obj.casefold()}]
        if not others:
            raise SourceError(path, None, f"case {case_id}: relation {rel} has no second counterfactual object")
        counter = random.Random(f"{seed}|{case_id}").choice(sorted(set(others)))
        records.append(
            make_pair(
                index,
                subject,
                relation,
                true_obj,
                new_obj,
                counter,
                source={"origin": "counterfact", "case_id": case_id},
            )
        )
    return validate_records(records)
