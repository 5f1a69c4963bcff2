"""KV caches shared by many continuations of one prefix."""

from __future__ import annotations

import copy
from typing import Any

import torch


def forked_cache(cache: Any, rows: torch.Tensor) -> Any:
    """A KV cache holding the batch `rows` of `cache` (repeated as often as they are named), for a forward pass that
    extends it, leaving `cache` as it is. A forward never writes the layers' key and value tensors in place (it
    concatenates and rebinds them), so a shallow copy of each layer with its rows selected (new tensors) is enough:
    no deep copy of the whole cache."""
    forked = copy.copy(cache)
    forked.layers = [copy.copy(layer) for layer in cache.layers]
    forked.batch_select_indices(rows)
    return forked
