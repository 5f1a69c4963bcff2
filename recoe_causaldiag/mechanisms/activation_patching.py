"""Activation patching (Meng et al., 2022; paper 002 §3.1, Fig. 1): run a *target* input while restoring, at
chosen (token position, decoder layer) sites, the residual stream of a *source* input of the same token length.

With the clean input as source and the counterfactual (symmetric token replacement) as target, the change a
patch makes to a read-out of the target run is the indirect effect of that hidden state (paper 002 §3.1).
Works on any Hugging Face decoder-only model: the decoder layers are found as the module list with one entry
per hidden layer, and a layer's output (the residual stream after it) is overwritten by a forward hook.
Many patches run in one forward, one patched copy of the target per batch row, in batches planned to compute
least (`planned_batches`); the target's KV cache is reused for the positions before the earliest patched or read
position of a batch (they cannot change), and the output head runs on the read positions alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from ..kv_cache import forked_cache, prefix_cache
from ..packed_rows import accepts_packed_rows

Readout = Callable[[torch.Tensor], torch.Tensor]
"""Maps the logits of the read positions, [rows, read positions, vocabulary], to one tensor per row."""


@dataclass(frozen=True)
class Patch:
    """Restore the source run's residual stream at every position in `positions` after every decoder layer
    in `layers` (0-based; layer l's output). The empty patch leaves the target run as it is."""

    positions: tuple[int, ...]
    layers: tuple[int, ...]


def decoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The model's decoder layers: the module list with one entry per hidden layer (e.g. `model.model.layers`)."""
    n_layers = model.config.get_text_config().num_hidden_layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n_layers:
            return module
    raise ValueError(f"no module list of {n_layers} decoder layers in {type(model).__name__}")


def window_layers(layer: int, n_layers: int, window: int) -> tuple[int, ...]:
    """The layers patched to represent `layer` with a window w: [l − ⌊w/2⌋, l + ⌈w/2⌉) within the model
    (paper 002 §5.2, as the reference code computes it); w = 1 is the layer alone."""
    return tuple(range(max(0, layer - window // 2), min(n_layers, layer + (window + 1) // 2)))


def token_layer_patches(
    positions: Sequence[int], layers: Sequence[int], n_layers: int, *, window: int = 1
) -> list[Patch]:
    """One patch per (position, layer), position-major: the sites of a causal matrix C ∈ R^{T×L}."""
    return [Patch((p,), window_layers(layer, n_layers, window)) for p in positions for layer in layers]


def layer_output(output: torch.Tensor | tuple) -> torch.Tensor:
    """A decoder layer's hidden state from what its forward returned (the tensor, or the first of a tuple)."""
    return output[0] if isinstance(output, tuple) else output


@torch.inference_mode()
def residual_stream(model: torch.nn.Module, ids: Sequence[int]) -> list[torch.Tensor]:
    """Every decoder layer's output for one input: a list over layers of [positions, hidden] tensors."""
    return _layer_outputs(model, {"input_ids": torch.tensor([list(ids)], device=model.device)}, use_cache=False)[0]


def _layer_outputs(
    model: torch.nn.Module, inputs: dict[str, torch.Tensor], *, use_cache: bool
) -> tuple[list[torch.Tensor], bool, object]:
    """Every decoder layer's output [positions, hidden] of the forward given `inputs`, whether the layers return it
    as a plain tensor (not in a tuple), and the forward's KV cache (None without `use_cache`)."""
    layers, states, plain = decoder_layers(model), [], []

    def keep(_module, _args, out) -> None:
        states.append(layer_output(out)[0].clone())
        plain.append(isinstance(out, torch.Tensor))

    hooks = [layer.register_forward_hook(keep) for layer in layers]
    try:
        out = model(**inputs, use_cache=use_cache, logits_to_keep=1)
    finally:
        for hook in hooks:
            hook.remove()
    return states, all(plain), out.past_key_values if use_cache else None


def _site_edits(
    batch: Sequence[Patch], source: Sequence[torch.Tensor], start: int
) -> dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per layer: the batch rows, the positions (relative to `start`) and the source values to write there."""
    sites: dict[int, tuple[list[int], list[int]]] = {}
    for row, patch in enumerate(batch):
        for layer in patch.layers:
            rows, positions = sites.setdefault(layer, ([], []))
            rows += [row] * len(patch.positions)
            positions += list(patch.positions)
    device = source[0].device
    return {
        layer: (
            torch.tensor(rows, device=device),
            torch.tensor(positions, device=device) - start,
            source[layer][positions],
        )
        for layer, (rows, positions) in sites.items()
    }


@dataclass(frozen=True)
class Ending:
    """An input that continues a shared stem with `tokens`, read by `readout`: the logits of its positions `read`
    (ascending, counted from the stem's first token) → one tensor per patched row."""

    tokens: tuple[int, ...]
    read: tuple[int, ...]
    readout: Readout


@dataclass(frozen=True)
class PackedEndings:
    """A stem and its endings in one sequence, each ending cut after its last read position: token k is `ids[k]`,
    at `positions[k]` in its own input, of the stem (owner -1) or of ending `owners[k]`; `columns` are, per ending,
    the sequence indices of its read positions."""

    ids: tuple[int, ...]
    positions: tuple[int, ...]
    owners: tuple[int, ...]
    columns: tuple[tuple[int, ...], ...]

    @property
    def branched(self) -> bool:
        """Whether tokens of several endings are in the sequence (each must then see only its own)."""
        return len(set(self.owners) - {-1}) > 1

    def inputs(self, start: int, rows: int, dtype: torch.dtype, device: torch.device) -> dict[str, torch.Tensor]:
        """The forward's inputs for `rows` copies of the sequence from `start` on, after a cache of the first `start`
        tokens: ids, and for a branched sequence the positions and a 4-D mask in which every token sees the stem and
        the tokens before it in its own ending."""
        ids = torch.tensor([self.ids[start:]], device=device).expand(rows, -1)
        if not self.branched:
            return {"input_ids": ids}
        owners = torch.tensor(self.owners)
        size = len(owners)
        visible = torch.ones(size, size, dtype=torch.bool).tril() & (
            (owners[None] == -1) | (owners[None] == owners[:, None])
        )
        mask = torch.zeros(visible.shape, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)[start:]
        return {
            "input_ids": ids,
            "position_ids": torch.tensor([self.positions[start:]], device=device).expand(rows, -1),
            "attention_mask": mask.to(device)[None, None].expand(rows, -1, -1, -1),
        }


def packed_endings(stem_ids: Sequence[int], endings: Sequence[Ending]) -> PackedEndings:
    """The stem followed by the tokens of each ending that its read positions need."""
    ids, owners = list(stem_ids), [-1] * len(stem_ids)
    positions, columns = list(range(len(stem_ids))), []
    for k, ending in enumerate(endings):
        _check_read(ending.read, len(stem_ids) + len(ending.tokens))
        needed = ending.tokens[: max(0, ending.read[-1] + 1 - len(stem_ids))]
        offset = len(ids) - len(stem_ids)
        columns.append(tuple(p if p < len(stem_ids) else p + offset for p in ending.read))
        ids += needed
        owners += [k] * len(needed)
        positions += range(len(stem_ids), len(stem_ids) + len(needed))
    return PackedEndings(tuple(ids), tuple(positions), tuple(owners), tuple(columns))


@dataclass(frozen=True)
class TargetRun:
    """The unpatched target run of a stem and its endings in one sequence (`packed`): every decoder layer's output
    [positions, hidden], whether the layers return it as a plain tensor (so that `replayed` can stand in for them),
    and the run's KV cache, whose beginnings serve every patched run as the positions it need not compute."""

    packed: PackedEndings
    states: tuple[torch.Tensor, ...]
    replayable: bool
    cache: object


def target_run(model: torch.nn.Module, stem_ids: Sequence[int], endings: Sequence[Ending]) -> TargetRun | None:
    """The unpatched run of the stem followed by its endings, computed once without gradients (so that a backward
    pass may start after its beginning, `attribution_effects`); None where the model cannot read several endings
    in one sequence (`packed_rows.accepts_packed_rows`)."""
    packed = packed_endings(stem_ids, endings)
    if packed.branched and not accepts_packed_rows(model):
        return None
    with torch.no_grad():
        states, plain, cache = _layer_outputs(model, packed.inputs(0, 1, model.dtype, model.device), use_cache=True)
    return TargetRun(packed, tuple(states), plain, cache)


def stem_cache(model: torch.nn.Module, stem_ids: Sequence[int], length: int, target: TargetRun | None) -> object:
    """The KV cache of the stem's first `length` tokens: a view of the target run's where it holds them, else
    computed (without gradients)."""
    cache = prefix_cache(target.cache, length) if target is not None else None
    if cache is None:
        with torch.no_grad():
            stem = torch.tensor([list(stem_ids[:length])], device=model.device)
            cache = model(stem, use_cache=True, logits_to_keep=1).past_key_values
    return cache


@torch.inference_mode()
def patched_readouts(
    model: torch.nn.Module,
    source_ids: Sequence[int],
    stem_ids: Sequence[int],
    patches: Sequence[Patch],
    endings: Sequence[Ending],
    *,
    batch_size: int = 32,
    max_logits: int = 2**27,
    progress: bool = False,
    source_states: Sequence[torch.Tensor] | None = None,
    target: TargetRun | None = None,
) -> torch.Tensor:
    """The read-outs [patches, endings, …] of the target runs (the stem `stem_ids` followed by each ending) under
    each patch of the stem, patched with the source run (`source_ids`, as long as the stem).

    The endings share the stem's computation: they run in one sequence, each seeing the stem and itself (where the
    model takes such a mask, `packed_rows.accepts_packed_rows`; else one after another). A batch holds at most
    `batch_size` patched copies and `max_logits` logit values. `source_states`: the source run's `residual_stream`
    when it was taken on other weights (an edited model's), else it is computed here; `target`: the unpatched
    `target_run` of these endings where it was taken already, else it is computed here."""
    if len(source_ids) != len(stem_ids):
        raise ValueError(f"source and stem differ in length ({len(source_ids)} vs {len(stem_ids)} tokens)")
    if not endings:
        raise ValueError("no ending to read")
    if any(not 0 <= p < len(stem_ids) for patch in patches for p in patch.positions):
        raise ValueError(f"a patched position lies outside the {len(stem_ids)}-token stem")
    packed = packed_endings(stem_ids, endings)
    source = residual_stream(model, source_ids) if source_states is None else source_states
    if packed.branched and not accepts_packed_rows(model):
        one_by_one = dict(batch_size=batch_size, max_logits=max_logits, progress=progress, source_states=source)
        return torch.cat(
            [patched_readouts(model, source_ids, stem_ids, patches, [e], **one_by_one) for e in endings], dim=1
        )
    if target is None:
        target = target_run(model, stem_ids, endings)
    elif target.packed != packed:
        raise ValueError("the target run given is of another stem or other endings")
    layers = decoder_layers(model)
    device, dtype = model.device, model.dtype
    columns = sorted({column for ending in packed.columns for column in ending})
    at = {column: j for j, column in enumerate(columns)}
    rows_per_batch = max(1, min(batch_size, max_logits // (len(columns) * model.config.get_text_config().vocab_size)))
    prefix_caches: dict[int, object] = {}
    results: list[torch.Tensor] = [torch.empty(0)] * len(patches)
    bar = tqdm(total=len(patches), desc="activation patching", unit="patch", disable=not progress, leave=False)
    first_read = min(len(stem_ids), columns[0])
    cost = forward_cost(device, len(patches) * len(packed.ids) * len(layers))
    batches = planned_batches(
        patches, len(layers), first_read, len(packed.ids), rows_per_batch, target.replayable, cost
    )
    for members in batches:
        batch = [patches[k] for k in members]
        start = _start(batch, first_read)
        batch_cache = None
        if start > 0:
            if start not in prefix_caches:
                prefix_caches[start] = stem_cache(model, stem_ids, start, target)
            batch_cache = forked_cache(prefix_caches[start], torch.zeros(len(batch), dtype=torch.long, device=device))
        hooks = []
        for layer, (rows, positions, values) in _site_edits(batch, source, start).items():

            def write(_module, _args, output, rows=rows, positions=positions, values=values):
                layer_output(output)[rows, positions] = values
                return output

            hooks.append(layers[layer].register_forward_hook(write))
        floor = min(_floor(patch, len(layers)) for patch in batch) if target.replayable else 0
        try:
            with replayed(layers, target.states, floor, start, len(batch)):
                logits = model(
                    **packed.inputs(start, len(batch), dtype, device),
                    past_key_values=batch_cache,
                    use_cache=False,
                    logits_to_keep=torch.tensor(columns, device=device) - start,
                ).logits
        finally:
            for hook in hooks:
                hook.remove()
        read = [
            ending.readout(logits[:, [at[column] for column in own]])
            for ending, own in zip(endings, packed.columns, strict=True)
        ]
        for k, row in zip(members, torch.stack(read, dim=1)):
            results[k] = row
        bar.update(len(batch))
    bar.close()
    return torch.stack(results)


CPU_FORWARD_COST = 1000
"""What one more forward costs on a CPU, in (position, layer) cells of one patched row: on 2 CPU cores a forward of
the default model's single token took about 60 ms, a cell of a full batch about 0.06 ms."""


def forward_cost(device: torch.device, cells: int) -> float:
    """What `planned_batches` counts for one more forward, in cells: `CPU_FORWARD_COST` on a CPU; elsewhere more than
    all the `cells` the patches could compute (a GPU is far from busy with such batches, "On a GPU" in the README), so
    the plan has as few forwards as fixed-size batches and cuts them where they compute least."""
    return CPU_FORWARD_COST if device.type == "cpu" else cells + 1


def planned_batches(
    patches: Sequence[Patch],
    n_layers: int,
    first_read: int,
    length: int,
    rows_per_batch: int,
    replayable: bool,
    cost_of_forward: float = CPU_FORWARD_COST,
) -> list[list[int]]:
    """The patches' indices in batches of at most `rows_per_batch`, in order of their lowest patched layer, cut where
    the work is least: a batch computes each of its rows from its first patched position (at most `first_read`) to
    the end of the `length`-token input, from its lowest patched layer up where the layers below are `replayable`
    (else from the first), and each forward costs `cost_of_forward` cells more."""
    order = sorted(range(len(patches)), key=lambda k: (_floor(patches[k], n_layers), patches[k].positions[:1]))
    best, cut = [0.0] + [float("inf")] * len(order), [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):
        start = first_read
        for begin in range(end - 1, max(0, end - rows_per_batch) - 1, -1):
            start = _start([patches[order[begin]]], start)
            floor = _floor(patches[order[begin]], n_layers) if replayable else 0
            cost = best[begin] + cost_of_forward + (end - begin) * (length - start) * (n_layers - floor)
            if cost < best[end]:
                best[end], cut[end] = cost, begin
    batches, end = [], len(order)
    while end:
        batches.append(order[cut[end] : end])
        end = cut[end]
    return batches[::-1]


def _start(batch: Sequence[Patch], first_read: int) -> int:
    """The first position a batch computes: its first patched position, or `first_read` if that is earlier."""
    return min([first_read] + [p for patch in batch if patch.layers for p in patch.positions])


def _check_read(read: Sequence[int], length: int) -> None:
    """Refuse read positions that are empty, unordered or outside a `length`-token input."""
    if not read or list(read) != sorted(set(read)) or not 0 <= read[0] <= read[-1] < length:
        raise ValueError(f"read positions {list(read)} are not ascending positions of the {length}-token input")


def _floor(patch: Patch, n_layers: int) -> int:
    """The lowest layer a patch writes (`n_layers` for the empty patch): every layer below it computes what the
    unpatched target run computed."""
    return min(patch.layers, default=n_layers)


class _Replay(torch.nn.Module):
    """A decoder layer's stand-in that returns, for every batch row, the unpatched target run's output of that layer
    from position `start` on, instead of computing it again."""

    def __init__(self, state: torch.Tensor, rows: int) -> None:
        super().__init__()
        self.state, self.rows = state, rows

    def forward(self, *args: object, **kwargs: object) -> torch.Tensor:
        return self.state.expand(self.rows, -1, -1)


@contextmanager
def replayed(
    layers: torch.nn.ModuleList, unpatched: Sequence[torch.Tensor], floor: int, start: int, rows: int
) -> Iterator[None]:
    """The decoder layers below `floor` replaced, while the block runs, by replays of the unpatched target run: a
    patch at layer l cannot change what layers below l compute, so they are never computed again (their KV cache
    entries are not needed either: each layer attends to its own keys and values only). For layers that return
    their hidden state as a plain tensor (transformers 5's decoders); others are computed (`floor` 0)."""
    originals = [layers[layer] for layer in range(floor)]
    try:
        for layer in range(floor):
            layers[layer] = _Replay(unpatched[layer][start:][None], rows)
        yield
    finally:
        for layer, module in enumerate(originals):
            layers[layer] = module


@torch.inference_mode()
def patched_readouts_reference(
    model: torch.nn.Module,
    source_ids: Sequence[int],
    stem_ids: Sequence[int],
    patches: Sequence[Patch],
    endings: Sequence[Ending],
    *,
    source_states: Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """`patched_readouts` as the reference code computes it: one forward of each whole target input per patch
    (batch 1, no KV reuse, nothing shared between endings); what `make bench` and the tests compare the batched,
    cached path with."""
    if len(source_ids) != len(stem_ids):
        raise ValueError(f"source and stem differ in length ({len(source_ids)} vs {len(stem_ids)} tokens)")
    layers = decoder_layers(model)
    source = residual_stream(model, source_ids) if source_states is None else source_states
    results = []
    for patch in patches:
        hooks = []
        for layer in patch.layers:
            positions = list(patch.positions)

            def write(_module, _args, output, layer=layer, positions=positions):
                layer_output(output)[0, positions] = source[layer][positions]
                return output

            hooks.append(layers[layer].register_forward_hook(write))
        try:
            read = []
            for ending in endings:
                _check_read(ending.read, len(stem_ids) + len(ending.tokens))
                target = torch.tensor([list(stem_ids) + list(ending.tokens)], device=model.device)
                read.append(ending.readout(model(target, use_cache=False).logits[:, list(ending.read)]))
        finally:
            for hook in hooks:
                hook.remove()
        results.append(torch.stack(read, dim=1))
    return torch.cat(results)
