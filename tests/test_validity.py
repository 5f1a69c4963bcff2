"""The validity report: each check judges what it claims, and `causaldiag validity` writes the page end to end."""

import json
import subprocess
import sys

import pytest

from recoe_causaldiag.artifact_probes import FAIL, PASS, TOO_FEW, Audit, ProbeResult
from recoe_causaldiag.tasks import DATASET_VERSION
from recoe_causaldiag.validity import BROKEN, HOLDS, INCONCLUSIVE, UNJUDGED, ValidityReport, probe_check, task_checks


def _share(name, value, low, high):
    return {name: value, f"{name}_ci_low": low, f"{name}_ci_high": high, f"{name}_n": 40}


def _result(metric, d_sym, low, high):
    return {
        "task": "factcheck",
        "metric": metric,
        "variant": "binary",
        "diagnosticity": d_sym,
        "ci_low": low,
        "ci_high": high,
        "d_sym": d_sym,
        "d_sym_ci_low": low,
        "d_sym_ci_high": high,
    }


def _doc(random_ci=(0.40, 0.62), no_edit=(0.5, 0.35, 0.65), counter=(0.75, 0.6, 0.86), two_sided=(0.6, 0.45, 0.74)):
    """A results document of one task whose figures are chosen by the test."""
    return {
        "model": {"name": "smollm2-135m-instruct"},
        "run_spec": {"limit": 40, "seed": 0},
        "dataset_versions": {"factcheck": DATASET_VERSION},
        "edit_reliability": [
            {
                "task": "factcheck",
                "value": 0.8,
                "ci_low": 0.66,
                "ci_high": 0.9,
                "n": 40,
                **_share("counter", *counter),
                **_share("two_sided", *two_sided),
                **_share("no_edit", *no_edit),
            }
        ],
        "accuracy": [{"task": "factcheck", **_share("direct", 0.45, 0.3, 0.6), **_share("cot", 0.9, 0.77, 0.96)}],
        "results": [_result("oracle", 1.0, 0.91, 1.0), _result("random_baseline", 0.5, *random_ci)],
    }


def _probe(d, low, high, verdict, name="length"):
    return ProbeResult("factcheck", name, d, low, high, 200, 200, verdict)


def _audit(*results):
    return Audit("factcheck", results, {}, {})


def _by_what(checks):
    return {c.what.split(":")[0].split(" (")[0]: c for c in checks}


def test_every_check_judges_its_own_figure():
    checks = _by_what(task_checks("factcheck", _doc(), _audit(_probe(0.52, 0.45, 0.59, PASS)), chance=0.5))
    assert checks["artifact probes"].mark == HOLDS
    assert checks["no-edit preference"].mark == HOLDS
    assert checks["edit reliability, one-sided"].mark == HOLDS
    assert checks["edit reliability, counter edits"].mark == HOLDS
    assert checks["edit reliability, two-sided"].mark == HOLDS
    assert checks["accuracy of the edited model, direct"].mark == INCONCLUSIVE, "CI 0.30-0.60 straddles chance"
    assert checks["accuracy of the edited model, CoT"].mark == HOLDS
    assert checks["oracle"].mark == HOLDS and checks["random_baseline"].mark == HOLDS
    assert {c.what for c in task_checks("factcheck", _doc(), None, 0.5)} >= {
        "oracle (binary) D_sym",
        "random_baseline (binary) D_sym",
    }


def test_a_text_preference_a_biased_random_scorer_and_a_failing_probe_are_caught():
    doc = _doc(
        random_ci=(0.52, 0.7), no_edit=(0.9, 0.77, 0.96), counter=(0.12, 0.05, 0.26), two_sided=(0.1, 0.04, 0.23)
    )
    audit = _audit(_probe(0.52, 0.45, 0.59, PASS), _probe(1.0, 0.99, 1.0, FAIL, "tokens[x]"))
    checks = _by_what(task_checks("factcheck", doc, audit, chance=0.5))
    assert checks["artifact probes"].mark == BROKEN and checks["artifact probes"].value == 1.0
    assert "tokens[x]" in next(c.what for c in task_checks("factcheck", doc, audit, 0.5) if c.what.startswith("art"))
    assert checks["no-edit preference"].mark == BROKEN
    assert checks["edit reliability, counter edits"].mark == BROKEN
    assert checks["edit reliability, two-sided"].mark == BROKEN
    assert checks["random_baseline"].mark == BROKEN


def test_missing_figures_and_too_few_pairs_are_not_judged():
    doc = _doc()
    for name in ("counter", "two_sided"):  # roles not swapped, or (counter) a results file before schema 1.7
        doc["edit_reliability"][0] |= {name: None, f"{name}_ci_low": None, f"{name}_ci_high": None}
    checks = _by_what(task_checks("factcheck", doc, None, chance=0.5))
    assert checks["edit reliability, two-sided"].mark == UNJUDGED and "artifact probes" not in checks
    assert checks["edit reliability, counter edits"].mark == UNJUDGED
    older = _doc()  # a results file written before schema 1.7 has no counter-edit keys at all
    older["edit_reliability"][0] = {
        k: v for k, v in older["edit_reliability"][0].items() if not k.startswith("counter")
    }
    assert (
        _by_what(task_checks("factcheck", older, None, chance=0.5))["edit reliability, counter edits"].mark == UNJUDGED
    )
    assert probe_check(_audit(_probe(0.5, 0.3, 0.7, TOO_FEW)), "factcheck").mark == UNJUDGED
    mixed = probe_check(_audit(_probe(0.5, 0.3, 0.7, TOO_FEW, "numbers"), _probe(0.52, 0.45, 0.59, PASS)), "factcheck")
    assert mixed.mark == HOLDS and "1 on too few pairs to judge" in mixed.what


def test_the_page_counts_what_holds_and_the_plot_is_written(tmp_path):
    report = ValidityReport(_doc(), {"factcheck": _audit(_probe(0.52, 0.45, 0.59, PASS))}, {"factcheck": 0.5})
    page = report.markdown()
    assert page.startswith("# Validity report: `smollm2-135m-instruct`")
    assert (
        f"9 checks on 1 task (40 pairs per task, seed 0, datasets {DATASET_VERSION}): 8 hold ✔, 0 do not ✘, "
        "1 inconclusive" in page
    )
    assert "tiny model" in page
    assert page.count("| factcheck |") == 9 and "| factcheck | no-edit preference | 0.500 [0.350, 0.650] |" in page
    report.plot(tmp_path / "v.png")
    assert (tmp_path / "v.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # the whole command on every task: minutes on 2 cores, run by `make test-slow`
def test_validity_command_on_the_default_model(tmp_path, every_dataset_dir):
    out = tmp_path / "validity"
    done = subprocess.run(
        [sys.executable, "-m", "recoe_causaldiag.cli", "validity", "--limit", "3", "--no-progress"]
        + ["--data-dir", str(every_dataset_dir), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    page = (out / "validity.md").read_text()
    doc = json.loads((out / "results.json").read_text())
    assert (out / "validity.png").is_file() and (out / "results.md").is_file()
    tasks = [e["task"] for e in doc["edit_reliability"]]
    assert len(tasks) == 10 and {r["metric"] for r in doc["results"]} == {"oracle", "random_baseline"}
    for task in tasks:
        assert f"| {task} | oracle (overlap) D" in page and f"| {task} | no-edit preference |" in page
    assert "| analogy | oracle (overlap) D |" in page and "| factcheck | oracle (overlap) D_sym | 1.000" in page
