"""Building the registered datasets: a dataset's spec (builder, card) → its records → the artifact probes on them
→ a Hub-layout folder whose card and MANIFEST carry the probes' results, and the folder that holds a task, built on
demand."""

from __future__ import annotations

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
from .hub_layout import MANIFEST, write_hub_dataset
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


def card_template(spec: DatasetSpec) -> str:
    """The card template that the dataset's spec names (a file of `dataset_cards/`)."""
    return files("dataset_cards").joinpath(spec.card).read_text(encoding="utf-8")


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
        card_sections={"artifact_probes": probe_section(audit, gate)},
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
