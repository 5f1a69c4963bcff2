"""Attribution patching is the first-order estimate of activation patching: for a source a small step away from the
target run, its effects equal the exact patches' to first order at every (position, layer) cell; and CaF's
attribution variant re-patches its highest-ranked cells exactly."""

import numpy as np
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

from recoe_causaldiag.mechanisms import attribution_patching
from recoe_causaldiag.mechanisms.activation_patching import (
    Ending,
    Patch,
    decoder_layers,
    layer_output,
    patched_readouts,
    residual_stream,
    target_run,
)
from recoe_causaldiag.mechanisms.attribution_patching import attribution_effects

IDS = [5, 17, 3, 42, 8, 29, 11, 60]
POSITIONS = (1, 3, 5)
LAYERS = (0, 1, 2)
READ = tuple(range(5, len(IDS)))  # the answer read at position 5, then the positions after it
SIZES = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
}
"""The tiny models' sizes, the same for every architecture tested."""


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SIZES, num_key_value_heads=4)).eval().double()


def read(logits):
    """Two smooth read-outs of the last positions: p(token 7) at the first read position, mean log p(token 9)."""
    logits = logits.double()
    return torch.stack(
        [torch.softmax(logits[:, 0], -1)[:, 7], torch.log_softmax(logits[:, 1:], -1)[..., 9].mean(-1)], dim=-1
    )


def nudged(states, step):
    """The residual stream moved by `step` along a fixed random direction at every position and layer."""
    generator = torch.Generator().manual_seed(1)
    return [state + step * torch.randn(state.shape, generator=generator, dtype=state.dtype) for state in states]


def test_effects_match_exact_patches_to_first_order(model):
    target = residual_stream(model, IDS)
    patches = [Patch((), ())] + [Patch((p,), (layer,)) for p in POSITIONS for layer in LAYERS]
    errors = []
    for step in (1e-3, 1e-4):
        source = nudged(target, step)
        exact = patched_readouts(model, IDS, IDS, patches, [Ending((), READ, read)], source_states=source)[:, 0]
        exact = (exact[1:] - exact[0]).reshape(len(POSITIONS), len(LAYERS), 2)
        approximate, unpatched = attribution_effects(model, source, IDS, [Ending((), READ, read)], POSITIONS, LAYERS)
        approximate = approximate[:, :, 0]
        with torch.no_grad():
            assert torch.allclose(unpatched[0], read(model(torch.tensor([IDS])).logits[:, 5:])[0])
        assert approximate.abs().max() > 0
        errors.append(float((approximate - exact).abs().max() / exact.abs().max()))
    # relative error shrinks with the step (first order): ten times smaller step, about ten times smaller error
    assert errors[1] < errors[0] / 5 and errors[1] < 2e-2


def test_positions_after_the_answer_position_cannot_change_the_answer(model):
    source = nudged(residual_stream(model, IDS), 1e-2)
    effects, _ = attribution_effects(model, source, IDS, [Ending((), READ, read)], (6, 7), LAYERS)
    effects = effects[:, :, 0]
    assert torch.all(effects[:, :, 0] == 0)  # the answer is read at position 5: causal attention
    assert effects[:, :, 1].abs().max() > 0 and np.isfinite(effects.numpy()).all()


def by_definition(model, source, ids, positions, layers, read_at):
    """(h_source − h_target) · ∂r/∂h_target at every cell, for each read-out r: one forward of the whole input with
    gradients, and one backward per read-out."""
    kept, modules = {}, decoder_layers(model)
    hooks = [
        modules[n].register_forward_hook(lambda _m, _a, out, n=n: kept.__setitem__(n, layer_output(out)))
        for n in layers
    ]
    try:
        outputs = read(model(torch.tensor([list(ids)])).logits[:, list(read_at)])[0]
    finally:
        for hook in hooks:
            hook.remove()
    effects = torch.zeros(len(positions), len(layers), len(outputs), dtype=torch.float64)
    for k, output in enumerate(outputs):
        grads = torch.autograd.grad(output, [kept[n] for n in layers], retain_graph=True)
        for j, (n, grad) in enumerate(zip(layers, grads, strict=True)):
            for i, p in enumerate(positions):
                effects[i, j, k] = ((source[n][p] - kept[n][0, p]) * grad[0, p]).sum()
    return effects, outputs.detach()


