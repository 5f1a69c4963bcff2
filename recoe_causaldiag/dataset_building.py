"""Building the registered datasets: a dataset's spec (builder, card) → its records → the artifact probes on them
→ a Hub-layout folder whose card and MANIFEST carry the probes' results, and the folder that holds a task, built on
demand."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path

from .api.records import PairRecord
from .api.task import DatasetSpec
from .artifact_probes import (
    BAND,
    MIN_PAIRS,
    PROBE_LEGEND,
    Audit,
    audit_dataset,
    gate_message,
    packaged_tokenizers,
    render_table,
)
from .citation import PAPER_BIBTEX
from .hub_layout import MANIFEST, stored_rows, write_hub_dataset
from .paths import locked
from .tasks import DATASET_VERSION, DATASETS, RELEASE_DATE, TASKS

PROBE_GATE_EXEMPT: dict[str, str] = {}
"""Datasets whose failing probes do not stop the build yet, each with the reason; their cards and MANIFESTs
still show every failing probe. A dataset leaves this list once its builder is fixed."""


class ArtifactProbeError(ValueError):
    """A text-only probe separates the faithful from the unfaithful explanations; the build stops."""


def probe_section(audit: Audit, gate: str) -> str:
    """The card's artifact-probe section: what each probe measures, the table, and whether failures stop builds."""
    return "\n\n".join(
        (
            "Text-only scorers that never see the edits, each scoring an explanation from its text, the question "
            "and the pair's real-world facts where the builder records them. D is the share of pairs where a probe "
            "scores the faithful explanation higher (ties count half); a scorer and its opposite (shorter vs longer) "
            f"are one probe, so |D − 0.5| is what matters. A probe passes when its 95% CI lies inside "
            f"[{BAND[0]:.2f}, {BAND[1]:.2f}] (a task with fewer than {MIN_PAIRS} pairs is shown, not judged: FEW).",
            PROBE_LEGEND,
            render_table(audit),
            gate,
        )
    )


CARD_USES = """- **Intended use:** measuring how *diagnostic* a faithfulness metric for natural-language explanations
  is: score both explanations of every pair with the metric, the model's knowledge edited as `edits` (in context or
  in its weights), and count how often the faithful one scores higher (`causaldiag run`, or the `evaluate` modules
  `causal-diagnosticity/<metric>` and `causal-diagnosticity/diagnosticity`). Run the swapped-roles control
  (`counter_edits` in context, roles exchanged) and the artifact probes before trusting a number.
- **Out of scope:** the edited facts and explanations are counterfactual by construction; they are not knowledge,
  not training data for factual models and not a test of a model's truthfulness. The explanations are written from
  templates, so the pairs say nothing about the plausibility or fluency of explanations to people, and a high
  score on them is not evidence that a model's own explanations are faithful."""

CHANGES_1_4_0 = """`metadata` is stored as a struct (a field per key, typed; SPEC §3), no longer as one JSON string,
so the dataset viewer can filter on it: `load_dataset` returns it as a dict. A key whose values Arrow cannot type
without changing one (text in one row and an object in another, an integer that would become a float) is stored as JSON
text under `<key>_json`; a field a row lacks is null. The rows are otherwise the same as in 1.3.1, and
`PairRecord.from_row` reads both forms back to the same record."""

CHANGES_1_3_1 = """The card only; the rows are the same as in 1.3.0 (same parquet files). The card's header is now
written with `huggingface_hub.DatasetCardData` (with `source_datasets`, annotation and language creators), and the card
shows an example row, its intended and out-of-scope uses, and the paper's arXiv id and DOI."""


def example_row(configs: Mapping[str, list[PairRecord]]) -> str:
    """The first row of the first config as JSON, as `load_dataset` returns it (`metadata` a struct of the
    config's fields, null where the row lacks one)."""
    rows, _ = stored_rows(next(iter(configs.values())))
    return json.dumps(rows[0], indent=2, ensure_ascii=False)


def card_template(spec: DatasetSpec) -> str:
    """The card template that the dataset's spec names (a file of `dataset_cards/`, shipped in the package as
    `recoe_causaldiag/tasks/cards/`)."""
    return files("recoe_causaldiag.tasks").joinpath("cards", spec.card).read_text(encoding="utf-8")


def write_dataset(
    name: str,
    configs: Mapping[str, list[PairRecord]],
    out_dir: Path,
    *,
    version: str = DATASET_VERSION,
    seed: int = 0,
    probe_gate: bool = True,
) -> Path:
    """Write records of the registered dataset `name` into `out_dir/<name>/` with its card, after running the
    artifact probes on them; a failing probe raises `ArtifactProbeError` (writing nothing) unless `probe_gate`
    is off or the dataset is in PROBE_GATE_EXEMPT. Returns the path."""
    audit = audit_dataset(name, configs, packaged_tokenizers())
    exempt = PROBE_GATE_EXEMPT.get(name) if probe_gate else "turned off for this build (--no-probe-gate)"
    if audit.failures and exempt is None:
        raise ArtifactProbeError(gate_message(audit.failures))
    gate = (
        "Build gate: on; a failing probe stops the build."
        if exempt is None
        else f"Build gate: off for this dataset, because {exempt}. Every FAIL row above is a known artifact."
    )
    return write_hub_dataset(
        name,
        configs,
        Path(out_dir),
        card_template=card_template(DATASETS.get(name)),
        version=version,
        release_date=RELEASE_DATE,
        seed=seed,
        card_sections={
            "artifact_probes": probe_section(audit, gate),
            "example_row": example_row(configs),
            "uses": CARD_USES,
            "paper_citation": PAPER_BIBTEX,
            "changes_1_4_0": CHANGES_1_4_0,
            "changes_1_3_1": CHANGES_1_3_1,
        },
        manifest_extra={"artifact_probes": {**audit.to_manifest(), "gate": "on" if exempt is None else exempt}},
    )


def build_dataset(
    name: str, out_dir: Path, *, version: str = DATASET_VERSION, seed: int = 0, probe_gate: bool = True
) -> Path:
    """Build one registered dataset into `out_dir/<name>/`."""
    records = DATASETS.get(name).build(seed)
    return write_dataset(name, records, out_dir, version=version, seed=seed, probe_gate=probe_gate)


def task_dataset_dir(task: str, data_dir: Path) -> tuple[Path, str]:
    """The folder and config holding a task, built into `data_dir` first if it is not there."""
    spec = TASKS.get(task)
    folder = Path(data_dir) / spec.dataset
    with locked(folder):
        if not (folder / MANIFEST).is_file():
            build_dataset(spec.dataset, Path(data_dir))
    return folder, spec.config
