"""The pair record (SPEC §3): one faithful/unfaithful explanation pair for one input."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import datasets

from .errors import RecordError
from .task import task_registry


@dataclass(frozen=True)
class Rewrite:
    """An edit in (subject, relation prompt, object) form, for weight editors such as MEMIT/ROME; `paraphrases` are
    other wordings of the prompt (each with its `{}` for the subject), on which an edit's generalisation is measured."""

    prompt: str
    subject: str
    target_new: str
    target_true: str
    paraphrases: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Rewrite:
        """A rewrite from a dataset row (one written before `paraphrases` existed has none)."""
        return cls(**{**row, "paraphrases": tuple(row.get("paraphrases") or ())})


@dataclass(frozen=True)
class PairRecord:
    """One input with an explanation faithful to the evaluated model M̄ and one faithful to the contrast model M̃."""

    id: str
    task: str
    question: str
    choices: tuple[str, ...]
    answer: str
    edits: tuple[str, ...]
    counter_edits: tuple[str, ...]
    explanation_faithful: str
    explanation_unfaithful: str
    rewrites: tuple[Rewrite, ...] = ()
    counter_rewrites: tuple[Rewrite, ...] = ()
    flip_edits: tuple[str, ...] = ()
    metadata: str = "{}"

    def to_row(self) -> dict[str, Any]:
        """The record as a plain row, `metadata` as its JSON text (`hub_layout.stored_rows` stores it as a
        struct)."""
        row = asdict(self)
        for key in ("choices", "edits", "counter_edits", "flip_edits"):
            row[key] = list(row[key])
        for key in ("rewrites", "counter_rewrites"):
            row[key] = [{**r, "paraphrases": list(r["paraphrases"])} for r in row[key]]
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PairRecord:
        """Rebuild a record from a row: one of `to_row`, or one as a dataset stores it (`metadata` a struct from
        1.4.0 on, JSON text before)."""
        missing = [f for f in FEATURES if f not in row]
        if missing:
            raise RecordError(str(row.get("id", "?")), missing[0], "missing")
        return cls(
            id=row["id"],
            task=row["task"],
            question=row["question"],
            choices=tuple(row["choices"]),
            answer=row["answer"],
            edits=tuple(row["edits"]),
            counter_edits=tuple(row["counter_edits"]),
            explanation_faithful=row["explanation_faithful"],
            explanation_unfaithful=row["explanation_unfaithful"],
            rewrites=tuple(Rewrite.from_row(r) for r in row["rewrites"] or ()),
            counter_rewrites=tuple(Rewrite.from_row(r) for r in row["counter_rewrites"] or ()),
            flip_edits=tuple(row["flip_edits"] or ()),
            metadata=metadata_from_stored(row["metadata"]),
        )

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads(self.metadata)

    @property
    def cluster(self) -> str | None:
        """The entity this pair shares with other pairs of its dataset (`metadata.cluster`), whose pairs are
        resampled and sign-tested together; None where the dataset names none (the pair stands alone)."""
        value = self.meta.get("cluster")
        return None if value is None else str(value)


_REWRITE = {
    "prompt": datasets.Value("string"),
    "subject": datasets.Value("string"),
    "target_new": datasets.Value("string"),
    "target_true": datasets.Value("string"),
    "paraphrases": datasets.List(datasets.Value("string")),
}

FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "task": datasets.Value("string"),
        "question": datasets.Value("string"),
        "choices": datasets.List(datasets.Value("string")),
        "answer": datasets.Value("string"),
        "edits": datasets.List(datasets.Value("string")),
        "counter_edits": datasets.List(datasets.Value("string")),
        "explanation_faithful": datasets.Value("string"),
        "explanation_unfaithful": datasets.Value("string"),
        "rewrites": datasets.List(_REWRITE),
        "counter_rewrites": datasets.List(_REWRITE),
        "flip_edits": datasets.List(datasets.Value("string")),
        "metadata": datasets.Value("string"),
    }
)


