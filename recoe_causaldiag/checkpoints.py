"""Checkpoints of a run, so that an interrupted run continues where it stopped: each task's model-side controls (after
every few pairs) and each (task, metric)'s raw per-pair scores (once computed, or for a costly metric after every
few pairs, `Metric.pairs_per_checkpoint`) are written, whole or not at all, to a folder beside the results file; a
later run of the same spec reads them instead of computing them again for the pairs they hold (by pair id: the pairs
of data rebuilt in between are scored afresh). A finished run removes its folder. The statistics are always computed
afresh from the scores.

A finished run's results can seed the checkpoints of a run that differs from it only in its metrics and in how many
pairs it samples (`reusing`, `Checkpoint.take_finished`): its controls and the scores of every metric it ran with the
same options are read for the pairs both runs hold, not computed again, so adding a metric to a finished run costs
that metric alone, and a larger `--limit` costs the pairs it adds alone."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .api.instance import VariantScores
from .api.rows import PairControlRow, PairScoreRow
from .api.run_spec import RunSpec
from .paths import write_whole

log = logging.getLogger(__name__)

SPEC_FILE = "run_spec.json"

REUSABLE_FIELDS = frozenset({"metrics", "metric_options", "metric_defaults", "limit"})
"""The run spec's fields in which a run may differ from the finished run whose scores it reuses (a metric is read
only where its options are the same; scores and controls only for the pairs that both runs sample)."""

PINNED_FIELDS = frozenset({"model_identity", "datasets", "package_version", "editor_statistics", "editor_settings"})
"""The fields a finished run's spec records about what ran (a reusing run is pinned to its model and data)."""


def checkpoint_folder(out: Path) -> Path:
    """Where the run writing `out` keeps its checkpoints."""
    out = Path(out)
    return out.with_name(f"{out.name}.partial")


def _spec_text(spec: RunSpec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True, default=str)


def _safe(name: str) -> str:
    """A task or metric name as part of a file name (ReCoE's `recoe/<scheme>`), with a hash against clashes."""
    return name.replace("/", "--") + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


def scored_pair_ids(pair_ids: Sequence[str], swapped: bool) -> list[str]:
    """The ids of what a metric scores on a task, in order: its pairs, then, where roles are swapped, each pair seen
    from its contrast model."""
    return list(pair_ids) + ([f"{pair_id} (swapped)" for pair_id in pair_ids] if swapped else [])


