"""Datasets on disk in Hugging Face Hub layout: parquet per config, a filled-in card, a MANIFEST of checksums.
Reading and writing only; which datasets exist and how they are built is `dataset_building`'s business."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from . import __version__
from .api.records import FEATURES, JSON_SUFFIX, PairRecord, without_nulls
from .paths import staged_folder

MANIFEST = "MANIFEST.json"
SHARD = "test-00000-of-00001.parquet"


def _config_dir(config: str) -> str:
    return "data" if config == "default" else config


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return label
    return "100K<n<1M"


def render_card(
    template: str,
    sizes: Mapping[str, tuple[datasets.Features, int, int, int]],
    *,
    version: str,
    release_date: str,
    seed: int,
    sections: Mapping[str, str] | None = None,
) -> str:
    """The card: the template's YAML header as `huggingface_hub.DatasetCardData`, completed with the size
    category, the `configs` and the `dataset_info` of every config (its stored features; rows, arrow
    and parquet bytes, which also key the `datasets` cache, so a rebuilt folder is not served stale); its body with
    the `{{placeholders}}` filled: counts, version, date, seed, and any further `sections` by name."""
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCardData

    header, body = _front_matter(template)
    counts = {config: rows for config, (_, rows, _, _) in sizes.items()}
    card_data = DatasetCardData(
        **header,
        size_categories=[_size_category(sum(counts.values()))],
        configs=[
            {"config_name": c, "data_files": [{"split": "test", "path": f"{_config_dir(c)}/test-*.parquet"}]}
            for c in counts
        ],
    )
    DatasetInfosDict({config: _dataset_info(config, *size) for config, size in sizes.items()}).to_dataset_card_data(
        card_data
    )
    values = {
        "version": version,
        "release_date": release_date,
        "seed": str(seed),
        "builder_version": __version__,
        "num_rows": str(sum(counts.values())),
        "counts_table": "\n".join(f"| {c} | {n} |" for c, n in counts.items()),
        **(sections or {}),
    }
    for key, value in values.items():
        body = body.replace("{{" + key + "}}", value)
    return f"---\n{card_data.to_yaml()}\n---\n{body}"


def _front_matter(template: str) -> tuple[dict[str, Any], str]:
    """A card template's YAML header (as a mapping) and its body."""
    _, header, body = template.split("---\n", 2)
    return yaml.safe_load(header), body


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _typed_losslessly(values: Sequence[Any]) -> pa.Array | None:
    """The values as an Arrow array when every value reads back from it as it was (a struct's added keys read as
    null and left out); None when Arrow cannot type them or would change one (an integer made a float)."""
    try:
        array = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if pa.types.is_null(array.type):
        return None
    back = array.to_pylist()
    return array if all(_canonical(without_nulls(b)) == _canonical(v) for b, v in zip(back, values)) else None


def metadata_column(metadata: Sequence[Mapping[str, Any]]) -> pa.StructArray:
    """The `metadata` of a config's rows as one struct column (SPEC §3), a field per key any row has (null where a
    row lacks it), typed as Arrow types the values; a key whose values Arrow cannot type without changing one is
    stored as JSON text under `<key>_json`. `records.metadata_from_stored` reads every row back exactly."""
    keys = sorted({key for fields in metadata for key in fields})
    if not keys:
        raise ValueError("every row's metadata is empty: a struct needs at least one field")
    names, arrays = [], []
    for key in keys:
        values = [fields.get(key) for fields in metadata]
        typed = _typed_losslessly(values)
        if typed is None:
            key, typed = (
                key + JSON_SUFFIX,
                pa.array([None if v is None else _canonical(v) for v in values], pa.string()),
            )
        names.append(key)
        arrays.append(typed)
    return pa.StructArray.from_arrays(arrays, names=names)


def stored_rows(records: Sequence[PairRecord]) -> tuple[list[dict[str, Any]], datasets.Features]:
    """The records as a dataset stores them, and the config's features: those of `FEATURES`, with `metadata` a
    struct of the config's own fields."""
    column = metadata_column([record.meta for record in records])
    metadata = datasets.Features.from_arrow_schema(pa.schema([("metadata", column.type)]))["metadata"]
    rows = [record.to_row() | {"metadata": fields} for record, fields in zip(records, column.to_pylist())]
    return rows, datasets.Features({**FEATURES, "metadata": metadata})


def _dataset_info(
    config: str, features: datasets.Features, rows: int, arrow_bytes: int, parquet_bytes: int
) -> datasets.DatasetInfo:
    splits = datasets.SplitDict()
    splits.add(datasets.SplitInfo(name="test", num_bytes=arrow_bytes, num_examples=rows))
    return datasets.DatasetInfo(
        features=features,
        config_name=config,
        splits=splits,
        download_size=parquet_bytes,
        dataset_size=arrow_bytes,
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_parquet(table: datasets.Dataset, path: Path) -> None:
    """Parquet with the `datasets` schema metadata, without a progress bar for a one-batch write."""
    was_enabled = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        table.to_parquet(str(path))
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def write_hub_dataset(
    name: str,
    configs: Mapping[str, list[PairRecord]],
    out_dir: Path,
    *,
    card_template: str,
    version: str,
    release_date: str,
    seed: int,
    card_sections: Mapping[str, str] | None = None,
    manifest_extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write `out_dir/<name>/` with the card rendered from `card_template` (with `card_sections` filled in) and a
    MANIFEST holding `manifest_extra` beside the checksums (replacing the folder whole, never half-written), and
    return its path."""
    target = Path(out_dir) / name
    with staged_folder(target) as staging:
        sizes = {}
        for config, records in configs.items():
            folder = staging / _config_dir(config)
            folder.mkdir(parents=True, exist_ok=True)
            rows, features = stored_rows(records)
            table = datasets.Dataset.from_list(rows, features=features)
            write_parquet(table, folder / SHARD)
            sizes[config] = (features, len(records), table.data.nbytes, (folder / SHARD).stat().st_size)
        counts = {c: len(r) for c, r in configs.items()}
        card = render_card(
            card_template, sizes, version=version, release_date=release_date, seed=seed, sections=card_sections
        )
        (staging / "README.md").write_text(card, encoding="utf-8")
        checksums = {
            str(p.relative_to(staging)): {"sha256": _sha256(p), "bytes": p.stat().st_size}
            for p in sorted(staging.rglob("*"))
            if p.is_file()
        }
        manifest = {
            "name": name,
            "version": version,
            "seed": seed,
            "num_rows": counts,
            "files": checksums,
            **(manifest_extra or {}),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


def read_manifest(dataset_dir: Path) -> dict:
    return json.loads((Path(dataset_dir) / MANIFEST).read_text(encoding="utf-8"))


def load_pairs(dataset_dir: Path, config: str = "default") -> list[PairRecord]:
    """The pair records of one config of a dataset folder written by `write_hub_dataset`."""
    path = Path(dataset_dir) / _config_dir(config) / SHARD
    return [PairRecord.from_row(row) for row in pq.read_table(path).to_pylist()]
