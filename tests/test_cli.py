"""The `causaldiag` command as a user runs it, including the end-to-end run on the real default model."""

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import datasets
import numpy as np
import pytest

from recoe_causaldiag import __version__
from recoe_causaldiag.cli import main
from recoe_causaldiag.tasks import DATASET_VERSION

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
ESTIMATE_KEYS = {"ci_low", "ci_high", "p_value", "p_adjusted", "p_ttest", "coverage", "n", "n_valid", "n_nan"}
SPEC_RESULT_KEYS = (
    {"task", "metric", "variant", "diagnosticity", "seconds", "d_swap", "d_sym"}
    | ESTIMATE_KEYS
    | {f"{direction}_{key}" for direction in ("d_swap", "d_sym") for key in ESTIMATE_KEYS}
)


def causaldiag(*args, cwd=None):
    """The command in a process of its own, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "recoe_causaldiag.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900
    )


@pytest.fixture
def model_never_loads(monkeypatch):
    """Any load of a model fails the test: for what a command must refuse before its model loads."""

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the command's input was checked")

    for module in ("runner", "scoring", "tasks.recoe.evaluation"):
        monkeypatch.setattr(f"recoe_causaldiag.{module}.load_model", no_loading)


def in_process(capsys, monkeypatch, *args, cwd=None):
    """The command run by `main` in this process (the heavy imports paid once per test session), with what a
    process would have returned: its exit code, stdout and stderr."""
    if cwd is not None:
        monkeypatch.chdir(cwd)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["run", "--metric", "filer_tokens", "--out", "x.json"],
            "unknown metric 'filer_tokens'; did you mean 'filler_tokens'?",
        ),
        (["run", "--task", "factchek", "--out", "x.json"], "unknown task 'factchek'; did you mean 'factcheck'?"),
        (["run", "--model", "smolm2", "--out", "x.json"], "unknown model 'smolm2'"),
        (["run", "--editor", "mend", "--out", "x.json"], "unknown editor 'mend'"),
        (["run", "--precision", "int3", "--out", "x.json"], "unknown precision 'int3'"),
        (["build", "factchek", "--out", "x"], "unknown dataset 'factchek'"),
    ],
)
def test_user_mistakes_get_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, message):
    done = in_process(capsys, monkeypatch, *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr and "choices:" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_mistake_is_one_line_and_exit_2_in_a_process_of_its_own(tmp_path):
    done = causaldiag("run", "--metric", "filer_tokens", "--out", "x.json", cwd=tmp_path)
    assert done.returncode == 2 and "did you mean 'filler_tokens'?" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_ls_lists_datasets_metrics_models():
    done = causaldiag("ls")
    assert done.returncode == 0
    for name in ("factcheck", "filler_tokens", "early_answering", "smollm2-135m-instruct", "gemma-3-270m"):
        assert name in done.stdout


def test_build_writes_hub_layout(tmp_path, capsys, monkeypatch):
    done = in_process(
        capsys, monkeypatch, "build", "factcheck", "--out", str(tmp_path), "--version", "1.2.3", "--seed", "3"
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "factcheck" / "MANIFEST.json").read_text())
    assert manifest["version"] == "1.2.3" and manifest["seed"] == 3
    assert datasets.load_dataset(str(tmp_path / "factcheck"), split="test").num_rows == manifest["num_rows"]["default"]


def test_build_from_counterfact_json(tmp_path, capsys, monkeypatch):
    done = in_process(
        capsys,
        monkeypatch,
        "build",
        "factcheck",
        "--out",
        str(tmp_path),
        "--counterfact",
        str(FIXTURES / "counterfact_sample.json"),
    )
    assert done.returncode == 0, done.stderr
    assert datasets.load_dataset(str(tmp_path / "factcheck"), split="test").num_rows == 4


def test_bad_counterfact_file_is_one_line_error(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = in_process(capsys, monkeypatch, "build", "factcheck", "--out", str(tmp_path), "--counterfact", str(bad))
    assert done.returncode == 1 and "cannot read COUNTERFACT JSON" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow  # the real model end to end: minutes on 2 cores, run by `make test-slow`
def test_run_on_the_default_model_end_to_end(tmp_path):
    out = tmp_path / "r.json"
    done = causaldiag(
        "run",
        "--model",
        "smollm2-135m-instruct",
        "--task",
        "factcheck",
        "--metric",
        "filler_tokens,early_answering",
        "--limit",
        "8",
        "--data-dir",
        str(tmp_path / "data"),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert {
        "schema_version",
        "model",
        "editor",
        "explanations",
        "dataset_versions",
        "created_at",
        "results",
        "edit_reliability",
        "accuracy",
        "pairs",
        "pair_controls",
    } <= set(doc)
    assert set(doc["model"]) == {"name", "revision", "dtype", "device", "parameters"}
    assert doc["model"]["parameters"] == 134_515_008
    assert doc["model"]["name"] == "smollm2-135m-instruct" and doc["dataset_versions"] == {"factcheck": DATASET_VERSION}
    assert len(doc["results"]) == 20 + 4
    d_values = defaultdict(list)
    for row in doc["pairs"]:
        d_values[(row["task"], row["metric"], row["variant"])].append(row)
        for score, d in (("score_faithful", "d"), ("score_faithful_swap", "d_swap")):
            if row[d] is not None:
                f, u = row[score], row[score.replace("faithful", "unfaithful")]
                assert row[d] == (1.0 if f > u else 0.5 if f == u else 0.0)
    for result in doc["results"]:
        assert set(result) == SPEC_RESULT_KEYS
        rows = d_values[(result["task"], result["metric"], result["variant"])]
        d = [r["d"] for r in rows if r["d"] is not None]
        assert result["n"] == 8 and result["n_valid"] == len(d) and result["n_nan"] == 8 - len(d)
        assert result["diagnosticity"] == pytest.approx(np.mean(d))
        assert result["ci_low"] <= result["diagnosticity"] <= result["ci_high"]
        d_swap = [r["d_swap"] for r in rows if r["d_swap"] is not None]
        d_sym = [(r["d"] + r["d_swap"]) / 2 for r in rows if None not in (r["d"], r["d_swap"])]
        assert result["d_swap_n_valid"] == len(d_swap) and result["d_sym_n_valid"] == len(d_sym)
        if d_sym:
            assert result["d_swap"] == pytest.approx(np.mean(d_swap))
            assert result["d_sym"] == pytest.approx(np.mean(d_sym))
    (reliability,), (accuracy,) = doc["edit_reliability"], doc["accuracy"]
    controls = doc["pair_controls"]
    assert reliability["task"] == accuracy["task"] == "factcheck" and reliability["n"] == len(controls) == 8
    faithful_preferred = [c["ppl_faithful"] < c["ppl_unfaithful"] for c in controls]
    assert reliability["value"] == np.mean(faithful_preferred)
    counter_preferred = [c["ppl_unfaithful_counter"] < c["ppl_faithful_counter"] for c in controls]
    assert reliability["counter"] == np.mean(counter_preferred)
    assert reliability["two_sided"] == np.mean([f and c for f, c in zip(faithful_preferred, counter_preferred)])
    no_edit_preferred = [c["ppl_faithful_no_edit"] < c["ppl_unfaithful_no_edit"] for c in controls]
    assert reliability["no_edit"] == np.mean(no_edit_preferred)
    assert accuracy["direct"] == np.mean([c["direct_answer"] == c["answer"] for c in controls])
    assert accuracy["cot"] == np.mean([c["cot_answer"] == c["answer"] for c in controls])
    table = out.with_suffix(".md").read_text()
    assert "| factcheck | filler_tokens | repeating-dots-continuous |" in table and "tiny model" in table
    assert (
        "| task | edit reliability | 95% CI | counter edits | 95% CI | two-sided |" in table
        and "| task | accuracy direct |" in table
    )
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_publish_dry_run_lists_repos_files_and_tags_and_leaves_nothing_behind(tmp_path, capsys, monkeypatch):
    data_dir, scratch = tmp_path / "datasets", tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    done = in_process(capsys, monkeypatch, "publish", "factcheck", "--dry-run", "--data-dir", str(data_dir))
    assert done.returncode == 0, done.stderr
    assert f"[dry run] would upload dataset repo causal-diagnosticity/factcheck (tag v{DATASET_VERSION})" in done.stdout
    assert "data/test-00000-of-00001.parquet" in done.stdout and "bytes" in done.stdout
    assert not data_dir.exists() and not list(scratch.iterdir())


def test_publish_metrics_dry_run_lists_each_space_and_refuses_stale_modules(tmp_path, capsys, monkeypatch):
    done = in_process(
        capsys, monkeypatch, "publish-metrics", "--dry-run", "--modules-dir", str(ROOT / "metrics_evaluate")
    )
    assert done.returncode == 0, done.stderr
    assert f"[dry run] would upload space repo causal-diagnosticity/random_baseline (tag v{__version__})" in done.stdout
    assert "random_baseline.py" in done.stdout and "app.py" in done.stdout and "README.md" in done.stdout
    stale = tmp_path / "modules"
    shutil.copytree(ROOT / "metrics_evaluate", stale)
    (stale / "oracle" / "app.py").write_text("import evaluate\n")
    done = in_process(capsys, monkeypatch, "publish-metrics", "oracle", "--dry-run", "--modules-dir", str(stale))
    assert done.returncode == 2 and "oracle/app.py differs from what the library generates" in done.stderr


def test_built_datasets_are_readable_as_the_users_umask_allows(tmp_path, capsys, monkeypatch):
    previous = os.umask(0o022)
    try:
        done = in_process(capsys, monkeypatch, "build", "multihop", "--out", str(tmp_path))
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "multihop"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "MANIFEST.json").stat().st_mode) == 0o644


def test_publish_without_dry_run_offline_is_one_line_error(tmp_path, capsys, monkeypatch):
    for token in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(token, raising=False)
    done = in_process(capsys, monkeypatch, "publish", "factcheck", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert done.stderr.startswith("causaldiag: error:") and "Traceback" not in done.stderr


@pytest.mark.slow  # the real model end to end: minutes on 2 cores, run by `make test-slow`
def test_reliability_command_writes_per_task_reliability_and_no_progress_silences_every_bar(tmp_path):
    out = tmp_path / "rel.json"
    done = causaldiag(
        "reliability",
        "--task",
        "factcheck,multihop",
        "--limit",
        "4",
        "--data-dir",
        str(tmp_path / "d"),
        "--out",
        str(out),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert "%|" not in done.stderr, "a progress bar was drawn (the model's loading, a dataset's build, the run's own)"
    doc = json.loads(out.read_text())
    assert doc["results"] == [] and [e["task"] for e in doc["edit_reliability"]] == ["factcheck", "multihop"]
    for entry in doc["edit_reliability"]:
        assert entry["n"] == 4 and 0 <= entry["ci_low"] <= entry["value"] <= entry["ci_high"] <= 1


@pytest.mark.slow  # the whole command on every task (one pair each): minutes on 2 cores, run by `make test-slow`
def test_run_on_every_task(tmp_path, every_dataset_dir):
    out = tmp_path / "all.json"
    done = causaldiag(
        "run",
        "--task",
        "all",
        "--metric",
        "filler_tokens,early_answering,oracle,random",
        "--limit",
        "1",
        "--data-dir",
        str(every_dataset_dir),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    tasks = {"factcheck", "analogy", "object_counting", "multihop"}
    assert tasks <= set(doc["dataset_versions"]) and tasks <= {e["task"] for e in doc["edit_reliability"]}
    for task in doc["dataset_versions"]:
        rows = [r for r in doc["results"] if r["task"] == task]
        assert {r["metric"] for r in rows} == {"filler_tokens", "early_answering", "oracle", "random_baseline"}
        assert len(rows) == 20 + 4 + 1 + 1 and all(r["n"] == 1 for r in rows)
        swapped = task != "analogy"
        for r in rows:
            assert SPEC_RESULT_KEYS <= set(r) and r["p_adjusted"] is not None and r["coverage"] is not None
            assert (r["d_sym"] is not None) == swapped and (r["d_swap_p_adjusted"] is not None) == swapped
            per_pair = [
                p for p in doc["pairs"] if (p["task"], p["metric"], p["variant"]) == (task, r["metric"], r["variant"])
            ]
            if swapped and r["d_sym_n_valid"]:
                d_sym = [(p["d"] + p["d_swap"]) / 2 for p in per_pair if None not in (p["d"], p["d_swap"])]
                assert np.mean(d_sym) == pytest.approx(r["d_sym"]) and len(d_sym) == r["d_sym_n_valid"]
        reliability = next(e for e in doc["edit_reliability"] if e["task"] == task)
        assert (reliability["two_sided"] is not None) == swapped and reliability["no_edit"] is not None
        accuracy = next(e for e in doc["accuracy"] if e["task"] == task)
        assert accuracy["direct_n"] == 1 and 0 <= accuracy["direct"] <= 1 and 0 <= accuracy["cot"] <= 1


def test_a_bad_metric_option_is_a_usage_error(tmp_path, capsys, monkeypatch):
    done = in_process(
        capsys,
        monkeypatch,
        "run",
        "--metric",
        "cc_shap",
        "--metric-option",
        "cc_shap.n_sample=2",
        "--out",
        "x.json",
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "metric cc_shap has no option 'n_sample'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "x.json").exists()


def test_no_progress_also_turns_off_the_bars_the_libraries_draw(tmp_path, capsys, monkeypatch):
    """transformers draws a bar while it loads weights, datasets while it builds a split: `--no-progress` turns
    those off too (the slow reliability test checks that a whole command then draws none)."""
    import datasets
    import huggingface_hub.utils
    from transformers.utils import logging as transformers_logging

    try:
        argv = ["run", "--metric", "filer_tokens", "--no-progress", "--out", "x.json"]
        done = in_process(capsys, monkeypatch, *argv, cwd=tmp_path)
        assert done.returncode == 2
        assert not transformers_logging.is_progress_bar_enabled()
        assert datasets.are_progress_bars_disabled() and huggingface_hub.utils.are_progress_bars_disabled()
    finally:
        transformers_logging.enable_progress_bar()
        datasets.enable_progress_bars()
        huggingface_hub.utils.enable_progress_bars()


def test_help_and_version_import_nothing_heavy():
    """`--help`, a subcommand's `--help` and `--version` answer before torch, transformers or datasets load (what
    makes them instant; `make bench` times them)."""
    probe = (
        "import sys\n"
        "from recoe_causaldiag.cli import main\n"
        "for argv in (['--help'], ['run', '--help'], ['--version']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as done:\n"
        "        assert done.code == 0, argv\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))\n"
    )
    wide = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=wide)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert f"causaldiag {__version__} (datasets {DATASET_VERSION})" in done.stdout
    assert "(default: smollm2-135m-instruct)" in done.stdout and "(default: factcheck)" in done.stdout


def test_ls_answers_from_the_catalogue_of_the_same_sources_without_importing_anything_heavy(tmp_path):
    """The first `ls` lists the registries (importing every metric) and caches the catalogue under the sources'
    digest; the next answers from it with nothing heavy imported and prints the same; a catalogue of other sources
    is never read."""
    from recoe_causaldiag.catalogue import CATALOGUE_FILE, listed_catalogue

    probe = (
        "import sys\n"
        "from recoe_causaldiag.cli import main\n"
        "assert main(['ls']) == 0\n"
        "print(sorted(m for m in ('torch', 'transformers', 'datasets') if m in sys.modules))\n"
    )
    env = {**os.environ, "CAUSALDIAG_CACHE": str(tmp_path)}

    def ls() -> tuple[str, str]:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=180, env=env)
        assert done.returncode == 0, done.stderr
        *listing, heavy = done.stdout.strip().splitlines()
        return "\n".join(listing), heavy

    first, heavy_first = ls()
    assert heavy_first != "[]", "the first listing reads the registries"
    again, heavy_again = ls()
    assert again == first and heavy_again == "[]"
    listed = listed_catalogue()
    assert all(f"  {m.name:<18} [{m.explanation_type}] {m.description}" in first for m in listed.metrics)
    assert all(f"  {d.name:<18} tasks: {', '.join(d.tasks)}" in first for d in listed.datasets)
    cached = json.loads((tmp_path / CATALOGUE_FILE).read_text())
    (tmp_path / CATALOGUE_FILE).write_text(json.dumps({**cached, "library": "other sources", "metrics": []}))
    stale, heavy_stale = ls()
    assert stale == first and heavy_stale != "[]", "a catalogue of other sources is listed afresh"
    (tmp_path / CATALOGUE_FILE).write_text("[1, 2]")
    assert ls()[0] == first, "an unreadable catalogue is listed afresh"


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--metric", "causal_faithfulness", "--metric-option", "causal_faithfulness.layers=(10, 99)"],
            "causal_faithfulness.layers=(10, 99): smollm2-135m-instruct has 30 decoder layers (0-29); [99]",
        ),
        (["--metric", "random_baseline", "--editor", "rome", "--editor-option", "layer=30"], "editor option layer=30"),
        (
            ["--metric", "cc_shap", "--metric-option", "cc_shap.n_samples=abc"],
            "metric cc_shap option n_samples must be int, got 'abc'",
        ),
        (
            ["--metric", "causal_faithfulness", "--metric-option", "causal_faithfulness.require_flip=yes"],
            "option require_flip must be bool, got 'yes'",
        ),
    ],
)
def test_bad_option_values_are_refused_before_the_model_loads(
    tmp_path, capsys, monkeypatch, model_never_loads, options, message
):
    done = in_process(capsys, monkeypatch, "run", *options, "--out", "x.json", cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_an_unwritable_out_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch, model_never_loads):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = in_process(capsys, monkeypatch, "run", "--metric", "random_baseline", "--out", str(blocker / "r.json"))
    assert done.returncode == 2 and "cannot write the results beside --out" in done.stderr


@pytest.mark.parametrize("command", [["run", "--metric", "random_baseline"], ["recoe-eval"]])
@pytest.mark.parametrize("out", [".", "/", "a-folder"])
def test_an_out_that_names_a_folder_is_refused_before_the_model_loads(
    tmp_path, capsys, monkeypatch, model_never_loads, command, out
):
    """A run would compute everything and then fail to write its results (and its checkpoints sit beside a name that
    no file can have), so a folder given as --out is refused first."""
    (tmp_path / "a-folder").mkdir()
    done = in_process(capsys, monkeypatch, *command, "--out", out, cwd=tmp_path)
    assert done.returncode == 2 and f"--out {out}: names a folder" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_rerun_repeats_the_recorded_job_exactly(tmp_path, capsys, monkeypatch):
    first, second, data = tmp_path / "first.json", tmp_path / "second.json", str(tmp_path / "data")
    done = in_process(
        capsys,
        monkeypatch,
        "run",
        "--metric",
        "random_baseline",
        "--limit",
        "4",
        "--seed",
        "5",
        "--precision",
        "float32",
        "--no-swap",
        "--data-dir",
        data,
        "--out",
        str(first),
    )
    assert done.returncode == 0, done.stderr
    done = in_process(capsys, monkeypatch, "rerun", str(first), "--data-dir", data, "--out", str(second))
    assert done.returncode == 0, done.stderr
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert a["run_spec"] == b["run_spec"] and a["run_spec"]["seed"] == 5 and a["run_spec"]["swap"] is False
    assert a["run_spec"]["precision"] == "float32"
    assert a["results"][0]["d_sym"] is None and "d_swap" not in a["pairs"][0]
    assert a["pairs"] == b["pairs"] and len(a["pairs"]) == 4
    assert [r["diagnosticity"] for r in a["results"]] == [r["diagnosticity"] for r in b["results"]]


def test_rerun_of_a_file_without_a_run_spec_is_a_usage_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "r.json").write_text('{"results": []}')
    done = in_process(capsys, monkeypatch, "rerun", str(tmp_path / "r.json"), "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "no usable run_spec" in done.stderr and "Traceback" not in done.stderr
