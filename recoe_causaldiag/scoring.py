"""The scoring engine: label probabilities, continuation log-probabilities and greedy generation.

Requests are grouped by the edits they run under (one group under ICE, one per set of facts under a
weight editor, each group's edit applied while it runs) and then by their shared prefix (system turn +
ICE edits + question); each prefix is encoded once per batch, after the beginning that the batch's prefixes
share (system turn and instruction, encoded once), and its KV cache is reused for every continuation
(explanation variant) that follows it. Batches are filled longest-first and results
restored to request order. For label probabilities and continuation logits, where a model takes a custom attention
mask, the continuations of one prefix are packed as trees (`packed_rows`), so that a beginning several of them share
runs once.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from . import prompts
from .api.engine import Encoded, Engine, LabelRequest
from .editors.editing import IN_CONTEXT, Editor
from .kv_cache import extended_cache, forked_cache
from .mechanisms import activation_patching
from .mechanisms.activation_patching import Ending, Patch, TargetRun
from .models import LanguageModel, load_model
from .packaged_models import default_helper_model
from .packed_rows import PackedRow, accepts_packed_rows, packed_rows
from .prompts import Prompt
from .shared_stems import Stem, common_length, shared_stems

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class BatchLimits:
    """How much one forward may take in, in tokens (padding included): `batch` continuation tokens of a batch;
    `logits` continuation tokens of a batch that keeps every position's logits (log-probs, perplexity: a position
    holds a whole vocabulary, 49,152 floats for SmolLM2); `prefix` prefix tokens encoded together, whose KV cache is
    held while their continuations are scored (46 KB a token for SmolLM2)."""

    batch: int
    logits: int
    prefix: int


BATCH_LIMITS = {"cpu": BatchLimits(batch=2048, logits=256, prefix=1024)}
"""Limits by device type. On 2 CPU cores, scoring the controls, early answering and filler tokens of 20 FactCheck pairs
with these peaked at 1.39 GB RSS instead of 2.06 GB with the accelerator's, and filler tokens ran faster, not slower
(README, "Memory"): a forward of a few thousand tokens already keeps the cores busy."""
ACCELERATOR_LIMITS = BatchLimits(batch=8192, logits=1024, prefix=8192)
"""Limits on any other device (CUDA), where larger forwards pay."""
MAX_PACKED_TOKENS = 640
"""The longest packed row (`packed_rows`): its tokens attend to every position of the row, masked or not, so the
attention's work grows with the square of its length; but a tree of continuations cut across two rows runs its
shared beginning twice. Filler Tokens on 4 pairs of each paper task took 0–20% less time at 640 than at 512 (Analogy's
and Object Counting's fillers form trees of 513–567 tokens) and no less at 768 (2 CPU cores, 2026-11-29)."""
MIN_FILL = 0.75
"""The least share of a batch of packed rows' positions that hold tokens rather than padding: a shorter row waits for
a batch of its own rather than be padded to a much longer one's length."""


@dataclass(frozen=True)
class PrefixWindow:
    """Prefixes encoded together: `prefixes` (a row each of the attention `mask` and KV `cache`) and, under each,
    the indices of its requests (`groups`)."""

    prefixes: Sequence[tuple[int, ...]]
    groups: dict[tuple[int, ...], list[int]]
    mask: torch.Tensor
    cache: Any


class ScoringEngine:
    """Batched, prefix-cached scoring with one loaded model. The token limits default to the model's device's
    (`BATCH_LIMITS`); `pack` says whether label queries run as packed rows (None: where the model accepts them)."""

    def __init__(
        self,
        lm: LanguageModel,
        *,
        editor: Editor = IN_CONTEXT,
        batch_size: int = 32,
        max_batch_tokens: int | None = None,
        max_logit_tokens: int | None = None,
        max_prefix_tokens: int | None = None,
        pack: bool | None = None,
        progress: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.lm, self.editor = lm, editor
        self.batch_size = batch_size
        limits = BATCH_LIMITS.get(lm.device.type, ACCELERATOR_LIMITS)
        self.max_batch_tokens = limits.batch if max_batch_tokens is None else max_batch_tokens
        self.max_logit_tokens = limits.logits if max_logit_tokens is None else max_logit_tokens
        self.max_prefix_tokens = limits.prefix if max_prefix_tokens is None else max_prefix_tokens
        self.pack = pack
        self.max_packed_tokens = MAX_PACKED_TOKENS
        self.progress = progress
        self._prefix_ids: dict[str, tuple[int, ...]] = {}
        self._label_memo: dict[tuple[Encoded, tuple[int, ...]], np.ndarray] = {}

    @property
    def packs(self) -> bool:
        """Whether label queries run as packed rows: `pack`, or where it is None, whether the model accepts them."""
        return accepts_packed_rows(self.lm.model) if self.pack is None else self.pack

    def encode(self, prompt: Prompt) -> Encoded:
        prefix_text = self.lm.render(self.editor.conversation(prompt))
        if prefix_text not in self._prefix_ids:
            self._prefix_ids[prefix_text] = tuple(self.lm.encode(prefix_text))
        continuation = tuple(self.lm.encode(prompt.continuation, continuation=True)) if prompt.continuation else ()
        full_text = prefix_text + prompt.continuation
        return Encoded(
            self._prefix_ids[prefix_text], continuation, not full_text[-1:].isspace(), self.editor.state(prompt)
        )

    def by_state(self, encoded: Sequence[Encoded]) -> Iterator[tuple[tuple[str, ...], list[int]]]:
        """The requests grouped by the edits they run under, each group with its edit applied while it is used
        (the edits computed first, with a progress bar)."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for index, enc in enumerate(encoded):
            groups.setdefault(enc.state, []).append(index)
        self.editor.prepare(groups, progress=self.progress)
        for state, members in groups.items():
            with self.editor.applied(state):
                yield state, members

    def label_probs(self, requests: Sequence[LabelRequest], *, desc: str = "scoring") -> list[np.ndarray]:
        """Softmax over the label tokens' next-token logits, one array per request (eq. 7)."""
        encoded = [self.encode(r.prompt) for r in requests]
        label_ids = [
            self.lm.label_token_ids(r.labels, leading_space=e.leading_space) for r, e in zip(requests, encoded)
        ]
        keys = [(e, ids) for e, ids in zip(encoded, label_ids)]
        todo = list(dict.fromkeys(k for k in keys if k not in self._label_memo))
        if todo:
            for position, row in self._last_logits([k[0] for k in todo], desc=desc):
                self._label_memo[todo[position]] = torch.softmax(row[list(todo[position][1])].double(), -1).numpy()
        return [self._label_memo[k] for k in keys]

    def continuation_logprobs(self, prompts: Sequence[Prompt], *, desc: str = "log-probs") -> list[np.ndarray]:
        """Teacher-forced log-probability of every continuation token given everything before it."""
        encoded = [self.encode(p) for p in prompts]
        if any(not e.continuation for e in encoded):
            raise ValueError("continuation_logprobs needs a non-empty continuation for every prompt")
        out: list[np.ndarray] = [np.empty(0)] * len(encoded)
        for prefix_last, batch, cont_logits in self._passes(encoded, keep_all=True, desc=desc):
            width = cont_logits.shape[1]
            for row, (index, prefix_row) in enumerate(batch):
                cont = encoded[index].continuation
                logits = torch.cat(
                    [prefix_last[prefix_row : prefix_row + 1], cont_logits[row, width - len(cont) : width - 1]]
                )
                logp = torch.log_softmax(logits.double(), dim=-1)
                out[index] = logp[torch.arange(len(cont)), torch.tensor(cont)].numpy()
        return out

    def perplexity(self, prompts: Sequence[Prompt], *, desc: str = "perplexity") -> np.ndarray:
        """exp of the mean negative log-probability of each prompt's continuation."""
        return np.array([float(np.exp(-lp.mean())) for lp in self.continuation_logprobs(prompts, desc=desc)])

    @torch.inference_mode()
    def generate(self, prompts: Sequence[Prompt], *, max_new_tokens: int = 64) -> list[str]:
        """Greedy continuations, batched with left padding."""
        lm, results = self.lm, [""] * len(prompts)
        encoded = [self.encode(p) for p in prompts]
        stops = stop_token_ids(lm)
        for _, members in self.by_state(encoded):
            order = sorted(members, key=lambda i: -len(encoded[i].prefix) - len(encoded[i].continuation))
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                seqs = [encoded[i].prefix + encoded[i].continuation for i in batch]
                ids, mask = left_pad(seqs, lm.pad_token_id, lm.device)
                generated = lm.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=lm.pad_token_id,
                    eos_token_id=stops or None,
                )
                for i, row in zip(batch, generated[:, ids.shape[1] :]):
                    results[i] = lm.tokenizer.decode(row, skip_special_tokens=True).strip()
        return results

    @torch.inference_mode()
    def continuation_logits(
        self, encoded: Sequence[Encoded], *, rows: Sequence[Sequence[int]] | None = None, desc: str = "logits"
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """(request index, next-token logits at its continuation positions `rows[index]`, in that order; at every
        position when `rows` is None), streamed; row t is the distribution after continuation token t. Requests
        under one prefix whose continuations begin alike run that beginning once: packed as trees in one forward
        (`packed_rows`) where the model takes packed rows, else as stems whose endings continue from their KV cache
        (`shared_stems`); the output head projects only the rows asked for."""
        wanted = requested_rows(encoded, rows)
        reads = self._packed_reads if self.packs else self._stem_reads
        bar = tqdm(total=len(encoded), desc=desc, unit="prompt", disable=not self.progress, leave=False)
        for _, members in self.by_state(encoded):
            for window, groups in self._prefix_groups(encoded, members):
                prefix_mask, _, prefix_cache = self._encode_prefixes(window)
                for index, logits in reads(encoded, wanted, PrefixWindow(window, groups, prefix_mask, prefix_cache)):
                    bar.update(1)
                    yield index, logits
        bar.close()

    def patched_readouts(
        self,
        source_ids: Sequence[int],
        stem_ids: Sequence[int],
        patches: Sequence[Patch],
        endings: Sequence[Ending],
        *,
        batch_size: int = 32,
        progress: bool = True,
        source_states: Sequence[torch.Tensor] | None = None,
        target: TargetRun | None = None,
    ) -> torch.Tensor:
        """The read-outs [patches, endings, …] of the stem followed by each ending, under each patch of the stem with
        the source run's hidden states: `batch_size` patched copies per forward, the stem's computation below a
        patch reused (`activation_patching.patched_readouts`, with the endings' unpatched `target` run where it was
        taken already); a progress bar when `progress` and the engine shows them."""
        return activation_patching.patched_readouts(
            self.lm.model,
            source_ids,
            stem_ids,
            patches,
            endings,
            batch_size=batch_size,
            progress=progress and self.progress,
            source_states=source_states,
            target=target,
        )

    def _stem_reads(
        self, encoded: Sequence[Encoded], wanted: Sequence[tuple[int, ...]], window: PrefixWindow
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """The `wanted` logits of the requests under the prefixes of `window`, those whose continuations begin alike
        grouped under their shared stem (`shared_stems`): the stems of a batch in one forward, their endings in
        forwards after them (`_stem_batch`)."""
        stems = [
            (row, stem)
            for row, prefix in enumerate(window.prefixes)
            for stem in shared_stems({i: encoded[i].continuation for i in window.groups[prefix]})
        ]
        stems.sort(key=lambda item: -len(item[1].tokens))
        for batch in self._fill(
            stems, lambda item: (len(item[1].tokens), stem_rows(item[1], wanted)), past=window.mask.shape[1]
        ):
            yield from self._stem_batch(encoded, wanted, batch, window.mask, window.cache)
            release_freed_memory()

    def _stem_batch(
        self,
        encoded: Sequence[Encoded],
        wanted: Sequence[tuple[int, ...]],
        batch: Sequence[tuple[int, Stem]],
        prefix_mask: torch.Tensor,
        prefix_cache: Any,
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """The `wanted` logits of every member of a batch of (prefix row, stem): the stems in one forward after their
        prefixes, then the members' suffixes in forwards after the stems (each member as soon as it is complete)."""
        stems = [stem for _, stem in batch]
        suffixed = [(k, m) for k, stem in enumerate(stems) for m in stem.members if suffix(encoded[m], stem)]
        select = torch.tensor([row for row, _ in batch], device=self.lm.device)
        cache = (extended_cache if suffixed else forked_cache)(prefix_cache, select)
        kept = [stem_rows(stem, wanted) for stem in stems]
        picked, stem_mask = self._continue(cache, prefix_mask[select], [stem.tokens for stem in stems], kept)
        found: dict[int, dict[int, torch.Tensor]] = {}
        for stem, rows, logits in zip(stems, kept, picked):
            for member in stem.members:
                found[member] = {row: logits[rows.index(row)] for row in wanted[member] if row < len(stem.tokens)}
                if not suffix(encoded[member], stem):
                    yield member, torch.stack([found[member][row] for row in wanted[member]])
        suffixed.sort(key=lambda item: -len(suffix(encoded[item[1]], stems[item[0]])))
        offsets = [len(stem.tokens) for stem in stems]

        def own_rows(item: tuple[int, int]) -> list[int]:
            return [row - offsets[item[0]] for row in wanted[item[1]] if row >= offsets[item[0]]]

        for part in self._fill(suffixed, lambda item: (len(suffix(encoded[item[1]], stems[item[0]])), own_rows(item))):
            select = torch.tensor([k for k, _ in part], device=self.lm.device)
            own = [own_rows(item) for item in part]
            suffixes = [suffix(encoded[m], stems[k]) for k, m in part]
            picked, _ = self._continue(forked_cache(cache, select), stem_mask[select], suffixes, own)
            for (k, member), rows, logits in zip(part, own, picked):
                found[member].update({row + offsets[k]: logits[j] for j, row in enumerate(rows)})
                yield member, torch.stack([found[member][row] for row in wanted[member]])

    def _continue(
        self, cache: Any, past_mask: torch.Tensor, sequences: Sequence[Sequence[int]], rows: Sequence[Sequence[int]]
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """One forward of `sequences` (left-padded) after `cache`, whose positions `past_mask` marks (a row per
        sequence): the logits at each sequence's `rows` (positions in it; only those go through the output head),
        and the attention mask of the past and the sequences."""
        device = self.lm.device
        ids, mask = left_pad(sequences, self.lm.pad_token_id, device)
        width = ids.shape[1]
        columns = sorted({width - len(seq) + row for seq, own in zip(sequences, rows) for row in own})
        out = self.lm.model(
            input_ids=ids,
            attention_mask=torch.cat([past_mask, mask], dim=1),
            position_ids=past_mask.sum(-1)[:, None] + (mask.cumsum(-1) - 1).clamp(min=0),
            past_key_values=cache,
            use_cache=False,
            logits_to_keep=torch.tensor(columns or [width - 1], device=device),
        )
        logits = out.logits.float().cpu()
        at = {column: j for j, column in enumerate(columns)}
        picked = [
            logits[b, [at[width - len(seq) + row] for row in own]] for b, (seq, own) in enumerate(zip(sequences, rows))
        ]
        return picked, torch.cat([past_mask, mask], dim=1)

    def _fill(
        self,
        items: Sequence[T],
        shape: Callable[[T], tuple[int, Sequence[int]]],
        *,
        past: int = 0,
        packed: bool = False,
    ) -> Iterator[list[T]]:
        """`items` in consecutive batches for one forward each, by each item's (sequence length, rows kept): a batch
        holds at most `batch_size` sequences, `max_batch_tokens` tokens counting the `past` positions each sequence
        attends to in a cache of its own (the padded prefix of a stem, whose KV cache the batch copies), and
        `max_logit_tokens` rows through the output head; an item beyond these is a batch of its own. Sequences are
        left-padded, `packed` rows (`packed_rows`, longest first) right-padded, and then at least `MIN_FILL` of a
        batch's positions are tokens."""
        batch: list[T] = []
        for item in items:
            if batch and not self._fits([shape(i) for i in [*batch, item]], past, packed=packed):
                yield batch
                batch = []
            batch.append(item)
        if batch:
            yield batch

    def _fits(self, shapes: Sequence[tuple[int, Sequence[int]]], past: int, *, packed: bool = False) -> bool:
        width = max(length for length, _ in shapes)
        offsets = [0 if packed else width - length for length, _ in shapes]
        columns = {offset + row for offset, (_, rows) in zip(offsets, shapes) for row in rows}
        return (
            len(shapes) <= self.batch_size
            and len(shapes) * (past + width) <= self.max_batch_tokens
            and len(shapes) * len(columns) <= self.max_logit_tokens
            and (not packed or sum(length for length, _ in shapes) >= MIN_FILL * len(shapes) * width)
        )

    def _encode_prefixes(self, window: Sequence[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """The prefixes `window`: their attention mask, last-token logits and KV cache. The beginning they all share
        (`shared_head`: the system turn and the instruction, at least) is encoded once, and their rests after it in one
        forward, left-padded; the mask marks the shared beginning, then each rest."""
        device, rows = self.lm.device, len(window)
        head = shared_head(window)
        past, cache = torch.ones((rows, len(head)), dtype=torch.long, device=device), None
        if head:
            out = self.lm.model(input_ids=torch.tensor([head], device=device), use_cache=True, logits_to_keep=1)
            cache = extended_cache(out.past_key_values, torch.zeros(rows, dtype=torch.long, device=device))
        ids, mask = left_pad([prefix[len(head) :] for prefix in window], self.lm.pad_token_id, device)
        whole_mask = torch.cat([past, mask], dim=1)
        out = self.lm.model(
            input_ids=ids,
            attention_mask=whole_mask,
            position_ids=len(head) + (mask.cumsum(-1) - 1).clamp(min=0),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return whole_mask, out.logits[:, -1].float().cpu(), out.past_key_values

    def _windows(
        self, encoded: Sequence[Encoded], members: Sequence[int], token_limit: int
    ) -> Iterator[tuple[list[tuple[int, ...]], list[list[int]]]]:
        """The requests `members` (indices into `encoded`) grouped by `_prefix_windows`, each window with its
        requests split into batches.

        Within a window, requests are ordered by continuation-length bucket (powers of two), so short
        variants are not padded to the length of long ones; a batch holds at most `batch_size`
        requests and `token_limit` continuation tokens (padding included)."""
        for window, groups in self._prefix_groups(encoded, members):
            ordered = sorted(
                (i for p in window for i in groups[p]),
                key=lambda i: (-len(encoded[i].continuation).bit_length(), -len(encoded[i].continuation)),
            )
            batches: list[list[int]] = []
            for index in ordered:
                length, bucket = len(encoded[index].continuation), len(encoded[index].continuation).bit_length()
                last = batches[-1] if batches else []
                fits = (
                    last
                    and len(last) < self.batch_size
                    and len(encoded[last[0]].continuation).bit_length() == bucket
                    and max(length, len(encoded[last[0]].continuation)) * (len(last) + 1) <= token_limit
                )
                if fits:
                    last.append(index)
                else:
                    batches.append([index])
            yield window, batches

    def _prefix_groups(
        self, encoded: Sequence[Encoded], members: Sequence[int]
    ) -> Iterator[tuple[list[tuple[int, ...]], dict[tuple[int, ...], list[int]]]]:
        """The requests `members` (indices into `encoded`) grouped by their prefix, the prefixes in the windows of
        `_prefix_windows`: each window with the requests under each prefix."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for index in members:
            groups.setdefault(encoded[index].prefix, []).append(index)
        for window in self._prefix_windows(sorted(groups, key=len, reverse=True)):
            yield window, groups

    def _prefix_windows(self, prefixes: Sequence[tuple[int, ...]]) -> Iterator[list[tuple[int, ...]]]:
        """`prefixes` (longest first) in consecutive windows of at most `batch_size` prefixes and `max_prefix_tokens`
        tokens once padded to the window's longest; a prefix longer than that has a window of its own."""
        window: list[tuple[int, ...]] = []
        for prefix in prefixes:
            if window and (
                len(window) == self.batch_size or (len(window) + 1) * len(window[0]) > self.max_prefix_tokens
            ):
                yield window
                window = []
            window.append(prefix)
        if window:
            yield window

    @torch.inference_mode()
    def _passes(
        self, encoded: Sequence[Encoded], *, keep_all: bool, desc: str
    ) -> Iterator[tuple[torch.Tensor, list[tuple[int, int]], torch.Tensor]]:
        """For every batch: the last-token logits of its window's prefixes, the batch as (request index,
        prefix row), and the logits of its continuation positions (left-padded; only the last if not
        `keep_all`)."""
        lm, device = self.lm, self.lm.device
        bar = tqdm(total=len(encoded), desc=desc, unit="prompt", disable=not self.progress, leave=False)
        limit = min(self.max_batch_tokens, self.max_logit_tokens) if keep_all else self.max_batch_tokens
        windows = (window for _, members in self.by_state(encoded) for window in self._windows(encoded, members, limit))
        for window, batches in windows:
            rows = {prefix: row for row, prefix in enumerate(window)}
            prefix_mask, prefix_last, prefix_cache = self._encode_prefixes(window)
            for batch in batches:
                pairs = [(index, rows[encoded[index].prefix]) for index in batch]
                conts = [encoded[index].continuation for index in batch]
                if not any(conts):
                    yield prefix_last, pairs, torch.empty(len(batch), 0, prefix_last.shape[-1])
                    bar.update(len(batch))
                    continue
                select = torch.tensor([row for _, row in pairs], device=device)
                cache = forked_cache(prefix_cache, select)
                cont_ids, cont_mask = left_pad(conts, lm.pad_token_id, device)
                cont_positions = prefix_mask.sum(-1)[select, None] + (cont_mask.cumsum(-1) - 1).clamp(min=0)
                out = lm.model(
                    input_ids=cont_ids,
                    attention_mask=torch.cat([prefix_mask[select], cont_mask], dim=1),
                    position_ids=cont_positions,
                    past_key_values=cache,
                    use_cache=False,
                    logits_to_keep=cont_ids.shape[1] if keep_all else 1,
                )
                yield prefix_last, pairs, out.logits.float().cpu()
                bar.update(len(batch))
                release_freed_memory()
        bar.close()

    def _last_logits(self, encoded: Sequence[Encoded], *, desc: str) -> Iterator[tuple[int, torch.Tensor]]:
        """(request index, next-token logits after the whole request), streamed batch by batch: a caller keeps what
        it needs of a row (the label tokens' few logits), never a vocabulary of logits per request."""
        if self.packs:
            yield from self._packed_last_logits(encoded, desc=desc)
            return
        for prefix_last, batch, cont_logits in self._passes(encoded, keep_all=False, desc=desc):
            for row, (index, prefix_row) in enumerate(batch):
                yield index, (cont_logits[row, -1] if encoded[index].continuation else prefix_last[prefix_row])

    @torch.inference_mode()
    def _packed_last_logits(self, encoded: Sequence[Encoded], *, desc: str) -> Iterator[tuple[int, torch.Tensor]]:
        """`_last_logits` with the continuations of each prefix packed as trees (`packed_rows`): a token that several
        continuations begin with runs once."""
        bar = tqdm(total=len(encoded), desc=desc, unit="prompt", disable=not self.progress, leave=False)
        for _, members in self.by_state(encoded):
            for window, groups in self._prefix_groups(encoded, members):
                prefix_mask, prefix_last, prefix_cache = self._encode_prefixes(window)
                rows: list[tuple[int, PackedRow]] = []
                for row, prefix in enumerate(window):
                    for index in groups[prefix]:
                        if not encoded[index].continuation:
                            bar.update(1)
                            yield index, prefix_last[row]
                    continuations = {i: encoded[i].continuation for i in groups[prefix] if encoded[i].continuation}
                    rows += [(row, packed) for packed in packed_rows(continuations, self.max_packed_tokens)]
                rows.sort(key=lambda item: -len(item[1].tokens))
                for batch in self._fill(rows, lambda item: (len(item[1].tokens), item[1].end_positions), packed=True):
                    for index, logits in self._packed_forward(prefix_mask, prefix_cache, batch):
                        bar.update(1)
                        yield index, logits
                    release_freed_memory()
        bar.close()

    def _packed_reads(
        self, encoded: Sequence[Encoded], wanted: Sequence[tuple[int, ...]], window: PrefixWindow
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """The `wanted` logits of the requests under the prefixes of `window`, each prefix's continuations packed as
        trees (`packed_rows`): the rows of a batch in one forward, and only the positions read through the output
        head, at most `max_logit_tokens` at a time (a request asking more, alone)."""
        rows = [
            (row, packed)
            for row, prefix in enumerate(window.prefixes)
            for packed in packed_rows(
                {i: encoded[i].continuation for i in window.groups[prefix]}, self.max_packed_tokens
            )
        ]
        rows.sort(key=lambda item: -len(item[1].tokens))
        for batch in self._fill(rows, lambda item: (len(item[1].tokens), ()), packed=True):
            ids, positions, mask, select = self._packed_inputs(window.mask, batch)
            hidden = self.lm.model.get_decoder()(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=forked_cache(window.cache, select),
                use_cache=False,
            ).last_hidden_state
            reads = [
                (index, b, [path[r] for r in wanted[index]])
                for b, (_, packed) in enumerate(batch)
                for index, path in packed.paths().items()
            ]
            for chunk in bounded_chunks(reads, lambda read: len(read[2]), self.max_logit_tokens):
                at = {(b, position): None for _, b, read in chunk for position in read}
                where = torch.tensor(list(at), device=self.lm.device).T
                logits = output_logits(self.lm.model, hidden[where[0], where[1]]).float().cpu()
                row_of = {read: j for j, read in enumerate(at)}
                for index, b, read in chunk:
                    yield index, logits[[row_of[b, position] for position in read]]
            release_freed_memory()

    def _packed_inputs(
        self, prefix_mask: torch.Tensor, batch: Sequence[tuple[int, PackedRow]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """A batch of (prefix row, packed row) as one forward's input ids, position ids and 4-D attention mask, each
        packed row right-padded and continuing its prefix row (the rows `select`ed of the prefixes' KV cache)."""
        device, dtype = self.lm.device, self.lm.model.dtype
        width = max(len(packed.tokens) for _, packed in batch)
        ids = torch.full((len(batch), width), self.lm.pad_token_id, dtype=torch.long)
        positions = torch.zeros((len(batch), width), dtype=torch.long)
        seen = torch.eye(width, dtype=torch.bool).repeat(len(batch), 1, 1)
        starts = prefix_mask.sum(-1).cpu()
        for b, (row, packed) in enumerate(batch):
            size = len(packed.tokens)
            ids[b, :size] = torch.tensor(packed.tokens)
            positions[b, :size] = starts[row] + torch.tensor(packed.depths)
            seen[b, :size, :size] = packed.visibility()
        select = torch.tensor([row for row, _ in batch], device=device)
        visible = torch.cat([prefix_mask[select].bool()[:, None, :].expand(-1, width, -1), seen.to(device)], dim=2)
        mask = torch.zeros(visible.shape, dtype=dtype, device=device).masked_fill(~visible, torch.finfo(dtype).min)
        return ids.to(device), positions.to(device), mask[:, None], select

    def _packed_forward(
        self, prefix_mask: torch.Tensor, prefix_cache: Any, batch: Sequence[tuple[int, PackedRow]]
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """One forward of a batch of (prefix row, packed row), each packed row right-padded and continuing its prefix
        row of `prefix_cache`: each of its requests' next-token logits after the request's last token."""
        ids, positions, mask, select = self._packed_inputs(prefix_mask, batch)
        columns = sorted({position for _, packed in batch for position in packed.end_positions})
        out = self.lm.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=forked_cache(prefix_cache, select),
            use_cache=False,
            logits_to_keep=torch.tensor(columns, device=self.lm.device),
        )
        logits = out.logits.float().cpu()
        at = {column: j for j, column in enumerate(columns)}
        for b, (_, packed) in enumerate(batch):
            for index, position in packed.ends:
                yield index, logits[b, at[position]]


SHARED_ENGINES: dict[tuple[str, bool], ScoringEngine] = {}
"""The engines of `shared_engine`, by model name and whether they show progress bars."""


def shared_engine(name: str, *, progress: bool = True) -> ScoringEngine:
    """A scoring engine over the model `name`, loaded on first use and kept for the life of the process: for a model
    that serves a metric (simulator, helper LM) and for the model an `evaluate` module scores with (there without
    progress bars). The engines with and without progress bars share one loaded model."""
    if (name, progress) not in SHARED_ENGINES:
        other = SHARED_ENGINES.get((name, not progress))
        SHARED_ENGINES[name, progress] = ScoringEngine(other.lm if other else load_model(name), progress=progress)
    return SHARED_ENGINES[name, progress]


def share_engine(engine: ScoringEngine) -> None:
    """Serve `engine` wherever `shared_engine` is asked for its model with its progress setting: a bench or a test
    choosing the engine (a reference loop, say) that serves a helper model."""
    SHARED_ENGINES[engine.lm.name, engine.progress] = engine


def engine_of(name: str | None, evaluated: Engine, *, role: str) -> Engine:
    """The engine of the model that serves a metric as `role` (its simulator or helper LM): `name`, or when None the
    default for the evaluated model (another packaged model, `default_helper_model`). A model named explicitly may
    be the evaluated one: its own engine then serves, with a warning, since it would judge its own answers. It shows
    progress bars where the evaluated engine does."""
    name = name or default_helper_model(evaluated.lm.name)
    if name != evaluated.lm.name:
        return shared_engine(name, progress=evaluated.progress)
    log.warning("the %s is the evaluated model %s itself (asked for explicitly)", role, name)
    return evaluated


_MALLOC_TRIM = getattr(ctypes.CDLL(None), "malloc_trim", None) if os.name == "posix" else None


def release_freed_memory() -> None:
    """Hand back to the system the memory that freed tensors left in the C heap (glibc's `malloc_trim`; nothing where
    the C library has none). Without it a long run's peak RSS is its largest batch's on top of what earlier batches
    left scattered in the heap: over the controls of 100 FactCheck pairs, 1.55 GB instead of 1.43 GB (README,
    "Memory")."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def bounded_chunks(items: Sequence[T], size: Callable[[T], int], limit: int) -> Iterator[list[T]]:
    """`items` in consecutive chunks whose sizes sum to at most `limit` (an item larger than that, alone)."""
    chunk: list[T] = []
    total = 0
    for item in items:
        if chunk and total + size(item) > limit:
            yield chunk
            chunk, total = [], 0
        chunk.append(item)
        total += size(item)
    if chunk:
        yield chunk


def output_logits(model: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """The logits that `model`'s output head gives for its final hidden states `hidden` (soft-capped where the model
    caps them, as Gemma 2's config asks)."""
    logits = model.get_output_embeddings()(hidden)
    cap = getattr(model.config.get_text_config(), "final_logit_softcapping", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def requested_rows(encoded: Sequence[Encoded], rows: Sequence[Sequence[int]] | None) -> list[tuple[int, ...]]:
    """The continuation rows asked of each request (all of them when `rows` is None), checked."""
    if rows is None:
        rows = [range(len(e.continuation)) for e in encoded]
    if len(rows) != len(encoded):
        raise ValueError(f"rows names {len(rows)} requests' positions for {len(encoded)} requests")
    wanted = [tuple(int(r) for r in own) for own in rows]
    for index, (request, own) in enumerate(zip(encoded, wanted)):
        if not own or not all(0 <= r < len(request.continuation) for r in own):
            raise ValueError(
                f"request {index} asks for continuation rows {list(own)} of a {len(request.continuation)}-token "
                "continuation (needs one or more, each in range)"
            )
    return wanted


def shared_head(prefixes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The beginning that all of several `prefixes` share, short of the shortest one's last token (so that each has a
    rest to encode after it); empty for a single prefix."""
    if len(prefixes) < 2:
        return ()
    shortest = min(len(prefix) for prefix in prefixes)
    length = min(common_length(prefixes[0], prefix) for prefix in prefixes[1:])
    return prefixes[0][: min(length, shortest - 1)]


def suffix(request: Encoded, stem: Stem) -> tuple[int, ...]:
    """What follows `stem` in `request`'s continuation."""
    return request.continuation[len(stem.tokens) :]


def stem_rows(stem: Stem, wanted: Sequence[tuple[int, ...]]) -> list[int]:
    """The rows inside `stem` that any of its members asks for, in order."""
    return sorted({row for member in stem.members for row in wanted[member] if row < len(stem.tokens)})


def stop_token_ids(lm: LanguageModel) -> list[int]:
    """The tokens that end a generated turn: the tokenizer's end of sequence and, where it has one, Gemma's
    end-of-turn marker."""
    candidates = {lm.tokenizer.eos_token_id, lm.tokenizer.convert_tokens_to_ids("<end_of_turn>")}
    return sorted(i for i in candidates if isinstance(i, int) and i >= 0)


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Token sequences as one batch padded on the left with `pad_id`, and its attention mask."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq)
            mask[row, width - len(seq) :] = 1
    return ids.to(device), mask.to(device)


@torch.inference_mode()
def naive_label_probs(lm: LanguageModel, requests: Sequence[LabelRequest]) -> list[np.ndarray]:
    """Reference scoring as the paper's code does it: one full prompt per forward, batch 1, no cache."""
    results = []
    for request in requests:
        prefix_text = lm.render(prompts.in_context(request.prompt))
        ids = lm.encode(prefix_text) + (
            lm.encode(request.prompt.continuation, continuation=True) if request.prompt.continuation else []
        )
        full_text = prefix_text + request.prompt.continuation
        label_ids = lm.label_token_ids(request.labels, leading_space=not full_text[-1:].isspace())
        logits = lm.model(input_ids=torch.tensor([ids], device=lm.device)).logits[0, -1].float().cpu()
        results.append(torch.softmax(logits[list(label_ids)].double(), dim=-1).numpy())
    return results
