"""Model-side controls in every run (SPEC §7): swapped-roles diagnosticity (D_swap, D_sym), two-sided and no-edit
edit reliability, task accuracy of the edited model; per-pair rows reproduce every figure. On the scripted engine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import pytest
from fakes import ScriptedEngine

from recoe_causaldiag.api import Instance, Metric, RunSpec, symmetric_counterfactual, task_registry
from recoe_causaldiag.api.metric import METRICS
from recoe_causaldiag.api.rows import PairControlRow, PairScoreRow
from recoe_causaldiag.api.run_spec import DatasetIdentity, ModelIdentity
from recoe_causaldiag.controls import reliability_entry
from recoe_causaldiag.prompts import COT_ANSWER_PROMPT, Prompt
from recoe_causaldiag.report import write_results
from recoe_causaldiag.runner import ScoredRun, score_task
from recoe_causaldiag.statistics import diagnosticity_from_d
from recoe_causaldiag.task_pairs import TaskPairs
from recoe_causaldiag.tasks.analogy import build_analogy
from recoe_causaldiag.tasks.factcheck import build_factcheck

N = 12


class ShorterIsFaithful(Metric):
    """A template-preferring scorer: the shorter explanation scores higher, whatever the model."""

    name = "shorter_is_faithful"
    explanation_type = "reference"
    description = "test only: minus the explanation's length"
    title = long_description = citation = "test only"
    uses_model = False

    @property
    def variants(self) -> tuple[str, ...]:
        return ("length",)

    def score_instances(self, instances: Sequence[Instance], engine=None) -> dict[str, np.ndarray]:
        return {"length": np.array([-len(i.explanation) for i in instances], dtype=float)}


def facts_of(prompt: Prompt) -> list[str]:
    return list(prompt.edits or ())


class ControlEngine(ScriptedEngine):
    """Perplexity 1 for an explanation that states a fact in context, else 2 + its length / 1000 (so with no edits
    the shorter text is preferred). Direct prompts answer the last label; CoT prompts the first label when the
    explanation's length is even, else the last."""

    def __init__(self) -> None:
        super().__init__(probs=self.label_scores)
        self.ppl_prompts: list[Prompt] = []

    @staticmethod
    def label_scores(prompt: Prompt) -> list[float]:
        if not prompt.continuation:
            return [0.2, 0.8]
        explanation = prompt.continuation.removesuffix(COT_ANSWER_PROMPT).strip()
        return [0.7, 0.3] if len(explanation) % 2 == 0 else [0.3, 0.7]

    def perplexity(self, prompts: Sequence[Prompt], *, desc: str = "") -> np.ndarray:
        self.ppl_prompts += prompts

        def ppl(prompt: Prompt) -> float:
            explanation = prompt.continuation.strip()
            stated = any(fact.rstrip(".") in explanation for fact in facts_of(prompt))
            return 1.0 if stated else 2.0 + len(explanation) / 1000

        return np.array([ppl(p) for p in prompts])


@pytest.fixture
def shorter_metric(monkeypatch):
    monkeypatch.setitem(METRICS._entries, ShorterIsFaithful.name, ShorterIsFaithful)
    return ShorterIsFaithful.name


def task_pairs(task: str, pairs) -> TaskPairs:
    return TaskPairs(task, DatasetIdentity(task, "test", "0" * 64), tuple(pairs))


def spec(tasks: Sequence[str], metrics: Sequence[str], **options) -> RunSpec:
    return RunSpec(model="smollm2-135m-instruct", tasks=tuple(tasks), metrics=tuple(metrics), **options)


@pytest.fixture(scope="module")
def factcheck() -> TaskPairs:
    return task_pairs("factcheck", build_factcheck(0)[:N])


@pytest.fixture(scope="module")
def analogy() -> TaskPairs:
    return task_pairs("analogy", build_analogy(0)[:N])


