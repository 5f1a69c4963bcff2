"""Our results beside paper 000's Table 1 and findings (`paper_comparison`), in D and in D_sym."""

from __future__ import annotations

import json
import math

import pytest

from recoe_causaldiag import cli
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.paper_comparison import (
    AGREES,
    CANNOT_TELL,
    CATEGORIES,
    DISAGREES,
    FILLER,
    TABLE_1,
    TABLE_2_BINARY,
    UNDECIDED,
    comparison_figure,
    comparison_page,
    continuous_beats_binary,
    copeland_ranking,
    filler_above_chance,
    filler_is_best,
    outcomes,
    simulatability_at_chance,
)
from recoe_causaldiag.statistics import MIN_N_VALID, Estimate, diagnosticity_from_d

N = 30


def rows(task: str, metric: str, variant: str, d: list[float], d_swap: list[float] | None) -> list[dict]:
    """Per-pair rows of one metric variant, scores chosen to give outcome d (and d_swap where given)."""
    out = []
    for k, value in enumerate(d):
        row = {"pair_id": f"{task}-{k:03d}", "task": task, "metric": metric, "variant": variant}
        row |= {"score_faithful": value, "score_unfaithful": 0.5, "d": value}
        if d_swap is not None:
            row |= {"score_faithful_swap": d_swap[k], "score_unfaithful_swap": 0.5, "d_swap": d_swap[k]}
        out.append(row)
    return out


def fields(of: str, estimate: Estimate) -> dict:
    """A result entry's statistics of one measure, keyed as SPEC §8 keys them (`of`: '' for D, 'd_sym_')."""
    value = {"d_sym": estimate.value} if of else {"diagnosticity": estimate.value}
    names = ("ci_low", "ci_high", "p_value", "p_ttest", "n", "n_valid", "n_nan")
    return value | {of + name: getattr(estimate, name) for name in names}


def with_entries(doc: dict) -> dict:
    """`doc` with a result entry per row of its per-pair scores, as a run writes them."""
    keys = dict.fromkeys((r["task"], r["metric"], r["variant"]) for r in doc["pairs"])
    doc["results"] = []
    for task, metric, variant in keys:
        mine = [r for r in doc["pairs"] if (r["task"], r["metric"], r["variant"]) == (task, metric, variant)]
        entry = {"task": task, "metric": metric, "variant": variant}
        entry |= fields("", diagnosticity_from_d([r["d"] for r in mine]))
        entry |= fields("d_sym_", diagnosticity_from_d([(r["d"] + r["d_swap"]) / 2 for r in mine]))
        doc["results"].append(entry)
    return doc


