"""MEMIT (Meng et al., 2023, "Mass-Editing Memory in a Transformer"): many facts written at once, spread over a range
of MLP output matrices.

For each fact, the hidden state z at the subject's last token after the range's last block is found as ROME finds
its value (a shift that makes the new object the completion, `rome.value_shift`). Then layer by layer, from the first:
with the updates so far applied, the keys K (one column per fact) and the remaining residual R = z − h are taken,
and W gains ΔW = R' Kᵀ (λC + K Kᵀ)⁻¹, with R' the residual divided by the layers left (so the change is spread over
them) and C the layer's key second moment ('identity': the keys' mean square times the identity). As in `rome`, keys
are taken from the rewrite prompts alone, without sampled prefixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..api.records import Rewrite
from .covariance import layer_second_moment
from .rome import COVARIANCES, EditTarget, subject_activations, value_shift
from .settings import SearchOverrides, ValueSearch, architecture, layout
from .weights import EditError, WeightDelta, edited, mlp_output


@dataclass(frozen=True)
class MemitOptions:
    """The editor's settings (`--editor-option`): the edited `layers`, the `module` path when the architecture is not
    in `settings.ARCHITECTURES`, the value `search` settings that differ from the architecture's, the key statistics
    ('sampled' or 'identity'), and `moment_weight` λ, how strongly the keys' statistics hold the rest of the matrix in
    place (the authors' 15000 for GPT-J, estimated on 100k Wikipedia tokens, writes nothing into SmolLM2-135M with
    2,048 sampled tokens; 1000 writes two facts at once, and so does 100 with the identity statistics). Unset, the
    architecture's defaults hold."""

    layers: tuple[int, ...] | None = None
    module: str | None = None
    search: SearchOverrides = ()
    covariance: str = "sampled"
    moment_weight: float = 1000.0

    def __post_init__(self) -> None:
        if self.covariance not in COVARIANCES:
            raise EditError(f"covariance must be one of {', '.join(COVARIANCES)}, not {self.covariance!r}")
        if self.layers is not None and not self.layers:
            raise EditError("layers must name at least one layer")
        if self.moment_weight <= 0:
            raise EditError("moment_weight must be positive")

    def edited_layers(self, model) -> tuple[int, ...]:
        depth = model.config.num_hidden_layers
        return tuple(sorted(self.layers or architecture(model, self.module).layers("memit", depth)))

    def value_search(self, model) -> ValueSearch:
        return architecture(model, self.module).search("memit", self.search)


def memit_deltas(lm, rewrites: Sequence[Rewrite], options: MemitOptions, where: str = "rewrites") -> list[WeightDelta]:
    """The updates, one per edited layer, that write every rewrite into the loaded model `lm` at once."""
    model, tokenizer = lm.model, lm.tokenizer
    mlp = layout(model, options.module)
    layers = options.edited_layers(model)
    modules = [mlp_output(model, layer, mlp) for layer in layers]
    search = options.value_search(model)
    targets = [EditTarget.of(tokenizer, rewrite, f"{where}[{i}]") for i, rewrite in enumerate(rewrites)]
    last_block = model.get_submodule(mlp.block.format(layer=layers[-1]))
    _, hidden = subject_activations(model, last_block, targets)
    goals = hidden.float() + torch.stack(
        [value_shift(model, last_block, target, h, search) for target, h in zip(targets, hidden)]
    )
    deltas: list[WeightDelta] = []
    for done, (layer, module) in enumerate(zip(layers, modules)):
        with edited(model, deltas):
            keys, _ = subject_activations(model, module, targets)
            _, current = subject_activations(model, last_block, targets)
        keys = keys.double()
        residual = (goals.double() - current.double()) / (len(layers) - done)
        if options.covariance == "sampled":
            moment = layer_second_moment(lm, mlp, layer)
        else:
            moment = keys.square().mean() * torch.eye(keys.shape[1], dtype=keys.dtype)
        system = options.moment_weight * moment.to(keys) + keys.T @ keys
        deltas.append(mlp.delta(layer, residual.T.float(), torch.linalg.solve(system, keys.T).T.float()))
    return deltas
