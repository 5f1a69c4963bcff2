"""Publishing built datasets to the Hugging Face Hub: one dataset repo each, tagged with its version."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .hub_layout import read_manifest


class PublishError(RuntimeError):
    """The Hub could not be reached or refused the upload."""


@dataclass(frozen=True)
class UploadPlan:
    """What publishing one dataset folder would do."""

    repo_id: str
    folder: Path
    tag: str
    files: tuple[tuple[str, int], ...]

    def describe(self) -> str:
        lines = [f"dataset repo {self.repo_id} (tag {self.tag}) from {self.folder}:"]
        lines += [f"  {name}  {size:,} bytes" for name, size in self.files]
        return "\n".join(lines)


def upload_plan(folder: Path, repo_prefix: str) -> UploadPlan:
    manifest = read_manifest(folder)
    files = tuple(sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file()))
    return UploadPlan(f"{repo_prefix}/{manifest['name']}", folder, f"v{manifest['version']}", files)


def upload_folder(
    repo_id: str, folder: Path, commit_message: str, *, tag: str | None = None, token: str | None = None
) -> None:
    """Create the dataset repo if needed, upload `folder` in one commit, and tag it; one-line PublishError
    when offline, without a token, or when the Hub refuses."""
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise PublishError(f"cannot upload to {repo_id}: offline (HF_HUB_OFFLINE is set); use --dry-run")
    token = token or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login`")
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="dataset", exist_ok=True)
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset", commit_message=commit_message)
        if tag:
            api.create_tag(repo_id, tag=tag, repo_type="dataset", exist_ok=True)
    except Exception as err:
        first_line = (str(err).splitlines() or [type(err).__name__])[0]
        raise PublishError(f"uploading to {repo_id} failed: {type(err).__name__}: {first_line}") from None


def publish(plan: UploadPlan, *, token: str | None = None) -> None:
    """Upload one built dataset folder to its repo, tagged with its version."""
    upload_folder(plan.repo_id, plan.folder, f"Release {plan.tag}", tag=plan.tag, token=token)
