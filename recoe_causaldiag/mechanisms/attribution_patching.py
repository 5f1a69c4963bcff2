"""Attribution patching (Nanda, 2023; Syed et al., 2023; Kramár et al., 2024 "AtP"): the first-order estimate of
activation patching. The effect on a read-out r of restoring the source run's residual stream at (position p,
layer l) in the target run is approximated by

    (h_source[l, p] − h_target[l, p]) · ∂r/∂h_target[l, p],

the gradient taken once in the unpatched target run, so every (position, layer) cell of a causal matrix costs one
forward and one backward per read-out instead of one patched forward each. The estimate is exact for a read-out
linear in the residual stream and degrades where attention or the softmax saturates; the AtP* corrections
(Kramár et al., 2024) are for attention-key and multi-layer node patches and do not apply to single residual-stream
sites, so none is made here; `CausalFaithfulness(patching="attribution")` patches its highest-ranked cells exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .activation_patching import Readout, decoder_layers, layer_output


def attribution_effects(
    model: torch.nn.Module,
    source_states: Sequence[torch.Tensor],
    target_ids: Sequence[int],
    positions: Sequence[int],
    layers: Sequence[int],
    readout: Readout,
    *,
    read: Sequence[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """First-order effects [positions, layers, read-outs] of restoring `source_states` (the source run's
    `residual_stream`) at each (position, layer) of the target run, and the unpatched target run's read-out of the
    logits at the positions `read` (ascending)."""
    modules = decoder_layers(model)
    kept: dict[int, torch.Tensor] = {}

    def keep(layer: int):
        def hook(_module, _args, output):
            kept[layer] = layer_output(output)

        return hook

    hooks = [modules[layer].register_forward_hook(keep(layer)) for layer in set(layers)]
    try:
        with torch.enable_grad():
            target = torch.tensor([list(target_ids)], device=model.device)
            logits = model(target, use_cache=False, logits_to_keep=torch.tensor(list(read), device=model.device)).logits
            outputs = readout(logits)[0]
            states = [kept[layer] for layer in layers]
            effects = torch.empty(len(positions), len(layers), len(outputs), dtype=torch.float64)
            where = list(positions)
            for k in range(len(outputs)):
                grads = torch.autograd.grad(outputs[k], states, retain_graph=k + 1 < len(outputs))
                for j, (layer, state, grad) in enumerate(zip(layers, states, grads, strict=True)):
                    delta = source_states[layer][where].to(state.dtype) - state[0, where].detach()
                    effects[:, j, k] = (delta * grad[0, where]).sum(-1).double().cpu()
    finally:
        for hook in hooks:
            hook.remove()
    return effects, outputs.detach()