def test_swapped_roles_exchange_edits_explanations_and_role_metadata_and_keep_the_answer(factcheck):
    task = task_registry().get("factcheck")
    pair = dataclasses.replace(factcheck.pairs[0], flip_edits=("Babe Ruth professionally plays the sport golf.",))
    swapped = task.swapped_roles(pair)
    assert (swapped.edits, swapped.counter_edits) == (pair.counter_edits, pair.edits)
    assert (swapped.explanation_faithful, swapped.explanation_unfaithful) == (
        pair.explanation_unfaithful,
        pair.explanation_faithful,
    )
    assert (swapped.rewrites, swapped.counter_rewrites) == (pair.counter_rewrites, pair.rewrites)
    assert swapped.answer == pair.answer and swapped.flip_edits == () and swapped.id == pair.id
    meta, original = swapped.meta, pair.meta
    assert (meta["object_edit"], meta["object_counter"]) == (original["object_counter"], original["object_edit"])
    assert {k: v for k, v in meta.items() if not k.startswith("object_")} == {
        k: v for k, v in original.items() if not k.startswith("object_")
    }
    # CaF's counterfactual is rebuilt from the swapped edits: the contrast model's object becomes the true one
    flipped = symmetric_counterfactual(Instance.from_pair(swapped, swapped.explanation_faithful), len)
    assert flipped.edits == (pair.counter_edits[0].replace(original["object_counter"], original["object_true"]),)
    assert task.swapped_roles(swapped) == dataclasses.replace(pair, flip_edits=())


def test_roles_are_swappable_on_every_task_but_analogy():
    registry = task_registry()
    assert [name for name in registry if not registry.get(name).roles_swappable] == ["analogy"]
    with pytest.raises(ValueError, match="task analogy: roles cannot be swapped"):
        registry.get("analogy").swapped_roles(build_analogy(0)[0])


def test_swapping_pairs_without_counter_edits_is_an_error_naming_the_task(factcheck):
    broken = task_pairs("factcheck", [dataclasses.replace(factcheck.pairs[0], counter_edits=())])
    with pytest.raises(ValueError, match="task factcheck: pair factcheck-default-0 has no counter_edits"):
        score_task(spec(["factcheck"], ["random_baseline"]), broken, ControlEngine())
    score_task(spec(["factcheck"], ["random_baseline"], swap=False), broken, ControlEngine())


def test_a_template_preferring_scorer_wins_one_direction_and_loses_the_other(factcheck, shorter_metric):
    scores = score_task(spec(["factcheck"], [shorter_metric, "oracle", "random_baseline"]), factcheck, ControlEngine())
    results = {r["metric"]: r for r in scores.results}
    shorter, oracle = results[shorter_metric], results["oracle"]
    assert shorter["d_swap"] == pytest.approx(1 - shorter["diagnosticity"]) and shorter["d_sym"] == 0.5
    assert shorter["d_sym_ci_low"] < 0.5 < shorter["d_sym_ci_high"] and shorter["d_sym_p_value"] == 1.0
    assert oracle["diagnosticity"] > 0.9 and oracle["d_swap"] > 0.9 and oracle["d_sym"] > 0.9
    assert 0 < results["random_baseline"]["d_sym"] < 1
    rows = [r for r in scores.rows if r.metric == shorter_metric]
    assert all(r.swapped and r.d_sym == 0.5 for r in rows)
    for row, pair in zip(rows, factcheck.pairs):
        assert row.score_faithful_swap == -len(pair.explanation_unfaithful)
        assert row.score_unfaithful_swap == -len(pair.explanation_faithful)


