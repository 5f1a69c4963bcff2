"""Attribution patching (Nanda, 2023; Syed et al., 2023; Kramár et al., 2024 "AtP"): the first-order estimate of
activation patching. The effect on a read-out r of restoring the source run's residual stream at (position p,
layer l) in the target run is approximated by

    (h_source[l, p] − h_target[l, p]) · ∂r/∂h_target[l, p],

the gradient taken once in the unpatched target run, so all the (position, layer) cells of a causal matrix cost one
forward and one backward per read-out (the read-outs' backward passes batched into one) instead of one patched
forward each. The estimate is exact for a read-out linear in the residual stream and degrades where attention or the
softmax saturates; the AtP* corrections (Kramár et al., 2024) are for attention-key and multi-layer node patches and
do not apply to single residual-stream sites, so none is made here; `CausalFaithfulness(patching="attribution")`
patches its highest-ranked cells exactly.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..packed_rows import accepts_packed_rows
from .activation_patching import Ending, TargetRun, decoder_layers, layer_output, packed_endings, stem_cache


def attribution_effects(
    model: torch.nn.Module,
    source_states: Sequence[torch.Tensor],
    stem_ids: Sequence[int],
    endings: Sequence[Ending],
    positions: Sequence[int],
    layers: Sequence[int],
    target: TargetRun | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """First-order effects [positions, layers, endings, read-outs] of restoring `source_states` (the source run's
    `residual_stream`, as long as the stem) at each (position, layer) of the stem in the target runs (the stem
    `stem_ids` followed by each ending, as `patched_readouts` reads them), and the unpatched target runs' read-outs
    [endings, read-outs].

    The endings share the stem's computation, as in `patched_readouts`; the stem's positions before the first
    patched or read one are computed once without gradients (no cell there is patched, and what they compute is the
    same under every patch), so the backward pass starts at the first patched position. Where `target`, their
    unpatched `target_run` (taken outside inference mode), is given, they are read from its KV cache. Read-outs
    whose gradients at the logits are equal (the answer, which every ending reads in the stem) share one row of the
    batched backward pass."""
    if not endings:
        raise ValueError("no ending to read")
    if any(not 0 <= p < len(stem_ids) for p in positions):
        raise ValueError(f"a patched position lies outside the {len(stem_ids)}-token stem")
    packed = packed_endings(stem_ids, endings)
    if packed.branched and not accepts_packed_rows(model):
        each = [attribution_effects(model, source_states, stem_ids, [e], positions, layers) for e in endings]
        return torch.cat([effects for effects, _ in each], dim=2), torch.cat([read for _, read in each])
    if target is not None and target.packed != packed:
        raise ValueError("the target run given is of another stem or other endings")
    device, dtype = model.device, model.dtype
    columns = sorted({column for own in packed.columns for column in own})
    start = min([columns[0], *positions])
    cache = stem_cache(model, stem_ids, start, target) if start > 0 else None
    modules = decoder_layers(model)
    kept: dict[int, torch.Tensor] = {}

    def keep(layer: int):
        def hook(_module, _args, output):
            kept[layer] = layer_output(output)

        return hook

    hooks = [modules[layer].register_forward_hook(keep(layer)) for layer in set(layers)]
    try:
        with torch.enable_grad():
            logits = model(
                **packed.inputs(start, 1, dtype, device),
                past_key_values=cache,
                use_cache=False,
                logits_to_keep=torch.tensor(columns, device=device) - start,
            ).logits
    finally:
        for hook in hooks:
            hook.remove()
    at = {column: j for j, column in enumerate(columns)}
    outputs = torch.stack(
        [end.readout(logits[:, [at[c] for c in own]])[0] for end, own in zip(endings, packed.columns, strict=True)]
    )
    states = [kept[layer] for layer in layers]
    where = torch.tensor(positions, dtype=torch.long, device=device) - start
    deltas = [
        source_states[layer][list(positions)].to(state.dtype) - state[0, where].detach()
        for layer, state in zip(layers, states, strict=True)
    ]
    flat = outputs.flatten()
    one_each = torch.eye(len(flat), dtype=flat.dtype, device=flat.device)
    (at_logits,) = torch.autograd.grad(flat, logits, grad_outputs=one_each, is_grads_batched=True, retain_graph=True)
    distinct, which = torch.unique(at_logits.flatten(1), dim=0, return_inverse=True)
    grads = torch.autograd.grad(logits, states, grad_outputs=distinct.view(-1, *logits.shape), is_grads_batched=True)
    effects = torch.stack(
        [(delta * grad[:, 0, where]).sum(-1) for delta, grad in zip(deltas, grads, strict=True)], dim=-1
    )[which]
    effects = effects.permute(1, 2, 0).reshape(len(positions), len(layers), *outputs.shape)
    return effects.double().cpu(), outputs.detach()
