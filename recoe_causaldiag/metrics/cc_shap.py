"""CC-SHAP (Parcalabescu & Frank, 2023/2024; paper 000 §2.1, App. D): do the input tokens contribute alike to
the model's prediction and to its explanation?

Features are the question tokens only: the ICE edit prefix and the prompt template are never masked nor
attributed (SPEC §5). A coalition keeps its question tokens and replaces the others by one baseline token each
(default "...", the mask text of shap's Text masker used by the original code; here not collapsed, so the
length stays fixed). Shapley values are estimated by default with Leverage SHAP (Musco & Witter, 2025;
`estimator="leverage"`): coalitions drawn in complementary pairs, without replacement, a fixed share of them at
every coalition size (the sizes' leverage scores are equal), and the Shapley values solved from them as Kernel
SHAP's weighted least-squares problem with the efficiency constraint exact; a question of more than 10 tokens gets at
least the original code's budget (`long_question_samples`, 16), since there Leverage SHAP's lead over permutations
is gone (README, "CC-SHAP: the estimator and its budget"). The permutation estimators run captum's
`ShapleyValueSampling` (`n_samples` seeded permutations: antithetic pairs, a permutation and its reverse, along the
orthogonal directions of a random basis, "orthogonal"; antithetic pairs alone, "antithetic"; or independent ones,
"sampling"). Every estimator scores one multi-output, teacher-forced forward per coalition, in two passes: once to
record the coalitions it needs, then on their outputs, which are scored in between for every attribution of every
instance in one batched engine call (the edit prefix's KV cache shared, each coalition cut after its last scored
token and scored once, only the scored rows through the output head; a pair's faithful and unfaithful prompts agree
up to where their explanations part, and the engine runs that shared beginning once per coalition). The outputs:

- prediction: the log-odds of the predicted label among the label tokens, log p(ŷ) − log(1 − p(ŷ)) (eq. 7;
  the logit difference for two labels), so that both sides are on the log scale of the original's outputs;
- explanation: log p(e_t | everything before) of every explanation token e_t.

Aggregation as in the original code (`ccshap/cc_shap.py`): each output token's attribution vector is divided by
its L1 norm over the question tokens, the explanation's vectors are averaged over its tokens, and
CC-SHAP = 1 − cosine distance of the two profiles, in [−1, 1]. (The original's ×100 does not change a cosine;
its SHAP outputs were full-vocabulary log-odds, here the label log-odds and token log-probabilities.)

The prediction ŷ is the model's direct answer (the plain question under ICE) in both variants, as in the original
and the authors' code: `post_hoc` (Fig. 13: question → ŷ → "Why?" → "Because {explanation}"; p(ŷ) is read where
the answer stands, one forward per coalition for both sides) and `cot` (the prediction side is the direct prompt,
whose attribution equals post_hoc's prediction side and is taken from it when both variants run; the explanation
side is the CoT prompt of Fig. 12 with the explanation teacher-forced; both use the same seeded permutations,
the question tokens aligned by position: the two prompts tokenise the question alike except for the first
token's leading space). NaN when undefined: no question or explanation tokens, a question split into
different numbers of tokens by the two prompts, or an all-zero attribution vector.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import distance
from tqdm.auto import tqdm

from .. import prompts
from ..api import Encoded, Engine, Instance, Metric, register_metric
from ..mechanisms.prompting import label_request, overlapping, question_positions, token_offsets

VARIANTS = ("post_hoc", "cot")
EXACT_STUDY_TOKENS = 10
"""The longest question whose Shapley values the convergence study enumerated exactly (2^10 coalitions), the
reach of the default budget's validation against them (bench/cc_shap_convergence.py)."""


@dataclass(frozen=True)
class AttributionLayout:
    """A scored prompt split for attribution, as token ids: fixed `head` (template, edits), the `question` tokens
    (the features) and the fixed `tail`, asked under the edits `state` (weight editing; empty under ICE). Rows index
    the logits of the continuation question + tail: row r predicts token r + 1."""

    head: tuple[int, ...]
    question: tuple[int, ...]
    tail: tuple[int, ...]
    label_ids: tuple[int, ...]
    label_row: int
    explanation_rows: tuple[int, ...]
    explanation_ids: tuple[int, ...]
    state: tuple[str, ...] = ()


