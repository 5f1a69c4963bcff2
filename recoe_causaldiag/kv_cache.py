"""KV caches shared by many continuations of one prefix."""

from __future__ import annotations

import copy
import functools
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer


def forked_cache(cache: Any, rows: torch.Tensor) -> Any:
    """A KV cache that reads as the batch `rows` of `cache` (each repeated as often as it is named), for forward
    passes that continue the prefix without keeping what they add: `cache` stays as it is, and so does the fork,
    which can serve several forwards. Each layer selects its rows only when a forward reads it, so the fork holds no
    copy of the prefix and a forward holds one layer's extended keys and values at a time, not every layer's. A
    layer of a kind whose reads this cannot reproduce is copied with its rows selected and extended as usual."""
    forked = copy.copy(cache)
    forked.layers = [_read_only(layer, rows) for layer in cache.layers]
    return forked


def prefix_cache(cache: Any, length: int) -> Any | None:
    """The KV cache of the first `length` positions of `cache`, sharing its tensors (`cache` stays as it is); None
    where a layer no longer holds them all (a sliding window that has moved past them) or is of another kind."""
    if length > cache.get_seq_length():
        raise ValueError(f"a cache of {cache.get_seq_length()} positions has no prefix of {length}")
    if not all(_holds_every_position(layer) for layer in cache.layers):
        return None
    prefix = _detached_copy(cache)
    for layer in prefix.layers:
        layer.crop(length - layer.get_seq_length())
    return prefix


def _detached_copy(cache: Any) -> Any:
    """A shallow copy of `cache` whose layers are shallow copies too, so that they can be cropped or have rows
    selected without changing `cache` (their tensors are shared until then)."""
    copied = copy.copy(cache)
    copied.layers = [copy.copy(layer) for layer in cache.layers]
    return copied


def _holds_every_position(layer: Any) -> bool:
    """Whether a cache layer holds the keys and values of every position it has seen, in order."""
    if type(layer) is DynamicLayer:
        return True
    return type(layer) is DynamicSlidingWindowLayer and layer.get_seq_length() < layer.sliding_window


def _read_only(layer: Any, rows: torch.Tensor) -> Any:
    """A shallow copy of `layer` whose `update` returns the prefix rows `rows` followed by the new keys and values,
    as a dynamic layer's update returns them, without storing them; for a layer of another kind, a shallow copy with
    its rows selected."""
    forked = copy.copy(layer)
    plain = type(layer) is DynamicLayer or (
        type(layer) is DynamicSlidingWindowLayer and not getattr(layer, "record_past", False)
    )
    if plain and layer.is_initialized:
        forked.update = functools.partial(_prefix_rows_then, layer.keys, layer.values, rows)
    else:
        forked.batch_select_indices(rows)
    return forked


def extended_cache(cache: Any, rows: torch.Tensor) -> Any:
    """A copy of the batch `rows` of `cache` that a forward extends as usual, keeping what it adds: the KV cache of a
    beginning shared by several continuations, which then read it through `forked_cache`. `cache` stays as it is."""
    extended = _detached_copy(cache)
    for layer in extended.layers:
        layer.batch_select_indices(rows)
    return extended


def _prefix_rows_then(
    keys: torch.Tensor,
    values: torch.Tensor,
    rows: torch.Tensor,
    key_states: torch.Tensor,
    value_states: torch.Tensor,
    *_args: Any,
    **_kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    return (
        torch.cat([keys.index_select(0, rows), key_states], dim=-2),
        torch.cat([values.index_select(0, rows), value_states], dim=-2),
    )
