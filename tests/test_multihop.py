import json
import math
import re
from collections import Counter
from pathlib import Path

import pytest

from recoe_causaldiag.api.records import validate_records
from recoe_causaldiag.artifact_probes import PairText, audit_records, fact_number_closeness
from recoe_causaldiag.curated_sources import SourceError, source_path
from recoe_causaldiag.dataset_building import write_dataset
from recoe_causaldiag.hub_layout import load_pairs
from recoe_causaldiag.tasks.multihop import (
    CheckError,
    build_multihop,
    evaluate_check,
    load_items,
    read_strategyqa,
    split_facts,
)

FIXTURES = Path(__file__).parent / "fixtures"
QUESTION = re.compile(r"^(?P<q>.+\?) \(A\) (?P<a>yes|no) \(B\) (?P<b>yes|no)\. Answer\?$")


# An independent reading of the check language and of "a fact set states a value", written for the tests.
_WORD_NUMBERS = dict(
    zero=0,
    one=1,
    two=2,
    three=3,
    four=4,
    five=5,
    six=6,
    seven=7,
    eight=8,
    nine=9,
    ten=10,
    eleven=11,
    twelve=12,
    thirteen=13,
    fourteen=14,
    fifteen=15,
    sixteen=16,
    seventeen=17,
    eighteen=18,
    nineteen=19,
    twenty=20,
    thirty=30,
    forty=40,
    fifty=50,
    sixty=60,
    seventy=70,
    eighty=80,
    ninety=90,
)


