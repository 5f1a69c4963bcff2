"""Publishing built datasets to the Hugging Face Hub: one dataset repo each, tagged with its version."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .api.errors import PublishError
from .hub_layout import read_manifest


@dataclass(frozen=True)
class UploadPlan:
    """What publishing one dataset folder would do."""

    repo_id: str
    folder: Path
    tag: str
    files: tuple[tuple[str, int], ...]
    repo_type: str = "dataset"

    def describe(self) -> str:
        lines = [f"{self.repo_type} repo {self.repo_id} (tag {self.tag}) from {self.folder}:"]
        lines += [f"  {name}  {size:,} bytes" for name, size in self.files]
        return "\n".join(lines)


def _files(folder: Path) -> tuple[tuple[str, int], ...]:
    return tuple(sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file()))


def upload_plan(folder: Path, repo_prefix: str) -> UploadPlan:
    manifest = read_manifest(folder)
    return UploadPlan(f"{repo_prefix}/{manifest['name']}", folder, f"v{manifest['version']}", _files(folder))


def space_plan(folder: Path, organisation: str) -> UploadPlan:
    """The Gradio Space of one `evaluate` module folder (`<name>/<name>.py`, card, app, requirements), tagged with
    the library version; `evaluate.load("<organisation>/<name>")` reads it."""
    from . import __version__

    return UploadPlan(f"{organisation}/{folder.name}", folder, f"v{__version__}", _files(folder), "space")


def upload_folder(
    repo_id: str,
    folder: Path,
    commit_message: str,
    *,
    tag: str | None = None,
    token: str | None = None,
    repo_type: str = "dataset",
) -> None:
    """Create the repo (a dataset, or a Gradio Space) if needed, upload `folder` in one commit, and tag it;
    one-line PublishError when offline, without a token, or when the Hub refuses."""
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise PublishError(f"cannot upload to {repo_id}: offline (HF_HUB_OFFLINE is set); use --dry-run")
    token = token or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login`")
    api = HfApi(token=token)
    try:
        sdk = {"space_sdk": "gradio"} if repo_type == "space" else {}
        api.create_repo(repo_id, repo_type=repo_type, exist_ok=True, **sdk)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type=repo_type, commit_message=commit_message)
        if tag:
            api.create_tag(repo_id, tag=tag, repo_type=repo_type, exist_ok=True)
    except Exception as err:
        first_line = (str(err).splitlines() or [type(err).__name__])[0]
        raise PublishError(f"uploading to {repo_id} failed: {type(err).__name__}: {first_line}") from None


def publish(plan: UploadPlan, *, token: str | None = None) -> None:
    """Upload one planned folder to its repo, tagged with its version."""
    upload_folder(plan.repo_id, plan.folder, f"Release {plan.tag}", tag=plan.tag, token=token, repo_type=plan.repo_type)