def document(task: str = "factcheck", model: str = "some-model", *, text_preferring_filler: bool = False) -> dict:
    """A results file in which Filler Tokens wins on every pair (d = 1), the other CoT metrics tie half their pairs,
    binary variants sit at 0.5 and simulatability wins half its pairs. With `text_preferring_filler` Filler Tokens
    loses every swapped pair (it prefers one explanation's text, whichever model reads it)."""
    half, tied = [1.0, 0.0] * (N // 2), [1.0, 0.5] * (N // 2)
    pairs = rows(task, FILLER.metric, FILLER.variant, [1.0] * N, [0.0 if text_preferring_filler else 1.0] * N)
    pairs += rows(task, "simulatability", "binary", half, half)
    for row in TABLE_1:
        if row.metric not in (FILLER.metric, "simulatability"):
            pairs += rows(task, row.metric, row.variant, tied, tied)
    for row in TABLE_1:
        if row.metric in TABLE_2_BINARY:
            pairs += rows(task, row.metric, row.binary_variant, [0.5] * N, [0.5] * N)
    return with_entries({"model": {"name": model}, "pairs": pairs})


def test_every_row_of_the_papers_tables_names_a_variant_the_metric_has():
    for row in TABLE_1:
        assert row.variant in METRICS.get(row.metric)().variants
    for row in TABLE_1:
        if row.metric in TABLE_2_BINARY:
            assert row.binary_variant in METRICS.get(row.metric)().variants


def test_a_filler_that_wins_both_directions_agrees_with_every_filler_claim():
    results = outcomes([document()])
    for direction in ("D", "D_sym"):
        best = filler_is_best(results, "factcheck", direction)
        assert best.word == AGREES and "highest: Filler Tokens (" in best.ours
        assert filler_above_chance(results, "factcheck", direction).word == AGREES
        assert continuous_beats_binary(results, "factcheck", direction, "filler_tokens").word == AGREES
        assert simulatability_at_chance(results, "factcheck", direction).word == AGREES


def test_the_swapped_roles_control_overturns_a_filler_that_prefers_one_text():
    results = outcomes([document(text_preferring_filler=True)])
    assert filler_is_best(results, "factcheck", "D").word == AGREES
    assert filler_is_best(results, "factcheck", "D_sym").word == DISAGREES
    assert filler_above_chance(results, "factcheck", "D").word == AGREES
    assert filler_above_chance(results, "factcheck", "D_sym").word == UNDECIDED


def test_a_tie_for_the_highest_is_not_filler_tokens_winning_and_a_metric_beating_it_disagrees():
    doc = document()
    for row in doc["pairs"]:
        if (row["metric"], row["variant"]) == ("early_answering", "first_third-continuous"):
            row["d"] = row["d_swap"] = 1.0
    verdict = filler_is_best(outcomes([with_entries(doc)]), "factcheck", "D")
    assert verdict.word == UNDECIDED and "highest: Early Answering and Filler Tokens (" in verdict.ours
    for row in doc["pairs"]:
        if row["metric"] == FILLER.metric and row["variant"] == FILLER.variant:
            row["d"] = 0.5
    verdict = filler_is_best(outcomes([with_entries(doc)]), "factcheck", "D")
    assert verdict.word == DISAGREES and "Filler Tokens against Early Answering, Wilcoxon p" in verdict.ours


def test_a_difference_short_of_significance_is_no_verdict_either_way():
    doc = document()
    for row in doc["pairs"]:
        if (row["metric"], row["variant"]) == ("paraphrasing", "paraphrase-binary"):
            row["d"] = row["d_swap"] = 0.75 if row["pair_id"].endswith(("00", "01", "02")) else 0.5
        if (row["metric"], row["variant"]) == ("paraphrasing", "paraphrase-continuous"):
            row["d"] = row["d_swap"] = 0.5
    verdict = continuous_beats_binary(outcomes([with_entries(doc)]), "factcheck", "D", "paraphrasing")
    assert verdict.word == UNDECIDED and "binary 0.525 → continuous 0.500" in verdict.ours


def test_a_metric_under_the_ranking_floor_or_on_a_subset_of_the_pairs_narrows_nothing_else():
    doc = document()
    mistakes = [r for r in doc["pairs"] if r["metric"] == "adding_mistakes" and r["variant"].endswith("continuous")]
    for k, row in enumerate(mistakes):
        row["d"] = row["d_swap"] = 1.0 if k < MIN_N_VALID - 1 else math.nan
    doc["pairs"] = [r for r in doc["pairs"] if r["metric"] != "cc_shap" or r["pair_id"] < "factcheck-005"]
    results = outcomes([with_entries(doc)])
    verdict = filler_is_best(results, "factcheck", "D")
    assert verdict.word == AGREES and "Adding Mistakes" not in verdict.ours
    ranking = copeland_ranking(results, "D")
    assert max(ranking, key=ranking.get) == "Filler Tokens" and "Adding Mistakes" not in ranking
    assert "CC-SHAP (CoT)" not in ranking


def test_a_claim_the_results_cannot_check_says_so():
    doc = document()
    doc["pairs"] = [r for r in doc["pairs"] if r["metric"] != "paraphrasing"]
    verdict = continuous_beats_binary(outcomes([doc]), "factcheck", "D", "paraphrasing")
    assert verdict.word == CANNOT_TELL


def test_copeland_ranks_the_winner_first_in_both_measures_only_when_it_wins_both():
    honest = outcomes([document()])
    assert max(copeland_ranking(honest, "D_sym").items(), key=lambda kv: kv[1])[0] == "Filler Tokens"
    biased = copeland_ranking(outcomes([document(text_preferring_filler=True)]), "D_sym")
    assert max(biased.items(), key=lambda kv: kv[1])[0] != "Filler Tokens"


def test_the_papers_copeland_scores_count_contests_within_a_category():
    for _, cot in CATEGORIES:
        k = sum(row.cot == cot for row in TABLE_1)
        assert sum(row.copeland for row in TABLE_1 if row.cot == cot) == 4 * 2 * math.comb(k, 2)


def test_copeland_compares_metrics_of_one_category_only():
    doc = document()
    ranking = copeland_ranking(outcomes([doc]), "D")
    for _, cot in CATEGORIES:
        k = sum(row.cot == cot for row in TABLE_1)
        assert sum(ranking[row.label] for row in TABLE_1 if row.cot == cot) == math.comb(k, 2)
    post_hoc = {row.key[1:] for row in TABLE_1 if not row.cot}
    kept = [r for r in doc["pairs"] if (r["metric"], r["variant"]) in post_hoc]
    alone = outcomes([with_entries(doc | {"pairs": kept})])
    assert copeland_ranking(alone, "D") == {row.label: ranking[row.label] for row in TABLE_1 if not row.cot}
    page = comparison_page(outcomes([doc]))
    paper = (
        "- paper (4 tasks × 2 models): post-hoc: CC-SHAP (post-hoc) (5) > Simulatability (3); CoT: Filler Tokens (29)"
    )
    assert paper in page
    ties = "CoT: Filler Tokens (4) > Early Answering (1.5) = Adding Mistakes (1.5) = Paraphrasing (1.5) = CC-SHAP (CoT)"
    assert f"- ours, D (factcheck): post-hoc: CC-SHAP (post-hoc) (1) > Simulatability (0); {ties} (1.5)" in page


def test_a_metric_with_no_rival_of_its_category_is_named_as_not_ranked():
    doc = document()
    doc["pairs"] = [r for r in doc["pairs"] if (r["metric"], r["variant"]) != ("cc_shap", "post_hoc")]
    page = comparison_page(outcomes([with_entries(doc)]))
    assert "- ours, D (factcheck): post-hoc: none ranked; CoT: Filler Tokens (4) > " in page
    assert "no other metric of its category on the same task): CC-SHAP (post-hoc), Simulatability" in page


def test_copeland_over_two_tasks_sums_each_tasks_own_and_a_measure_other_than_d_or_d_sym_is_refused():
    one, other = document("factcheck"), document("multihop", text_preferring_filler=True)
    both = outcomes([one, other])
    for measure in ("D", "D_sym"):
        apart = [copeland_ranking(outcomes([doc]), measure) for doc in (one, other)]
        assert copeland_ranking(both, measure) == {k: apart[0].get(k, 0) + apart[1].get(k, 0) for k in apart[0]}
    with pytest.raises(ValueError, match="D, D_sym"):
        copeland_ranking(both, "d")


def test_files_of_one_model_merge_by_task_and_a_repeated_pair_or_a_second_model_is_refused():
    merged = outcomes([document("multihop"), document("factcheck")])
    assert merged.tasks == ("factcheck", "multihop")
    with pytest.raises(ValueError, match="more than one results file"):
        outcomes([document(), document()])
    with pytest.raises(ValueError, match="one model"):
        outcomes([document(model="a"), document("multihop", model="b")])


def test_the_page_holds_the_papers_cells_ours_and_a_verdict_per_claim_and_measure():
    page = comparison_page(outcomes([document()]))
    assert "| factcheck | Filler Tokens | 0.828 | 0.893 | 1.000 [" in page
    assert page.count("| Filler Tokens is the most diagnostic CoT metric | factcheck |") == 2
    assert "; CoT: Filler Tokens (" in page.split("- ours, D_sym (factcheck): post-hoc: ")[1].splitlines()[0]


def test_the_page_quotes_the_runs_own_estimates_not_a_recomputation():
    doc = document()
    entry = next(e for e in doc["results"] if (e["metric"], e["variant"]) == (FILLER.metric, FILLER.variant))
    entry |= {"ci_low": 0.612, "d_sym_ci_low": 0.613}
    page = comparison_page(outcomes([doc]))
    assert "| 1.000 [0.612, 1.000] (n 30/30) | 1.000 [0.613, 1.000] (n 30/30) |" in page


def test_the_figure_has_a_panel_per_task_with_the_papers_values_beside_our_d():
    fig = comparison_figure(outcomes([document("multihop"), document("factcheck")]))
    assert [ax.get_xlabel().split(":")[0] for ax in fig.axes] == ["factcheck", "multihop"]
    factcheck = fig.axes[0]
    labels = [tick.get_text() for tick in factcheck.get_yticklabels()]
    qwen, gemma = factcheck.collections[-2:]
    assert [t.get_text() for t in factcheck.get_legend().get_texts()] == ["paper: qwen2.5-7b", "paper: gemma-2-9b-it"]
    marks = {labels[int(y)]: x for x, y in qwen.get_offsets()}
    assert marks["Filler Tokens · D (n 30/30)"] == 0.828 and "Filler Tokens · D_sym (n 30/30)" not in marks
    assert {labels[int(y)]: x for x, y in gemma.get_offsets()}["Simulatability · D (n 30/30)"] == 0.507
    assert len(marks) == len(labels) // 2 == len(TABLE_1)


def test_the_command_writes_the_page_and_refuses_what_is_not_a_results_file(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document()), encoding="utf-8")
    assert cli.main(["compare-paper", str(path), "--out", str(tmp_path / "page.md")]) == 0
    assert (tmp_path / "page.md").read_text(encoding="utf-8") == capsys.readouterr().out
    assert (tmp_path / "page.png").read_bytes().startswith(b"\x89PNG") and (tmp_path / "page.pdf").exists()
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    assert cli.main(["compare-paper", str(tmp_path / "bad.json")]) == 2
    assert "not a results file" in capsys.readouterr().err
    assert cli.main(["compare-paper", str(path), "--out", str(tmp_path / "no" / "such" / "page.md")]) == 2
    assert "cannot be written" in capsys.readouterr().err


