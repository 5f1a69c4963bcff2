"""Every `evaluate` module: generated from the library and in sync, complete folder, loads offline, and its
card's example runs."""

import contextlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cards import card_blocks, card_examples, card_namespace, card_run

from recoe_causaldiag import hub_modules
from recoe_causaldiag.cli import main
from recoe_causaldiag.evaluate_modules import (
    GENERATED_FILES,
    MODEL_EXAMPLE,
    card_skeleton,
    module_registry,
    out_of_sync,
)
from recoe_causaldiag.hub_modules import install_hub_modules
from recoe_causaldiag.metrics import METRICS, Instance
from recoe_causaldiag.metrics.random_baseline import RandomBaseline
from recoe_causaldiag.statistics import diagnosticity

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.name for p in (ROOT / "metrics_evaluate").iterdir() if p.is_dir() and not p.name.startswith("_"))
SECTIONS = (
    "## Metric Description",
    "## How to Use",
    "### Inputs",
    "### Output Values",
    "## Limitations and Bias",
    "## Citation",
)


_NUMBER = re.compile(r"-?\d+\.\d+")
MODEL_SCORE_TOLERANCE = 2e-3
"""How far a printed model score (rounded to 3 decimals) may be from the card's: float32 on another CPU."""


def same_output(printed: str, shown: str) -> bool:
    """The card's output, its text exact and each decimal number within `MODEL_SCORE_TOLERANCE`."""
    numbers = [float(x) for x in _NUMBER.findall(printed)], [float(x) for x in _NUMBER.findall(shown)]
    return _NUMBER.sub("#", printed) == _NUMBER.sub("#", shown) and all(
        abs(a - b) <= MODEL_SCORE_TOLERANCE for a, b in zip(*numbers, strict=True)
    )


def test_outputs_compare_text_exactly_and_scores_within_the_tolerance():
    assert same_output("caf [0.044]\n", "caf [0.045]\n") and same_output("v [nan]\n", "v [nan]\n")
    assert not same_output("caf [0.044]\n", "caf [0.047]\n") and not same_output("caf [nan]\n", "caf [0.044]\n")
    assert not same_output("caf [0.044, 0.1]\n", "caf [0.044]\n") and not same_output("cf [0.044]\n", "caf [0.044]\n")


@pytest.mark.parametrize("name", MODULES)
def test_a_cards_example_prints_the_output_the_card_shows(name):
    documented = [example.documented_output for example in card_blocks(name)]
    assert any(documented), f"{name}: the card shows no output"
    for shown, printed in zip(documented, card_run(name)[1], strict=True):
        assert shown is None or same_output(printed, shown), f"{name}: printed {printed!r}, the card shows {shown!r}"


PAPER_TABLE_1 = ("cc_shap", "simulatability", "early_answering", "filler_tokens", "adding_mistakes", "paraphrasing")


@pytest.mark.parametrize("name", PAPER_TABLE_1)
def test_the_cards_of_the_papers_metrics_give_the_papers_values(name):
    card = (ROOT / "metrics_evaluate" / name / "README.md").read_text(encoding="utf-8")
    section = card.split("## Values from Popular Papers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| post-hoc") or line.startswith("| CoT")]
    assert rows and all(len(re.findall(r"\b0\.\d{3}\*?", row)) == 8 for row in rows), rows
    assert "Table 1" in section and "qwen2.5-7b" in section


def test_every_registered_metric_is_one_library_file_one_test_file_one_module():
    for name in METRICS.names():
        assert name in MODULES, f"metric {name} has no folder: run `causaldiag evaluate-module {name}`"
        assert (ROOT / "tests" / f"test_metric_{name}.py").is_file(), f"metric {name} has no test file"
        assert METRICS.get(name).__module__.startswith("recoe_causaldiag.metrics.")
    assert set(MODULES) == set(module_registry().names()), "a folder in metrics_evaluate/ is no module of the library"


