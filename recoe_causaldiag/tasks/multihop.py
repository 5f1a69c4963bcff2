"""Multi-hop reasoning (paper 000 §4.4, App. E Figs. 19–20): StrategyQA yes/no questions in which one supporting
fact is changed in two different ways that both keep the answer, so each explanation follows one edited fact set.

Every curated item carries a `check`, a small expression over the changed quantities whose truth value is the
answer ("Yes" when true), and the values each fact set assigns to them; the build verifies that those values are
stated in the facts and that the check yields the answer under both sets.

Either edited model may be the evaluated one (paper 000 §3.2), so which curated fact set the evaluated model holds
is drawn per item with the seed, balanced over the dataset: it holds the set whose explanation states numbers nearer
the real-world facts in half of the items (see `nearer_is_curated_edits` and `draw_roles`).

Check language (JSON): a node is one of
  {"type": "compare", "op": "<"|"<="|">"|">="|"=="|"!=", "left": X, "right": Y}
  {"type": "equal", "left": X, "right": Y}              (strings, case-insensitive)
  {"type": "member", "item": X, "set": [...]}           (case-insensitive for strings)
  {"type": "all"|"any", "args": [node, ...]}, {"type": "not", "arg": node}
and an operand X is a number, a string, "$name" (a value of the fact set), or
  {"add": [X, ...]}, {"sub": [X, Y]}, {"mul": [X, ...]}, {"div": [X, Y]}."""

from __future__ import annotations

import json
import math
import operator
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..api.records import PairRecord, metadata_json, validate_records
from ..curated_sources import SourceError, source_path
from .answer_letters import balanced_letters, options_in_order

CHOICES = ("A", "B")
ITEMS_FILE = "multihop_items.jsonl"
_LIST_FIELDS = ("facts", "decomposition", "edits", "counter_edits")
_TEXT_FIELDS = ("id", "question", "answer", "explanation_faithful", "explanation_unfaithful")
_FIELDS = (
    *_TEXT_FIELDS,
    *_LIST_FIELDS,
    "strategyqa_index",
    "hops",
    "changed_fact_index",
    "check",
    "values_edits",
    "values_counter",
)
_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": math.isclose,
    "!=": lambda a, b: not math.isclose(a, b),
}
_ARITHMETIC = {"add": sum, "mul": math.prod, "sub": lambda a: a[0] - a[1], "div": lambda a: a[0] / a[1]}
_NUMBER = re.compile(r"(?<![\d.,])(?:(?<![\w])[-−])?\d[\d,]*(?:\.\d+)?")
_WORDS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_WORDS |= {"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_NUMERAL = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")  # numerals in digits, as the audit's probes read them
_TINY = 1e-9  # keeps a log ratio finite when a number is 0, as in the audit's probe
_ABBREVIATIONS = {"dr.", "mr.", "mrs.", "ms.", "st.", "jr.", "sr.", "vs.", "c.", "e.g.", "i.e.", "mt.", "no."}


class CheckError(ValueError):
    """A check cannot be evaluated (unknown node, operator or value name)."""