def test_per_pair_rows_reproduce_every_figure_of_the_results_file(factcheck, analogy, shorter_metric, tmp_path):
    run_spec = spec(["factcheck", "analogy"], [shorter_metric, "oracle", "random_baseline"])
    engine = ControlEngine()
    tasks = tuple(score_task(run_spec, pairs, engine) for pairs in (factcheck, analogy))
    identity = ModelIdentity("smollm2-135m-instruct", "scripted", "float32", "cpu")
    ran = run_spec.resolved(identity, [task.dataset for task in tasks], "test")
    write_results(ScoredRun(ran, tasks).document(), tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema_version"] == "1.8" and doc["run_spec"]["swap"] is True

    rows = [PairScoreRow.from_json(r) for r in doc["pairs"]]
    assert [r.to_json() for r in rows] == doc["pairs"]
    assert any(r.cluster is not None for r in rows)
    clusters = {task.task: [p.cluster for p in task.pairs] for task in (factcheck, analogy)}
    for result in doc["results"]:
        key = (result["task"], result["metric"], result["variant"])
        mine = [r for r in rows if (r.task, r.metric, r.variant) == key]
        assert len(mine) == N and result["diagnosticity"] == pytest.approx(np.nanmean([r.d for r in mine]))
        assert [r.cluster for r in mine] == clusters[result["task"]]
        again = diagnosticity_from_d(
            [r.d for r in mine], clusters=[r.cluster for r in mine], n_resamples=ran.n_resamples, seed=ran.seed
        )
        assert (again.ci_low, again.ci_high, again.p_value) == (result["ci_low"], result["ci_high"], result["p_value"])
        if result["task"] == "analogy":
            assert not any(r.swapped for r in mine) and result["d_swap"] is result["d_sym"] is None
            assert "d_swap" not in doc["pairs"][rows.index(mine[0])]
        else:
            assert result["d_swap"] == pytest.approx(np.nanmean([r.d_swap for r in mine]))
            assert result["d_sym"] == pytest.approx(np.nanmean([(r.d + r.d_swap) / 2 for r in mine]))
            assert result["d_sym_ci_low"] <= result["d_sym"] <= result["d_sym_ci_high"]

    controls = [PairControlRow.from_json(r) for r in doc["pair_controls"]]
    assert [c.to_json() for c in controls] == doc["pair_controls"] and len(controls) == 2 * N
    for entry, accuracy in zip(doc["edit_reliability"], doc["accuracy"], strict=True):
        mine = [c for c in controls if c.task == entry["task"] == accuracy["task"]]
        assert entry["value"] == np.mean([c.ppl_faithful < c.ppl_unfaithful for c in mine]) and entry["n"] == N
        assert entry["no_edit"] == np.mean([c.ppl_faithful_no_edit < c.ppl_unfaithful_no_edit for c in mine])
        assert accuracy["direct"] == np.mean([c.direct_answer == c.answer for c in mine]) and accuracy["direct_n"] == N
        assert accuracy["cot"] == np.mean([c.cot_answer == c.answer for c in mine])
        assert entry["no_edit_ci_low"] <= entry["no_edit"] <= entry["no_edit_ci_high"]
    factcheck_reliability, analogy_reliability = doc["edit_reliability"]
    # the scripted model follows the edits both ways on FactCheck; with no edits it prefers the shorter text
    assert (
        factcheck_reliability["value"] == factcheck_reliability["counter"] == factcheck_reliability["two_sided"] == 1.0
    )
    shorter_faithful = [len(p.explanation_faithful) < len(p.explanation_unfaithful) for p in factcheck.pairs]
    assert factcheck_reliability["no_edit"] == np.mean(shorter_faithful)
    assert analogy_reliability["two_sided"] is analogy_reliability["counter"] is None
    assert "ppl_faithful_counter" not in doc["pair_controls"][N]
    odd = [len(p.explanation_faithful) % 2 == 1 for p in factcheck.pairs]  # the CoT answers "No" (the answer)
    assert doc["accuracy"][0] | {"direct": 1.0, "cot": np.mean(odd)} == doc["accuracy"][0]

    table = (tmp_path / "r.md").read_text()
    sym = next(r for r in doc["results"] if r["task"] == "factcheck" and r["metric"] == shorter_metric)
    sym_ci = f"[{sym['d_sym_ci_low']:.3f}, {sym['d_sym_ci_high']:.3f}]"
    assert f"| factcheck | {shorter_metric} | length | 0.500 | {sym_ci} |" in table
    assert "| analogy | oracle | overlap | n/a | [n/a, n/a] |" in table
    assert f"| factcheck | 1.000 | [{factcheck_reliability['ci_low']:.3f}, 1.000] | 1.000 |" in table
    assert "accuracy CoT" in table


def test_no_swap_skips_the_swapped_scoring_and_keeps_the_evaluated_direction(factcheck, shorter_metric):
    engine = ControlEngine()
    with_swap = score_task(spec(["factcheck"], [shorter_metric, "oracle"]), factcheck, engine)
    without = score_task(spec(["factcheck"], [shorter_metric, "oracle"], swap=False), factcheck, engine)
    assert [r.evaluated_direction() for r in with_swap.rows] == list(without.rows)
    assert all(not r.swapped and "d_swap" not in r.to_json() for r in without.rows)
    assert all(r["d_sym"] is None and r["d_swap_ci_low"] is None for r in without.results)
    assert without.edit_reliability == with_swap.edit_reliability and without.accuracy == with_swap.accuracy


def test_rows_carry_the_swapped_direction_only_where_it_ran():
    row = PairScoreRow("fc-1", "factcheck", "oracle", "overlap", 0.5, 0.25, 1.0, 0.1, 0.2, 0.0)
    written = json.loads(json.dumps(row.to_json()))
    assert written | {"score_faithful_swap": 0.1, "score_unfaithful_swap": 0.2, "d_swap": 0.0} == written
    assert PairScoreRow.from_json(written) == row and row.d_sym == 0.5
    unscored = PairScoreRow.from_json(written | {"d_swap": None, "score_faithful_swap": None})
    assert unscored.swapped and np.isnan(unscored.d_swap) and np.isnan(unscored.d_sym)
    one_way = row.evaluated_direction()
    assert (
        not one_way.swapped
        and one_way.d_sym is None
        and set(one_way.to_json())
        == set(written)
        - {
            "score_faithful_swap",
            "score_unfaithful_swap",
            "d_swap",
        }
    )
    assert PairScoreRow.from_json(one_way.to_json()) == one_way


def test_control_rows_round_trip_and_count_ties_as_not_preferred():
    row = PairControlRow("a-1", "analogy", 2.0, 2.0, None, None, 1.0, 3.0, "A", "A", "B")
    assert "ppl_faithful_counter" not in row.to_json() and PairControlRow.from_json(row.to_json()) == row
    assert (row.edit_preferred, row.both_ways_preferred, row.no_edit_preferred) == (0.0, None, 1.0)
    assert (row.direct_correct, row.cot_correct) == (1.0, 0.0)
    both = dataclasses.replace(row, ppl_faithful=1.0, ppl_faithful_counter=4.0, ppl_unfaithful_counter=3.0)
    assert both.both_ways_preferred == 1.0 and PairControlRow.from_json(both.to_json()) == both
    assert np.isnan(dataclasses.replace(both, ppl_unfaithful_counter=float("nan")).both_ways_preferred)


def control_row(edits_prefer_faithful: bool, counter_prefers_unfaithful: bool) -> PairControlRow:
    """A pair's controls in which the edits and the counter edits each decide one way or the other."""
    faithful, unfaithful = (1.0, 2.0) if edits_prefer_faithful else (2.0, 1.0)
    faithful_counter, unfaithful_counter = (2.0, 1.0) if counter_prefers_unfaithful else (1.0, 2.0)
    return PairControlRow("p", "factcheck", faithful, unfaithful, faithful_counter, unfaithful_counter, 1.0, 2.0,
                          "No", "No", "No")  # fmt: skip


@pytest.mark.parametrize(
    ("sides", "figures"),
    [
        # each edit set followed in three of four pairs, failing on different pairs: both ways in half of them
        ([(True, True), (True, False), (False, True), (True, True)], (0.75, 0.75, 0.5)),
        # a text preference: the faithful text wins under both edit sets, so the swapped direction never follows
        ([(True, False)] * 4, (1.0, 0.0, 0.0)),
    ],
)
def test_counter_reliability_is_the_swapped_directions_own_share(sides, figures):
    entry = reliability_entry("factcheck", [control_row(*s) for s in sides], diagnosticity_from_d)
    assert (entry["value"], entry["counter"], entry["two_sided"]) == figures
    assert entry["counter_n"] == len(sides) and entry["counter_ci_low"] <= entry["counter"] <= entry["counter_ci_high"]


def test_counter_reliability_is_absent_where_the_roles_cannot_be_swapped():
    row = dataclasses.replace(control_row(True, True), ppl_faithful_counter=None, ppl_unfaithful_counter=None)
    entry = reliability_entry("analogy", [row], diagnosticity_from_d)
    assert row.counter_preferred is None and entry["counter"] is entry["counter_ci_low"] is entry["counter_n"] is None


def test_a_counter_edit_tie_is_not_a_preference_and_an_unscored_one_is_nan():
    tie = dataclasses.replace(control_row(True, True), ppl_faithful_counter=1.5, ppl_unfaithful_counter=1.5)
    unscored = dataclasses.replace(control_row(True, True), ppl_unfaithful_counter=float("nan"))
    assert tie.counter_preferred == 0.0 and tie.both_ways_preferred == 0.0
    assert np.isnan(unscored.counter_preferred) and np.isnan(unscored.both_ways_preferred)