@pytest.fixture(scope="module")
def sliding_window_model():
    """A Gemma 3 whose sliding-window layers (a 4-token window, shorter than the inputs) cannot take packed rows."""
    torch.manual_seed(0)
    config = Gemma3TextConfig(
        **SIZES,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=4,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
    )
    return Gemma3ForCausalLM(config).eval().double()


@pytest.mark.parametrize("kind", ["packed", "one at a time", "sliding window"])
def test_endings_after_one_stem_get_the_effects_each_gets_alone_from_the_whole_input(
    model, sliding_window_model, monkeypatch, kind
):
    """Two endings read after one stem, the stem's beginning before the first patched position computed without
    gradients, and every read-out's gradient taken in one batched backward: each ending's effects are those the
    definition gives on its whole input (as branches of one sequence, or one after the other where a model cannot
    take packed rows: told so, or Gemma 3's sliding-window layers, each ending after its own cached beginning)."""
    if kind == "one at a time":
        monkeypatch.setattr(attribution_patching, "accepts_packed_rows", lambda _model: False)
    if kind == "sliding window":
        model = sliding_window_model
    source = nudged(residual_stream(model, IDS), 1e-2)
    endings = [Ending((13, 21), (5, 8, 9), read), Ending((33,), (5, 8), read)]
    positions = (2, 4, 6)
    backward_rows, grad = [], torch.autograd.grad

    def recording(outputs, inputs, *args, **kwargs):
        if kwargs.get("is_grads_batched") and isinstance(inputs, list):  # the pass down to the residual stream
            backward_rows.append(len(kwargs["grad_outputs"]))
        return grad(outputs, inputs, *args, **kwargs)

    monkeypatch.setattr(torch.autograd, "grad", recording)
    effects, unpatched = attribution_effects(model, source, IDS, endings, positions, LAYERS)
    monkeypatch.setattr(torch.autograd, "grad", grad)
    # both endings read their first read-out at the stem's position 5: one row of the backward pass serves both
    assert backward_rows == ([3] if kind == "packed" else [2, 2])
    assert effects.shape == (len(positions), len(LAYERS), 2, 2)
    for k, ending in enumerate(endings):
        expected, read_out = by_definition(model, source, IDS + list(ending.tokens), positions, LAYERS, ending.read)
        assert expected.abs().max() > 0
        torch.testing.assert_close(effects[:, :, k], expected, atol=1e-12, rtol=1e-9)
        torch.testing.assert_close(unpatched[k], read_out, atol=1e-12, rtol=1e-9)
    # the stem's beginning read from the unpatched target run, where one is given (none where the model cannot
    # read the endings as branches of one sequence)
    target = target_run(model, IDS, endings)
    assert (target is None) == (kind == "sliding window")
    from_target, _ = attribution_effects(model, source, IDS, endings, positions, LAYERS, target)
    torch.testing.assert_close(from_target, effects, atol=1e-12, rtol=1e-9)
    if target is not None:
        with pytest.raises(ValueError, match="another stem or other endings"):
            attribution_effects(model, source, IDS, endings[:1], positions, LAYERS, target)
    none, _ = attribution_effects(model, source, IDS, endings, (), LAYERS)  # no patched position: no cell
    assert none.shape == (0, len(LAYERS), 2, 2)
    with pytest.raises(ValueError, match="outside the 8-token stem"):
        attribution_effects(model, source, IDS, endings, (8,), LAYERS)