def _stated_numbers(text):
    digits = [float(t.replace(",", "")) for t in re.findall(r"(?<![\d.,])\d[\d,]*(?:\.\d+)?", text)]
    words = [float(_WORD_NUMBERS[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in _WORD_NUMBERS]
    return digits + words


def _is_stated(value, text):
    if isinstance(value, str):
        return value.lower() in text.lower()
    return any(abs(value - n) < 1e-9 for n in _stated_numbers(text))


def _value(term, values):
    if isinstance(term, str):
        return values[term[1:]] if term.startswith("$") else term
    if isinstance(term, dict):
        ((name, args),) = term.items()
        xs = [_value(a, values) for a in args]
        return {
            "add": lambda: sum(xs),
            "sub": lambda: xs[0] - xs[1],
            "mul": lambda: math.prod(xs),
            "div": lambda: xs[0] / xs[1],
        }[name]()
    return term


def _holds(check, values):
    kind = check["type"]
    if kind == "compare":
        a, b = _value(check["left"], values), _value(check["right"], values)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": abs(a - b) < 1e-9, "!=": abs(a - b) >= 1e-9}[
            check["op"]
        ]
    if kind == "equal":
        return str(_value(check["left"], values)).lower() == str(_value(check["right"], values)).lower()
    if kind == "member":
        item = _value(check["item"], values)
        return any(item == x or (isinstance(x, str) and str(item).lower() == x.lower()) for x in check["set"])
    if kind == "not":
        return not _holds(check["arg"], values)
    results = [_holds(c, values) for c in check["args"]]
    return all(results) if kind == "all" else any(results)


@pytest.fixture(scope="module")
def pairs():
    return build_multihop(0)


def test_curated_file_is_large_and_varied():
    items = load_items()
    assert len(items) >= 150
    answers = Counter(i["answer"] for i in items)
    assert min(answers["Yes"], answers["No"]) >= 0.4 * len(items)
    assert {2, 3, 4} <= {i["hops"] for i in items}
    assert len({i["strategyqa_index"] for i in items}) == len(items)
    assert all(i["id"] == f"sqa-{i['strategyqa_index']}" for i in items)
    assert source_path("multihop_items.jsonl").read_text().startswith('{"_provenance": ')


def test_records_follow_the_schema(pairs):
    items = load_items()
    assert len(pairs) == len(items) and validate_records(pairs) == pairs
    for n, (pair, item) in enumerate(zip(pairs, items)):
        meta = pair.meta
        match = QUESTION.match(pair.question)
        assert pair.id == f"multihop-default-{n}" and pair.task == "multihop"
        assert match and match["q"] == item["question"] and {match["a"], match["b"]} == {"yes", "no"}
        assert pair.choices == ("A", "B") and pair.answer in pair.choices
        assert match["a" if pair.answer == "A" else "b"] == item["answer"].lower() == meta["answer_text"].lower()
        own, other = ("counter_edits", "edits") if meta["roles_swapped"] else ("edits", "counter_edits")
        assert pair.edits == tuple(item[own]) and pair.counter_edits == tuple(item[other])
        explained = {"edits": "explanation_faithful", "counter_edits": "explanation_unfaithful"}
        assert (pair.explanation_faithful, pair.explanation_unfaithful) == (
            item[explained[own]],
            item[explained[other]],
        )
        valued = {"edits": "values_edits", "counter_edits": "values_counter"}
        assert (meta["values_edits"], meta["values_counter"]) == (item[valued[own]], item[valued[other]])
        assert meta["cluster"] == meta["source_id"] == item["id"]
        assert pair.rewrites == () and pair.counter_rewrites == () and pair.flip_edits == ()
        assert all(e.endswith(".") for e in pair.edits + pair.counter_edits)
        assert meta["strategyqa_index"] == item["strategyqa_index"] and meta["hops"] == len(meta["decomposition"])
        assert meta["facts"] == item["facts"] and meta["check"] == item["check"]


def test_edits_change_the_chosen_fact_and_keep_the_rest(pairs):
    for pair in pairs:
        meta = pair.meta
        facts, c = meta["facts"], meta["changed_fact_index"]
        assert len(pair.edits) == len(pair.counter_edits) == len(facts)
        assert len({facts[c], pair.edits[c], pair.counter_edits[c]}) == 3
        changed = {i for i, f in enumerate(facts) if f != pair.edits[i] or f != pair.counter_edits[i]}
        assert c in changed and len(changed) <= 2, pair.id


def test_answer_follows_symbolically_from_each_edit_set(pairs):
    """Recompute the answer from the values each edit set states, with the test's own evaluator."""
    for pair in pairs:
        meta = pair.meta
        for facts, values in ((pair.edits, meta["values_edits"]), (pair.counter_edits, meta["values_counter"])):
            text = " ".join(facts)
            assert all(_is_stated(v, text) for v in values.values()), (pair.id, values)
            assert ("Yes" if _holds(meta["check"], values) else "No") == meta["answer_text"], pair.id
        assert meta["values_edits"] != meta["values_counter"]


def test_each_explanation_follows_its_own_fact_set(pairs):
    for pair in pairs:
        edits, counter = pair.meta["values_edits"], pair.meta["values_counter"]
        own = [v for k, v in edits.items() if v != counter[k]]
        other = [v for k, v in counter.items() if v != edits[k] and v not in edits.values()]
        assert any(_is_stated(v, pair.explanation_faithful) for v in own), pair.id
        assert not any(_is_stated(v, pair.explanation_faithful) for v in other), pair.id
        assert pair.explanation_faithful != pair.explanation_unfaithful


def test_builds_are_deterministic_and_letters_balanced(pairs):
    again = build_multihop(0)
    assert [p.to_row() for p in again] == [p.to_row() for p in pairs]
    letters = Counter(p.answer for p in pairs)
    assert abs(letters["A"] - letters["B"]) <= 1
    other = build_multihop(1)
    assert [p.answer for p in other] != [p.answer for p in pairs]
    assert [{p.edits, p.counter_edits} for p in other] == [{p.edits, p.counter_edits} for p in pairs]
    assert [p.edits for p in other] != [p.edits for p in pairs], "the seed draws which fact set is evaluated"


def test_roles_are_drawn_and_neither_sits_nearer_the_real_world(pairs):
    """Either curated fact set may be the evaluated one: both assignments occur, the check holds under the
    evaluated set in both, and the evaluated model's explanation states numbers nearer the original facts' in as
    many pairs as the contrast model's (measured with the audit's probe, not the builder's code)."""
    swapped = Counter(p.meta["roles_swapped"] for p in pairs)
    assert min(swapped[True], swapped[False]) >= 0.3 * len(pairs)
    for roles_swapped in (True, False):
        for pair in (p for p in pairs if p.meta["roles_swapped"] is roles_swapped):
            holds = _holds(pair.meta["check"], pair.meta["values_edits"])
            assert ("Yes" if holds else "No") == pair.meta["answer_text"], pair.id
    nearer = Counter()
    for text in map(PairText.from_record, pairs):
        faithful, unfaithful = fact_number_closeness(text.faithful, text), fact_number_closeness(text.unfaithful, text)
        nearer[(faithful > unfaithful) - (faithful < unfaithful)] += 1
    assert abs(nearer[1] - nearer[-1]) <= 1, nearer


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_text_probe_passes_on_the_built_dataset(seed):
    results = {r.probe: r for r in audit_records("multihop", build_multihop(seed))}
    assert results["world_fact_numbers"].verdict == "PASS" and results["world_fact_numbers"].n_valid >= 200
    assert [r.describe() for r in results.values() if r.verdict != "PASS"] == []


def test_check_language():
    values = {"died": 1978, "pub": 2008, "place": "India"}
    assert not evaluate_check({"type": "compare", "op": "<=", "left": "$pub", "right": "$died"}, values)
    assert evaluate_check({"type": "compare", "op": ">", "left": {"sub": ["$pub", "$died"]}, "right": 29}, values)
    assert evaluate_check({"type": "member", "item": "$place", "set": ["india", "Nepal"]}, values)
    assert evaluate_check(
        {
            "type": "all",
            "args": [
                {"type": "equal", "left": "$place", "right": "INDIA"},
                {"type": "not", "arg": {"type": "any", "args": []}},
            ],
        },
        values,
    )
    with pytest.raises(CheckError, match="no value named 'born'"):
        evaluate_check({"type": "compare", "op": "<", "left": "$born", "right": 1}, values)


def _sample_item():
    line = next(t for t in source_path("multihop_items.jsonl").read_text().splitlines() if '"id": "sqa-92"' in t)
    return json.loads(line)


def _corrupt(item, field, value):
    item = dict(item)
    if value is None:
        del item[field]
    else:
        item[field] = value
    return item


_WODEHOUSE = _sample_item()


@pytest.mark.parametrize(
    "bad, problem",
    [
        (_corrupt(_WODEHOUSE, "check", None), "missing field 'check'"),
        (_WODEHOUSE, "duplicate id 'sqa-92'"),
        (_corrupt(_WODEHOUSE, "check", {**_WODEHOUSE["check"], "op": ">"}), "check gives Yes on edits"),
        (
            _corrupt(_WODEHOUSE, "values_counter", {**_WODEHOUSE["values_counter"], "died": 1966}),
            "is not stated in counter_edits",
        ),
        (_corrupt(_WODEHOUSE, "counter_edits", _WODEHOUSE["edits"]), "edits and counter_edits are identical"),
        (
            _corrupt(_WODEHOUSE, "explanation_unfaithful", _WODEHOUSE["explanation_faithful"]),
            "explanations are identical",
        ),
        (
            _corrupt(
                _corrupt(_WODEHOUSE, "explanation_faithful", _WODEHOUSE["explanation_unfaithful"]),
                "explanation_unfaithful",
                _WODEHOUSE["explanation_faithful"],
            ),
            "states none of its fact set's",
        ),
        (_corrupt(_WODEHOUSE, "hops", 5), "hops is 5"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_curated_item_stops_the_build_and_names_its_line(tmp_path, bad, problem):
    path = tmp_path / "items.jsonl"
    lines = [
        json.dumps({"_provenance": "test"}),
        json.dumps(_WODEHOUSE),
        "",
        bad if isinstance(bad, str) else json.dumps(bad),
    ]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SourceError) as err:
        build_multihop(0, items_path=path)
    assert f"{path}:4: " in str(err.value) and problem in str(err.value)


def test_read_strategyqa_from_the_bigbench_file():
    examples = read_strategyqa(FIXTURES / "strategyqa_sample.json")
    assert [e["answer"] for e in examples] == ["No", "No", "Yes", "No", "No"]
    assert examples[0] == {
        "index": 0,
        "question": "Was P. G. Wodehouse's favorite book The Hunger Games?",
        "answer": "No",
        "decomposition": [],
        "facts": ["P. G. Wodehouse died in 1975.", "The Hunger Games was published in 2008."],
    }
    curated = {i["question"]: i for i in load_items()}
    for example in examples:
        if example["question"] in curated and "D.C." not in " ".join(example["facts"]):
            assert example["facts"] == curated[example["question"]]["facts"]
    assert examples[2]["facts"][2].startswith("Modern geneticists have determined that out of every 200 men")


def test_read_strategyqa_from_the_original_format(tmp_path):
    path = tmp_path / "strategyqa_train.json"
    path.write_text(
        json.dumps(
            [
                {
                    "qid": "x1",
                    "question": "Could a llama  birth twice?",
                    "answer": False,
                    "facts": ["A llama gestates 11 months."],
                    "decomposition": ["How long?", "Twice?"],
                }
            ]
        )
    )
    assert read_strategyqa(path) == [
        {
            "index": 0,
            "question": "Could a llama birth twice?",
            "answer": "No",
            "facts": ["A llama gestates 11 months."],
            "decomposition": ["How long?", "Twice?"],
        }
    ]
    path.write_text(json.dumps([{"question": "No answer field?"}]))
    with pytest.raises(SourceError, match="example #0"):
        read_strategyqa(path)


def test_split_facts_keeps_initials_and_abbreviations_together():
    assert split_facts("P. G. Wodehouse died in 1975.  Dr. Who aired. ŽRK is a club. $25 is cheap.") == [
        "P. G. Wodehouse died in 1975.",
        "Dr. Who aired.",
        "ŽRK is a club.",
        "$25 is cheap.",
    ]


def test_hub_layout_round_trip_and_card(tmp_path, pairs):
    folder = write_dataset("multihop", {"default": pairs}, tmp_path)
    assert load_pairs(folder) == pairs
    card = (folder / "README.md").read_text()
    assert "{{" not in card and f"{len(pairs)} pairs" in card and "license: mit" in card