@pytest.mark.parametrize("name", module_registry().names())
def test_generated_files_are_in_sync_with_the_library(name):
    stale = out_of_sync(name, ROOT / "metrics_evaluate")
    assert not stale, f"{[str(p.relative_to(ROOT)) for p in stale]}: run `causaldiag evaluate-module {name}`"


def test_the_command_writes_generated_files_keeps_cards_and_checks(tmp_path, capsys):
    assert main(["evaluate-module", "filler_tokens,diagnosticity", "--out", str(tmp_path)]) == 0
    for name in ("filler_tokens", "diagnosticity"):
        for file in (f"{name}.py", *GENERATED_FILES):
            assert (tmp_path / name / file).read_text() == (ROOT / "metrics_evaluate" / name / file).read_text()
    card = tmp_path / "filler_tokens" / "README.md"
    card.write_text("a hand-written card")
    (tmp_path / "diagnosticity" / "app.py").write_text("edited by hand")
    assert main(["evaluate-module", "filler_tokens", "--out", str(tmp_path)]) == 0
    assert card.read_text() == "a hand-written card"
    capsys.readouterr()
    assert main(["evaluate-module", "all", "--out", str(tmp_path), "--check"]) == 1
    stale = set(re.findall(r"out of sync: (\S+)", capsys.readouterr().out))
    assert str(tmp_path / "diagnosticity" / "app.py") in stale and str(tmp_path / "oracle" / "oracle.py") in stale
    assert not any(path.startswith(str(tmp_path / "filler_tokens")) for path in stale)
    assert main(["evaluate-module", "filer_tokens", "--check"]) == 2


def test_a_card_skeleton_has_every_section_and_a_runnable_example(tmp_path):
    assert main(["evaluate-module", "oracle", "--out", str(tmp_path / "metrics_evaluate")]) == 0
    card = (tmp_path / "metrics_evaluate" / "oracle" / "README.md").read_text()
    assert card == card_skeleton("oracle") and card.startswith("---\n") and "app_file: app.py" in card
    assert all(section in card for section in SECTIONS)
    namespace: dict = {}
    hub_modules.ensure_hub_modules()
    with contextlib.chdir(tmp_path):
        exec(re.findall(r"```python\n(.*?)```", card, re.S)[0], namespace)
    assert namespace["results"]["variant"] == "overlap" and len(namespace["results"]["scores"]) == 1


@pytest.mark.parametrize("name", MODULES)
def test_module_folder_is_complete(name):
    folder = ROOT / "metrics_evaluate" / name
    assert {f"{name}.py", "README.md", "app.py", "requirements.txt"} <= {p.name for p in folder.iterdir()}
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "\ntitle: " in card and "\nsdk: gradio" in card and "app_file: app.py" in card
    for section in SECTIONS:
        assert section in card, f"{name} card lacks {section}"
    assert card_examples(name), f"{name} card has no python example"
    assert f'evaluate.load(str(HERE / "{name}.py"))' in (folder / "app.py").read_text()
    assert f'evaluate.load("causal-diagnosticity/{name}")' in card


def test_no_module_file_shadows_a_standard_library_module():
    """A Space runs `python app.py` with its folder first on `sys.path`: a `random.py` there replaces Python's."""
    for folder in (ROOT / "metrics_evaluate").iterdir():
        for path in folder.glob("*.py"):
            assert path.stem not in sys.stdlib_module_names, f"{path} shadows the standard library's {path.stem}"


