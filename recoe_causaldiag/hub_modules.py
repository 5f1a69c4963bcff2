"""The library's `evaluate` modules under their Hub ids (`causal-diagnosticity/<name>`).

`evaluate.load("causal-diagnosticity/<name>")` fetches the module from its Hub Space when the Hub answers and
otherwise falls back to evaluate's module cache. `install_hub_modules` puts every module into that cache exactly as
a download would have left it (evaluate's own importable-file layout, newest version last), so the Hub id loads
from any folder with no network; the module code is generated from the installed library (`evaluate_modules`), so
it always matches it. A stamp beside the modules records which library source they were generated from, so
`ensure_hub_modules` (run by the commands that score metrics) reinstalls only after the library changed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path

from . import __version__
from .paths import write_whole

log = logging.getLogger(__name__)

HUB_ORGANISATION = "causal-diagnosticity"
STAMP = "causal-diagnosticity-modules.json"


def hub_id(name: str) -> str:
    """The Hub id of module `name`: the Space `evaluate.load` reads it from."""
    return f"{HUB_ORGANISATION}/{name}"


def evaluate_metrics_cache() -> Path:
    """The folder of evaluate's cached metric modules, found as evaluate finds it (HF_MODULES_CACHE, else
    HF_HOME/modules, else XDG_CACHE_HOME/huggingface/modules), without importing evaluate."""
    home = os.path.expanduser(
        os.getenv("HF_HOME", os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "huggingface"))
    )
    modules = Path(os.getenv("HF_MODULES_CACHE", os.path.join(home, "modules")))
    return modules / "evaluate_modules" / "metrics"


def library_digest() -> str:
    """The sha256 of the library version and its Python sources, from which the modules are generated."""
    digest = hashlib.sha256(__version__.encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def installed_digest() -> str | None:
    """The library digest the cached modules were generated from, or None when they are not installed."""
    try:
        return json.loads((evaluate_metrics_cache() / STAMP).read_text(encoding="utf-8"))["library"]
    except (OSError, ValueError, KeyError):
        return None


def install_hub_modules() -> list[str]:
    """Write every module into evaluate's cache under its Hub id, as a download would, and return the Hub ids."""
    from datasets import DownloadMode
    from evaluate.loading import _create_importable_file, init_dynamic_modules

    from .evaluate_modules import generated_files, module_registry

    dynamic_modules = init_dynamic_modules(hf_modules_cache=str(evaluate_metrics_cache().parents[1]))
    installed = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in module_registry():
            script = Path(scratch) / f"{name}.py"
            script.write_text(generated_files(name)[script.name], encoding="utf-8")
            module_path, _ = _create_importable_file(
                local_path=str(script),
                local_imports=[],
                additional_files=[],
                dynamic_modules_path=dynamic_modules,
                module_namespace="metrics",
                name=hub_id(name),
                download_mode=DownloadMode.REUSE_DATASET_IF_EXISTS,
            )
            cached = Path(dynamic_modules).parent / Path(*module_path.split(".")).with_suffix(".py")
            os.utime(cached)
            installed.append(hub_id(name))
    stamp = {"library": library_digest(), "version": __version__, "modules": installed}
    write_whole(evaluate_metrics_cache() / STAMP, lambda path: path.write_text(json.dumps(stamp, indent=1)))
    return installed


def ensure_hub_modules() -> None:
    """Install the modules into evaluate's cache unless this library's are there already; a cache that cannot be
    written is reported, not raised (the run does not need the modules)."""
    if installed_digest() == library_digest():
        return
    try:
        install_hub_modules()
    except OSError as err:
        log.warning("could not install the evaluate modules into %s: %s", evaluate_metrics_cache(), err)
