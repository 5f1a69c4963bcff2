"""Where a decoder's MLP output matrices are (`MlpLayout`; per architecture in `settings.ARCHITECTURES`), and weight
edits applied as deltas that are reverted bit for bit, so that one loaded model serves every pair."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..api.errors import EditError


@dataclass(frozen=True)
class MlpLayout:
    """Where layer `l`'s MLP output projection is (`path` with `{layer}`), and whether its weight is stored as
    (in, out) rather than torch's (out, in) (GPT-2's Conv1D)."""

    path: str
    transposed: bool = False

    def parameter(self, layer: int) -> str:
        """The name of layer `layer`'s projection weight among the model's parameters."""
        return f"{self.path.format(layer=layer)}.weight"

    def delta(self, layer: int, left: torch.Tensor, right: torch.Tensor) -> WeightDelta:
        """The update `left @ right` (out × r, r × in) as the change of layer `layer`'s projection weight, in the
        layout it is stored in."""
        if self.transposed:
            return WeightDelta(self.parameter(layer), right.T, left.T)
        return WeightDelta(self.parameter(layer), left, right)

    @property
    def block(self) -> str:
        """The path of the decoder block that holds the projection (`path` up to its `{layer}`)."""
        return self.path.split("{layer}")[0] + "{layer}"


def mlp_output(model: torch.nn.Module, layer: int, mlp: MlpLayout) -> torch.nn.Module:
    """Layer `layer`'s MLP output projection; an EditError names a layer the model does not have."""
    depth = model.config.num_hidden_layers
    if not 0 <= layer < depth:
        raise EditError(f"layer {layer} is out of range: the model has layers 0-{depth - 1}")
    return model.get_submodule(mlp.path.format(layer=layer))


@dataclass(frozen=True)
class WeightDelta:
    """A change to one parameter of a model: its name and the low-rank tensor `left @ right` added to it (rank one
    per ROME fact, at most the number of facts for MEMIT), kept as its factors so that a run can hold every pair's
    edit."""

    parameter: str
    left: torch.Tensor
    right: torch.Tensor

    @property
    def delta(self) -> torch.Tensor:
        return self.left @ self.right


@contextmanager
def edited(model: torch.nn.Module, deltas: Sequence[WeightDelta]) -> Iterator[torch.nn.Module]:
    """The model with the deltas added to its weights; afterwards every touched parameter holds its original values
    again, bit for bit (copied back, not subtracted)."""
    parameters = dict(model.named_parameters())
    originals = {d.parameter: parameters[d.parameter].detach().clone() for d in deltas}
    try:
        with torch.no_grad():
            for d in deltas:
                weight = parameters[d.parameter]
                weight.add_(d.delta.to(device=weight.device, dtype=weight.dtype))
        yield model
    finally:
        with torch.no_grad():
            for name, original in originals.items():
                parameters[name].copy_(original)