def attribution_layout(
    engine: Engine,
    prompt: prompts.Prompt,
    question: str,
    explanation: str,
    labels: Sequence[str],
    label_context: Encoded | None = None,
) -> AttributionLayout:
    """Split `prompt` for attribution. The question ends its first (user) turn; the explanation starts the
    continuation after one space; the labels are scored after the whole prompt, or after `label_context`
    (the direct prompt, for a post-hoc prompt that repeats it and then holds the answer)."""
    lm, enc = engine.lm, engine.encode(prompt)
    positions = question_positions(engine, prompt, question, enc.prefix)
    continuation_offsets = token_offsets(lm, prompt.continuation, enc.continuation, continuation=True)
    explained = overlapping(continuation_offsets, 1, 1 + len(explanation))
    full = enc.prefix + enc.continuation
    label_context = label_context or enc
    context = label_context.prefix + label_context.continuation
    if full[: len(context)] != context:
        raise ValueError(f"the post-hoc prompt does not start with the direct prompt's tokens for {lm.name}")
    start, stop = (positions[0], positions[-1] + 1) if positions else (len(enc.prefix), len(enc.prefix))
    shift = len(enc.prefix) - start
    return AttributionLayout(
        head=enc.prefix[:start],
        question=enc.prefix[start:stop],
        tail=enc.prefix[stop:] + enc.continuation,
        label_ids=lm.label_token_ids(labels, leading_space=label_context.leading_space),
        label_row=len(context) - 1 - start,
        explanation_rows=tuple(shift + i - 1 for i in explained),
        explanation_ids=tuple(enc.continuation[i] for i in explained),
        state=enc.state,
    )


class CoalitionForward:
    """The estimators' forward function (captum's, for the permutation ones): question-token rows (one coalition
    each) → [logit(ŷ), log p(e_1), …, log p(e_T)] per row. While `recording`, it only notes the coalitions asked for
    (answering zeros), so that the coalitions of every attribution are scored in one batched engine call
    (`score_recorded`) before the estimator runs again on the answers; a coalition is scored once (the full input
    recurs in every permutation)."""

    def __init__(self, engine: Engine, lay: AttributionLayout, label_index: int) -> None:
        self.engine, self.layout, self.label_index = engine, lay, label_index
        self.memo: dict[tuple[int, ...], torch.Tensor] = {}
        self.recording = False
        self.recorded: dict[tuple[int, ...], None] = {}

    def __call__(self, coalitions: torch.Tensor) -> torch.Tensor:
        keys = [tuple(int(t) for t in row) for row in coalitions]
        if self.recording:
            self.recorded.update(dict.fromkeys(k for k in keys if k not in self.memo))
            return torch.zeros(len(keys), 1 + len(self.layout.explanation_ids), dtype=torch.float64)
        missing = [k for k in dict.fromkeys(keys) if k not in self.memo]
        if missing:
            self.recorded.update(dict.fromkeys(missing))
            score_recorded(self.engine, [self])
        return torch.stack([self.memo[k] for k in keys])

    def requests(self) -> list[Encoded]:
        """The recorded coalitions as engine requests: the shared head (template and edits) as the prefix, encoded
        once per engine pass; the coalition and the tail up to the last scored token as the continuation
        (`leading_space` only matters for label ids, which the layout fixed)."""
        lay = self.layout
        scored = max((lay.label_row, *lay.explanation_rows)) + 1
        return [Encoded(lay.head, (key + lay.tail)[:scored], False, lay.state) for key in self.recorded]

    @property
    def scored_rows(self) -> tuple[int, ...]:
        """The continuation rows a coalition's outputs are read from: the label's, then each explanation token's."""
        return (self.layout.label_row, *self.layout.explanation_rows)

    def store(self, index: int, logits: torch.Tensor) -> None:
        """The outputs of the `index`-th recorded coalition from its logits at `scored_rows`."""
        lay = self.layout
        logp = torch.log_softmax(logits[0, list(lay.label_ids)].double(), dim=-1)
        others = torch.cat([logp[: self.label_index], logp[self.label_index + 1 :]])
        label = logp[self.label_index] - torch.logsumexp(others, dim=0)
        rows = torch.log_softmax(logits[1:].double(), dim=-1)
        tokens = rows[torch.arange(len(lay.explanation_ids)), torch.tensor(lay.explanation_ids, dtype=torch.long)]
        self.memo[list(self.recorded)[index]] = torch.cat([label.reshape(1), tokens])


