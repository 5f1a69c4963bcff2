"""Attribution patching is the first-order estimate of activation patching: for a source a small step away from the
target run, its effects equal the exact patches' to first order at every (position, layer) cell; and CaF's
attribution variant re-patches its highest-ranked cells exactly."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from recoe_causaldiag.mechanisms.activation_patching import Ending, Patch, patched_readouts, residual_stream
from recoe_causaldiag.mechanisms.attribution_patching import attribution_effects

IDS = [5, 17, 3, 42, 8, 29, 11, 60]
POSITIONS = (1, 3, 5)
LAYERS = (0, 1, 2)
READ = tuple(range(5, len(IDS)))  # the answer read at position 5, then the positions after it


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval().double()


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
        approximate, unpatched = attribution_effects(model, source, IDS, POSITIONS, LAYERS, read, read=READ)
        with torch.no_grad():
            assert torch.allclose(unpatched, read(model(torch.tensor([IDS])).logits[:, 5:])[0])
        assert approximate.abs().max() > 0
        errors.append(float((approximate - exact).abs().max() / exact.abs().max()))
    # relative error shrinks with the step (first order): ten times smaller step, about ten times smaller error
    assert errors[1] < errors[0] / 5 and errors[1] < 2e-2


def test_positions_after_the_answer_position_cannot_change_the_answer(model):
    source = nudged(residual_stream(model, IDS), 1e-2)
    effects, _ = attribution_effects(model, source, IDS, (6, 7), LAYERS, read, read=READ)
    assert torch.all(effects[:, :, 0] == 0)  # the answer is read at position 5: causal attention
    assert effects[:, :, 1].abs().max() > 0 and np.isfinite(effects.numpy()).all()
