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


def publish(plan: UploadPlan, *, token: str | None = None) -> None:
    """Create the dataset repo if needed, upload the folder in one commit, and tag it."""
    from huggingface_hub import HfApi, get_token

    token = token or get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login`")
    api = HfApi(token=token)
    try:
        api.create_repo(plan.repo_id, repo_type="dataset", exist_ok=True)
        api.upload_folder(repo_id=plan.repo_id, folder_path=str(plan.folder), repo_type="dataset",
                          commit_message=f"Release {plan.tag}")
        api.create_tag(plan.repo_id, tag=plan.tag, repo_type="dataset", exist_ok=True)
    except Exception as err:
        first_line = (str(err).splitlines() or [type(err).__name__])[0]
        raise PublishError(f"publishing {plan.repo_id} failed: {type(err).__name__}: {first_line}") from None
