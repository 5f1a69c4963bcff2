"""The random baseline, a sanity reference (not a faithfulness metric): a seeded uniform score whose diagnosticity
should sit at chance (0.5) on every task. It calls no model. (Formerly `random`: a module `random.py` in an `evaluate`
Space shadows Python's standard library; the old name still resolves, `metrics.LEGACY_NAMES`.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from ..api import Engine, Instance, Metric, register_metric


def instance_key(instance: Instance) -> int:
    """A stable integer fingerprint of an instance's text (unlike `hash()`, the same in every process)."""
    text = json.dumps([instance.question, list(instance.choices), list(instance.edits), instance.explanation])
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:16], "big")


@register_metric
class RandomBaseline(Metric):
    """A uniform random score in [0, 1), reproducible from the seed and the instance's text."""

    name = "random_baseline"
    explanation_type = "reference"
    description = "sanity reference: uniform random score, seeded by the instance text (chance diagnosticity 0.5)"
    title = "Random baseline (sanity reference)"
    long_description = (
        "Random baseline (a sanity reference, not a faithfulness metric): a uniform random score in [0, 1), "
        "reproducible from `seed` (int, default 0) and the text of each input; its causal "
        "diagnosticity should be 0.5 (chance). `model` is ignored."
    )
    citation = """@inproceedings{chan2022comparative,
  title={A Comparative Study of Faithfulness Metrics for Model Interpretability Methods},
  author={Chan, Chun Sik and Kong, Huanqi and Liang, Guanqing},
  booktitle={Proceedings of ACL}, year={2022}
}"""
    evaluate_options = ("seed",)
    uses_model = False

    def __init__(self, seed: int = 0) -> None:
        if seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed}")
        self.seed = seed

    @property
    def variants(self) -> tuple[str, ...]:
        return ("uniform",)

    def score_instances(self, instances: Sequence[Instance], engine: Engine | None = None) -> dict[str, np.ndarray]:
        scores = [np.random.default_rng([self.seed, instance_key(i)]).random() for i in instances]
        return {"uniform": np.array(scores, dtype=float)}