def reusing(spec: RunSpec, finished: Mapping[str, Any]) -> RunSpec:
    """`spec` pinned to the model and the data of a finished run (its results document, SPEC §8), whose scores it
    will reuse; ValueError unless the two runs differ in their metrics, the metrics' options and their `limit` alone
    (same model, tasks, data, editor, explanations, seed, batch size, precision, swap) and the finished one was made
    by this version of the library (another's scores need not be this one's)."""
    try:
        recorded = RunSpec.from_dict(finished["run_spec"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"no usable run_spec ({err})") from err
    if recorded.model_identity is None:
        raise ValueError("its run_spec records no model identity (not a finished run's results)")
    if recorded.package_version != __version__:
        raise ValueError(
            f"that run was made by causal-diagnosticity {recorded.package_version}, this is {__version__}: "
            "its scores need not be this version's"
        )
    mine, theirs = spec.to_dict(), recorded.to_dict()
    differ = sorted(key for key in mine if key not in REUSABLE_FIELDS | PINNED_FIELDS and mine[key] != theirs[key])
    if differ:
        shown = "; ".join(f"{key}: {theirs[key]!r} there, {mine[key]!r} here" for key in differ)
        raise ValueError(f"that run differs from this one in more than its metrics and limit ({shown})")
    return replace(spec, model_identity=recorded.model_identity, datasets=recorded.datasets)


@dataclass(frozen=True)
class StoredScores:
    """A metric's scores of the pairs `pair_ids` (each variant's arrays in that order) as a checkpoint holds them, and
    the seconds they took (a share of the stored pairs' seconds, in proportion, when only some of them are taken)."""

    pair_ids: tuple[str, ...]
    scored: list[VariantScores]
    seconds: float


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

    def controls(self, task: str, pair_ids: Sequence[str]) -> dict[str, PairControlRow]:
        """The task's control rows that a checkpoint holds for any of these pairs (all, some or none of them), by pair
        id in the order of `pair_ids`."""
        path = self.folder / f"controls-{_safe(task)}.json"
        if not path.is_file():
            return {}
        held = {row["pair_id"]: PairControlRow.from_json(row) for row in json.loads(path.read_text(encoding="utf-8"))}
        return {pair_id: held[pair_id] for pair_id in pair_ids if pair_id in held}

    def save_controls(self, task: str, rows: Sequence[PairControlRow]) -> None:
        text = json.dumps([row.to_json() for row in rows])
        write_whole(self.folder / f"controls-{_safe(task)}.json", lambda path: path.write_text(text, encoding="utf-8"))

    def scores(self, task: str, metric: str, pair_ids: Sequence[str]) -> StoredScores | None:
        """A metric's per-pair scores on the task (as `Metric.score` returned them, a pair seen from its contrast model
        having an id of its own) that a checkpoint holds for any of these pairs (`pair_ids`, in scoring order): all of
        them, those scored before a run was interrupted, or those a finished run with another `limit` shares."""
        path = self.folder / f"scores-{_safe(task)}-{_safe(metric)}.npz"
        if not path.is_file():
            return None
        with np.load(path) as stored:
            ids = json.loads(str(stored["pair_ids"]))
            rows = {pair_id: row for row, pair_id in enumerate(ids)}
            held = [pair_id for pair_id in pair_ids if pair_id in rows]
            if not held:
                return None
            taken = [rows[pair_id] for pair_id in held]
            variants = json.loads(str(stored["variants"]))
            scored = [
                VariantScores(v, stored[f"{k}_faithful"][taken], stored[f"{k}_unfaithful"][taken])
                for k, v in enumerate(variants)
            ]
            return StoredScores(tuple(held), scored, float(stored["seconds"]) * len(held) / len(ids))

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

    def take_finished(self, finished: Mapping[str, Any], spec: RunSpec) -> list[str]:
        """Checkpoints from a finished run's results document that `reusing` accepted for `spec` (as it will run: its
        helper models and defaults resolved): every task's controls, and the per-pair scores (both directions) and
        seconds of every metric both runs compute with the same options; this run reads them for the pairs it shares
        with that one. The `task · metric (n pairs)` entries taken."""
        recorded = RunSpec.from_dict(finished["run_spec"])
        controls: defaultdict[str, list[PairControlRow]] = defaultdict(list)
        for row in finished["pair_controls"]:
            controls[row["task"]].append(PairControlRow.from_json(row))
        for task, task_controls in controls.items():
            self.save_controls(task, task_controls)
        rows: defaultdict[tuple[str, str], list[PairScoreRow]] = defaultdict(list)
        for row in finished["pairs"]:
            rows[row["task"], row["metric"]].append(PairScoreRow.from_json(row))
        seconds = {(entry["task"], entry["metric"]): float(entry["seconds"]) for entry in finished["results"]}
        taken = []
        for (task, metric), metric_rows in rows.items():
            if metric not in spec.metrics or recorded.options_for(metric) != spec.options_for(metric):
                continue
            ids = list(dict.fromkeys(row.pair_id for row in metric_rows))
            swapped = metric_rows[0].swapped
            variants = dict.fromkeys(row.variant for row in metric_rows)
            scored = [_variant_scores(variant, metric_rows, swapped) for variant in variants]
            self.save_scores(task, metric, scored_pair_ids(ids, swapped), scored, seconds[task, metric])
            taken.append(f"{task} · {metric} ({len(ids)} pairs)")
        return taken

    def finish(self) -> None:
        """The run is written: its checkpoints are no longer needed."""
        shutil.rmtree(self.folder, ignore_errors=True)


def _variant_scores(variant: str, rows: Sequence[PairScoreRow], swapped: bool) -> VariantScores:
    """One variant's scores as `Metric.score` returned them: the pairs', then (where swapped) the swapped pairs'."""
    of_variant = [row for row in rows if row.variant == variant]
    faithful = [row.score_faithful for row in of_variant]
    unfaithful = [row.score_unfaithful for row in of_variant]
    if swapped:
        faithful += [row.score_faithful_swap for row in of_variant]
        unfaithful += [row.score_unfaithful_swap for row in of_variant]
    return VariantScores(variant, np.array(faithful, dtype=float), np.array(unfaithful, dtype=float))


def _save_npz(path: Path, arrays: dict[str, Any]) -> None:
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
