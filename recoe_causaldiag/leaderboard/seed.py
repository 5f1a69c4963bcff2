"""Pre-seeding an empty board from results files (SPEC §8) that carry per-pair scores."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..api.rows import PairScoreRow
from ..api.run_spec import PRECISIONS
from .integrity import InvalidData, check_parameters, check_scored_rows
from .queue import MODEL_JOB, JobQueue, JobRequest, Submission


@dataclass(frozen=True)
class FinishedResults:
    """A results file read and checked, ready to be stored as one finished job: its request, who submitted it, its
    per-pair scores by task (name, dataset version, rows), the job's log line and the model's parameter count."""

    request: JobRequest
    submitter: str
    tasks: tuple[tuple[str, str, tuple[PairScoreRow, ...]], ...]
    log: str
    parameters: int | None


def read_results(path: Path) -> FinishedResults:
    """The finished job a results file describes, its request naming the digest of what the file holds (so that
    files of one model, tasks and metrics are jobs of their own); InvalidData naming the file when it cannot be
    read, is no results file, or holds a row or parameter count the board would refuse."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        model = doc["model"]
        versions: dict[str, str] = doc["dataset_versions"]
        by_task: dict[str, list[PairScoreRow]] = defaultdict(list)
        for row in map(PairScoreRow.from_json, doc["pairs"]):
            by_task[row.task].append(row)
        check_scored_rows(row for rows in by_task.values() for row in rows)
        parameters = check_parameters(model.get("parameters"))
        metrics = tuple(dict.fromkeys(r["metric"] for r in doc["results"]))
        request = JobRequest(
            MODEL_JOB,
            model["name"],
            str(model.get("revision") or "main"),
            model.get("dtype") if model.get("dtype") in PRECISIONS else "auto",
            doc["editor"],
            doc["explanations"],
            tuple(versions),
            metrics,
            results_sha256=hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest(),
        )
    except InvalidData as error:
        raise InvalidData(f"seed results {path}: {error}") from error
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InvalidData(f"seed results {path}: not a readable results file ({error})") from error
    return FinishedResults(
        request,
        f"results file {Path(path).name}",
        tuple((task, versions[task], tuple(by_task.get(task, []))) for task in versions),
        f"imported from {Path(path).name} (created {doc.get('created_at', '?')})",
        parameters,
    )


def import_results(queue: JobQueue, results: FinishedResults) -> Submission:
    """Store checked results as one FINISHED job; a duplicate of an already imported file is answered as such."""
    return queue.store_finished(results.request, results.submitter, results.tasks, results.log, results.parameters)


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
    job at all), one finished job each. Every file is read and checked before any is stored, so a bad file leaves
    the board empty (and seeding is tried again on the next start) rather than seeded in part for good."""
    if not paths or not queue.is_empty():
        return []
    checked = [read_results(path) for path in results_files(paths)]
    return [import_results(queue, results) for results in checked]
