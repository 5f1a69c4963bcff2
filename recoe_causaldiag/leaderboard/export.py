"""Exporting the board and every stored per-pair score to a Hub dataset repository."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets

from ..api.rows import json_number, without_nans
from ..hub_layout import write_parquet
from ..publish import upload_folder
from .board import Board, compute_board
from .queue import JobQueue, iso_seconds

README = """---
license: apache-2.0
pretty_name: Causal Diagnosticity leaderboard results
configs:
- config_name: pairs
  data_files: pairs.parquet
---
# Causal diagnosticity leaderboard results

`leaderboard.json`: one row per model configuration × metric variant, with the model's parameter count
(`parameters`, null where unknown), per-task diagnosticity (mean of d
over valid pairs, 95% CI, exact sign test against 0.5 as `p_value` and Holm-adjusted within the model
configuration as `p_adjusted`, the paper's t-test as `p_ttest`, coverage and coverage-aware D, and `submitted_at`,
when the job behind the figures was submitted, UTC), the mean over tasks of the coverage-aware D and the Copeland
score.
`pairs.parquet` (config `pairs`): every per-pair score of every finished job (`d` = 1 if the faithful explanation
scores higher, 0.5 on a tie, 0 if lower; null where the metric could not score), with the job's `submitted_at`
(UTC), its model's `parameters` and the pair's `cluster` (the entity it shares with other pairs of its dataset,
whose pairs the board's CIs and sign tests resample and count together; null where it stands alone).
"""


_TEXT = datasets.Value("string")
PAIRS_FEATURES = datasets.Features(
    {
        "job_id": datasets.Value("int64"),
        "submitted_at": _TEXT,
        "parameters": datasets.Value("int64"),
        **dict.fromkeys(("model", "revision", "precision", "editor", "explanations"), _TEXT),
        **dict.fromkeys(("pair_id", "task", "metric", "variant"), _TEXT),
        **dict.fromkeys(("score_faithful", "score_unfaithful", "d"), datasets.Value("float64")),
        "cluster": _TEXT,
    }
)
"""The exported per-pair scores: `FinishedScore.to_json`, typed (null where unknown, not scored or, for `cluster`,
where the pair stands alone)."""


def board_document(board: Board) -> list[dict]:
    return [
        {
            "model": r.model,
            "revision": r.revision,
            "precision": r.precision,
            "editor": r.editor,
            "explanations": r.explanations,
            "metric": r.metric,
            "variant": r.variant,
            "parameters": r.parameters,
            "tasks": {
                t: without_nans(
                    asdict(e) | {"p_adjusted": r.p_adjusted[t], "submitted_at": iso_seconds(r.submitted[t])}
                )
                for t, e in r.per_task.items()
            },
            "mean": json_number(r.mean),
            "copeland": json_number(r.copeland),
        }
        for r in board.rows
    ]


def write_export(queue: JobQueue, folder: Path) -> Path:
    """Write README.md, leaderboard.json and pairs.parquet into `folder`: a Hub dataset whose `pairs` config
    `load_dataset` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    scores = queue.finished_scores()
    (folder / "README.md").write_text(README, encoding="utf-8")
    (folder / "leaderboard.json").write_text(
        json.dumps(board_document(compute_board(scores)), indent=1) + "\n", encoding="utf-8"
    )
    rows = [score.to_json() for score in scores]
    columns = {key: [row[key] for row in rows] for key in PAIRS_FEATURES}
    pairs = datasets.Dataset.from_dict(columns, features=PAIRS_FEATURES)
    write_parquet(pairs, folder / "pairs.parquet")
    return folder


@dataclass(frozen=True)
class ExportPlan:
    """What exporting would upload: the files of `folder` to the dataset repo `repo_id`."""

    repo_id: str
    folder: Path
    files: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        return "\n".join(
            [
                f"dataset repo {self.repo_id} from {self.folder}:",
                *(f"  {name}  {size:,} bytes" for name, size in self.files),
            ]
        )


def export_plan(folder: Path, repo_id: str) -> ExportPlan:
    files = tuple(sorted((p.name, p.stat().st_size) for p in folder.iterdir() if p.is_file()))
    return ExportPlan(repo_id, folder, files)


def upload_export(plan: ExportPlan, *, token: str | None = None) -> None:
    """Upload the export to its dataset repo in one commit; one-line PublishError otherwise."""
    upload_folder(plan.repo_id, plan.folder, "Update leaderboard results", token=token)
