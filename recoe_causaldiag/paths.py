"""Where the package keeps converted models, built datasets and other caches."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

CACHE_ENV = "CAUSALDIAG_CACHE"


def cache_root() -> Path:
    """The user cache folder (`$CAUSALDIAG_CACHE`, else `$XDG_CACHE_HOME/causaldiag`, else `~/.cache/causaldiag`)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "causaldiag"


def umask() -> int:
    """The process's file mode creation mask (read by setting it and setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A staging folder beside `target` that replaces it whole when the block succeeds and vanishes when it fails,
    so `target` is never seen half-written; it ends with the permissions of a folder made under the user's umask
    (a staging folder starts private)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        yield staging
        staging.chmod(0o777 & ~umask())
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


@contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold the inter-process lock of cache entry `target` (a file beside it) while the block runs, so that of two
    processes finding the entry missing, one builds it and the other finds it built."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.parent / f".{target.name}.lock"):
        yield


def write_whole(target: Path, write: Callable[[Path], object]) -> None:
    """Write the file `target` with `write(path)` through a staged file beside it, so that it appears whole or not
    at all, with the permissions of a file made under the user's umask."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, staged = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(handle)
    try:
        write(Path(staged))
        Path(staged).chmod(0o666 & ~umask())
        os.replace(staged, target)
    finally:
        Path(staged).unlink(missing_ok=True)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (read in blocks, so a model file of any size fits)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
