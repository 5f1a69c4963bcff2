"""Building the registered datasets: a dataset's spec (builder, card) → its records → a Hub-layout folder, and
the folder that holds a task, built on demand."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path

from .api.records import PairRecord
from .api.task import DatasetSpec
from .hub_layout import MANIFEST, write_hub_dataset
from .tasks import DATASET_VERSION, DATASETS, RELEASE_DATE, TASKS


def card_template(spec: DatasetSpec) -> str:
    """The card template that the dataset's spec names (a file of `dataset_cards/`)."""
    return files("dataset_cards").joinpath(spec.card).read_text(encoding="utf-8")


def write_dataset(
    name: str, configs: Mapping[str, list[PairRecord]], out_dir: Path, *, version: str = DATASET_VERSION, seed: int = 0
) -> Path:
    """Write records of the registered dataset `name` into `out_dir/<name>/` with its card, and return the path."""
    return write_hub_dataset(
        name,
        configs,
        Path(out_dir),
        card_template=card_template(DATASETS.get(name)),
        version=version,
        release_date=RELEASE_DATE,
        seed=seed,
    )


def build_dataset(name: str, out_dir: Path, *, version: str = DATASET_VERSION, seed: int = 0) -> Path:
    """Build one registered dataset into `out_dir/<name>/`."""
    return write_dataset(name, DATASETS.get(name).build(seed), out_dir, version=version, seed=seed)


def task_dataset_dir(task: str, data_dir: Path) -> tuple[Path, str]:
    """The folder and config holding a task, built into `data_dir` first if it is not there."""
    spec = TASKS.get(task)
    folder = Path(data_dir) / spec.dataset
    if not (folder / MANIFEST).is_file():
        build_dataset(spec.dataset, Path(data_dir))
    return folder, spec.config
