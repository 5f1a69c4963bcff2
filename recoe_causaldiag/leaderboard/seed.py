"""Pre-seeding an empty board from results files (SPEC §8) that carry per-pair scores."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from ..api.rows import PairScoreRow
from ..api.run_spec import PRECISIONS
from .queue import MODEL_JOB, JobQueue, JobRequest, Submission


def import_results(queue: JobQueue, path: Path) -> Submission:
    """Store a results file as one FINISHED job, with its model's parameter count where the file records it (results
    schema 1.6 on); a duplicate of an already imported file is answered as such."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    model = doc["model"]
    versions: dict[str, str] = doc["dataset_versions"]
    by_task: dict[str, list[PairScoreRow]] = defaultdict(list)
    for row in map(PairScoreRow.from_json, doc["pairs"]):
        by_task[row.task].append(row)
    metrics = tuple(dict.fromkeys(r["metric"] for r in doc["results"]))
    precision = model.get("dtype") if model.get("dtype") in PRECISIONS else "auto"
    request = JobRequest(
        MODEL_JOB,
        model["name"],
        str(model.get("revision") or "main"),
        precision,
        doc["editor"],
        doc["explanations"],
        tuple(versions),
        metrics,
    )
    tasks = [(task, versions[task], by_task.get(task, [])) for task in versions]
    return queue.store_finished(
        request,
        f"results file {Path(path).name}",
        tasks,
        f"imported from {Path(path).name} (created {doc.get('created_at', '?')})",
        model.get("parameters"),
    )


def results_files(paths: Sequence[Path]) -> list[Path]:
    """The results files that `paths` name: each file itself, each folder's `*.json` files in name order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(path.glob("*.json"))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"seed results {path}: no such file or folder")
    return files


def seed_if_empty(queue: JobQueue, paths: Sequence[Path]) -> list[Submission]:
    """Import the results files `paths` name (files, or folders of them) on first start only (when the queue has no
    job at all), one finished job each."""
    if not paths or not queue.is_empty():
        return []
    return [import_results(queue, path) for path in results_files(paths)]
