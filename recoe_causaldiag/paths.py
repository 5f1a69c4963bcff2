"""Where the package keeps converted models, built datasets and other caches."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "CAUSALDIAG_CACHE"


def cache_root() -> Path:
    """The user cache folder (`$CAUSALDIAG_CACHE`, else `$XDG_CACHE_HOME/causaldiag`, else `~/.cache/causaldiag`)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "causaldiag"