def _operand(term: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(term, str) and term.startswith("$"):
        if term[1:] not in values:
            raise CheckError(f"no value named '{term[1:]}'")
        return values[term[1:]]
    if isinstance(term, Mapping):
        if len(term) != 1 or next(iter(term)) not in _ARITHMETIC:
            raise CheckError(f"unknown operand {term}")
        name, args = next(iter(term.items()))
        return _ARITHMETIC[name]([_operand(a, values) for a in args])
    return term


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def evaluate_check(check: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    """The truth value of a check under one fact set's values (true means the answer is "Yes")."""
    check_type = check.get("type")
    if check_type == "compare":
        if check.get("op") not in _COMPARE:
            raise CheckError(f"unknown comparison '{check.get('op')}'")
        left, right = _operand(check["left"], values), _operand(check["right"], values)
        if not all(isinstance(x, (int, float)) for x in (left, right)):
            raise CheckError(f"compare needs numbers, got {left!r} and {right!r}")
        return bool(_COMPARE[check["op"]](left, right))
    if check_type == "equal":
        return _fold(_operand(check["left"], values)) == _fold(_operand(check["right"], values))
    if check_type == "member":
        return _fold(_operand(check["item"], values)) in {_fold(_operand(x, values)) for x in check["set"]}
    if check_type in ("all", "any"):
        results = [evaluate_check(c, values) for c in check["args"]]
        return all(results) if check_type == "all" else any(results)
    if check_type == "not":
        return not evaluate_check(check["arg"], values)
    raise CheckError(f"unknown check type '{check_type}'")


def numbers_in(text: str) -> list[float]:
    """Every number a text states, in digits (1,454 / −0.4 / 17th) or as a word up to ninety."""
    found = [float(m.group().replace(",", "").replace("−", "-")) for m in _NUMBER.finditer(text)]
    return found + [float(_WORDS[w]) for w in re.findall(r"[a-z]+", text.casefold()) if w in _WORDS]


def states_value(value: Any, text: str) -> bool:
    """Whether a text states a value: the number (see `numbers_in`) or the string, case-insensitively."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return any(math.isclose(value, n) for n in numbers_in(text))
    return isinstance(value, str) and value.casefold() in text.casefold()


def _differing(own: Mapping[str, Any], other: Mapping[str, Any]) -> list[Any]:
    return [own[k] for k in sorted(own) if own[k] != other.get(k)]


def _problem(item: dict[str, Any]) -> str | None:
    """What is wrong with one curated item, or None."""
    missing = [f for f in _FIELDS if f not in item]
    if missing:
        return f"missing field '{missing[0]}'"
    if any(not isinstance(item[f], str) or not item[f].strip() for f in _TEXT_FIELDS):
        return "id, question, answer and explanations must be non-empty strings"
    if any(
        not isinstance(item[f], list) or not item[f] or not all(isinstance(s, str) and s.strip() for s in item[f])
        for f in _LIST_FIELDS
    ):
        return "facts, decomposition, edits and counter_edits must be non-empty lists of strings"
    if item["answer"] not in ("Yes", "No"):
        return f"answer must be Yes or No, got {item['answer']!r}"
    if item["hops"] != len(item["decomposition"]):
        return f"hops is {item['hops']} but the decomposition has {len(item['decomposition'])} steps"
    facts, edits, counter, index = item["facts"], item["edits"], item["counter_edits"], item["changed_fact_index"]
    if edits == counter:
        return "edits and counter_edits are identical"
    if not len(facts) == len(edits) == len(counter):
        return "facts, edits and counter_edits must have the same length"
    if not isinstance(index, int) or not 0 <= index < len(facts):
        return f"changed_fact_index {index!r} is out of range"
    if edits[index] == facts[index] or counter[index] == facts[index] or edits[index] == counter[index]:
        return f"fact {index} must differ between facts, edits and counter_edits"
    if any(
        not s.rstrip().endswith(".")
        for s in (*edits, *counter, item["explanation_faithful"], item["explanation_unfaithful"])
    ):
        return "edits and explanations must be sentences ending with '.'"
    if item["explanation_faithful"].strip() == item["explanation_unfaithful"].strip():
        return "the two explanations are identical"
    return _values_problem(item)


def _values_problem(item: dict[str, Any]) -> str | None:
    sets = {"edits": item["values_edits"], "counter_edits": item["values_counter"]}
    if (
        any(not isinstance(v, dict) or not v for v in sets.values())
        or sets["edits"].keys() != sets["counter_edits"].keys()
    ):
        return "values_edits and values_counter must be non-empty objects with the same names"
    if sets["edits"] == sets["counter_edits"]:
        return "values_edits and values_counter are identical"
    for name, values in sets.items():
        text = " ".join(item[name])
        unstated = [k for k, v in sorted(values.items()) if not states_value(v, text)]
        if unstated:
            return f"value '{unstated[0]}'={values[unstated[0]]!r} is not stated in {name}"
        try:
            result = "Yes" if evaluate_check(item["check"], values) else "No"
        except (CheckError, AttributeError, KeyError, TypeError, ZeroDivisionError) as err:
            return f"check cannot be evaluated on {name}: {err}"
        if result != item["answer"]:
            return f"check gives {result} on {name}, but the answer is {item['answer']}"
    for field, own, other in (
        ("explanation_faithful", *sets.values()),
        ("explanation_unfaithful", *reversed(sets.values())),
    ):
        if not any(states_value(v, item[field]) for v in _differing(own, other)):
            return f"{field} states none of its fact set's changed values"
        if any(states_value(v, item[field]) for v in _differing(other, own) if v not in own.values()):
            return f"{field} states a changed value of the other fact set"
    return None


def load_items(path: Path | None = None) -> list[dict[str, Any]]:
    """The curated items, validated; a `{"_provenance": ...}` line is skipped."""
    path = path or source_path(ITEMS_FILE)
    if not path.is_file():
        raise SourceError(path, None, "file not found")
    items, seen = [], set()
    for line, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not text.strip():
            continue
        try:
            item = json.loads(text)
        except json.JSONDecodeError as err:
            raise SourceError(path, line, f"not valid JSON ({err.msg})") from None
        if not isinstance(item, dict):
            raise SourceError(path, line, "expected a JSON object")
        if set(item) == {"_provenance"}:
            continue
        problem = _problem(item)
        if problem:
            raise SourceError(path, line, problem)
        for key in ("id", "strategyqa_index"):
            if (key, item[key]) in seen:
                raise SourceError(path, line, f"duplicate {key} {item[key]!r}")
            seen.add((key, item[key]))
        items.append(item)
    if not items:
        raise SourceError(path, None, "no items")
    return items


def world_distance(text: str, facts: Sequence[str]) -> float:
    """How far the numbers a text states lie from the real world: the mean distance, in log ratio, from each numeral
    of the text to the nearest numeral of the original facts (what the audit's `world_fact_numbers` probe
    measures); 0 when either side states none."""
    truth = [float(n.replace(",", "")) for fact in facts for n in _NUMERAL.findall(fact)]
    stated = [float(n.replace(",", "")) for n in _NUMERAL.findall(text)]
    if not truth or not stated:
        return 0.0
    return sum(min(abs(math.log((v + _TINY) / (t + _TINY))) for t in truth) for v in stated) / len(stated)


def nearer_is_curated_edits(item: Mapping[str, Any]) -> bool:
    """Whether the explanation of the curated `edits` set states numbers nearer to the real world than the other
    one (see `world_distance`); between equally near ones, whether it is the longer (and, at equal length, true)."""
    ranks = [
        (world_distance(item[explanation], item["facts"]), -len(item[explanation]))
        for explanation in ("explanation_faithful", "explanation_unfaithful")
    ]
    return ranks[0] <= ranks[1]


def draw_roles(items: Sequence[Mapping[str, Any]], seed: int) -> list[bool]:
    """Whether each item's nearer fact set goes to the evaluated model M̄: the items ranked by a draw seeded with the
    build seed and the item's id, and every other one in that ranking (the first included) gets it, so that M̄
    holds the nearer set in half of the items (rounded up) and neither role sits systematically nearer the real
    world."""
    ranking = sorted(range(len(items)), key=lambda k: random.Random(f"{seed}|multihop|roles|{items[k]['id']}").random())
    nearer = [False] * len(items)
    for rank, k in enumerate(ranking):
        nearer[k] = rank % 2 == 0
    return nearer


def with_roles_swapped(item: Mapping[str, Any]) -> dict[str, Any]:
    """The item with its two fact sets' roles exchanged: the curated contrast set (with its explanation and values)
    becomes the evaluated model's, and the curated evaluated set the contrast model's."""
    return {
        **item,
        "edits": item["counter_edits"],
        "counter_edits": item["edits"],
        "explanation_faithful": item["explanation_unfaithful"],
        "explanation_unfaithful": item["explanation_faithful"],
        "values_edits": item["values_counter"],
        "values_counter": item["values_edits"],
    }


def make_pair(index: int, item: Mapping[str, Any], answer_letter: str, *, roles_swapped: bool = False) -> PairRecord:
    """One Multi-hop pair; the options are ordered so that the answer is `answer_letter`, and with `roles_swapped`
    the curated contrast set is the evaluated model's."""
    item = with_roles_swapped(item) if roles_swapped else item
    right, wrong = ("yes", "no") if item["answer"] == "Yes" else ("no", "yes")
    options = options_in_order(right, wrong, answer_letter)
    return PairRecord(
        id=f"multihop-default-{index}",
        task="multihop",
        question=f"{item['question']} (A) {options[0]} (B) {options[1]}. Answer?",
        choices=CHOICES,
        answer=answer_letter,
        edits=tuple(item["edits"]),
        counter_edits=tuple(item["counter_edits"]),
        explanation_faithful=item["explanation_faithful"],
        explanation_unfaithful=item["explanation_unfaithful"],
        metadata=metadata_json(
            source_id=item["id"],
            strategyqa_index=item["strategyqa_index"],
            cluster=item["id"],
            answer_text=item["answer"],
            options=list(options),
            hops=item["hops"],
            facts=item["facts"],
            decomposition=item["decomposition"],
            changed_fact_index=item["changed_fact_index"],
            check=item["check"],
            values_edits=item["values_edits"],
            values_counter=item["values_counter"],
            roles_swapped=roles_swapped,
        ),
    )


def build_multihop(seed: int = 0, *, items_path: Path | None = None) -> list[PairRecord]:
    """Multi-hop pairs from the curated items, in file order; the seed balances which letter is right and draws
    which fact set the evaluated model holds (see `draw_roles`)."""
    items = load_items(items_path)
    letters = balanced_letters(len(items), f"{seed}|multihop|letters", odd_extra="A")
    nearer = draw_roles(items, seed)
    return validate_records(
        make_pair(i, item, letter, roles_swapped=nearer_is_curated_edits(item) != gets_nearer)
        for i, (item, letter, gets_nearer) in enumerate(zip(items, letters, nearer))
    )


def split_facts(text: str) -> list[str]:
    """The sentences of a StrategyQA explanation (initials and common abbreviations do not end a sentence)."""
    text = re.sub(r"\s+([.,;:!?])(?=\s|$)", r"\1", " ".join(text.split()))
    sentences, start = [], 0
    for gap in re.finditer(r"(?<=[.!?])\s+", text):
        following, last_word = text[gap.end()], text[start : gap.start()].rsplit(" ", 1)[-1]
        if not (following.isupper() or following.isdigit() or following in "\"'(“‘$"):
            continue
        if re.fullmatch(r"(?:[A-Z]\.)+", last_word) or last_word.casefold() in _ABBREVIATIONS:
            continue
        sentences.append(text[start : gap.start()])
        start = gap.end()
    return [s for s in (*sentences, text[start:]) if s]


def _example(n: int, example: Mapping[str, Any], bigbench: bool) -> dict[str, Any]:
    if not bigbench:
        return {
            "index": n,
            "question": " ".join(example["question"].split()),
            "answer": "Yes" if example["answer"] else "No",
            "facts": list(example.get("facts", [])),
            "decomposition": list(example.get("decomposition", [])),
        }
    answer = max(example["target_scores"], key=example["target_scores"].get)
    explanation = example["target"].strip().removeprefix(answer).lstrip(". ")
    return {
        "index": n,
        "question": " ".join(example["input"].split()),
        "answer": answer,
        "facts": split_facts(explanation),
        "decomposition": [],
    }


def read_strategyqa(path: Path | str) -> list[dict[str, Any]]:
    """StrategyQA examples as {index, question, answer ("Yes"/"No"), facts, decomposition}.

    Reads BIG-bench's `strategyqa/task.json` (facts are the sentences of the target explanation; it has no
    decompositions) or the original StrategyQA JSON list (question, boolean answer, facts, decomposition)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise SourceError(path, None, f"cannot read StrategyQA JSON ({err})") from None
    bigbench = isinstance(data, dict)
    examples = data.get("examples") if bigbench else data
    if not isinstance(examples, list):
        raise SourceError(path, None, "expected a BIG-bench task with 'examples' or a JSON list of questions")
    out = []
    for n, example in enumerate(examples):
        try:
            out.append(_example(n, example, bigbench))
        except (KeyError, TypeError, AttributeError, ValueError) as err:
            raise SourceError(path, None, f"example #{n}: missing or malformed field {err}") from None
    return out