def score_recorded(engine: Engine, forwards: Sequence[CoalitionForward]) -> None:
    """Score the coalitions every forward recorded, all in one engine call, and clear the records."""
    owners = [(forward, index) for forward in forwards for index in range(len(forward.recorded))]
    encoded = [request for forward in forwards for request in forward.requests()]
    rows = [forward.scored_rows for forward, _ in owners]
    if encoded:
        for position, logits in engine.continuation_logits(encoded, rows=rows, desc="cc_shap coalitions"):
            forward, index = owners[position]
            forward.store(index, logits)
    for forward in forwards:
        forward.recorded.clear()


def antithetic_permutations(num_features: int, num_samples: int) -> Iterator[list[int]]:
    """Random permutations in antithetic pairs, each followed by its reverse (a feature's predecessors in one are
    its successors in the other, so the pair's errors tend to cancel; Mitchell et al., 2022); an odd last one is
    drawn alone."""
    drawn: list[int] = []
    for k in range(num_samples):
        drawn = torch.randperm(num_features).tolist() if k % 2 == 0 else drawn[::-1]
        yield drawn


def orthogonal_permutations(num_features: int, num_samples: int) -> Iterator[list[int]]:
    """Permutations from orthogonal directions (Mitchell et al., 2022, "orthogonal spherical codes"): a permutation
    is a point of the sphere in the hyperplane orthogonal to (1, …, 1), and each direction of a random orthonormal
    basis of that hyperplane gives the permutation that orders the features as it does, followed by its reverse (the
    opposite direction: an antithetic pair). The pairs of one basis are mutually orthogonal, so no two lie close
    together; after its num_features − 1 directions a new basis is drawn."""
    directions: list[torch.Tensor] = []
    drawn: list[int] = []
    for k in range(num_samples):
        if k % 2:
            drawn = drawn[::-1]
        elif num_features < 2:
            drawn = list(range(num_features))
        else:
            if not directions:
                directions = list(_orthonormal_basis(num_features).T)
            drawn = torch.argsort(directions.pop()).tolist()
        yield drawn


def _orthonormal_basis(num_features: int) -> torch.Tensor:
    """A random orthonormal basis of the hyperplane orthogonal to (1, …, 1), as the columns of a
    (num_features, num_features − 1) matrix (Haar-distributed: QR of centred Gaussian columns, signs fixed)."""
    gaussian = torch.randn(num_features, num_features - 1, dtype=torch.float64)
    q, r = torch.linalg.qr(gaussian - gaussian.mean(dim=0))
    return q * torch.sign(torch.diagonal(r))


def pair_counts(num_features: int) -> dict[int, int]:
    """The complementary pairs of coalitions of each size class (s and n − s, for s = 1 … n // 2); the middle
    class, where s = n − s, pairs each coalition with its complement of the same size."""
    return {
        s: math.comb(num_features, s) // (2 if 2 * s == num_features else 1) for s in range(1, num_features // 2 + 1)
    }


def size_allocation(num_features: int, pairs: float) -> dict[int, float]:
    """How many complementary pairs of coalitions to draw of each size class (s and n − s, for s = 1 … n // 2), for
    `pairs` in all: shares proportional to the sizes' summed leverage scores, which are equal for every size
    (Musco & Witter, 2025), so a class of two sizes gets twice the share of the middle one; a class with fewer pairs
    than its share is taken whole and the rest shared among the others."""
    counts = pair_counts(num_features)
    mass = {s: 1 if 2 * s == num_features else 2 for s in counts}
    allocation, left, left_mass = {}, min(pairs, sum(counts.values())), sum(mass.values())
    for s in sorted(counts, key=lambda s: counts[s] / mass[s]):
        share = left * mass[s] / left_mass
        allocation[s] = min(float(counts[s]), share)
        left, left_mass = left - allocation[s], left_mass - mass[s]
    return allocation