def test_every_space_app_launches_and_serves_its_module():
    """Each `app.py` run as a Space runs it (its folder first on `sys.path`), served for real; two modules that
    need no model compute their example row through the page's API, as the library computes it."""
    apps = sorted(str(p) for p in (ROOT / "metrics_evaluate").glob("*/app.py"))
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "space_apps.py"), *apps, "--compute", "diagnosticity", "random_baseline"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    served = {row["app"]: row for row in rows}
    assert set(served) == set(MODULES) and all(row["status"] == 200 for row in served.values())
    example = {key: values[0] for key, values in MODEL_EXAMPLE.items()}
    instance = Instance(
        example["question"], tuple(example["choices"]), tuple(example["edits"]), example["explanations"]
    )
    assert served["random_baseline"]["result"]["scores"] == list(
        RandomBaseline().score_instances([instance])["uniform"]
    )
    expected = diagnosticity([0.9, 0.4, 0.7], [0.1, 0.4, 0.2])
    assert served["diagnosticity"]["result"]["diagnosticity"] == pytest.approx(expected.value)
    assert served["diagnosticity"]["result"]["ci_low"] == pytest.approx(expected.ci_low)


@pytest.mark.slow  # a Space's own process, served until it answers: half a minute, run by `make test-slow`
def test_a_space_folder_serves_its_page_as_the_hub_runs_it(tmp_path):
    """`python app.py` in a copy of the module's folder, as a Space runs it: the page answers over HTTP."""
    space = shutil.copytree(ROOT / "metrics_evaluate" / "random_baseline", tmp_path / "space")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False"}
    server = subprocess.Popen([sys.executable, "app.py"], cwd=space, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline, status = time.monotonic() + 300, None
        while status is None and server.poll() is None and time.monotonic() < deadline:
            try:
                status = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).status
            except OSError:
                time.sleep(1)
        assert status == 200, server.stderr.read() if server.poll() is not None else "no answer in 300 s"
    finally:
        server.terminate()
        server.wait(timeout=60)


def test_hub_ids_load_offline_from_any_folder_once_installed(tmp_path):
    """After `causaldiag install-modules` into an empty module cache, every `causal-diagnosticity/<name>` loads
    from a folder outside the repository with the Hub off, and computes."""
    script = (
        "import json, sys\n"
        "from recoe_causaldiag.cli import main\n"
        "assert main(['install-modules']) == 0\n"
        "import evaluate\n"
        "names = sys.argv[1:]\n"
        "modules = {name: evaluate.load('causal-diagnosticity/' + name) for name in names}\n"
        "result = modules['diagnosticity'].compute(faithful_scores=[0.9, 0.2], unfaithful_scores=[0.1, 0.4])\n"
        "print(json.dumps({'loaded': sorted(m.name for m in modules.values()), 'd': result['diagnosticity']}))\n"
    )
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", script, *MODULES], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "evaluate modules in" in done.stdout
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome == {"loaded": sorted(MODULES), "d": 0.5}
    cached = tmp_path / "modules" / "evaluate_modules" / "metrics"
    assert sorted(p.name for p in cached.iterdir() if p.is_dir()) == sorted(
        f"causal-diagnosticity--{m}" for m in MODULES
    )


def test_modules_are_reinstalled_only_when_the_library_changed(tmp_path, monkeypatch):
    from evaluate.loading import CachedEvaluationModuleFactory

    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path))
    installs = []
    monkeypatch.setattr(hub_modules, "install_hub_modules", lambda: installs.append(1) or original())
    original = install_hub_modules
    hub_modules.ensure_hub_modules()
    hub_modules.ensure_hub_modules()
    assert installs == [1] and hub_modules.installed_digest() == hub_modules.library_digest()
    stamp = hub_modules.evaluate_metrics_cache() / hub_modules.STAMP
    stamp.write_text(stamp.read_text().replace(hub_modules.library_digest(), "an older library"))
    hub_modules.ensure_hub_modules()
    assert installs == [1, 1]
    found = CachedEvaluationModuleFactory(
        "causal-diagnosticity--oracle", dynamic_modules_path=str(tmp_path / "evaluate_modules")
    ).get_module()
    assert found.module_path.endswith(".oracle") and (tmp_path / "evaluate_modules" / "metrics").is_dir()


@pytest.mark.parametrize("name", MODULES)
def test_card_example_runs_offline(name):
    results = card_namespace(name)["results"]
    assert isinstance(results, dict) and results


