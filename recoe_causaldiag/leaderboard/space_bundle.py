"""A standalone copy of the leaderboard Space, ready to push to a Hub Space repository: the app's files, a wheel
of this library, and a requirements.txt that installs that wheel where the checkout's says `-e ..` (a Space
repository holds only its own folder), every other requirement pinned as in the repository's constraints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..packaged_models import packaged_distributions

SPACE_FILES = ("app.py", "about.md", "README.md")
SPACE_FOLDERS = ("seed",)
PACKAGE_SOURCES = ("pyproject.toml", "README.md", "recoe_causaldiag")
CHECKOUT_REQUIREMENT = "-e .."


def pinned(constraints: Path, names: tuple[str, ...]) -> list[str]:
    """`name==version` lines of `constraints` for the given distributions."""
    pins = {}
    for line in constraints.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            pins[match[1].lower()] = line.strip()
    missing = [n for n in names if n.lower() not in pins]
    if missing:
        raise ValueError(f"{constraints} pins no version of {missing}")
    return [pins[n.lower()] for n in names]


def bundle_space(repo: Path, out: Path) -> Path:
    """Write the standalone Space into `out` (which must be empty or missing); returns its requirements file."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    space = repo / "leaderboard_space"
    out.mkdir(parents=True, exist_ok=True)
    for name in SPACE_FILES:
        shutil.copyfile(space / name, out / name)
    for name in SPACE_FOLDERS:
        shutil.copytree(space / name, out / name)
    wheels = out / "wheels"
    with tempfile.TemporaryDirectory(prefix="causaldiag-wheel-") as scratch:
        source = Path(scratch)  # a clean copy: the build leaves nothing in the checkout and takes nothing stale
        for name in PACKAGE_SOURCES:
            if (repo / name).is_dir():
                shutil.copytree(repo / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            else:
                shutil.copyfile(repo / name, source / name)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--no-deps",
                "--no-build-isolation",
                "--wheel-dir",
                str(wheels),
                str(source),
            ],
            check=True,
        )
    (wheel,) = wheels.glob("recoe_causaldiag-*.whl")
    lines = []
    for line in (space / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() == CHECKOUT_REQUIREMENT:
            lines.append(f"./wheels/{wheel.name}")
        elif line.strip() and not line.startswith("#"):
            lines.append(line)
    lines += pinned(repo / "constraints.txt", tuple(packaged_distributions()))
    requirements = out / "requirements.txt"
    requirements.write_text(
        "# Written by `causaldiag space-bundle`: this library as a wheel, the rest pinned.\n" + "\n".join(lines) + "\n",
        encoding="utf-8",
    )
    return requirements