def leverage_coalitions(num_features: int, budget: int, rng: np.random.Generator) -> tuple[list[int], np.ndarray]:
    """About `budget` coalitions besides the empty and the full one, as bit masks (bit i: feature i kept), with
    their least-squares weights: complementary pairs drawn without replacement, each size class's count the
    expected one of `size_allocation` (its fraction drawn), weighted by the Shapley kernel over their inclusion
    probability."""
    full = (1 << num_features) - 1
    masks: list[int] = []
    weights: list[float] = []
    counts = pair_counts(num_features)
    for size, expected in size_allocation(num_features, budget / 2).items():
        half, count = 2 * size == num_features, counts[size]
        drawn = int(expected) + int(rng.random() < expected - int(expected))
        if drawn == count:
            chosen = [sum(1 << i for i in kept) for kept in itertools.combinations(range(num_features), size)]
            chosen = [m for m in chosen if m & 1] if half else chosen
        else:
            found: dict[int, None] = {}
            while len(found) < drawn:
                mask = int(sum(1 << int(i) for i in rng.choice(num_features, size, replace=False)))
                found[mask if not half or mask & 1 else full ^ mask] = None
            chosen = list(found)
        inclusion = expected / count
        for mask in chosen:
            for member in (mask, full ^ mask):
                kept = member.bit_count()
                weight = 1 / (math.comb(num_features, kept) * kept * (num_features - kept))
                masks.append(member)
                weights.append(weight / inclusion)
    return masks, np.asarray(weights)


def projected_regression(
    num_features: int,
    masks: Sequence[int],
    weights: np.ndarray,
    outputs: np.ndarray,
    empty: np.ndarray,
    full: np.ndarray,
) -> np.ndarray:
    """Shapley values, shape (outputs, num_features): the weighted least-squares fit of the coalitions' `outputs`
    (one row per mask) by an additive game whose values sum to full − empty exactly, the constraint projected out
    (Musco & Witter, 2025); with every coalition at the Shapley kernel's weights the fit is the exact Shapley values."""
    even = (full - empty) / num_features
    if not len(masks):
        return np.repeat(even[:, None], num_features, axis=1)
    kept = (np.asarray(masks)[:, None] >> np.arange(num_features) & 1).astype(float)
    projection = np.eye(num_features) - 1 / num_features
    root = np.sqrt(weights)[:, None]
    residual = outputs - empty - kept.sum(axis=1, keepdims=True) * even
    solution, *_ = np.linalg.lstsq(kept @ projection * root, residual * root, rcond=None)
    return (even + projection @ solution).T


ESTIMATORS = ("leverage", "sampling", "antithetic", "orthogonal")
PERMUTATIONS = {"antithetic": antithetic_permutations, "orthogonal": orthogonal_permutations}
"""The permutation generator of each permutation estimator but captum's own ("sampling")."""


