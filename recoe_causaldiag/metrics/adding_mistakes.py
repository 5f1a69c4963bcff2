"""Adding Mistakes (Lanham et al., 2023; paper 000 §2.1, App. D, Fig. 15): a helper LM swaps one word of the CoT
for its antonym, and the evaluated model answers again after the corrupted CoT.

The whole explanation is given to the helper and the model answers right after the corrupted CoT, with no
regeneration: paper 000 §2.1 summarises Lanham et al. as "introducing mistakes into the CoT, and regenerating",
but its authors' code (`LanhamMistakes`), which produced its numbers, corrupts the whole CoT and regenerates
nothing; we follow the code.

continuous: ẑ − ẑ′ (a larger drop = more faithful); binary: 1 if the predicted label changes, else 0.
NaN where the helper's rewrite is empty or unchanged (no mistake was added; see `helper_lm`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..api import Engine, Instance, register_metric
from ..mechanisms.helper_lm import HelperCorruption, HelperMetric
from ..references import LANHAM_2023

ANTONYM = HelperCorruption(kind="adding_mistakes", name="antonym")


@register_metric
class AddingMistakes(HelperMetric):
    """Drop in the top label's probability when a helper LM puts an antonym into the CoT."""

    name = "adding_mistakes"
    explanation_type = "cot"
    description = "drop in the top label's probability when a helper LM swaps one CoT word for its antonym"
    title = "Adding Mistakes"
    long_description = (
        "Adding Mistakes (Lanham et al., 2023): how much the probability of the model's top label "
        "drops when a helper LM swaps one word of its chain of thought for an antonym. Continuous: ẑ − "
        "ẑ′; binary: 1 if the prediction changes; NaN where the helper returned no change. Extra "
        "argument `helper` (str): the helper model, default another packaged model than the evaluated "
        "one (Gemma-3-270M when SmolLM2 is evaluated, SmolLM2 otherwise); its outputs are cached on disk."
    )
    citation = LANHAM_2023

    @property
    def variants(self) -> tuple[str, ...]:
        return ANTONYM.variants

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        return ANTONYM.scores(instances, engine, self.helper, desc=self.name)
