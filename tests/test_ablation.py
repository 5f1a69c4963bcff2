"""The ablation page (issue 15): editor × explanation source on the same pairs, with the paired Wilcoxon tests only
between cells that differ in one factor, over the pairs both scored, Holm-adjusted; edit quality where an editor
writes weights, and each cell's cost."""

from __future__ import annotations

import numpy as np
import pytest

from recoe_causaldiag.ablation import AblationCell, comparisons, headline_by_pair, write_ablation

ROW = ("factcheck", "filler_tokens", "repeating-dots-binary")
QUALITY = {"task": "factcheck", "efficacy": 1.0, "counter_efficacy": 0.9, "specificity": 1.0, "n_failed": 1, "n": 12}


def cell(editor: str, explanations: str, d: list[float], seconds: float = 1.0) -> AblationCell:
    """A cell whose results hold one row with per-pair outcomes `d` (pairs p0, p1, ...)."""
    mean = float(np.mean(d))
    doc = {
        "model": {"name": "smollm2-135m-instruct"},
        "run_spec": {"tasks": ["factcheck"], "metrics": ["filler_tokens"], "limit": len(d), "seed": 0},
        "results": [
            {
                "task": ROW[0],
                "metric": ROW[1],
                "variant": ROW[2],
                "diagnosticity": mean,
                "ci_low": mean - 0.1,
                "ci_high": mean + 0.1,
                "d_sym": None,
            }
        ],
        "pairs": [
            {"pair_id": f"p{i}", "task": ROW[0], "metric": ROW[1], "variant": ROW[2]}
            | {"score_faithful": value, "score_unfaithful": 0.5, "d": value}
            for i, value in enumerate(d)
        ],
        "edit_reliability": [{"task": "factcheck", "value": 0.75, "counter": 0.625, "two_sided": 0.5, "no_edit": 0.5}],
        "edit_quality": []
        if editor == "ice"
        else [
            {
                "task": "factcheck",
                "efficacy": 1.0,
                "counter_efficacy": 0.9,
                "generalisation": 0.5,
                "specificity": 1.0,
                "n_failed": 1,
                "n": 12,
            }
        ],
        "generated_explanations": [] if explanations == "synthetic" else [{"task": "factcheck", "n": 12, "n_kept": 9}],
    }
    return AblationCell(editor, explanations, doc, seconds)


def test_only_cells_that_differ_in_one_factor_are_compared_on_shared_pairs():
    ones, zeros = [1.0] * 12, [0.0] * 12
    cells = [
        cell("ice", "synthetic", ones),
        cell("ice", "generated", zeros[:9]),
        cell("rome", "synthetic", zeros),
        cell("rome", "generated", zeros[:9]),
    ]
    tests = {(t.first, t.second): t for t in comparisons(cells)}
    assert set(tests) == {
        ("ice · synthetic", "ice · generated"),
        ("ice · synthetic", "rome · synthetic"),
        ("ice · generated", "rome · generated"),
        ("rome · synthetic", "rome · generated"),
    }
    assert tests["ice · synthetic", "ice · generated"].n == 9
    assert tests["ice · synthetic", "rome · synthetic"].p_value < 0.01
    assert tests["rome · synthetic", "rome · generated"].p_value == 1.0
    adjusted = sorted(t.p_adjusted for t in tests.values())
    assert adjusted[0] >= min(t.p_value for t in tests.values()) and adjusted[-1] == 1.0


def test_the_page_shows_every_cell_its_tests_edit_quality_and_cost(tmp_path):
    cells = [cell("ice", "synthetic", [1.0, 0.0, 1.0], 2.0), cell("rome", "synthetic", [1.0, 1.0, 1.0], 5.0)]
    page, figure = write_ablation(cells, tmp_path)
    text = page.read_text()
    assert "| factcheck | filler_tokens | repeating-dots-binary | 0.667 [0.567, 0.767] | 1.000 [0.900, 1.100] |" in text
    assert "| ice · synthetic | factcheck | n/a | n/a | n/a | n/a | n/a (in context) | 0.750 | 0.625 | 0.500 |" in text
    assert "| rome · synthetic | factcheck | 1.000 | 0.900 | 0.500 | 1.000 | 1 / 12 | 0.750 |" in text
    assert "| all | 7 |" in text and "tiny model" in text
    assert figure.stat().st_size > 0
    assert sorted(p.name for p in tmp_path.glob("results-*.json")) == [
        "results-ice-synthetic.json",
        "results-rome-synthetic.json",
    ]


@pytest.mark.parametrize(
    "argv, why", [(["--editors", "ice,sed"], "editor"), (["--explanations", "made-up"], "explanation")]
)
def test_ablate_refuses_unknown_cells_with_exit_2(tmp_path, capsys, argv, why):
    from recoe_causaldiag.cli import main

    assert main(["ablate", "--out", str(tmp_path), *argv]) == 2
    assert why in capsys.readouterr().err


def test_the_paired_outcomes_are_each_pairs_d_sym_where_the_roles_were_swapped():
    doc = cell("ice", "synthetic", [1.0, 1.0, 0.5]).document
    for row, d_swap in zip(doc["pairs"], [0.0, 1.0, None]):
        row["d_swap"] = d_swap
    by_pair = headline_by_pair(doc)[ROW]
    assert by_pair["p0"] == 0.5 and by_pair["p1"] == 1.0 and np.isnan(by_pair["p2"])
    assert headline_by_pair(cell("ice", "synthetic", [1.0, 0.0]).document)[ROW] == {"p0": 1.0, "p1": 0.0}