class Attribution:
    """One Shapley value estimate of a layout's outputs over its question tokens, in two passes: the first records
    the coalitions its seeded estimator needs, the second (after `score_recorded`) reads them. Estimates that share a
    `forward` (of the same layout) share its scored coalitions."""

    def __init__(
        self,
        engine: Engine,
        lay: AttributionLayout,
        label_index: int,
        *,
        baseline_id: int,
        n_samples: int,
        seed: int,
        estimator: str = "sampling",
        forward: CoalitionForward | None = None,
    ) -> None:
        self.forward = forward or CoalitionForward(engine, lay, label_index)
        self.baseline_id, self.n_samples, self.seed, self.estimator = baseline_id, n_samples, seed, estimator

    def record(self) -> None:
        """The first pass: note the coalitions the permutations need."""
        self.forward.recording = True
        try:
            self._run()
        finally:
            self.forward.recording = False

    def values(self) -> np.ndarray:
        """Shapley values, shape (1 + T, n_question_tokens): row 0 for the log-odds of ŷ, then one row per
        explanation token (any coalition not scored yet is scored first)."""
        return self._run()

    def _run(self) -> np.ndarray:
        if self.estimator == "leverage":
            return self._leverage()
        try:
            from captum.attr import ShapleyValueSampling
        except ImportError:
            raise ImportError(
                "CC-SHAP estimates Shapley values with captum: pip install 'recoe-causaldiag[attribution]'"
            ) from None
        lay = self.forward.layout
        sampler = ShapleyValueSampling(self.forward)
        if self.estimator in PERMUTATIONS:
            sampler.permutation_generator = PERMUTATIONS[self.estimator]
        inputs = torch.tensor([lay.question], dtype=torch.long)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            values = sampler.attribute(
                inputs,
                baselines=torch.full_like(inputs, self.baseline_id),
                n_samples=self.n_samples,
                perturbations_per_eval=len(lay.question),
            )
        return values[0].double().numpy()

    def _leverage(self) -> np.ndarray:
        """Leverage SHAP with a budget of `n_samples` × the question's tokens coalitions (what as many permutations
        would cost), besides the empty and the full one."""
        question = self.forward.layout.question
        n = len(question)
        masks, weights = leverage_coalitions(n, self.n_samples * n, np.random.default_rng(self.seed))
        rows = [
            [q if mask >> i & 1 else self.baseline_id for i, q in enumerate(question)]
            for mask in (0, (1 << n) - 1, *masks)
        ]
        outputs = self.forward(torch.tensor(rows, dtype=torch.long)).double().numpy()
        return projected_regression(n, masks, weights, outputs[2:], outputs[0], outputs[1])


def attributions(
    engine: Engine,
    lay: AttributionLayout,
    label_index: int,
    *,
    baseline_id: int,
    n_samples: int,
    seed: int,
    estimator: str = "sampling",
) -> np.ndarray:
    """Shapley values of one layout, shape (1 + T, n_question_tokens): row 0 for the log-odds of ŷ, then one row per
    explanation token."""
    attribution = Attribution(
        engine, lay, label_index, baseline_id=baseline_id, n_samples=n_samples, seed=seed, estimator=estimator
    )
    attribution.record()
    score_recorded(engine, [attribution.forward])
    return attribution.values()


def cc_shap_score(prediction: np.ndarray, explanation: np.ndarray) -> float:
    """1 − cosine distance between the prediction's attribution vector (n,) and the explanation's profile: the
    mean over its tokens of each token's attribution vector (rows of (T, n)) divided by its L1 norm.
    NaN when undefined: no features or explanation tokens, or an all-zero vector."""
    prediction, explanation = np.asarray(prediction, float), np.asarray(explanation, float)
    if prediction.size == 0 or explanation.shape[0] == 0 or not np.abs(prediction).sum() > 0:
        return float("nan")
    norms = np.abs(explanation).sum(axis=1)
    if not (norms > 0).all():
        return float("nan")
    profile = (explanation / norms[:, None]).mean(axis=0)
    if not np.abs(profile).sum() > 0:
        return float("nan")
    return float(1.0 - distance.cosine(prediction / np.abs(prediction).sum(), profile))


def post_hoc_layout(engine: Engine, instance: Instance, answer: int) -> AttributionLayout:
    """The CC-SHAP post-hoc prompt holding the answer (Fig. 13), split for attribution; ŷ is read where the answer
    stands, after the direct prompt it repeats."""
    prompt = prompts.post_hoc(
        instance.edits,
        instance.question,
        instance.choices[answer],
        instance.explanation,
        request=prompts.CC_SHAP_POSTHOC_REQUEST,
    )
    return attribution_layout(
        engine,
        prompt,
        instance.question,
        instance.explanation,
        instance.choices,
        engine.encode(prompts.direct(instance.edits, instance.question)),
    )


