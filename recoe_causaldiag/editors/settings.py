"""What a weight edit is configured by: the value search, and per architecture (`ARCHITECTURES`, by
`config.model_type`) where its MLP output projections are and the layers and value search ROME and MEMIT use by
default, taken from a published configuration for a model of that family and scaled to the edited model's depth.
Every default can be overridden with `--editor-option KEY=VALUE`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from .weights import EditError, MlpLayout


@dataclass(frozen=True)
class ValueSearch:
    """How the value that makes a prompt complete with the new object is found: gradient descent for at most
    `steps` steps (`learning_rate`, `weight_decay`), its shift clamped to `clamp` times the original value's norm,
    stopping once the new object's mean NLL is under `target_nll`."""

    steps: int = 25
    learning_rate: float = 0.5
    weight_decay: float = 1e-3
    clamp: float = 4.0
    target_nll: float = 0.05

    def __post_init__(self) -> None:
        if self.steps < 1 or self.learning_rate <= 0 or self.clamp <= 0:
            raise EditError("steps must be at least 1, learning_rate and clamp positive")


SEARCH_OPTIONS = tuple(f.name for f in dataclasses.fields(ValueSearch))

SearchOverrides = tuple[tuple[str, float], ...]
"""Value-search settings given by the user (`--editor-option steps=40`), sorted by name, over an architecture's."""


def search_overrides(options: dict[str, float]) -> SearchOverrides:
    """`options` as overrides, checked: an EditError names an unknown key or a value out of range."""
    unknown = [key for key in options if key not in SEARCH_OPTIONS]
    if unknown:
        raise EditError(f"the value search has no setting '{unknown[0]}' (settings: {', '.join(SEARCH_OPTIONS)})")
    dataclasses.replace(ValueSearch(), **options)
    return tuple(sorted(options.items()))


@dataclass(frozen=True)
class EditorDefaults:
    """One editor's defaults for an architecture: the edited layers at the reference depth (consecutive for MEMIT)
    and the value search."""

    layers: tuple[int, ...]
    search: ValueSearch = ValueSearch()


@dataclass(frozen=True)
class Architecture:
    """A decoder family: its MLP output projection, and each editor's defaults as published for `reference`, a
    model of `depth` layers (`source` says where they come from)."""

    mlp: MlpLayout
    reference: str
    depth: int
    source: str
    rome: EditorDefaults
    memit: EditorDefaults

    def layers(self, editor: str, depth: int) -> tuple[int, ...]:
        """The default layers of `editor` ('rome' or 'memit') for a model of `depth` layers: the reference's first
        layer at the same fraction of the depth (at least 1), as many consecutive layers as the reference edits."""
        reference = getattr(self, editor).layers
        count = min(len(reference), depth - 1)
        first = min(max(1, round(reference[0] * depth / self.depth)), depth - count)
        return tuple(range(first, first + count))

    def search(self, editor: str, overrides: SearchOverrides = ()) -> ValueSearch:
        """The value search of `editor`, with the user's `overrides`."""
        return dataclasses.replace(getattr(self, editor).search, **dict(overrides))


LLAMA_STYLE = MlpLayout("model.layers.{layer}.mlp.down_proj")

SMOLLM2 = Architecture(
    LLAMA_STYLE,
    reference="SmolLM2-135M-Instruct",
    depth=30,
    source="tuned on this project's packaged model (README, make bench): ROME's layer 5 as EasyEdit's Llama "
    "configurations; MEMIT's layers 3-7; EasyEdit's Llama value search",
    rome=EditorDefaults((5,)),
    memit=EditorDefaults((3, 4, 5, 6, 7)),
)
EASYEDIT_7B = dict(
    rome=EditorDefaults((5,)),
    memit=EditorDefaults((4, 5, 6, 7, 8)),
)
ARCHITECTURES: dict[str, Architecture] = {
    "llama": SMOLLM2,
    "mistral": Architecture(
        LLAMA_STYLE, "Mistral-7B-v0.1", 32, "EasyEdit hparams/{ROME,MEMIT}/mistral-7b.yaml", **EASYEDIT_7B
    ),
    "qwen2": Architecture(
        LLAMA_STYLE, "Qwen2.5-7B", 28, "EasyEdit hparams/{ROME,MEMIT}/qwen2.5-7b.yaml", **EASYEDIT_7B
    ),
    **{
        gemma: dataclasses.replace(
            SMOLLM2, source=f"no published ROME/MEMIT configuration for Gemma; {SMOLLM2.reference}'s, by depth"
        )
        for gemma in ("gemma", "gemma2", "gemma3_text")
    },
    "gpt2": Architecture(
        MlpLayout("transformer.h.{layer}.mlp.c_proj", transposed=True),
        "GPT-2 XL",
        48,
        "EasyEdit hparams/{ROME,MEMIT}/gpt2-xl.yaml (the ROME and MEMIT authors' settings)",
        rome=EditorDefaults((17,), ValueSearch(steps=20, weight_decay=0.5)),
        memit=EditorDefaults((13, 14, 15, 16, 17), ValueSearch(steps=20, weight_decay=0.5, clamp=0.75)),
    ),
}
"""The supported decoder families by `config.model_type`."""


def architecture(model: torch.nn.Module, module_path: str | None = None) -> Architecture:
    """The model's architecture. With `module_path` (with `{layer}`) its MLP is there, and a family not in the table
    takes SmolLM2's defaults by depth; without it an EditError names the model type and the option to set."""
    model_type = getattr(model.config, "model_type", None)
    known = ARCHITECTURES.get(model_type)
    if module_path:
        return dataclasses.replace(known or SMOLLM2, mlp=MlpLayout(module_path))
    if known is None:
        raise EditError(
            f"cannot locate the MLP of model type {model_type!r}; set it with "
            "--editor-option module=<path with {layer}, e.g. model.layers.{layer}.mlp.down_proj>"
        )
    return known


def layout(model: torch.nn.Module, module_path: str | None = None) -> MlpLayout:
    """Where the model's MLP output projections are: `module_path` when given, else its architecture's."""
    return architecture(model, module_path).mlp
