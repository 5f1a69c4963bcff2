"""A submitted `evaluate` module as files and one sha256 over them: what the admin reviews, what the approval
records, and what the worker checks before it runs the module, so that exactly the reviewed code runs."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

HUB_PATTERNS = ("*.py", "*.txt", "*.json")
"""The files of a Hub module that are fetched (code, requirements, metadata)."""


class ModuleFetchError(RuntimeError):
    """A submitted module could not be fetched from the Hub."""


@dataclass(frozen=True)
class ModuleSource:
    """The files of a module: (path relative to its folder, bytes), sorted by path."""

    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def read(cls, folder: Path) -> ModuleSource:
        """Every file under `folder` (hidden folders such as a download cache left out)."""
        files = (
            (path.relative_to(folder).as_posix(), path.read_bytes())
            for path in folder.rglob("*")
            if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts)
        )
        return cls(tuple(sorted(files)))

    @property
    def sha256(self) -> str:
        """One hash over every file's path and bytes: any change to any file changes it."""
        digest = hashlib.sha256()
        for name, content in self.files:
            digest.update(name.encode() + b"\0" + str(len(content)).encode() + b"\0" + content)
        return digest.hexdigest()

    def listing(self) -> str:
        """The module as the admin reviews it: its sha256, then each file's path and full text."""
        parts = [f"sha256 {self.sha256}"]
        for name, content in self.files:
            parts.append(f"\n===== {name} ({len(content)} bytes) =====\n{content.decode('utf-8', errors='replace')}")
        return "\n".join(parts)


def fetch_module(source: str, into: Path) -> Path:
    """The module as a folder inside `into`: a copy of an uploaded folder (an absolute path), or the files of a Hub
    module (org/name) fetched here (a metric's own process has no network)."""
    folder = Path(source)
    if folder.is_absolute():
        copy = into / "module" / folder.name
        shutil.copytree(folder, copy)
        return copy
    from huggingface_hub import snapshot_download

    copy = into / "module" / source.split("/")[-1]
    try:
        snapshot_download(source, repo_type="space", local_dir=copy, allow_patterns=list(HUB_PATTERNS))
    except Exception:  # the Hub client raises many kinds (not found, gated, network); each is one refusal
        raise ModuleFetchError(f"the Hub module {source} could not be fetched") from None
    return copy