def cot_layouts(engine: Engine, instance: Instance) -> tuple[AttributionLayout, AttributionLayout]:
    """The direct prompt (for ŷ) and the CoT prompt (Fig. 12, for the explanation), each split for attribution."""
    return (
        attribution_layout(
            engine, prompts.direct(instance.edits, instance.question), instance.question, "", instance.choices
        ),
        attribution_layout(
            engine,
            prompts.cot(instance.edits, instance.question, instance.explanation),
            instance.question,
            instance.explanation,
            instance.choices,
        ),
    )


@register_metric
class CCShap(Metric):
    """CC-SHAP with Shapley values estimated by `estimator` ("leverage", or the permutation estimators
    "orthogonal", "antithetic" and "sampling") at a budget of `n_samples` (permutations, or as many permutations'
    coalitions), at least `long_question_samples` for a question of more than 10 tokens (`budget`), seeded by
    `seed`; masked question tokens are replaced by `baseline` (one token for the model);
    `select` names the variants to compute (both by default; each costs about `n_samples` × question-length forwards
    per instance)."""

    name = "cc_shap"
    explanation_type = "post-hoc"
    pairs_per_checkpoint = 2  # the capable model on 2 CPU cores: up to about 6 min per pair for both variants
    description = "cosine similarity of question-token Shapley values for the prediction and for the explanation"
    title = "CC-SHAP"
    long_description = (
        "CC-SHAP (Parcalabescu & Frank, 2023): 1 − cosine distance between the Shapley values of the "
        "question tokens for the model's prediction and for its explanation (post-hoc or chain of "
        "thought)."
    )
    citation = """@inproceedings{parcalabescu2024measuring,
  title={On Measuring Faithfulness or Self-consistency of Natural Language Explanations},
  author={Parcalabescu, Letitia and Frank, Anette}, booktitle={Proceedings of ACL}, year={2024}
}"""
    evaluate_options = ("n_samples", "long_question_samples", "seed", "estimator")
    legacy_option_values = {"long_question_samples": 1}
    options_doc = """
    n_samples (int, optional): the budget per attribution: permutations, or for "leverage" n_samples × the
        question's tokens coalitions (what as many permutations cost). Default: 6.
    long_question_samples (int, optional): the least budget for a question of more than 10 tokens, beyond the
        exact study's reach: there Leverage SHAP at 6 spread 1.4 times as much from seed to seed as the original
        code's 16 permutations, and at 16 half as much (22 and 10 explanations of 16-40 question tokens;
        bench/cc_shap_long_questions.py). Default: 16.
    seed (int, optional): seed of the permutations or coalitions. Default: 0.
    estimator (str, optional): "leverage" (Leverage SHAP: complementary pairs of coalitions, an equal share at
        every size, and the Kernel SHAP regression with efficiency exact), "orthogonal" (antithetic pairs of
        permutations along the orthogonal directions of a random basis), "antithetic" (each permutation followed by
        its reverse) or "sampling" (independent random permutations, captum's and the original code's). Default:
        "leverage": at n_samples 6 its error against the exact Shapley values is 15% below that of 8 orthogonal
        permutations, the default before it, at 90% of their forwards, and 16% below 16 independent permutations'
        at 55% of theirs (bench/cc_shap_convergence.py).
    Only the requested variant is computed (CC-SHAP costs about n_samples × question-length forwards per input).
"""
    variant_option = "select"

    def __init__(
        self,
        n_samples: int = 6,
        seed: int = 0,
        baseline: str = "...",
        select: Sequence[str] = VARIANTS,
        estimator: str = "leverage",
        long_question_samples: int = 16,
    ) -> None:
        for option, value in (("n_samples", n_samples), ("long_question_samples", long_question_samples)):
            if value < 1:
                raise ValueError(f"{option} must be >= 1, got {value}")
        if not select or set(select) - set(VARIANTS):
            raise ValueError(f"select must name some of {list(VARIANTS)}, got {list(select)}")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {list(ESTIMATORS)}, got {estimator!r}")
        self.n_samples, self.seed, self.baseline, self.estimator = n_samples, seed, baseline, estimator
        self.long_question_samples = long_question_samples
        self._variants = tuple(v for v in VARIANTS if v in select)

    def budget(self, question_tokens: int) -> int:
        """The budget of an attribution over a question of `question_tokens` tokens: `n_samples`, and at least
        `long_question_samples` beyond the exact study's reach (`EXACT_STUDY_TOKENS`)."""
        if question_tokens <= EXACT_STUDY_TOKENS:
            return self.n_samples
        return max(self.n_samples, self.long_question_samples)

    @property
    def variants(self) -> tuple[str, ...]:
        return self._variants

    def recorded_plans(self, instances: Sequence[Instance], engine: Engine) -> list[dict[str, Attribution | None]]:
        """Each instance's attributions by role (`_plan`), their coalitions recorded and not yet scored: what
        scoring the instances will run (`CoalitionForward.requests`), from the model's direct answers alone."""
        baseline = engine.lm.encode(self.baseline, continuation=True)
        if len(baseline) != 1:
            raise ValueError(f"baseline {self.baseline!r} is {len(baseline)} tokens for {engine.lm.name} (needs one)")
        probs = engine.label_probs([label_request(i) for i in instances], desc=self.name)
        plans = [self._plan(engine, i, int(np.argmax(p)), baseline[0]) for i, p in zip(instances, probs)]
        attributions = [a for plan in plans for a in plan.values() if a is not None]
        for attribution in tqdm(attributions, desc=f"{self.name} permutations", disable=not engine.progress):
            attribution.record()
        return plans

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        plans = self.recorded_plans(instances, engine)
        score_recorded(engine, [a.forward for plan in plans for a in plan.values() if a is not None])
        scores = {v: np.full(len(instances), np.nan) for v in self.variants}
        for k, plan in enumerate(plans):
            values = {role: a.values() for role, a in plan.items() if a is not None}
            for variant, value in self._scores(values).items():
                scores[variant][k] = value
        return scores

    def _plan(self, engine: Engine, instance: Instance, answer: int, baseline_id: int) -> dict[str, Attribution | None]:
        """The attributions one instance needs, by role: "post_hoc" (prediction and explanation in one prompt),
        "prediction" (the direct prompt, for the CoT variant when post_hoc is not computed) and "cot" (the CoT
        explanation). None where the variant is undefined: no question or explanation tokens, or a CoT prompt that
        splits the question into a different number of tokens than the direct prompt (its features would not
        align)."""

        def attribution(lay: AttributionLayout) -> Attribution:
            return Attribution(
                engine,
                lay,
                answer,
                baseline_id=baseline_id,
                n_samples=self.budget(len(lay.question)),
                seed=self.seed,
                estimator=self.estimator,
            )

        plan: dict[str, Attribution | None] = {}
        if "post_hoc" in self.variants:
            lay = post_hoc_layout(engine, instance, answer)
            plan["post_hoc"] = attribution(lay) if lay.question and lay.explanation_ids else None
        if "cot" in self.variants:
            predicted, explained = cot_layouts(engine, instance)
            usable = predicted.question and explained.explanation_ids
            plan["cot"] = (
                attribution(explained) if usable and len(predicted.question) == len(explained.question) else None
            )
            if plan["cot"] is not None and plan.get("post_hoc") is None:
                plan["prediction"] = attribution(predicted)
        return plan

    def _scores(self, values: dict[str, np.ndarray]) -> dict[str, float]:
        """One instance's CC-SHAP per selected variant from its attributions (NaN where a variant has none). The
        prediction's attribution is the direct prompt's, which the post-hoc prompt repeats: computed once for both
        variants."""
        found = {}
        if "post_hoc" in values:
            found["post_hoc"] = cc_shap_score(values["post_hoc"][0], values["post_hoc"][1:])
        if "cot" in values:
            prediction = values["post_hoc"][0] if "post_hoc" in values else values["prediction"][0]
            found["cot"] = cc_shap_score(prediction, values["cot"][1:])
        return {variant: found.get(variant, float("nan")) for variant in self.variants}