def validate_record(record: PairRecord) -> None:
    """Raise `RecordError` naming the row and field of the first problem in one record."""
    row = record.id or "?"
    for name in ("id", "question", "answer", "explanation_faithful", "explanation_unfaithful"):
        value = getattr(record, name)
        if not isinstance(value, str) or not value.strip():
            raise RecordError(row, name, "must be a non-empty string")
    if record.task not in task_registry():
        raise RecordError(row, "task", f"unknown task '{record.task}'")
    if len(record.choices) < 2 or len(set(record.choices)) != len(record.choices):
        raise RecordError(row, "choices", f"needs at least two distinct labels, got {list(record.choices)}")
    if record.answer not in record.choices:
        raise RecordError(row, "answer", f"'{record.answer}' is not one of {list(record.choices)}")
    if not record.edits or any(not e.strip() for e in record.edits):
        raise RecordError(row, "edits", "must be a non-empty list of non-empty facts")
    if not record.counter_edits or any(not e.strip() for e in record.counter_edits):
        raise RecordError(row, "counter_edits", "must be a non-empty list of non-empty facts")
    if list(record.edits) == list(record.counter_edits):
        raise RecordError(row, "counter_edits", "identical to edits")
    if record.explanation_faithful.strip() == record.explanation_unfaithful.strip():
        raise RecordError(row, "explanation_unfaithful", "identical to explanation_faithful")
    for name in ("rewrites", "counter_rewrites"):
        for index, rewrite in enumerate(getattr(record, name)):
            for prompt in (rewrite.prompt, *rewrite.paraphrases):
                if prompt.count("{}") != 1:
                    raise RecordError(row, f"{name}[{index}]", f"prompt {prompt!r} needs one '{{}}' for the subject")
            if rewrite.prompt in rewrite.paraphrases:
                raise RecordError(row, f"{name}[{index}]", "a paraphrase repeats the prompt")
    try:
        meta = json.loads(record.metadata)
    except json.JSONDecodeError as err:
        raise RecordError(row, "metadata", f"not valid JSON ({err})") from None
    if not isinstance(meta, dict):
        raise RecordError(row, "metadata", "must be a JSON object")
    reserved = [key for key in meta if key.endswith(JSON_SUFFIX)]
    if reserved:
        raise RecordError(row, "metadata", f"key {reserved[0]!r}: names ending in {JSON_SUFFIX!r} are reserved")
    if (null := _null_path(meta)) is not None:
        raise RecordError(row, "metadata", f"{null} is null; leave the key out instead")


def validate_records(records: Iterable[PairRecord]) -> list[PairRecord]:
    """Validate every record and the uniqueness of ids; return them as a list."""
    seen: set[str] = set()
    out = []
    for record in records:
        validate_record(record)
        if record.id in seen:
            raise RecordError(record.id, "id", "repeats an earlier id")
        seen.add(record.id)
        out.append(record)
    return out


JSON_SUFFIX = "_json"
"""A stored metadata field whose values Arrow cannot type without changing them (a value that is text in one row
and an object in another, an integer that would become a float) is stored as JSON text under `<key>_json`."""


def _null_path(value: Any, path: str = "metadata") -> str | None:
    """Where an object in `value`, at any depth, has a null-valued key (a struct stores a missing key as null, so a
    null value could not be told from a missing key); None where none has."""
    if isinstance(value, dict):
        for key, item in value.items():
            found = f"{path}.{key}" if item is None else _null_path(item, f"{path}.{key}")
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _null_path(item, f"{path}[{index}]")) is not None:
                return found
    return None


def without_nulls(value: Any) -> Any:
    """`value` with every null-valued key of its objects left out (how a struct's missing keys read back)."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def metadata_from_stored(stored: str | Mapping[str, Any] | None) -> str:
    """The metadata's canonical JSON from its stored form: a struct (from dataset version 1.4.0; null fields are
    keys the row does not have, `<key>_json` fields hold JSON text), or the JSON text of earlier versions."""
    if isinstance(stored, str):
        return stored
    fields: dict[str, Any] = {}
    for name, value in (stored or {}).items():
        if value is None:
            continue
        if name.endswith(JSON_SUFFIX):
            fields[name.removesuffix(JSON_SUFFIX)] = json.loads(value)
        else:
            fields[name] = without_nulls(value)
    return metadata_json(**fields)


def metadata_json(**fields: Any) -> str:
    """Canonical JSON for the `metadata` field (sorted keys, so builds are byte-stable)."""
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)


__all__ = ["FEATURES", "PairRecord", "RecordError", "Rewrite", "metadata_json", "validate_record", "validate_records"]