def test_diagnosticity_module_interface(monkeypatch):
    import evaluate

    module = evaluate.load(str(ROOT / "metrics_evaluate" / "diagnosticity"))
    results = module.compute(faithful_scores=[0.9, 0.4, 0.7, math.nan], unfaithful_scores=[0.1, 0.4, 0.2, 0.3])
    assert set(results) == {"diagnosticity", "ci_low", "ci_high", "p_value", "p_ttest", "coverage", "n_valid", "n_nan"}
    assert results["diagnosticity"] == pytest.approx(2.5 / 3) and results["n_valid"] == 3 and results["n_nan"] == 1
    with pytest.raises(ValueError, match="unfaithful_scores"):
        module.compute(faithful_scores=[0.1, 0.2], unfaithful_scores=[0.1])


def test_model_module_input_errors_name_the_argument_and_index():
    from recoe_causaldiag.evaluate_bridge import check_model_inputs

    good = dict(
        question=["Q1?", "Q2?"], choices=[["Yes", "No"], ["Yes", "No"]], edits=[["F."], []], explanations=["E1.", "E2."]
    )
    assert len(check_model_inputs(**good)) == 2
    with pytest.raises(ValueError, match=r"explanations\[1\] is empty"):
        check_model_inputs(**{**good, "explanations": ["E1.", " "]})
    with pytest.raises(ValueError, match=r"choices\[1\] has 3 labels"):
        check_model_inputs(**{**good, "choices": [["Yes", "No"], ["A", "B", "C"]]})
    with pytest.raises(ValueError, match="edits has 1 items"):
        check_model_inputs(**{**good, "edits": [["F."]]})
    with pytest.raises(ValueError, match="tasks has 1 items"):
        check_model_inputs(**good, tasks=["factcheck"])
    with pytest.raises(ValueError, match=r"tasks\[1\] is 'factchek'"):
        check_model_inputs(**good, tasks=["factcheck", "factchek"])
    with pytest.raises(ValueError, match=r"metadata\[0\] is not a JSON object"):
        check_model_inputs(**good, metadata=["[]", "{}"])


def test_model_module_inputs_carry_what_the_runner_instances_carry():
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.evaluate_bridge import check_model_inputs

    good = dict(
        question=["Q1?", "Q2?"], choices=[["Yes", "No"], ["A", "B"]], edits=[["F."], []], explanations=["E1.", "E2."]
    )
    assert check_model_inputs(**good)[1] == Instance("Q2?", ("A", "B"), (), "E2.")
    given = check_model_inputs(**good, tasks=["factcheck", None], metadata=['{"k": 1}', None], flip_edits=[["G."], []])
    assert given == [
        Instance("Q1?", ("Yes", "No"), ("F.",), "E1.", "factcheck", ("G.",), '{"k": 1}'),
        Instance("Q2?", ("A", "B"), (), "E2."),
    ]
    stored = json.dumps({"cluster": "c", "check_json": '{"op": ">"}', "source": {"url": None, "origin": "o"}})
    (read,) = check_model_inputs(**{k: v[:1] for k, v in good.items()}, metadata=[stored])
    assert json.loads(read.metadata) == {"check": {"op": ">"}, "cluster": "c", "source": {"origin": "o"}}, (
        "a 1.4.0 row's metadata struct, through json.dumps, reads as the record's metadata"
    )


def test_model_module_options_are_the_metric_evaluate_options():
    from recoe_causaldiag.evaluate_bridge import compute_model_metric

    inputs = dict(question=["Q?"], choices=[["Yes", "No"]], edits=[["F."]], explanations=["F."])
    assert compute_model_metric("random_baseline", **inputs, seed=3)["variant"] == "uniform"
    with pytest.raises(TypeError, match="random_baseline takes no option batch_size"):
        compute_model_metric("random_baseline", **inputs, batch_size=2)
    with pytest.raises(ValueError, match="variant 'bogus' is not one of"):
        compute_model_metric("cc_shap", **inputs, variant="bogus")
