"""Causal Faithfulness, CaF (Yeo et al.; paper 002 §3–4, App. A.1): do the same hidden states cause the
answer and the explanation?

Symmetric token replacement: a counterfactual input of the SAME token length whose designed answer differs
(the pair's `flip_edits`; else, for FactCheck, the edit made to state the asked object, which turns "No" into
"Yes"; for Object Counting, just enough items re-typed in the edits, each to a type of the pair with as many
tokens for the evaluated tokenizer, that the count gives the other answer; Analogy and Multi-hop have none).
The clean run is the evaluated model's post-hoc prompt (Fig. 11) under the instance's edits, with its own
predicted label ŷ (direct prompt, eq. 7) and the explanation teacher-forced; the corrupted run is the same
prompt with the counterfactual edits/question. Patching the clean residual stream into the corrupted run at
(token t, layer l) gives the indirect effects

Under a weight editor (ROME, MEMIT) the edits are in the weights, not the input: the counterfactual facts are
written as the replaced facts' rewrites with their new objects (`learn_counterfactual`), the two runs read the same
tokens on two edited models (the clean run's residual stream taken from the instance's weights, patched into the run
on the counterfactual's weights), and the patched positions start at the question, the first input token that the
two models may read differently.

- C_a[t, l] = p_patched(ŷ) − p_*(ŷ), ŷ's probability among the label tokens after the direct prompt (a
  prefix of the post-hoc prompt, so one forward reads both);
- C_e[t, l] = mean over explanation tokens j of p_patched(e_j) − p_*(e_j) (eq. 2).

Patched positions (`positions`): by default as in the paper (§3.1: positions before the first replaced token
cannot matter under causal attention), every input position from the first replaced token to the end of the
direct prompt, where ŷ is read ("input"); or, to cut CPU time, only the replaced tokens and the question's
("changed_and_question", a sub-matrix of the paper's). Layers: all decoder layers by default.

Variants: `caf` = 1 − cosine distance(C_e, C_a) over the flattened matrices (eq. 3); `caf_m` the same with
each layer represented by a window of 10 layers patched together; `caf_t` on the token vectors (layers summed);
`caf_l` on the layer vectors (tokens summed). NaN without a usable counterfactual (none constructible, its
token length differs, or it does not change the model's answer, y_C = y) and when a compared vector is
numerically zero. `coverage` after scoring says how many instances had a usable counterfactual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import distance
from tqdm.auto import tqdm

from .. import prompts
from ..api import Counterfactual, Engine, Instance, Metric, register_metric, symmetric_counterfactual
from ..editors.weights import EditError
from ..mechanisms.activation_patching import (
    Ending,
    Patch,
    Readout,
    decoder_layers,
    residual_stream,
    target_run,
    token_layer_patches,
)
from ..mechanisms.attribution_patching import attribution_effects
from ..mechanisms.prompting import label_request, question_positions

VARIANTS = ("caf", "caf_m", "caf_t", "caf_l")
POSITIONS = ("input", "changed_and_question")
PATCHING = ("exact", "attribution")
WINDOW = 10
ZERO_NORM = 1e-6
VERIFIED_CELLS = 64
"""The cells that attribution patching re-patches exactly per explanation by default: of the counts measured, the
fewest at which `caf` ordered the faithful and unfaithful explanations of all 20 FactCheck pairs as exact patching
does (9 of 10 held-out pairs, the miss a near tie; README, "CaF: attribution patching")."""


@dataclass(frozen=True)
class PatchingLayout:
    """One instance's clean and counterfactual post-hoc prompts as token ids (equal lengths), the patched
    positions, the label tokens and ŷ's index among them, the position whose logits score the label (the
    direct prompt's last), the explanation's tokens (the prompts' last tokens), and the edited weights each run
    reads (empty under ICE, where both run on the loaded weights)."""

    clean: tuple[int, ...]
    corrupted: tuple[int, ...]
    positions: tuple[int, ...]
    label_ids: tuple[int, ...]
    label_index: int
    label_position: int
    explanation_ids: tuple[int, ...]
    clean_state: tuple[str, ...] = ()
    corrupted_state: tuple[str, ...] = ()

    @property
    def read_positions(self) -> tuple[int, ...]:
        """The positions whose logits `readout` reads: the label's, then the one before each explanation token."""
        end = len(self.clean) - 1
        return (self.label_position, *range(end - len(self.explanation_ids), end))

    @property
    def stem_length(self) -> int:
        """The tokens before the explanation: the same for every explanation of one prompt."""
        return len(self.clean) - len(self.explanation_ids)

    @property
    def stem(self) -> tuple:
        """What layouts must agree on to share their patched runs: everything but the explanation."""
        n = self.stem_length
        return (
            self.clean[:n],
            self.corrupted[:n],
            self.positions,
            self.label_ids,
            self.label_index,
            self.label_position,
            self.clean_state,
            self.corrupted_state,
        )

    def ending(self) -> Ending:
        """The counterfactual run's explanation after the stem, read by `readout`."""
        return Ending(self.corrupted[self.stem_length :], self.read_positions, readout(self))


def patching_layout(
    engine: Engine, instance: Instance, label_index: int, cf: Counterfactual, positions: str = "input"
) -> PatchingLayout | None:
    """The instance's layout with the `positions` patched (module docstring), or None when the counterfactual
    prompts differ in token length."""
    label = instance.choices[label_index]
    direct = engine.encode(prompts.direct(instance.edits, instance.question))
    cf_direct = engine.encode(prompts.direct(cf.edits, cf.question))
    post = prompts.post_hoc(instance.edits, instance.question, label, instance.explanation)
    clean = engine.encode(post)
    corrupted = engine.encode(prompts.post_hoc(cf.edits, cf.question, label, instance.explanation))
    clean_ids, corrupted_ids = clean.prefix + clean.continuation, corrupted.prefix + corrupted.continuation
    if len(direct.prefix) != len(cf_direct.prefix) or len(clean_ids) != len(corrupted_ids):
        return None
    if clean_ids[: len(direct.prefix)] != direct.prefix:
        raise ValueError(f"the post-hoc prompt does not start with the direct prompt's tokens for {engine.lm.name}")
    differing = [i for i, (a, b) in enumerate(zip(clean_ids, corrupted_ids)) if a != b]
    weights_differ = clean.state != corrupted.state
    question = (
        question_positions(engine, post, instance.question, clean.prefix)
        if positions != "input" or (weights_differ and not differing)
        else []
    )
    first = differing[:1] or (question[:1] if weights_differ else [])
    if positions == "input":
        patched = set(range(first[0], len(direct.prefix))) if first else set()
    else:
        patched = set(differing) | set(question)
    return PatchingLayout(
        clean_ids,
        corrupted_ids,
        tuple(sorted(patched)),
        engine.lm.label_token_ids(instance.choices, leading_space=direct.leading_space),
        label_index,
        len(direct.prefix) - 1,
        clean.continuation,
        clean.state,
        corrupted.state,
    )


def readout(lay: PatchingLayout) -> Readout:
    """Logits at `lay.read_positions` → [p(ŷ) among the labels, mean p(e_j) over the explanation tokens]."""
    expl_ids = torch.tensor(lay.explanation_ids)

    def read(logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        label = torch.softmax(logits[:, 0, list(lay.label_ids)], dim=-1)[:, lay.label_index]
        rows = logits[:, 1:]
        chosen = rows.gather(-1, expl_ids.to(rows.device).expand(len(rows), -1)[..., None])[..., 0]
        expl = torch.exp(chosen - torch.logsumexp(rows, dim=-1)).mean(-1)
        return torch.stack([label, expl], dim=-1).double().cpu()

    return read


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """1 − cosine distance of two arrays (flattened); NaN when either is numerically zero or not computed (NaN)."""
    a, b = np.ravel(a), np.ravel(b)
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    if np.linalg.norm(a) < ZERO_NORM or np.linalg.norm(b) < ZERO_NORM:
        return float("nan")
    return float(1.0 - distance.cosine(b, a))


def caf_scores(
    answer: np.ndarray, explanation: np.ndarray, answer_m: np.ndarray, explanation_m: np.ndarray
) -> dict[str, float]:
    """The four variants from the [tokens × layers] causal matrices, single-layer and windowed (M)."""
    return {
        "caf": cosine_similarity(answer, explanation),
        "caf_m": cosine_similarity(answer_m, explanation_m),
        "caf_t": cosine_similarity(answer.sum(axis=1), explanation.sum(axis=1)),
        "caf_l": cosine_similarity(answer.sum(axis=0), explanation.sum(axis=0)),
    }


def prepare(
    engine: Engine, instance: Instance, label_index: int, *, require_flip: bool = True, positions: str = "input"
) -> tuple[str, PatchingLayout | None]:
    """The instance's layout with its status, or the reason it cannot be scored. With `require_flip` the
    counterfactual must change the model's answer (y_C ≠ y, paper 002 §3.1); without it, the answer's effects
    may be noise where the model ignores the replacement."""
    if not instance.explanation.strip():
        return "blank explanation", None
    cf = symmetric_counterfactual(instance, lambda text: len(engine.lm.encode(text, continuation=True)))
    if cf is None:
        return "no counterfactual", None
    try:
        engine.editor.learn_counterfactual(instance.edits, cf.edits, "CaF counterfactual")
    except EditError:
        return "counterfactual not writable", None
    if require_flip:
        (cf_probs,) = engine.label_probs(
            [label_request(instance, edits=cf.edits, question=cf.question)], desc="counterfactual answer"
        )
        if int(np.argmax(cf_probs)) == label_index:
            return "answer not flipped", None
    lay = patching_layout(engine, instance, label_index, cf, positions)
    return ("ok", lay) if lay is not None else ("token length differs", None)


def cells_to_verify(first_order: torch.Tensor, count: int) -> list[tuple[int, int]]:
    """The `count` (position, layer) indices of first-order effects [positions, layers, answer | explanation] that
    attribution patching re-patches exactly: the largest by the sum of their answer and explanation effects, each
    relative to its largest."""
    scale = first_order.abs().flatten(0, 1).max(0).values.clamp_min(ZERO_NORM)
    rank = (first_order.abs() / scale).sum(-1).flatten()
    return [divmod(i, first_order.shape[1]) for i in rank.argsort(descending=True)[:count].tolist()]


@dataclass(frozen=True)
class Coverage:
    """Per scored instance: its status ("ok", or why it scored NaN: "no counterfactual", "answer not
    flipped", "token length differs", "blank explanation", "counterfactual not writable": a weight editor has no
    rewrite for a counterfactual fact) and the total effect p(ŷ) − p_*(ŷ) of the replacement on the answer."""

    status: tuple[str, ...]
    total_effect: tuple[float, ...]

    @property
    def fraction(self) -> float:
        return sum(s == "ok" for s in self.status) / len(self.status) if self.status else float("nan")


@register_metric
class CausalFaithfulness(Metric):
    """Agreement of the activation-patching effects on the answer and on the explanation.

    `layers`: the decoder layers patched (default all); `positions`: the token positions patched, "input" (the
    paper's) or "changed_and_question" (module docstring); `window`: layers patched together for `caf_m`;
    `batch_size`: patched copies per forward; `require_flip`: score only counterfactuals that change the model's
    answer (the paper's condition; off, every designed counterfactual is patched). After scoring, `coverage`
    holds each instance's status."""

    name = "causal_faithfulness"
    explanation_type = "post-hoc"
    pairs_per_checkpoint = 1  # the capable model on 2 CPU cores: 10–15 min per patched pair-direction
    description = "1 − cosine distance between activation-patching effect matrices of the answer and the explanation"
    title = "Causal Faithfulness"
    long_description = (
        "Causal Faithfulness (Yeo et al., 2024): activation patching with symmetric token replacement "
        "gives the causal effect of every (input token, layer) hidden state on the model's answer "
        "(C_a) and on its post-hoc explanation (C_e); the score is 1 − cosine distance(C_e, C_a). "
        "Variants caf, caf_m (10-layer windows), caf_t (token level), caf_l (layer level)."
    )
    citation = """@inproceedings{yeo2025towards,
  title={Towards Faithful Natural Language Explanations: A Study Using Activation Patching in Large Language Models},
  author={Yeo, Wei Jie and Satapathy, Ranjan and Cambria, Erik}, booktitle={Proceedings of EMNLP}, year={2025},
  pages={10436--10458}, eprint={2410.14155}, archivePrefix={arXiv}, url={https://arxiv.org/abs/2410.14155}
}"""
    evaluate_options = ("layers", "window", "require_flip", "positions", "patching", "verified_cells")
    layer_options = ("layers",)
    options_doc = """
    layers (list[int], optional): the decoder layers to patch. Default: all (the paper's setting).
    window (int, optional): layers patched together for caf_m. Default: 10.
    positions (str, optional): "input" (every input position from the first replaced token on, the paper's) or
        "changed_and_question" (fewer patches). Default: "input".
    require_flip (bool, optional): score only inputs whose counterfactual changes the model's answer (the
        paper's condition; others are NaN). Default: True.
    patching (str, optional): "exact" (one patched run per cell, the paper's) or "attribution" (first-order
        attribution patching, one forward and one batched backward pass for a prompt's explanations, with the
        `verified_cells` highest-ranked cells patched exactly; caf_m, whose windows patch ten layers at once, is
        NaN). Default: "exact".
    verified_cells (int, optional): with patching="attribution", the cells patched exactly. Default: 64.
"""

    def __init__(
        self,
        layers: Sequence[int] | None = None,
        window: int = WINDOW,
        batch_size: int = 32,
        require_flip: bool = True,
        positions: str = "input",
        patching: str = "exact",
        verified_cells: int = VERIFIED_CELLS,
    ) -> None:
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {list(POSITIONS)}, got {positions!r}")
        if patching not in PATCHING:
            raise ValueError(f"patching must be one of {list(PATCHING)}, got {patching!r}")
        if verified_cells < 0:
            raise ValueError(f"verified_cells must be >= 0, got {verified_cells}")
        self.patching, self.verified_cells = patching, verified_cells
        self.layers = tuple(layers) if layers is not None else None
        self.positions = positions
        self.window, self.batch_size, self.require_flip = window, batch_size, require_flip
        self.coverage = Coverage((), ())

    @property
    def variants(self) -> tuple[str, ...]:
        return VARIANTS

    def matrices(self, engine: Engine, layouts: Sequence[PatchingLayout]) -> list[tuple[np.ndarray, float]]:
        """Per layout (all of one `stem`: the explanations of one prompt, whose patched runs share the stem's
        computation): effects [single | windowed, tokens, layers, answer | explanation] and p_*(ŷ), the corrupted
        run's."""
        if len({lay.stem for lay in layouts}) != 1:
            raise ValueError("the layouts patched together must differ in their explanations alone")
        model, lay = engine.lm.model, layouts[0]
        n_layers = len(decoder_layers(model))
        layers = self.layers if self.layers is not None else tuple(range(n_layers))
        if not all(0 <= layer < n_layers for layer in layers):
            raise ValueError(f"layers {list(layers)} are not all within the model's {n_layers} decoder layers")
        stem = lay.stem_length
        with engine.editor.applied(lay.clean_state):
            source = residual_stream(model, lay.clean[:stem])
        if self.patching == "attribution":
            return self._attributed(engine, layouts, layers, source)
        patches = [Patch((), ())] + [
            patch for w in (1, self.window) for patch in token_layer_patches(lay.positions, layers, n_layers, window=w)
        ]
        with engine.editor.applied(lay.corrupted_state):
            out = engine.patched_readouts(
                lay.clean[:stem],
                lay.corrupted[:stem],
                patches,
                [one.ending() for one in layouts],
                batch_size=self.batch_size,
                source_states=source,
            )
        effects = (out[1:] - out[0]).numpy().reshape(2, len(lay.positions), len(layers), len(layouts), 2)
        return [(effects[..., k, :], float(out[0, k, 0])) for k in range(len(layouts))]

    def _attributed(
        self, engine: Engine, layouts: Sequence[PatchingLayout], layers: Sequence[int], source: Sequence[torch.Tensor]
    ) -> list[tuple[np.ndarray, float]]:
        """Effects and p_*(ŷ) per layout as `matrices` gives them, by attribution patching: first-order effects of
        every cell, each layout's `verified_cells` largest (`cells_to_verify`) replaced by exact patches, which the
        layouts share (every cell one of them verifies is patched once, its run read by each explanation; the
        unpatched run, which both passes start from, runs once); the windowed matrices are NaN."""
        model, lay = engine.lm.model, layouts[0]
        stem, found = lay.corrupted[: lay.stem_length], []
        with engine.editor.applied(lay.corrupted_state):
            endings = [one.ending() for one in layouts]
            target = target_run(model, stem, endings) if self.verified_cells else None
            first_order, unpatched = attribution_effects(model, source, stem, endings, lay.positions, layers, target)
            for k in range(len(layouts)):
                effects = first_order[:, :, k]
                found.append((effects.clone(), unpatched[k], cells_to_verify(effects, self.verified_cells)))
            cells = list(dict.fromkeys(cell for _, _, top in found for cell in top))
            if cells:
                exact = engine.patched_readouts(
                    lay.clean[: lay.stem_length],
                    stem,
                    [Patch((), ())] + [Patch((lay.positions[p],), (layers[j],)) for p, j in cells],
                    endings,
                    batch_size=self.batch_size,
                    progress=False,
                    source_states=source,
                    target=target,
                )
                shifts = dict(zip(cells, exact[1:] - exact[0], strict=True))
                for k, (effects, _, top) in enumerate(found):
                    for p, j in top:
                        effects[p, j] = shifts[p, j][k]
        return [
            (torch.stack([effects, torch.full_like(effects, float("nan"))]).numpy(), float(unpatched[0]))
            for effects, unpatched, _ in found
        ]

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        scores = {v: np.full(len(instances), np.nan) for v in VARIANTS}
        probs = engine.label_probs([label_request(i) for i in instances], desc=self.name)
        status, total, stems = [], np.full(len(instances), np.nan), {}
        preparing = tqdm(instances, desc=f"{self.name} counterfactuals", disable=not engine.progress)
        for k, instance in enumerate(preparing):
            reason, lay = prepare(
                engine, instance, int(np.argmax(probs[k])), require_flip=self.require_flip, positions=self.positions
            )
            status.append(reason)
            if lay is not None:
                stems.setdefault(lay.stem, []).append((k, lay))
        bar = tqdm(total=sum(map(len, stems.values())), desc=self.name, disable=not engine.progress)
        for members in stems.values():
            for (k, lay), (effects, corrupted_p) in zip(
                members, self.matrices(engine, [lay for _, lay in members]), strict=True
            ):
                total[k] = float(probs[k][lay.label_index]) - corrupted_p
                single, windowed = effects
                values = caf_scores(single[..., 0], single[..., 1], windowed[..., 0], windowed[..., 1])
                for variant, value in values.items():
                    scores[variant][k] = value
            bar.update(len(members))
        bar.close()
        self.coverage = Coverage(tuple(status), tuple(map(float, total)))
        return scores