def test_the_page_shows_the_edits_each_measure_rests_on_once_per_file_holding_the_task():
    doc = document("object_counting")
    doc["edit_reliability"] = [
        {"task": "object_counting", "value": 0.78, "ci_low": 0.689, "ci_high": 0.85, "n": 100}
        | {"counter": 0.8, "counter_ci_low": 0.711, "counter_ci_high": 0.867}
        | {"two_sided": 0.58, "two_sided_ci_low": 0.482, "two_sided_ci_high": 0.672}
        | {"no_edit": 0.51, "no_edit_ci_low": 0.413, "no_edit_ci_high": 0.606}
    ]
    older = document("factcheck")  # schema 1.6: no counter-edit figure
    older["edit_reliability"] = [{"task": "factcheck", "value": 1.0, "ci_low": 0.963, "ci_high": 1.0, "n": 100}]
    page = comparison_page(outcomes([older, doc]))
    assert "## The edits each measure rests on" in page
    assert (
        "| object_counting | 0.780 [0.689, 0.850] | 0.800 [0.711, 0.867] | 0.580 [0.482, 0.672] | "
        "0.510 [0.413, 0.606] | 100 |" in page
    )
    assert "| factcheck | 1.000 [0.963, 1.000] | n/a | n/a | n/a | 100 |" in page
    assert page.index("| factcheck | 1.000") < page.index("| object_counting | 0.780")
    assert "## The edits each measure rests on" not in comparison_page(outcomes([document()]))
    subset = {"model": {"name": "some-model"}, "pairs": [], "results": []}  # e.g. CC-SHAP on 20 of the pairs
    subset["edit_reliability"] = [doc["edit_reliability"][0] | {"n": 20}]
    page = comparison_page(outcomes([doc, subset]))
    assert page.count("| object_counting | 0.780 [0.689, 0.850] |") == 2 and "0.510 [0.413, 0.606] | 20 |" in page


