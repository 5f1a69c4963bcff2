"""Every `evaluate` module: complete folder, loads offline, and its card's example runs."""

import math
from pathlib import Path

import pytest

from recoe_causaldiag.metrics import METRICS

from cards import card_examples, card_namespace

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.name for p in (ROOT / "metrics_evaluate").iterdir() if p.is_dir() and not p.name.startswith("_"))
SECTIONS = ("## Metric Description", "## How to Use", "### Inputs", "### Output Values", "## Limitations and Bias",
            "## Citation")


def test_every_registered_metric_is_one_library_file_one_test_file_one_module():
    for name in METRICS.names():
        assert name in MODULES, f"metric {name} has no metrics_evaluate/{name}/"
        assert (ROOT / "tests" / f"test_metric_{name}.py").is_file(), f"metric {name} has no test file"
        assert METRICS.get(name).__module__.startswith("recoe_causaldiag.metrics.")


@pytest.mark.parametrize("name", MODULES)
def test_module_folder_is_complete(name):
    folder = ROOT / "metrics_evaluate" / name
    assert {f"{name}.py", "README.md", "app.py", "requirements.txt"} <= {p.name for p in folder.iterdir()}
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "\ntitle: " in card and "\nsdk: gradio" in card and "app_file: app.py" in card
    for section in SECTIONS:
        assert section in card, f"{name} card lacks {section}"
    assert card_examples(name), f"{name} card has no python example"
    assert f'evaluate.load("{name}")' in (folder / "app.py").read_text()


@pytest.mark.parametrize("name", MODULES)
def test_card_example_runs_offline(name):
    results = card_namespace(name)["results"]
    assert isinstance(results, dict) and results


def test_diagnosticity_module_interface(monkeypatch):
    import evaluate

    module = evaluate.load(str(ROOT / "metrics_evaluate" / "diagnosticity"))
    results = module.compute(faithful_scores=[0.9, 0.4, 0.7, math.nan], unfaithful_scores=[0.1, 0.4, 0.2, 0.3])
    assert set(results) == {"diagnosticity", "ci_low", "ci_high", "p_value", "n_valid", "n_nan"}
    assert results["diagnosticity"] == pytest.approx(2.5 / 3) and results["n_valid"] == 3 and results["n_nan"] == 1
    with pytest.raises(ValueError, match="unfaithful_scores"):
        module.compute(faithful_scores=[0.1, 0.2], unfaithful_scores=[0.1])


def test_model_module_input_errors_name_the_argument_and_index():
    from recoe_causaldiag.evaluate_bridge import check_model_inputs

    good = dict(question=["Q1?", "Q2?"], choices=[["Yes", "No"], ["Yes", "No"]], edits=[["F."], []],
                explanations=["E1.", "E2."])
    assert len(check_model_inputs(**good)) == 2
    with pytest.raises(ValueError, match=r"explanations\[1\] is empty"):
        check_model_inputs(**{**good, "explanations": ["E1.", " "]})
    with pytest.raises(ValueError, match=r"choices\[1\] has 3 labels"):
        check_model_inputs(**{**good, "choices": [["Yes", "No"], ["A", "B", "C"]]})
    with pytest.raises(ValueError, match="edits has 1 items"):
        check_model_inputs(**{**good, "edits": [["F."]]})
