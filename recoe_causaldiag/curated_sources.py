"""Reading curated source files: CSV with `# ` provenance lines on top, errors that name file, line and problem."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path


class SourceError(ValueError):
    """A curated source row is invalid; the build stops and names it."""

    def __init__(self, path: Path | str, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path, self.line, self.problem = str(path), line, problem


@dataclass(frozen=True)
class SourceRow:
    """One data row of a curated file, with the line it came from."""

    path: str
    line: int
    values: dict[str, str]

    def error(self, problem: str) -> SourceError:
        return SourceError(self.path, self.line, problem)


def source_path(name: str) -> Path:
    """A curated file of `builders/sources/`, shipped in the package as `recoe_causaldiag/tasks/sources/`."""
    return Path(str(files("recoe_causaldiag.tasks").joinpath("sources", name)))


def read_curated_csv(path: Path, columns: tuple[str, ...]) -> list[SourceRow]:
    """Rows of a curated CSV; every listed column must be present and non-empty."""
    if not path.is_file():
        raise SourceError(path, None, "file not found")
    with path.open(encoding="utf-8", newline="") as handle:
        lines = [(n, text) for n, text in enumerate(handle, start=1) if not text.startswith("#") and text.strip()]
    if not lines:
        raise SourceError(path, None, "no header row")
    reader = csv.reader(text for _, text in lines)
    header = next(reader)
    missing = [c for c in columns if c not in header]
    if missing:
        raise SourceError(path, lines[0][0], f"missing column(s) {missing}; header is {header}")
    rows = []
    for (line, _), values in zip(lines[1:], reader):
        if len(values) != len(header):
            raise SourceError(path, line, f"expected {len(header)} fields, found {len(values)}")
        record = dict(zip(header, (v.strip() for v in values)))
        empty = [c for c in columns if not record[c]]
        if empty:
            raise SourceError(path, line, f"empty field '{empty[0]}'")
        rows.append(SourceRow(str(path), line, record))
    return rows
