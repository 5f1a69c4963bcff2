"""One mechanism for the CoT-corruption metrics (Lanham et al., 2023; paper 000 §2.1): score the top label
ẑ with the explanation, corrupt the explanation, score the same label again (ẑ′).

continuous: ẑ − ẑ′ (1 − (ẑ − ẑ′) when a change means unfaithful, as for Paraphrasing);
binary: 1 if the predicted label changed (unchanged, when inverted), else 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..api import Engine, Instance, Metric
from .prompting import label_request


@dataclass(frozen=True)
class Corruption:
    """A named way of corrupting an explanation."""

    name: str
    apply: Callable[[str], str]


def corruption_scores(
    instances: Sequence[Instance],
    engine: Engine,
    corruptions: Sequence[Corruption],
    *,
    invert: bool = False,
    desc: str = "corruptions",
) -> dict[str, np.ndarray]:
    """Continuous and binary scores of every corruption for every instance; NaN for a blank explanation, which
    has nothing to corrupt."""
    corrupted = {c.name: [c.apply(i.explanation) for i in instances] for c in corruptions}
    return rewrite_scores(instances, engine, corrupted, invert=invert, desc=desc)


def rewrite_scores(
    instances: Sequence[Instance],
    engine: Engine,
    rewrites: Mapping[str, Sequence[str]],
    *,
    invert: bool = False,
    desc: str = "corruptions",
) -> dict[str, np.ndarray]:
    """`corruption_scores` for explanations already rewritten: name → one rewritten explanation per instance."""
    n = len(instances)
    blank = np.array([not i.explanation.strip() for i in instances], dtype=bool)
    requests = [label_request(i, i.explanation) for i in instances]
    requests += [
        label_request(i, text) for texts in rewrites.values() for i, text in zip(instances, texts, strict=True)
    ]
    probs = engine.label_probs(requests, desc=desc)
    original = np.stack(probs[:n])
    top = original.argmax(axis=1)
    z = original[np.arange(n), top]
    scores = {}
    for k, name in enumerate(rewrites):
        corrupted = np.stack(probs[n * (k + 1) : n * (k + 2)])
        z_prime = corrupted[np.arange(n), top]
        changed = (corrupted.argmax(axis=1) != top).astype(float)
        scores[f"{name}-continuous"] = np.where(blank, np.nan, 1.0 - (z - z_prime) if invert else z - z_prime)
        scores[f"{name}-binary"] = np.where(blank, np.nan, 1.0 - changed if invert else changed)
    return scores


def variant_names(corruptions: Sequence[Corruption]) -> tuple[str, ...]:
    return tuple(f"{c.name}-{scale}" for c in corruptions for scale in ("continuous", "binary"))


class CorruptionMetric(Metric):
    """A metric that is a set of named corruptions: each one's continuous and binary scores are its variants."""

    corruptions: ClassVar[tuple[Corruption, ...]]

    @property
    def variants(self) -> tuple[str, ...]:
        return variant_names(self.corruptions)

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        return corruption_scores(instances, engine, self.corruptions, desc=self.name)
