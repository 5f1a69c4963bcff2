"""The second moment C = E[k kᵀ] of an MLP output projection's inputs, which ROME's update divides by, estimated
offline: from text the model itself samples from its start token with a fixed seed (no corpus download), and cached
per (model, layer, corpus) with its provenance, written whole or not at all."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..paths import cache_root, locked, write_whole

RIDGE = 1e-2
"""The multiple of C's mean diagonal added to it, so a few thousand keys give an invertible estimate."""


@dataclass(frozen=True)
class SampledText:
    """The corpus: `sequences` texts of `length` tokens sampled by the model from its start token (seed `seed`)."""

    sequences: int = 16
    length: int = 128
    seed: int = 0

    @property
    def tokens(self) -> int:
        return self.sequences * self.length


def statistics_folder() -> Path:
    return cache_root() / "editor_statistics"


def _sample(model, tokenizer, corpus: SampledText) -> torch.Tensor:
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    prompt = torch.full((corpus.sequences, 1), start, device=model.device)
    with torch.random.fork_rng(devices=[model.device] if model.device.type == "cuda" else []):
        torch.manual_seed(corpus.seed)
        return model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            do_sample=True,
            top_k=0,
            max_new_tokens=corpus.length,
            min_new_tokens=corpus.length,
            pad_token_id=tokenizer.eos_token_id,
        )


def _estimate(model, tokenizer, module: torch.nn.Module, corpus: SampledText) -> torch.Tensor:
    texts = _sample(model, tokenizer, corpus)
    keys: list[torch.Tensor] = []
    hook = module.register_forward_hook(lambda _m, inputs, _o: keys.append(inputs[0].detach().flatten(0, 1)))
    try:
        with torch.no_grad():
            model(texts)
    finally:
        hook.remove()
    stacked = torch.cat(keys).double()
    return stacked.T @ stacked / len(stacked)


def _cache_key(model_identity: str, parameter: str, corpus: SampledText) -> str:
    return hashlib.sha256(json.dumps([model_identity, parameter, asdict(corpus)]).encode()).hexdigest()[:20]


def _record(model_identity: str, parameter: str, corpus: SampledText) -> dict[str, object]:
    return {
        "model": model_identity,
        "parameter": parameter,
        "corpus": "model-sampled text",
        **asdict(corpus),
        "tokens": corpus.tokens,
        "ridge": RIDGE,
    }


def key_second_moment(
    model, tokenizer, model_identity: str, parameter: str, module: torch.nn.Module, corpus: SampledText = SampledText()
) -> torch.Tensor:
    """C for the projection `parameter` of the model `model_identity` (its name and revision), ridge-regularised
    (`RIDGE`): read from the cache, or estimated on `corpus` and cached with a JSON record of its provenance beside
    it. An interrupted estimate leaves nothing that is read later (each file appears whole by rename)."""
    key = _cache_key(model_identity, parameter, corpus)
    folder = statistics_folder()
    tensor_path, record_path = folder / f"{key}.pt", folder / f"{key}.json"
    with locked(tensor_path):
        if tensor_path.is_file():
            moment = torch.load(tensor_path, weights_only=True)
        else:
            moment = _estimate(model, tokenizer, module, corpus)
            record = _record(model_identity, parameter, corpus)
            write_whole(record_path, lambda path: path.write_text(json.dumps(record, indent=1)))
            write_whole(tensor_path, lambda path: torch.save(moment, path))
    ridge = RIDGE * moment.diagonal().mean()
    return moment + ridge * torch.eye(len(moment), dtype=moment.dtype)


def layer_second_moment(lm, mlp, layer: int) -> torch.Tensor:
    """`key_second_moment` of the loaded model `lm`'s projection at `layer` (`weights.MlpLayout`)."""
    module = lm.model.get_submodule(mlp.path.format(layer=layer))
    return key_second_moment(lm.model, lm.tokenizer, f"{lm.name}@{lm.revision}", mlp.parameter(layer), module)


def statistics_record(lm, mlp, layer: int) -> dict[str, object]:
    """The provenance of `layer_second_moment(lm, mlp, layer)`: model, parameter, corpus and its token count."""
    return _record(f"{lm.name}@{lm.revision}", mlp.parameter(layer), SampledText())
