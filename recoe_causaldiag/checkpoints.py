"""Checkpoints of a run, so that an interrupted run continues where it stopped: each task's model-side controls (after
every few pairs) and each (task, metric)'s raw per-pair scores are written, whole or not at all, to a folder beside
the results file as soon as they are computed; a later run of the same spec reads them instead of computing them
again, provided they were computed on the same pairs (ids, in order: data rebuilt in between is scored afresh). A
finished run removes its folder. The statistics are always computed afresh from the scores."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .api.instance import VariantScores
from .api.rows import PairControlRow
from .api.run_spec import RunSpec
from .paths import write_whole

log = logging.getLogger(__name__)

SPEC_FILE = "run_spec.json"


def checkpoint_folder(out: Path) -> Path:
    """Where the run writing `out` keeps its checkpoints."""
    out = Path(out)
    return out.with_name(f"{out.name}.partial")


def _spec_text(spec: RunSpec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True, default=str)


def _safe(name: str) -> str:
    """A task or metric name as part of a file name (ReCoE's `recoe/<scheme>`), with a hash against clashes."""
    return name.replace("/", "--") + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


@dataclass
class Checkpoint:
    """The checkpoints of one run spec in `folder` (`open` starts afresh when the folder holds another spec's)."""

    folder: Path

    @classmethod
    def open(cls, out: Path, spec: RunSpec) -> Checkpoint:
        folder = checkpoint_folder(out)
        recorded = folder / SPEC_FILE
        if folder.exists() and (not recorded.is_file() or recorded.read_text(encoding="utf-8") != _spec_text(spec)):
            log.warning("%s holds checkpoints of another run; starting afresh", folder)
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if not recorded.is_file():
            write_whole(recorded, lambda path: path.write_text(_spec_text(spec), encoding="utf-8"))
        done = sorted(p.name for p in folder.iterdir() if p.name != SPEC_FILE and not p.name.startswith("."))
        if done:
            log.warning("resuming from %s: %d checkpoint(s) found", folder, len(done))
        return cls(folder)

    def controls(self, task: str, pair_ids: Sequence[str]) -> list[PairControlRow]:
        """The task's control rows that a checkpoint holds for the first of these pairs (all, some or none of them)."""
        path = self.folder / f"controls-{_safe(task)}.json"
        if not path.is_file():
            return []
        rows = [PairControlRow.from_json(row) for row in json.loads(path.read_text(encoding="utf-8"))]
        return rows if [row.pair_id for row in rows] == list(pair_ids[: len(rows)]) else []

    def save_controls(self, task: str, rows: Sequence[PairControlRow]) -> None:
        text = json.dumps([row.to_json() for row in rows])
        write_whole(self.folder / f"controls-{_safe(task)}.json", lambda path: path.write_text(text, encoding="utf-8"))

    def scores(self, task: str, metric: str, pair_ids: Sequence[str]) -> tuple[list[VariantScores], float] | None:
        """A metric's per-pair scores on the task (both directions, as `Metric.score` returned them) and the seconds
        they took, when a checkpoint holds them for these pairs (`pair_ids`, in scoring order)."""
        path = self.folder / f"scores-{_safe(task)}-{_safe(metric)}.npz"
        if not path.is_file():
            return None
        with np.load(path) as stored:
            if json.loads(str(stored["pair_ids"])) != list(pair_ids):
                return None
            variants = json.loads(str(stored["variants"]))
            scored = [
                VariantScores(v, stored[f"{k}_faithful"], stored[f"{k}_unfaithful"]) for k, v in enumerate(variants)
            ]
            return scored, float(stored["seconds"])

    def save_scores(
        self, task: str, metric: str, pair_ids: Sequence[str], scored: Sequence[VariantScores], seconds: float
    ) -> None:
        arrays: dict[str, Any] = {
            "pair_ids": json.dumps(list(pair_ids)),
            "variants": json.dumps([s.variant for s in scored]),
            "seconds": seconds,
        }
        for k, s in enumerate(scored):
            arrays[f"{k}_faithful"], arrays[f"{k}_unfaithful"] = s.faithful, s.unfaithful
        write_whole(self.folder / f"scores-{_safe(task)}-{_safe(metric)}.npz", lambda path: _save_npz(path, arrays))

    def finish(self) -> None:
        """The run is written: its checkpoints are no longer needed."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _save_npz(path: Path, arrays: dict[str, Any]) -> None:
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