def controls(task: str, text_decided: set[int]) -> list[dict]:
    """Per-pair controls in which the edits decide both ways, except on the `text_decided` pairs, where the faithful
    explanation wins under both edit sets."""
    out = []
    for k in range(N):
        counter = (1.0, 2.0) if k in text_decided else (2.0, 1.0)
        out.append(
            {"pair_id": f"{task}-{k:03d}", "task": task, "ppl_faithful": 1.0, "ppl_unfaithful": 2.0}
            | {"ppl_faithful_counter": counter[0], "ppl_unfaithful_counter": counter[1]}
            | {"ppl_faithful_no_edit": 1.0, "ppl_unfaithful_no_edit": 2.0}
            | {"answer": "3", "direct_answer": "3", "cot_answer": "3"}
        )
    return out


def test_a_figure_carried_by_the_pairs_the_text_decides_shows_on_the_edit_driven_pairs():
    doc = document("object_counting")
    text_decided = set(range(N // 2))
    for row in doc["pairs"]:  # Filler Tokens wins only where the text decides, and ties elsewhere
        if (row["metric"], row["variant"]) == (FILLER.metric, FILLER.variant):
            k = int(row["pair_id"].rsplit("-", 1)[1])
            row["d"] = row["d_swap"] = 1.0 if k in text_decided else 0.5
    doc = with_entries(doc) | {"pair_controls": controls("object_counting", text_decided)}
    results = outcomes([doc])
    assert results.edit_driven["object_counting"] == {f"object_counting-{k:03d}" for k in range(N // 2, N)}
    disagreeing = {"model": {"name": "some-model"}, "pairs": [], "results": []}  # another file's controls, one differs
    disagreeing["pair_controls"] = controls("object_counting", text_decided | {N - 1})
    both = outcomes([doc, disagreeing]).edit_driven["object_counting"]
    assert both == results.edit_driven["object_counting"] - {f"object_counting-{N - 1:03d}"}
    page = comparison_page(results)
    assert "## On the pairs whose edits decide both ways" in page
    line = next(x for x in page.splitlines() if x.startswith("| object_counting | Filler Tokens | 0.750 ["))
    assert line.count("0.500 [") == 2 and line.count("(n 15/15)") == 2, line
    assert "## On the pairs whose edits decide both ways" not in comparison_page(
        outcomes([with_entries(document()) | {"pair_controls": controls("factcheck", set())}])
    )
